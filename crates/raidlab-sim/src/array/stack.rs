//! A simulated array's birth through raidlab's own stack: its members are
//! sparse in-memory volumes of the device models' sizes, `create` writes
//! their md superblocks (and bitmap) as `mdadm --create` would, the real
//! assembly reads them back, and `lifecycle::Started` starts the array (its
//! refusals, logs, dirty mark, stripe cache) with the simulator's clock.
//!
//! Decides: what the configuration asks `create` for (level, layout, chunk,
//! the bitmap, md's data offset of [`DATA_OFFSET`] and the spec's member
//! size, so the device models see the data where the spec placed it) and
//! that the set-up's own I/O (the superblocks written by create and by the
//! start) runs in memory at no virtual time, before the workload. A
//! rebuild's new member is born the same way ([`add_member`]): a sparse
//! device given to the assembly's real `add` (`raidlab add`'s), its
//! superblock and the others' commit written in memory by an in-order
//! executor lent to the assembly for the add, off the run's. It never builds a superblock, bitmap or array itself, and never
//! decides what the engine does once started (which role a new member takes
//! is `add`'s).

use super::{ArraySpec, DATA_OFFSET};
use raidlab_core::Volume;
use raidlab_devices::SparseMemVolume;
use raidlab_md::MetadataVersion;
use raidlab_parity::Engine;
use raidlab_raid::assemble::{create_placed, Assembly, CreateSpec, Device, NewMember, Placement};
use raidlab_raid::exec::{Executor, Failed, Hooks, InOrder, Members, UserBuf};
use raidlab_raid::lifecycle::{Driven, StartOptions, Started};
use raidlab_raid::stripe_cache::StripeCacheConfig;
use raidlab_raid::Plan;
use std::sync::{Arc, OnceLock};

/// The executor a simulated array is created and started with: until the
/// run begins, plans (create's superblocks and bitmap, the start's dirty
/// mark) are carried out in memory on the sparse members, one operation at
/// a time and outside virtual time, so the measured workload is charged
/// none of them; from [`SetUpThenRun::begin_run`] on, every plan goes to
/// the simulator's executor (the device models).
#[derive(Default)]
pub(super) struct SetUpThenRun {
    run: OnceLock<Arc<dyn Executor>>,
}

impl std::fmt::Debug for SetUpThenRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetUpThenRun")
            .field("running", &self.run.get().is_some())
            .finish()
    }
}

impl SetUpThenRun {
    /// The set-up is over: hand every plan from now on to `exec`.
    pub(super) fn begin_run(&self, exec: Arc<dyn Executor>) -> Result<(), String> {
        self.run
            .set(exec)
            .map_err(|_| "internal: the simulated array's run began twice".to_string())
    }
}

impl Executor for SetUpThenRun {
    fn run(
        &self,
        plan: &Plan,
        members: &Members,
        engine: &dyn Engine,
        user: UserBuf<'_>,
        hooks: Hooks<'_>,
    ) -> Result<(), Failed> {
        match self.run.get() {
            Some(exec) => exec.run(plan, members, engine, user, hooks),
            None => InOrder.run(plan, members, engine, user, hooks),
        }
    }
}

/// A started simulated array and what the simulator needs of its stack.
pub(super) struct Stack {
    pub(super) started: Started,
    pub(super) exec: Arc<SetUpThenRun>,
    /// Each role's whole member device, as metadata plans (superblocks, the
    /// bitmap) name it; `None` for a failed role.
    pub(super) devices: Vec<Option<Arc<dyn Volume>>>,
    /// The bitmap's chunk in bytes, with a bitmap.
    pub(super) bitmap_chunk: Option<u64>,
}

/// Create `spec`'s array on sparse members the size of its devices (a failed
/// role's too: md's superblocks name every role), assemble it from the
/// members in service and start it for writing with `clock`, as `raidlab
/// serve` starts a real one. `bitmap` as [`crate::array::TaskArray::build`]
/// takes it.
pub(super) fn start(
    spec: &ArraySpec,
    bitmap: Option<Option<u64>>,
    clock: raidlab_core::SharedClock,
) -> Result<Stack, String> {
    let g = spec.geometry;
    let ctx = |what: &str, e: raidlab_core::Error| format!("{}: {what}: {e}", spec.name);
    let bitmap_chunk = match bitmap {
        Some(chunk) => Some(
            crate::bitmap::create_chunk(g.level, chunk)
                .map_err(|m| format!("{}: {m}", spec.name))?,
        ),
        None => None,
    };
    let devices: Vec<Device> = spec
        .members
        .iter()
        .enumerate()
        .map(|(role, m)| {
            // A failed role's device is gone; md's new superblocks still
            // name its role, so create writes one on a device of its size.
            let size = m
                .as_ref()
                .map_or(DATA_OFFSET + g.member_bytes, |d| d.capacity());
            let path = format!("{} member {role}", spec.name);
            Device {
                volume: Arc::new(SparseMemVolume::new(path.clone(), size)),
                path,
            }
        })
        .collect();
    let create = CreateSpec {
        level: g.level,
        layout: g.layout,
        chunk_bytes: g.chunk_bytes,
        spares: 0,
        name: spec.name.clone(),
        // Fewer members than mdadm wants without --force are simulated too.
        force: true,
        bitmap: bitmap_chunk.is_some(),
        bitmap_chunk: bitmap_chunk.flatten(),
        ppl: false,
    };
    let exec = Arc::new(SetUpThenRun::default());
    let placement = Placement {
        data_offset: DATA_OFFSET,
        member_bytes: g.member_bytes,
        // The engine lists a failed rewrite's range in a member's bad-block
        // log instead of taking the member out, and md then fails the member
        // when the superblock write that records the list fails; the
        // simulator writes no lists back (a served array's `LiveArray::poll`
        // does), so with a log a dead member would never leave the array.
        bad_block_log: false,
    };
    // Zeroed: the simulated disks start empty, so md's array starts in sync.
    let new = devices
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    let as_dyn: Arc<dyn Executor> = exec.clone();
    create_placed(
        &create,
        new,
        None,
        MetadataVersion::V1_2,
        as_dyn.clone(),
        Some(placement),
    )
    .map_err(|e| ctx("create", e))?;
    let present: Vec<Device> = devices
        .iter()
        .zip(&spec.members)
        .filter(|(_, m)| m.is_some())
        .map(|(d, _)| d.clone())
        .collect();
    let asm = Assembly::assemble(present).map_err(|e| ctx("assemble", e))?;
    let options = StartOptions {
        write: true,
        // The spec's stripe cache, or none: the start's default is the
        // served array's, not the simulator's.
        // No spec'd cache keeps no rows either (a card without a cache).
        stripe_cache: Some(spec.stripe_cache.unwrap_or(StripeCacheConfig {
            stripes: 0,
            kept_rows: 0,
            ..StripeCacheConfig::default()
        })),
        ..StartOptions::default()
    };
    let driven = Driven {
        executor: as_dyn,
        clock,
    };
    let started = Started::start_with(asm, options, Some(driven)).map_err(|e| ctx("start", e))?;
    if *started.array.geometry() != g {
        return Err(format!(
            "{}: internal: the started array's geometry {:?} is not the spec's {:?}",
            spec.name,
            started.array.geometry(),
            g
        ));
    }
    let devices = devices
        .into_iter()
        .zip(&spec.members)
        .map(|(d, m)| m.as_ref().map(|_| d.volume))
        .collect();
    let bitmap_chunk = started
        .array
        .with_bitmap_held(|b| b.sb.chunk_sectors() * 512);
    if bitmap.is_some() != bitmap_chunk.is_some() {
        return Err(format!(
            "{}: internal: a bitmap was {} but the started array has {}",
            spec.name,
            if bitmap.is_some() {
                "asked for"
            } else {
                "not asked for"
            },
            if bitmap_chunk.is_some() {
                "one"
            } else {
                "none"
            }
        ));
    }
    Ok(Stack {
        started,
        exec,
        devices,
        bitmap_chunk,
    })
}

/// A rebuild's new member as `raidlab add` made it.
pub(super) struct AddedMember {
    /// The whole device, as metadata plans name it.
    pub(super) device: Arc<dyn Volume>,
    /// Its data area: what the engine rebuilds onto.
    pub(super) area: Arc<dyn Volume>,
    /// Where the engine resumes its rebuild, in bytes of the data area: what
    /// its superblock records.
    pub(super) resumes_at: u64,
}

/// Add a new member for `role` to the running array as `raidlab add` adds
/// one to a served array (`Assembly::add` under `change_running`): a sparse
/// device of `size` bytes (its device model's), given its superblock (a new
/// device number, the array's events, the role, a recovery offset of 0) and
/// the live members' commit with the events raised (after recording the
/// members the engine took out, as a served array's poll does); for a
/// resumed rebuild (`from` > 0) its superblock then records `from` as the
/// engine's checkpoint of a rebuild stopped there does; all in
/// memory: the assembly's commits carried out in order on the sparse
/// members for the add's length, as before the run, at no virtual time and
/// on no device model. `add` picks the role (the first
/// missing one); a different one than `role` is refused, as the simulator
/// would then rebuild another role than the configuration asked for.
pub(super) fn add_member(
    started: &Started,
    name: &str,
    role: usize,
    size: u64,
    from: u64,
) -> Result<AddedMember, String> {
    let path = format!("{name} new member for role {role}");
    let device = Device {
        volume: Arc::new(SparseMemVolume::new(path.clone(), size)),
        path: path.clone(),
    };
    let whole = device.volume.clone();
    // Not `lock`: outside a task, a lock held by a suspended task would
    // never be let go.
    let mut asm = started.try_asm().ok_or_else(|| {
        format!("{name}: internal: the assembly is held (a member being recorded taken out) as {path} is added")
    })?;
    // The run's executor would hand the commits to the device models, and
    // from outside a task: the add is set-up, carried out in memory.
    let run = asm.executor().clone();
    asm.set_executor(Arc::new(InOrder));
    let added = add_in_memory(&mut asm, started, device).and_then(|added| {
        let index = asm
            .members
            .iter()
            .position(|m| Arc::ptr_eq(&m.device.volume, &whole));
        match index {
            Some(i) if from > 0 => asm.checkpoint_recovery(i, from).map(|()| added),
            _ => Ok(added),
        }
    });
    asm.set_executor(run);
    let added = added.map_err(|e| format!("{name}: adding {path}: {e}"))?;
    match added {
        raidlab_raid::manage::Added::IntoSlot(slot) if slot == role => {}
        other => {
            return Err(format!(
                "{name}: raidlab's add put {path} {}, not into role {role}: rebuild the first missing role",
                match other {
                    raidlab_raid::manage::Added::IntoSlot(s) => format!("into missing role {s}"),
                    raidlab_raid::manage::Added::Spare => "as a hot spare".into(),
                }
            ))
        }
    }
    let index = asm
        .members
        .iter()
        .position(|m| Arc::ptr_eq(&m.device.volume, &whole))
        .ok_or_else(|| format!("{name}: internal: {path} added but not among the members"))?;
    let area = asm
        .area(index)
        .map_err(|e| format!("{name}: the data area of {path}: {e}"))?;
    Ok(AddedMember {
        device: whole,
        area,
        resumes_at: asm.recovery_resumes_at(index),
    })
}

/// Record the members the engine took out, then `add` `device`: as a served
/// array records them before an add (`LiveArray::poll`), so the add finds
/// their roles missing.
fn add_in_memory(
    asm: &mut raidlab_raid::assemble::Assembly,
    started: &Started,
    device: Device,
) -> raidlab_core::Result<raidlab_raid::manage::Added> {
    for t in asm.record_taken_out(&started.array)? {
        t.outcome.map_err(|mut e| {
            e.message = format!(
                "role {} was taken out and cannot be recorded faulty: {}",
                t.role, e.message
            );
            e
        })?;
    }
    asm.change_running(&started.array, |a| a.add(device, false))
}
