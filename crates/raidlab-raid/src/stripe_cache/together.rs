//! A flush's write-out of held stripes side by side: their first held runs
//! as one [`Below::write_together`], then their second ones, and so on, as
//! md's stripe heads go down together.
//!
//! Decides only which held runs go down together (one a stripe in each
//! round, in stripe order) and what each stripe's outcome is. It must never
//! put two runs of one stripe in one round (the write path would merge their
//! plans, and the second's parity would undo the first's), and never writes
//! a stripe's later runs once one of its runs failed.

use super::entries::{Entry, Held};
use super::{Below, StripeCache, Why};
use raidlab_core::{task, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl StripeCache {
    /// Write out `entries` (in stripe order) side by side: their first held
    /// runs as one [`Below::write_together`], then their second ones, and so
    /// on, as md's stripe heads go down together. One after another, a flush
    /// of 33 held stripes on disks that seek waited for 33 read-modify-writes
    /// in turn (0.47 s). A stripe whose run failed is not written further;
    /// the rest of it is lost, as in [`StripeCache::write_out`].
    pub(super) fn write_out_together(
        &self,
        entries: &[Arc<Entry>],
        below: &dyn Below,
    ) -> Result<()> {
        // Locked in stripe order, as every holder of two takes them.
        let mut held: Vec<(&Arc<Entry>, task::MutexGuard<'_, Held>)> = entries
            .iter()
            .map(|e| (e, e.state.lock()))
            .filter(|(_, h)| !h.gone)
            .collect();
        if held.len() < 2 {
            for (e, h) in &mut held {
                self.write_out(e, h, Why::Flushed, below)?;
            }
            return Ok(());
        }
        for (e, _) in &held {
            e.out.store(true, Ordering::Relaxed);
            self.leaving.fetch_add(1, Ordering::AcqRel);
        }
        let sb = self.stripe_bytes;
        let mut results: Vec<Vec<Result<()>>> = held.iter().map(|_| Vec::new()).collect();
        let mut merged = vec![0u64; held.len()];
        let rounds = held.iter().map(|(_, h)| h.runs.len()).max().unwrap_or(0);
        for k in 0..rounds {
            // As a lone write-out counts: the reads each run would need as the
            // members are before the writes.
            let members = below.members_now();
            let mut pieces = Vec::new();
            let mut whose = Vec::new();
            for (i, (e, h)) in held.iter().enumerate() {
                let failed = results[i].last().is_some_and(|r| r.is_err());
                let Some((a, d)) = h.runs.get(k).filter(|_| !failed) else {
                    continue;
                };
                let offset = e.stripe * sb + *a as u64;
                if members.is_none() {
                    merged[i] += below.reads_for(offset, d.len() as u64);
                }
                pieces.push((offset, &d[..]));
                whose.push(i);
            }
            let mut out = Vec::with_capacity(pieces.len());
            for group in groups(&pieces) {
                out.extend(below.write_together(group));
            }
            for ((&i, &(offset, d)), r) in whose.iter().zip(&pieces).zip(out) {
                if let Some(m) = members {
                    merged[i] += below.reads_for_then(offset, d.len() as u64, m);
                }
                results[i].push(r);
            }
        }
        let mut outcome = Ok(());
        for (((e, mut h), rs), m) in held.into_iter().zip(results).zip(merged) {
            let base = e.stripe * sb;
            let failed = rs.iter().position(|r| r.is_err());
            let lost: Vec<(u64, u64)> = match failed {
                Some(k) => h.runs[k..]
                    .iter()
                    .map(|(a, d)| (base + *a as u64, base + (a + d.len()) as u64))
                    .collect(),
                None => Vec::new(),
            };
            let result = match failed {
                Some(k) => rs.into_iter().nth(k).unwrap_or(Ok(())),
                None => Ok(()),
            };
            let r = self.finish_write_out(e, &mut h, Why::Flushed, result, &lost, m, below);
            // After the entry left the map, as in `write_out`.
            self.leaving.fetch_sub(1, Ordering::AcqRel);
            if outcome.is_ok() {
                outcome = r;
            }
        }
        outcome
    }
}

/// Bytes of held runs handed down as one write: the merged plan's copy of
/// them and its scratch buffers stay bounded as the write path's own pieces
/// are (16 MiB), whatever the size of the cache (64 stripes of a RAID 5 of 4
/// with 512 KiB chunks hold 96 MiB).
const TOGETHER_BYTES: usize = 16 << 20;

/// `pieces` in runs of at most [`TOGETHER_BYTES`] (a larger piece alone).
fn groups<'a, 'b>(pieces: &'a [(u64, &'b [u8])]) -> impl Iterator<Item = &'a [(u64, &'b [u8])]> {
    let mut rest = pieces;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let n = rest
            .iter()
            .take_while(|(_, d)| {
                bytes += d.len();
                bytes <= TOGETHER_BYTES
            })
            .count()
            .max(1);
        let (group, tail) = rest.split_at(n);
        rest = tail;
        Some(group)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_runs_go_down_in_groups_of_at_most_16_mib() {
        let big = vec![0u8; 6 << 20];
        let huge = vec![0u8; 20 << 20];
        let pieces: Vec<(u64, &[u8])> = vec![
            (0, &big[..]),
            (1, &big[..]),
            (2, &big[..]),
            (3, &huge[..]),
            (4, &big[..]),
        ];
        let sizes: Vec<Vec<u64>> = groups(&pieces)
            .map(|g| g.iter().map(|(o, _)| *o).collect())
            .collect();
        assert_eq!(sizes, vec![vec![0, 1], vec![2], vec![3], vec![4]]);
        assert_eq!(groups(&[]).count(), 0);
    }
}
