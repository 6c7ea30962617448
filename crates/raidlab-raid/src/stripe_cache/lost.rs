//! Array ranges whose acknowledged writes the stripe cache could not write to
//! the members. md completes a write only once its stripe is on the members,
//! so a write that fails there fails to its writer; the stripe cache
//! acknowledges first (as a disk's volatile write cache does) and reports the
//! failure at the next flush. Until then, and after it, the members hold
//! neither the new bytes nor, perhaps, the old: a read of such a range must
//! fail rather than answer what the members hold. It decides which bytes are
//! lost and when a later write makes them good again; it never decides what a
//! read or a write does below (the cache and the array do).

/// Disjoint, sorted half-open ranges of array bytes, and why the first was lost.
#[derive(Debug, Default)]
pub(super) struct Lost {
    ranges: Vec<(u64, u64)>,
    cause: String,
}

impl Lost {
    pub(super) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// `[a, b)` lost because `cause` (the first cause is kept for the error).
    pub(super) fn add(&mut self, a: u64, b: u64, cause: &str) {
        if a >= b {
            return;
        }
        if self.ranges.is_empty() {
            self.cause = cause.to_string();
        }
        let (mut a, mut b) = (a, b);
        let mut kept = Vec::with_capacity(self.ranges.len() + 1);
        for &(x, y) in &self.ranges {
            if y < a || b < x {
                kept.push((x, y));
            } else {
                a = a.min(x);
                b = b.max(y);
            }
        }
        kept.push((a, b));
        kept.sort_unstable();
        self.ranges = kept;
    }

    /// `[a, b)` was written again (and the write acknowledged): good again.
    pub(super) fn remove(&mut self, a: u64, b: u64) {
        if self.ranges.is_empty() || a >= b {
            return;
        }
        let mut kept = Vec::with_capacity(self.ranges.len() + 1);
        for &(x, y) in &self.ranges {
            if y <= a || b <= x {
                kept.push((x, y));
                continue;
            }
            if x < a {
                kept.push((x, a));
            }
            if b < y {
                kept.push((b, y));
            }
        }
        self.ranges = kept;
    }

    /// The lost parts of `[a, b)`.
    pub(super) fn within(&self, a: u64, b: u64) -> Vec<(u64, u64)> {
        self.ranges
            .iter()
            .filter(|&&(x, y)| x < b && a < y)
            .map(|&(x, y)| (x.max(a), y.min(b)))
            .collect()
    }

    pub(super) fn cause(&self) -> &str {
        &self.cause
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_split_and_clip() {
        let mut l = Lost::default();
        l.add(100, 200, "first");
        l.add(300, 400, "second");
        l.add(150, 320, "third");
        assert_eq!(l.within(0, 1000), vec![(100, 400)]);
        assert_eq!(l.cause(), "first");
        l.remove(200, 250);
        assert_eq!(l.within(0, 1000), vec![(100, 200), (250, 400)]);
        assert_eq!(l.within(190, 260), vec![(190, 200), (250, 260)]);
        assert!(l.within(200, 250).is_empty());
        l.remove(0, 1000);
        assert!(l.is_empty());
        // Touching ranges merge; an empty one is nothing.
        l.add(10, 20, "a");
        l.add(20, 30, "b");
        l.add(5, 5, "c");
        assert_eq!(l.within(0, 100), vec![(10, 30)]);
    }
}
