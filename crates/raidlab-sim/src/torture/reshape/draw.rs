//! What change a reshape run asks for, from its seed: the array (level,
//! layout, chunk, members, metadata) and the change, each later kind drawn
//! from a stream of its own so that the runs drawn before it keep their
//! draws (sweeps compare line for line across the kinds added).

use super::super::run_seed;
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_md::MetadataVersion;
use raidlab_raid::grow::ReshapeRequest;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// This family's own random stream: the main sweep's runs keep their draws.
const RESHAPE_STREAM: u64 = 0x2e5a_9e00_5eed_0036;
/// The stream that makes one parity-level run in five a RAID 10 growing
/// onto more members: the other runs (the RAID 0 ones the tests name among
/// them) keep the draws they had before RAID 10 came in.
const RAID10_STREAM: u64 = 0x2e5a_9e10_5eed_0010;
/// The stream that makes one RAID 4/5/6 run in five a shrink by one
/// member: the other runs keep their draws.
const SHRINK_STREAM: u64 = 0x2e5a_9e20_5eed_0020;
/// The stream that makes one RAID 4/5/6 run in eight that the streams
/// above left a restripe over the same or more members a RAID 10 (near or
/// offset) shrink: every other run keeps its draws.
const RAID10_SHRINK_STREAM: u64 = 0x2e5a_9e30_5eed_0030;
/// The stream that makes one RAID 4/5/6 run in eight that the streams
/// above left a restripe over the same or more members a RAID 0 shrink:
/// every other run keeps its draws (the RAID 0 grows too).
const RAID0_SHRINK_STREAM: u64 = 0x2e5a_9e40_5eed_0040;
/// The stream that makes one RAID 4/5/6 run in eight that the streams
/// above left a restripe over the same or more members a RAID 10's new
/// chunk or switch between near and offset (the same members): every
/// other run keeps its draws.
const RAID10_RESTRIPE_STREAM: u64 = 0x2e5a_9e50_5eed_0050;
/// The stream that makes one RAID 4/5/6 run in two that the streams above
/// left a new chunk or layout over the same members one with other members
/// too, in one reshape as md makes it (`delta_disks` with `new_chunk` or
/// `new_layout`): one or two members more, or one fewer; and one in three
/// of the others a RAID 10 onto more members with a new chunk or layout.
/// Every other run keeps its draws.
const COMBINED_STREAM: u64 = 0x2e5a_9e60_5eed_0060;
/// The stream that makes one RAID 0 run in two that asks for a new chunk
/// over the same members one with one or two members more too, in one
/// reshape as md makes it through its RAID 4 without parity. Every other
/// run keeps its draws.
const RAID0_COMBINED_STREAM: u64 = 0x2e5a_9e70_5eed_0070;

/// The array and change of run `run` of `seed`, and the run's main
/// random stream as the draw left it (the cuts are drawn from it after).
/// The stream that makes one in two RAID 4/5/6 runs the streams above
/// left a plain grow (more members, nothing else) one of a metadata 0.90
/// array, grown in place with its critical section backed up on the new
/// members as mdadm does: every other run keeps its draws.
const IN_PLACE_090_STREAM: u64 = 0x2e5a_9e60_5eed_0090;

pub(super) fn drawn(seed: u64, run: u64) -> (Setup, ChaCha8Rng) {
    let mut rng = ChaCha8Rng::seed_from_u64(run_seed(seed, run) ^ RESHAPE_STREAM);
    let s = draw(&mut rng);
    let s = draw_raid10(
        s,
        &mut ChaCha8Rng::seed_from_u64(run_seed(seed, run) ^ RAID10_STREAM),
    );
    let s = draw_shrink(
        s,
        &mut ChaCha8Rng::seed_from_u64(run_seed(seed, run) ^ SHRINK_STREAM),
    );
    let s = draw_raid10_shrink(
        s,
        &mut ChaCha8Rng::seed_from_u64(run_seed(seed, run) ^ RAID10_SHRINK_STREAM),
    );
    let s = draw_raid0_shrink(
        s,
        &mut ChaCha8Rng::seed_from_u64(run_seed(seed, run) ^ RAID0_SHRINK_STREAM),
    );
    let s = draw_raid10_restripe(
        s,
        &mut ChaCha8Rng::seed_from_u64(run_seed(seed, run) ^ RAID10_RESTRIPE_STREAM),
    );
    let s = draw_combined(
        s,
        &mut ChaCha8Rng::seed_from_u64(run_seed(seed, run) ^ COMBINED_STREAM),
    );
    let s = draw_raid0_combined(
        s,
        &mut ChaCha8Rng::seed_from_u64(run_seed(seed, run) ^ RAID0_COMBINED_STREAM),
    );
    let s = draw_in_place_090(
        s,
        &mut ChaCha8Rng::seed_from_u64(run_seed(seed, run) ^ IN_PLACE_090_STREAM),
    );
    (s, rng)
}

/// The change a run asks for.
#[derive(Debug, Clone)]
pub(super) struct Change {
    pub(super) req: ReshapeRequest,
    pub(super) spares: usize,
    /// RAID 5 to 4 ends in md's takeover, after the restripe.
    pub(super) then_raid4: bool,
    /// Fewer members: the component size is cut first (room after the
    /// data for md's move up), and the array size the new members hold is
    /// the one accepted.
    pub(super) shrink: bool,
    /// A RAID 10 shrink only: whether the members have room after their
    /// data for md's move up (each created using four chunks less of its
    /// member, as `mdadm --create --size` would leave), or none, so that
    /// the engine takes the move out of the component size as mdadm does.
    /// (A RAID 4/5/6 shrink always has room: it is cut by `--size`.)
    pub(super) room: bool,
    /// A RAID 10 shrink only: chunks fewer than the most the new members
    /// hold in the array size accepted (a user may truncate further).
    pub(super) less_chunks: u64,
    /// A RAID 10 restripe between near=3 and offset=3 only: the component
    /// size is first cut (`grow --size`) to a whole number of these bytes,
    /// three of the largest chunk drawn, so that a row of three chunks
    /// fits it as often as one chunk does and both geometries hold the
    /// same array (on whole 1 MiB members an offset=3 row never fits
    /// evenly, and the engine refuses, naming the `--size` that works).
    pub(super) cut_to: Option<u64>,
}

impl Change {
    /// `req` with nothing else: no spares, no takeover after, no shrink.
    fn asking(req: ReshapeRequest) -> Change {
        Change {
            req,
            spares: 0,
            then_raid4: false,
            shrink: false,
            room: false,
            less_chunks: 0,
            cut_to: None,
        }
    }
}

pub(super) struct Setup {
    pub(super) level: Level,
    pub(super) layout: ParityLayout,
    /// A RAID 10's layout (near or offset; md does not reshape far).
    pub(super) raid10: Option<Layout>,
    pub(super) chunk: u64,
    pub(super) members: usize,
    pub(super) metadata: MetadataVersion,
    pub(super) change: Change,
}

fn draw(rng: &mut ChaCha8Rng) -> Setup {
    let level = [Level::Raid4, Level::Raid5, Level::Raid6, Level::Raid0][rng.gen_range(0..4)];
    let layouts = match level {
        // A RAID 0 restripes as md's RAID 4 without parity.
        Level::Raid4 | Level::Raid0 => vec![ParityLayout::ParityLast],
        _ => ParityLayout::ALL.to_vec(),
    };
    let layout = layouts[rng.gen_range(0..layouts.len())];
    let chunks = [16u64 << 10, 32 << 10, 64 << 10, 128 << 10];
    let chunk = chunks[rng.gen_range(0..chunks.len())];
    let members = rng.gen_range(4..=6);
    let metadata = if rng.gen_bool(0.5) {
        MetadataVersion::V1_2
    } else {
        MetadataVersion::V1_1
    };
    let pick = rng.gen_range(0..5);
    let change = match (pick, level) {
        (0, _) => {
            let add = rng.gen_range(1..=2);
            Change {
                spares: add,
                ..Change::asking(ReshapeRequest {
                    raid_devices: Some(members + add),
                    ..ReshapeRequest::default()
                })
            }
        }
        (1, _) => {
            let others: Vec<u64> = chunks.iter().copied().filter(|&c| c != chunk).collect();
            Change::asking(ReshapeRequest {
                chunk_bytes: Some(others[rng.gen_range(0..others.len())]),
                ..ReshapeRequest::default()
            })
        }
        // A RAID 0's other changes (to RAID 4 or 5) rebuild parity rather
        // than restripe: more members or a chunk here.
        (_, Level::Raid0) => {
            let others: Vec<u64> = chunks.iter().copied().filter(|&c| c != chunk).collect();
            Change::asking(ReshapeRequest {
                chunk_bytes: Some(others[rng.gen_range(0..others.len())]),
                ..ReshapeRequest::default()
            })
        }
        (2 | 3, Level::Raid4) => Change::asking(ReshapeRequest {
            level: Some(Level::Raid5),
            layout: Some("left-symmetric".into()),
            ..ReshapeRequest::default()
        }),
        (4, Level::Raid5) if layout != ParityLayout::ParityLast => Change {
            then_raid4: true,
            ..Change::asking(ReshapeRequest {
                level: Some(Level::Raid4),
                ..ReshapeRequest::default()
            })
        },
        _ => {
            let others: Vec<ParityLayout> = ParityLayout::ALL
                .into_iter()
                .filter(|&l| l != layout && level != Level::Raid4)
                .collect();
            if others.is_empty() {
                Change::asking(ReshapeRequest {
                    chunk_bytes: Some(if chunk == 64 << 10 {
                        32 << 10
                    } else {
                        64 << 10
                    }),
                    ..ReshapeRequest::default()
                })
            } else {
                Change::asking(ReshapeRequest {
                    layout: Some(others[rng.gen_range(0..others.len())].name().into()),
                    ..ReshapeRequest::default()
                })
            }
        }
    };
    Setup {
        level,
        layout,
        raid10: None,
        chunk,
        members,
        metadata,
        change,
    }
}

/// One parity-level run in five (from its own stream): a RAID 10 in the
/// near or offset layout onto one or two more members, the only RAID 10
/// restripe raidlab does (md's `raid10_check_reshape`).
fn draw_raid10(s: Setup, rng: &mut ChaCha8Rng) -> Setup {
    if s.level == Level::Raid0 || !rng.gen_ratio(1, 5) {
        return s;
    }
    let name = ["n2", "n3", "o2"][rng.gen_range(0..3)];
    let Ok(layout) = Layout::parse(Level::Raid10, Some(name)) else {
        return s;
    };
    let members = rng.gen_range(4..=5);
    let add = rng.gen_range(1..=2);
    Setup {
        level: Level::Raid10,
        raid10: Some(layout),
        members,
        change: Change {
            spares: add,
            ..Change::asking(ReshapeRequest {
                raid_devices: Some(members + add),
                ..ReshapeRequest::default()
            })
        },
        ..s
    }
}

/// One RAID 4/5/6 run in five (from its own stream): one member fewer
/// (a RAID 6 keeps md's least four).
fn draw_shrink(s: Setup, rng: &mut ChaCha8Rng) -> Setup {
    let least = if s.level == Level::Raid6 { 4 } else { 2 };
    if !matches!(s.level, Level::Raid4 | Level::Raid5 | Level::Raid6)
        || s.raid10.is_some()
        || !rng.gen_ratio(1, 5)
        || s.members <= least
    {
        return s;
    }
    Setup {
        change: Change {
            shrink: true,
            room: true,
            ..Change::asking(ReshapeRequest {
                raid_devices: Some(s.members - 1),
                ..ReshapeRequest::default()
            })
        },
        ..s
    }
}

/// One RAID 4/5/6 run in eight that is neither a RAID 10 nor a shrink
/// already (from its own stream): a RAID 10 of 4 to 6 members in near=2,
/// near=3 or offset=2 losing one member, or two where md still has a
/// member for every copy (`raid10_check_reshape` needs as many as the
/// copies); with room after the data or without (then the engine takes the
/// move out of the component size), and the array size accepted the most
/// the fewer members hold or a chunk or two less.
fn draw_raid10_shrink(s: Setup, rng: &mut ChaCha8Rng) -> Setup {
    if !matches!(s.level, Level::Raid4 | Level::Raid5 | Level::Raid6)
        || s.raid10.is_some()
        || s.change.shrink
        || !rng.gen_ratio(1, 8)
    {
        return s;
    }
    let name = ["n2", "n3", "o2"][rng.gen_range(0..3)];
    let Ok(layout) = Layout::parse(Level::Raid10, Some(name)) else {
        return s;
    };
    let Layout::Raid10(l) = layout else {
        return s;
    };
    let members = rng.gen_range(4..=6);
    let fewer = if members - 2 >= l.copies() && rng.gen_ratio(1, 3) {
        2
    } else {
        1
    };
    let room = rng.gen_bool(0.5);
    let less_chunks = if rng.gen_ratio(1, 3) {
        rng.gen_range(1..=2)
    } else {
        0
    };
    Setup {
        level: Level::Raid10,
        raid10: Some(layout),
        members,
        change: Change {
            shrink: true,
            room,
            less_chunks,
            ..Change::asking(ReshapeRequest {
                raid_devices: Some(members - fewer),
                ..ReshapeRequest::default()
            })
        },
        ..s
    }
}

/// One RAID 4/5/6 run in eight that is neither a RAID 10 nor a shrink
/// already (from its own stream): a RAID 0 of 4 to 6 members losing one,
/// or two (one such run in three, of five or six), through md's RAID 4
/// without parity backwards; the members are given room after their data
/// as a grown device gives it (md refuses `--size` of a RAID 0).
fn draw_raid0_shrink(s: Setup, rng: &mut ChaCha8Rng) -> Setup {
    if !matches!(s.level, Level::Raid4 | Level::Raid5 | Level::Raid6)
        || s.raid10.is_some()
        || s.change.shrink
        || !rng.gen_ratio(1, 8)
    {
        return s;
    }
    let members = rng.gen_range(4..=6);
    let fewer = if members > 4 && rng.gen_ratio(1, 3) {
        2
    } else {
        1
    };
    Setup {
        level: Level::Raid0,
        layout: ParityLayout::ParityLast,
        members,
        change: Change {
            shrink: true,
            room: true,
            ..Change::asking(ReshapeRequest {
                raid_devices: Some(members - fewer),
                ..ReshapeRequest::default()
            })
        },
        ..s
    }
}

/// One RAID 4/5/6 run in eight that is neither a RAID 10 nor a shrink
/// already (from its own stream): a RAID 10 near or offset restriped over
/// the same members to a new chunk, to the other of near and offset with
/// the same copies, or both (md's `raid10_check_reshape`). The member
/// counts are ones the copies divide, so that the array is the same size
/// in both geometries (md keeps it, and the engine refuses a change whose
/// new geometry holds less: `tests/reshape_raid10_restripe.rs` has those
/// refusals).
fn draw_raid10_restripe(s: Setup, rng: &mut ChaCha8Rng) -> Setup {
    if !matches!(s.level, Level::Raid4 | Level::Raid5 | Level::Raid6)
        || s.raid10.is_some()
        || s.change.shrink
        || !rng.gen_ratio(1, 8)
    {
        return s;
    }
    let (from, to, members) = match rng.gen_range(0..3) {
        0 => ("n2", "o2", [4, 6][rng.gen_range(0..2)]),
        1 => ("o2", "n2", [4, 6][rng.gen_range(0..2)]),
        _ => ("n3", "o3", [3, 6][rng.gen_range(0..2)]),
    };
    let (from, to) = if rng.gen_bool(0.5) {
        (from, to)
    } else {
        (to, from)
    };
    let (Ok(layout), Ok(_)) = (
        Layout::parse(Level::Raid10, Some(from)),
        Layout::parse(Level::Raid10, Some(to)),
    ) else {
        return s;
    };
    let chunks = [16u64 << 10, 32 << 10, 64 << 10, 128 << 10];
    let others: Vec<u64> = chunks.iter().copied().filter(|&c| c != s.chunk).collect();
    // A new chunk, a new layout, or both.
    let (chunk, new_layout) = match rng.gen_range(0..3) {
        0 => (Some(others[rng.gen_range(0..others.len())]), None),
        1 => (None, Some(to.to_string())),
        _ => (
            Some(others[rng.gen_range(0..others.len())]),
            Some(to.to_string()),
        ),
    };
    Setup {
        level: Level::Raid10,
        raid10: Some(layout),
        members,
        change: Change {
            cut_to: (from.ends_with('3')).then_some(3 * (128 << 10)),
            ..Change::asking(ReshapeRequest {
                chunk_bytes: chunk,
                layout: new_layout,
                ..ReshapeRequest::default()
            })
        },
        ..s
    }
}

/// One RAID 4/5/6 run in two that the streams above left a new chunk or
/// layout over the same members (from its own stream): the same change with
/// one or two members more, or one fewer (a RAID 6 keeps md's least four),
/// in one reshape, walked forwards or backwards (md's `check_reshape` takes
/// `delta_disks`, `new_chunk_sectors` and `new_layout` at once).
fn draw_combined(s: Setup, rng: &mut ChaCha8Rng) -> Setup {
    let req = &s.change.req;
    let restripe = req.raid_devices.is_none()
        && req.level.is_none()
        && (req.chunk_bytes.is_some() || req.layout.is_some());
    if !matches!(s.level, Level::Raid4 | Level::Raid5 | Level::Raid6)
        || s.raid10.is_some()
        || s.change.shrink
        || s.change.then_raid4
        || !restripe
    {
        return s;
    }
    if !rng.gen_ratio(1, 2) {
        // One in three of the other half: a RAID 10 onto more members with
        // a new chunk or layout at once.
        return if rng.gen_ratio(1, 3) {
            draw_raid10_combined(s, rng)
        } else {
            s
        };
    }
    let least = if s.level == Level::Raid6 { 4 } else { 2 };
    let shrink = s.members > least && rng.gen_ratio(1, 3);
    let add = if shrink { 0 } else { rng.gen_range(1..=2) };
    let n = if shrink {
        s.members - 1
    } else {
        s.members + add
    };
    Setup {
        change: Change {
            spares: add,
            shrink,
            room: shrink,
            ..Change::asking(ReshapeRequest {
                raid_devices: Some(n),
                ..s.change.req.clone()
            })
        },
        ..s
    }
}

/// A RAID 0's new chunk (over the same members) made one with one or two
/// members more, half the time.
fn draw_raid0_combined(s: Setup, rng: &mut ChaCha8Rng) -> Setup {
    let req = &s.change.req;
    if s.level != Level::Raid0
        || s.change.shrink
        || req.raid_devices.is_some()
        || req.chunk_bytes.is_none()
        || !rng.gen_ratio(1, 2)
    {
        return s;
    }
    let add = rng.gen_range(1..=2);
    Setup {
        change: Change {
            spares: add,
            ..Change::asking(ReshapeRequest {
                raid_devices: Some(s.members + add),
                ..req.clone()
            })
        },
        ..s
    }
}

/// A RAID 10 near=2 or offset=2 of 4 or 6 members onto one or two more
/// (or, one run in three, one fewer) with a new chunk, the other of near
/// and offset, or both (md's
/// `raid10_check_reshape` takes them with `delta_disks`). The component
/// size is first cut to whole 256 KiB (a row of two of the largest chunk),
/// so that the array is a whole number of any new chunk, as md requires.
fn draw_raid10_combined(s: Setup, rng: &mut ChaCha8Rng) -> Setup {
    let (from, to) = if rng.gen_bool(0.5) {
        ("n2", "o2")
    } else {
        ("o2", "n2")
    };
    let Ok(layout) = Layout::parse(Level::Raid10, Some(from)) else {
        return s;
    };
    let members = [4, 6][rng.gen_range(0..2)];
    let add = rng.gen_range(1..=2);
    let chunks = [16u64 << 10, 32 << 10, 64 << 10, 128 << 10];
    let others: Vec<u64> = chunks.iter().copied().filter(|&c| c != s.chunk).collect();
    let (chunk, new_layout) = match rng.gen_range(0..3) {
        0 => (Some(others[rng.gen_range(0..others.len())]), None),
        1 => (None, Some(to.to_string())),
        _ => (
            Some(others[rng.gen_range(0..others.len())]),
            Some(to.to_string()),
        ),
    };
    // One in three onto fewer members instead (md's backward reshape with
    // the new chunk or layout), drawn last so the grows keep their draws:
    // one member fewer, the array size the most the fewer hold or a chunk
    // of the larger chunk less.
    if rng.gen_ratio(1, 3) {
        let less_chunks = rng.gen_range(0..=1);
        return Setup {
            level: Level::Raid10,
            raid10: Some(layout),
            members,
            change: Change {
                shrink: true,
                less_chunks,
                cut_to: Some(256 << 10),
                ..Change::asking(ReshapeRequest {
                    raid_devices: Some(members - 1),
                    chunk_bytes: chunk,
                    layout: new_layout,
                    ..ReshapeRequest::default()
                })
            },
            ..s
        };
    }
    Setup {
        level: Level::Raid10,
        raid10: Some(layout),
        members,
        change: Change {
            spares: add,
            cut_to: Some(256 << 10),
            ..Change::asking(ReshapeRequest {
                raid_devices: Some(members + add),
                chunk_bytes: chunk,
                layout: new_layout,
                ..ReshapeRequest::default()
            })
        },
        ..s
    }
}

/// One in two plain grows of a parity level (from its own stream): the
/// array on metadata 0.90, which has no new data offset, so the engine
/// grows it in place after backing the critical section up on the new
/// members. A 16K chunk keeps mdadm's backup (the stripes' least common
/// multiple) under half a member, as mdadm requires.
fn draw_in_place_090(s: Setup, rng: &mut ChaCha8Rng) -> Setup {
    let req = &s.change.req;
    let plain_grow = req.raid_devices.is_some_and(|n| n > s.members)
        && req.level.is_none()
        && req.chunk_bytes.is_none()
        && req.layout.is_none();
    if !matches!(s.level, Level::Raid4 | Level::Raid5 | Level::Raid6)
        || s.raid10.is_some()
        || s.change.shrink
        || !plain_grow
        || !rng.gen_ratio(1, 2)
    {
        return s;
    }
    Setup {
        metadata: MetadataVersion::V0_90,
        chunk: 16 << 10,
        ..s
    }
}
