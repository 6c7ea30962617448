//! Linux md compatibility, both directions, against the real md driver.
//!
//! One qemu boot of a stock Debian bookworm kernel (built and run by
//! `tests/mdvm/build.sh` and `tests/mdvm/run.sh`) serves the rows of
//! `tests/mdvm/matrix.txt` that `tests/mdvm/default.txt` lists (every level,
//! layout, flag, chunk, member count and metadata version once; about 9 s of
//! TCG guest time a row), or the whole matrix with `RAIDLAB_MDVM_FULL=1`:
//!
//! * direction A: md (`mdadm --create`) makes every array, writes the pattern
//!   over all of it and stops it; raidlab then exports the members md wrote,
//!   complete and with every survivable set of members missing, and must
//!   produce the pattern; `raidlab examine` must agree with `mdadm --examine`.
//! * direction B: raidlab creates every array and imports the pattern; md
//!   must assemble it clean (no resync, not degraded), read back the pattern,
//!   find no parity/mirror mismatch on a `check`, and read it back degraded.
//!
//! Members live in slots of one sparse "data disk" image that the guest sees
//! as /dev/vdc and maps with loop devices, so what md writes is what raidlab
//! reads and vice versa.  The guest side is `tests/mdvm/guest-matrix.sh`.
//!
//! If the machine cannot run the guest at all (no qemu and no way to install
//! it, or the kernel boots neither under KVM nor TCG) the test prints
//! `SKIPPED: Linux md compatibility: <why>` to stderr and returns; under CI
//! (`CI=true`) or with `RAIDLAB_MDVM_REQUIRED=1` that is a failure.  Set
//! `RAIDLAB_SKIP_MDVM=1` to skip on purpose (also printed loudly).
//! `RAIDLAB_MDVM_KEEP=1` keeps the work directory even when everything passes.
//!
//! `removed` (tests/md_compat/removed.rs) boots the guest twice
//! more: md fails and removes a member and writes, raidlab's verbs must leave
//! that member untouched, and md must still kick it; and md must agree with a
//! removal raidlab made.
//!
//! `re_add` (tests/md_compat/re_add.rs) boots it twice more: a member that
//! left is re-added with only the bitmap's dirty chunks resynced, by raidlab
//! after md wrote around it and by md after raidlab did, and md judges both.
//!
//! `grow` (tests/md_compat/grow.rs) boots it once more: md assembles arrays
//! `raidlab grow` changed (--size max, a bitmap added and removed, RAID 1
//! from 2 to 3 mirrors, PPL switched off and on) and judges them.
//!
//! `md_crash` (tests/md_compat/md_crash.rs) boots it once more: md crashes
//! with write-back stripes in its journal alone, and raidlab must replay them.
//!
//! `torture` (tests/md_compat/torture.rs) boots it once more: md assembles
//! the final member images of a sample of the torture harness's runs, one
//! per class, and must read the run's reference data.
//!
//! `stream` (tests/md_compat/stream.rs): md and raidlab on one sequential
//! stream of whole-stripe writes, counting the members' reads.
//! `stopped_mid_grow` (tests/md_compat/stopped_mid_grow.rs): arrays md
//! stopped in the middle of its own reshape, read and finished by raidlab.

mod common;
#[path = "md_compat/grow.rs"]
mod grow;
#[path = "md_compat/matrix.rs"]
mod matrix;
#[path = "md_compat/md_crash.rs"]
mod md_crash;
#[path = "md_compat/re_add.rs"]
mod re_add;
#[path = "md_compat/removed.rs"]
mod removed;
#[path = "md_compat/stopped_mid_grow.rs"]
mod stopped_mid_grow;
#[path = "md_compat/stream.rs"]
mod stream;
#[path = "md_compat/torture.rs"]
mod torture;

use common::{journal_crash, journal_crash_write_back, ppl_crash};
use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

/// The guest's data disk at `path`, new, holding `pattern` from its start.
fn data_disk(path: &Path, pattern: &[u8]) -> fs::File {
    let data = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .unwrap();
    data.write_all_at(pattern, 0).unwrap();
    data
}

const MIB: u64 = 1 << 20;
const RAIDLAB: &str = env!("CARGO_BIN_EXE_raidlab");
const MATRIX: &str = include_str!("../../../tests/mdvm/matrix.txt");
const DEFAULT_ROWS: &str = include_str!("../../../tests/mdvm/default.txt");
/// Wall-clock limit handed to run.sh for one boot: only against a guest that
/// stops making progress altogether. A line that hangs is caught sooner by the
/// guest's own watchdog (`guest-matrix.sh`, 300 s a line); the whole matrix
/// takes ~400 s under TCG here, but 1,265 s was seen with two builds beside
/// it, close to the 1,500 s this used to be.
const BOOT_TIMEOUT_S: u32 = 2400;

#[derive(Debug, Clone)]
struct Cfg {
    name: String,
    /// md's level number (-1 for linear, written `linear` in the matrix).
    level: i32,
    /// mdadm/raidlab layout word, `None` for the default / no layout.
    layout: Option<String>,
    chunk_kib: Option<u64>,
    devices: usize,
    member_bytes: u64,
    /// Optional seventh column: `bitmap` (both sides create an internal
    /// write-intent bitmap, 1 MiB chunks), `rebuilt` (raidlab fails member 1 and
    /// rebuilds a new member into its slot before md assembles the array),
    /// `journal` (one more device, last, is md's write journal), ...
    flags: Vec<String>,
}

impl Cfg {
    fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    /// Bytes of member (device image) `i`: MEMBER_MIB for all, or with
    /// `zones` (linear and multi-zone RAID 0) 2 MiB more for each later member.
    fn member_size(&self, i: usize) -> u64 {
        if self.has("zones") {
            self.member_bytes + 2 * MIB * i as u64
        } else {
            self.member_bytes
        }
    }

    /// The sizes field of a manifest line: one size, or each member's.
    fn sizes_field(&self) -> String {
        if self.has("zones") {
            csv(&(0..self.all_devices())
                .map(|i| self.member_size(i))
                .collect::<Vec<_>>())
        } else {
            self.member_bytes.to_string()
        }
    }

    /// The level as mdadm's --level takes it.
    fn level_word(&self) -> String {
        if self.level == -1 {
            "linear".into()
        } else {
            self.level.to_string()
        }
    }

    /// `v1.0` / `v1.1` / `v0.90`: md metadata other than the default 1.2.
    fn metadata(&self) -> Option<&'static str> {
        if self.has("v1.0") {
            Some("1.0")
        } else if self.has("v1.1") {
            Some("1.1")
        } else if self.has("v0.90") {
            Some("0.90")
        } else {
            None
        }
    }

    /// `mbr6` / `gpt2`: each member is that partition of a whole-disk image of
    /// `member_bytes` whose table sfdisk wrote (the guest finds it with the
    /// kernel's own partition scan, raidlab names it `IMAGE@N`).
    fn partition(&self) -> Option<(&'static str, u32)> {
        if self.has("mbr6") {
            Some(("mbr", 6))
        } else if self.has("gpt2") {
            Some(("gpt", 2))
        } else {
            None
        }
    }

    /// The raidlab member name of the device image `img`.
    fn member_name(&self, img: &Path) -> String {
        let p = img.to_str().unwrap().to_string();
        match self.partition() {
            Some((_, n)) => format!("{p}@{n}"),
            None => p,
        }
    }

    /// Device images: the members, plus the journal device (last) with `journal`.
    fn all_devices(&self) -> usize {
        self.devices + usize::from(self.has("journal"))
    }

    fn redundant(&self) -> bool {
        self.level > 0
    }

    /// RAID 10 (near, far, offset) copy counts.
    fn raid10_geometry(&self) -> (usize, usize, bool) {
        let l = self.layout.as_deref().unwrap_or("n2");
        let (kind, count) = l.split_at(1);
        let c: usize = count.parse().expect("raid10 layout like n2/f2/o2");
        match kind {
            "n" => (c, 1, false),
            "f" => (1, c, false),
            "o" => (1, c, true),
            _ => panic!("unknown raid10 layout {l}"),
        }
    }

    /// Can the array still be read with the members in `missing` absent?
    fn survives(&self, missing: &[usize]) -> bool {
        let n = self.devices;
        match self.level {
            -1 | 0 => missing.is_empty(),
            1 => missing.len() < n,
            4 | 5 => missing.len() <= 1,
            6 => missing.len() <= 2,
            10 => {
                // Every block lives on `copies` cyclically consecutive members.
                // near: the groups start at multiples of gcd(copies, n) (aligned
                // sets when copies divides n); far/offset (no far sets): a group
                // starts at every member.  A block is lost iff its whole group is
                // missing.
                let (near, far, _) = self.raid10_geometry();
                let copies = near * far;
                let step = if near > 1 { gcd(near, n) } else { 1 };
                (0..n)
                    .step_by(step)
                    .all(|s| !(0..copies).all(|j| missing.contains(&((s + j) % n))))
            }
            _ => false,
        }
    }

    /// Every member set the host leaves out when reading md's arrays: each
    /// single member, and every survivable pair (RAID 6: all pairs; RAID 10:
    /// one member from each of two copy sets; RAID 1: all but one member).
    fn host_degraded_sets(&self) -> Vec<Vec<usize>> {
        let n = self.devices;
        let mut sets = Vec::new();
        if !self.redundant() {
            return sets;
        }
        for i in 0..n {
            sets.push(vec![i]);
        }
        for i in 0..n {
            for j in i + 1..n {
                if self.survives(&[i, j]) {
                    sets.push(vec![i, j]);
                }
            }
        }
        if self.level == 1 {
            // also: only the last member left, only the first member left
            for keep in [n - 1, 0] {
                let s: Vec<usize> = (0..n).filter(|&i| i != keep).collect();
                if s.len() > 2 {
                    sets.push(s);
                }
            }
        }
        sets
    }

    /// The (fewer) sets md reads degraded in the guest, to bound the boot:
    /// one single member, plus the first and last survivable multi-member set.
    fn guest_degraded_sets(&self) -> Vec<Vec<usize>> {
        let all = self.host_degraded_sets();
        let mut out: Vec<Vec<usize>> = Vec::new();
        if all.is_empty() {
            return out;
        }
        out.push(vec![1.min(self.devices - 1)]);
        let multi: Vec<&Vec<usize>> = all.iter().filter(|s| s.len() > 1).collect();
        if let Some(f) = multi.first() {
            out.push((*f).clone());
        }
        if let Some(l) = multi.last() {
            if !out.contains(l) {
                out.push((*l).clone());
            }
        }
        out
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Every configuration of `tests/mdvm/matrix.txt`, in its order.
fn whole_matrix() -> Vec<Cfg> {
    MATRIX
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert!(f.len() == 6 || f.len() == 7, "bad matrix line: {l}");
            let opt = |s: &str| (s != "-").then(|| s.to_string());
            Cfg {
                name: f[0].to_string(),
                level: if f[1] == "linear" {
                    -1
                } else {
                    f[1].parse().expect("level")
                },
                layout: opt(f[2]),
                chunk_kib: opt(f[3]).map(|c| c.parse().expect("chunk")),
                devices: f[4].parse().expect("devices"),
                member_bytes: f[5].parse::<u64>().expect("member MiB") * MIB,
                flags: f
                    .get(6)
                    .map(|x| x.split(',').map(str::to_string).collect())
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// The names `tests/mdvm/default.txt` lists: the rows the default suite runs.
fn default_names() -> Vec<String> {
    DEFAULT_ROWS
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect()
}

/// The configurations this run boots: `RAIDLAB_MDVM_ONLY=a,b` keeps only
/// those names (for working on a few), else `RAIDLAB_MDVM_FULL=1` the whole
/// matrix, else the default rows (`tests/mdvm/default.txt`), which keep every
/// level, layout, flag, chunk, member count and metadata version once so the
/// default suite stays within its time.
fn parse_matrix() -> Vec<Cfg> {
    let only: Option<Vec<String>> = std::env::var("RAIDLAB_MDVM_ONLY")
        .ok()
        .map(|v| v.split(',').map(str::to_string).collect());
    let full = std::env::var_os("RAIDLAB_MDVM_FULL").is_some_and(|v| v != "0");
    let keep = only.unwrap_or_else(|| {
        if full {
            whole_matrix().into_iter().map(|c| c.name).collect()
        } else {
            default_names()
        }
    });
    whole_matrix()
        .into_iter()
        .filter(|c| keep.contains(&c.name))
        .collect()
}

/// What a row of the matrix proves on its own: its level, its layout at that
/// level, each flag, its chunk size, its member count and its metadata.
fn coverage(c: &Cfg) -> Vec<String> {
    let mut v = vec![
        format!("level {}", c.level_word()),
        format!(
            "level {} layout {}",
            c.level_word(),
            c.layout.as_deref().unwrap_or("-")
        ),
        format!("chunk {:?}", c.chunk_kib),
        format!("{} members", c.devices),
        format!("metadata {:?}", c.metadata()),
    ];
    v.extend(c.flags.iter().map(|f| format!("flag {f}")));
    v
}

/// The default rows must name rows of the matrix, and together cover what
/// every row of the matrix covers; an edit of either file that loses a level,
/// layout, flag, chunk, member count or metadata version fails here (without
/// booting anything).
#[test]
fn the_default_md_rows_cover_the_whole_matrix() {
    let all = whole_matrix();
    let names = default_names();
    let unknown: Vec<&String> = names
        .iter()
        .filter(|n| !all.iter().any(|c| &&c.name == n))
        .collect();
    assert!(
        unknown.is_empty(),
        "tests/mdvm/default.txt names rows matrix.txt does not have: {unknown:?}"
    );
    let covered: std::collections::BTreeSet<String> = all
        .iter()
        .filter(|c| names.contains(&c.name))
        .flat_map(coverage)
        .collect();
    let lost: std::collections::BTreeSet<String> = all
        .iter()
        .flat_map(coverage)
        .filter(|k| !covered.contains(k))
        .collect();
    assert!(
        lost.is_empty(),
        "tests/mdvm/default.txt's rows lose what matrix.txt covers: {lost:?}; add a row that has each"
    );
    assert!(
        names.len() * 2 < all.len(),
        "the default md rows ({}) are no longer a small part of the matrix ({}): the default suite's time grows with them",
        names.len(),
        all.len()
    );
}

/// md's partial parity logs, as md left them on members it wrote: raidlab must
/// report the policy, accept every member's log (header checksum and the
/// array's signature), and, with the array marked as stopped uncleanly,
/// replay them (`raidlab resync`) without making parity wrong (`raidlab check`).
fn md_ppl_accepted(members: &[String]) -> Vec<String> {
    use raidlab_devices::{FileVolume, OpenMode};
    let mut bad = Vec::new();
    let mut dargs = vec!["detail", "--json"];
    dargs.extend(members.iter().map(String::as_str));
    let o = raidlab(&dargs);
    let policy = serde_json::from_slice::<serde_json::Value>(&o.stdout)
        .ok()
        .and_then(|v| {
            v.get("consistency_policy")
                .and_then(|p| p.as_str().map(str::to_string))
        });
    if policy.as_deref() != Some("ppl") {
        bad.push(format!(
            "md made a PPL array but raidlab reports policy {policy:?}"
        ));
    }
    let mut entries = 0;
    for (i, m) in members.iter().enumerate() {
        let vol = match FileVolume::open(Path::new(m), OpenMode::ReadOnly) {
            Ok(v) => v,
            Err(e) => {
                bad.push(format!("member {i}: {e}"));
                continue;
            }
        };
        let sb = match raidlab_md::Superblock::read_from(&vol) {
            Ok(Some(sb)) => sb,
            other => {
                bad.push(format!("member {i}: no superblock: {other:?}"));
                continue;
            }
        };
        match raidlab_md::ppl::read_area(&vol, &sb) {
            Ok(Some(area)) => {
                match raidlab_md::ppl::scan(&area, raidlab_md::ppl::signature(&sb.set_uuid)) {
                    Some(scan) => entries += scan.entries.len(),
                    None => bad.push(format!(
                        "member {i}: raidlab finds no valid PPL header with the array's signature in md's log"
                    )),
                }
            }
            other => bad.push(format!("member {i}: cannot read md's PPL area: {other:?}")),
        }
    }
    // Mark the array as stopped uncleanly, as a crash would leave it.
    {
        use raidlab_raid::assemble::{Assembly, Device};
        use std::sync::Arc;
        let devices: Result<Vec<Device>, String> = members
            .iter()
            .map(|m| {
                FileVolume::open(Path::new(m), OpenMode::ReadWrite)
                    .map(|v| Device {
                        path: m.clone(),
                        volume: Arc::new(v),
                    })
                    .map_err(|e| e.to_string())
            })
            .collect();
        match devices.and_then(|d| Assembly::assemble(d).map_err(|e| e.to_string())) {
            Ok(mut asm) => {
                if let Err(e) = asm.commit(|sb| sb.resync_offset = 0) {
                    bad.push(format!("cannot mark the array dirty: {e}"));
                }
            }
            Err(e) => bad.push(format!("cannot assemble md's PPL array: {e}")),
        }
    }
    let mut rargs = vec!["resync"];
    rargs.extend(members.iter().map(String::as_str));
    let o = raidlab(&rargs);
    if !o.status.success()
        || !String::from_utf8_lossy(&o.stdout).contains("partial parity log was replayed")
    {
        bad.push(format!("replaying md's logs: {}", describe(&rargs, &o)));
    }
    let mut cargs = vec!["check"];
    cargs.extend(members.iter().map(String::as_str));
    let o = raidlab(&cargs);
    if !o.status.success() {
        bad.push(format!(
            "after replaying md's {entries} log entries: {}",
            describe(&cargs, &o)
        ));
    }
    loud(&format!(
        "md_compat: md left {entries} PPL entries on {} members; raidlab accepted and replayed them",
        members.len()
    ));
    bad
}

/// md's write journal, as md left it: raidlab opens the array for writing,
/// which reads md's journal from its tail and writes back every stripe in it
/// (md's own recovery), then `check` must find parity consistent and the
/// contents must still be what md was given.
fn md_journal_accepted(devices: &[String], want: &[u8]) -> Vec<String> {
    let mut bad = Vec::new();
    let mut args = vec!["resync"];
    args.extend(devices.iter().map(String::as_str));
    let o = raidlab(&args);
    if !o.status.success() {
        bad.push(format!(
            "raidlab could not start md's journal: {}",
            describe(&args, &o)
        ));
        return bad;
    }
    loud(&format!(
        "md_compat: raidlab started md's journal: {}",
        String::from_utf8_lossy(&o.stderr).trim()
    ));
    let mut cargs = vec!["check"];
    cargs.extend(devices.iter().map(String::as_str));
    let o = raidlab(&cargs);
    if !o.status.success() {
        bad.push(format!(
            "check after raidlab replayed md's journal: {}",
            describe(&cargs, &o)
        ));
    }
    let out = std::env::temp_dir().join(format!("md_compat-journal-{}.bin", std::process::id()));
    match export(devices, &out) {
        Ok(got) if got == want => {}
        Ok(got) => bad.push(format!(
            "after raidlab replayed md's journal the array reads differently: {}",
            first_diff(&got, want)
        )),
        Err(e) => bad.push(format!("export after replaying md's journal: {e}")),
    }
    fs::remove_file(&out).ok();
    bad
}

/// `pplcrash`: where the torn write goes (array offset, 8 KiB of data chunk 0
/// of stripe 1) and which member md is later given without (the one holding
/// data chunk 1 of that stripe: data the write did not touch).
fn ppl_crash_spot(c: &Cfg) -> (u64, usize) {
    use raidlab_layout::{Geometry, Layout, Level};
    let level = Level::Raid5;
    let layout = Layout::parse(level, c.layout.as_deref()).expect("raid5 layout");
    let chunk = c.chunk_kib.expect("chunk") * 1024;
    let g = Geometry::new(level, layout, chunk, c.devices, c.member_bytes).expect("geometry");
    let stripe_bytes = chunk * (c.devices as u64 - 1);
    (stripe_bytes, g.stripe(1).data[1])
}

/// `journalcrash`: the same spot for a journaled RAID 4/5/6: 8 KiB of data
/// chunk 0 of stripe 1, and the member holding data chunk 1 of that stripe.
fn journal_crash_spot(c: &Cfg) -> (u64, usize) {
    use raidlab_layout::{Geometry, Layout, Level};
    let level = Level::from_md(c.level).expect("level");
    let layout = Layout::parse(level, c.layout.as_deref()).expect("layout");
    let chunk = c.chunk_kib.expect("chunk") * 1024;
    let g = Geometry::new(level, layout, chunk, c.devices, c.member_bytes).expect("geometry");
    (chunk * g.data_disks() as u64, g.stripe(1).data[1])
}

/// `badblocks`: mdadm's `--examine-badblocks` of member 1 (saved by the
/// guest) against raidlab's `examine --json` `bad_blocks`; then the listed
/// sectors of member 1 are overwritten with garbage. Returns what is wrong.
fn md_bad_blocks_honoured(adir: &Path, members: &[String]) -> Vec<String> {
    let md = fs::read_to_string(adir.join("badblocks.1")).unwrap_or_default();
    // "            2112 for 8 sectors"
    let listed: Vec<(u64, u64)> = md
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f.as_slice() {
                [s, "for", n, "sectors"] => Some((s.parse().ok()?, n.parse().ok()?)),
                _ => None,
            }
        })
        .collect();
    if listed.is_empty() {
        return vec![format!("mdadm --examine-badblocks lists nothing: {md:?}")];
    }
    let mut bad = Vec::new();
    match raidlab_examine(members) {
        Err(e) => bad.push(e),
        Ok((js, _)) => {
            let ours: Vec<(u64, u64)> = js
                .get(1)
                .and_then(|j| j["bad_blocks"].as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|r| Some((r["sector"].as_u64()?, r["count"].as_u64()?)))
                .collect();
            if ours != listed {
                bad.push(format!(
                    "raidlab examine lists bad blocks {ours:?}, mdadm --examine-badblocks {listed:?}"
                ));
            }
        }
    }
    let f = OpenOptions::new().write(true).open(&members[1]).unwrap();
    for (sector, count) in &listed {
        f.write_all_at(&vec![0xa5; *count as usize * 512], sector * 512)
            .unwrap();
    }
    bad
}

/// Deterministic, position-unique pattern (xorshift64*), no dependencies.
fn pattern(len: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(len as usize);
    let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
    while (v.len() as u64) < len {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        v.extend_from_slice(&s.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    v.truncate(len as usize);
    v
}

/// The members at `offs` of the data disk, `member` bytes each, copied out
/// into `dir` as `m0.img`, `m1.img`, ...: their paths.
fn from_slots(data: &fs::File, dir: &Path, offs: &[u64], member: u64) -> Vec<String> {
    fs::create_dir_all(dir).unwrap();
    offs.iter()
        .enumerate()
        .map(|(i, off)| {
            let mut buf = vec![0u8; member as usize];
            data.read_exact_at(&mut buf, *off).unwrap();
            let p = dir.join(format!("m{i}.img"));
            fs::write(&p, &buf).unwrap();
            p.to_str().unwrap().to_string()
        })
        .collect()
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether the VM tests are switched off on purpose (`RAIDLAB_SKIP_MDVM`
/// set and not 0); said loudly when they are, and a failure on CI.
fn vm_tests_off() -> bool {
    let off = std::env::var_os("RAIDLAB_SKIP_MDVM").is_some_and(|v| v != "0");
    if off {
        skip("RAIDLAB_SKIP_MDVM is set");
    }
    off
}

/// The guest (kernel and initramfs directory), built or found by
/// tests/mdvm/build.sh, or why it could not be.
fn guest() -> Result<String, String> {
    match Command::new(repo_root().join("tests/mdvm/build.sh")).output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout)
            .lines()
            .last()
            .unwrap_or("")
            .trim()
            .to_string()),
        Ok(o) => Err(format!(
            "tests/mdvm/build.sh failed ({}): {}",
            o.status,
            tail(&o.stderr, 15)
        )),
        Err(e) => Err(format!("cannot run tests/mdvm/build.sh: {e}")),
    }
}

/// A fresh work directory for one VM test's run, `tests/mdvm/work/NAME-PID`
/// (emptied if a run of the same process id left one).
fn work_dir(name: &str) -> PathBuf {
    let work = repo_root()
        .join("tests/mdvm/work")
        .join(format!("{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).unwrap();
    work
}

/// Straight to the process's stderr: libtest captures `eprintln!` of passing
/// tests, and a skip or the timings must be seen without `--nocapture`.
fn loud(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{msg}");
}

fn skip(why: &str) {
    let msg = format!("SKIPPED: Linux md compatibility: {why}");
    loud(&format!(
        "\n{}\n{msg}\n{}\n",
        "!".repeat(72),
        "!".repeat(72)
    ));
    if std::env::var_os("RAIDLAB_MDVM_REQUIRED").is_some_and(|v| v != "0") {
        panic!("{msg} (RAIDLAB_MDVM_REQUIRED is set)");
    }
    // On CI (CI=true) a skip of the real-md test is a failure.
    raidlab_core::skip::skip_or_fail(&msg);
}

fn tail(s: &[u8], lines: usize) -> String {
    let s = String::from_utf8_lossy(s);
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// Where a guest that never finished got to: its last `RESULT` line on the
/// console, put first in a failure so a cut-off log still says it.
fn last_result(console: &Path) -> String {
    let text = fs::read_to_string(console).unwrap_or_default();
    match text.lines().rev().find(|l| l.starts_with("RESULT ")) {
        Some(l) => format!("the last line the guest finished: {l}"),
        None => "the guest finished no line".to_string(),
    }
}

/// Copy every file under `from` into `to` (same relative paths), replacing
/// what is there: a later boot's results over an earlier one's.
fn merge_dir(from: &Path, to: &Path) {
    let Ok(entries) = fs::read_dir(from) else {
        return;
    };
    fs::create_dir_all(to).unwrap();
    for e in entries.flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            merge_dir(&src, &dst);
        } else if e.file_name() != "results.txt" {
            fs::copy(&src, &dst).unwrap();
        }
    }
}

fn raidlab(args: &[&str]) -> Output {
    Command::new(RAIDLAB)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {RAIDLAB}: {e}"))
}

fn describe(cmd: &[&str], o: &Output) -> String {
    format!(
        "`raidlab {}` exited {}: {}",
        cmd.join(" "),
        o.status,
        tail(&o.stderr, 6).replace('\n', " | ")
    )
}

fn first_diff(a: &[u8], b: &[u8]) -> String {
    if a.len() != b.len() {
        let n = a.len().min(b.len());
        if let Some(i) = (0..n).find(|&i| a[i] != b[i]) {
            return format!(
                "length {} vs {}; first difference at byte {i}",
                a.len(),
                b.len()
            );
        }
        return format!(
            "length {} vs {} (common prefix identical)",
            a.len(),
            b.len()
        );
    }
    match (0..a.len()).find(|&i| a[i] != b[i]) {
        Some(i) => {
            let diff = (0..a.len()).filter(|&j| a[j] != b[j]).count();
            format!(
                "first difference at byte {i} (chunk-aligned 4K block {}), {diff} bytes differ",
                i / 4096
            )
        }
        None => "identical".into(),
    }
}

/// `Label : value` pairs of one `mdadm --examine` report.
fn parse_examine(text: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(" : ") {
            m.insert(k.trim().to_string(), v.trim().to_string());
        }
    }
    m
}

fn json_str(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "<none>".into(),
        other => other.to_string(),
    }
}

/// Compare raidlab's examine (JSON and text) of one member with mdadm's.
fn compare_examine(
    md_text: &str,
    rl_json: &serde_json::Value,
    rl_text_lines: &[String],
) -> Vec<String> {
    let md = parse_examine(md_text);
    let mut bad = Vec::new();
    let first = |label: &str| {
        md.get(label)
            .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
    };
    let whole = |label: &str| md.get(label).cloned();
    let name = md.get("Name").map(|n| {
        n.split("  (local to host")
            .next()
            .unwrap()
            .trim()
            .to_string()
    });
    let chunk = md
        .get("Chunk Size")
        .map(|c| c.trim_end_matches('K').to_string());
    let fields: Vec<(&str, &str, Option<String>)> = vec![
        ("array_uuid", "Array UUID", whole("Array UUID")),
        ("name", "Name", name),
        ("level", "Raid Level", whole("Raid Level")),
        ("raid_devices", "Raid Devices", whole("Raid Devices")),
        ("layout", "Layout", whole("Layout")),
        ("chunk_size_kib", "Chunk Size", chunk),
        ("data_offset", "Data Offset", first("Data Offset")),
        ("super_offset", "Super Offset", first("Super Offset")),
        ("avail_dev_size", "Avail Dev Size", first("Avail Dev Size")),
        ("events", "Events", whole("Events")),
        ("device_role", "Device Role", whole("Device Role")),
        ("device_uuid", "Device UUID", whole("Device UUID")),
        ("feature_map", "Feature Map", whole("Feature Map")),
        ("state", "State", whole("State")),
        ("checksum", "Checksum", first("Checksum")),
        ("array_state", "Array State", first("Array State")),
    ];
    for (key, label, want) in fields {
        let got = rl_json
            .get(key)
            .map(json_str)
            .unwrap_or_else(|| "<no key>".into());
        let got = if key == "feature_map" {
            got.parse::<u64>().map(|v| format!("{v:#x}")).unwrap_or(got)
        } else {
            got
        };
        match want {
            Some(w) if w == got => {}
            // mdadm prints no Layout line for raid1/raid4; raidlab gives null
            None if got == "<none>" => {}
            None if key == "chunk_size_kib" && got == "0" => {}
            // mdadm prints no Data Offset line when it is 0 (metadata 1.0)
            None if key == "data_offset" && got == "0" => {}
            w => bad.push(format!(
                "examine {key}: raidlab {got:?}, mdadm {label:?} {:?}",
                w.unwrap_or_else(|| "<no line>".into())
            )),
        }
    }
    // The text form claims mdadm's labels and formatting: every line raidlab
    // prints must be a line mdadm printed (whitespace-normalised; the Name
    // line without mdadm's "(local to host ...)" note).
    for l in rl_text_lines {
        let Some((k, v)) = l.split_once(" : ") else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        let mut mv = md.get(k).cloned();
        if k == "Name" {
            mv = mv.map(|n| {
                n.split("  (local to host")
                    .next()
                    .unwrap()
                    .trim()
                    .to_string()
            });
        }
        if mv.as_deref() != Some(v) {
            bad.push(format!(
                "examine text {k:?}: raidlab {v:?}, mdadm {:?}",
                mv.unwrap_or_else(|| "<no line>".into())
            ));
        }
    }
    bad
}

/// Compare raidlab's examine of a metadata 0.90 member with mdadm's: every
/// "label : value" line raidlab prints must be mdadm's, and the JSON keys that
/// carry the same facts must agree.
fn compare_examine_090(
    md_text: &str,
    rl_json: &serde_json::Value,
    rl_text_lines: &[String],
) -> Vec<String> {
    let md = parse_examine(md_text);
    let mut bad = Vec::new();
    for (key, label) in [
        ("array_uuid", "UUID"),
        ("level", "Raid Level"),
        ("raid_devices", "Raid Devices"),
        ("total_devices", "Total Devices"),
        ("events", "Events"),
        ("state", "State"),
        ("version", "Version"),
    ] {
        let got = rl_json
            .get(key)
            .map(json_str)
            .unwrap_or_else(|| "<no key>".into());
        let want = md
            .get(label)
            .map(|v| v.split(" (local").next().unwrap_or("").trim().to_string());
        if want.as_deref() != Some(got.as_str()) {
            bad.push(format!(
                "examine {key}: raidlab {got:?}, mdadm {label:?} {want:?}"
            ));
        }
    }
    let mut lines = 0;
    for l in rl_text_lines {
        let Some((k, v)) = l.split_once(" : ") else {
            continue;
        };
        lines += 1;
        let (k, v) = (k.trim(), v.trim());
        let mv = md
            .get(k)
            .map(|m| m.split(" (local").next().unwrap_or("").trim().to_string());
        if mv.as_deref() != Some(v) {
            bad.push(format!(
                "examine text {k:?}: raidlab {v:?}, mdadm {:?}",
                mv.unwrap_or_else(|| "<no line>".into())
            ));
        }
    }
    // raidlab must print every labelled line mdadm printed.
    if lines != md.len() {
        bad.push(format!(
            "examine text: raidlab printed {lines} labelled lines, mdadm {}",
            md.len()
        ));
    }
    bad
}

/// raidlab examine of `members`: (JSON objects, text lines per member).
fn raidlab_examine(
    members: &[String],
) -> Result<(Vec<serde_json::Value>, Vec<Vec<String>>), String> {
    let mut args = vec!["examine", "--json"];
    args.extend(members.iter().map(String::as_str));
    let o = raidlab(&args);
    if !o.status.success() {
        return Err(describe(&args, &o));
    }
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .map_err(|e| format!("raidlab examine --json: bad JSON: {e}"))?;
    let arr = match v {
        serde_json::Value::Array(a) => a,
        other => vec![other],
    };
    let mut texts = Vec::new();
    for m in members {
        let o = raidlab(&["examine", m]);
        if !o.status.success() {
            return Err(describe(&["examine", m], &o));
        }
        texts.push(
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_string)
                .collect(),
        );
    }
    Ok((arr, texts))
}

fn export(members: &[String], out: &Path) -> Result<Vec<u8>, String> {
    let mut args: Vec<&str> = vec!["export"];
    args.extend(members.iter().map(String::as_str));
    let out_s = out.to_str().unwrap();
    args.extend(["--output", out_s]);
    let o = raidlab(&args);
    if !o.status.success() {
        return Err(describe(&args, &o));
    }
    fs::read(out).map_err(|e| format!("reading {out_s}: {e}"))
}

/// A whole-disk image of `bytes` at `path` with the table of `scheme`, written
/// by sfdisk (util-linux), not by raidlab: MBR with a small primary 1, an
/// extended 2 holding a small logical 5 and the member as logical 6; GPT with
/// a small partition 1 and the member as partition 2 (type Linux RAID).
fn partitioned_image(path: &Path, bytes: u64, scheme: &str) -> Result<(), String> {
    let f = fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    f.set_len(bytes).unwrap();
    drop(f);
    let script = match scheme {
        "mbr" => "label: dos\n,1M,83\n,,5\n,1M,83\n,,fd\n",
        _ => "label: gpt\n,1M\n,,A19D880F-05FC-4D3B-A006-743F0F84911E\n",
    };
    let mut child = Command::new("sfdisk")
        .args(["--no-reread", "--no-tell-kernel", "-q"])
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run sfdisk (package fdisk): {e}"))?;
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    if !o.status.success() {
        return Err(format!(
            "sfdisk on {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(())
}

/// The image file of a member name (`m0.img@6` -> `m0.img`).
fn image_of(member: &str) -> &str {
    match member.rsplit_once('@') {
        Some((img, n)) if n.chars().all(|c| c.is_ascii_digit()) => img,
        _ => member,
    }
}

/// Direction B: (array bytes, offset of md's first read, stride, degraded sets).
type BReads = (u64, u64, u64, Vec<Vec<usize>>);

struct Slots {
    next: u64,
}

impl Slots {
    fn take(&mut self, c: &Cfg) -> Vec<u64> {
        (0..c.all_devices())
            .map(|i| {
                let o = self.next;
                self.next += c.member_size(i).div_ceil(MIB) * MIB;
                o
            })
            .collect()
    }
}

fn csv<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

fn sets_field(sets: &[Vec<usize>]) -> String {
    if sets.is_empty() {
        "-".into()
    } else {
        sets.iter().map(|s| csv(s)).collect::<Vec<_>>().join(";")
    }
}

/// The guest's verdicts: (array name, kind) -> (PASS|FAIL, detail).
type GuestResults = BTreeMap<(String, String), (String, String)>;

/// One boot at a time: two TCG guests on this machine's two cores would each
/// take twice as long.
static ONE_BOOT: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Boot the guest once over `ctl` (guest.sh + manifest) and `data`; the
/// guest's `RESULT` lines by (name, kind), or why it could not run.
fn boot(
    guest_dir: &str,
    work: &Path,
    tag: &str,
    manifest: &str,
    data: &Path,
) -> Result<GuestResults, String> {
    let ctl = work.join(format!("ctl-{tag}"));
    fs::create_dir_all(&ctl).unwrap();
    fs::write(ctl.join("manifest"), manifest).unwrap();
    fs::copy(
        repo_root().join("tests/mdvm/guest-matrix.sh"),
        ctl.join("guest.sh"),
    )
    .unwrap();
    let out_dir = work.join(format!("vm-{tag}"));
    let t = Instant::now();
    let run = Command::new(repo_root().join("tests/mdvm/run.sh"))
        .arg(&ctl)
        .arg(data)
        .arg(BOOT_TIMEOUT_S.to_string())
        .env("MDVM_GUEST", guest_dir)
        .env("MDVM_OUT", &out_dir)
        .output()
        .expect("run tests/mdvm/run.sh");
    loud(&format!(
        "md_compat: boot {tag} took {:.1?} (exit {})",
        t.elapsed(),
        run.status
    ));
    if run.status.code() == Some(90) {
        return Err(format!(
            "the Debian kernel never came up in qemu:\n{}",
            tail(&run.stderr, 30)
        ));
    }
    assert!(
        matches!(run.status.code(), Some(0) | Some(1)),
        "the md guest did not complete boot {tag} (exit {}; 124 is the guest's watchdog); {}; work dir {}:\n{}",
        run.status,
        last_result(&out_dir.join("console.log")),
        work.display(),
        tail(&run.stderr, 60)
    );
    let results = fs::read_to_string(out_dir.join("results/results.txt")).unwrap_or_default();
    let mut out = BTreeMap::new();
    for l in results.lines() {
        if let Some(rest) = l.strip_prefix("RESULT ") {
            let f: Vec<&str> = rest.splitn(4, ' ').collect();
            if f.len() >= 3 {
                out.insert(
                    (f[0].to_string(), f[1].to_string()),
                    (f[2].to_string(), f.get(3).unwrap_or(&"").to_string()),
                );
            }
        }
    }
    Ok(out)
}

fn sha_of(path: &str) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

fn detail_state(members: &[String], device: &str) -> (Option<String>, serde_json::Value) {
    let mut args = vec!["detail", "--json"];
    args.extend(members.iter().map(String::as_str));
    let o = raidlab(&args);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    let state = v["members"].as_array().and_then(|ms| {
        ms.iter()
            .find(|m| m["device"] == device)
            .and_then(|m| m["state"].as_str().map(str::to_string))
    });
    (state, v)
}

/// Serve the array read-write, then stop it with SIGTERM (a clean stop).
fn serve_then_stop(members: &[String], dir: &Path) -> Result<(), String> {
    let sock = dir.join("serve.sock");
    let mut child = Command::new(RAIDLAB)
        .arg("serve")
        .args(members)
        .arg("--socket")
        .arg(&sock)
        .env("RAIDLAB_RUN_DIR", dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start raidlab serve: {e}"))?;
    // Bounded only against a hang: a slow machine just takes longer.
    let deadline = Instant::now() + std::time::Duration::from_secs(120);
    while !sock.exists() {
        if let Ok(Some(st)) = child.try_wait() {
            let mut err = String::new();
            use std::io::Read;
            child.stderr.take().map(|mut e| e.read_to_string(&mut err));
            return Err(format!("raidlab serve exited {st} before listening: {err}"));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            return Err("raidlab serve did not listen within 120 s".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: kill(2) on our own child's pid, which has not been reaped yet.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = child.wait().map_err(|e| e.to_string())?;
    if !st.success() {
        return Err(format!("raidlab serve exited {st} after SIGTERM"));
    }
    Ok(())
}
