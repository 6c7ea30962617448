//! raidlab replays the write-back journal md left when md itself crashed
//! (issue 36; the other way, md replaying raidlab's, is the matrix rows
//! `r5-ls-4-jnlwb` and `r6-ls-5-jnlwb`).
//!
//! One short boot (manifest kinds `X`, then `CRASH`): md creates a RAID 5 of
//! 4 and a RAID 6 of 5, each with a write journal, writes the pattern over
//! the whole array (write-through), switches the journal to write-back and
//! writes a few small partial-stripe pieces of other data with O_DIRECT and
//! an fsync each. md acknowledges them once they are in the journal and
//! keeps the stripes in its r5c cache, which only cache pressure, journal
//! pressure or a stop writes out. Then the guest reboots at once (sysrq b,
//! qemu exits under -no-reboot): what md submitted is on the images, what
//! only its memory held is lost.
//!
//! On the host the members and the journal are raidlab's: a read-only
//! `export` must refuse (the journal holds data not on the members yet),
//! `resync` must replay md's journal and report data-only stripes,
//! after which `export` reads every byte md acknowledged (complete and
//! with a member missing) and `check` finds no mismatch. If md wrote the
//! stripes out before the crash the case fails: it would prove nothing.
//!
//! `RAIDLAB_MDVM_ONLY=r5-ls-4-mdjnlwb` (or the RAID 6 name) keeps one case.

use super::*;

const MEMBER: u64 = 8 * MIB;
/// The pattern at the start of the data disk: the arrays' first contents
/// from byte 0, the write-back writes' from [`SHIFT`].
const PATTERN: u64 = 48 * MIB;
/// Where in the pattern the write-back writes take their data (the pattern
/// differs from itself at any shift).
const SHIFT: u64 = 24 * MIB + 41 * 512;
/// Rows are 192 KiB (3 data chunks of 64 KiB) in both cases.
const ROW: u64 = 3 * 64 * 1024;
/// (array offset, bytes, md writes it out before the next write), in this
/// order. A part of a stripe row (4 KiB pages of some data chunks) md holds
/// in its cache, logged as data-only. Five whole rows make 80 full stripes,
/// past the 64 (a quarter of its stripe cache) md's reclaim thread lets
/// wait: it writes them out (their parity logged after their data-only
/// pages, flush entries after that), so the log md leaves mixes stripes
/// gone out with held ones written before and after. Less than a page md
/// writes out at once (data and parity logged, then the members: r5c holds
/// whole pages only).
const WRITES: [(u64, u64, bool); 7] = [
    (4096, 4096, false),
    (64 * 1024 + 8192, 8192, false),
    (5 * ROW + 128 * 1024 + 61440, 4096, false),
    (30 * ROW, 5 * ROW, true),
    (20 * ROW + 1024, 1024, false),
    (50 * ROW + 96 * 1024, 12288, false),
    (70 * ROW + 8192, 4096, false),
];

struct Case {
    name: &'static str,
    level: u32,
    layout: &'static str,
    devices: usize,
    /// /dev/mdN in the guest (md0 is stopped after every manifest line).
    md: u32,
}

const CASES: [Case; 2] = [
    Case {
        name: "r5-ls-4-mdjnlwb",
        level: 5,
        layout: "left-symmetric",
        devices: 4,
        md: 1,
    },
    Case {
        name: "r6-ls-5-mdjnlwb",
        level: 6,
        layout: "left-symmetric",
        devices: 5,
        md: 2,
    },
];

/// "... (N of them data-only, ..." in `resync`'s replay report.
fn data_only_replayed(stderr: &str) -> Option<u64> {
    let before = stderr.split(" of them data-only").next()?;
    if before.len() == stderr.len() {
        return None;
    }
    before.rsplit('(').next()?.trim().parse().ok()
}

/// What raidlab makes of one array md left: every step's failure.
fn raidlab_replays(dir: &Path, devices: &[String], want: &[u8]) -> Vec<String> {
    let mut bad = Vec::new();
    let out = dir.join("export.bin");
    match export(devices, &out) {
        Err(e) if e.contains("not on the members yet") => {
            loud(&format!(
                "md_compat: md crash: read-only export refused: {}",
                e.rsplit(": ")
                    .next()
                    .unwrap_or(&e)
                    .chars()
                    .take(160)
                    .collect::<String>()
            ));
        }
        Err(e) => bad.push(format!(
            "read-only export failed, but not with the refusal of data in the journal alone: {e}"
        )),
        Ok(got) if got == want => bad.push(
            "md wrote every stripe it cached out to the members before the crash: \
             nothing was left in the journal to replay, so this case proves nothing. \
             md's r5c cache holds partial-stripe writes until cache or journal \
             pressure or a stop; make WRITES fewer or smaller, or look at what else \
             ran in the guest between the writes and the crash"
                .to_string(),
        ),
        Ok(got) => bad.push(format!(
            "read-only export returned older data instead of refusing: {}",
            first_diff(&got, want)
        )),
    }
    let mut rargs = vec!["resync"];
    rargs.extend(devices.iter().map(String::as_str));
    let o = raidlab(&rargs);
    let said = String::from_utf8_lossy(&o.stderr).to_string();
    if !o.status.success() {
        bad.push(format!("replaying md's journal: {}", describe(&rargs, &o)));
        return bad;
    }
    loud(&format!("md_compat: md crash: resync: {}", said.trim()));
    match data_only_replayed(&said) {
        Some(n) if n > 0 => {}
        _ => bad.push(format!(
            "`raidlab resync` replayed no data-only stripe of md's write-back journal; it said: {}",
            said.trim()
        )),
    }
    match export(devices, &out) {
        Ok(got) if got == want => {}
        Ok(got) => bad.push(format!(
            "after the replay the array differs from what md acknowledged: {}",
            first_diff(&got, want)
        )),
        Err(e) => bad.push(format!("export after the replay: {e}")),
    }
    // Parity the replay computed for the data-only stripes, read back.
    let mut degraded = devices.to_vec();
    degraded[1] = "missing".into();
    match export(&degraded, &out) {
        Ok(got) if got == want => {}
        Ok(got) => bad.push(format!(
            "after the replay, with member 1 missing, the array differs from what md acknowledged: {}",
            first_diff(&got, want)
        )),
        Err(e) => bad.push(format!("export without member 1 after the replay: {e}")),
    }
    fs::remove_file(&out).ok();
    let mut cargs = vec!["check"];
    cargs.extend(devices.iter().map(String::as_str));
    let o = raidlab(&cargs);
    if !o.status.success() {
        bad.push(format!("check after the replay: {}", describe(&cargs, &o)));
    }
    bad
}

#[test]
fn raidlab_replays_the_write_back_journal_md_left_in_a_crash() {
    if vm_tests_off() {
        return;
    }
    let only: Option<Vec<String>> = std::env::var("RAIDLAB_MDVM_ONLY")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    let cases: Vec<&Case> = CASES
        .iter()
        .filter(|c| only.as_ref().is_none_or(|o| o.iter().any(|n| n == c.name)))
        .collect();
    if cases.is_empty() {
        loud("md_compat: md crash: RAIDLAB_MDVM_ONLY names none of its cases; no boot");
        return;
    }
    let _one = ONE_BOOT.lock().unwrap_or_else(|p| p.into_inner());
    let guest_dir = match guest() {
        Ok(g) => g,
        Err(why) => return skip(&why),
    };
    let work = repo_root()
        .join("tests/mdvm/work")
        .join(format!("md_crash-{}", std::process::id()));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).unwrap();
    let pat = pattern(PATTERN);
    let data_path = work.join("data.img");
    let data = data_disk(&data_path, &pat);
    let mut next = PATTERN;
    let mut manifest = String::new();
    let writes = csv(&WRITES
        .iter()
        .map(|(o, l, out)| format!("{o}:{l}{}", if *out { ":out" } else { "" }))
        .collect::<Vec<_>>());
    let mut slots = Vec::new();
    for c in &cases {
        // the members, then the journal
        let offs: Vec<u64> = (0..=c.devices as u64).map(|i| next + i * MEMBER).collect();
        next += (c.devices as u64 + 1) * MEMBER;
        manifest.push_str(&format!(
            "X {} {} {} 64 {} {MEMBER} {} {} {SHIFT} {writes}\n",
            c.name,
            c.level,
            c.layout,
            c.devices,
            csv(&offs),
            c.md
        ));
        slots.push(offs);
    }
    manifest.push_str("CRASH\n");
    data.set_len(next).unwrap();
    data.sync_all().unwrap();
    let res = match boot(&guest_dir, &work, "crash", &manifest, &data_path) {
        Ok(r) => r,
        Err(why) => return skip(&why),
    };
    let mut failures = Vec::new();
    // sysrq b failing would fall back to `poweroff -f`, which syncs first:
    // no crash then.
    let console = fs::read_to_string(work.join("vm-crash/console.log")).unwrap_or_default();
    if console.contains("MDVM-CRASH-FAILED") {
        failures.push(
            "the guest did not crash: the kernel ignored sysrq b (CONFIG_MAGIC_SYSRQ?) and powered off instead"
                .to_string(),
        );
    }
    for (c, offs) in cases.iter().zip(&slots) {
        let tag = c.name;
        match res.get(&(c.name.to_string(), "X".to_string())) {
            Some((s, d)) if s == "PASS" => loud(&format!("md_compat: md crash: {tag}: md {d}")),
            other => {
                failures.push(format!("{tag}: md: {other:?}"));
                continue;
            }
        }
        let xdir = work.join("vm-crash/results/X").join(c.name);
        let Some(size) = fs::read_to_string(xdir.join("array_bytes"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
        else {
            failures.push(format!("{tag}: the guest recorded no array size"));
            continue;
        };
        let mut want = pat[..size as usize].to_vec();
        for &(o, l, _) in &WRITES {
            let (o, l) = (o as usize, l as usize);
            let from = SHIFT as usize + o;
            want[o..o + l].copy_from_slice(&pat[from..from + l]);
        }
        let dir = work.join(c.name);
        fs::create_dir_all(&dir).unwrap();
        let mut devices = Vec::new();
        for (i, off) in offs.iter().enumerate() {
            let mut buf = vec![0u8; MEMBER as usize];
            data.read_exact_at(&mut buf, *off).unwrap();
            let p = if i == c.devices {
                dir.join("journal.img")
            } else {
                dir.join(format!("m{i}.img"))
            };
            fs::write(&p, &buf).unwrap();
            devices.push(p.to_str().unwrap().to_string());
        }
        for f in raidlab_replays(&dir, &devices, &want) {
            failures.push(format!("{tag}: {f}"));
        }
    }
    if failures.is_empty() {
        if std::env::var_os("RAIDLAB_MDVM_KEEP").is_none() {
            fs::remove_dir_all(&work).ok();
        }
        return;
    }
    panic!(
        "raidlab replaying the write-back journal md left in a crash: {} failure(s) (work dir kept: {}):\n{}",
        failures.len(),
        work.display(),
        failures.join("\n")
    );
}

#[test]
fn the_replay_report_names_its_data_only_stripes() {
    let said = "raidlab: replayed the write journal: 9 stripe(s) written back from 14 meta block(s) (7 of them data-only, written through the array with parity computed afresh); stripes are consistent, no resync needed";
    assert_eq!(data_only_replayed(said), Some(7));
    assert_eq!(
        data_only_replayed("raidlab: replayed the write journal: 2 stripe(s) written back from 3 meta block(s); ..."),
        None
    );
}
