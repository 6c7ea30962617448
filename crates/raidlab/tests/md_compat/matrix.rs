//! The matrix (guest kinds `A` and `B`, and their crash, journal and PPL
//! checks): every row of `tests/mdvm/matrix.txt` that `default.txt` lists, or
//! all of them, md making and raidlab reading, raidlab making and md reading.

use super::*;

#[test]
fn linux_md_compatibility_both_directions() {
    if vm_tests_off() {
        return;
    }
    let _one = ONE_BOOT.lock().unwrap_or_else(|p| p.into_inner());
    let t_start = Instant::now();
    let mdvm = repo_root().join("tests/mdvm");
    let matrix = parse_matrix();

    // ---- the guest (kernel + initramfs) ----
    let guest_dir = match guest() {
        Ok(g) => g,
        Err(why) => return skip(&why),
    };
    loud(&format!(
        "md_compat: guest {guest_dir} (built/checked in {:.1?})",
        t_start.elapsed()
    ));

    let work = work_dir("md_compat");
    fs::create_dir_all(work.join("ctl")).unwrap();
    let mut failures: Vec<String> = Vec::new();

    // ---- the pattern area and the data disk ----
    let pat_len = matrix
        .iter()
        .map(|c| (0..c.all_devices()).map(|i| c.member_size(i)).sum::<u64>())
        .max()
        .unwrap();
    let pat_area = pat_len.div_ceil(64 * MIB) * 64 * MIB;
    let pat = pattern(pat_len);
    let data_path = work.join("data.img");
    let data = data_disk(&data_path, &pat);
    let mut slots = Slots { next: pat_area };
    // the host compares md's view of direction A itself; skip the guest's read-back
    let mut manifest = String::from("SET a_verify 0\n");

    // ---- direction A: md creates; reserve slots ----
    let mut a_slots: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for c in &matrix {
        let offs = slots.take(c);
        if let Some((scheme, _)) = c.partition() {
            // md's members are partitions of whole-disk images: the table first.
            let img = work.join(format!("table-{}.img", c.name));
            if let Err(e) = partitioned_image(&img, c.member_bytes, scheme) {
                failures.push(format!("{} A: {e}", c.name));
            }
            let bytes = fs::read(&img).unwrap_or_default();
            for off in &offs {
                data.write_all_at(&bytes, *off).unwrap();
            }
            fs::remove_file(&img).ok();
        }
        manifest.push_str(&format!(
            "A {} {} {} {} {} {} {} {}\n",
            c.name,
            c.level_word(),
            c.layout.as_deref().unwrap_or("-"),
            c.chunk_kib.map_or("-".into(), |k| k.to_string()),
            c.devices,
            c.sizes_field(),
            csv(&offs),
            if c.flags.is_empty() {
                "-".to_string()
            } else {
                c.flags.join(",")
            }
        ));
        a_slots.insert(c.name.clone(), offs);
    }

    // ---- direction B: raidlab creates and fills, members copied into slots ----
    let mut b_members: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut b_sent: Vec<String> = Vec::new();
    // name -> (array bytes, first copy-out offset, stride, degraded sets)
    let mut b_reads: BTreeMap<String, BReads> = BTreeMap::new();
    // pplcrash: name -> (array bytes, copy-out offset, member left out)
    let mut c_reads: BTreeMap<String, (u64, u64, usize)> = BTreeMap::new();
    // "B name" / "C name" -> the member images and where they went on the
    // data disk, to write again if a boot sticks in that line.
    let mut restore: BTreeMap<String, Vec<(PathBuf, u64)>> = BTreeMap::new();
    let t_b = Instant::now();
    for c in &matrix {
        let dir = work.join("b").join(&c.name);
        fs::create_dir_all(&dir).unwrap();
        let mut members: Vec<String> = (0..c.devices)
            .map(|i| c.member_name(&dir.join(format!("m{i}.img"))))
            .collect();
        if let Some((scheme, _)) = c.partition() {
            let made: Result<Vec<()>, String> = (0..c.devices)
                .map(|i| partitioned_image(&dir.join(format!("m{i}.img")), c.member_bytes, scheme))
                .collect();
            if let Err(e) = made {
                failures.push(format!("{} B: {e}", c.name));
                continue;
            }
        }
        // The journal device goes last in every raidlab command after create.
        let journal = c
            .has("journal")
            .then(|| dir.join("journal.img").to_str().unwrap().to_string());
        let level = c.level_word();
        let chunk = c.chunk_kib.map(|k| format!("{k}K"));
        let msize = format!("{}", c.member_bytes);
        if c.has("zones") {
            // Members of different sizes: made here, each its own size.
            for (i, m) in members.iter().enumerate() {
                let f = fs::File::create(m).unwrap();
                f.set_len(c.member_size(i)).unwrap();
            }
        }
        let mut args: Vec<&str> = vec![
            "create",
            "--metadata",
            c.metadata().unwrap_or("1.2"),
            "--level",
            &level,
            "--name",
            &c.name,
        ];
        if !c.has("zones") {
            args.extend(["--member-size", &msize]);
        }
        if let Some(l) = &c.layout {
            args.extend(["--layout", l]);
        }
        if let Some(k) = &chunk {
            args.extend(["--chunk", k]);
        }
        if c.has("bitmap") {
            args.extend(["--consistency-policy", "bitmap", "--bitmap-chunk", "1M"]);
        }
        if c.has("ppl") {
            args.extend(["--consistency-policy", "ppl"]);
        }
        if let Some(j) = &journal {
            args.extend(["--write-journal", j]);
        }
        args.extend(members.iter().map(String::as_str));
        let o = raidlab(&args);
        if !o.status.success() {
            failures.push(format!(
                "{} B (raidlab writes, md reads): {}",
                c.name,
                describe(&args, &o)
            ));
            continue;
        }
        drop(args);
        members.extend(journal.iter().cloned());
        // array size from `raidlab detail --json`
        let mut dargs = vec!["detail", "--json"];
        dargs.extend(members.iter().map(String::as_str));
        let o = raidlab(&dargs);
        let size = serde_json::from_slice::<serde_json::Value>(&o.stdout)
            .ok()
            .and_then(|v| v.get("array_size_bytes").and_then(|s| s.as_u64()));
        let Some(size) = size.filter(|_| o.status.success()) else {
            failures.push(format!(
                "{} B: no array_size_bytes from {}",
                c.name,
                describe(&dargs, &o)
            ));
            continue;
        };
        if size > pat_len {
            failures.push(format!(
                "{} B: raidlab array of {size} bytes is larger than members allow",
                c.name
            ));
            continue;
        }
        let input = dir.join("pattern.bin");
        let mut content = pat[..size as usize].to_vec();
        let crash_at = if c.has("journalcrash") {
            Some(journal_crash_spot(c).0)
        } else {
            c.has("pplcrash").then(|| ppl_crash_spot(c).0)
        };
        if let Some(at) = crash_at {
            // What the torn write will overwrite holds other data until then.
            for b in &mut content[at as usize..at as usize + 8192] {
                *b = !*b;
            }
        }
        fs::write(&input, &content).unwrap();
        let mut iargs: Vec<&str> = vec!["import"];
        iargs.extend(members.iter().map(String::as_str));
        let input_s = input.to_str().unwrap().to_string();
        iargs.extend(["--input", &input_s]);
        let o = raidlab(&iargs);
        fs::remove_file(&input).ok();
        if !o.status.success() {
            failures.push(format!("{} B: {}", c.name, describe(&iargs, &o)));
            continue;
        }
        if let Some(at) = crash_at {
            let region = &pat[at as usize..at as usize + 8192];
            let crashed = if c.has("writeback") {
                journal_crash_write_back(&members, at, region)
            } else if c.has("journalcrash") {
                journal_crash(&members, at, region)
            } else {
                ppl_crash(&members, at, region)
            };
            if let Err(e) = crashed {
                failures.push(format!("{} B: {e}", c.name));
                continue;
            }
            // md gets a second copy of the crashed members to start degraded
            // (guest step C): the write hole case, which only the log closes.
            let offs = slots.take(c);
            // Kept aside as md got them: the members go on below to raidlab,
            // which may replay its log into them.
            let mut kept = Vec::new();
            for (i, (m, off)) in members.iter().zip(&offs).enumerate() {
                let bytes = fs::read(m).unwrap();
                data.write_all_at(&bytes, *off).unwrap();
                let copy = dir.join(format!("crashed{i}.img"));
                fs::write(&copy, &bytes).unwrap();
                kept.push((copy, *off));
            }
            restore.insert(format!("C {}", c.name), kept);
            let (_, missing) = if c.has("journalcrash") {
                journal_crash_spot(c)
            } else {
                ppl_crash_spot(c)
            };
            let out = slots.next;
            slots.next += size.div_ceil(MIB) * MIB;
            manifest.push_str(&format!(
                "C {} {} {} {} {} {} {}\n",
                c.name,
                c.devices,
                c.member_bytes,
                csv(&offs),
                size,
                out,
                missing
            ));
            c_reads.insert(c.name.clone(), (size, out, missing));
        }
        // `rebuilt`: member 1 fails, a new member is added into its slot and
        // rebuilt by raidlab; md then assembles the array with the new member.
        if c.has("rebuilt") {
            let fresh = dir.join("r1.img").to_str().unwrap().to_string();
            let mut fargs: Vec<&str> = vec!["fail"];
            fargs.extend(members.iter().map(String::as_str));
            fargs.extend(["--member", &members[1]]);
            let o = raidlab(&fargs);
            if !o.status.success() {
                failures.push(format!("{} B: {}", c.name, describe(&fargs, &o)));
                continue;
            }
            let live: Vec<String> = members
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != 1)
                .map(|(_, m)| m.clone())
                .collect();
            let mut aargs: Vec<&str> = vec!["add"];
            aargs.extend(live.iter().map(String::as_str));
            aargs.extend(["--new", &fresh, "--member-size", &msize]);
            let o = raidlab(&aargs);
            if !o.status.success() {
                failures.push(format!("{} B: {}", c.name, describe(&aargs, &o)));
                continue;
            }
            members[1] = fresh;
        }
        if c.has("writeback") {
            // The crash left acknowledged data in the journal only: a read of
            // the members alone must refuse rather than return older data,
            // and a start for writing (here `resync`) replays it.
            match export(&members, &dir.join("self.bin")) {
                Err(e) if e.contains("not on the members yet") => {}
                Err(e) => failures.push(format!(
                    "{} B: export of the crashed write-back array failed, but not with the refusal expected: {e}",
                    c.name
                )),
                Ok(_) => failures.push(format!(
                    "{} B: export read the members of a crashed write-back array without replaying its journal",
                    c.name
                )),
            }
            let mut rargs: Vec<&str> = vec!["resync"];
            rargs.extend(members.iter().map(String::as_str));
            let o = raidlab(&rargs);
            if !o.status.success() {
                failures.push(format!("{} B: {}", c.name, describe(&rargs, &o)));
                continue;
            }
        }
        // raidlab must at least read back its own array
        match export(&members, &dir.join("self.bin")) {
            Ok(got) if got == pat[..size as usize] => {}
            Ok(got) => failures.push(format!(
                "{} B: raidlab does not read back what it imported: {}",
                c.name,
                first_diff(&got, &pat[..size as usize])
            )),
            Err(e) => failures.push(format!("{} B: {e}", c.name)),
        }
        fs::remove_file(dir.join("self.bin")).ok();
        let offs = slots.take(c);
        for (i, (m, off)) in members.iter().zip(&offs).enumerate() {
            let bytes = fs::read(image_of(m)).unwrap();
            if bytes.len() as u64 != c.member_size(i) {
                failures.push(format!(
                    "{} B: member {m} is {} bytes, asked for {}",
                    c.name,
                    bytes.len(),
                    c.member_size(i)
                ));
            }
            data.write_all_at(&bytes, *off).unwrap();
        }
        restore.insert(
            format!("B {}", c.name),
            members
                .iter()
                .map(|m| PathBuf::from(image_of(m)))
                .zip(offs.iter().copied())
                .collect(),
        );
        // where the guest copies each of md's reads of the array
        let gsets = c.guest_degraded_sets();
        let stride = size.div_ceil(MIB) * MIB;
        let out = slots.next;
        slots.next += stride * (1 + gsets.len() as u64);
        manifest.push_str(&format!(
            "B {} {} {} {} {} {} {} {} {}\n",
            c.name,
            c.level,
            c.devices,
            c.sizes_field(),
            csv(&offs),
            size,
            out,
            sets_field(&gsets),
            if c.flags.is_empty() {
                "-".to_string()
            } else {
                c.flags.join(",")
            }
        ));
        b_reads.insert(c.name.clone(), (size, out, stride, gsets));
        b_members.insert(c.name.clone(), members);
        b_sent.push(c.name.clone());
    }
    data.set_len(slots.next).unwrap();
    data.sync_all().unwrap();
    loud(&format!(
        "md_compat: raidlab built {} of {} direction-B arrays in {:.1?}",
        b_sent.len(),
        matrix.len(),
        t_b.elapsed()
    ));

    fs::copy(mdvm.join("guest-matrix.sh"), work.join("ctl/guest.sh")).unwrap();

    // ---- the boot, and a second one if the first stuck ----
    // The guest's watchdog ends a boot whose manifest line hangs (md stuck in
    // the kernel under TCG, seen once in CI) with exit 124 and a STALL
    // result. A second boot then carries on from that line, its members
    // written afresh; the line fails for good only if it sticks again.
    // `RAIDLAB_MDVM_HANG="B NAME"` makes the first boot hang in that line on
    // purpose, to see the watchdog and the second boot work.
    let t_boot = Instant::now();
    let out_dir = work.join("vm");
    let res_dir = out_dir.join("results");
    let mut results = String::new();
    let mut pending = manifest.clone();
    for attempt in 1..=2 {
        let mut this = pending.clone();
        if attempt == 1 {
            if let Ok(name) = std::env::var("RAIDLAB_MDVM_HANG") {
                this.insert_str(0, &format!("SET stall_limit 60\nSET hang {name}\n"));
            }
        }
        fs::write(work.join("ctl/manifest"), &this).unwrap();
        let boot_dir = if attempt == 1 {
            out_dir.clone()
        } else {
            work.join(format!("vm-{attempt}"))
        };
        let t = Instant::now();
        let run = Command::new(mdvm.join("run.sh"))
            .arg(work.join("ctl"))
            .arg(&data_path)
            .arg(BOOT_TIMEOUT_S.to_string())
            .env("MDVM_GUEST", &guest_dir)
            .env("MDVM_OUT", &boot_dir)
            .output()
            .expect("run tests/mdvm/run.sh");
        let accel = fs::read_to_string(boot_dir.join("accel.txt")).unwrap_or_default();
        loud(&format!(
            "md_compat: guest run {attempt} under {} took {:.1?} (exit {})",
            accel.trim(),
            t.elapsed(),
            run.status
        ));
        match run.status.code() {
            Some(90) => {
                return skip(&format!(
                    "the Debian kernel never came up in qemu (tried KVM, then TCG):\n{}",
                    tail(&run.stderr, 30)
                ))
            }
            Some(91) | Some(92) | None => panic!(
                "the md guest booted but did not complete (exit {}); {}; work dir {}:\n{}",
                run.status,
                last_result(&boot_dir.join("console.log")),
                work.display(),
                tail(&run.stderr, 60)
            ),
            _ => {}
        }
        let got = fs::read_to_string(boot_dir.join("results/results.txt")).unwrap_or_default();
        if attempt > 1 {
            // Later boots' files join the first's; their verdicts come later
            // in results.txt and so win.
            merge_dir(&boot_dir.join("results"), &res_dir);
        }
        results.push_str(&got);
        let stalled = got.lines().find_map(|l| {
            let f: Vec<&str> = l.strip_prefix("RESULT ")?.split(' ').collect();
            (f.get(2) == Some(&"STALL")).then(|| (f[1].to_string(), f[0].to_string()))
        });
        let Some((kind, name)) = stalled.filter(|_| run.status.code() == Some(124)) else {
            break;
        };
        let stall = fs::read_to_string(boot_dir.join("results/stall.txt")).unwrap_or_default();
        loud(&format!(
            "md_compat: boot {attempt} stuck in {kind} {name}; what the guest saw:\n{}\n{}",
            stall.lines().next().unwrap_or(""),
            tail(stall.as_bytes(), 40)
        ));
        if attempt == 2 {
            break;
        }
        // The rest of the manifest, from the stuck line on; its members as
        // raidlab made them (md may have half-assembled or checked them).
        let at = pending
            .lines()
            .position(|l| l.starts_with(&format!("{kind} {name} ")))
            .expect("the stuck line is in the manifest");
        let mut rest: Vec<&str> = pending.lines().filter(|l| l.starts_with("SET ")).collect();
        rest.extend(pending.lines().skip(at).filter(|l| !l.starts_with("SET ")));
        for (src, off) in restore.get(&format!("{kind} {name}")).into_iter().flatten() {
            data.write_all_at(&fs::read(src).unwrap(), *off).unwrap();
        }
        data.sync_all().unwrap();
        pending = rest.join("\n") + "\n";
    }
    let boot_time = t_boot.elapsed();
    let mut guest: BTreeMap<(String, String), (String, String)> = BTreeMap::new();
    for l in results.lines() {
        if let Some(rest) = l.strip_prefix("RESULT ") {
            let mut f = rest.splitn(4, ' ');
            let (n, d, s, det) = (
                f.next().unwrap_or(""),
                f.next().unwrap_or(""),
                f.next().unwrap_or(""),
                f.next().unwrap_or(""),
            );
            guest.insert(
                (n.to_string(), d.to_string()),
                (s.to_string(), det.to_string()),
            );
        } else if l.starts_with("NOTE") {
            loud(&format!("md_compat: guest {l}"));
        }
    }

    // ---- direction A on the host: raidlab reads what md wrote ----
    let t_a = Instant::now();
    let mut passed_a = 0;
    for c in &matrix {
        let tag = format!("{} A (md writes, raidlab reads)", c.name);
        match guest.get(&(c.name.clone(), "A".into())) {
            None => {
                failures.push(format!("{tag}: no result from the guest"));
                continue;
            }
            Some((s, d)) if s != "PASS" => {
                failures.push(format!("{tag}: md side failed in the guest: {d}"));
                continue;
            }
            _ => {}
        }
        let adir = res_dir.join("A").join(&c.name);
        let size: u64 = match fs::read_to_string(adir.join("array_bytes"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            Some(s) => s,
            None => {
                failures.push(format!("{tag}: guest recorded no array size"));
                continue;
            }
        };
        let want = &pat[..size as usize];
        let dir = work.join("a").join(&c.name);
        fs::create_dir_all(&dir).unwrap();
        let mut members = Vec::new();
        for (i, off) in a_slots[&c.name].iter().enumerate() {
            let mut buf = vec![0u8; c.member_size(i) as usize];
            data.read_exact_at(&mut buf, *off).unwrap();
            let p = dir.join(format!("m{i}.img"));
            fs::write(&p, &buf).unwrap();
            members.push(c.member_name(&p));
        }
        let before = failures.len();
        // md wrote the version asked for, where that version keeps it.
        if let Some(v) = c.metadata() {
            let want = format!("Version : {}", if v == "0.90" { "0.90.00" } else { v });
            for i in 0..c.devices {
                let md = fs::read_to_string(adir.join(format!("examine.{i}"))).unwrap_or_default();
                if !md.contains(&want) {
                    failures.push(format!("{tag}: member {i}: mdadm --examine lacks {want:?}"));
                }
            }
        }
        // md's bitmap: raidlab parses and keeps it (a bitmap it could not read
        // would fail assembly with the reason).
        if c.has("bitmap") {
            let mut dargs = vec!["detail", "--json"];
            dargs.extend(members.iter().map(String::as_str));
            let o = raidlab(&dargs);
            let policy = serde_json::from_slice::<serde_json::Value>(&o.stdout)
                .ok()
                .and_then(|v| {
                    v.get("consistency_policy")
                        .and_then(|p| p.as_str().map(str::to_string))
                });
            if policy.as_deref() != Some("bitmap") {
                failures.push(format!(
                    "{tag}: md made an internal bitmap but raidlab reports policy {policy:?}: {}",
                    describe(&dargs, &o)
                ));
            }
        }
        // md's journal: raidlab sees the journal device and the policy.
        if c.has("journal") {
            let mut dargs = vec!["detail", "--json"];
            dargs.extend(members.iter().map(String::as_str));
            let o = raidlab(&dargs);
            let v = serde_json::from_slice::<serde_json::Value>(&o.stdout).ok();
            let policy = v
                .as_ref()
                .and_then(|v| v.get("consistency_policy"))
                .and_then(|p| p.as_str());
            let jstate = v
                .as_ref()
                .and_then(|v| v.get("members"))
                .and_then(|m| m.get(c.devices))
                .and_then(|m| m.get("state"))
                .and_then(|s| s.as_str());
            if policy != Some("journal") || jstate != Some("journal") {
                failures.push(format!(
                    "{tag}: md made a write journal but raidlab reports policy {policy:?}, journal device state {jstate:?}: {}",
                    describe(&dargs, &o)
                ));
            }
        }
        // examine
        match raidlab_examine(&members) {
            Err(e) => failures.push(format!("{tag}: {e}")),
            // (the journal device's examine is not compared field by field)
            Ok((js, texts)) => examines_match(c, &adir, &js, &texts, &tag, "", &mut failures),
        }

        // `mdfail`: md failed member 1 after writing. raidlab must see it as
        // faulty and never read it: its data area is overwritten with garbage
        // here, and the complete export below must still be the pattern.
        if c.has("mdfail") {
            let mut dargs = vec!["detail", "--json"];
            dargs.extend(members.iter().map(String::as_str));
            let o = raidlab(&dargs);
            let state = serde_json::from_slice::<serde_json::Value>(&o.stdout)
                .ok()
                .and_then(|v| {
                    v["members"]
                        .as_array()?
                        .iter()
                        .find(|m| m["device"] == members[1].as_str())
                        .map(|m| m["state"].to_string())
                });
            if state.as_deref() != Some("\"faulty\"") {
                failures.push(format!(
                    "{tag}: md failed member 1 but raidlab reports it as {state:?}: {}",
                    describe(&dargs, &o)
                ));
            }
            let half = c.member_bytes / 2;
            let f = OpenOptions::new().write(true).open(&members[1]).unwrap();
            f.write_all_at(&vec![0x5a; half as usize], half).unwrap();
        }
        // `badblocks`: md listed sectors of member 1 as bad. raidlab's examine
        // must list what mdadm's does, and those sectors are overwritten here:
        // every export below must still be the pattern.
        if c.has("badblocks") {
            for f in md_bad_blocks_honoured(&adir, &members) {
                failures.push(format!("{tag}: {f}"));
            }
        }
        // complete
        let out = dir.join("export.bin");
        match export(&members, &out) {
            Ok(got) if got == want => {}
            Ok(got) => failures.push(format!(
                "{tag}: complete export differs from what md was given: {}",
                first_diff(&got, want)
            )),
            Err(e) => failures.push(format!("{tag}: complete: {e}")),
        }
        // degraded, with `missing` in place of each left-out member (an array md
        // already degraded is read complete only)
        let sets = if c.has("mdfail") {
            Vec::new()
        } else if c.has("badblocks") {
            // Only sets without member 1's listed sectors' redundancy gone:
            // member 1 itself left out.
            c.host_degraded_sets()
                .into_iter()
                .filter(|s| s.contains(&1))
                .collect()
        } else {
            c.host_degraded_sets()
        };
        for set in sets {
            let ms: Vec<String> = members
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    if set.contains(&i) {
                        "missing".into()
                    } else {
                        m.clone()
                    }
                })
                .collect();
            match export(&ms, &out) {
                Ok(got) if got == want => {}
                Ok(got) => failures.push(format!(
                    "{tag}: members {set:?} missing: export differs: {}",
                    first_diff(&got, want)
                )),
                Err(e) => failures.push(format!("{tag}: members {set:?} missing: {e}")),
            }
        }
        // one degraded read with the member simply left out of the list
        if c.redundant() && !c.has("mdfail") && !c.has("badblocks") {
            let ms: Vec<String> = members[1..].to_vec();
            match export(&ms, &out) {
                Ok(got) if got == want => {}
                Ok(got) => failures.push(format!(
                    "{tag}: member 0 left out: export differs: {}",
                    first_diff(&got, want)
                )),
                Err(e) => failures.push(format!("{tag}: member 0 left out: {e}")),
            }
        }
        if c.has("ppl") {
            for f in md_ppl_accepted(&members) {
                failures.push(format!("{tag}: {f}"));
            }
        }
        if c.has("journal") {
            for f in md_journal_accepted(&members, want) {
                failures.push(format!("{tag}: {f}"));
            }
        }
        fs::remove_file(&out).ok();
        if failures.len() == before {
            passed_a += 1;
            fs::remove_dir_all(&dir).ok();
        }
    }
    loud(&format!(
        "md_compat: host side of direction A took {:.1?}",
        t_a.elapsed()
    ));

    // ---- direction B verdicts from the guest; mdadm's view of raidlab's superblocks ----
    let mut passed_b = 0;
    for c in &matrix {
        if !b_sent.contains(&c.name) {
            continue;
        }
        let tag = format!("{} B (raidlab writes, md reads)", c.name);
        let before = failures.len();
        match guest.get(&(c.name.clone(), "B".into())) {
            None => failures.push(format!("{tag}: no result from the guest")),
            Some((s, d)) if s != "PASS" => failures.push(format!("{tag}: md: {d}")),
            _ => {}
        }
        // every read md made of raidlab's array, complete and degraded
        let (size, out, stride, gsets) = &b_reads[&c.name];
        let want = &pat[..*size as usize];
        let mut got = vec![0u8; *size as usize];
        for k in 0..=gsets.len() {
            let what = if k == 0 {
                "complete".to_string()
            } else {
                format!("members {:?} missing", gsets[k - 1])
            };
            data.read_exact_at(&mut got, out + k as u64 * stride)
                .unwrap();
            if got != want {
                failures.push(format!(
                    "{tag}: md read the array ({what}) differently from what raidlab imported: {}",
                    first_diff(&got, want)
                ));
            }
        }
        if let Some(&(csize, cout, missing)) = c_reads.get(&c.name) {
            match guest.get(&(c.name.clone(), "C".into())) {
                None => failures.push(format!(
                    "{tag}: no result from the guest for the dirty degraded start"
                )),
                Some((s, d)) if s != "PASS" => failures.push(format!(
                    "{tag}: md starting the crashed array without member {missing}: {d}"
                )),
                _ => {
                    let mut got = vec![0u8; csize as usize];
                    data.read_exact_at(&mut got, cout).unwrap();
                    if got != pat[..csize as usize] {
                        failures.push(format!(
                            "{tag}: after raidlab's crash md started the array without member {missing} and read it wrong (the write hole: md did not replay raidlab's log or journal correctly): {}",
                            first_diff(&got, &pat[..csize as usize])
                        ));
                    }
                }
            }
        }
        let bdir = res_dir.join("B").join(&c.name);
        match raidlab_examine(&b_members[&c.name]) {
            // raidlab failing to examine its own members is a failure, not a
            // comparison to leave out.
            Err(e) => failures.push(format!("{tag}: raidlab examine of its own members: {e}")),
            Ok((js, texts)) => examines_match(
                c,
                &bdir,
                &js,
                &texts,
                &tag,
                " as mdadm --examine sees it",
                &mut failures,
            ),
        }
        if failures.len() == before {
            passed_b += 1;
        }
    }

    loud(&format!(
        "md_compat: {} of the matrix's {} configs ({}); A passed {passed_a}, B passed {passed_b}; total {:.1?} (boot+matrix {:.1?})",
        matrix.len(),
        whole_matrix().len(),
        if matrix.len() == whole_matrix().len() {
            "all"
        } else {
            "the default rows of tests/mdvm/default.txt unless RAIDLAB_MDVM_ONLY chose; RAIDLAB_MDVM_FULL=1 runs all"
        },
        t_start.elapsed(),
        boot_time
    ));
    if failures.is_empty() {
        if std::env::var_os("RAIDLAB_MDVM_KEEP").is_none() {
            fs::remove_dir_all(&work).ok();
        }
        return;
    }
    let report = failures.join("\n");
    fs::write(work.join("failures.txt"), &report).unwrap();
    panic!(
        "Linux md compatibility: {} failure(s) (work dir kept: {}; guest log: {}):\n{report}",
        failures.len(),
        work.display(),
        res_dir.join("guest.log").display(),
    );
}

/// Compare raidlab's examine of each of `c`'s members (`js`, `texts`) with
/// md's saved in `dir` (`examine.N`), pushing each difference as "TAG:
/// member N{side}: ..." onto `failures`.
fn examines_match(
    c: &Cfg,
    dir: &Path,
    js: &[serde_json::Value],
    texts: &[Vec<String>],
    tag: &str,
    side: &str,
    failures: &mut Vec<String>,
) {
    for (i, text) in texts.iter().enumerate().take(c.devices) {
        let md_text = fs::read_to_string(dir.join(format!("examine.{i}"))).unwrap_or_default();
        let Some(j) = js.get(i) else {
            failures.push(format!(
                "{tag}: raidlab examine --json gave {} objects for {} members",
                js.len(),
                c.devices
            ));
            break;
        };
        let diffs = if c.has("v0.90") {
            compare_examine_090(&md_text, j, text)
        } else {
            compare_examine(&md_text, j, text)
        };
        for b in diffs {
            failures.push(format!("{tag}: member {i}{side}: {b}"));
        }
    }
}
