//! `raidlab grow` judged by the real md (issue 36): arrays raidlab grew on the
//! host are assembled by md in the guest (kind `B`, one boot): clean (no
//! resync pending, nothing running), every member active, md's size equal
//! to raidlab's, a bitmap or PPL raidlab added taken up by md, a `check`
//! with no mismatch, and md's reads equal to raidlab's, with the data from
//! before the grow exact. The new RAID 1 mirror is also read alone.
//!
//! * `r1-size`: RAID 1 on 8 MiB members grown to 16 MiB files, `--size max`
//!   (the new space resynced by raidlab);
//! * `r5-size-bitmap`: the same for a RAID 5 with a 64 KiB-chunk bitmap
//!   (the bitmap resized, the new chunks marked and resynced);
//! * `r10-size-bitmap`: the same for a RAID 10 near=2 of 4 (md's
//!   `raid10_resize`: its bitmap counts array sectors), read whole and
//!   without roles 0 and 3;
//! * `r5-bitmap-added`, `r1-bitmap-removed`: `--bitmap internal|none`;
//! * `r1-2to3`: `--raid-devices 3 --add` (the new mirror rebuilt);
//! * `r5-5to4-shrunk`: a RAID 5 of 5 given room after its data (`--size
//!   6M`), then `--raid-devices 4 --array-size 18M` (md's backward
//!   reshape: the data offset moved up; the fifth member left a spare,
//!   which md is not given), read whole and without role 1;
//! * `r6-5to4-shrink-killed`: the same for a RAID 6 of 5 to 4, killed
//!   part-way (SIGKILL): md is given all five members, carries the
//!   backward reshape on from raidlab's checkpoint and leaves the fifth a
//!   spare (four active);
//! * `r5-3to4`, `r6-4to5`: `--raid-devices N --add`, a reshape (the data
//!   offset moved down, the data restriped), read whole and without the new
//!   member (RAID 6: without it and the first);
//! * `r5-chunk-64to256`, `r6-layout-ls-to-ra`, `r4-to-r5`: `--chunk`,
//!   `--layout`, `--level 5 --layout left-symmetric` of a RAID 4, reshapes
//!   over the same members (read whole and without one or two members);
//! * `r5-to-r6`, `r6-to-r5`: `--level 6 --add` (md's takeover through
//!   left-symmetric-6, Q rebuilt, then restriped to left-symmetric) and
//!   `--level 5` of a right-asymmetric RAID 6 (restriped to
//!   right-asymmetric-6, then taken over; Q's member left a spare, which
//!   md is not given);
//! * `r5-3to4-bitmap`, `r5-3to4-bitmap-killed`: a RAID 5 with an internal
//!   bitmap (64 KiB chunks) grown by a member, the bitmap carried through
//!   as md carries it (taken up by md), and the same killed part-way (md
//!   carries the reshape on with raidlab's bitmap);
//! * `r10-4to5-bitmap`, `r10-chunk-bitmap`, `r1-to-r5-of-3-bitmap`: a RAID
//!   10 near=2 of 4 with an internal bitmap (64 KiB chunks) grown by a
//!   member (the bitmap resized to the new array, as md resizes it), the
//!   same given a 128 KiB chunk (the bitmap kept), and a RAID 1 of two
//!   with one taken to a RAID 5 of three (kept): md assembles each, takes
//!   the bitmap up, reads it whole and degraded, check 0;
//! * `r5-to-r6-bitmap`, `r6-to-r5-bitmap`: a RAID 5 of 4 with an internal
//!   bitmap taken to RAID 6 with a device for Q, and a RAID 6 of 5 with
//!   one taken to RAID 5 (the restripe to its "-6" layout, then the
//!   takeover), the bitmap kept through each step: the same checks;
//! * `r5-chunk-killed`, `r6-layout-stopped`, `r5-3to4-killed`: the same
//!   reshapes stopped part-way by SIGKILL or Ctrl-C (SIGINT): md assembles
//!   the members, carries the reshape on from raidlab's checkpoint by
//!   itself and finishes it; its reads then equal raidlab's own
//!   `--continue` on a copy (the data from before exact);
//! * `r5-3to4-served-killed`, `r6-4to5-served-stopped`,
//!   `r5-4to5-chunk-killed`, `r5-4to5-chunk-served-killed` (`grow_served.rs`,
//!   which lists them): reshapes walked by `raidlab serve` while an NBD
//!   client writes, the server killed -9 or stopped cleanly (SIGTERM)
//!   mid-walk, and a combined reshape (members and chunk) killed part-way,
//!   offline and served; md carries each on as for the cases above;
//! * `r5-3to4-served-end-killed`, `r6-4to5-served-end-killed`
//!   (`grow_served.rs`): a served grow killed -9 between the walk's commit
//!   of the array's end as the position and the end's commit (held there
//!   by the walk's test-only hook), a client's write made in that window:
//!   md finishes a reshape with nothing left to walk;
//! * `r5-5to4-served-shrink-killed` (`grow_served.rs`): a RAID 5 of 5
//!   shrunk by a member while served and a client writes, killed -9
//!   mid-walk: md carries the backward reshape on and leaves a spare;
//! * `r5-090-chunk-backup-killed`, `r6-090-layout-backup-stopped`
//!   (`grow_backup.rs`): a metadata 0.90 restripe (`--chunk`, `--layout`)
//!   through mdadm's `--backup-file`, killed or stopped by Ctrl-C part-way:
//!   raidlab's read of the stopped array is refused without the file (md's
//!   rule, wherever the stop landed) and exact with it (`export
//!   --backup-file` on a copy); md is given the members and raidlab's
//!   backup file (`mdadm --assemble --backup-file`) and finishes it;
//! * `r5-ppl-again`: a PPL array switched to resync and back to ppl;
//! * `r5-090-3to4`, `r6-090-4to5-killed`: metadata 0.90 RAID 5 of 3 and
//!   RAID 6 of 4 (64 KiB chunks) `--raid-devices +1 --add`, grown in place
//!   (0.90 has no data offset to move) with the critical section backed up
//!   on the new member as mdadm does without a backup file; read whole and
//!   without member 1, and the RAID 6 killed part-way (SIGKILL) and carried
//!   on by md, read whole and without members 0 and 4;
//!   `r5-090-3to4-bitmap`, `r5-090-3to4-bitmap-killed`: the same RAID 5
//!   with md's internal bitmap, carried through unchanged but for its
//!   events, taken up by md; killed part-way, carried on by md;
//!   `r5-090-size-bitmap`: the same RAID 5 of 3 `--size 4M`, then
//!   `--size max` (0.90's data runs from the member's start up to its
//!   superblock), the bitmap resized each time, taken up by md;
//!   `r5-090-4to5-chunk-killed`: a 0.90 RAID 5 of 4 `--raid-devices 5
//!   --add --chunk 32K` in one in-place reshape (no backup file, as mdadm
//!   makes it: the critical section on the new member), killed part-way
//!   (SIGKILL) and carried on by md, read whole and without member 2;
//! * `r10-4to6`, `r10-o2-4to5-killed`: a RAID 10 near=2 of 4
//!   `--raid-devices 6 --add --add` (md's RAID 10 reshape: the data offset
//!   moved down, every copy rewritten), read whole and without roles 0 and
//!   3; and an offset=2 one onto a fifth member stopped part-way by SIGKILL,
//!   which md carries on from raidlab's checkpoint (read whole and without
//!   role 1);
//! * `r10-5to4-chunk-shrunk`: a RAID 10 near=2 of 5, 64 KiB chunk,
//!   `--raid-devices 4 --chunk 128K --array-size 13824K` in one backward
//!   reshape, read whole and without roles 0 and 3;
//! * `r10-5to4-shrunk`, `r10-o2-4to3-shrink-killed`: a RAID 10 near=2 of 5
//!   `--raid-devices 4 --array-size` (md's RAID 10 shrink: the data offset
//!   moved up one chunk, out of the component size, the walk backwards; the
//!   fifth member a spare, not given to md), read whole and without roles 0
//!   and 3; and an offset=2 of 4 onto 3 killed part-way (SIGKILL): md is
//!   given all four, carries the backward reshape on from raidlab's
//!   checkpoint and leaves the fourth a spare (read whole and without
//!   role 1); `r10-5to4-shrunk-bitmap`, `r10-5to4-shrink-bitmap-killed`:
//!   the RAID 10 near=2 of 5 shrink with md's internal bitmap (64 KiB
//!   chunks), which md resizes down to the new array (raidlab in the
//!   end's commit): md takes up the resized bitmap, reads it whole and
//!   without roles 0 and 3; killed part-way, md is given all five and
//!   carries the backward reshape on with raidlab's bitmap (read whole and
//!   without roles 1 and 2);
//! * `r5-4to5-chunk`: a RAID 5 of 4, 64 KiB chunk, `--raid-devices 5 --add
//!   --chunk 128K` (md's one reshape of both: `delta_disks` with
//!   `new_chunk`, the data offset moved down), read whole and without
//!   member 1;
//! * `r10-4to6-o2-chunk`: a RAID 10 near=2 of 4, 64 KiB chunk,
//!   `--raid-devices 6 --add --add --layout o2 --chunk 128K` in one reshape,
//!   read whole and without roles 0 and 3;
//! * `r10-n2-to-o2-chunk`: a RAID 10 near=2 of 4, 64 KiB chunk, `--layout
//!   o2 --chunk 256K` (md's RAID 10 reshape over the same members: the
//!   same copies, the data offset moved down, every copy rewritten), read
//!   whole and without roles 0 and 2; `r10-o2-to-n2-chunk-killed`: the
//!   way back, killed part-way (SIGKILL), which md carries on from
//!   raidlab's checkpoint (read whole and without roles 1 and 3);
//! * `r1-to-r5`, `r1-to-r5-of-3`: a RAID 1 of two `--level 5` (md's
//!   takeover: a RAID 5 of two, left-symmetric, 64 KiB chunk, no data
//!   moved), and the same with `--raid-devices 3 --add` (then restriped),
//!   read whole and without one member;
//! * `r0-to-r10`, `r10-to-r0`: a RAID 0 of 2 `--level 10 --add --add`
//!   (md's takeover: near=2 of 4, the old members in roles 0 and 2, their
//!   mirrors rebuilt; read whole and from members 1 and 2 alone) and a RAID
//!   10 near=2 of 4 `--level 0` (one copy of each pair kept; the others,
//!   which left the array, are not given to md);
//! * `r1-to-r5-to-r1`: the RAID 5 of two taken back as a RAID 1 (md's
//!   `raid1_takeover`), read whole and from member 1 alone;
//! * `r5-to-r0`: a left-symmetric RAID 5 of 3 `--level 0` (restriped to
//!   parity-last, then the parity member leaves: a RAID 0 of 2; the member
//!   that left is not given to md);
//! * `r0-3to4`, `r0-to-r5`, `r0-to-r4`: a RAID 0 `--raid-devices 4 --add`
//!   (restriped as md does, through a RAID 4 whose parity member is
//!   missing, and back to a RAID 0), `--level 5 --add` (parity rebuilt onto
//!   the new member, then restriped from parity-last to left-symmetric) and
//!   `--level 4 --add` (parity rebuilt; layout word 5, as md's takeover
//!   records it), read whole and, for the RAID 5 without its first member,
//!   for the RAID 4 without its second; `r0-to-r5-of-5`: `--level 5
//!   --raid-devices 5 --add --add` (mdadm's four data members: parity
//!   rebuilt, a reshape onto the fifth member, then the layout), read whole
//!   and without member 2; `r0-4to3-shrunk`: a RAID 0 of 4 whose member
//!   files grew to 16 MiB (room after the data) `--raid-devices 3
//!   --array-size 21504K` (md's way: a RAID 4 of 5, parity role empty,
//!   shrunk backwards to 4, then taken back as a RAID 0 of 3; the member
//!   that left, removed, is not given to md). A RAID 0 grow stopped
//!   part-way is not given to md: md carries the RAID 4 reshape on but
//!   leaves a degraded RAID 4, since taking it back as a RAID 0 is the
//!   job of the mdadm process that started it.
//!
//! `r6-layout-ls-to-ra`, `r5-3to4-killed`, `md-r6-layout`,
//! `r5-chunk-64to256`, `r1-to-r5-of-3`, `r5-3to4`,
//! `r6-4to5-served-stopped`, `r5-4to5-chunk-served-killed` and
//! `r6-4to5-served-end-killed`, `r10-n2-4to5-served-end-killed`,
//! `r6-090-layout-backup-stopped`, `r5-5to4-served-shrink-killed` and
//! `r5-090-4to5-chunk-killed` run only with
//! `RAIDLAB_MDVM_FULL=1` ([`FULL_ONLY`]); `RAIDLAB_MDVM_ONLY=a,b` keeps only
//! the cases so named (of either kind), for working on a few.
//!
//! The other way (kind `M`, the same boot): md creates arrays with a 6 MiB
//! component size on 16 MiB members, writes the pattern, and grows them
//! (`mdadm --grow --size=max` of a RAID 1 and of a RAID 5 with a bitmap,
//! `--bitmap=internal`, a RAID 1 `--raid-devices=3 --add`, a RAID 5
//! `--chunk=256`, a RAID 6 `--layout=right-asymmetric`, a RAID 0 of 2
//! whole members `--raid-devices=3 --add`, a RAID 1 of 2 `--level=5`, a
//! RAID 10 near=2 of 4 `--raid-devices=5 --add`),
//! waiting for its
//! resync, recovery or reshape; raidlab then finds each clean with every member
//! active and md's size, checks it with 0 mismatches and reads the data md
//! wrote before the grow exactly.

use super::*;

#[path = "grow_served.rs"]
mod served;

#[path = "grow_backup.rs"]
mod backup;

/// Members as created.
const SMALL: u64 = 8 * MIB;
/// Members after they grew (the files, then the slots md sees).
const BIG: u64 = 16 * MIB;
/// The pattern at the start of the data disk: md writes it into the arrays
/// it grows (kind `M`).
const PATTERN: u64 = 32 * MIB;
/// The component size md creates its arrays with before growing them.
const MD_KIB: u64 = 6144;

/// An array md grows in the guest (kind `M`): (name, level, devices, op).
const MD_GROWS: &[(&str, u32, usize, &str)] = &[
    ("md-r1-size", 1, 2, "size"),
    ("md-r5-size-bitmap", 5, 3, "size"),
    ("md-r5-bitmap", 5, 3, "bitmap"),
    ("md-r1-add", 1, 3, "raid1add"),
    ("md-r5-chunk", 5, 4, "chunk"),
    ("md-r6-layout", 6, 5, "layout"),
    // Whole members: 2 of 16 MiB stay within the pattern's 32 MiB.
    ("md-r0-add", 0, 3, "raid0add"),
    ("md-r1-to-r5", 1, 2, "r1to5"),
    // A RAID 10 near=2 of 4 onto a fifth member (md's RAID 10 reshape).
    ("md-r10-add", 10, 5, "raid10add"),
    // md refuses a component size change on a RAID 5 with a partial parity
    // log or a write journal (raid5_resize); raidlab must refuse the same
    // arrays, nothing written.
    ("md-r5-size-ppl", 5, 3, "size-ppl"),
    ("md-r5-size-journal", 5, 4, "size-journal"),
];

/// `mdadm --create` options of the bitmapped cases, a RAID 5's (metadata
/// 1.2 and 0.90) and a near-2 RAID 10's: raidlab's 64K chunk, and bitmap chunks of 64K so that
/// the bitmap of these few-MiB members has many bits to mark.
const CHUNK_BITMAP: &[&str] = &[
    "--chunk",
    "64K",
    "--consistency-policy",
    "bitmap",
    "--bitmap-chunk",
    "64K",
];
const CHUNK_BITMAP_090: &[&str] = &[
    "--chunk",
    "64K",
    "--metadata",
    "0.90",
    "--consistency-policy",
    "bitmap",
    "--bitmap-chunk",
    "64K",
];
const R10_N2_BITMAP: &[&str] = &[
    "--layout",
    "n2",
    "--chunk",
    "64K",
    "--consistency-policy",
    "bitmap",
    "--bitmap-chunk",
    "64K",
];

/// Cases the default run leaves to `RAIDLAB_MDVM_FULL=1`, each covered in
/// kind by a default one (a RAID 6 layout change md finishes after a
/// Ctrl-C; a stopped grow by the killed chunk change; md's own reshape over
/// the same members by its chunk change; a finished restripe over the same
/// members by RAID 6 to 5; RAID 1 to 5 then more members by `r1-to-r5` and
/// `r5-4to5-chunk`; a RAID 5 onto one more member, finished by raidlab, by
/// `r6-4to5` and `r5-4to5-chunk`, and the same carried on by md by
/// `r5-3to4-served-killed`; a served reshape stopped cleanly by the served
/// kill -9 and the offline Ctrl-C of `r6-layout-stopped`, which
/// checkpoints the same way; a served combined reshape by the served kill
/// and the offline combined kill; a RAID 6 killed with its walk held at the
/// end by the RAID 5 one, md's same reshape code; a 0.90 restripe
/// stopped cleanly through its backup file by the killed one; a served
/// shrink by the offline killed shrink and the served kills; and from
/// 2026-12-06, when the default suite ran over its 25 minutes: a removed
/// bitmap by the added one, a RAID 10's size with a bitmap by the RAID 5's,
/// a RAID 0 grow with a new chunk by the plain RAID 0 grow and the RAID 5
/// grow with a new chunk, RAID 0 to 4 by RAID 0 to 5 (one takeover code),
/// RAID 1 to 5 and back by RAID 1 to 5 and RAID 5 to 0, a RAID 10 shrink
/// with a new chunk by the plain shrink and the near-to-offset chunk
/// change, a RAID 10 grow to offset with a new chunk by the same, md's
/// RAID 1 grow by members by its RAID 0 and 10 ones, md's bitmap added by
/// its size grow with a bitmap; a RAID 10's new chunk with a bitmap, which
/// keeps the bitmap as it is, by its grow by a member with one, which
/// resizes it; a RAID 10 shrink by the same shrink with a bitmap, from
/// 2026-12-06 too), to keep the default suite's one boot short under TCG.
const FULL_ONLY: &[&str] = &[
    "r1-bitmap-removed",
    "r10-size-bitmap",
    "r0-3to4-chunk",
    "r0-to-r4",
    "r1-to-r5-to-r1",
    "r10-5to4-chunk-shrunk",
    "r10-4to6-o2-chunk",
    "md-r1-add",
    "md-r5-bitmap",
    "r6-layout-ls-to-ra",
    "r5-3to4-killed",
    "md-r6-layout",
    "r5-chunk-64to256",
    "r1-to-r5-of-3",
    "r5-3to4",
    "r6-4to5-served-stopped",
    "r5-4to5-chunk-served-killed",
    "r6-4to5-served-end-killed",
    "r10-n2-4to5-served-end-killed",
    "r6-090-layout-backup-stopped",
    "r5-5to4-served-shrink-killed",
    "r5-090-4to5-chunk-killed",
    "r10-chunk-bitmap",
    "r10-5to4-shrunk",
];

struct Grown {
    name: &'static str,
    level: u32,
    devices: usize,
    create: &'static [&'static str],
    /// Files grow to BIG before the grow.
    grow_files: bool,
    grow: &'static [&'static str],
    /// Sets of roles md reads without (the new mirror alone).
    sets: Vec<Vec<usize>>,
    /// Stop raidlab's reshape part-way (`--max-rate 2M`, then this signal
    /// after a second and a half): md must carry it on when it assembles
    /// the members. `SERVED-KILL` and `SERVED-TERM`: the reshape is walked
    /// by a server instead, killed -9 or stopped cleanly mid-walk
    /// ([`served::stopped_while_served`]); `SERVED-END-KILL`: killed -9
    /// with the walk held at its end, the array's end recorded as the
    /// position. `None`: the grow runs to its end
    /// on the host.
    interrupt: Option<&'static str>,
}

fn cases() -> Vec<Grown> {
    vec![
        Grown {
            name: "r1-size",
            level: 1,
            devices: 2,
            create: &[],
            grow_files: true,
            grow: &["--size", "max"],
            sets: vec![],
            interrupt: None,
        },
        Grown {
            name: "r5-size-bitmap",
            level: 5,
            devices: 3,
            create: CHUNK_BITMAP,
            grow_files: true,
            grow: &["--size", "max"],
            sets: vec![],
            interrupt: None,
        },
        Grown {
            name: "r10-size-bitmap",
            level: 10,
            devices: 4,
            create: R10_N2_BITMAP,
            grow_files: true,
            grow: &["--size", "max"],
            sets: vec![vec![0, 3]],
            interrupt: None,
        },
        Grown {
            name: "r5-bitmap-added",
            level: 5,
            devices: 3,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--bitmap", "internal", "--bitmap-chunk", "64K"],
            sets: vec![],
            interrupt: None,
        },
        Grown {
            name: "r1-bitmap-removed",
            level: 1,
            devices: 2,
            create: &["--consistency-policy", "bitmap"],
            grow_files: false,
            grow: &["--bitmap", "none"],
            sets: vec![],
            interrupt: None,
        },
        Grown {
            name: "r1-2to3",
            level: 1,
            devices: 2,
            create: &[],
            grow_files: false,
            grow: &["--raid-devices", "3", "--add", "NEW"],
            sets: vec![vec![0, 1]],
            interrupt: None,
        },
        Grown {
            name: "r5-3to4",
            level: 5,
            devices: 3,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--raid-devices", "4", "--add", "NEW"],
            sets: vec![vec![3]],
            interrupt: None,
        },
        Grown {
            name: "r5-5to4-shrunk",
            level: 5,
            devices: 5,
            create: &["--chunk", "64K"],
            grow_files: false,
            // Room after the data first (md's move of the data offset up
            // needs it), then the shrink to what 4 members of 6 MiB hold.
            grow: &[
                "--size",
                "6M",
                "THEN",
                "--raid-devices",
                "4",
                "--array-size",
                "18M",
            ],
            sets: vec![vec![1]],
            interrupt: None,
        },
        Grown {
            name: "r6-5to4-shrink-killed",
            level: 6,
            devices: 5,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &[
                "--size",
                "6M",
                "THEN",
                "--raid-devices",
                "4",
                "--array-size",
                "12M",
            ],
            sets: vec![vec![0]],
            interrupt: Some("KILL"),
        },
        Grown {
            name: "r6-4to5",
            level: 6,
            devices: 4,
            create: &["--chunk", "128K", "--layout", "left-asymmetric"],
            grow_files: false,
            grow: &["--raid-devices", "5", "--add", "NEW"],
            sets: vec![vec![0, 4]],
            interrupt: None,
        },
        Grown {
            name: "r5-chunk-64to256",
            level: 5,
            devices: 4,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--chunk", "256K"],
            sets: vec![vec![1]],
            interrupt: None,
        },
        Grown {
            name: "r6-layout-ls-to-ra",
            level: 6,
            devices: 5,
            create: &["--chunk", "128K"],
            grow_files: false,
            grow: &["--layout", "right-asymmetric"],
            sets: vec![vec![0, 4]],
            interrupt: None,
        },
        Grown {
            name: "r4-to-r5",
            level: 4,
            devices: 4,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--level", "5", "--layout", "left-symmetric"],
            sets: vec![vec![3]],
            interrupt: None,
        },
        Grown {
            name: "r5-to-r6",
            level: 5,
            devices: 4,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--level", "6", "--add", "NEW"],
            sets: vec![vec![1, 4]],
            interrupt: None,
        },
        Grown {
            name: "r6-to-r5",
            level: 6,
            devices: 5,
            create: &["--chunk", "64K", "--layout", "right-asymmetric"],
            grow_files: false,
            grow: &["--level", "5"],
            sets: vec![vec![2]],
            interrupt: None,
        },
        Grown {
            name: "r5-chunk-killed",
            level: 5,
            devices: 4,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--chunk", "256K"],
            sets: vec![vec![2]],
            interrupt: Some("KILL"),
        },
        Grown {
            name: "r6-layout-stopped",
            level: 6,
            devices: 5,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--layout", "right-symmetric"],
            sets: vec![vec![1, 3]],
            interrupt: Some("INT"),
        },
        Grown {
            name: "r5-3to4-killed",
            level: 5,
            devices: 3,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--raid-devices", "4", "--add", "NEW"],
            sets: vec![vec![0]],
            interrupt: Some("KILL"),
        },
        // md restripes a RAID 5 with its bitmap in place (issue 36): the
        // bitmap raidlab carried through, taken up by md, its bits as md
        // would keep them; and md carrying on one killed part-way.
        Grown {
            name: "r5-3to4-bitmap",
            level: 5,
            devices: 3,
            create: CHUNK_BITMAP,
            grow_files: false,
            grow: &["--raid-devices", "4", "--add", "NEW"],
            sets: vec![vec![3]],
            interrupt: None,
        },
        Grown {
            name: "r5-3to4-bitmap-killed",
            level: 5,
            devices: 3,
            create: CHUNK_BITMAP,
            grow_files: false,
            grow: &["--raid-devices", "4", "--add", "NEW"],
            sets: vec![vec![0]],
            interrupt: Some("KILL"),
        },
        // A RAID 10 grown with its bitmap, which md resizes to the new
        // array at the reshape's start (raidlab writes it so before the
        // reshape is recorded). Not killed part-way for md to carry on: md
        // resuming a RAID 10 grow with a bitmap, its own too, never
        // resyncs the new space (its bitmap then covers the old size), and
        // its check counts the copies there as mismatched (3,840 sectors
        // after md's own grow stopped and resumed in the VM, 0 without a
        // bitmap; 4,352 after raidlab's killed one).
        Grown {
            name: "r10-4to5-bitmap",
            level: 10,
            devices: 4,
            create: R10_N2_BITMAP,
            grow_files: false,
            grow: &["--raid-devices", "5", "--add", "NEW"],
            sets: vec![vec![0, 3]],
            interrupt: None,
        },
        // Over the same members md keeps a RAID 10's bitmap as it is.
        Grown {
            name: "r10-chunk-bitmap",
            level: 10,
            devices: 4,
            create: R10_N2_BITMAP,
            grow_files: false,
            grow: &["--chunk", "128K"],
            sets: vec![vec![0, 3]],
            interrupt: None,
        },
        // Level changes with md's bitmap kept through the takeover, the
        // rebuild of Q and the restripe (the served fault simulation's
        // level changes with a bitmap, issue 36): md takes up the bitmap
        // raidlab carried.
        Grown {
            name: "r5-to-r6-bitmap",
            level: 5,
            devices: 4,
            create: CHUNK_BITMAP,
            grow_files: false,
            grow: &["--level", "6", "--add", "NEW"],
            sets: vec![vec![0, 2]],
            interrupt: None,
        },
        Grown {
            name: "r6-to-r5-bitmap",
            level: 6,
            devices: 5,
            create: CHUNK_BITMAP,
            grow_files: false,
            grow: &["--level", "5"],
            sets: vec![vec![1]],
            interrupt: None,
        },
        // md's --level=5 --raid-devices=3 of a RAID 1 with its bitmap.
        Grown {
            name: "r1-to-r5-of-3-bitmap",
            level: 1,
            devices: 2,
            create: &["--consistency-policy", "bitmap", "--bitmap-chunk", "64K"],
            grow_files: false,
            grow: &["--level", "5", "--raid-devices", "3", "--add", "NEW"],
            sets: vec![vec![2]],
            interrupt: None,
        },
        Grown {
            name: "r0-3to4",
            level: 0,
            devices: 3,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--raid-devices", "4", "--add", "NEW"],
            sets: vec![],
            interrupt: None,
        },
        // A RAID 0's other members and a new chunk in one reshape (md's
        // RAID 4 without parity, delta_disks with new_chunk), then back to
        // a RAID 0 of 4 with the 128K chunk.
        Grown {
            name: "r0-3to4-chunk",
            level: 0,
            devices: 3,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--raid-devices", "4", "--chunk", "128K", "--add", "NEW"],
            sets: vec![],
            interrupt: None,
        },
        // Fewer members of a RAID 0 (md's way: a RAID 4 of 5 whose parity
        // role is empty shrunk backwards to 4, then back to a RAID 0 of 3).
        // The files grow to 16 MiB first: room after the data for md's move
        // up (md keeps a RAID 0 member's data size, and refuses `--size` of
        // a RAID 0). 3 members of 7 MiB hold 21504 KiB. The fourth member
        // (the RAID 4's new parity, removed by the takeover back) is not
        // given to md.
        Grown {
            name: "r0-4to3-shrunk",
            level: 0,
            devices: 4,
            create: &["--chunk", "64K"],
            grow_files: true,
            grow: &["--raid-devices", "3", "--array-size", "21504K"],
            sets: vec![],
            interrupt: None,
        },
        Grown {
            name: "r0-to-r5",
            level: 0,
            devices: 3,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--level", "5", "--add", "NEW"],
            sets: vec![vec![0]],
            interrupt: None,
        },
        // md's takeover records layout word 5 (parity-last) for this RAID 4,
        // as raidlab now writes it: md must take that RAID 4 as its own.
        Grown {
            name: "r0-to-r4",
            level: 0,
            devices: 3,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--level", "4", "--add", "NEW"],
            sets: vec![vec![1]],
            interrupt: None,
        },
        // mdadm's --level 5 --raid-devices N of a RAID 0: N-1 data members
        // (raidlab: parity rebuilt, then onto the fifth, then the layout).
        Grown {
            name: "r0-to-r5-of-5",
            level: 0,
            devices: 3,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &[
                "--level",
                "5",
                "--raid-devices",
                "5",
                "--add",
                "NEW",
                "--add",
                "NEW2",
            ],
            sets: vec![vec![2]],
            interrupt: None,
        },
        Grown {
            name: "r1-to-r5",
            level: 1,
            devices: 2,
            create: &[],
            grow_files: false,
            grow: &["--level", "5"],
            sets: vec![vec![0]],
            interrupt: None,
        },
        Grown {
            name: "r1-to-r5-of-3",
            level: 1,
            devices: 2,
            create: &[],
            grow_files: false,
            grow: &["--level", "5", "--raid-devices", "3", "--add", "NEW"],
            sets: vec![vec![2]],
            interrupt: None,
        },
        Grown {
            name: "r0-to-r10",
            level: 0,
            devices: 2,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--level", "10", "--add", "NEW", "--add", "NEW2"],
            sets: vec![vec![0, 3]],
            interrupt: None,
        },
        Grown {
            name: "r10-to-r0",
            level: 10,
            devices: 4,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--level", "0"],
            sets: vec![],
            interrupt: None,
        },
        Grown {
            name: "r1-to-r5-to-r1",
            level: 1,
            devices: 2,
            create: &[],
            grow_files: false,
            grow: &["--level", "5", "THEN", "--level", "1"],
            sets: vec![vec![0]],
            interrupt: None,
        },
        Grown {
            name: "r5-to-r0",
            level: 5,
            devices: 3,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--level", "0"],
            sets: vec![],
            interrupt: None,
        },
        Grown {
            name: "r10-4to6",
            level: 10,
            devices: 4,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--raid-devices", "6", "--add", "NEW", "--add", "NEW2"],
            sets: vec![vec![0, 3]],
            interrupt: None,
        },
        // Metadata 0.90 has no data offset to move: grown in place, the
        // critical section backed up on the new member first (mdadm's
        // md_backup_data record at the end of its component), as mdadm
        // grows one without a backup file; md must assemble the result,
        // and carry on one killed part-way.
        Grown {
            name: "r5-090-3to4",
            level: 5,
            devices: 3,
            create: &["--chunk", "64K", "--metadata", "0.90"],
            grow_files: false,
            grow: &["--raid-devices", "4", "--add", "NEW"],
            sets: vec![vec![1]],
            interrupt: None,
        },
        // With md's internal bitmap (after the superblock, clear of the
        // data): carried through as md carries a RAID 5's, unchanged but
        // for its events; md assembles the grown array with it, and
        // carries on one killed part-way.
        Grown {
            name: "r5-090-3to4-bitmap",
            level: 5,
            devices: 3,
            create: CHUNK_BITMAP_090,
            grow_files: false,
            grow: &["--raid-devices", "4", "--add", "NEW"],
            sets: vec![vec![1]],
            interrupt: None,
        },
        // `--size` of a metadata 0.90 array (its data from the member's
        // start up to the superblock at its end): down, then `max` back,
        // the bitmap after the superblock resized each time, the space
        // given back resynced.
        Grown {
            name: "r5-090-size-bitmap",
            level: 5,
            devices: 3,
            create: CHUNK_BITMAP_090,
            grow_files: false,
            grow: &["--size", "4M", "THEN", "--size", "max"],
            sets: vec![vec![1]],
            interrupt: None,
        },
        Grown {
            name: "r5-090-3to4-bitmap-killed",
            level: 5,
            devices: 3,
            create: CHUNK_BITMAP_090,
            grow_files: false,
            grow: &["--raid-devices", "4", "--add", "NEW"],
            sets: vec![vec![2]],
            interrupt: Some("KILL"),
        },
        Grown {
            name: "r6-090-4to5-killed",
            level: 6,
            devices: 4,
            create: &["--chunk", "64K", "--metadata", "0.90"],
            grow_files: false,
            grow: &["--raid-devices", "5", "--add", "NEW"],
            sets: vec![vec![0, 4]],
            interrupt: Some("KILL"),
        },
        // The same with a new chunk in one reshape (mdadm makes both at
        // once, and asks no backup file: the new member holds the critical
        // section, raidlab's longer than mdadm's); killed past the
        // critical section, md carries it on from raidlab's checkpoint.
        Grown {
            name: "r5-090-4to5-chunk-killed",
            level: 5,
            devices: 4,
            create: &["--chunk", "64K", "--metadata", "0.90"],
            grow_files: false,
            grow: &["--raid-devices", "5", "--add", "NEW", "--chunk", "32K"],
            sets: vec![vec![2]],
            interrupt: Some("KILL"),
        },
        Grown {
            name: "r10-o2-4to5-killed",
            level: 10,
            devices: 4,
            create: &["--chunk", "64K", "--layout", "o2"],
            grow_files: false,
            grow: &["--raid-devices", "5", "--add", "NEW"],
            sets: vec![vec![1]],
            interrupt: Some("KILL"),
        },
        Grown {
            name: "r10-5to4-shrunk",
            level: 10,
            devices: 5,
            create: &["--chunk", "64K"],
            grow_files: false,
            // What 4 members hold once md's one-chunk move up comes out
            // of the component size (the members are full, as mdadm
            // makes them): 7104 KiB each, times 4, halved.
            grow: &["--raid-devices", "4", "--array-size", "14208K"],
            sets: vec![vec![0, 3]],
            interrupt: None,
        },
        // The same with md's internal bitmap (64 KiB chunks), which md
        // resizes down to the fewer members' array: raidlab keeps it at
        // its size through the walk and resizes it in the end's commit.
        // md takes up the resized one; killed part-way, md carries the
        // backward reshape on with the larger one raidlab left.
        Grown {
            name: "r10-5to4-shrunk-bitmap",
            level: 10,
            devices: 5,
            create: R10_N2_BITMAP,
            grow_files: false,
            grow: &["--raid-devices", "4", "--array-size", "14208K"],
            sets: vec![vec![0, 3]],
            interrupt: None,
        },
        Grown {
            name: "r10-5to4-shrink-bitmap-killed",
            level: 10,
            devices: 5,
            create: R10_N2_BITMAP,
            grow_files: false,
            grow: &["--raid-devices", "4", "--array-size", "14208K"],
            sets: vec![vec![1, 2]],
            interrupt: Some("KILL"),
        },
        // Fewer members and a new chunk in one backward reshape (md's
        // raid10_check_reshape takes delta_disks < 0 with new_chunk): the
        // data offset up by two 128 KiB rows, out of the component size
        // (6912 KiB each, times 4, halved).
        Grown {
            name: "r10-5to4-chunk-shrunk",
            level: 10,
            devices: 5,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &[
                "--raid-devices",
                "4",
                "--chunk",
                "128K",
                "--array-size",
                "13824K",
            ],
            sets: vec![vec![0, 3]],
            interrupt: None,
        },
        Grown {
            name: "r10-o2-4to3-shrink-killed",
            level: 10,
            devices: 4,
            create: &["--chunk", "64K", "--layout", "o2"],
            grow_files: false,
            // offset=2 moves the data offset up by a row of two chunks:
            // 7040 KiB each, times 3, halved, in whole chunks.
            grow: &["--raid-devices", "3", "--array-size", "10560K"],
            sets: vec![vec![1]],
            interrupt: Some("KILL"),
        },
        // md's reshape of other members and a new chunk at once (mdadm
        // --grow --raid-devices 5 --chunk 128K: `delta_disks` 1 and
        // `new_chunk` in one reshape), the data offset moved down by at
        // least the larger chunk, the walk forwards in its stripes.
        Grown {
            name: "r5-4to5-chunk",
            level: 5,
            devices: 4,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--raid-devices", "5", "--add", "NEW", "--chunk", "128K"],
            sets: vec![vec![1]],
            interrupt: None,
        },
        // A RAID 10 onto more members with a new chunk and layout in one
        // reshape (md's raid10_check_reshape takes both with delta_disks).
        Grown {
            name: "r10-4to6-o2-chunk",
            level: 10,
            devices: 4,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &[
                "--raid-devices",
                "6",
                "--add",
                "NEW",
                "--add",
                "NEW2",
                "--layout",
                "o2",
                "--chunk",
                "128K",
            ],
            // offset=2 keeps a chunk's copies on neighbouring members: 0
            // and 3 of 6 share none.
            sets: vec![vec![0, 3]],
            interrupt: None,
        },
        // md's RAID 10 reshape over the same members (`raid10_check_reshape`:
        // near to offset with the same copies, a new chunk): the data
        // offset moved down by a row of the new geometry (512 KiB), the
        // walk forwards; 7 MiB of each member is 14 rows either way.
        Grown {
            name: "r10-n2-to-o2-chunk",
            level: 10,
            devices: 4,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--layout", "o2", "--chunk", "256K"],
            // offset=2 keeps a chunk's two copies on neighbouring members
            // (3 and 0 too): 0 and 2 share none.
            sets: vec![vec![0, 2]],
            interrupt: None,
        },
        // The same restripe of an offset=2 back to near=2 and 64 KiB,
        // killed part-way: md carries it on from raidlab's checkpoint (the
        // data offset moved down by one row, md's least: the kernel's
        // raid10_run takes no less).
        Grown {
            name: "r10-o2-to-n2-chunk-killed",
            level: 10,
            devices: 4,
            create: &["--chunk", "256K", "--layout", "o2"],
            grow_files: false,
            grow: &["--layout", "n2", "--chunk", "64K"],
            sets: vec![vec![1, 3]],
            interrupt: Some("KILL"),
        },
        Grown {
            name: "r5-ppl-again",
            level: 5,
            devices: 3,
            create: &["--chunk", "64K", "--consistency-policy", "ppl"],
            grow_files: false,
            grow: &[
                "--consistency-policy",
                "resync",
                "THEN",
                "--consistency-policy",
                "ppl",
            ],
            sets: vec![],
            interrupt: None,
        },
    ]
    .into_iter()
    .chain(served::cases())
    .chain(backup::cases())
    .collect()
}

/// raidlab creates, fills and grows one case; the members (after the grow),
/// their size, raidlab's export of the grown array, and how many of its
/// first bytes md must read alike: all, except where md carries on a RAID 10
/// grow raidlab stopped. md's RAID 10 reshape walks only the old size and
/// leaves the new space as the members had it, to be resynced
/// (`raid10_finish_reshape`), where raidlab writes zeros: there only the
/// data from before the grow is md's to read exactly.
type GrownArray = (Vec<String>, u64, Vec<u8>, u64);

/// The member count a case's shrink (`--array-size` with `--raid-devices`)
/// leaves; `None` for a grow.
fn shrinks_to(c: &Grown) -> Option<usize> {
    if !c.grow.contains(&"--array-size") {
        return None;
    }
    let at = c.grow.iter().position(|&w| w == "--raid-devices")?;
    c.grow.get(at + 1)?.parse().ok()
}

fn raidlab_grown(c: &Grown, dir: &Path, pat: &[u8]) -> Result<GrownArray, String> {
    fs::create_dir_all(dir).unwrap();
    let mut members: Vec<String> = (0..c.devices)
        .map(|i| dir.join(format!("m{i}.img")).to_str().unwrap().to_string())
        .collect();
    let (level, small) = (c.level.to_string(), SMALL.to_string());
    let mut a = vec!["create", "--level", &level, "--member-size", &small];
    a.extend_from_slice(c.create);
    a.extend(members.iter().map(String::as_str));
    run(&a)?;
    let (_, v) = detail_state(&members, &members[0]);
    let size = v["array_size_bytes"].as_u64().ok_or("no array size")?;
    let input = dir.join("input.bin");
    fs::write(&input, &pat[..size as usize]).unwrap();
    let i = input.to_str().unwrap().to_string();
    let mut a = vec!["import"];
    a.extend(members.iter().map(String::as_str));
    a.extend(["--input", &i]);
    run(&a)?;
    fs::remove_file(&input).ok();
    if c.grow_files {
        for m in &members {
            let f = OpenOptions::new().write(true).open(m).unwrap();
            f.set_len(BIG).unwrap();
        }
    }
    let new = dir
        .join(format!("m{}.img", c.devices))
        .to_str()
        .unwrap()
        .to_string();
    let new2 = dir
        .join(format!("m{}.img", c.devices + 1))
        .to_str()
        .unwrap()
        .to_string();
    let bak = backup::path(dir);
    // What an NBD client wrote while a server walked the reshape.
    let mut written = None;
    let steps = c.grow.split(|&w| w == "THEN").count();
    for (k, step) in c.grow.split(|&w| w == "THEN").enumerate() {
        let mut a = vec!["grow"];
        a.extend(members.iter().map(String::as_str));
        for &w in step {
            a.push(match w {
                "NEW" => &new,
                "BACKUP" => &bak,
                "NEW2" => &new2,
                w => w,
            });
        }
        if step.contains(&"NEW") {
            a.extend(["--member-size", &small]);
        }
        // Only the last step (the reshape) is stopped part-way.
        match c.interrupt.filter(|_| k + 1 == steps) {
            None => {
                run(&a)?;
            }
            Some(signal) => match signal.strip_prefix("SERVED-") {
                Some(how) => written = Some(served::stopped_while_served(&a, how, pat)?),
                None => interrupted(&a, signal)?,
            },
        }
    }
    if c.grow.contains(&"NEW") {
        members.push(new);
    }
    if c.grow.contains(&"NEW2") {
        members.push(new2);
    }
    // A member the grow left a hot spare (Q's after RAID 6 to 5) or took
    // out (a RAID 10's second copies as it becomes a RAID 0) is not part
    // of the array md must find complete.
    let (_, v) = detail_state(&members, &members[0]);
    if let Some(list) = v["members"].as_array() {
        let spares: Vec<String> = list
            .iter()
            .filter(|m| m["state"] == "spare" || m["state"] == "removed")
            .filter_map(|m| m["device"].as_str().map(str::to_string))
            .collect();
        members.retain(|m| !spares.iter().any(|s| m.ends_with(s.as_str())));
    }
    if c.interrupt.is_some() {
        // Stopped part-way: what it reads now (read-only, both
        // geometries; through a backup file, only given the file, which
        // puts its window back first) is the data from before; what md
        // must read once it has carried the reshape on is what raidlab's
        // own `--continue` gives, on a copy of the members; with what a
        // client wrote while it was served.
        let mut pat = pat[..size as usize].to_vec();
        if let Some((at, bytes)) = &written {
            pat[*at as usize..][..bytes.len()].copy_from_slice(bytes);
        }
        let copy = dir.join("continued");
        fs::create_dir_all(&copy).unwrap();
        let copies: Vec<String> = members
            .iter()
            .map(|m| {
                let to = copy.join(Path::new(m).file_name().unwrap());
                fs::copy(m, &to).unwrap();
                to.to_str().unwrap().to_string()
            })
            .collect();
        let copied_backup = if backup::uses_backup(c) {
            Some(backup::copy_to(dir, &copy)?)
        } else {
            None
        };
        let got = match &copied_backup {
            // md's rule: refused without the file (the members as md gets
            // them); read with it on the copies, where the put-back writes.
            Some(file) => backup::read_stopped(&members, &copies, file, &copy)?,
            None => export(&members, &dir.join("export.bin"))?,
        };
        // A stopped shrink reads what the fewer members will hold.
        let kept = (size as usize).min(got.len());
        if got[..] != pat[..kept] {
            return Err(format!(
                "raidlab reads its stopped reshape wrong: {}",
                first_diff(&got, &pat[..kept])
            ));
        }
        let mut a = vec!["grow"];
        a.extend(copies.iter().map(String::as_str));
        a.push("--continue");
        if let Some(file) = &copied_backup {
            a.extend(["--backup-file", file]);
        }
        run(&a)?;
        let (_, v) = detail_state(&copies, &copies[0]);
        let grown = v["array_size_bytes"].as_u64().ok_or("no array size")?;
        let want = export(&copies, &copy.join("export.bin"))?;
        fs::remove_dir_all(&copy).ok();
        let kept = (size as usize).min(want.len());
        if want[..kept] != pat[..kept] || want[kept..].iter().any(|&b| b != 0) {
            return Err("raidlab's --continue of its stopped reshape reads wrong".into());
        }
        // md's RAID 10 grow leaves the new space to its resync; a shrink
        // has none.
        let exact = if c.level == 10 {
            size.min(grown)
        } else {
            grown
        };
        return Ok((members, grown, want, exact));
    }
    let (_, v) = detail_state(&members, &members[0]);
    let grown = v["array_size_bytes"].as_u64().ok_or("no array size")?;
    let got = export(&members, &dir.join("export.bin"))?;
    fs::remove_file(dir.join("export.bin")).ok();
    // A shrink keeps what the fewer members hold.
    let kept = (size as usize).min(got.len());
    if got[..kept] != pat[..kept] {
        return Err(format!(
            "raidlab reads the grown array wrong: {}",
            first_diff(&got[..kept], &pat[..kept])
        ));
    }
    if v["level"] != "raid0" {
        let mut a = vec!["check"];
        a.extend(members.iter().map(String::as_str));
        let o = raidlab(&a);
        if !String::from_utf8_lossy(&o.stdout).contains("mismatch_cnt: 0") {
            return Err(format!(
                "raidlab's check after the grow: {}",
                describe(&a, &o)
            ));
        }
    }
    Ok((members, grown, got, grown))
}

/// Run the grow `a` slowed down, stop it with `signal` (KILL: a crash;
/// INT: Ctrl-C, which checkpoints at the next step) after 1.5 s, and require
/// that it stopped part-way: the superblocks record a reshape.
fn interrupted(a: &[&str], signal: &str) -> Result<(), String> {
    let mut child = Command::new(RAIDLAB)
        .args(a)
        .args(["--max-rate", "2M"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("raidlab grow: {e}"))?;
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let _ = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status();
    let _ = child.wait();
    let members: Vec<String> = a
        .iter()
        .skip(1)
        .take_while(|w| !w.starts_with("--"))
        .map(|w| w.to_string())
        .collect();
    let mut all = members.clone();
    if let Some(i) = a.iter().position(|w| *w == "--add") {
        all.push(a[i + 1].to_string());
    }
    let mut d = vec!["detail"];
    d.extend(all.iter().map(String::as_str));
    let o = raidlab(&d);
    let text = String::from_utf8_lossy(&o.stdout);
    if !text.contains("interrupted reshape") {
        return Err(format!(
            "the grow was not stopped part-way by SIG{signal} after 1.5 s: {}",
            describe(&d, &o)
        ));
    }
    Ok(())
}

/// raidlab takes an array md grew (kind `M`): clean, every member active,
/// md's size, `check` 0 mismatches, the data md wrote before the grow exact.
fn raidlab_reads_md_grown(
    data: &fs::File,
    work: &Path,
    name: &str,
    offs: &[u64],
    res: &GuestResults,
    pat: &[u8],
) -> Vec<String> {
    let field = |d: &str, key: &str| -> Option<u64> {
        d.split_whitespace()
            .find_map(|w| w.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
    };
    let (size, old, refused) = match res.get(&(name.to_string(), "M".to_string())) {
        Some((s, d)) if s == "PASS" => {
            let refused = d
                .split_whitespace()
                .find_map(|w| w.strip_prefix("refused="))
                .map(|m| m.replace('_', " "));
            let what = if refused.is_some() { "refused" } else { "grew" };
            loud(&format!("md_compat: grow: {name}: md {what} it: {d}"));
            (field(d, "array_bytes"), field(d, "old_bytes"), refused)
        }
        other => return vec![format!("{name}: md's grow: {other:?}")],
    };
    let (Some(size), Some(old)) = (size, old) else {
        return vec![format!("{name}: no array_bytes/old_bytes in md's result")];
    };
    let dir = work.join(name);
    let members = from_slots(data, &dir, offs, BIG);
    let mut bad = Vec::new();
    let (_, v) = detail_state(&members, &members[0]);
    if v["state"] != "clean" || v["array_size_bytes"].as_u64() != Some(size) {
        bad.push(format!(
            "{name}: raidlab's detail of md's grown array: state {}, size {} (md's {size})",
            v["state"], v["array_size_bytes"]
        ));
    }
    let active = v["members"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|x| x["state"] == "active" || x["state"] == "journal")
                .count()
        })
        .unwrap_or(0);
    if active != offs.len() {
        bad.push(format!(
            "{name}: {active} of {} members active in raidlab",
            offs.len()
        ));
    }
    if let Some(said) = refused {
        bad.extend(raidlab_refuses_size_too(name, said, &members));
    }
    let mut a = vec!["check"];
    a.extend(members.iter().map(String::as_str));
    let o = raidlab(&a);
    if v["level"] != "raid0" && !String::from_utf8_lossy(&o.stdout).contains("mismatch_cnt: 0") {
        bad.push(format!("{name}: {}", describe(&a, &o)));
    }
    match export(&members, &dir.join("export.bin")) {
        Ok(got) if got.len() as u64 == size && got[..old as usize] == pat[..old as usize] => {}
        Ok(got) => bad.push(format!(
            "{name}: raidlab reads md's grown array wrong ({} bytes, md's {size}): {}",
            got.len(),
            first_diff(
                &got[..old.min(got.len() as u64) as usize],
                &pat[..old.min(got.len() as u64) as usize]
            )
        )),
        Err(e) => bad.push(format!("{name}: {e}")),
    }
    fs::remove_file(dir.join("export.bin")).ok();
    bad
}

/// An array md refused a `--size` change (its message `said`): raidlab
/// refuses `grow --size max` on it too, with md's reason, and changes no
/// byte of any member.
fn raidlab_refuses_size_too(name: &str, said: String, members: &[String]) -> Vec<String> {
    let mut bad = Vec::new();
    if !said.contains("Invalid argument") {
        bad.push(format!(
            "{name}: md's refusal does not say what raidlab quotes (\"Invalid argument\"): {said}"
        ));
    }
    let before: Vec<Vec<u8>> = members.iter().map(|m| fs::read(m).unwrap()).collect();
    let mut a = vec!["grow"];
    a.extend(members.iter().map(String::as_str));
    a.extend(["--size", "max"]);
    let o = raidlab(&a);
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.success() || !err.contains("md does not change the component size") {
        bad.push(format!(
            "{name}: raidlab did not refuse --size as md did ({said}): {}",
            describe(&a, &o)
        ));
    }
    for (m, b) in members.iter().zip(&before) {
        if fs::read(m).unwrap() != *b {
            bad.push(format!("{name}: raidlab's refused grow changed {m}"));
        }
    }
    bad
}

fn run(args: &[&str]) -> Result<Output, String> {
    let o = raidlab(args);
    if o.status.success() {
        Ok(o)
    } else {
        Err(describe(args, &o))
    }
}

#[test]
fn md_assembles_arrays_raidlab_grew() {
    if vm_tests_off() {
        return;
    }
    let _one = ONE_BOOT.lock().unwrap_or_else(|p| p.into_inner());
    let guest_dir = match guest() {
        Ok(g) => g,
        Err(why) => return skip(&why),
    };
    let work = work_dir("md_grow");
    let pat = pattern(4 * BIG);
    let data_path = work.join("data.img");
    let data = data_disk(&data_path, &pat[..PATTERN as usize]);
    let mut next = PATTERN;
    let mut failures: Vec<String> = Vec::new();
    let mut manifest = String::new();
    // (name, size, out, sets, raidlab's export, bytes md reads alike)
    let mut reads: Vec<(String, u64, u64, usize, Vec<u8>, u64)> = Vec::new();
    let full = std::env::var_os("RAIDLAB_MDVM_FULL").is_some_and(|v| v != "0");
    let only: Option<Vec<String>> = std::env::var("RAIDLAB_MDVM_ONLY")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    let chosen = |name: &str| match &only {
        Some(names) => names.iter().any(|n| n == name),
        None => full || !FULL_ONLY.contains(&name),
    };
    // A misspelt name here would keep its case in the default boot unseen.
    let named: Vec<&str> = cases()
        .iter()
        .map(|c| c.name)
        .chain(MD_GROWS.iter().map(|g| g.0))
        .collect();
    for n in FULL_ONLY {
        assert!(named.contains(n), "FULL_ONLY names {n}, which is no case");
    }
    for c in cases().into_iter().filter(|c| chosen(c.name)) {
        let dir = work.join(c.name);
        let (members, size, want, exact) = match raidlab_grown(&c, &dir, &pat) {
            Ok(x) => x,
            Err(e) => {
                failures.push(format!("{}: {e}", c.name));
                continue;
            }
        };
        let slot = if c.grow_files { BIG } else { SMALL };
        let mut offs = Vec::new();
        for m in &members {
            let bytes = fs::read(m).unwrap();
            assert_eq!(bytes.len() as u64, slot, "{m}");
            data.write_all_at(&bytes, next).unwrap();
            offs.push(next);
            next += slot;
        }
        // A 0.90 restripe stopped part-way: md is given raidlab's backup
        // file with the members.
        let with_backup = if backup::uses_backup(&c) {
            match backup::place(&data, &mut next, &dir) {
                Ok(flag) => format!(",{flag}"),
                Err(e) => {
                    failures.push(format!("{}: {e}", c.name));
                    continue;
                }
            }
        } else {
            String::new()
        };
        let stride = size.div_ceil(MIB) * MIB;
        let out = next;
        next += stride * (1 + c.sets.len() as u64);
        // The level after the grow (a RAID 0 may have become a RAID 5),
        // which md checks unless it is a RAID 0.
        let (_, v) = detail_state(&members, &members[0]);
        let level = v["level"]
            .as_str()
            .and_then(|l| l.strip_prefix("raid")?.parse::<u32>().ok())
            .unwrap_or(c.level);
        manifest.push_str(&format!(
            "B {} {} {} {slot} {} {size} {out} {} {}\n",
            c.name,
            level,
            members.len(),
            csv(&offs),
            sets_field(&c.sets),
            match (c.interrupt, shrinks_to(&c)) {
                // md ends a shrink with the members past the new count as
                // spares: that many fewer active.
                (Some(_), Some(to)) => {
                    format!("reshaping,leaves{}{with_backup}", members.len() - to)
                }
                (Some(_), None) => format!("reshaping{with_backup}"),
                _ => "-".to_string(),
            }
        ));
        reads.push((c.name.to_string(), size, out, c.sets.len(), want, exact));
    }
    let mut md_slots: Vec<(&str, Vec<u64>)> = Vec::new();
    for &(name, level, n, op) in MD_GROWS.iter().filter(|g| chosen(g.0)) {
        let offs: Vec<u64> = (0..n as u64).map(|i| next + i * BIG).collect();
        next += n as u64 * BIG;
        manifest.push_str(&format!(
            "M {name} {level} {n} {BIG} {} {MD_KIB} {op}\n",
            csv(&offs)
        ));
        md_slots.push((name, offs));
    }
    data.set_len(next).unwrap();
    data.sync_all().unwrap();
    let res = match boot(&guest_dir, &work, "grow", &manifest, &data_path) {
        Ok(r) => r,
        Err(why) => return skip(&why),
    };
    for (name, size, out, sets, want, exact) in &reads {
        match res.get(&(name.clone(), "B".to_string())) {
            Some((s, d)) if s == "PASS" => loud(&format!("md_compat: grow: {name}: md PASS {d}")),
            other => failures.push(format!("{name}: md: {other:?}")),
        }
        let stride = size.div_ceil(MIB) * MIB;
        let mut got = vec![0u8; *size as usize];
        for k in 0..=*sets {
            data.read_exact_at(&mut got, out + k as u64 * stride)
                .unwrap();
            let n = *exact as usize;
            if got[..n] != want[..n] {
                failures.push(format!(
                    "{name}: md's read {k} (0: complete, then without the sets) differs from raidlab's: {}",
                    first_diff(&got[..n], &want[..n])
                ));
            }
        }
    }
    for (name, offs) in &md_slots {
        failures.extend(raidlab_reads_md_grown(&data, &work, name, offs, &res, &pat));
    }
    if failures.is_empty() {
        if std::env::var_os("RAIDLAB_MDVM_KEEP").is_none() {
            fs::remove_dir_all(&work).ok();
        }
        return;
    }
    panic!(
        "md assembling what raidlab grew: {} failure(s) (work dir kept: {}):\n{}",
        failures.len(),
        work.display(),
        failures.join("\n")
    );
}
