//! Former members stay out both ways: a member md failed and removed is
//! not taken back by raidlab, and one raidlab removed is kept out by md
//! (guest kinds `R` and `K`, two boots).

use super::*;

/// Issue 20: a member md failed and removed stays out, both ways.
///
/// * md side (boot 1, `R`): md creates a RAID 5 of 4, writes, fails and
///   removes member 1, writes everything again. On the host raidlab must call
///   member 1 removed, read the array without it, and leave it byte for byte
///   untouched through every verb (detail, export, serve read-write then a
///   clean stop, import of nothing, resync; check, repair and rebuild, which
///   refuse).
///   Boot 2 (`K`): md, given all four, must still kick member 1 and read the
///   second contents.
/// * raidlab side (boot 1, `K`): raidlab creates, fills, fails and removes
///   member 1 and writes again; md, given all four, must agree it is out.
#[test]
fn removed_member_stays_out_both_ways() {
    if vm_tests_off() {
        return;
    }
    let _one = ONE_BOOT.lock().unwrap_or_else(|p| p.into_inner());
    let guest_dir = match guest() {
        Ok(g) => g,
        Err(why) => return skip(&why),
    };
    let work = work_dir("md_removed");
    let member = 8 * MIB;
    let shift = 4 * MIB;
    let pat = pattern(32 * MIB);
    let data_path = work.join("data.img");
    let data = data_disk(&data_path, &pat);
    let mut slots = Slots { next: 32 * MIB };
    let cfg = Cfg {
        name: "r5-removed".into(),
        level: 5,
        layout: Some("left-symmetric".into()),
        chunk_kib: Some(64),
        devices: 4,
        member_bytes: member,
        flags: vec![],
    };
    let md_offs = slots.take(&cfg);
    let mut failures: Vec<String> = Vec::new();

    // raidlab's side: create, fill, fail + remove member 1, fill again.
    let dir = work.join("rl");
    fs::create_dir_all(&dir).unwrap();
    let rl: Vec<String> = (0..4)
        .map(|i| dir.join(format!("m{i}.img")).to_str().unwrap().to_string())
        .collect();
    let msize = member.to_string();
    let mut args = vec![
        "create",
        "--level",
        "5",
        "--chunk",
        "64K",
        "--member-size",
        &msize,
    ];
    args.extend(rl.iter().map(String::as_str));
    let o = raidlab(&args);
    assert!(o.status.success(), "{}", describe(&args, &o));
    let (_, v) = detail_state(&rl, &rl[1]);
    let rl_size = v["array_size_bytes"].as_u64().expect("array size");
    let import = |members: &[String], bytes: &[u8]| {
        let input = dir.join("input.bin");
        fs::write(&input, bytes).unwrap();
        let mut a = vec!["import"];
        a.extend(members.iter().map(String::as_str));
        let i = input.to_str().unwrap().to_string();
        a.extend(["--input", &i]);
        let o = raidlab(&a);
        assert!(o.status.success(), "{}", describe(&a, &o));
    };
    import(&rl, &pat[..rl_size as usize]);
    for verb in ["fail", "remove"] {
        let mut a = vec![verb];
        a.extend(rl.iter().map(String::as_str));
        a.extend(["--member", &rl[1]]);
        let o = raidlab(&a);
        assert!(o.status.success(), "{}", describe(&a, &o));
    }
    let rl_want = pat[shift as usize..(shift + rl_size) as usize].to_vec();
    import(&rl, &rl_want);
    let rl_offs = slots.take(&cfg);
    for (m, off) in rl.iter().zip(&rl_offs) {
        data.write_all_at(&fs::read(m).unwrap(), *off).unwrap();
    }
    let rl_out = slots.next;
    slots.next += rl_size.div_ceil(MIB) * MIB;
    let md_out = slots.next;
    slots.next += 32 * MIB;
    data.set_len(slots.next).unwrap();
    data.sync_all().unwrap();

    // Boot 1: md's side writes; md judges raidlab's removal.
    let manifest = format!(
        "R r5-removed 4 {member} {} {shift}\nK r5-rl-removed 4 {member} {} {rl_size} {rl_out} 1\n",
        csv(&md_offs),
        csv(&rl_offs)
    );
    let res = match boot(&guest_dir, &work, "1", &manifest, &data_path) {
        Ok(r) => r,
        Err(why) => return skip(&why),
    };
    match res.get(&("r5-rl-removed".to_string(), "K".to_string())) {
        Some((s, _)) if s == "PASS" => {
            let mut got = vec![0u8; rl_size as usize];
            data.read_exact_at(&mut got, rl_out).unwrap();
            if got != rl_want {
                failures.push(format!(
                    "raidlab removed member 1: md left it out but read the array wrong: {}",
                    first_diff(&got, &rl_want)
                ));
            }
        }
        other => failures.push(format!(
            "raidlab failed and removed member 1, md did not agree it is out: {other:?}"
        )),
    }
    let md_size = match res.get(&("r5-removed".to_string(), "R".to_string())) {
        Some((s, d)) if s == "PASS" => d
            .split_whitespace()
            .find_map(|w| w.strip_prefix("array_bytes="))
            .and_then(|n| n.parse::<u64>().ok())
            .expect("array_bytes in the R result"),
        other => panic!("md could not fail and remove a member: {other:?}"),
    };
    let want = pat[shift as usize..(shift + md_size) as usize].to_vec();

    // The host: every verb on md's members leaves member 1 alone.
    let hdir = work.join("md");
    let members = from_slots(&data, &hdir, &md_offs, member);
    let before = sha_of(&members[1]);
    let (state, v) = detail_state(&members, &members[1]);
    if state.as_deref() != Some("removed") || v["removed"][0] != members[1].as_str() {
        failures.push(format!(
            "md removed member 1; raidlab detail calls it {state:?} (removed list {})",
            v["removed"]
        ));
    }
    match export(&members, &hdir.join("export.bin")) {
        Ok(got) if got == want => {}
        Ok(got) => failures.push(format!(
            "export without md's removed member differs: {}",
            first_diff(&got, &want)
        )),
        Err(e) => failures.push(format!("export: {e}")),
    }
    fs::remove_file(hdir.join("export.bin")).ok();
    if let Err(e) = serve_then_stop(&members, &hdir) {
        failures.push(e);
    }
    let mut verbs: Vec<(Vec<&str>, bool)> = vec![
        (vec!["import", "--input", "/dev/null"], true),
        (vec!["resync"], true),
        // RAID 5 missing a member has nothing left to compare: refused.
        (vec!["check"], false),
        (vec!["repair"], false),
        (vec!["rebuild"], false),
    ];
    for (extra, should_succeed) in verbs.drain(..) {
        let mut a = vec![extra[0]];
        a.extend(members.iter().map(String::as_str));
        a.extend(&extra[1..]);
        let o = raidlab(&a);
        if o.status.success() != should_succeed {
            failures.push(format!("unexpected exit: {}", describe(&a, &o)));
        }
    }
    if sha_of(&members[1]) != before {
        failures.push("a raidlab verb wrote md's removed member".into());
    }
    match export(&members, &hdir.join("export.bin")) {
        Ok(got) if got == want => {}
        Ok(got) => failures.push(format!(
            "after serving, the array reads differently: {}",
            first_diff(&got, &want)
        )),
        Err(e) => failures.push(format!("export after serving: {e}")),
    }
    for (m, off) in members.iter().zip(&md_offs) {
        data.write_all_at(&fs::read(m).unwrap(), *off).unwrap();
    }
    data.sync_all().unwrap();

    // Boot 2: md, given all four again, still kicks member 1.
    let manifest = format!(
        "K r5-removed 4 {member} {} {md_size} {md_out} 1\n",
        csv(&md_offs)
    );
    let res = match boot(&guest_dir, &work, "2", &manifest, &data_path) {
        Ok(r) => r,
        Err(why) => return skip(&why),
    };
    match res.get(&("r5-removed".to_string(), "K".to_string())) {
        Some((s, _)) if s == "PASS" => {
            let mut got = vec![0u8; md_size as usize];
            data.read_exact_at(&mut got, md_out).unwrap();
            if got != want {
                failures.push(format!(
                    "after raidlab's verbs md left member 1 out but read wrong data: {}",
                    first_diff(&got, &want)
                ));
            }
        }
        other => failures.push(format!(
            "after raidlab's verbs md took md's removed member back in: {other:?}"
        )),
    }
    if failures.is_empty() {
        if std::env::var_os("RAIDLAB_MDVM_KEEP").is_none() {
            fs::remove_dir_all(&work).ok();
        }
        return;
    }
    panic!(
        "removed members, both ways: {} failure(s) (work dir kept: {}):\n{}",
        failures.len(),
        work.display(),
        failures.join("\n")
    );
}
