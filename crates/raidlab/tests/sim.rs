//! Simulated hardware from the command line, as a user meets it: the presets, what
//! a configuration is made of, simulated benchmark targets beside each other, and
//! every kind of bad configuration refused with the file, line and key.

use assert_cmd::Command;
use predicates::prelude::*;

fn raidlab() -> Command {
    Command::cargo_bin("raidlab").unwrap()
}

#[test]
fn devices_lists_every_preset_with_units_and_sources() {
    let out = raidlab()
        .args(["sim", "devices", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    for want in [
        "hitachi-7k250",
        "samsung-hd753lj",
        "mtron-mobi-32g",
        "sata-ssd-1tb-2021",
        "nvme-ssd",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for d in v["devices"].as_array().unwrap() {
        assert!(
            !d["sources"].as_array().unwrap().is_empty(),
            "{} has no sources",
            d["name"]
        );
        for p in d["params"].as_array().unwrap() {
            assert!(
                !p["unit"].as_str().unwrap().is_empty(),
                "{}: {} has no unit",
                d["name"],
                p["name"]
            );
        }
    }
    assert!(
        v["cards"]["megaraid-9361-4i"]["cache_bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    raidlab()
        .args(["sim", "devices"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("adaptec-sas-31205").and(predicate::str::contains("source:")),
        );
}

#[test]
fn show_says_capacity_failures_tolerated_and_rebuild_time() {
    let out = raidlab()
        .args([
            "sim",
            "show",
            "raid6:6xsamsung-hd753lj:chunk=256K",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["failures_tolerated"], 2);
    let member = v["model"]["parts"][0]["params"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "capacity_bytes")
        .unwrap()["value"]
        .as_f64()
        .unwrap() as u64;
    let data = (member - (1 << 20)) / (256 << 10) * (256 << 10);
    assert_eq!(
        v["capacity_bytes"].as_u64().unwrap(),
        4 * data,
        "four data members' worth"
    );
    let hours = v["rebuild_seconds"].as_f64().unwrap() / 3600.0;
    // 750 GB at 70-115 MB/s (inner to outer): between about 1.8 and 3 hours.
    assert!((1.5..3.5).contains(&hours), "rebuild {hours:.2} h");
    raidlab()
        .args(["sim", "show", "raid0:2xhitachi-7k250"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("failures tolerated: 0")
                .and(predicate::str::contains("no redundancy")),
        );
    // A 1 GiB part of each member: the engine's estimates of a whole 2 TB
    // member take minutes in a debug build, and what is asserted here does
    // not depend on the size (the capacity and hours are the first case's).
    raidlab()
        .args(["sim", "show", "raid10:4xhdd-7200:failed=1:member-size=1G"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("failures tolerated: 1")
                .and(predicate::str::contains("1 failed now"))
                .and(predicate::str::contains("live rebuild of role 1 ")),
        );
}

fn cdm_json(targets: &[&str]) -> serde_json::Value {
    let out = raidlab()
        .args([
            "bench",
            "cdm",
            "--json",
            "--runs",
            "1",
            "--measure",
            "0.5",
            "--interval",
            "0",
            "--size",
            "256M",
        ])
        .args(targets)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn simulated_targets_sit_side_by_side_marked_and_repeat_exactly() {
    let targets = [
        "sim:sata-ssd-1tb-2021",
        "sim:raid5:3xsata-ssd-1tb-2021:card=megaraid-9361-4i",
        "mem:256M",
    ];
    let a = cdm_json(&targets);
    let b = cdm_json(&targets);
    let simulated_rows = |v: &serde_json::Value| -> Vec<serde_json::Value> {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["target"].as_str().unwrap().starts_with("sim:"))
            .cloned()
            .collect()
    };
    assert!(!simulated_rows(&a).is_empty());
    assert_eq!(
        simulated_rows(&a),
        simulated_rows(&b),
        "virtual time has no noise"
    );
    let labels: Vec<&str> = a["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(labels[0].ends_with("(simulated)") && labels[1].ends_with("(simulated)"));
    assert!(
        !labels[2].contains("simulated"),
        "a real target is not marked"
    );
    let sims = a["simulated"].as_array().unwrap();
    assert_eq!(sims.len(), 2);
    assert_eq!(sims[1]["model"]["model"], "raid-card");
    assert_eq!(sims[1]["model"]["parts"][0]["model"], "raidlab array");
}

#[test]
fn bad_configurations_are_refused_with_the_place_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("six.toml");
    std::fs::write(
        &cfg,
        "device = \"samsung-hd753lj\"\n[array]\nlevel = \"raid6\"\nmembers = 6\nchunks = \"256K\"\n",
    )
    .unwrap();
    raidlab()
        .args(["sim", "show"])
        .arg(&cfg)
        .assert()
        .failure()
        .stderr(predicate::str::contains("six.toml:5").and(predicate::str::contains("`chunks`")));
    std::fs::write(
        &cfg,
        "device = \"samsung-hd753lj\"\n[array]\nlevel = \"raid6\"\nmembers = 3\n",
    )
    .unwrap();
    raidlab()
        .args(["sim", "show"])
        .arg(&cfg)
        .assert()
        .failure()
        .stderr(
            predicate::str::contains("six.toml:4")
                .and(predicate::str::contains("at least 4 members")),
        );
    // A device file of the user's with a physically impossible value.
    let disks = dir.path().join("disks.toml");
    std::fs::write(
        &disks,
        std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../raidlab-sim/presets/devices.toml"
        ))
        .unwrap()
        .replacen("average_seek_ms = 8.5", "average_seek_ms = -8.5", 1),
    )
    .unwrap();
    std::fs::write(
        &cfg,
        "presets = \"disks.toml\"\ndevice = \"hitachi-7k250\"\n",
    )
    .unwrap();
    raidlab()
        .args(["sim", "show"])
        .arg(&cfg)
        .assert()
        .failure()
        .stderr(
            predicate::str::contains("disks.toml:")
                .and(predicate::str::contains("average_seek_ms")),
        );
    for (spec, says) in [
        ("raid5:4xno-such-disk", "known presets"),
        ("raid5:4xhdd-7200:card=no-such-card", "known cards"),
        ("raid5:8xhdd-7200:card=megaraid-9361-4i", "4 ports"),
        ("raid5:4xhdd-7200:stripes=3", "unknown option `stripes`"),
        ("raid5:four-disks", "NxPRESET"),
        ("raid7:4xhdd-7200", "unknown RAID level"),
        ("raid5:4xhdd-7200:failed=4", "role 4 does not exist"),
    ] {
        raidlab()
            .args(["sim", "show", spec])
            .assert()
            .failure()
            .stderr(predicate::str::contains(says));
        raidlab()
            .args(["bench", "cdm", "--runs", "1", "--measure", "1"])
            .arg(format!("sim:{spec}"))
            .assert()
            .failure()
            .stderr(predicate::str::contains(says));
    }
}

#[test]
fn job_files_run_on_simulated_targets_one_job_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("sim.fio");
    let text =
        "[global]\nfilename=sim:raid5:4xsata-ssd-1tb-2021\nsize=1G\nruntime=1s\ntime_based\n\
                [w]\nrw=randwrite\nbs=4k\niodepth=32\n[r]\nstonewall\nrw=read\nbs=1M\niodepth=8\n";
    std::fs::write(&job, text).unwrap();
    raidlab()
        .args(["bench", "job"])
        .arg(&job)
        .assert()
        .success()
        .stdout(predicate::str::contains("(simulated)"));
    std::fs::write(
        &job,
        text.replace("iodepth=32\n", "iodepth=32\nnumjobs=2\n"),
    )
    .unwrap();
    raidlab()
        .args(["bench", "job"])
        .arg(&job)
        .assert()
        .failure()
        .stderr(predicate::str::contains("one job at a time"));
}

#[test]
fn a_trace_replays_on_simulated_hardware_in_virtual_time() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.iolog");
    let mut text = String::from("fio version 2 iolog\n/dev/x add\n/dev/x open\n");
    for i in 0..400u64 {
        let kind = if i % 3 == 0 { "write" } else { "read" };
        text.push_str(&format!(
            "/dev/x {kind} {} 4096\n",
            (i * 7919 % 65536) * 4096
        ));
    }
    std::fs::write(&trace, text).unwrap();
    let rows = || -> serde_json::Value {
        let out = raidlab()
            .args(["bench", "replay", "--qd", "4", "--json"])
            .arg(&trace)
            .arg("sim:raid6:5xhdd-7200")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["simulated"].as_array().unwrap().len(), 1);
        v["rows"].clone()
    };
    let a = rows();
    let reads = a
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["test"] == "read" && r["metric"] == "IOPS")
        .unwrap()["value"]
        .as_f64()
        .unwrap();
    // Five 7200 rpm disks serving random 4K reads at QD4: tens to a few
    // hundred per second, not the host's speed.
    assert!((50.0..2000.0).contains(&reads), "{reads} IOPS");
    assert_eq!(a, rows(), "the same trace, the same figures");
}
