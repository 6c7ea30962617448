//! md's RAID 4/5/6 parity layouts: their names and numbers, and which member
//! holds P, Q and each data chunk of one stripe.
//!
//! It decides placement for every `ALGORITHM_*` number md runs RAID 4/5/6 with
//! (0-5), and for the "-6" layouts (16-20) md's RAID 5 to RAID 6 conversion
//! uses: the RAID 5 layout over the first n-1 members, with Q always on the
//! last member (what an array is in while `mdadm --grow --level=6` reshapes
//! it, and what it stays in after a conversion with `--layout=preserve`), and
//! with them maps a parity geometry's stripes and array bytes onto members
//! (`Geometry::stripe`, `parity_location`). It must never do I/O, and never
//! place a "-6" layout at a level other than RAID 6 (md runs them only
//! there; [`crate::Geometry`] refuses the rest).

use crate::{Layout, Level, Location, StripeMap};
use raidlab_core::{Error, Result};

/// RAID 4/5/6 parity placement, with md's numeric layout values
/// (`ALGORITHM_LEFT_ASYMMETRIC` = 0 ... `ALGORITHM_PARITY_N` = 5, and the
/// RAID 6 conversion layouts `ALGORITHM_LEFT_ASYMMETRIC_6` = 16 ...
/// `ALGORITHM_PARITY_0_6` = 20).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum ParityLayout {
    LeftAsymmetric = 0,
    RightAsymmetric = 1,
    LeftSymmetric = 2,
    RightSymmetric = 3,
    ParityFirst = 4,
    ParityLast = 5,
    /// RAID 6 only: left-asymmetric RAID 5 on members 0..n-1, Q on the last.
    LeftAsymmetric6 = 16,
    /// RAID 6 only: right-asymmetric RAID 5 on members 0..n-1, Q on the last.
    RightAsymmetric6 = 17,
    /// RAID 6 only: left-symmetric RAID 5 on members 0..n-1, Q on the last.
    LeftSymmetric6 = 18,
    /// RAID 6 only: right-symmetric RAID 5 on members 0..n-1, Q on the last.
    RightSymmetric6 = 19,
    /// RAID 6 only: parity-first RAID 5 on members 0..n-1, Q on the last.
    ParityFirst6 = 20,
}

pub(crate) const PARITY_LAYOUT_NAMES: &str = "left-asymmetric (la), right-asymmetric (ra), \
     left-symmetric (ls, default), right-symmetric (rs), parity-first (parity-0), \
     parity-last (parity-n)";
pub(crate) const RAID6_LAYOUT_NAMES: &str = "left-asymmetric (la), right-asymmetric (ra), \
     left-symmetric (ls, default), right-symmetric (rs), parity-first (parity-0), \
     parity-last (parity-n), and md's RAID 5 to 6 conversion layouts left-asymmetric-6, \
     right-asymmetric-6, left-symmetric-6, right-symmetric-6, parity-first-6";

impl ParityLayout {
    /// The layouts RAID 5 and RAID 6 both run, in md's numeric order.
    pub const ALL: [ParityLayout; 6] = [
        ParityLayout::LeftAsymmetric,
        ParityLayout::RightAsymmetric,
        ParityLayout::LeftSymmetric,
        ParityLayout::RightSymmetric,
        ParityLayout::ParityFirst,
        ParityLayout::ParityLast,
    ];

    /// md's RAID 5 to 6 conversion layouts ("-6"), RAID 6 only.
    pub const CONVERSION: [ParityLayout; 5] = [
        ParityLayout::LeftAsymmetric6,
        ParityLayout::RightAsymmetric6,
        ParityLayout::LeftSymmetric6,
        ParityLayout::RightSymmetric6,
        ParityLayout::ParityFirst6,
    ];

    /// md's algorithm number (`ALGORITHM_*`).
    pub fn md_value(self) -> u32 {
        self as u32
    }

    /// Decode md's algorithm number: 0..=5, or 16..=20 for the "-6" layouts
    /// (whether the level allows it is [`crate::Geometry`]'s check). md's DDF
    /// layouts (8, 9, 10) are refused by name.
    pub fn from_md(value: u32) -> Result<ParityLayout> {
        if let Some(l) = Self::ALL
            .into_iter()
            .chain(Self::CONVERSION)
            .find(|l| l.md_value() == value)
        {
            return Ok(l);
        }
        let ddf = match value {
            8 => " (md's DDF rotating-zero-restart layout)",
            9 => " (md's DDF rotating-n-restart layout)",
            10 => " (md's DDF rotating-n-continue layout)",
            _ => "",
        };
        Err(Error::invalid(format!(
            "md parity layout {value}{ddf} is not supported (supported: 0 left-asymmetric, \
             1 right-asymmetric, 2 left-symmetric, 3 right-symmetric, 4 parity-first, \
             5 parity-last; RAID 6 also 16 left-asymmetric-6, 17 right-asymmetric-6, \
             18 left-symmetric-6, 19 right-symmetric-6, 20 parity-first-6)"
        )))
    }

    /// Parse a layout name as mdadm accepts it (long names, la/ra/ls/rs and the
    /// "-6" names; also "default" and raidlab's short forms parity-0 / parity-n).
    pub fn from_name(s: &str) -> Result<ParityLayout> {
        let lower = s.trim().to_ascii_lowercase();
        let layout = match lower.as_str() {
            "left-asymmetric" | "la" => ParityLayout::LeftAsymmetric,
            "right-asymmetric" | "ra" => ParityLayout::RightAsymmetric,
            "left-symmetric" | "ls" | "default" => ParityLayout::LeftSymmetric,
            "right-symmetric" | "rs" => ParityLayout::RightSymmetric,
            "parity-first" | "parity-0" => ParityLayout::ParityFirst,
            "parity-last" | "parity-n" => ParityLayout::ParityLast,
            "left-asymmetric-6" => ParityLayout::LeftAsymmetric6,
            "right-asymmetric-6" => ParityLayout::RightAsymmetric6,
            "left-symmetric-6" => ParityLayout::LeftSymmetric6,
            "right-symmetric-6" => ParityLayout::RightSymmetric6,
            "parity-first-6" => ParityLayout::ParityFirst6,
            _ => {
                return Err(Error::invalid(format!(
                    "unknown parity layout '{s}'; valid layouts: {RAID6_LAYOUT_NAMES}"
                )))
            }
        };
        Ok(layout)
    }

    /// The name `mdadm --examine` prints.
    pub fn name(self) -> &'static str {
        match self {
            ParityLayout::LeftAsymmetric => "left-asymmetric",
            ParityLayout::RightAsymmetric => "right-asymmetric",
            ParityLayout::LeftSymmetric => "left-symmetric",
            ParityLayout::RightSymmetric => "right-symmetric",
            ParityLayout::ParityFirst => "parity-first",
            ParityLayout::ParityLast => "parity-last",
            ParityLayout::LeftAsymmetric6 => "left-asymmetric-6",
            ParityLayout::RightAsymmetric6 => "right-asymmetric-6",
            ParityLayout::LeftSymmetric6 => "left-symmetric-6",
            ParityLayout::RightSymmetric6 => "right-symmetric-6",
            ParityLayout::ParityFirst6 => "parity-first-6",
        }
    }

    /// For a "-6" layout, the RAID 5 layout it keeps on the first n-1 members;
    /// `None` for the others.
    pub fn raid5_part(self) -> Option<ParityLayout> {
        match self {
            ParityLayout::LeftAsymmetric6 => Some(ParityLayout::LeftAsymmetric),
            ParityLayout::RightAsymmetric6 => Some(ParityLayout::RightAsymmetric),
            ParityLayout::LeftSymmetric6 => Some(ParityLayout::LeftSymmetric),
            ParityLayout::RightSymmetric6 => Some(ParityLayout::RightSymmetric),
            ParityLayout::ParityFirst6 => Some(ParityLayout::ParityFirst),
            _ => None,
        }
    }

    /// The RAID 6 layout md converts a RAID 5 in this layout to when it adds
    /// Q on a new last member (mdadm's `analyse_change`): the "-6" twin, or
    /// parity-last itself (md's PARITY_N_6 is PARITY_N: P and Q both last).
    /// A "-6" layout is its own.
    pub fn raid6_conversion(self) -> ParityLayout {
        match self {
            ParityLayout::LeftAsymmetric => ParityLayout::LeftAsymmetric6,
            ParityLayout::RightAsymmetric => ParityLayout::RightAsymmetric6,
            ParityLayout::LeftSymmetric => ParityLayout::LeftSymmetric6,
            ParityLayout::RightSymmetric => ParityLayout::RightSymmetric6,
            ParityLayout::ParityFirst => ParityLayout::ParityFirst6,
            other => other,
        }
    }

    /// Whether md runs this layout only at RAID 6 (the "-6" layouts).
    pub fn raid6_only(self) -> bool {
        self.raid5_part().is_some()
    }

    /// Members of stripe `stripe` over `n` members: data chunks in logical
    /// order (into `data`, which is cleared first: the planner reuses one
    /// vector per stripe instead of allocating), P, and (RAID 6) Q.
    pub(crate) fn place(
        self,
        raid6: bool,
        n: usize,
        stripe: u64,
        data: &mut Vec<usize>,
    ) -> (usize, Option<usize>) {
        data.clear();
        if let Some(base) = self.raid5_part() {
            // A conversion layout is a RAID 5 of the first n-1 members (rotating
            // over n-1, not n) with Q added as the last member.
            debug_assert!(raid6, "{} placed outside RAID 6", self.name());
            let p = base.place_one_parity(n - 1, stripe, data);
            return (p, Some(n - 1));
        }
        if !raid6 {
            let p = self.place_one_parity(n, stripe, data);
            return (p, None);
        }
        let dd = n - 2;
        let r = (stripe % n as u64) as usize;
        // RAID 6: Q follows P (wrapping to member 0); data fills the rest.
        let (p, q) = match self {
            ParityLayout::LeftAsymmetric | ParityLayout::LeftSymmetric => {
                let p = n - 1 - r;
                (p, (p + 1) % n)
            }
            ParityLayout::RightAsymmetric | ParityLayout::RightSymmetric => (r, (r + 1) % n),
            ParityLayout::ParityFirst => (0, 1),
            _ => (dd, dd + 1),
        };
        // The layout is matched once, not per chunk, and member numbers wrap
        // by a subtraction, not a division (the planner maps a stripe for
        // every request).
        match self {
            // (p + 2 + i) mod n: from after Q, wrapping.
            ParityLayout::LeftSymmetric | ParityLayout::RightSymmetric => {
                let start = wrap(p + 2, n);
                data.extend((0..dd).map(|i| wrap(start + i, n)));
            }
            ParityLayout::ParityFirst => data.extend(2..dd + 2),
            ParityLayout::ParityLast => data.extend(0..dd),
            // Asymmetric: data in member order, skipping P and Q.
            _ if p == n - 1 => data.extend(1..dd + 1),
            _ => data.extend((0..dd).map(|i| if i >= p { i + 2 } else { i })),
        }
        (p, Some(q))
    }

    /// One parity block over `n` members (RAID 4/5, or the RAID 5 part of a
    /// "-6" layout): data either skips over P (asymmetric, fixed order) or
    /// starts right after it and wraps (symmetric). Rotation is stripe mod n.
    fn place_one_parity(self, n: usize, stripe: u64, data: &mut Vec<usize>) -> usize {
        let dd = n - 1;
        let r = (stripe % n as u64) as usize;
        let p = match self {
            ParityLayout::LeftAsymmetric | ParityLayout::LeftSymmetric => dd - r,
            ParityLayout::RightAsymmetric | ParityLayout::RightSymmetric => r,
            ParityLayout::ParityFirst => 0,
            _ => dd,
        };
        match self {
            // (p + 1 + i) mod n: from after P, wrapping.
            ParityLayout::LeftSymmetric | ParityLayout::RightSymmetric => {
                data.extend((0..dd).map(|i| wrap(p + 1 + i, n)));
            }
            // Member order, skipping P.
            _ => data.extend((0..dd).map(|i| i + usize::from(i >= p))),
        }
        p
    }
}

/// `x mod n` for `x < 2n`.
pub(crate) fn wrap(x: usize, n: usize) -> usize {
    if x >= n {
        x - n
    } else {
        x
    }
}

/// Where a parity level's geometry puts each stripe's blocks.
impl crate::Geometry {
    fn parity_layout(&self) -> ParityLayout {
        match (self.level, self.layout) {
            (Level::Raid4, _) => ParityLayout::ParityLast,
            (_, Layout::Parity(p)) => p,
            _ => ParityLayout::ParityLast,
        }
    }

    /// Where array byte `at` of a parity level lives: the data member holding it,
    /// the member holding its stripe's P, and the byte's offset on both.
    pub fn parity_location(&self, at: u64) -> (usize, usize, u64) {
        let dd = self.data_disks() as u64;
        let chunk = at / self.chunk_bytes;
        let stripe = chunk / dd;
        let map = self.stripe(stripe);
        (
            map.data[(chunk % dd) as usize],
            map.p,
            stripe * self.chunk_bytes + at % self.chunk_bytes,
        )
    }

    /// Where data, P and Q of stripe `stripe` live (parity levels only; for other
    /// levels this is a debug assertion and returns an empty map).
    ///
    /// Member offset of every block of the stripe is `stripe * chunk_bytes`.
    pub fn stripe(&self, stripe: u64) -> StripeMap {
        let mut map = StripeMap {
            data: Vec::new(),
            p: 0,
            q: None,
            slot: Vec::new(),
        };
        self.stripe_into(stripe, &mut map);
        map
    }

    /// [`Geometry::stripe`] written into `map`, whose vectors are reused: the
    /// planner maps a stripe per request, and allocating two vectors each
    /// time was a tenth of a simulated read's cost.
    ///
    /// [`Geometry::stripe`]: crate::Geometry::stripe
    pub fn stripe_into(&self, stripe: u64, map: &mut StripeMap) {
        debug_assert!(self.is_parity(), "stripe() called on {}", self.level);
        map.slot.clear();
        if !self.is_parity() {
            map.data.clear();
            map.p = 0;
            map.q = None;
            return;
        }
        let n = self.raid_disks;
        let (p, q) =
            self.parity_layout()
                .place(self.level == Level::Raid6, n, stripe, &mut map.data);
        map.p = p;
        map.q = q;
        let Some(q) = q else {
            map.slot.extend(0..map.data.len());
            return;
        };
        // md feeds the syndrome starting at the member after Q (member 0 when Q is
        // the last member) and walks upwards, wrapping, skipping P and Q; a data
        // block's slot is its position in that walk.
        let first = if q == n - 1 { 0 } else { q + 1 };
        // Distances from `first` going up, wrapping (a subtraction, not a
        // division per member).
        let dist = |x: usize| wrap(x + n - first, n);
        let (dp, dq) = (dist(p), dist(q));
        map.slot.extend(map.data.iter().map(|&d| {
            let dist = dist(d);
            dist - usize::from(dp < dist) - usize::from(dq < dist)
        }));
    }

    /// Location of logical byte `logical` on a parity level, and bytes to the next
    /// chunk boundary (or the end of the array).
    pub(crate) fn parity_locate(&self, logical: u64) -> (Location, u64) {
        let cb = self.chunk_bytes;
        let chunk = logical / cb;
        let dd = self.data_disks() as u64;
        let stripe = chunk / dd;
        let map = self.stripe(stripe);
        let member = map.data[(chunk % dd) as usize];
        let within = logical % cb;
        let run = (cb - within).min(self.array_bytes() - logical);
        (
            Location {
                member,
                offset: stripe * cb + within,
            },
            run,
        )
    }
}
