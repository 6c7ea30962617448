//! Re-add against the real md, both ways (issue 36): a member that left is
//! taken back with only the write-intent bitmap's dirty chunks resynced, and
//! md judges the result.
//!
//! * md writes around a removed member (guest kind `W`, boot 1); raidlab
//!   re-adds it on the host (`raidlab add --re-add`) and must find md's dirty
//!   bits and resync exactly them; md then assembles the array (boot 2, kind
//!   `B`): clean, every member active, a `check` finds no mismatch, and the
//!   data reads back exactly, complete and without member 0.
//! * raidlab writes around a removed member: md re-adds it in the guest
//!   (`mdadm --re-add`, kind `E`) and must write to it only what raidlab's
//!   bitmap marked (the member's loop-device write count), then check clean
//!   and read the data exactly; and raidlab's own re-add of such an array is
//!   assembled by md as in the first case (kind `B`, boot 1).
//!
//! The bitmap has 64 KiB chunks, the RAID 5 chunk is 64 KiB, and the degraded
//! writes cover known chunks, so every figure is known beforehand: bytes
//! resynced = dirty bits x 64 KiB, against the member's whole data area.

use super::*;

/// Bytes of member data per bitmap bit, on both sides.
const BITMAP_CHUNK: u64 = 64 << 10;
/// The degraded writes copy the pattern from this far on, so what they leave
/// differs from what was there everywhere.
const SHIFT: u64 = 4 * MIB;
/// Every member image (8 MiB, as in the matrix: the boots stay short).
const MEMBER: u64 = 8 * MIB;
/// The pattern at the start of the data disk (the guest writes from it):
/// SHIFT plus the largest array.
const PATTERN: u64 = 32 * MIB;
/// What md writes to a re-added member besides its dirty chunks (its
/// superblock and bitmap as the recovery starts and ends), at most.
const MD_METADATA_SLACK: u64 = 256 << 10;

struct Case {
    name: &'static str,
    level: u32,
    devices: usize,
    /// (array offset, bytes) written while member 1 is out.
    regions: &'static [(u64, u64)],
    /// The bitmap bits those writes set.
    bits: u64,
}

/// RAID 5 of 4, 64K chunks (a stripe holds 192 KiB of data): a whole stripe
/// at 3 MiB (member bytes 1 MiB..+64K, bit 16), one chunk of the stripe at
/// 12 MiB (a partial-stripe write, bit 64) and a whole stripe at 13.5 MiB
/// (bit 72).
const R5: Case = Case {
    name: "r5",
    level: 5,
    devices: 4,
    regions: &[
        (3 * MIB, 192 << 10),
        (12 * MIB + (64 << 10), 64 << 10),
        (13 * MIB + (512 << 10), 192 << 10),
    ],
    bits: 3,
};

/// RAID 1 of 2: 64K at 4 MiB (bit 64), 128K at 5 MiB (bits 80, 81).
const R1: Case = Case {
    name: "r1",
    level: 1,
    devices: 2,
    regions: &[(4 * MIB, 64 << 10), (5 * MIB, 128 << 10)],
    bits: 3,
};

impl Case {
    fn cfg(&self, name: &str) -> Cfg {
        Cfg {
            name: name.into(),
            level: self.level as i32,
            layout: None,
            chunk_kib: (self.level != 1).then_some(64),
            devices: self.devices,
            member_bytes: MEMBER,
            flags: vec![],
        }
    }

    fn regions_field(&self) -> String {
        let r: Vec<String> = self
            .regions
            .iter()
            .map(|(o, l)| format!("{o}:{l}"))
            .collect();
        r.join(",")
    }

    /// The array after the degraded writes over `pat[..size]`.
    fn expected(&self, pat: &[u8], size: u64) -> Vec<u8> {
        let mut v = pat[..size as usize].to_vec();
        for &(o, l) in self.regions {
            let (o, l) = (o as usize, l as usize);
            v[o..o + l].copy_from_slice(&pat[SHIFT as usize + o..SHIFT as usize + o + l]);
        }
        v
    }
}

/// `key=N` from a guest result's detail.
fn field(detail: &str, key: &str) -> Option<u64> {
    detail
        .split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
}

/// What `raidlab add --re-add` said: (dirty chunks, bytes resynced, member bytes).
fn re_add_figures(out: &str) -> Option<(u64, u64, u64)> {
    let num_after = |text: &str, after: &str| -> Option<u64> {
        let i = text.find(after)? + after.len();
        text[i..]
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    let at = out.find(" dirty chunk")?;
    let dirty = out[..at]
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    let resynced = num_after(out, "resynced ")?;
    let member = num_after(out, &format!("resynced {resynced} bytes of "))?;
    Some((dirty, resynced, member))
}

/// `raidlab add MEMBERS --new NEW --re-add`: the figures, or why not.
fn raidlab_re_add(members: &[String], new: &str) -> Result<(u64, u64, u64), String> {
    let mut a = vec!["add"];
    a.extend(members.iter().map(String::as_str));
    a.extend(["--new", new, "--re-add"]);
    let o = raidlab(&a);
    if !o.status.success() {
        return Err(describe(&a, &o));
    }
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    re_add_figures(&out).ok_or_else(|| format!("no re-add figures in: {out}"))
}

/// `raidlab check` of the members: Ok when it finds no mismatch.
fn raidlab_check_clean(members: &[String]) -> Result<(), String> {
    let mut a = vec!["check"];
    a.extend(members.iter().map(String::as_str));
    let o = raidlab(&a);
    let out = String::from_utf8_lossy(&o.stdout);
    if o.status.success() && out.contains("mismatch_cnt: 0") {
        Ok(())
    } else {
        Err(format!("{} :: {out}", describe(&a, &o)))
    }
}

fn run_ok(args: &[&str]) -> Result<Output, String> {
    let o = raidlab(args);
    if o.status.success() {
        Ok(o)
    } else {
        Err(describe(args, &o))
    }
}

/// raidlab creates `case` (bitmap of 64K chunks), fills it with the pattern,
/// fails and removes member 1 and makes the degraded writes. The members and
/// the array's size.
fn raidlab_written_around(
    case: &Case,
    dir: &Path,
    pat: &[u8],
) -> Result<(Vec<String>, u64), String> {
    fs::create_dir_all(dir).unwrap();
    let members: Vec<String> = (0..case.devices)
        .map(|i| dir.join(format!("m{i}.img")).to_str().unwrap().to_string())
        .collect();
    let (level, msize, bchunk) = (
        case.level.to_string(),
        MEMBER.to_string(),
        BITMAP_CHUNK.to_string(),
    );
    let mut a = vec![
        "create",
        "--level",
        &level,
        "--member-size",
        &msize,
        "--consistency-policy",
        "bitmap",
        "--bitmap-chunk",
        &bchunk,
    ];
    if case.level != 1 {
        a.extend(["--chunk", "64K"]);
    }
    a.extend(members.iter().map(String::as_str));
    run_ok(&a)?;
    let (_, v) = detail_state(&members, &members[1]);
    let size = v["array_size_bytes"].as_u64().ok_or("no array size")?;
    let import = |bytes: &[u8], offset: u64| -> Result<(), String> {
        let input = dir.join("input.bin");
        fs::write(&input, bytes).unwrap();
        let (i, off) = (input.to_str().unwrap().to_string(), offset.to_string());
        let mut a = vec!["import"];
        a.extend(members.iter().map(String::as_str));
        a.extend(["--input", &i, "--offset", &off]);
        run_ok(&a).map(|_| ())
    };
    import(&pat[..size as usize], 0)?;
    for verb in ["fail", "remove"] {
        let mut a = vec![verb];
        a.extend(members.iter().map(String::as_str));
        a.extend(["--member", &members[1]]);
        run_ok(&a)?;
    }
    for &(o, l) in case.regions {
        import(&pat[(SHIFT + o) as usize..(SHIFT + o + l) as usize], o)?;
    }
    fs::remove_file(dir.join("input.bin")).ok();
    Ok((members, size))
}

/// Where md's reads of one array go and what they must be.
struct Reads {
    name: String,
    size: u64,
    out: u64,
    sets: usize,
    want: Vec<u8>,
}

impl Reads {
    /// A `B` line for these members (md reads complete, then without member
    /// 0, so from the re-added member) and the room for its reads. (md's
    /// `check` there has compared the re-added member with the others.)
    fn b_line(
        slots: &mut Slots,
        name: &str,
        case: &Case,
        offs: &[u64],
        size: u64,
        want: Vec<u8>,
    ) -> (String, Reads) {
        let sets = vec![vec![0]];
        let stride = size.div_ceil(MIB) * MIB;
        let out = slots.next;
        slots.next += stride * (1 + sets.len() as u64);
        let line = format!(
            "B {name} {} {} {MEMBER} {} {size} {out} {} bitmap\n",
            case.level,
            case.devices,
            csv(offs),
            sets_field(&sets)
        );
        let reads = Reads {
            name: name.into(),
            size,
            out,
            sets: sets.len(),
            want,
        };
        (line, reads)
    }

    /// md's verdict and every read it copied out, compared.
    fn judge(&self, data: &fs::File, res: &GuestResults, kind: &str, what: &str) -> Vec<String> {
        let mut bad = Vec::new();
        match res.get(&(self.name.clone(), kind.to_string())) {
            Some((s, _)) if s == "PASS" => {}
            other => bad.push(format!("{} ({what}): md: {other:?}", self.name)),
        }
        let stride = self.size.div_ceil(MIB) * MIB;
        let mut got = vec![0u8; self.size as usize];
        for k in 0..=self.sets {
            data.read_exact_at(&mut got, self.out + k as u64 * stride)
                .unwrap();
            if got != self.want {
                bad.push(format!(
                    "{} ({what}): md's read {k} (0 complete, 1 without member 0) differs: {}",
                    self.name,
                    first_diff(&got, &self.want)
                ));
            }
            if kind != "B" {
                break;
            }
        }
        bad
    }
}

/// Copy the member images into their slots of the data disk.
fn to_slots(data: &fs::File, members: &[String], offs: &[u64]) {
    for (m, off) in members.iter().zip(offs) {
        data.write_all_at(&fs::read(m).unwrap(), *off).unwrap();
    }
}

#[test]
fn re_add_resyncs_only_the_bitmaps_dirty_chunks_both_ways() {
    if vm_tests_off() {
        return;
    }
    let _one = ONE_BOOT.lock().unwrap_or_else(|p| p.into_inner());
    let guest_dir = match guest() {
        Ok(g) => g,
        Err(why) => return skip(&why),
    };
    let work = work_dir("md_readd");
    let pat = pattern(PATTERN);
    let data_path = work.join("data.img");
    let data = data_disk(&data_path, &pat);
    let mut slots = Slots { next: PATTERN };
    let mut failures: Vec<String> = Vec::new();
    let mut figures: Vec<String> = Vec::new();
    let mut manifest = String::new();

    // md writes around a removed member (W): the arrays raidlab re-adds.
    let mut md_arrays: Vec<(&Case, String, Vec<u64>)> = Vec::new();
    for case in [&R1, &R5] {
        let name = format!("{}-md-writes", case.name);
        let offs = slots.take(&case.cfg(&name));
        manifest.push_str(&format!(
            "W {name} {} {} {MEMBER} {} {SHIFT} {}\n",
            case.level,
            case.devices,
            csv(&offs),
            case.regions_field()
        ));
        md_arrays.push((case, name, offs));
    }

    // raidlab writes around a removed member and re-adds it itself; md
    // assembles the result (B).
    let mut b1: Vec<Reads> = Vec::new();
    for case in [&R1, &R5] {
        let name = format!("{}-rl-readd", case.name);
        let (members, size) = match raidlab_written_around(case, &work.join(&name), &pat) {
            Ok(x) => x,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let want = case.expected(&pat, size);
        match raidlab_re_add(&members, &members[1]) {
            Ok((dirty, resynced, member)) => {
                figures.push(format!(
                    "{name}: raidlab resynced {resynced} of {member} member bytes ({dirty} dirty bits)"
                ));
                if dirty != case.bits || resynced != case.bits * BITMAP_CHUNK {
                    failures.push(format!(
                        "{name}: raidlab's re-add found {dirty} dirty bits and resynced {resynced} bytes; the writes set {} bits of {BITMAP_CHUNK} bytes",
                        case.bits
                    ));
                }
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
        match export(&members, &work.join(&name).join("export.bin")) {
            Ok(got) if got == want => {}
            Ok(got) => failures.push(format!(
                "{name}: raidlab reads its re-added array wrong: {}",
                first_diff(&got, &want)
            )),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
        let offs = slots.take(&case.cfg(&name));
        to_slots(&data, &members, &offs);
        let (line, reads) = Reads::b_line(&mut slots, &name, case, &offs, size, want);
        manifest.push_str(&line);
        b1.push(reads);
    }

    // raidlab writes around a removed member; md re-adds it (E).
    let mut e_reads: Vec<(&Case, Reads, Vec<u64>)> = Vec::new();
    for case in [&R1, &R5] {
        let name = format!("{}-md-readd", case.name);
        let (members, size) = match raidlab_written_around(case, &work.join(&name), &pat) {
            Ok(x) => x,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let offs = slots.take(&case.cfg(&name));
        to_slots(&data, &members, &offs);
        let out = slots.next;
        slots.next += size.div_ceil(MIB) * MIB;
        manifest.push_str(&format!(
            "E {name} {} {MEMBER} {} {size} {out} 1\n",
            case.devices,
            csv(&offs)
        ));
        let want = case.expected(&pat, size);
        let reads = Reads {
            name,
            size,
            out,
            sets: 0,
            want,
        };
        e_reads.push((case, reads, offs));
    }
    data.set_len(slots.next).unwrap();
    data.sync_all().unwrap();

    let res = match boot(&guest_dir, &work, "1", &manifest, &data_path) {
        Ok(r) => r,
        Err(why) => return skip(&why),
    };
    for r in &b1 {
        failures.extend(r.judge(&data, &res, "B", "raidlab re-added, md assembles"));
    }
    for (case, r, offs) in &e_reads {
        let name = &r.name;
        let bad = r.judge(&data, &res, "E", "raidlab wrote degraded, md re-added");
        let clean = bad.is_empty();
        failures.extend(bad);
        if let Some((_, d)) = res.get(&(name.clone(), "E".to_string())) {
            let (dirty, written) = (field(d, "dirty"), field(d, "written_bytes"));
            figures.push(format!(
                "{name}: md re-added raidlab's member and wrote {written:?} bytes to it ({dirty:?} dirty bits of {BITMAP_CHUNK} bytes)"
            ));
            let want = case.bits * BITMAP_CHUNK;
            match (dirty, written) {
                (Some(d), Some(w))
                    if d == case.bits && w >= want && w <= want + MD_METADATA_SLACK => {}
                _ => failures.push(format!(
                    "{name}: md's re-add of raidlab's member: {dirty:?} dirty bits (raidlab's writes set {}), {written:?} bytes written to it (the dirty chunks are {want}, plus at most {MD_METADATA_SLACK} of md's metadata)",
                    case.bits
                )),
            }
        }
        if clean {
            // raidlab reads what md's re-add left, and finds it consistent.
            let dir = work.join(name).join("after");
            let members = from_slots(&data, &dir, offs, MEMBER);
            if let Err(e) = raidlab_check_clean(&members) {
                failures.push(format!("{name}: after md's re-add: {e}"));
            }
            match export(&members, &dir.join("export.bin")) {
                Ok(got) if got == r.want => {}
                Ok(got) => failures.push(format!(
                    "{name}: raidlab reads md's re-added array wrong: {}",
                    first_diff(&got, &r.want)
                )),
                Err(e) => failures.push(format!("{name}: {e}")),
            }
        }
    }

    // The host re-adds md's removed members; md assembles the result (boot 2).
    let mut manifest = String::new();
    let mut b2: Vec<Reads> = Vec::new();
    for (case, name, offs) in &md_arrays {
        let (size, md_dirty) = match res.get(&(name.clone(), "W".to_string())) {
            Some((s, d)) if s == "PASS" => (field(d, "array_bytes"), field(d, "dirty")),
            other => {
                failures.push(format!(
                    "{name}: md could not write around a removed member: {other:?}"
                ));
                continue;
            }
        };
        let (Some(size), Some(md_dirty)) = (size, md_dirty) else {
            failures.push(format!("{name}: no array_bytes or dirty in md's W result"));
            continue;
        };
        if md_dirty != case.bits {
            failures.push(format!(
                "{name}: md's bitmap has {md_dirty} dirty bits after the degraded writes, {} expected",
                case.bits
            ));
        }
        let dir = work.join(name);
        let members = from_slots(&data, &dir, offs, MEMBER);
        let (state, _) = detail_state(&members, &members[1]);
        if state.as_deref() != Some("removed") {
            failures.push(format!(
                "{name}: md removed member 1; raidlab calls it {state:?}"
            ));
        }
        match raidlab_re_add(&members, &members[1]) {
            Ok((dirty, resynced, member)) => {
                figures.push(format!(
                    "{name}: raidlab re-added md's member, resynced {resynced} of {member} member bytes ({dirty} dirty bits; md's bitmap had {md_dirty})"
                ));
                if dirty != md_dirty || resynced != md_dirty * BITMAP_CHUNK {
                    failures.push(format!(
                        "{name}: md's bitmap marks {md_dirty} chunks; raidlab's re-add found {dirty} and resynced {resynced} bytes"
                    ));
                }
            }
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        }
        let want = case.expected(&pat, size);
        if let Err(e) = raidlab_check_clean(&members) {
            failures.push(format!("{name}: {e}"));
        }
        match export(&members, &dir.join("export.bin")) {
            Ok(got) if got == want => {}
            Ok(got) => failures.push(format!(
                "{name}: after raidlab's re-add the array reads wrong: {}",
                first_diff(&got, &want)
            )),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
        fs::remove_file(dir.join("export.bin")).ok();
        to_slots(&data, &members, offs);
        let (line, reads) = Reads::b_line(&mut slots, name, case, offs, size, want);
        manifest.push_str(&line);
        b2.push(reads);
    }
    if !b2.is_empty() {
        data.set_len(slots.next).unwrap();
        data.sync_all().unwrap();
        let res = match boot(&guest_dir, &work, "2", &manifest, &data_path) {
            Ok(r) => r,
            Err(why) => return skip(&why),
        };
        for r in &b2 {
            failures.extend(r.judge(&data, &res, "B", "md wrote degraded, raidlab re-added"));
        }
    }
    for f in &figures {
        loud(&format!("md_compat: re-add: {f}"));
    }
    if failures.is_empty() {
        if std::env::var_os("RAIDLAB_MDVM_KEEP").is_none() {
            fs::remove_dir_all(&work).ok();
        }
        return;
    }
    panic!(
        "re-add, both ways: {} failure(s) (work dir kept: {}):\n{}",
        failures.len(),
        work.display(),
        failures.join("\n")
    );
}
