//! md's write journal at work (raid5-cache, write-through mode): closing the
//! RAID 4/5/6 write hole with a separate journal device.
//!
//! Every stripe write's new pages (the data it writes and the stripe's new P,
//! and Q for RAID 6) go to the journal first, as md's meta blocks and payload
//! pages, and the journal device is flushed; only then are the members written.
//! After a crash the journal is read from `journal_tail` and every stripe whose
//! data and parity are complete in it is written to the members again, so
//! whatever the members kept of the interrupted writes, each stripe ends up
//! consistent: no resync, and a degraded array may start.
//!
//! Space is reclaimed when the ring is full: the members are flushed (so
//! everything logged so far is on their media) and `journal_tail` in the journal
//! device's superblock moves up to the newest meta block. Journaled writes are
//! serialised (`Journal::writer`): a reclaim must never move the tail past a
//! write whose member writes are still in flight.
//!
//! This module must never let a member write go out before the journal write
//! covering it is durable, never move `journal_tail` before the members are
//! flushed, and never replay a page whose checksum fails (md skips the whole
//! meta block). The format is `raidlab_md::journal`'s. md's write-back mode
//! (data in the journal is enough to acknowledge; stripes written out later)
//! is `writeback`'s.

mod recovery;
mod writeback;

pub use recovery::{pending, unreplayed};
use recovery::{pending_from, replay, Row};
pub use writeback::JournalMode;
use writeback::Pins;

use crate::exec::Failed;
use crate::metadata_plan::{DeviceRunner, DeviceWrites};
use crate::plan::LogEntry;
use crate::replay::ReplayTarget;
use raidlab_core::task::{Mutex, MutexGuard};
use raidlab_core::IoKind;
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use raidlab_layout::{Content, Geometry};
use raidlab_md::journal::{self as fmt, MetaBlock, Payload, BLOCK, BLOCK_SECTORS};
use raidlab_md::Superblock;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

const SECTOR: u64 = 512;
const PAGE: u64 = BLOCK as u64;

/// The journal of a running array.
pub struct Journal {
    /// The whole journal device (superblock and ring).
    device: Arc<dyn Volume>,
    geometry: Geometry,
    seed: u32,
    ring: u64,
    state: Mutex<State>,
    /// Held for a whole array write: a write that merges a partial page with
    /// what the array holds must not interleave with another write to that page.
    serial: Mutex<()>,
    /// Carries out the journal's own metadata plans (superblock, empty meta
    /// blocks): the executor of the array it was started for.
    executor: Arc<dyn crate::exec::Executor>,
    /// md's write-back mode is on (`writeback`).
    write_back: std::sync::atomic::AtomicBool,
    /// The array's stripe length in bytes, for write-back's reservations.
    stripe_bytes: std::sync::atomic::AtomicU64,
}

/// Where the log stands. Held for a whole journaled write (see the module doc).
#[derive(Debug)]
pub(crate) struct State {
    sb: Superblock,
    /// Ring sector of the oldest meta block recovery must read (`journal_tail`).
    tail: u64,
    /// Ring sector where the next meta block goes.
    head: u64,
    /// Sequence number of the next meta block.
    seq: u64,
    /// Ring sector of the newest meta block written.
    last_meta: u64,
    /// Times the ring was full and space was reclaimed.
    reclaims: u64,
    /// Write-back: stripes whose data is only in the journal.
    pins: Pins,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("device", &self.device.name())
            .field("ring_sectors", &self.ring)
            .finish()
    }
}

/// What starting the journal found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct JournalReplay {
    /// Valid meta blocks read from `journal_tail` on.
    pub meta_blocks: u64,
    /// Meta blocks skipped because a page did not match its checksum (a torn
    /// journal write: its stripes were never written to the members).
    pub torn_blocks: u64,
    /// Stripes (4 KiB rows) whose data and parity were written back to the members.
    pub stripes_replayed: u64,
    /// Stripes with data but no parity in the log (md's write-back mode leaves
    /// these): their data was written through the array, parity computed afresh.
    pub data_only_stripes: u64,
    /// Of the stripes counted above, those whose logged *data* differs from
    /// what the data members hold (counted by a dry run, which compares
    /// instead of writing): writes acknowledged in md's write-back mode live
    /// only in the journal until replayed, so reading the members alone
    /// would return older data. Parity that differs is not counted here.
    pub data_not_on_members: u64,
    /// The journal held no valid meta block at `journal_tail` (a new journal, or
    /// one md never started): a fresh log was begun, nothing replayed.
    pub fresh: bool,
}

impl JournalReplay {
    /// Whether anything was written back to the members.
    pub fn replayed_anything(&self) -> bool {
        self.stripes_replayed + self.data_only_stripes > 0
    }
}

/// One stripe (a 4 KiB row at member sector `key`) gathered from the log.
#[derive(Default)]
struct Gathered {
    /// New data pages by role.
    data: BTreeMap<usize, Vec<u8>>,
    /// New data pages by array byte offset, for a data-only write-out.
    data_at: BTreeMap<u64, Vec<u8>>,
    /// P, then Q.
    parity: Option<Vec<Vec<u8>>>,
}

impl Journal {
    /// Start the journal on `device` (its superblock `sb` must be a journal
    /// device's) for an array of `geometry` whose members, by role, are
    /// `array`'s: md's `r5l_load_log` then `r5l_recovery_log`. When the block at
    /// `journal_tail` is not a valid meta block a fresh log is begun at the
    /// start of the ring (nothing to replay). Otherwise every meta block that
    /// follows in sequence is read, complete stripes are written back to the
    /// members and flushed, an empty meta block is written where the log ends
    /// (its sequence moved on by 10,000 as md does) and `journal_tail` points at
    /// it. `array` must run without a journal (the replay writes directly).
    pub fn start(
        device: Arc<dyn Volume>,
        mut sb: Superblock,
        geometry: Geometry,
        set_uuid: &[u8; 16],
        array: &dyn ReplayTarget,
    ) -> Result<(Journal, JournalReplay)> {
        let name = device.name();
        let (_, ring) = fmt::ring(&sb).map_err(|e| e.on_device(name.clone()))?;
        if ring < 64 * BLOCK_SECTORS {
            return Err(Error::invalid(format!(
                "the journal holds {} KiB, too little for raidlab's journal (at least 256 KiB): give a larger journal device",
                ring / 2
            ))
            .on_device(name));
        }
        let seed = fmt::uuid_seed(set_uuid);
        let mut report = JournalReplay::default();
        let cp = fmt::start_position(&sb, ring);
        let first = fmt::read_block(device.as_ref(), &sb, cp)?;
        let head_block = MetaBlock::parse(&first, seed)
            .ok()
            .filter(|mb| mb.position == cp);
        let (pos, seq) = match head_block {
            None => {
                report.fresh = true;
                // md seeds a new log's sequence at random; any value works, so
                // take one that differs between arrays and starts (random, as
                // md does: no clock is read).
                let seq = u64::from(fmt::crc32c_le(seed, uuid::Uuid::new_v4().as_bytes()));
                (0, seq)
            }
            Some(mb) => {
                let (end, end_seq) = replay(
                    device.as_ref(),
                    &sb,
                    &geometry,
                    seed,
                    ring,
                    (cp, mb.seq),
                    array,
                    false,
                    &mut report,
                )?;
                (end, end_seq + fmt::RECOVERY_SEQ_SKIP)
            }
        };
        let journal = Journal {
            device,
            geometry,
            seed,
            ring,
            state: Mutex::new(State {
                sb: sb.clone(),
                tail: pos,
                head: pos,
                seq,
                last_meta: pos,
                reclaims: 0,
                pins: Pins::default(),
            }),
            serial: Mutex::new(()),
            executor: array.executor(),
            write_back: Default::default(),
            stripe_bytes: Default::default(),
        };
        // An empty meta block where the new log starts, durable before the
        // superblock points at it.
        let empty = MetaBlock::empty(seq, pos)
            .to_bytes(seed)
            .map_err(|e| e.on_device(journal.device.name()))?;
        journal.write_blocks_now(&sb, pos, &empty)?;
        fmt::set_journal_tail(&mut sb, pos);
        journal.write_superblock_now(&sb)?;
        {
            let mut st = journal.lock();
            st.sb = sb;
            st.head = fmt::ring_add(pos, BLOCK_SECTORS, ring);
            st.seq = seq + 1;
        }
        Ok((journal, report))
    }

    /// Hold the journal for one write: the log write and the member writes it
    /// covers happen under this guard.
    pub(crate) fn writer(&self) -> MutexGuard<'_, State> {
        self.lock()
    }

    /// Hold for one whole array write (see `serial`).
    pub(crate) fn serial(&self) -> MutexGuard<'_, ()> {
        self.serial.lock()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    /// Largest journaled write piece (array bytes) that always fits the ring
    /// after a reclaim: a data page costs at most itself, two parity pages and
    /// a share of a meta block.
    pub fn max_piece(&self) -> u64 {
        ((self.ring * SECTOR / 5) / PAGE * PAGE).max(PAGE)
    }

    /// The journal device's name.
    pub fn device_name(&self) -> String {
        self.device.name()
    }

    /// Ring sector of `journal_tail` as last recorded.
    pub fn tail(&self) -> u64 {
        self.lock().tail
    }

    /// How often the ring was full and space was reclaimed (members flushed,
    /// the tail moved) since the journal was started.
    pub fn reclaims(&self) -> u64 {
        self.lock().reclaims
    }

    /// Write `sb` (the assembly's copy of the journal device's superblock, with
    /// whatever it changed: events, role table) under the journal's lock,
    /// keeping the `journal_tail` the journal has recorded (the copy may be
    /// older). Returns what was written.
    pub fn write_superblock(&self, mut sb: Superblock) -> Result<Superblock> {
        let mut st = self.lock();
        fmt::set_journal_tail(&mut sb, st.tail);
        self.write_superblock_now(&sb)?;
        st.sb = sb.clone();
        Ok(sb)
    }

    /// Write `sb` on the journal device, durably, as a metadata plan carried
    /// out here (no array runs yet, or the array's executor is not at hand).
    fn write_superblock_now(&self, sb: &Superblock) -> Result<()> {
        let (at, bytes) = sb
            .placed(self.device.size())
            .map_err(|e| e.on_device(self.device.name()))?;
        let mut writes = DeviceWrites::default();
        writes.push(0, at, &bytes);
        writes.run(self.executor.as_ref(), &[Some(Arc::clone(&self.device))])
    }

    /// Write whole blocks at ring sector `pos`, durably, as
    /// [`Journal::write_superblock_now`] does.
    fn write_blocks_now(&self, sb: &Superblock, pos: u64, blocks: &[u8]) -> Result<()> {
        let mut writes = DeviceWrites::default();
        writes
            .push_journal_blocks(0, sb, pos, blocks)
            .map_err(|e| e.on_device(self.device.name()))?;
        writes.run(self.executor.as_ref(), &[Some(Arc::clone(&self.device))])
    }

    /// Write one plan's journal entries (see `plan::LogEntry`) as md's meta
    /// blocks and pages, durably. When the ring has no room, first reclaim:
    /// `flush_members` makes every earlier journaled write durable on the
    /// members, then `journal_tail` moves to the newest meta block.
    pub(crate) fn write(
        &self,
        st: &mut State,
        entries: &[(LogEntry, &[u8])],
        flush_members: &dyn Fn() -> Result<()>,
        run: DeviceRunner<'_>,
    ) -> std::result::Result<(), Failed> {
        let enc = self
            .encode(st, entries)
            .map_err(|e| journal_failed(e.on_device(self.device.name())))?;
        let Some(last_meta) = enc.last_meta else {
            return Ok(());
        };
        let need = enc.bytes.len() as u64 / SECTOR;
        if self.used(st) + need + BLOCK_SECTORS > self.ring {
            let to = self.floor(st);
            if st.tail == to {
                return Err(journal_failed(
                    Error::new(
                        ErrorKind::Invalid,
                        Op::Write,
                        format!(
                            "internal: a journal write of {need} sectors does not fit the {}-sector ring ({} stripes held in write-back)",
                            self.ring,
                            st.pins.by_stripe.len()
                        ),
                    )
                    .on_device(self.device.name()),
                ));
            }
            flush_members().map_err(|e| Failed {
                members: Vec::new(),
                kind: IoKind::Write,
                error: Box::new(e),
                log: true,
            })?;
            self.move_tail(st, to, run)?;
            st.reclaims += 1;
            // The blocks were numbered for the same head; the tail moved, so
            // they now fit (or the check above refuses next time round).
            return self.write(st, entries, flush_members, run);
        }
        let mut writes = DeviceWrites::default();
        writes
            .push_journal_blocks(0, &st.sb, st.head, &enc.bytes)
            .map_err(|e| journal_failed(e.on_device(self.device.name())))?;
        self.run_on_device(&writes, run)?;
        st.last_meta = last_meta;
        st.seq = enc.next_seq;
        st.head = enc.end;
        Ok(())
    }

    /// For a clean stop: flush the members (everything logged is then on
    /// them), write an empty meta block at the head and move `journal_tail` to
    /// it, so the journal holds nothing to replay ([`pending`] finds 0).
    pub fn checkpoint(&self, flush_members: &dyn Fn() -> Result<()>) -> Result<()> {
        let mut st = self.lock();
        if !st.pins.by_stripe.is_empty() {
            // Their data is in the journal only: emptying it would lose them.
            return Err(Error::invalid(format!(
                "{} stripes held in write-back are not written out yet: the journal cannot be emptied",
                st.pins.by_stripe.len()
            ))
            .on_device(self.device.name()));
        }
        if st.tail == st.last_meta
            && pending_from(self.device.as_ref(), &st.sb, self.seed, self.ring, st.tail)? == 0
        {
            return Ok(());
        }
        flush_members()?;
        let (pos, seq) = (st.head, st.seq);
        let empty = MetaBlock::empty(seq, pos)
            .to_bytes(self.seed)
            .map_err(|e| e.on_device(self.device.name()))?;
        self.write_blocks_now(&st.sb, pos, &empty)?;
        let run = |w: &DeviceWrites, table: &crate::exec::Members| {
            w.run(self.executor.as_ref(), table).map_err(Failed::from)
        };
        st.last_meta = pos;
        st.seq = seq + 1;
        st.head = fmt::ring_add(pos, BLOCK_SECTORS, self.ring);
        Ok(self.move_tail(&mut st, pos, &run)?)
    }

    fn used(&self, st: &State) -> u64 {
        (st.head + self.ring - st.tail) % self.ring
    }

    fn move_tail(
        &self,
        st: &mut State,
        to: u64,
        run: DeviceRunner<'_>,
    ) -> std::result::Result<(), Failed> {
        fmt::set_journal_tail(&mut st.sb, to);
        let (at, bytes) = st
            .sb
            .placed(self.device.size())
            .map_err(|e| journal_failed(e.on_device(self.device.name())))?;
        let mut writes = DeviceWrites::default();
        writes.push(0, at, &bytes);
        self.run_on_device(&writes, run)?;
        st.tail = to;
        Ok(())
    }

    /// Run a metadata plan on the journal device (the table's only entry),
    /// durably; a failure is the journal's, not a member's.
    fn run_on_device(
        &self,
        writes: &DeviceWrites,
        run: DeviceRunner<'_>,
    ) -> std::result::Result<(), Failed> {
        run(writes, &[Some(Arc::clone(&self.device))]).map_err(|f| {
            let mut f = journal_failed(f.error.on_device(self.device.name()));
            f.members.clear();
            f
        })
    }

    /// The blocks of one journal write starting at the head: each meta block
    /// (4 KiB) followed by its pages, stripes in member-offset order, a stripe's
    /// payloads never split across meta blocks.
    fn encode(&self, st: &State, entries: &[(LogEntry, &[u8])]) -> Result<Encoded> {
        // Gather pages per stripe (member offset of a 4 KiB row).
        let mut rows: BTreeMap<u64, Row> = BTreeMap::new();
        for (e, bytes) in entries {
            if e.data_offset % PAGE != 0 || e.data_size % PAGE != 0 {
                return Err(internal("a journal entry that is not whole 4 KiB pages"));
            }
            if bytes.len() as u64 != e.data_size {
                return Err(internal("a journal entry whose buffer is not its size"));
            }
            for (k, page) in bytes.chunks(PAGE as usize).enumerate() {
                let moff = e.data_offset + k as u64 * PAGE;
                let row = rows.entry(moff).or_default();
                match self.geometry.content_at(e.member, moff) {
                    Content::Data(at) => row.data.push((e.member, at, page)),
                    Content::P(_) => row.p = Some(page),
                    Content::Q(_) => row.q = Some(page),
                    _ => return Err(internal("a journal entry outside the array's blocks")),
                }
            }
        }
        let mut out = Encoded {
            bytes: Vec::new(),
            last_meta: None,
            next_seq: st.seq,
            end: st.head,
        };
        let mut meta: Option<(MetaBlock, Vec<&[u8]>)> = None;
        let ring = self.ring;
        let seed = self.seed;
        let flush = |meta: &mut Option<(MetaBlock, Vec<&[u8]>)>, out: &mut Encoded| -> Result<()> {
            if let Some((mb, pages)) = meta.take() {
                out.last_meta = Some(mb.position);
                out.next_seq = mb.seq + 1;
                out.bytes.extend_from_slice(&mb.to_bytes(seed)?);
                out.end = fmt::ring_add(out.end, BLOCK_SECTORS, ring);
                for p in pages {
                    out.bytes.extend_from_slice(p);
                    out.end = fmt::ring_add(out.end, BLOCK_SECTORS, ring);
                }
            }
            Ok(())
        };
        for (moff, row) in &rows {
            if row.data.is_empty() {
                // A parity-only row changes nothing md would replay.
                continue;
            }
            let Some(p) = row.p else {
                return Err(internal("a journaled stripe without its new parity"));
            };
            let mut parity = vec![p];
            if self.geometry.parity_count() == 2 {
                parity.push(
                    row.q
                        .ok_or_else(|| internal("a RAID 6 journaled stripe without Q"))?,
                );
            }
            let mut payloads: Vec<Payload> = row
                .data
                .iter()
                .map(|(_, at, page)| Payload::Data {
                    flags: 0,
                    location: at / SECTOR,
                    checksum: fmt::page_checksum(self.seed, page),
                })
                .collect();
            payloads.push(Payload::Parity {
                flags: 0,
                location: moff / SECTOR,
                checksums: parity
                    .iter()
                    .map(|pg| fmt::page_checksum(self.seed, pg))
                    .collect(),
            });
            let len: usize = payloads.iter().map(Payload::descriptor_len).sum();
            if meta.as_ref().is_some_and(|(mb, _)| !mb.has_room(len)) {
                flush(&mut meta, &mut out)?;
            }
            let (mb, pages) =
                meta.get_or_insert_with(|| (MetaBlock::empty(out.next_seq, out.end), Vec::new()));
            if !mb.has_room(len) {
                return Err(internal(
                    "one stripe's journal payloads do not fit a meta block",
                ));
            }
            mb.payloads.extend(payloads);
            pages.extend(row.data.iter().map(|(_, _, pg)| *pg));
            pages.extend(parity);
        }
        flush(&mut meta, &mut out)?;
        Ok(out)
    }
}

/// One journal write, encoded: meta blocks and pages back to back from the head.
struct Encoded {
    bytes: Vec<u8>,
    /// Ring sector of its last meta block (`None`: nothing to log).
    last_meta: Option<u64>,
    /// Sequence number after its last meta block.
    next_seq: u64,
    /// Ring sector after it.
    end: u64,
}

fn bad_log(dev: &dyn Volume, pos: u64, what: &str) -> Error {
    Error::invalid(format!(
        "journal meta block at ring sector {pos} describes {what}: the journal does not belong to this array's shape; assemble with the right journal device"
    ))
    .on_device(dev.name())
}

fn internal(what: &str) -> Error {
    Error::new(ErrorKind::Invalid, Op::Write, format!("internal: {what}"))
}

fn journal_failed(error: Error) -> Failed {
    Failed {
        members: Vec::new(),
        kind: IoKind::Write,
        error: Box::new(error),
        log: true,
    }
}

#[cfg(test)]
mod tests {
    use super::recovery::locate;
    use super::*;
    use raidlab_layout::{Layout, Level};

    #[test]
    fn locate_inverts_the_layout() {
        let geo = Geometry::new(
            Level::Raid6,
            Layout::parse(Level::Raid6, None).unwrap(),
            8192,
            5,
            64 * 1024,
        )
        .unwrap();
        for at in (0..geo.array_bytes()).step_by(4096) {
            let (role, moff) = locate(&geo, at).unwrap();
            assert_eq!(
                geo.content_at(role, moff),
                Content::Data(at),
                "array byte {at}"
            );
        }
        assert!(locate(&geo, 100).is_none());
        assert!(locate(&geo, geo.array_bytes()).is_none());
    }
}
