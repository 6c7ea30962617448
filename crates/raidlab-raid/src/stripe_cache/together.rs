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
use super::{spans, Below, StripeCache, Why};
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
        let held: Vec<(&Arc<Entry>, task::MutexGuard<'_, Held>)> = entries
            .iter()
            .map(|e| (e, e.state.lock()))
            .filter(|(_, h)| !h.gone)
            .collect();
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
            let out = below.write_together(&pieces);
            for ((&i, &(offset, d)), r) in whose.iter().zip(&pieces).zip(out) {
                if let Some(m) = members {
                    merged[i] += below.reads_for_then(offset, d.len() as u64, m);
                }
                results[i].push(r);
            }
        }
        let mut outcome = Ok(());
        for (((e, mut h), rs), m) in held.into_iter().zip(results).zip(merged) {
            let failed = rs.iter().position(|r| r.is_err());
            let lost = match failed {
                Some(k) => spans(e.stripe * sb, &h.runs[k..]),
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
