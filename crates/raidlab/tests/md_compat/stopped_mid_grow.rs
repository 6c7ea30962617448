//! Arrays md stopped in the middle of its own reshape (kind `G`): raidlab
//! reads them on both sides of the position and finishes them, md's
//! superblock fields and bitmap as md left them.

use super::*;

/// One of md's reshapes in the guest (kind `G`): the guest's mode, the
/// members, and the member sets raidlab must read it without.
struct ReshapeCase {
    name: &'static str,
    mode: &'static str,
    devices: usize,
    missing: Vec<Vec<usize>>,
}

/// Issue 16: arrays md stopped in the middle of a reshape, all in one boot
/// (guest kind `G`), each with the reshape slowed down and the array stopped
/// once md has recorded a reshape position:
/// - md grows a RAID 5 of 4 onto a fifth member; raidlab then finishes that
///   grow from md's recorded position (`grow --continue`: data exact at the
///   new size, `check` 0);
/// - md converts a RAID 5 of 4 to a RAID 6 of 5 with `--grow --level=6
///   --layout=preserve`, which md finishes (Q rebuilt onto the new member): a
///   RAID 6 left in left-symmetric-6;
/// - md shrinks a RAID 5 of 5 to 4 members (`--array-size`, then
///   `--raid-devices=4 --backup-file`): md's backwards reshape;
/// - md grows a RAID 10 near=2 of 4 onto a fifth member (its RAID 10
///   reshape, which records positions inside a chunk too); raidlab then
///   finishes it from there, as the RAID 5 grow;
/// - md grows a RAID 0 of 3 onto a fourth member (mdadm's takeover as a
///   RAID 4 of 4 whose parity role is empty, reshaped to 5 roles; mdadm's
///   background process is killed so nothing takes it back as a RAID 0):
///   md records layout word 5 and the new member, in the old parity role,
///   recovering; raidlab reads it and finishes it as a RAID 0 of 4.
///
/// raidlab must read each byte for byte (md's old size while a grow runs),
/// complete and with members left out, and `detail` must call the grow an
/// interrupted reshape. For md's reshapes over the same members (`chunk`,
/// `r6`), md runs ahead of the position it records and overwrites the old
/// copy right above it: there raidlab must read what md itself reads when it
/// assembles the stopped members again (the guest reads that back), and
/// everywhere else the pattern.
#[test]
fn an_array_md_stopped_mid_grow_reads_on_both_sides_of_the_position() {
    if vm_tests_off() {
        return;
    }
    let _one = ONE_BOOT.lock().unwrap_or_else(|p| p.into_inner());
    let guest_dir = match guest() {
        Ok(g) => g,
        Err(why) => return skip(&why),
    };
    let work = work_dir("md_grow");
    let member = 8 * MIB;
    let pat_len = 4 * member;
    let data_path = work.join("data.img");
    let pat = pattern(pat_len);
    let data = data_disk(&data_path, &pat);
    let cases = [
        ReshapeCase {
            name: "r5-grow",
            mode: "grow",
            devices: 5,
            missing: vec![vec![], vec![1], vec![4]],
        },
        ReshapeCase {
            name: "r5-chunk",
            mode: "chunk",
            devices: 4,
            missing: vec![vec![], vec![1], vec![3]],
        },
        ReshapeCase {
            name: "r5-to-r6",
            mode: "r6",
            devices: 5,
            missing: vec![vec![], vec![4], vec![1, 4], vec![0, 2]],
        },
        ReshapeCase {
            name: "r6-ls6",
            mode: "r6p",
            devices: 5,
            missing: vec![vec![], vec![4], vec![0, 1]],
        },
        ReshapeCase {
            name: "r10-grow",
            mode: "r10grow",
            devices: 5,
            missing: vec![vec![], vec![1], vec![4]],
        },
        ReshapeCase {
            name: "r0-grow",
            mode: "r0grow",
            devices: 4,
            // md's RAID 4 mid-reshape has no redundancy to spare: its old
            // parity role holds the new member, its new parity role is empty.
            missing: vec![vec![]],
        },
        ReshapeCase {
            name: "r5-shrink",
            mode: "shrink",
            devices: 5,
            missing: vec![vec![], vec![1], vec![4]],
        },
        ReshapeCase {
            name: "r5-shrink-room",
            mode: "shrinkroom",
            devices: 5,
            missing: vec![vec![], vec![1], vec![4]],
        },
        ReshapeCase {
            name: "r10-shrink",
            mode: "r10shrink",
            devices: 5,
            missing: vec![vec![], vec![1], vec![4]],
        },
        // md's RAID 10 shrink and grow with its internal bitmap: raidlab
        // finishes each and leaves the bitmap sized to the array it ends
        // with (md left the grow's at the old size on disk).
        ReshapeCase {
            name: "r10-shrink-bitmap",
            mode: "r10shrinkbm",
            devices: 5,
            missing: vec![vec![], vec![1]],
        },
        ReshapeCase {
            name: "r10-grow-bitmap",
            mode: "r10growbm",
            devices: 5,
            missing: vec![vec![], vec![1]],
        },
    ];
    // `RAIDLAB_MDVM_ONLY=r5-shrink` boots for that case alone.
    let only: Option<Vec<String>> = std::env::var("RAIDLAB_MDVM_ONLY")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    let cases: Vec<ReshapeCase> = cases
        .into_iter()
        .filter(|c| {
            only.as_ref()
                .map_or(true, |o| o.iter().any(|n| n == c.name))
        })
        .collect();
    let mut slots = Slots { next: pat_len };
    let mut manifest = String::new();
    let mut offsets = Vec::new();
    for c in &cases {
        let cfg = Cfg {
            name: c.name.into(),
            level: 5,
            layout: Some("left-symmetric".into()),
            chunk_kib: Some(64),
            devices: c.devices,
            member_bytes: member,
            flags: vec![],
        };
        let offs = slots.take(&cfg);
        manifest += &format!(
            "G {} {} {member} {} {}\n",
            c.name,
            c.devices,
            csv(&offs),
            c.mode
        );
        offsets.push(offs);
    }
    data.set_len(slots.next).unwrap();
    data.sync_all().unwrap();
    let res = match boot(&guest_dir, &work, "g", &manifest, &data_path) {
        Ok(r) => r,
        Err(why) => return skip(&why),
    };
    let mut failures = Vec::new();
    for (c, offs) in cases.iter().zip(&offsets) {
        if let Err(e) = check_md_reshape(c, offs, &data, member, &pat, &res, &work) {
            failures.push(format!("{}: {e}", c.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let _ = fs::remove_dir_all(&work);
}

/// The host half of one `G` case: cut the members out of the data disk, check
/// `detail` (an interrupted reshape, or for `r6p` md's left-symmetric-6 as
/// mdadm named it) and export with each member set in `c.missing` left out.
fn check_md_reshape(
    c: &ReshapeCase,
    offs: &[u64],
    data: &fs::File,
    member: u64,
    pat: &[u8],
    res: &GuestResults,
    work: &Path,
) -> Result<(), String> {
    let (status, detail) = res
        .get(&(c.name.to_string(), "G".to_string()))
        .cloned()
        .unwrap_or_else(|| ("MISSING".into(), "no result from the guest".into()));
    if status != "PASS" {
        return Err(format!("md's side failed: {detail}"));
    }
    let field = |k: &str| -> Result<String, String> {
        detail
            .split_whitespace()
            .find_map(|w| Some(w.strip_prefix(k)?.strip_prefix('=')?.to_string()))
            .ok_or_else(|| format!("no {k} in {detail:?}"))
    };
    let size: u64 = field("array_bytes")?
        .parse()
        .map_err(|e| format!("array_bytes: {e}"))?;
    let members: Vec<String> = offs
        .iter()
        .enumerate()
        .map(|(i, &off)| {
            let mut b = vec![0u8; member as usize];
            data.read_exact_at(&mut b, off).unwrap();
            let p = work.join(format!("{}-m{i}.img", c.name));
            fs::write(&p, &b).unwrap();
            p.to_str().unwrap().to_string()
        })
        .collect();
    let mut dargs = vec!["detail"];
    dargs.extend(members.iter().map(String::as_str));
    let o = raidlab(&dargs);
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    if !o.status.success() {
        return Err(describe(&dargs, &o));
    }
    if c.mode == "r6p" {
        // md's own word for the layout (sysfs) and mdadm's examine of it.
        let md_layout = field("md_layout")?;
        let examine = work.join("vm-g/results/G").join(c.name).join("examine.0");
        let examine = fs::read_to_string(&examine).unwrap_or_default();
        if md_layout != "18" || !examine.contains("left-symmetric-6") {
            return Err(format!(
                "md did not leave left-symmetric-6 (sysfs layout {md_layout}): {examine}"
            ));
        }
        if !text.contains("left-symmetric-6") || text.contains("interrupted reshape") {
            return Err(format!("raidlab detail: {text}"));
        }
    } else {
        if !text.contains("interrupted reshape") {
            return Err(format!("not an interrupted reshape: {text}"));
        }
        let position: u64 = text
            .split("stopped at byte ")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("no reshape position in {text}"))?;
        loud(&format!(
            "md_compat: md stopped {} ({}) at array byte {position} of {size} ({detail})",
            c.name, c.mode
        ));
        if position == 0 || position >= size {
            return Err(format!(
                "the reshape must stop part-way for this test to show anything: {position} of {size}"
            ));
        }
    }
    if c.mode == "r0grow" {
        // What raidlab takes md's stopped RAID 0 grow as: md's RAID 4 with
        // layout word 5 (its takeover's), the new member in the old parity
        // role recovering.
        let gdir = work.join("vm-g/results/G").join(c.name);
        let shape = fs::read_to_string(gdir.join("md-shape")).unwrap_or_default();
        let shape: Vec<&str> = shape.lines().collect();
        let examine =
            fs::read_to_string(gdir.join(format!("examine.{}", c.devices - 1))).unwrap_or_default();
        if shape.get(..2) != Some(&["raid4", "5"][..]) || !examine.contains("Recovery Offset") {
            return Err(format!(
                "md's RAID 0 grow is not the RAID 4 raidlab expects (level, layout: {shape:?}): {examine}"
            ));
        }
    }
    let mut want = pat[..size as usize].to_vec();
    // The bytes md itself lost (its own reading differs from the pattern).
    let mut lost_window = 0..0;
    // md cannot read a stopped shrink back without carrying it on: with its
    // backup file, mdadm 4.2's `--assemble --readonly` restarted the reshape
    // (and segfaulted), and `--freeze-reshape` refuses to run the array
    // ("Reshape has to be continued ... when root filesystem has been
    // mounted", "failed to RUN_ARRAY"). Its backup file keeps the critical
    // section, so md loses nothing there: raidlab must read the pattern.
    // A stopped RAID 10 shrink md does assemble read-only, but reads its
    // new geometry (above the position) at the old data offset, one row
    // off: the kernel's raid10 takes `new_data_offset` only while the
    // reshape thread runs (`choose_data_offset`), and a read-only array
    // runs none. The members hold the pattern there (raidlab reads it, and
    // its --continue below ends exact with `check` 0), so the pattern is
    // what raidlab must read.
    if !matches!(c.mode, "r6p" | "shrink" | "r10shrink" | "r10shrinkbm") {
        // What md itself reads of the stopped array from its recorded
        // position on (the guest assembles it again, read-only). Over the
        // same members md runs ahead of the position it records and
        // overwrites the old copy of what lies right above it, so md's own
        // reading differs from the pattern there: raidlab must read what md
        // reads, and the pattern everywhere else.
        let gdir = work.join("vm-g/results/G").join(c.name);
        let md_read = fs::read(gdir.join("md-read.bin")).map_err(|e| {
            format!("the guest did not read the stopped array back through md: {e}")
        })?;
        let md_pos = fs::read_to_string(gdir.join("md-read.pos"))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .ok_or("no md-read.pos from the guest")?
            * 512;
        let end = (md_pos + md_read.len() as u64).min(size) as usize;
        let md_read = &md_read[..end - md_pos as usize];
        let differs: Vec<usize> = md_read
            .iter()
            .zip(&want[md_pos as usize..end])
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(i, _)| md_pos as usize + i)
            .collect();
        let lost = differs.len();
        if let (Some(&a), Some(&b)) = (differs.first(), differs.last()) {
            lost_window = a..b + 1;
        }
        loud(&format!(
            "md_compat: md itself reads {lost} bytes of {} right above the position of {} differently from what was written",
            md_read.len(),
            c.name
        ));
        if matches!(
            c.mode,
            "grow"
                | "r10grow"
                | "r10growbm"
                | "r0grow"
                | "shrinkroom"
                | "r10shrink"
                | "r10shrinkbm"
        ) && lost != 0
        {
            return Err(format!("md lost {lost} bytes of a grow above its position"));
        }
        want[md_pos as usize..end].copy_from_slice(md_read);
    }
    let want = &want[..];
    for out in &c.missing {
        let given: Vec<String> = members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                if out.contains(&i) {
                    "missing".to_string()
                } else {
                    m.clone()
                }
            })
            .collect();
        let got = export(&given, &work.join(format!("{}-export.bin", c.name)))
            .map_err(|e| format!("members {out:?} left out: {e}"))?;
        // Complete, raidlab reads what md reads, lost bytes included.
        // Degraded, what md lost is rebuilt from rows that hold the other
        // geometry's blocks: different garbage, so only the rest is compared.
        let (got, want) = if out.is_empty() || lost_window.is_empty() {
            (got, want.to_vec())
        } else {
            let cut = |v: &[u8]| [&v[..lost_window.start], &v[lost_window.end..]].concat();
            (cut(&got), cut(want))
        };
        if got != want {
            return Err(format!(
                "members {out:?} left out: raidlab read md's array differently: {}",
                first_diff(&got, &want)
            ));
        }
    }
    if matches!(c.mode, "grow" | "r10grow" | "r10growbm" | "r0grow") {
        // raidlab finishes the grow md stopped (issue 36), from md's
        // recorded position: the data md wrote reads back exact at the new
        // size, the new space zeros, `check` 0, no reshape left. md's RAID 0
        // grow ends as a RAID 0 (what mdadm's background process would have
        // made of it), which has nothing to check.
        let mut a = vec!["grow"];
        a.extend(members.iter().map(String::as_str));
        a.push("--continue");
        let o = raidlab(&a);
        if !o.status.success() {
            return Err(format!(
                "raidlab grow --continue of md's stopped grow: {}",
                describe(&a, &o)
            ));
        }
        let got = export(&members, &work.join(format!("{}-done.bin", c.name)))?;
        let old = size as usize;
        if got.len() <= old || got[..old] != want[..old] || got[old..].iter().any(|&b| b != 0) {
            return Err(format!(
                "after raidlab finished md's grow: {} bytes (was {old}): {}",
                got.len(),
                first_diff(&got[..old.min(got.len())], &want[..old.min(got.len())])
            ));
        }
        let mut a = vec!["check"];
        a.extend(members.iter().map(String::as_str));
        let o = raidlab(&a);
        if c.mode != "r0grow" && !String::from_utf8_lossy(&o.stdout).contains("mismatch_cnt: 0") {
            return Err(format!(
                "check after raidlab finished md's grow: {}",
                describe(&a, &o)
            ));
        }
        let mut d = vec!["detail"];
        d.extend(members.iter().map(String::as_str));
        let text = String::from_utf8_lossy(&raidlab(&d).stdout).to_string();
        if text.contains("interrupted reshape") {
            return Err(format!("still a reshape after --continue: {text}"));
        }
        if c.mode == "r0grow" && !text.contains("raid0") {
            return Err(format!("md's RAID 0 grow did not end as a RAID 0: {text}"));
        }
        if c.mode == "r10growbm" {
            let gdir = work.join("vm-g/results/G").join(c.name);
            raid10_bitmap_after_md(&gdir, &members, got.len() as u64)?;
        }
        loud(&format!(
            "md_compat: raidlab finished md's stopped grow {}: {} -> {} bytes, data exact, {}",
            c.name,
            old,
            got.len(),
            if c.mode == "r0grow" {
                "a RAID 0"
            } else {
                "check 0"
            }
        ));
    }
    if matches!(c.mode, "shrinkroom" | "r10shrink" | "r10shrinkbm") {
        // raidlab finishes md's own backup-free shrink (the data offset
        // moved up; a RAID 10's out of the component size) from md's
        // recorded position: what the four members hold reads back exact,
        // `check` 0, no reshape left, the fifth member a spare.
        let mut a = vec!["grow"];
        a.extend(members.iter().map(String::as_str));
        a.push("--continue");
        let o = raidlab(&a);
        if !o.status.success() {
            return Err(format!(
                "raidlab grow --continue of md's stopped shrink: {}",
                describe(&a, &o)
            ));
        }
        let got = export(&members, &work.join(format!("{}-done.bin", c.name)))?;
        if got.len() as u64 != size || got[..] != want[..size as usize] {
            return Err(format!(
                "after raidlab finished md's shrink: {} bytes (md's size {size}): {}",
                got.len(),
                first_diff(&got, &want[..size as usize])
            ));
        }
        let mut a = vec!["check"];
        a.extend(members.iter().map(String::as_str));
        let o = raidlab(&a);
        if !String::from_utf8_lossy(&o.stdout).contains("mismatch_cnt: 0") {
            return Err(format!(
                "check after raidlab finished md's shrink: {}",
                describe(&a, &o)
            ));
        }
        let mut d = vec!["detail"];
        d.extend(members.iter().map(String::as_str));
        let text = String::from_utf8_lossy(&raidlab(&d).stdout).to_string();
        if text.contains("interrupted reshape") || !text.contains("spare") {
            return Err(format!(
                "after --continue: still a reshape, or no spare: {text}"
            ));
        }
        if c.mode == "r10shrinkbm" {
            raid10_bitmap_after_md(&work.join("vm-g/results/G").join(c.name), &members, size)?;
        }
        loud(&format!(
            "md_compat: raidlab finished md's stopped shrink {}: {size} bytes, data exact, check 0",
            c.name
        ));
    }
    Ok(())
}

/// The bitmap of md's RAID 10 reshape raidlab finished: on every member the
/// array it ended with (`size` bytes, md's RAID 10 bitmap counts array
/// sectors), up to date. What md itself had left on disk mid-reshape
/// (`gdir`'s bitmap.md, mdadm -X) is said beside it.
fn raid10_bitmap_after_md(gdir: &Path, members: &[String], size: u64) -> Result<(), String> {
    use raidlab_devices::{FileVolume, OpenMode};
    let md = fs::read_to_string(gdir.join("bitmap.md")).unwrap_or_default();
    let md_sync = md
        .lines()
        .find(|l| l.contains("Sync Size"))
        .map(|l| l.trim().to_string())
        .ok_or_else(|| format!("no bitmap from md mid-reshape: {md}"))?;
    for (i, m) in members.iter().enumerate() {
        let vol = FileVolume::open(Path::new(m), OpenMode::ReadOnly).map_err(|e| e.to_string())?;
        let sb = raidlab_md::Superblock::read_from(&vol)
            .map_err(|e| e.to_string())?
            .ok_or(format!("member {i}: no superblock"))?;
        let bm = raidlab_md::bitmap::Bitmap::read_from(&vol, &sb)
            .map_err(|e| e.to_string())?
            .ok_or(format!("member {i}: no bitmap"))?;
        if bm.sb.sync_size * 512 != size || bm.is_stale(&sb) {
            return Err(format!(
                "member {i}: bitmap of {} sectors (stale: {}) after the reshape to a {size}-byte array",
                bm.sb.sync_size,
                bm.is_stale(&sb)
            ));
        }
    }
    loud(&format!(
        "md_compat: md's bitmap mid-reshape: {md_sync}; raidlab's after it: {} sectors",
        size / 512
    ));
    Ok(())
}
