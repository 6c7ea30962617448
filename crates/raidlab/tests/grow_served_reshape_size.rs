//! `--array-size` of a served array while its reshape walks, as md takes
//! it then (`array_size_store` does not wait for the reshape; `raid5_size`
//! counts the smaller geometry): a cut no larger than the old geometry
//! holds is set at once (a new client sees it, a write past it fails),
//! one larger is refused with md's E2BIG reason, and the cut stays after
//! the reshape's end (md's external size: a grow's new space waits for
//! `--array-size max`). Nothing lost, parity clean.

mod common;

use common::verbs::{check_clean, create_imported, detail, export, run, with, MIB};
use common::Served;
use raidlab_core::Volume;
use raidlab_nbd::client::NbdVolume;
use std::path::Path;
use std::time::{Duration, Instant};

/// The served reshape's status, waiting until it has walked `bytes`
/// (`done`: until it has ended).
fn wait_reshape(d: &Path, m: &[&str], bytes: u64, done: bool) -> serde_json::Value {
    let t = Instant::now();
    loop {
        let v = detail(d, m);
        if let Some(r) = v["served"].get("reshape").filter(|r| !r.is_null()) {
            assert!(r["error"].is_null(), "the reshape stopped: {v}");
            let running = r["running"] == true;
            if done && !running || !done && running && r["done"].as_u64().unwrap() >= bytes {
                return v;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the reshape did not get there in 120 s: {v}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn array_size_mid_served_grow_is_taken_as_md_takes_it_and_kept_after_the_end() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = tmp.path();
    let m = ["m0", "m1", "m2", "m3"];
    let a = create_imported(d, &m, "32M", &["--level", "5"]);
    let old = a.len() as u64;
    std::fs::File::create(d.join("m4"))
        .unwrap()
        .set_len(32 * MIB)
        .unwrap();
    let srv = Served::start(d, &m);
    let mut grow = std::process::Command::new(env!("CARGO_BIN_EXE_raidlab"))
        .current_dir(d)
        .env("RAIDLAB_RUN_DIR", d.join("run"))
        .args(with(
            "grow",
            &m,
            &["--raid-devices", "5", "--add", "m4", "--max-rate", "3M"],
        ))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_reshape(d, &m, 1, false);
    // Past what the old geometry holds (the smaller one): md's E2BIG.
    let too = format!("{}K", old / 1024 + 1024);
    let o = run(d, &with("grow", &m, &["--array-size", &too]));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && e.contains("larger than the array holds")
            && e.contains("mid-reshape"),
        "{e}"
    );
    // A cut: at once, while the walk goes on.
    let cut = 16 * MIB;
    let o = run(d, &with("grow", &m, &["--array-size", "16M"]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = detail(d, &m);
    assert!(v["served"]["reshape"]["running"] == true, "{v}");
    let nbd = NbdVolume::connect(&srv.uri()).expect("NBD connect");
    assert_eq!(nbd.size(), cut);
    assert!(nbd.write_at(&[7u8; 4096], cut).is_err());
    let page = vec![0x3cu8; 4096];
    nbd.write_at(&page, cut - 4096).unwrap();
    nbd.flush().unwrap();
    drop(nbd);
    // The end: the cut stays (md's external size), `max` gives the grown
    // array whole.
    let st = grow.wait().unwrap();
    assert!(st.success(), "grow failed");
    let five = ["m0", "m1", "m2", "m3", "m4"];
    let v = detail(d, &five);
    assert_eq!(v["raid_devices"], 5, "{v}");
    assert_eq!(
        v["served"]["array_size_cut_bytes"].as_u64(),
        Some(cut),
        "{v}"
    );
    assert_eq!(NbdVolume::connect(&srv.uri()).unwrap().size(), cut);
    let o = run(d, &with("grow", &five, &["--array-size", "max"]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let whole = NbdVolume::connect(&srv.uri()).unwrap().size();
    assert!(whole > old, "max gives the grown array: {whole}");
    srv.stop();
    check_clean(d, &five);
    let mut want = a;
    want[(cut - 4096) as usize..cut as usize].copy_from_slice(&page);
    let got = export(d, &five);
    assert!(got[..old as usize] == want[..], "data changed");
}
