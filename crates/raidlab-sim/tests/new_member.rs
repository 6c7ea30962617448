//! A simulated rebuild's new member is one raidlab's `add` made: a device
//! in the started array's assembly whose md superblock says what `raidlab
//! add` writes (the array's UUID and events, a new device number, the role
//! being rebuilt, a recovery offset from 0, or the position a resumed
//! rebuild resumes from), every member in service's
//! superblock committed with it, and the engine rebuilding onto its data
//! area. The add's writes reach no device model.

use raidlab_core::IoKind;
use raidlab_layout::{Geometry, Layout, Level};
use raidlab_md::superblock::{feature, Role};
use raidlab_md::Superblock;
use raidlab_raid::assemble::MemberState;
use raidlab_sim::array::{ArraySpec, FaultSpec, RebuildSpec, TaskArray, DATA_OFFSET};
use raidlab_sim::device::{Device, SEC};
use raidlab_sim::faults::Schedule;
use raidlab_sim::host::HostCost;
use raidlab_sim::ideal::Ideal;
use raidlab_sim::workload::{run, Job, Pattern};

const MEMBER: u64 = 8 << 20;
const CHUNK: u64 = 64 << 10;

fn ideal() -> Box<dyn Device> {
    Box::new(Ideal::new(DATA_OFFSET + MEMBER, 50.0, 200.0))
}

fn spec(rebuild: Option<RebuildSpec>, failed: Option<usize>) -> ArraySpec {
    let g = Geometry::new(
        Level::Raid5,
        Layout::parse(Level::Raid5, None).unwrap(),
        CHUNK,
        4,
        MEMBER,
    )
    .unwrap();
    ArraySpec {
        name: "n".into(),
        geometry: g,
        members: (0..4).map(|r| (Some(r) != failed).then(ideal)).collect(),
        stripe_cache: None,
        host: HostCost::default(),
        rebuild,
    }
}

/// The new member's superblock as read from its device, and the newest
/// superblock of the members in service (their events, after the add's
/// commit).
fn new_member(sim: &TaskArray, role: usize) -> (Superblock, Superblock) {
    let asm = sim.started().asm();
    let m = asm
        .members
        .iter()
        .find(|m| m.device.path.contains("new member"))
        .expect("the new member is among the assembly's members");
    assert_eq!(m.role, Some(role));
    assert_eq!(m.state, MemberState::Rebuilding);
    let sb = Superblock::read_from(m.device.volume.as_ref())
        .unwrap()
        .expect("add wrote an md superblock on the new member");
    let live = asm
        .members
        .iter()
        .filter(|o| !o.device.path.contains("new member") && o.state == MemberState::Active)
        .map(|o| {
            Superblock::read_from(o.device.volume.as_ref())
                .unwrap()
                .unwrap()
        })
        .max_by_key(|s| s.events)
        .unwrap();
    (sb, live)
}

fn assert_as_add_writes(sb: &Superblock, live: &Superblock, role: usize) {
    assert_eq!(sb.set_uuid, live.set_uuid);
    assert_eq!(sb.role(), Role::Active(role as u16), "{sb:?}");
    assert_eq!(live.dev_roles[sb.dev_number as usize], role as u16);
    assert_eq!(
        sb.events, live.events,
        "committed with the members in service"
    );
    assert!(sb.feature_map & feature::RECOVERY_OFFSET != 0);
    assert_eq!(
        sb.recovery_offset, 0,
        "a new member is rebuilt from its start"
    );
    assert_ne!(sb.device_uuid, live.device_uuid, "a device of its own");
    assert_eq!(sb.data_offset * 512, DATA_OFFSET);
}

#[test]
fn a_rebuild_from_the_start_rebuilds_a_member_raidlab_add_made() {
    let rebuild = RebuildSpec {
        role: 2,
        device: ideal(),
        max_rate: None,
        from: 0,
    };
    let mut sim = TaskArray::new(spec(Some(rebuild), Some(2))).unwrap();
    sim.keep_ops();
    let (sb, live) = new_member(&sim, 2);
    assert_as_add_writes(&sb, &live, 2);
    // The add's writes were set aside: nothing reached a device model yet.
    assert!(sim.member_ops().unwrap().ops.is_empty());
    let mut job = Job::new(Pattern::Random, 4096, true, 1, 1, 3 * MEMBER);
    job.duration = SEC;
    run(&mut sim, &job, 0).unwrap();
    assert!(sim.errors().is_empty(), "{:?}", sim.errors());
    assert!(sim.engine().recovery().is_none(), "the rebuild ended");
    assert_eq!(sim.engine().live(), vec![true; 4]);
    // Role 2's device model got the rebuild's writes: the whole data area.
    let written: u64 = sim
        .member_ops()
        .unwrap()
        .ops
        .iter()
        .filter(|o| o.member == 2 && o.kind == IoKind::Write)
        .map(|o| o.len)
        .sum();
    assert_eq!(written, MEMBER);
}

/// A resumed rebuild (`rebuild-from=`) is one the engine resumes: the new
/// member's superblock records the position, as the engine's checkpoint of
/// a rebuild stopped there writes it, and the engine rebuilds only what lies
/// past it.
#[test]
fn a_resumed_rebuild_resumes_where_the_new_members_superblock_says() {
    let from = 3 << 20;
    let rebuild = RebuildSpec {
        role: 2,
        device: ideal(),
        max_rate: None,
        from,
    };
    let mut sim = TaskArray::new(spec(Some(rebuild), Some(2))).unwrap();
    sim.keep_ops();
    let (sb, live) = new_member(&sim, 2);
    assert_eq!(sb.set_uuid, live.set_uuid);
    assert_eq!(sb.role(), Role::Active(2));
    assert!(sb.feature_map & feature::RECOVERY_OFFSET != 0);
    assert_eq!(
        sb.recovery_offset * 512,
        from,
        "the superblock says where the rebuild resumes"
    );
    let mut job = Job::new(Pattern::Random, 4096, true, 1, 1, 3 * MEMBER);
    job.duration = SEC;
    run(&mut sim, &job, 0).unwrap();
    assert!(sim.errors().is_empty(), "{:?}", sim.errors());
    assert!(sim.engine().recovery().is_none(), "the rebuild ended");
    let written: u64 = sim
        .member_ops()
        .unwrap()
        .ops
        .iter()
        .filter(|o| o.member == 2 && o.kind == IoKind::Write)
        .map(|o| o.len)
        .sum();
    assert_eq!(written, MEMBER - from, "only what lies past the position");
}

#[test]
fn a_spare_arriving_mid_run_is_added_by_raidlab_add_into_the_failed_role() {
    let faults = ["fail=1@10ms", "spare=20ms"].map(String::from);
    let schedule = Schedule::parse(&faults).unwrap();
    let mut sim = TaskArray::with_faults(
        spec(None, None),
        Some(FaultSpec {
            schedule,
            spare: Some(ideal()),
            max_rate: None,
        }),
    )
    .unwrap();
    let mut job = Job::new(Pattern::Random, 4096, true, 1, 1, 3 * MEMBER);
    job.duration = SEC;
    run(&mut sim, &job, 0).unwrap();
    let r = sim.fault_report().unwrap();
    let rb = r.rebuild.clone().unwrap_or_else(|| panic!("{r:?}"));
    assert!(rb.error.is_none(), "{:?}", rb.error);
    assert_eq!(rb.role, 1);
    let (sb, live) = new_member(&sim, 1);
    assert_as_add_writes(&sb, &live, 1);
    assert!(sim.errors().is_empty(), "{:?}", sim.errors());
}
