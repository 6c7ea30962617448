//! Arguments of the management verbs: run, check/repair/resync, fail, remove, add, grow, replace.

use super::*;

/// How long-running work runs.
#[derive(Debug, Args, Clone, Copy)]
pub struct RunControl {
    /// Limit to this many bytes per second of each member (e.g. 50M), as md's
    /// speed limits are per device; the progress bar shows the same figure.
    #[arg(long, value_parser = size)]
    pub max_rate: Option<u64>,
    /// Print a JSON report instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The array's member files or devices (any order).
    #[arg(required = true)]
    pub members: Vec<PathBuf>,
    #[command(flatten)]
    pub run: RunControl,
    /// Rebuild even with a resync pending / start a dirty degraded array.
    #[arg(long, alias = "start-degraded-dirty")]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct ScrubArgs {
    /// The array's member files or devices (any order).
    #[arg(required = true)]
    pub members: Vec<PathBuf>,
    #[command(flatten)]
    pub run: RunControl,
}

#[derive(Debug, Args)]
pub struct FailArgs {
    /// The array's member files or devices (any order).
    #[arg(required = true)]
    pub members: Vec<PathBuf>,
    /// The member to mark faulty (one of the members listed).
    #[arg(long)]
    pub member: PathBuf,
    /// Do not start rebuilding onto a hot spare now (`raidlab rebuild` later).
    #[arg(long)]
    pub no_rebuild: bool,
    #[command(flatten)]
    pub run: RunControl,
}

#[derive(Debug, Args)]
pub struct RemoveArgs {
    #[arg(required = true)]
    pub members: Vec<PathBuf>,
    /// The faulty, stale or spare member to remove.
    #[arg(long)]
    pub member: PathBuf,
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The array's member files or devices (any order).
    #[arg(required = true)]
    pub members: Vec<PathBuf>,
    /// The new member (a file that does not exist is created at --member-size).
    #[arg(long)]
    pub new: PathBuf,
    #[arg(long, value_parser = size)]
    pub member_size: Option<u64>,
    /// Overwrite an md superblock already on the new member.
    #[arg(long)]
    pub force: bool,
    /// Do not rebuild now (`raidlab rebuild` later).
    #[arg(long)]
    pub no_rebuild: bool,
    /// Only take --new back into its old role (mdadm's --re-add): a former
    /// member of an array with a write-intent bitmap, not older than the
    /// bitmap's last clearing; only the chunks the bitmap marked while it was
    /// away are resynced. Refused, with the reason and nothing written,
    /// otherwise. Without it, add re-adds such a member too (offline), as
    /// mdadm --add does, and falls back to a full rebuild when it cannot.
    #[arg(long)]
    pub re_add: bool,
    #[command(flatten)]
    pub run: RunControl,
}

/// `--bitmap`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GrowBitmap {
    Internal,
    None,
}

#[derive(Debug, Args)]
pub struct GrowArgs {
    /// The array's member files or devices (any order).
    #[arg(required = true)]
    pub members: Vec<PathBuf>,
    /// Bytes of each member the array uses (md's component size; a whole
    /// number of KiB, rounded down to a chunk; a RAID 10 to whole chunks of
    /// the array, rows of the offset layout, as md keeps it), or `max`: all
    /// that every member has room for. Growing resyncs the new space (only
    /// its bitmap chunks with a bitmap) unless --assume-clean. md refuses it
    /// for RAID 0 and a RAID 10 in the far layout.
    #[arg(long, short = 'z')]
    pub size: Option<String>,
    /// Add (`internal`) or remove (`none`) md's internal write-intent bitmap.
    #[arg(long, short = 'b', value_enum)]
    pub bitmap: Option<GrowBitmap>,
    /// Bytes of each member per bitmap bit for --bitmap internal (default:
    /// mdadm's choice, 64M or more).
    #[arg(long, value_parser = size)]
    pub bitmap_chunk: Option<u64>,
    /// `resync` or `ppl` (RAID 5: md's partial parity log); a bitmap is
    /// added with --bitmap internal.
    #[arg(long)]
    pub consistency_policy: Option<String>,
    /// RAID 1: the number of mirrors. Growing fills the new slots from hot
    /// spares and --add devices, then rebuilds them; shrinking needs the
    /// slots that go to be empty. RAID 4/5/6: more members (a reshape, md's
    /// way: the data offset moves down, the data is restriped onto the new
    /// members; interrupted, `--continue` finishes it). RAID 0: the same,
    /// as md does it, through a RAID 4 whose parity member is missing,
    /// then back to a RAID 0. RAID 10 in the near or offset layout: the
    /// same reshape, every copy written (md refuses the far layout).
    /// Fewer members of a RAID 4/5/6, and of a RAID 10 near or offset (md's
    /// backward reshape: the data offset moves up, the walk goes from the
    /// end of the array to its start; the members that leave become
    /// spares): only with --array-size, the size the array is truncated to,
    /// which must fit the new members (a RAID 10: in whole chunks; with no
    /// room after the data, md takes the move out of each member's used
    /// space, and the refusal without --array-size says what fits). Fewer
    /// members of a RAID 0: the same shrink of the RAID 4 md takes it over
    /// as, then back to a RAID 0 (the members that leave are removed: a
    /// RAID 0 has no spares); it needs room after every member's data
    /// (a larger device: md refuses --size of a RAID 0).
    #[arg(long, short = 'n')]
    pub raid_devices: Option<usize>,
    /// With fewer --raid-devices of a RAID 0/4/5/6 or 10: the size the array is
    /// truncated to (mdadm's --array-size, which md keeps only while the
    /// array runs; here it is given with the shrink it makes possible,
    /// offline or served). Whatever lies past it is lost: shrink the file
    /// system to it first. At most what the new members hold. Of a served
    /// array, alone (or `max`) or with a smaller --size: what the server
    /// exposes from now on, nothing written, forgotten at stop, as md.
    #[arg(long, short = 'Z')]
    pub array_size: Option<String>,
    /// Finish a reshape that was interrupted (killed, crashed, stopped). Of
    /// a served array, the reshape and every restripe below run in the
    /// server while clients keep using the array (`--add` devices must
    /// exist: the server opens them); a serve started on an array
    /// mid-reshape resumes it by itself.
    #[arg(long = "continue")]
    pub continue_reshape: bool,
    /// mdadm's --backup-file: a metadata 0.90 RAID 4/5/6's new --chunk or
    /// --layout over the same members, or its fewer --raid-devices (with
    /// --array-size), runs in place through it (made here, on a device
    /// outside the array; removed at the end), and `--continue` of such a
    /// reshape needs it; its more --raid-devices keep their critical
    /// section in it instead of on the new members. Offline only.
    #[arg(long)]
    pub backup_file: Option<PathBuf>,
    /// With --raid-devices: devices to add into the new slots (a file that
    /// does not exist is created at --member-size).
    #[arg(long)]
    pub add: Vec<PathBuf>,
    #[arg(long, value_parser = size)]
    pub member_size: Option<u64>,
    /// A new level: RAID 4 to 5 (md's takeover as parity-last; with
    /// --layout, then a restripe to that layout), RAID 5 to 4 (restriped to
    /// parity-last first when it is not), RAID 5 to 6 (one member more, for
    /// Q: give it with --add; md's takeover through the "-6" layout, Q
    /// rebuilt, then a restripe to the RAID 6 layout unless --layout
    /// preserve) and RAID 6 to 5 (restriped to the "-6" layout first; Q's
    /// member becomes a hot spare), RAID 5 of two to 1, RAID 1 of two to 5 (md's takeover, no
    /// data moved; with --raid-devices N, then a restripe onto the --add
    /// devices), RAID 0 to 10 (near=2: a mirror for each member, given with
    /// --add, rebuilt), RAID 10 near=2 to 0 (one copy of each pair kept),
    /// RAID 4 or 5 to 0 (a RAID 5 restriped to parity-last first; the
    /// parity member leaves),
    /// RAID 0 to 4 or 5 (one member more, for
    /// parity: give it with --add; parity rebuilt; with --raid-devices N,
    /// N-1 data members as mdadm counts, then a restripe onto the other
    /// --add devices; then a RAID 5 restriped to left-symmetric unless
    /// --layout preserve). RAID 0 to 6 is refused as md refuses it (go
    /// through RAID 5). Other level changes are refused (not built).
    #[arg(long, short = 'l')]
    pub level: Option<String>,
    /// A new chunk size for a RAID 0/4/5/6 or a RAID 10 near or offset
    /// (64K, 512K; a bare number is KiB, as mdadm reads it): a reshape over
    /// the same members, the data offset moving down by at least the larger
    /// chunk (a RAID 10: a row of the taller geometry, or two); of a RAID
    /// 4/5/6 also with --raid-devices, in the same reshape. The component
    /// size must be a whole number of new chunks (a RAID 10's array), as md
    /// requires.
    #[arg(long, short = 'c')]
    pub chunk: Option<String>,
    /// A new layout for a RAID 5/6 (mdadm's names: left-symmetric,
    /// right-asymmetric, parity-last, ...), or for a RAID 10 the other of
    /// near and offset with the same copies (n2 to o2, o3 to n3; md never
    /// reshapes the far layout or changes the copies): a reshape over the
    /// same members; of a RAID 5/6 also with --raid-devices, in the same
    /// reshape.
    #[arg(long, short = 'p')]
    pub layout: Option<String>,
    /// With --size: record the new space as in sync instead of resyncing
    /// it (mdadm --assume-clean; only when it is known to match, e.g. zeros
    /// on every member).
    #[arg(long)]
    pub assume_clean: bool,
    /// With --raid-devices: grow a RAID 1 even without a spare for every new
    /// slot (it runs degraded); with --add: overwrite an md superblock.
    #[arg(long, short = 'f')]
    pub force: bool,
    /// Do not resync or rebuild now (`raidlab resync` / `raidlab rebuild`
    /// later).
    #[arg(long)]
    pub no_sync: bool,
    #[command(flatten)]
    pub run: RunControl,
}

#[derive(Debug, Args)]
pub struct ReplaceArgs {
    /// The array's member files or devices (any order).
    #[arg(required = true)]
    pub members: Vec<PathBuf>,
    /// The member to replace (it keeps serving until the copy is done).
    #[arg(long)]
    pub old: PathBuf,
    /// The new member (a file that does not exist is created at --member-size).
    #[arg(long)]
    pub with: PathBuf,
    #[arg(long, value_parser = size)]
    pub member_size: Option<u64>,
    #[arg(long)]
    pub force: bool,
    /// Do not copy now (`raidlab rebuild` later).
    #[arg(long)]
    pub no_rebuild: bool,
    #[command(flatten)]
    pub run: RunControl,
}
