//! Reshapes under power cuts and member failures (issue 36), from a seed:
//! raidlab's own `grow` (more members, a new chunk or layout, RAID 4 to 5
//! and back; a RAID 0's more members or chunk, through md's RAID 4 without
//! parity; a RAID 10 near or offset onto more members, or over the same
//! ones to a new chunk or the other of near and offset; fewer members of a
//! RAID 4/5/6, md's backward reshape, the members first given room after
//! their data; fewer members of a RAID 10 near or offset, with room after
//! the data or without; fewer members of a RAID 0, through md's RAID 4
//! without parity backwards, the members given room after their data as a
//! grown device has it; a metadata 0.90 RAID 4/5/6 onto more members, in
//! place, its critical section backed up on the new members as mdadm
//! does) run on in-memory members with volatile write
//! caches, the power cut after a random number of member writes (each
//! member's unflushed writes kept, dropped or torn), the members assembled
//! again from their superblocks and the reshape carried on, up to three
//! cuts a run; after a cut a member may also die, and the array must then
//! refuse to carry on and still read right.
//!
//! It decides what change to ask for, when the power goes and which member
//! dies, and what the array must read: every byte written before the
//! reshape (all of it flushed), at every stage, with zeros in a grow's new
//! space (a shrink: what the fewer members hold), and a check with no
//! mismatch and the shape asked at the end. It never decides anything of
//! the reshape itself: `reshape_check`, `reshape_start`, `reshape_run`,
//! `takeover` and `Assembly::assemble` are the engine's (a RAID 10
//! shrink's array size too: the one the engine's refusal names).
//! A run is a pure function of (seed, run index). What a run asks for is
//! drawn in `draw`; this file runs it and judges it.

mod draw;

use super::run_seed;
use draw::{drawn, Setup};
use raidlab_core::{Layer, Volume};
use raidlab_devices::{FaultVolume, MemVolume};
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_raid::assemble::{create_with_executor, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::exec::{Executor, InOrder};
use raidlab_raid::grow::ReshapeRequest;
use raidlab_raid::recovery::RunOptions;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// Each member's size: metadata 1.1/1.2 put the data 1 MiB in, leaving
/// about 1 MiB of data and almost 1 MiB of room below it to move into.
const MEMBER_BYTES: u64 = 2 << 20;
/// At most this many power cuts in one run.
const MAX_CUTS: u32 = 3;

type Member = Arc<FaultVolume<MemVolume>>;

/// One member as the engine sees it: its writes count down the run's
/// budget, and the write that finds it spent cuts the power of every
/// member (that write fails, as everything after it until the restart).
struct Tripwire {
    below: Member,
    budget: Arc<AtomicI64>,
    all: Arc<std::sync::Mutex<Vec<Member>>>,
    seed: u64,
}

impl Tripwire {
    fn spend(&self) -> raidlab_core::Result<()> {
        if self.budget.fetch_sub(1, Ordering::SeqCst) == 1 {
            let all = self.all.lock().unwrap_or_else(|p| p.into_inner());
            for (k, m) in all.iter().enumerate() {
                let _ = m.power_cut(self.seed ^ (k as u64).wrapping_mul(0x9e37_79b9));
            }
        }
        Ok(())
    }
}

impl Layer for Tripwire {
    fn below(&self) -> &dyn Volume {
        self.below.as_ref()
    }
    fn passes_views(&self) -> bool {
        false
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> raidlab_core::Result<()> {
        self.spend()?;
        self.below.write_at(buf, offset)
    }
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> raidlab_core::Result<()> {
        self.spend()?;
        self.below.write_at_fua(buf, offset)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> raidlab_core::Result<()> {
        self.spend()?;
        self.below.write_zeroes(offset, len)
    }
}

/// What one reshape run did.
#[derive(Debug, Clone)]
pub struct ReshapeRun {
    pub run: u64,
    /// The array and the change asked for.
    pub label: String,
    pub cuts: u32,
    /// A member died after a cut (the reshape then stays stopped).
    pub member_died: bool,
    /// Member writes of the whole reshape without a cut (the budget's range).
    pub writes: u64,
    pub violation: Option<String>,
}

/// The members of one run, behind their tripwires.
struct Rig {
    members: Vec<Member>,
    all: Arc<std::sync::Mutex<Vec<Member>>>,
    budget: Arc<AtomicI64>,
    dead: Vec<bool>,
    exec: Arc<dyn Executor>,
}

impl Rig {
    fn devices(&self, seed: u64) -> Vec<Device> {
        self.members
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.dead[*i])
            .map(|(i, m)| Device {
                path: format!("mem{i}"),
                volume: Arc::new(Tripwire {
                    below: m.clone(),
                    budget: self.budget.clone(),
                    all: self.all.clone(),
                    seed: seed ^ i as u64,
                }),
            })
            .collect()
    }

    fn assemble(&self, seed: u64) -> Result<Assembly, String> {
        let mut asm =
            Assembly::assemble(self.devices(seed)).map_err(|e| format!("assemble: {e}"))?;
        asm.set_executor(self.exec.clone());
        Ok(asm)
    }
}

/// Read the whole array the assembly describes (read-only mid-reshape).
fn read_all(asm: &Assembly) -> Result<Vec<u8>, String> {
    let a = asm.array().map_err(|e| format!("array: {e}"))?;
    let mut got = vec![0u8; a.size() as usize];
    a.read_at(&mut got, 0).map_err(|e| format!("read: {e}"))?;
    Ok(got)
}

/// `got` against the data from before: equal over the old size, zeros past it.
fn judge(got: &[u8], data: &[u8], when: &str) -> Result<(), String> {
    let n = data.len().min(got.len());
    if let Some(i) = (0..n).find(|&i| got[i] != data[i]) {
        return Err(format!(
            "{when}: byte {i} reads {:#04x}, was written {:#04x}",
            got[i], data[i]
        ));
    }
    if let Some(i) = (n..got.len()).find(|&i| got[i] != 0) {
        return Err(format!("{when}: byte {i} of the new space is not zero"));
    }
    Ok(())
}

/// One reshape run: `(seed, run)` decides everything.
pub fn reshape_run(seed: u64, run: u64) -> ReshapeRun {
    let (s, mut rng) = drawn(seed, run);
    // (A RAID 10 shrink says how it was drawn; the other labels are as
    // they were, so that sweeps compare line for line.)
    let raid10_shrink = match (s.raid10, s.change.shrink) {
        (Some(_), true) => format!(
            ", {}, {} chunk(s) below the most",
            if s.change.room {
                "room after the data"
            } else {
                "no room after the data"
            },
            s.change.less_chunks
        ),
        _ => String::new(),
    };
    let raid10_cut = s.change.cut_to.map_or_else(String::new, |u| {
        format!(", the component size cut to whole {}K first", u >> 10)
    });
    let label = format!(
        "{} of {} ({}, {}K, {:?}): {:?}{raid10_shrink}{raid10_cut}{}",
        s.level.name(),
        s.members,
        s.raid10
            .map_or_else(|| s.layout.name().to_string(), |l| l.to_string()),
        s.chunk >> 10,
        s.metadata,
        s.change.req,
        if s.change.shrink { " (shrink)" } else { "" }
    );
    let mut out = ReshapeRun {
        run,
        label,
        cuts: 0,
        member_died: false,
        writes: 0,
        violation: None,
    };
    // A dry run counts the reshape's member writes, so the cut can land
    // anywhere in it; the real run then has the same writes in the same
    // order (everything here runs in order on this thread).
    let dry = attempt(&s, seed, run, &mut ChaCha8Rng::seed_from_u64(0), None);
    match dry {
        Ok((_, writes)) => out.writes = writes,
        Err(e) => {
            out.violation = Some(format!("without a cut: {e}"));
            return out;
        }
    }
    let budget = rng.gen_range(1..=out.writes.max(1)) as i64;
    match attempt(&s, seed, run, &mut rng, Some(budget)) {
        Ok((report, _)) => {
            out.cuts = report.0;
            out.member_died = report.1;
        }
        Err(e) => out.violation = Some(e),
    }
    out
}

/// Create, fill, and reshape; with `budget`, the power goes after that many
/// member writes of the reshape, and after each cut the rig carries on as a
/// user would (assemble, read, `grow --continue`), cutting again at random.
/// Returns ((cuts, a member died), member writes of the reshape).
fn attempt(
    s: &Setup,
    seed: u64,
    run: u64,
    rng: &mut ChaCha8Rng,
    budget: Option<i64>,
) -> Result<((u32, bool), u64), String> {
    let n = s.members + s.change.spares;
    let members: Vec<Member> = (0..n)
        .map(|_| {
            Arc::new(FaultVolume::with_volatile_cache(MemVolume::new(
                MEMBER_BYTES,
            )))
        })
        .collect();
    let rig = Rig {
        all: Arc::new(std::sync::Mutex::new(members.clone())),
        members,
        budget: Arc::new(AtomicI64::new(i64::MAX)),
        dead: vec![false; n],
        exec: Arc::new(InOrder),
    };
    let mut rig = rig;
    let cut_seed = run_seed(seed, run);
    let devs = rig.devices(cut_seed);
    let spec = CreateSpec {
        level: s.level,
        layout: match (s.level, s.raid10) {
            (Level::Raid0, _) => Layout::Plain,
            (_, Some(l)) => l,
            _ => Layout::Parity(s.layout),
        },
        chunk_bytes: s.chunk,
        spares: 0,
        name: "reshape".into(),
        force: true,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let new: Vec<NewMember> = devs[..s.members]
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    let mut asm = create_with_executor(&spec, new, None, s.metadata, rig.exec.clone())
        .map_err(|e| format!("create: {e}"))?;
    if s.change.shrink && s.level == Level::Raid0 {
        // Room after the data for md's move up (at most a chunk per member
        // for one or two members fewer of at most six), as a member device
        // grown after the array was made leaves it: md keeps a RAID 0
        // member's data size, and refuses `--size` of a RAID 0.
        drop(asm);
        let room = s.chunk * s.members as u64 / 512;
        for d in &devs[..s.members] {
            let v = d.volume.as_ref();
            let mut sb = raidlab_md::Superblock::read_from(v)
                .map_err(|e| format!("{}: read the superblock: {e}", d.path))?
                .ok_or_else(|| format!("{}: no superblock after create", d.path))?;
            sb.data_size -= room;
            sb.size = sb.size.min(sb.data_size);
            sb.write_to(v)
                .map_err(|e| format!("{}: write the superblock: {e}", d.path))?;
        }
        asm = rig.assemble(cut_seed)?;
    } else if s.change.shrink && s.raid10.is_some() {
        if s.change.room {
            // Room as `mdadm --create --size` leaves it (what a user who
            // never grew the array has; `grow --size` is tested on its
            // own, `raidlab/tests/grow.rs`): the members are made with four chunks
            // (two rows of offset=2, the most md's move up takes) unused
            // after the data, before anything is written.
            drop(asm);
            for d in &devs[..s.members] {
                let v = d.volume.as_ref();
                let mut sb = raidlab_md::Superblock::read_from(v)
                    .map_err(|e| format!("{}: read the superblock: {e}", d.path))?
                    .ok_or_else(|| format!("{}: no superblock after create", d.path))?;
                sb.size -= 4 * s.chunk / 512;
                sb.write_to(v)
                    .map_err(|e| format!("{}: write the superblock: {e}", d.path))?;
            }
            asm = rig.assemble(cut_seed)?;
        }
    } else if let Some(unit) = s.change.cut_to {
        // Before anything is written, as a user would follow the engine's
        // refusal; the new space question does not arise (it shrinks).
        let size = asm.geometry.member_bytes / unit * unit;
        asm.grow_size(raidlab_raid::grow::SizeRequest::Bytes(size), true)
            .map_err(|e| format!("--size before the restripe: {e}"))?;
    } else if s.change.shrink {
        // Room after the data for md's move of the data offset up (at most
        // a chunk per member for one member fewer; of the larger chunk
        // when the chunk changes with it, mdadm's least common multiple of
        // the two stripes over the old data members being at most that),
        // in whole chunks of both sizes (md's rule for a new chunk).
        let unit = s.change.req.chunk_bytes.unwrap_or(s.chunk).max(s.chunk);
        let room = unit * s.members as u64;
        let size = asm.geometry.member_bytes.saturating_sub(room) / unit * unit;
        asm.grow_size(raidlab_raid::grow::SizeRequest::Bytes(size), true)
            .map_err(|e| format!("--size before the shrink: {e}"))?;
    }
    let data = {
        let a = asm.array().map_err(|e| format!("array: {e}"))?;
        let mut data = vec![0u8; a.size() as usize];
        let mut fill = ChaCha8Rng::seed_from_u64(cut_seed);
        fill.fill(&mut data[..]);
        a.write_at(&data, 0).map_err(|e| format!("fill: {e}"))?;
        a.flush().map_err(|e| format!("fill flush: {e}"))?;
        data
    };
    for d in &devs[s.members..] {
        asm.add(d.clone(), false)
            .map_err(|e| format!("add a spare: {e}"))?;
    }
    let writes_before = writes(&rig);
    rig.budget
        .store(budget.unwrap_or(i64::MAX), Ordering::SeqCst);
    let opts = RunOptions {
        use_maps: false,
        ..RunOptions::default()
    };
    let mut cuts = 0u32;
    let mut died = false;
    loop {
        match carry_on(&mut asm, s, opts.clone()) {
            Ok(()) => break,
            Err(e) if budget.is_none() => return Err(e),
            // With the power on for good, an error is the engine's.
            Err(e) if rig.budget.load(Ordering::SeqCst) > 0 && cuts >= MAX_CUTS => {
                return Err(format!("after {cuts} cut(s), with the power on: {e}"))
            }
            Err(_) => {}
        }
        // The power went (or the reshape refused after a death): restart
        // the members and assemble them as md would.
        cuts += 1;
        for m in &rig.members {
            m.restart();
        }
        if cuts >= MAX_CUTS || died {
            rig.budget.store(i64::MAX, Ordering::SeqCst);
        } else {
            let more = rng.gen_range(1..=4000);
            rig.budget.store(more, Ordering::SeqCst);
        }
        // (Not of a RAID 0: it has no redundancy, while it restripes as
        // much as before.)
        if !died && !matches!(s.level, Level::Raid4 | Level::Raid0) && rng.gen_ratio(1, 8) {
            // A member dies with the power: gone from now on.
            let k = rng.gen_range(0..s.members);
            rig.dead[k] = true;
            died = true;
        }
        if s.metadata == raidlab_md::MetadataVersion::V0_90 {
            // A 0.90 superblock torn by the cut (one checksum over 4 KiB,
            // eight sectors) does not load: md's `super_90_load` rejects
            // it and mdadm assembles without that member, as if it died.
            for k in 0..rig.members.len() {
                let v: &dyn Volume = rig.members[k].as_ref();
                if !rig.dead[k] && raidlab_md::Superblock::read_from(v).is_err() {
                    rig.dead[k] = true;
                    died = true;
                }
            }
        }
        let saved = rig.budget.swap(i64::MAX, Ordering::SeqCst);
        asm = rig.assemble(cut_seed)?;
        // Whatever the stage, the array reads the data from before.
        judge(&read_all(&asm)?, &data, &format!("after cut {cuts}"))?;
        rig.budget.store(saved, Ordering::SeqCst);
        if died {
            if asm.reshape().is_none() {
                // The cut came after the reshape's last commit: nothing is
                // left to carry on, and the array read right above.
                return Ok(((cuts, true), writes(&rig) - writes_before));
            }
            // Carrying on degraded is not built: it must refuse, and the
            // array still reads right (checked above).
            return match carry_on(&mut asm, s, opts.clone()) {
                Err(_) => {
                    rig.budget.store(i64::MAX, Ordering::SeqCst);
                    let asm = rig.assemble(cut_seed)?;
                    judge(&read_all(&asm)?, &data, "after the refusal")?;
                    Ok(((cuts, true), writes(&rig) - writes_before))
                }
                Ok(()) => Err("a reshape carried on with a member gone".into()),
            };
        }
    }
    let total = writes(&rig) - writes_before;
    rig.budget.store(i64::MAX, Ordering::SeqCst);
    let mut asm = rig.assemble(cut_seed)?;
    if asm.reshape().is_some() {
        return Err("the reshape is still recorded after it finished".into());
    }
    judge(&read_all(&asm)?, &data, "at the end")?;
    // A reshape that ended without reaching the shape asked (a shrink
    // that left every member in place, say) would still read right.
    if !reached(&asm, s) {
        return Err(format!(
            "at the end: {} members, chunk {}K, {:?}; asked {:?}",
            asm.geometry.raid_disks,
            asm.geometry.chunk_bytes >> 10,
            asm.geometry.layout,
            s.change.req
        ));
    }
    // A change that asks for no level keeps it (a RAID 0 is a RAID 0
    // again once its restripe as a RAID 4 ends).
    if s.change.req.level.is_none() && asm.geometry.level != s.level {
        return Err(format!(
            "at the end: a {} (was {}, asked {:?})",
            asm.geometry.level.name(),
            s.level.name(),
            s.change.req
        ));
    }
    if s.level == Level::Raid0 {
        // Nothing to check: no redundancy.
        return Ok(((cuts, died), total));
    }
    super::check_at_end(&mut asm, opts)?;
    Ok(((cuts, died), total))
}

/// Member writes so far (every member, through the fault layer).
fn writes(rig: &Rig) -> u64 {
    rig.members.iter().map(|m| m.stats().writes).sum()
}

/// Take the array from wherever it is to the shape asked: start the
/// reshape when none is recorded and the shape is not reached yet, carry
/// on a recorded one, then md's takeover to RAID 4 where asked.
fn carry_on(asm: &mut Assembly, s: &Setup, opts: RunOptions) -> Result<(), String> {
    if s.level == Level::Raid0 && asm.geometry.level == Level::Raid4 && asm.reshape().is_none() {
        // A RAID 0 shrink cut between md's end of the RAID 4 reshape and
        // the takeover back: a complete RAID 4 of one member more, which
        // the engine says `grow --level 0` finishes, as a user would.
        asm.raid0_takeover_raid45()
            .map_err(|e| format!("takeover back to RAID 0: {e}"))?;
    }
    if asm.reshape().is_none() && !reached(asm, s) {
        // A shrink accepts the array size the new members hold.
        let g = asm.geometry;
        let array_bytes = match (s.change.shrink, s.raid10) {
            (false, _) => None,
            // (Fewer chunks than the most: of the larger chunk when the
            // chunk changes too, as the array must be whole new chunks.)
            (true, Some(_)) => Some(
                raid10_holds(asm, &s.change.req)?
                    .checked_sub(
                        s.change.less_chunks * s.chunk.max(s.change.req.chunk_bytes.unwrap_or(0)),
                    )
                    .filter(|&b| b > 0)
                    .ok_or("a RAID 10 shrink to nothing")?,
            ),
            (true, None) => s
                .change
                .req
                .raid_devices
                .map(|n| (g.data_disks() - (g.raid_disks - n)) as u64 * g.member_bytes),
        };
        let plan = asm
            .reshape_check_sized(&s.change.req, 0, array_bytes)
            .map_err(|e| format!("reshape_check: {e}"))?;
        if plan.restripes() {
            asm.reshape_start(plan)
                .map_err(|e| format!("reshape_start: {e}"))?;
        } else if let Some(l) = s.change.req.level {
            asm.takeover(l).map_err(|e| format!("takeover: {e}"))?;
        }
    }
    if asm.reshape().is_some() {
        asm.reshape_run(opts, &mut |_| {})
            .map_err(|e| format!("reshape_run: {e}"))?;
    }
    if s.change.then_raid4 && asm.geometry.level == Level::Raid5 {
        asm.takeover(Level::Raid4)
            .map_err(|e| format!("takeover to RAID 4: {e}"))?;
    }
    Ok(())
}

/// The most a RAID 10's fewer members hold, as the engine's refusal without
/// `--array-size` names it to a user (`Assembly::raid10_shrink_holds`:
/// counting the move of the data offset, taken out of the component size
/// when the room after the data is short). The harness keeps no copy of
/// that rule.
fn raid10_holds(asm: &Assembly, req: &ReshapeRequest) -> Result<u64, String> {
    asm.raid10_shrink_holds(req).map_err(|e| e.to_string())
}

/// Whether the array has the shape the change asks for.
fn reached(asm: &Assembly, s: &Setup) -> bool {
    let g = asm.geometry;
    let r = &s.change.req;
    let level_ok = match (r.level, s.change.then_raid4) {
        (Some(Level::Raid4), true) => matches!(
            (g.level, g.layout),
            (Level::Raid4, _) | (Level::Raid5, Layout::Parity(ParityLayout::ParityLast))
        ),
        (Some(l), _) => g.level == l,
        (None, _) => true,
    };
    let layout_ok = r.layout.as_deref().map_or(true, |name| {
        Layout::parse(g.level, Some(name)).is_ok_and(|l| l == g.layout)
    });
    level_ok
        && layout_ok
        && r.raid_devices.map_or(true, |n| g.raid_disks == n)
        && r.chunk_bytes.map_or(true, |c| g.chunk_bytes == c)
}

/// Runs `first..first + runs` of `seed`.
pub fn reshape_sweep(seed: u64, first: u64, runs: u64) -> Vec<ReshapeRun> {
    (first..first + runs)
        .map(|r| reshape_run(seed, r))
        .collect()
}
