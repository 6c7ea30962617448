//! Managing an array while it serves I/O: writers keep writing (unaligned,
//! overlapping stripes) while members fail, a hot spare takes over and is
//! rebuilt, a member is added into a missing role, or replaced; afterwards the
//! array holds exactly what was written, a check finds no mismatch, and the
//! superblocks assemble the same array again.

use raidlab_core::Volume;
use raidlab_devices::{Clock, FaultVolume, MemVolume};
use raidlab_layout::{Layout, Level, ParityLayout, Raid10Layout};
use raidlab_raid::assemble::{
    create, create_with_journal, Assembly, CreateSpec, Device, MemberState, NewMember,
};
use raidlab_raid::live::LiveArray;
use raidlab_raid::recovery::RunOptions;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

const MEMBER: u64 = 6 << 20;
/// Each writer owns every WRITERS-th block of this size: no two threads write
/// the same byte, so the expected contents are known whatever the order.
const BLOCK: u64 = 48 << 10;
const WRITERS: u64 = 2;

fn device(i: usize) -> Device {
    Device {
        path: format!("mem{i}"),
        volume: Arc::new(MemVolume::new(MEMBER)),
    }
}

/// How the array keeps its redundancy consistent across a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    Resync,
    Bitmap,
    /// md's partial parity log on the members (RAID 5).
    Ppl,
    /// md's write journal on a device of its own.
    Journal,
}

impl Policy {
    fn from_bitmap(bitmap: bool) -> Policy {
        if bitmap {
            Policy::Bitmap
        } else {
            Policy::Resync
        }
    }
}

fn spec(level: Level, layout: Layout, spares: usize, policy: Policy) -> CreateSpec {
    CreateSpec {
        level,
        layout,
        chunk_bytes: if level == Level::Raid1 { 0 } else { 32 << 10 },
        spares,
        name: "live".into(),
        force: false,
        bitmap: policy == Policy::Bitmap,
        bitmap_chunk: None,
        ppl: policy == Policy::Ppl,
    }
}

/// The rebuild's clock in these tests: while closed, a rate-limited rebuild
/// stops at its first pause (each sleep comes back at once without moving
/// time, and the rebuild sleeps again), so "a rebuild is still running" holds
/// however slow or fast the machine is; open, sleeps move virtual time and the
/// rebuild runs at full speed.
#[derive(Debug, Default)]
struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
    now: Mutex<Duration>,
}

impl Clock for Gate {
    fn now(&self) -> Duration {
        *self.now.lock().unwrap()
    }
    fn sleep(&self, d: Duration) {
        let open = self.open.lock().unwrap();
        if *open {
            drop(open);
            *self.now.lock().unwrap() += d;
            return;
        }
        // Closed: back without moving time (the rebuild checks for a cancel).
        let _ = self
            .cv
            .wait_timeout(open, Duration::from_millis(10))
            .unwrap();
    }
}

impl Gate {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }
}

struct Running {
    gate: Arc<Gate>,
    live: Arc<LiveArray>,
    devs: Vec<Device>,
    model: Arc<Mutex<Vec<u8>>>,
    quit: Arc<AtomicBool>,
    writes: Arc<AtomicU64>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// Create the array (members `n`, spares), fill it, and start the writers.
fn start(level: Level, layout: Layout, n: usize, spares: usize, bitmap: bool) -> Running {
    start_on(level, layout, n, spares, bitmap, 1)
}

/// [`start`] with the writers kept to the first `1/part` of the array.
fn start_on(
    level: Level,
    layout: Layout,
    n: usize,
    spares: usize,
    bitmap: bool,
    part: u64,
) -> Running {
    let devs: Vec<Device> = (0..n + spares).map(device).collect();
    start_devs(
        level,
        layout,
        devs,
        spares,
        Policy::from_bitmap(bitmap),
        part,
    )
}

/// [`start_on`] with the devices given (members first, then spares).
fn start_devs(
    level: Level,
    layout: Layout,
    mut devs: Vec<Device>,
    spares: usize,
    policy: Policy,
    part: u64,
) -> Running {
    let n = devs.len() - spares;
    let new = |d: &Device| NewMember {
        device: d.clone(),
        zeroed: true,
    };
    let members = devs.iter().map(new).collect();
    let spec = spec(level, layout, spares, policy);
    let mut asm = if policy == Policy::Journal {
        let journal = Device {
            path: "journal".into(),
            volume: Arc::new(MemVolume::new(4 << 20)),
        };
        devs.push(journal.clone());
        create_with_journal(&spec, members, Some(new(&journal))).unwrap()
    } else {
        create(&spec, members).unwrap()
    };
    asm.start_journal().unwrap();
    asm.start_ppl().unwrap();
    asm.mark_dirty().unwrap();
    let array = Arc::new(asm.array().unwrap());
    let mut rng = ChaCha8Rng::seed_from_u64(n as u64);
    let data: Vec<u8> = (0..array.size()).map(|_| rng.gen()).collect();
    array.write_at(&data, 0).unwrap();
    let live = LiveArray::new(asm, array);
    let gate = Arc::new(Gate::default());
    live.set_clock(gate.clone());
    let model = Arc::new(Mutex::new(data));
    let quit = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let threads = (0..WRITERS)
        .map(|t| {
            let (live, model, quit, writes) =
                (live.clone(), model.clone(), quit.clone(), writes.clone());
            std::thread::spawn(move || {
                let array = live.array().clone();
                let blocks = array.size() / BLOCK / part;
                let mut rng = ChaCha8Rng::seed_from_u64(100 + t);
                while !quit.load(Ordering::Relaxed) {
                    let b = rng.gen_range(0..blocks / WRITERS) * WRITERS + t;
                    let off = b * BLOCK + rng.gen_range(0..BLOCK - 1);
                    let len = rng.gen_range(1..=(b + 1) * BLOCK - off);
                    let buf: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                    array.write_at(&buf, off).unwrap();
                    model.lock().unwrap()[off as usize..(off + len) as usize].copy_from_slice(&buf);
                    if rng.gen_ratio(1, 8) {
                        array.flush().unwrap();
                    }
                    writes.fetch_add(1, Ordering::Relaxed);
                    // A read of the writer's own block must see what it wrote,
                    // degraded or not, rebuilt or not.
                    let mut back = vec![0u8; len as usize];
                    array.read_at(&mut back, off).unwrap();
                    assert_eq!(back, buf, "writer {t}: read back at {off}+{len}");
                }
            })
        })
        .collect();
    Running {
        gate,
        live,
        devs,
        model,
        quit,
        writes,
        threads,
    }
}

impl Running {
    /// Let a paused rebuild go on, and wait until no rebuild runs or waits
    /// (a minute at most: only a hang takes that long).
    fn settle(&self) {
        self.gate.open();
        let t = Instant::now();
        loop {
            let pending = self.live.with_assembly(|a| !a.rebuilding().is_empty());
            if !self.live.rebuilding() && !pending {
                return;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "rebuild did not finish: {:?}",
                self.live.status()
            );
            for m in self.live.poll() {
                eprintln!("poll: {m}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A rebuild is under way while the writers write; it must then finish
    /// without error.
    fn rebuild_completes(&self, label: &str) {
        let st = self.live.status().rebuild.expect("a rebuild runs");
        assert!(st.running && st.done < st.total, "{label}: {st:?}");
        self.settle();
        let st = self.live.status().rebuild.unwrap();
        assert!(st.error.is_none() && st.done == st.total, "{label}: {st:?}");
    }

    /// Let the writers run until they made `n` more writes.
    fn let_write(&self, n: u64) {
        let until = self.writes.load(Ordering::Relaxed) + n;
        let t = Instant::now();
        while self.writes.load(Ordering::Relaxed) < until {
            // A writer that stopped (its read-back failed) stops the count.
            assert!(
                self.threads.iter().all(|t| !t.is_finished()),
                "a writer stopped"
            );
            assert!(t.elapsed() < Duration::from_secs(60), "writers stalled");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Stop the writers; check contents, a clean check, and the superblocks.
    fn finish(self, label: &str) {
        self.gate.open();
        self.quit.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        let array = self.live.array().clone();
        let model = self.model.lock().unwrap().clone();
        let mut got = vec![0u8; array.size() as usize];
        array.read_at(&mut got, 0).unwrap();
        assert!(
            got == model,
            "{label}: contents differ after the live changes"
        );
        let report = self
            .live
            .scrub(false, RunOptions::default(), &mut |_| {})
            .unwrap();
        assert_eq!(report.mismatch_sectors, 0, "{label}: {:?}", report.findings);
        assert!(
            report.missing_roles.is_empty(),
            "{label}: still degraded: {:?}",
            report.missing_roles
        );
        array.flush().unwrap();
        self.live.shutdown();
        let mut asm = self.live.into_assembly().unwrap();
        asm.absorb_bitmap(&array);
        asm.mark_clean(true).unwrap();
        // The superblocks alone give the same array: every member we failed is
        // faulty, every rebuilt one active, and the data is the same.
        let again = Assembly::assemble(self.devs.clone()).unwrap();
        assert!(again.missing().is_empty(), "{label}: {:?}", again.missing());
        let mut back = vec![0u8; array.size() as usize];
        again.array().unwrap().read_at(&mut back, 0).unwrap();
        assert!(back == model, "{label}: contents differ after reassembly");
    }
}

/// The generation of member `index`'s partial parity log (log writes since
/// it was started), which must be valid.
fn log_generation(r: &Running, index: usize) -> u64 {
    let (dev, sb, uuid) = r.live.with_assembly(|a| {
        let m = &a.members[index];
        (m.device.volume.clone(), m.sb.clone(), a.uuid)
    });
    let area = raidlab_md::ppl::read_area(dev.as_ref(), &sb)
        .unwrap()
        .expect("a PPL area");
    raidlab_md::ppl::scan(&area, raidlab_md::ppl::signature(&uuid))
        .expect("a valid log on the member")
        .header
        .generation
}

/// Member `index` holds a valid partial parity log that has been written to.
fn assert_logged_to(r: &Running, index: usize, label: &str) {
    assert!(log_generation(r, index) > 0, "{label}: never logged to");
}

fn ls() -> Layout {
    Layout::Parity(ParityLayout::LeftSymmetric)
}

fn state_of(live: &LiveArray, path: &str) -> MemberState {
    live.with_assembly(|a| {
        a.members
            .iter()
            .find(|m| m.device.path == path)
            .unwrap()
            .state
    })
}

/// Rate-limit the rebuild: with the gate closed it pauses after its first
/// step until the test lets it go on (`settle`), so the writers overlap it.
fn slow(live: &LiveArray) {
    live.set_max_rate(Some(4 << 20));
}

#[test]
fn hot_spare_takes_over_a_failed_member_while_writing() {
    let cases: Vec<(Level, Layout, usize, usize, bool)> = vec![
        (Level::Raid5, ls(), 4, 1, false),
        (Level::Raid5, ls(), 4, 1, true),
        (
            Level::Raid5,
            Layout::Parity(ParityLayout::RightAsymmetric),
            3,
            1,
            false,
        ),
        (Level::Raid6, ls(), 5, 2, false),
        (
            Level::Raid4,
            Layout::Parity(ParityLayout::ParityLast),
            4,
            1,
            false,
        ),
        (Level::Raid1, Layout::Plain, 2, 1, false),
        (
            Level::Raid10,
            Layout::Raid10(Raid10Layout::from_name("n2").unwrap()),
            4,
            1,
            false,
        ),
        (
            Level::Raid10,
            Layout::Raid10(Raid10Layout::from_name("f2").unwrap()),
            3,
            1,
            true,
        ),
        (
            Level::Raid10,
            Layout::Raid10(Raid10Layout::from_name("o2").unwrap()),
            4,
            1,
            false,
        ),
    ];
    for (level, layout, n, spares, bitmap) in cases {
        let label = format!("{} {} bitmap={bitmap}", level.name(), layout.name());
        let r = start(level, layout, n, spares, bitmap);
        slow(&r.live);
        r.let_write(20);
        // RAID 6 loses two members, the second while the first is rebuilt.
        let victims: Vec<usize> = if level == Level::Raid6 {
            vec![1, 3]
        } else {
            vec![1]
        };
        for (k, &v) in victims.iter().enumerate() {
            let said = r.live.fail(&format!("mem{v}")).unwrap();
            assert!(said.contains("hot spare"), "{label}: {said}");
            assert_eq!(state_of(&r.live, &format!("mem{v}")), MemberState::Faulty);
            let spare = format!("mem{}", n + k);
            assert!(
                matches!(state_of(&r.live, &spare), MemberState::Rebuilding),
                "{label}: {spare} is {:?}",
                state_of(&r.live, &spare)
            );
            r.let_write(30);
        }
        r.rebuild_completes(&label);
        r.let_write(20);
        r.finish(&label);
    }
}

/// Arrays that log their writes rebuild while serving too: with md's partial
/// parity log the new member gets a log of its own, which writes below the
/// checkpoint whose parity it holds log to; with a write journal the journal
/// carries the new member's share like any member's.
#[test]
fn logged_arrays_rebuild_a_hot_spare_while_writing() {
    for (level, n, policy) in [
        (Level::Raid5, 4, Policy::Ppl),
        (Level::Raid5, 4, Policy::Journal),
        (Level::Raid6, 5, Policy::Journal),
    ] {
        let label = format!("{} {policy:?}", level.name());
        let devs: Vec<Device> = (0..n + 1).map(device).collect();
        let r = start_devs(level, ls(), devs, 1, policy, 1);
        slow(&r.live);
        r.let_write(20);
        let said = r.live.fail("mem1").unwrap();
        assert!(said.contains("hot spare"), "{label}: {said}");
        r.let_write(30);
        r.rebuild_completes(&label);
        assert_eq!(state_of(&r.live, &format!("mem{n}")), MemberState::Active);
        r.let_write(20);
        if policy == Policy::Ppl {
            // Writes whose parity is on the new member logged there, not on
            // the failed member's device.
            assert_logged_to(&r, n, &label);
        }
        r.finish(&label);
    }
}

/// A rebuild stopped while the array goes on serving (its member failed) keeps
/// no position: the member misses every write from then on, so a position kept
/// would let a later rebuild of it trust stale blocks.
#[test]
fn a_rebuild_stopped_while_serving_keeps_no_position() {
    let r = start(Level::Raid5, ls(), 4, 1, false);
    slow(&r.live);
    r.live.fail("mem1").unwrap();
    let t = Instant::now();
    while r.live.status().rebuild.expect("a rebuild runs").done == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the rebuild never moved"
        );
        r.let_write(1);
    }
    let st = r.live.status().rebuild.unwrap();
    assert!(st.running && st.done < st.total, "{st:?}");
    r.live.fail("mem4").unwrap();
    let offset = r.live.with_assembly(|a| a.members[4].sb.recovery_offset);
    assert_eq!(offset, 0);
    // Failing a faulty member again is mdadm's no-op, not an error.
    let events = r.live.with_assembly(|a| a.members[0].sb.events);
    let said = r.live.fail("mem4").unwrap();
    assert!(said.contains("already faulty"), "{said}");
    assert_eq!(r.live.with_assembly(|a| a.members[0].sb.events), events);
    r.quit.store(true, Ordering::Relaxed);
}

#[test]
fn a_member_added_into_a_missing_role_is_rebuilt_while_writing() {
    for (level, layout, n) in [
        (Level::Raid5, ls(), 4),
        (Level::Raid6, ls(), 4),
        (
            Level::Raid10,
            Layout::Raid10(Raid10Layout::from_name("n2").unwrap()),
            4,
        ),
    ] {
        let label = format!("{} {}", level.name(), layout.name());
        let mut r = start(level, layout, n, 0, false);
        slow(&r.live);
        r.let_write(10);
        r.live.fail("mem2").unwrap();
        r.let_write(20);
        r.live.remove("mem2").unwrap();
        let new = device(9);
        r.devs.push(new.clone());
        let said = r.live.add(new, false, true).unwrap();
        assert!(said.contains("into missing role 2"), "{label}: {said}");
        r.let_write(20);
        r.settle();
        assert_eq!(state_of(&r.live, "mem9"), MemberState::Active);
        r.finish(&label);
    }
}

#[test]
fn a_member_is_replaced_while_writing() {
    for (level, layout, n, policy) in [
        (Level::Raid5, ls(), 4, Policy::Resync),
        (Level::Raid5, ls(), 4, Policy::Ppl),
        (Level::Raid6, ls(), 5, Policy::Resync),
        (Level::Raid1, Layout::Plain, 2, Policy::Resync),
    ] {
        let label = format!("{} {} {policy:?}", level.name(), layout.name());
        let devs: Vec<Device> = (0..n).map(device).collect();
        let mut r = start_devs(level, layout, devs, 0, policy, 1);
        slow(&r.live);
        r.let_write(10);
        let new = device(7);
        r.devs.push(new.clone());
        let said = r.live.replace("mem0", new, false, true).unwrap();
        assert!(said.contains("replacing"), "{label}: {said}");
        assert_eq!(state_of(&r.live, "mem7"), MemberState::Replacing);
        r.let_write(30);
        r.settle();
        assert_eq!(state_of(&r.live, "mem7"), MemberState::Active);
        assert_eq!(state_of(&r.live, "mem0"), MemberState::Faulty);
        if policy == Policy::Ppl {
            // From now on the role's log writes go to the new member alone.
            let (old, new) = (log_generation(&r, 0), log_generation(&r, n));
            r.let_write(100);
            assert_eq!(
                log_generation(&r, 0),
                old,
                "{label}: still logged to the old member"
            );
            assert!(
                log_generation(&r, n) > new,
                "{label}: not logged to the new member"
            );
        }
        r.finish(&label);
    }
}

/// The member being replaced leaves halfway through the copy, failed by hand
/// or by failing writes: the replacement carries on as a rebuild of the role
/// (as md's does), and ends up with every write, including those made after the
/// old member left. Before, the copy went on from the old member, which no
/// longer took writes, and the finished replacement served stale blocks.
#[test]
fn a_replacement_whose_old_member_fails_carries_on_as_a_rebuild() {
    for (level, layout, n, policy) in [
        (Level::Raid5, ls(), 4, Policy::Resync),
        (Level::Raid5, ls(), 4, Policy::Ppl),
        (Level::Raid6, ls(), 5, Policy::Resync),
        (Level::Raid1, Layout::Plain, 2, Policy::Resync),
        (
            Level::Raid10,
            Layout::Raid10(Raid10Layout::from_name("n2").unwrap()),
            4,
            Policy::Resync,
        ),
    ] {
        for by_hand in [true, false] {
            let label = format!(
                "{} {} {policy:?} failed by hand: {by_hand}",
                level.name(),
                layout.name()
            );
            let old = Arc::new(FaultVolume::new(MemVolume::new(MEMBER)));
            let mut devs: Vec<Device> = (0..n).map(device).collect();
            devs[0] = Device {
                path: "mem0".into(),
                volume: old.clone(),
            };
            let mut r = start_devs(level, layout, devs, 0, policy, 1);
            // Slow enough that the old member leaves well before the copy ends.
            slow(&r.live);
            r.let_write(10);
            let new = device(7);
            r.devs.push(new.clone());
            r.live.replace("mem0", new, false, true).unwrap();
            r.let_write(5);
            let st = r.live.status().rebuild.expect("the copy runs");
            assert!(
                st.kind == "replace" && st.done <= st.total / 2,
                "{label}: {st:?}"
            );
            if by_hand {
                let said = r.live.fail("mem0").unwrap();
                assert!(said.contains("carries on as a rebuild"), "{label}: {said}");
            } else {
                // Writes to its data area fail from now on; reads still work
                // and return what it held before.
                let data = r.live.with_assembly(|a| a.members[0].sb.data_offset * 512);
                old.fail_writes(data..MEMBER);
                let t = Instant::now();
                while state_of(&r.live, "mem0") != MemberState::Faulty {
                    assert!(
                        t.elapsed() < Duration::from_secs(60),
                        "{label}: mem0 never failed"
                    );
                    r.let_write(1);
                    r.live.poll();
                }
            }
            assert_eq!(state_of(&r.live, "mem0"), MemberState::Faulty, "{label}");
            // By hand, the switch happens under the assembly's lock, so the copy
            // cannot have finished. A failed write switches the running array at
            // once and the superblocks at the next poll; the rebuild may finish
            // in between.
            let now = state_of(&r.live, "mem7");
            assert!(
                now == MemberState::Rebuilding || (!by_hand && now == MemberState::Active),
                "{label}: mem7 is {now:?}"
            );
            // Writes after the old member left, while the rest is rebuilt.
            r.let_write(40);
            r.settle();
            let st = r.live.status().rebuild.unwrap();
            assert!(
                st.kind == "rebuild" && st.error.is_none(),
                "{label}: {st:?}"
            );
            assert_eq!(state_of(&r.live, "mem7"), MemberState::Active, "{label}");
            r.finish(&label);
        }
    }
}

#[test]
fn failing_a_member_the_array_cannot_lose_changes_nothing() {
    let r = start(Level::Raid5, ls(), 4, 0, false);
    r.live.fail("mem1").unwrap();
    let events = r.live.with_assembly(|a| a.events);
    let e = r.live.fail("mem2").unwrap_err();
    assert!(e.to_string().contains("unable to serve"), "{e}");
    assert_eq!(r.live.with_assembly(|a| a.events), events);
    assert_eq!(state_of(&r.live, "mem2"), MemberState::Active);
    assert!(r.live.array().live()[2]);
    // A check has nothing to compare on a RAID 5 missing a member.
    assert!(r
        .live
        .scrub(false, RunOptions::default(), &mut |_| {})
        .is_err());
    r.quit.store(true, Ordering::Relaxed);
    for t in r.threads {
        t.join().unwrap();
    }
}

#[test]
fn check_while_writing_finds_corruption_and_repair_fixes_it() {
    // The writers keep to the first half; a parity page in the second half is
    // corrupted, so what the check must find is known exactly.
    let r = start_on(Level::Raid6, ls(), 5, 0, false, 2);
    r.let_write(10);
    let g = r.live.array().geometry().to_owned();
    let stripe = g.member_bytes / g.chunk_bytes - 3;
    let p = g.stripe(stripe).p;
    let area = r
        .live
        .with_assembly(|a| a.area(a.slots[p].unwrap()).unwrap());
    area.write_at(&[0x5a; 4096], stripe * g.chunk_bytes + 8192)
        .unwrap();
    let report = r
        .live
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(report.mismatch_sectors, 8, "{:?}", report.findings);
    assert_eq!(report.findings[0].role, p);
    let repaired = r
        .live
        .scrub(true, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert!(repaired.repaired);
    assert_eq!(repaired.mismatch_sectors, 8);
    r.let_write(20);
    // finish() checks again: nothing left.
    r.finish("RAID 6 repaired");
}
