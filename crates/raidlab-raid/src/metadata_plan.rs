//! Plans for the engine's own metadata on the member devices: the
//! write-intent bitmap and the superblocks, written as data like every other
//! member I/O, so one executor carries them out (in parallel across members,
//! their flushes overlapping) and a simulator charges them in virtual time.
//!
//! It decides the shape of a durable metadata update: every write of the
//! update in one step, then a flush of every device written, in one step, so
//! nothing that depends on the update goes out before it is on stable
//! storage. It never decides what the metadata says (raidlab-md encodes it)
//! or which devices get it (the array does), and does no I/O.

use crate::exec::{Executor, Members};
use crate::plan::{MemberOp, Plan, Slice, Space, Step};
use raidlab_core::IoKind;

/// Carries out a device-space metadata plan on a table of devices: a running
/// array's executor, so that the log writes go where every other member I/O
/// goes (and a simulator sees them).
pub type DeviceRunner<'a> = &'a dyn Fn(&DeviceWrites, &Members) -> Result<(), crate::exec::Failed>;

/// Encoded metadata for several devices, gathered into one buffer, and the
/// plan that writes each piece at its place and makes it durable.
///
/// The plan is in [`Space::Device`]: offsets are bytes of the whole device,
/// and a member number is the position of the device in the table the plan
/// is run against (so one role may appear twice: a member and the device
/// replacing it).
#[derive(Debug, Default)]
pub struct DeviceWrites {
    bytes: Vec<u8>,
    /// Ranges made zero before any write of the plan goes out (md zeroes a
    /// log area with write-zeroes, then writes its header).
    zeros: Vec<MemberOp>,
    writes: Vec<MemberOp>,
    /// Writes to the members' data areas, not flushed by the plan (see
    /// [`DeviceWrites::data_area`]).
    data_area: bool,
}

impl DeviceWrites {
    /// Writes to the members' data areas (table = members by role), with no
    /// flush step: for a log replay, which writes what the log holds back to
    /// the members stripe by stripe and flushes once, before it lets the
    /// log go.
    pub fn data_area() -> DeviceWrites {
        DeviceWrites {
            data_area: true,
            ..DeviceWrites::default()
        }
    }

    /// `data` goes to byte `offset` of device `device` of the table.
    pub fn push(&mut self, device: usize, offset: u64, data: &[u8]) {
        let at = self.bytes.len();
        self.bytes.extend_from_slice(data);
        self.writes.push(MemberOp {
            kind: IoKind::Write,
            member: device,
            offset,
            length: data.len() as u64,
            buf: Slice::user(at, data.len()),
        });
    }

    /// `len` bytes at byte `offset` of device `device` become zeros (a
    /// write-zeroes), in a step of their own before the writes, so a write
    /// pushed over the same range lands on top of them.
    pub fn push_zeros(&mut self, device: usize, offset: u64, len: u64) {
        self.zeros.push(MemberOp {
            kind: IoKind::Zero,
            member: device,
            offset,
            length: len,
            buf: Slice::user(0, 0),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.zeros.is_empty()
    }

    /// The buffer the plan's writes take their bytes from (the plan's user
    /// buffer).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Carry the plan out on `devices` (the table its member numbers index)
    /// with `exec`: for metadata written outside a running array's write
    /// path (a superblock commit, a log's start, a rebuild's checkpoint),
    /// by the executor of whatever holds the devices (the assembly's, the
    /// journal's), so that a recording one sees it too.
    pub fn run(&self, exec: &dyn Executor, devices: &Members) -> raidlab_core::Result<()> {
        run(
            exec,
            &self.plan(),
            devices,
            crate::exec::UserBuf::Write(&self.bytes),
        )
    }

    /// `blocks` at ring sector `pos` of a journal (device `device` of the
    /// table), wrapping round the ring as md's journal does.
    pub fn push_journal_blocks(
        &mut self,
        device: usize,
        sb: &raidlab_md::Superblock,
        pos: u64,
        blocks: &[u8],
    ) -> raidlab_core::Result<()> {
        for (at, range) in raidlab_md::journal::place_blocks(sb, pos, blocks.len())? {
            self.push(device, at, &blocks[range]);
        }
        Ok(())
    }

    /// An empty partial parity log area (as at array start) for device
    /// `device` of the table, whose superblock is `sb`.
    pub fn push_empty_ppl(
        &mut self,
        device: usize,
        sb: &raidlab_md::Superblock,
    ) -> raidlab_core::Result<()> {
        // As md's ppl_write_empty_header: the whole area zeroed with
        // write-zeroes (no megabyte of zeros through the write path), then
        // the empty header at its start.
        let area = raidlab_md::ppl::area_len(sb)?;
        let at = raidlab_md::ppl::area_offset(sb, 0, area as usize)?;
        self.push_zeros(device, at, area);
        self.push(device, at, &raidlab_md::ppl::empty_header(sb));
        Ok(())
    }

    /// Every write in one step, then one flush per device written (no
    /// flush for [`DeviceWrites::data_area`] writes).
    pub fn plan(&self) -> Plan {
        let mut devices: Vec<usize> = self
            .zeros
            .iter()
            .chain(&self.writes)
            .map(|w| w.member)
            .collect();
        devices.sort_unstable();
        devices.dedup();
        let flushes = devices.into_iter().map(MemberOp::flush).collect();
        let mut steps = Vec::with_capacity(3);
        if !self.zeros.is_empty() {
            steps.push(Step::Io(self.zeros.clone()));
        }
        if !self.writes.is_empty() {
            steps.push(Step::Io(self.writes.clone()));
        }
        if !steps.is_empty() && !self.data_area {
            steps.push(Step::Io(flushes));
        }
        Plan {
            steps,
            scratch: Vec::new(),
            locks: Vec::new(),
            space: if self.data_area {
                Space::Data
            } else {
                Space::Device
            },
        }
    }
}

/// Read `(device, offset, length)` ranges of the table `devices` in one step,
/// with `exec`, into one buffer (the ranges end to end): what a
/// log replay's dry run compares with what it would write.
pub fn read_ranges(
    exec: &dyn Executor,
    devices: &Members,
    ranges: &[(usize, u64, usize)],
    space: Space,
) -> raidlab_core::Result<Vec<u8>> {
    let mut at = 0;
    let ops = ranges
        .iter()
        .map(|&(member, offset, len)| {
            let op = MemberOp {
                kind: IoKind::Read,
                member,
                offset,
                length: len as u64,
                buf: Slice::user(at, len),
            };
            at += len;
            op
        })
        .collect::<Vec<_>>();
    let mut out = vec![0u8; at];
    if !ops.is_empty() {
        let plan = Plan {
            steps: vec![Step::Io(ops)],
            space,
            ..Plan::default()
        };
        run(exec, &plan, devices, crate::exec::UserBuf::Read(&mut out))?;
    }
    Ok(out)
}

/// Flush devices `which` of the table `devices` (their caches to stable
/// storage), in one step, with `exec`: for work outside a running array's
/// write path (a rebuild's target, a scrub's rewrites, a journal's checkpoint).
pub fn flush_devices(
    exec: &dyn Executor,
    devices: &Members,
    which: impl IntoIterator<Item = usize>,
) -> raidlab_core::Result<()> {
    run(
        exec,
        &Plan::flushes(which),
        devices,
        crate::exec::UserBuf::Write(&[]),
    )
}

/// Flush every device of the table.
pub fn flush_all(exec: &dyn Executor, devices: &Members) -> raidlab_core::Result<()> {
    flush_devices(
        exec,
        devices,
        (0..devices.len()).filter(|&d| devices[d].is_some()),
    )
}

/// Run `plan` with `exec` and the selected parity engine (metadata plans
/// compute nothing; the trait wants one).
fn run(
    exec: &dyn Executor,
    plan: &Plan,
    devices: &Members,
    user: crate::exec::UserBuf<'_>,
) -> raidlab_core::Result<()> {
    exec.run(
        plan,
        devices,
        raidlab_parity::selected(),
        user,
        crate::exec::Hooks::NONE,
    )
    .map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_go_out_together_then_every_written_device_is_flushed_once() {
        let mut w = DeviceWrites::default();
        w.push(2, 4096, &[1; 512]);
        w.push(0, 8192, &[2; 1024]);
        w.push(2, 12288, &[3; 512]);
        let plan = w.plan();
        assert_eq!(plan.space, Space::Device);
        // A copy (the recording executor keeps copies) is in the same space.
        assert_eq!(plan.clone().space, Space::Device);
        let mut copy = Plan::default();
        copy.clone_from(&plan);
        assert_eq!(copy, plan);
        assert_eq!(plan.steps.len(), 2);
        let Step::Io(writes) = &plan.steps[0] else {
            panic!("first step is not I/O")
        };
        assert_eq!(
            writes
                .iter()
                .map(|o| (o.kind, o.member, o.offset, o.length, o.buf.offset))
                .collect::<Vec<_>>(),
            vec![
                (IoKind::Write, 2, 4096, 512, 0),
                (IoKind::Write, 0, 8192, 1024, 512),
                (IoKind::Write, 2, 12288, 512, 1536),
            ]
        );
        let Step::Io(flushes) = &plan.steps[1] else {
            panic!("second step is not I/O")
        };
        assert!(flushes.iter().all(|o| o.kind == IoKind::Flush));
        assert_eq!(
            flushes.iter().map(|o| o.member).collect::<Vec<_>>(),
            vec![0, 2]
        );
        assert_eq!(&w.bytes()[512..1536], &[2; 1024][..]);
    }

    #[test]
    fn data_area_writes_are_planned_in_data_space_without_a_flush() {
        let mut w = DeviceWrites::data_area();
        w.push(1, 0, &[7; 4096]);
        let plan = w.plan();
        assert_eq!(plan.space, Space::Data);
        assert_eq!(plan.steps.len(), 1);
        assert_eq!(plan.op_counts(), (0, 1));
    }

    #[test]
    fn zeros_go_out_in_a_step_before_the_writes_and_their_devices_are_flushed() {
        let mut w = DeviceWrites::default();
        w.push_zeros(1, 4096, 1 << 20);
        w.push(1, 4096, &[5; 4096]);
        w.push_zeros(3, 0, 8192);
        let plan = w.plan();
        let kinds: Vec<Vec<(IoKind, usize)>> = plan
            .steps
            .iter()
            .map(|s| match s {
                Step::Io(ops) => ops.iter().map(|o| (o.kind, o.member)).collect(),
                _ => panic!("a metadata plan computes nothing"),
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                vec![(IoKind::Zero, 1), (IoKind::Zero, 3)],
                vec![(IoKind::Write, 1)],
                vec![(IoKind::Flush, 1), (IoKind::Flush, 3)],
            ]
        );
        assert!(!w.is_empty());
    }

    #[test]
    fn nothing_to_write_is_an_empty_plan() {
        assert!(DeviceWrites::default().plan().steps.is_empty());
    }
}
