//! md's write-back mode of the journal (raid5-cache's `r5c`): a write is
//! acknowledged once its data pages are in the journal and the journal device
//! is flushed; the stripe stays in the stripe cache and reaches the members
//! later, through the ordinary journaled path (its data and new parity logged,
//! then the members written).
//!
//! This module decides how much of the ring data-only pages may take and
//! where `journal_tail` may move: a stripe whose data is only in the journal
//! (logged, not yet written out) pins the meta block that first logged it, and
//! reclaim never moves the tail past a pinned block. Each pinned stripe keeps
//! room reserved for its write-out (all its data pages, its parity and meta
//! blocks), so a write-out always fits the ring after a reclaim; a data-only
//! write that would eat into that room is refused (`Ok(false)`), and the
//! caller writes out an older stripe first, as md's reclaim flushes cached
//! stripes when the journal runs short.
//!
//! It must never let the tail pass a pinned block, never unpin a stripe
//! before its write-out reached the members, and never log a partial page.

use super::*;
use std::sync::atomic::Ordering;

/// How a journaled array acknowledges writes (md's `journal_mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum JournalMode {
    /// Data and parity are in the journal, then on the members, before the
    /// write is acknowledged (md's default).
    #[default]
    WriteThrough,
    /// Data in the journal is enough; stripes go to the members later.
    WriteBack,
}

impl JournalMode {
    /// md's names, as its sysfs `journal_mode` takes them.
    pub fn name(self) -> &'static str {
        match self {
            JournalMode::WriteThrough => "write-through",
            JournalMode::WriteBack => "write-back",
        }
    }

    pub fn parse(s: &str) -> Result<JournalMode> {
        match s {
            "write-through" => Ok(JournalMode::WriteThrough),
            "write-back" => Ok(JournalMode::WriteBack),
            other => Err(Error::invalid(format!(
                "unknown journal mode {other:?}: use write-through or write-back"
            ))),
        }
    }
}

/// Stripes whose data is in the journal only.
#[derive(Debug, Default)]
pub(crate) struct Pins {
    /// Stripe number -> sequence of the oldest meta block logging its data
    /// since its last write-out.
    pub(super) by_stripe: BTreeMap<u64, u64>,
    /// Sequence -> (ring sector of that meta block, stripes pinning it).
    pub(super) by_seq: BTreeMap<u64, (u64, usize)>,
}

impl Journal {
    /// The mode in force.
    pub fn mode(&self) -> JournalMode {
        if self.write_back.load(Ordering::Acquire) {
            JournalMode::WriteBack
        } else {
            JournalMode::WriteThrough
        }
    }

    /// Set the mode for an array of stripes of `stripe_bytes`. Refuses
    /// write-back when the ring cannot hold a few stripes' write-outs, and
    /// leaving write-back while stripes are pinned (write them out first).
    pub(crate) fn set_mode(&self, mode: JournalMode, stripe_bytes: u64) -> Result<()> {
        let st = self.lock();
        if mode == JournalMode::WriteBack {
            let need = 4 * self.stripe_cost(stripe_bytes) + BLOCK_SECTORS;
            if need > self.ring || stripe_bytes > self.max_piece() {
                return Err(Error::invalid(format!(
                    "the journal's ring holds {} KiB; write-back needs room for at least four stripes' write-outs ({} KiB with {} KiB stripes): give a larger journal device or use write-through",
                    self.ring / 2,
                    need.max(stripe_bytes * 5 / SECTOR) / 2,
                    stripe_bytes / 1024
                ))
                .on_device(self.device.name()));
            }
        } else if !st.pins.by_stripe.is_empty() {
            return Err(Error::invalid(format!(
                "{} stripes are still only in the journal: write them out before leaving write-back",
                st.pins.by_stripe.len()
            ))
            .on_device(self.device.name()));
        }
        self.stripe_bytes.store(stripe_bytes, Ordering::Release);
        self.write_back
            .store(mode == JournalMode::WriteBack, Ordering::Release);
        Ok(())
    }

    /// Stripes whose data is only in the journal now.
    pub fn pinned_stripes(&self) -> u64 {
        self.lock().pins.by_stripe.len() as u64
    }

    /// Ring sectors a stripe's write-out may log: every data page of the
    /// stripe and its parity (one page per parity member and row), and a
    /// meta block for every few pages (a stripe's payloads are split across
    /// meta blocks only between rows).
    fn stripe_cost(&self, stripe_bytes: u64) -> u64 {
        let g = &self.geometry;
        let rows = g.chunk_bytes / PAGE;
        let pages = stripe_bytes / PAGE + rows * g.parity_count() as u64;
        // A data descriptor takes 20 bytes, a parity one 16 + 4 per page:
        // 100 payloads per meta block is below what fits.
        let metas = pages.div_ceil(100) + 1;
        (pages + metas) * BLOCK_SECTORS
    }

    /// Where reclaim may move `journal_tail` to: the oldest meta block a
    /// pinned stripe needs, else the newest meta block (everything before it
    /// is on the members once they are flushed).
    pub(super) fn floor(&self, st: &State) -> u64 {
        match st.pins.by_seq.first_key_value() {
            Some((_, &(pos, _))) => pos,
            None => st.last_meta,
        }
    }

    /// Log the data pages `bytes` of array range `[at, at+len)` (whole
    /// pages, inside stripe `stripe`) as data-only payloads, durably, and pin
    /// the stripe. `Ok(false)`: the ring has no room without writing out a
    /// pinned stripe first; nothing was written.
    pub(crate) fn log_data(
        &self,
        stripe: u64,
        at: u64,
        bytes: &[u8],
        flush_members: &dyn Fn() -> Result<()>,
        run: DeviceRunner<'_>,
    ) -> std::result::Result<bool, Failed> {
        let name = self.device.name();
        if at % PAGE != 0 || bytes.len() as u64 % PAGE != 0 {
            return Err(journal_failed(
                internal("a write-back journal write of part of a page").on_device(name),
            ));
        }
        let mut st = self.lock();
        let enc = self
            .encode_data_only(&st, at, bytes)
            .map_err(|e| journal_failed(e.on_device(name.clone())))?;
        let Some(last_meta) = enc.last_meta else {
            return Ok(true);
        };
        let need = enc.bytes.len() as u64 / SECTOR;
        let new = u64::from(!st.pins.by_stripe.contains_key(&stripe));
        let cost = self.stripe_cost(self.stripe_bytes.load(Ordering::Acquire));
        let reserve = (st.pins.by_stripe.len() as u64 + new) * cost;
        let floor = self.floor(&st);
        let kept = (st.head + self.ring - floor) % self.ring;
        if kept + need + reserve + BLOCK_SECTORS > self.ring {
            return Ok(false);
        }
        if self.used(&st) + need + BLOCK_SECTORS > self.ring {
            // The room is there once the tail moves up to the floor.
            flush_members().map_err(|e| Failed {
                members: Vec::new(),
                kind: IoKind::Write,
                error: Box::new(e),
                log: true,
            })?;
            self.move_tail(&mut st, floor, run)?;
            st.reclaims += 1;
        }
        let first = (st.seq, st.head);
        let mut writes = DeviceWrites::default();
        writes
            .push_journal_blocks(0, &st.sb, st.head, &enc.bytes)
            .map_err(|e| journal_failed(e.on_device(name)))?;
        self.run_on_device(&writes, run)?;
        st.last_meta = last_meta;
        st.seq = enc.next_seq;
        st.head = enc.end;
        if new == 1 {
            st.pins.by_stripe.insert(stripe, first.0);
            st.pins.by_seq.entry(first.0).or_insert((first.1, 0)).1 += 1;
        }
        Ok(true)
    }

    /// Stripe `stripe` was written out (its data and parity logged and on
    /// the members, not yet flushed: reclaim flushes them before the tail
    /// moves): its data-only blocks may be reclaimed.
    pub(crate) fn release(&self, stripe: u64) {
        let mut st = self.lock();
        let Some(seq) = st.pins.by_stripe.remove(&stripe) else {
            return;
        };
        if let Some(e) = st.pins.by_seq.get_mut(&seq) {
            e.1 -= 1;
            if e.1 == 0 {
                st.pins.by_seq.remove(&seq);
            }
        }
    }

    /// Data-only meta blocks for the pages of `[at, at+len)`, from the head.
    fn encode_data_only(&self, st: &State, at: u64, bytes: &[u8]) -> Result<Encoded> {
        let mut out = Encoded {
            bytes: Vec::new(),
            last_meta: None,
            next_seq: st.seq,
            end: st.head,
        };
        let mut pages = bytes.chunks(PAGE as usize).enumerate().peekable();
        while pages.peek().is_some() {
            let mut mb = MetaBlock::empty(out.next_seq, out.end);
            let mut body: Vec<&[u8]> = Vec::new();
            while let Some((k, page)) = pages.peek() {
                let p = Payload::Data {
                    flags: 0,
                    location: (at + *k as u64 * PAGE) / SECTOR,
                    checksum: fmt::page_checksum(self.seed, page),
                };
                if !mb.has_room(p.descriptor_len()) {
                    break;
                }
                mb.payloads.push(p);
                body.push(page);
                pages.next();
            }
            out.last_meta = Some(mb.position);
            out.next_seq = mb.seq + 1;
            out.bytes.extend_from_slice(&mb.to_bytes(self.seed)?);
            out.end = fmt::ring_add(out.end, BLOCK_SECTORS, self.ring);
            for p in body {
                out.bytes.extend_from_slice(p);
                out.end = fmt::ring_add(out.end, BLOCK_SECTORS, self.ring);
            }
        }
        Ok(out)
    }
}
