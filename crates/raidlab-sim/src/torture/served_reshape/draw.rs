//! What a served reshape run asks for, drawn from its seed: the array
//! (level, layout, members, chunk, metadata), the change (a grow by one, a
//! shrink by one, a new chunk or layout, a RAID 10's grow or near/offset
//! switch; in their own draw, a RAID 0 restripe or a level change), and
//! how many clients ask how much. It decides only the draw;
//! the checks and the reshape are the engine's, the run is the parent's.

use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_md::MetadataVersion;
use raidlab_raid::grow::ReshapeRequest;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// What a run asks for, drawn from its seed.
#[derive(Debug, Clone)]
pub(super) struct Setup {
    pub(super) level: Level,
    pub(super) layout: Layout,
    pub(super) members: usize,
    pub(super) chunk: u64,
    pub(super) metadata: MetadataVersion,
    pub(super) req: ReshapeRequest,
    /// The layout asked (`req.layout`), to judge the end by.
    pub(super) new_layout: Option<Layout>,
    /// One member fewer: the array is first cut to what they hold.
    pub(super) shrink: bool,
    /// Spares added for a grow (given with `--add` for a level change).
    pub(super) spares: usize,
    /// Created with md's internal bitmap ([`with_bitmap`]).
    pub(super) bitmap: bool,
    /// `req` is a level change: its steps (the engine's
    /// `conversion_steps`) are run, not one restripe.
    pub(super) conversion: bool,
    /// A member may die at a cut (not in a RAID 0 restripe, which has no
    /// redundancy to lose one, nor in a level change's run).
    pub(super) may_die: bool,
    pub(super) clients: usize,
    /// Requests per client per round.
    pub(super) per: usize,
}

/// The change a run makes (`Setup::req`), as drawn.
const GROW5: u32 = 0;
const GROW6: u32 = 1;
const CHUNK: u32 = 2;
const SHRINK5: u32 = 3;
const LAYOUT5: u32 = 4;
const LAYOUT6: u32 = 5;
const RAID10: u32 = 6;

pub(super) fn draw(rng: &mut ChaCha8Rng) -> Setup {
    let kind = rng.gen_range(0..7u32);
    if kind == RAID10 {
        let change = Raid10Change::draw(rng);
        return draw_raid10(rng, change);
    }
    let level = match kind {
        GROW6 | LAYOUT6 => Level::Raid6,
        CHUNK if rng.gen_bool(0.5) => Level::Raid6,
        _ => Level::Raid5,
    };
    let layouts = ParityLayout::ALL;
    let mut layout = layouts[rng.gen_range(0..layouts.len())];
    let mut new_layout = None;
    if kind == LAYOUT5 {
        let others: Vec<_> = layouts.into_iter().filter(|&l| l != layout).collect();
        new_layout = Some(others[rng.gen_range(0..others.len())]);
    } else if kind == LAYOUT6 {
        // Half of them md's RAID 6 to 5 first step (to the "-6" twin, the
        // restripe issue 36's suspected zero read ran) or its way back.
        let twins: Vec<_> = ParityLayout::ALL
            .into_iter()
            .filter(|l| l.raid6_conversion() != *l)
            .collect();
        if rng.gen_bool(0.5) {
            let from = twins[rng.gen_range(0..twins.len())];
            if rng.gen_bool(0.5) {
                layout = from;
                new_layout = Some(from.raid6_conversion());
            } else {
                layout = from.raid6_conversion();
                new_layout = Some(from);
            }
        } else {
            let others: Vec<_> = layouts.into_iter().filter(|&l| l != layout).collect();
            new_layout = Some(others[rng.gen_range(0..others.len())]);
        }
    }
    let chunks = [16u64 << 10, 32 << 10, 64 << 10];
    let chunk = chunks[rng.gen_range(0..chunks.len())];
    let least = if level == Level::Raid6 { 4 } else { 3 };
    let members = rng.gen_range(least..=least + 2) + usize::from(kind == SHRINK5);
    let metadata = if rng.gen_bool(0.5) {
        MetadataVersion::V1_2
    } else {
        MetadataVersion::V1_1
    };
    let req = match kind {
        GROW5 | GROW6 => ReshapeRequest {
            raid_devices: Some(members + 1),
            ..ReshapeRequest::default()
        },
        CHUNK => {
            let others: Vec<u64> = chunks.iter().copied().filter(|&c| c != chunk).collect();
            ReshapeRequest {
                chunk_bytes: Some(others[rng.gen_range(0..others.len())]),
                ..ReshapeRequest::default()
            }
        }
        LAYOUT5 | LAYOUT6 => ReshapeRequest {
            layout: new_layout.map(|l| l.name().to_string()),
            ..ReshapeRequest::default()
        },
        _ => ReshapeRequest {
            raid_devices: Some(members - 1),
            ..ReshapeRequest::default()
        },
    };
    Setup {
        level,
        layout: Layout::Parity(layout),
        members,
        chunk,
        metadata,
        req,
        new_layout: new_layout.map(Layout::Parity),
        shrink: kind == SHRINK5,
        spares: usize::from(kind <= GROW6),
        conversion: false,
        bitmap: false,
        may_die: true,
        clients: rng.gen_range(2..=4),
        per: rng.gen_range(20..=60),
    }
}

/// What a RAID 10 run changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Raid10Change {
    /// One member more.
    Grow,
    /// Near to offset copies or back.
    Layout,
    /// Another chunk.
    Chunk,
    /// One member fewer (md's backward reshape), the array first cut to
    /// what they hold.
    Shrink,
}

impl Raid10Change {
    pub(super) fn draw(rng: &mut ChaCha8Rng) -> Raid10Change {
        [
            Raid10Change::Grow,
            Raid10Change::Layout,
            Raid10Change::Chunk,
            Raid10Change::Shrink,
        ][rng.gen_range(0..4)]
    }
}

/// A RAID 10 in the near or offset layout (the ones md reshapes) of two
/// copies, changed as `change` says.
pub(super) fn draw_raid10(rng: &mut ChaCha8Rng, change: Raid10Change) -> Setup {
    let parse = |name: &str| Layout::parse(Level::Raid10, Some(name)).expect("a RAID 10 layout");
    let (from, to) = if rng.gen_bool(0.5) {
        ("n2", "o2")
    } else {
        ("o2", "n2")
    };
    let chunks = [16u64 << 10, 32 << 10, 64 << 10];
    let chunk = chunks[rng.gen_range(0..chunks.len())];
    let shrink = change == Raid10Change::Shrink;
    let members = rng.gen_range(3..=5) + usize::from(shrink);
    let new_layout = (change == Raid10Change::Layout).then(|| parse(to));
    let new_chunk = (change == Raid10Change::Chunk).then(|| {
        let others: Vec<u64> = chunks.iter().copied().filter(|&c| c != chunk).collect();
        others[rng.gen_range(0..others.len())]
    });
    Setup {
        level: Level::Raid10,
        layout: parse(from),
        members,
        chunk,
        metadata: if rng.gen_bool(0.5) {
            MetadataVersion::V1_2
        } else {
            MetadataVersion::V1_1
        },
        req: ReshapeRequest {
            raid_devices: match change {
                Raid10Change::Grow => Some(members + 1),
                Raid10Change::Shrink => Some(members - 1),
                _ => None,
            },
            layout: new_layout.map(|_| to.to_string()),
            chunk_bytes: new_chunk,
            ..ReshapeRequest::default()
        },
        new_layout,
        shrink,
        spares: usize::from(change == Raid10Change::Grow),
        conversion: false,
        bitmap: false,
        may_die: true,
        clients: rng.gen_range(2..=4),
        per: rng.gen_range(20..=60),
    }
}

/// The stream that makes one served plain grow of a RAID 5 or 6 in three
/// (more members, nothing else) one of a metadata 0.90 array, which has no
/// new data offset: the engine grows it in place, the critical section
/// backed up on the new member first and put back while requests wait, then
/// the walk through the gate (issue 36). Every other run keeps its draws.
const IN_PLACE_090_STREAM: u64 = 0x5e7e_d090_0090_0090;

/// [`IN_PLACE_090_STREAM`]'s draw over `s`, from the run's seed `s0`. A 16K
/// chunk keeps mdadm's backup of the critical section (the stripes' least
/// common multiple) under half a member, as mdadm requires.
pub(super) fn in_place_090(s: Setup, s0: u64) -> Setup {
    use rand::SeedableRng;
    let plain_grow = !s.shrink
        && !s.conversion
        && s.req.raid_devices.is_some_and(|n| n > s.members)
        && s.req.level.is_none()
        && s.req.chunk_bytes.is_none()
        && s.req.layout.is_none();
    let parity = matches!(s.level, Level::Raid5 | Level::Raid6);
    if !plain_grow
        || !parity
        || !ChaCha8Rng::seed_from_u64(s0 ^ IN_PLACE_090_STREAM).gen_ratio(1, 3)
    {
        return s;
    }
    Setup {
        metadata: MetadataVersion::V0_90,
        chunk: 16 << 10,
        ..s
    }
}

/// The stream that gives one RAID 5, 6 or 10 restripe in three md's
/// internal bitmap, of [`BITMAP_CHUNK`] chunks: the clients' writes then
/// mark their chunks (in either geometry's member sectors for RAID 5/6, in
/// array sectors for RAID 10) on both sides of the walk, and the resync
/// after the cuts covers only the chunks marked, so a write that marked
/// none shows as a mismatch in the check at the end. Every other run keeps
/// its draws.
const BITMAP_STREAM: u64 = 0x5e7e_d0b1_7a90_0001;

/// Small bitmap chunks on the rig's 2 MiB members: many bits, each write's
/// own.
pub(super) const BITMAP_CHUNK: u32 = 16 << 10;

/// [`BITMAP_STREAM`]'s draw over `s`, from the run's seed `s0`.
pub(super) fn with_bitmap(s: Setup, s0: u64) -> Setup {
    let restripe = !s.conversion && matches!(s.level, Level::Raid5 | Level::Raid6 | Level::Raid10);
    bitmap_drawn(s, restripe, s0 ^ BITMAP_STREAM)
}

/// `s` with md's bitmap in one run in three of those `eligible`, drawn from
/// `stream` (the run's seed mixed with a stream of its own, so the other
/// runs keep their draws).
fn bitmap_drawn(s: Setup, eligible: bool, stream: u64) -> Setup {
    use rand::SeedableRng;
    if !eligible || !ChaCha8Rng::seed_from_u64(stream).gen_ratio(1, 3) {
        return s;
    }
    Setup { bitmap: true, ..s }
}

/// The stream that gives one served level change in three from a level
/// with redundancy (RAID 1, 4, 5 or 6) md's internal bitmap, of
/// [`BITMAP_CHUNK`] chunks: it is kept through the takeover, the rebuild of
/// Q, parity or copies and the restripe (md keeps a bitmap through each),
/// and the resync after the cuts covers only the chunks marked. A RAID 0
/// has none to keep (md: "Bitmaps not meaningful with level"). Every other
/// run keeps its draws.
const LEVEL_BITMAP_STREAM: u64 = 0x5e7e_d0b1_7a90_0002;

/// [`LEVEL_BITMAP_STREAM`]'s draw over a level change `s`, from the run's
/// seed `s0`.
pub(super) fn level_with_bitmap(s: Setup, s0: u64) -> Setup {
    let redundant = matches!(
        s.level,
        Level::Raid1 | Level::Raid4 | Level::Raid5 | Level::Raid6
    );
    bitmap_drawn(s, redundant, s0 ^ LEVEL_BITMAP_STREAM)
}

impl Setup {
    pub(super) fn label(&self) -> String {
        format!(
            "{} of {} ({}, {}K, {:?}{}): {}; {} clients x {}",
            self.level.name(),
            self.members,
            self.layout.name(),
            self.chunk >> 10,
            self.metadata,
            if self.bitmap { ", bitmap" } else { "" },
            match (
                &self.req.raid_devices,
                &self.req.chunk_bytes,
                self.new_layout
            ) {
                _ if self.req.level.is_some() => format!(
                    "to {}{}{}",
                    self.req.level.map(|l| l.name()).unwrap_or_default(),
                    self.req
                        .raid_devices
                        .map(|n| format!(" of {n} members"))
                        .unwrap_or_default(),
                    self.req
                        .layout
                        .as_ref()
                        .map(|l| format!(" ({l})"))
                        .unwrap_or_default()
                ),
                (Some(n), _, _) if self.shrink => format!("{n} members (shrink)"),
                (Some(n), _, _) => format!("{n} members"),
                (_, Some(c), _) => format!("chunk {}K", c >> 10),
                (_, _, Some(l)) => format!("layout {}", l.name()),
                _ => "?".into(),
            },
            self.clients,
            self.per
        )
    }
}

/// The level changes and RAID 0 restripes the served fault simulation
/// draws apart from the sweep ([`draw_level_change`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LevelChange {
    /// A RAID 0 onto one member more (md: a RAID 4 without parity,
    /// restriped, taken back as a RAID 0).
    Raid0Grow,
    /// A RAID 0 given another chunk (the same way).
    Raid0Chunk,
    /// A RAID 4 restriped to a RAID 5 layout.
    Raid4To5,
    /// A RAID 5 to 6 with a device for Q.
    Raid5To6,
    /// A RAID 6 to 5.
    Raid6To5,
    /// A RAID 1 of two to a RAID 5 (of two, or of three with a device).
    Raid1To5,
    /// A RAID 0 to 4 or 5, with a device for parity (and one more member).
    Raid0To45,
}

impl LevelChange {
    pub(super) const ALL: [LevelChange; 7] = [
        LevelChange::Raid0Grow,
        LevelChange::Raid0Chunk,
        LevelChange::Raid4To5,
        LevelChange::Raid5To6,
        LevelChange::Raid6To5,
        LevelChange::Raid1To5,
        LevelChange::Raid0To45,
    ];
}

/// A level change or RAID 0 restripe of `change`'s kind, drawn from
/// `rng` (a stream of its own: the sweep's draws stay as they were). Half
/// of RAID 1 to 5 and RAID 0 to 4/5 take one member more too (a restripe
/// onto a spare after the takeover).
pub(super) fn draw_level_change(rng: &mut ChaCha8Rng, change: LevelChange) -> Setup {
    let chunks = [16u64 << 10, 32 << 10, 64 << 10];
    let chunk = chunks[rng.gen_range(0..chunks.len())];
    let layouts = ParityLayout::ALL;
    let layout_of = |level: Level, rng: &mut ChaCha8Rng| match level {
        Level::Raid5 | Level::Raid6 => Layout::Parity(layouts[rng.gen_range(0..layouts.len())]),
        _ => Layout::parse(level, None).expect("the level's default layout"),
    };
    let metadata = if rng.gen_bool(0.5) {
        MetadataVersion::V1_2
    } else {
        MetadataVersion::V1_1
    };
    let (level, members, spares, req, new_layout) = match change {
        LevelChange::Raid0Grow => {
            let n = rng.gen_range(2..=4);
            let req = ReshapeRequest {
                raid_devices: Some(n + 1),
                ..ReshapeRequest::default()
            };
            (Level::Raid0, n, 1, req, None)
        }
        LevelChange::Raid0Chunk => {
            let others: Vec<u64> = chunks.iter().copied().filter(|&c| c != chunk).collect();
            let req = ReshapeRequest {
                chunk_bytes: Some(others[rng.gen_range(0..others.len())]),
                ..ReshapeRequest::default()
            };
            (Level::Raid0, rng.gen_range(2..=4), 0, req, None)
        }
        LevelChange::Raid4To5 => {
            let to = layouts
                .into_iter()
                .filter(|&l| l != ParityLayout::ParityLast)
                .collect::<Vec<_>>();
            let to = to[rng.gen_range(0..to.len())];
            let req = ReshapeRequest {
                level: Some(Level::Raid5),
                layout: Some(to.name().to_string()),
                ..ReshapeRequest::default()
            };
            (
                Level::Raid4,
                rng.gen_range(3..=5),
                0,
                req,
                Some(Layout::Parity(to)),
            )
        }
        LevelChange::Raid5To6 => {
            let req = ReshapeRequest {
                level: Some(Level::Raid6),
                ..ReshapeRequest::default()
            };
            (Level::Raid5, rng.gen_range(3..=5), 1, req, None)
        }
        LevelChange::Raid6To5 => {
            let req = ReshapeRequest {
                level: Some(Level::Raid5),
                ..ReshapeRequest::default()
            };
            (Level::Raid6, rng.gen_range(4..=6), 0, req, None)
        }
        LevelChange::Raid1To5 => {
            let more = rng.gen_bool(0.5);
            let req = ReshapeRequest {
                level: Some(Level::Raid5),
                raid_devices: more.then_some(3),
                ..ReshapeRequest::default()
            };
            (Level::Raid1, 2, usize::from(more), req, None)
        }
        LevelChange::Raid0To45 => {
            let n = rng.gen_range(2..=3);
            let more = usize::from(rng.gen_bool(0.5));
            let to = if rng.gen_bool(0.5) {
                Level::Raid5
            } else {
                Level::Raid4
            };
            let req = ReshapeRequest {
                level: Some(to),
                raid_devices: Some(n + 1 + more),
                ..ReshapeRequest::default()
            };
            (Level::Raid0, n, 1 + more, req, None)
        }
    };
    let layout = layout_of(level, rng);
    Setup {
        level,
        layout,
        members,
        chunk,
        metadata,
        req,
        new_layout,
        shrink: false,
        spares,
        conversion: !matches!(
            change,
            LevelChange::Raid0Grow | LevelChange::Raid0Chunk | LevelChange::Raid4To5
        ),
        bitmap: false,
        may_die: false,
        clients: rng.gen_range(2..=4),
        per: rng.gen_range(20..=60),
    }
}
