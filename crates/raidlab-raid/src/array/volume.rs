//! The array as a [`Volume`]: where each request enters (read, stored
//! read, write, FUA write, write-zeroes, trim, flush) and is cut into pieces
//! for the stages the module doc lists, and what a replay target reads of it.
//! It decides only how a request reaches the stages; never a stage's question.

use super::*;

/// A read plan's member reads in the order of the caller's buffer, when the plan
/// is nothing but reads that fill `[0, n)` of it end to end; `None` when it
/// computes anything (a degraded read) or uses scratch buffers.
fn stored_reads(plan: &Plan, n: u64) -> Option<Vec<(usize, u64, u64)>> {
    let [crate::plan::Step::Io(ops)] = plan.steps.as_slice() else {
        return None;
    };
    let mut ops: Vec<_> = ops
        .iter()
        .map(|op| {
            (op.kind == IoKind::Read && op.buf.buf == crate::plan::Buf::User).then_some((
                op.buf.offset as u64,
                op.member,
                op.offset,
                op.length,
            ))
        })
        .collect::<Option<_>>()?;
    ops.sort_unstable();
    let mut next = 0u64;
    for &(at, _, _, length) in &ops {
        if at != next {
            return None;
        }
        next += length;
    }
    (next == n).then(|| ops.into_iter().map(|(_, m, o, l)| (m, o, l)).collect())
}

impl Volume for Array {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn size(&self) -> u64 {
        self.geometry.array_bytes()
    }

    fn block_size(&self) -> u32 {
        4096
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_range(&self.name, Op::Read, self.size(), offset, buf.len() as u64)?;
        match self.stripe_cache.get() {
            Some(cache) => cache.read(buf, offset, self),
            None => self.read_direct(buf, offset),
        }
    }

    /// Where a read's bytes lie when every piece of it is a plain member read
    /// (no parity to compute: every member it needs is live). The membership
    /// snapshot and each piece's stripe locks are held while the sink takes
    /// the piece, as a read through `read_at` holds them.
    fn read_stored(&self, offset: u64, len: u64, sink: &mut StoredSink<'_>) -> Result<bool> {
        check_range(&self.name, Op::Read, self.size(), offset, len)?;
        if self
            .stripe_cache
            .get()
            .is_some_and(|c| c.holds(offset, len) || c.has_lost(offset, len))
        {
            // Part of it is only in memory: `read_at` merges it.
            return Ok(false);
        }
        let view = self.view();
        let live = self.live_in(&view);
        let mut plans = Vec::new();
        let mut reads = 0usize;
        for (pos, n) in self.pieces(offset, len) {
            let plan = self
                .read_plan(&live, pos, n)
                .map_err(|e| e.on_device(&self.name))?;
            match stored_reads(&plan, n) {
                Some(ops) => {
                    reads += ops.len();
                    plans.push((plan.locks, ops));
                }
                None => return Ok(false),
            }
        }
        // The sink takes the places one after the other, each a member
        // request of its own that must complete before the next is asked
        // for. On members read with O_DIRECT nothing reads ahead, so a read
        // of more than one place is faster through `read_at`, whose step
        // sends them together: in parallel across members, and the block
        // layer merges the contiguous ones of a member into one request (a
        // RAID 0 of four members with 64 KiB chunks, 1 MiB reads at QD8 on
        // members that take 5 ms a request: 47 MiB/s spliced, 189 MiB/s
        // through `read_at`, docs/benchmarks.md). Buffered members read
        // ahead in the page cache, where splicing the places in turn costs
        // nothing and saves the copy.
        if reads > 1
            && plans.iter().flat_map(|(_, ops)| ops).any(|&(m, _, _)| {
                view.members
                    .get(m)
                    .and_then(Option::as_ref)
                    .is_some_and(|v| v.raw_file().is_some_and(|f| f.direct.is_some()))
            })
        {
            return Ok(false);
        }
        for (locks, ops) in plans {
            let _held = self.locks.lock(&locks);
            for (member, at, n) in ops {
                let Some(m) = view.members.get(member).and_then(|m| m.as_ref()) else {
                    return Ok(false);
                };
                if !m.read_stored(at, n, sink)? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        check_range(&self.name, Op::Write, self.size(), offset, buf.len() as u64)?;
        self.refuse_read_only(Op::Write, offset, buf.len() as u64)?;
        self.refuse_when_failed(Op::Write, offset, buf.len() as u64)?;
        match self.stripe_cache.get() {
            Some(cache) if cache.write_back() => self.write_back(cache, buf, offset),
            Some(cache) => cache.write(buf, offset, self),
            None => self.write_direct(buf, offset),
        }
    }

    /// Durable when it returns: what the stripe cache holds of the range is
    /// written first, then the members the write reached are flushed, and
    /// only those: the others hold none of it, and a FUA write should not
    /// wait for their unrelated writes (a 4 KiB FUA write on a RAID 5 flushes
    /// its data and parity members). See `members_written_by` for when every
    /// member is flushed instead.
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.write_at(buf, offset)?;
        if self.stripe_cache.get().is_some_and(|c| c.write_back()) {
            // In the journal, flushed, before `write_at` returned.
            return Ok(());
        }
        let len = buf.len() as u64;
        if let Some(cache) = self.stripe_cache.get() {
            cache.write_out_range(Some((offset, len)), self)?;
        }
        if planted!(FuaWithoutFlush) {
            return Ok(()); // PLANTED BUG (tests only, `planted.rs`)
        }
        self.flush_members_in(self.members_written_by(offset, len).as_deref())
    }

    /// Whole stripes (RAID 4/5/6) or any range (RAID 0/1/10) become member
    /// write-zeroes, the rest zeros written as data (`array/zeroes.rs`).
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        self.zero_range(offset, len)
    }

    fn optimal_io_size(&self) -> Option<u64> {
        (self.rules.family == Family::Parity)
            .then(|| self.geometry.chunk_bytes * self.geometry.data_disks() as u64)
    }

    fn flush(&self) -> Result<()> {
        if let Some(cache) = self.stripe_cache.get().filter(|c| c.write_back()) {
            // md's write-back: a flush flushes the journal, not the members;
            // every acknowledged write is durable there already.
            return cache.take_deferred();
        }
        // Everything held before the flush goes down first.
        let held = match self.stripe_cache.get() {
            Some(cache) => cache.write_out_range(None, self),
            None => Ok(()),
        };
        if planted!(AckFlushEarly) {
            return held; // PLANTED BUG (tests only, `planted.rs`)
        }
        let members = self.flush_members_now();
        held.and(members)
    }

    /// RAID 0/1/10 whose members in service all read zeros after a trim (a
    /// copy that cannot be trimmed is zeroed instead, so the promise holds).
    fn discard_zeroes(&self) -> bool {
        if !self.rules.trims || self.read_only {
            return false;
        }
        let view = self.view();
        let live = self.live_in(&view);
        view.members
            .iter()
            .zip(live)
            .all(|(m, ok)| !ok || m.as_ref().is_some_and(|m| m.discard_zeroes()))
    }

    /// Forget a range: on RAID 0, 1 and 10 each copy of it is trimmed on its
    /// member, when every member it lies on reads zeros after a trim (holes in
    /// files, memory), so the copies stay equal and a check stays clean. RAID
    /// 4, 5 and 6 ignore trims, as md does unless told the members can be
    /// trusted to return zeros: parity over trimmed blocks could not be
    /// trusted otherwise. A copy whose trim fails is zeroed instead.
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        check_range(&self.name, Op::Discard, self.size(), offset, len)?;
        if !self.rules.trims {
            return Err(Error::new(
                ErrorKind::Unsupported,
                Op::Discard,
                format!("{} ignores trims ({})", self.rules.name, self.rules.no_trim),
            )
            .on_device(&self.name));
        }
        self.refuse_read_only(Op::Discard, offset, len)?;
        self.refuse_when_failed(Op::Discard, offset, len)?;
        for (pos, n) in self.pieces(offset, len) {
            self.discard_piece(pos, n)?;
        }
        Ok(())
    }
    fn is_writable(&self) -> bool {
        !self.read_only
            && self
                .view()
                .members
                .iter()
                .flatten()
                .all(|m| m.is_writable())
    }
}

impl crate::replay::ReplayTarget for Array {
    fn geometry(&self) -> &Geometry {
        Array::geometry(self)
    }
    fn member(&self, role: usize) -> Option<Arc<dyn Volume>> {
        Array::member(self, role)
    }
    fn executor(&self) -> Arc<dyn Executor> {
        Arc::clone(&self.executor)
    }
}
