//! `raidlab bench job` with a job file on several targets, as a user runs it:
//! `--baseline` chooses the target the others are compared with (refused before
//! anything is opened when it is not one of the job file's targets), each job's
//! run conditions are in the JSON, and the terminal and `raidlab report`'s page
//! compare each job with the baseline's job of the same workload, in words,
//! saying when the two did not run under the same conditions.

use assert_cmd::Command;
use std::fs;
use std::path::Path;

fn raidlab() -> Command {
    Command::cargo_bin("raidlab").unwrap()
}

/// Two targets: `a` through the page cache, `b` with O_DIRECT; both run the
/// same random-read workload, and `b` also a sequential one `a` does not.
fn job_file(dir: &Path) -> (std::path::PathBuf, String, String) {
    let a = dir.join("a.dat").display().to_string();
    let b = dir.join("b.dat").display().to_string();
    let text = format!(
        "[global]\nrw=randread\nbs=4k\niodepth=4\nsize=4M\n\n[ra]\nfilename={a}\nstonewall\n\n[rb]\nfilename={b}\ndirect=1\nstonewall\n\n[sb]\nfilename={b}\nrw=read\nbs=1M\nstonewall\n"
    );
    let f = dir.join("two.fio");
    fs::write(&f, text).unwrap();
    (f, a, b)
}

#[test]
fn unknown_baseline_is_refused_before_any_target_is_made() {
    let d = tempfile::tempdir().unwrap();
    let (f, a, b) = job_file(d.path());
    let out = raidlab()
        .args(["bench", "job"])
        .arg(&f)
        .args(["--baseline", "/nowhere"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "--baseline /nowhere is not one of the targets ({a}, {b}): give one of them exactly as typed"
        )),
        "{err}"
    );
    assert!(!Path::new(&a).exists() && !Path::new(&b).exists());
}

#[test]
fn jobs_are_compared_with_the_baseline_by_workload_with_their_conditions() {
    let d = tempfile::tempdir().unwrap();
    let (f, a, b) = job_file(d.path());
    let out = raidlab()
        .args(["bench", "job"])
        .arg(&f)
        .args(["--baseline", &b, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = d.path().join("r.json");
    fs::write(&json, &out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["baseline"], b.as_str());
    let conds = v["conditions"].as_array().unwrap();
    assert_eq!(conds.len(), 3, "one entry per job: {conds:?}");
    let cond = |job: &str| conds.iter().find(|c| c["job"] == job).unwrap();
    assert_eq!(cond("ra")["target"], a.as_str());
    assert_eq!(cond("ra")["io"], "page cache");
    assert_eq!(cond("rb")["io"], "O_DIRECT");
    assert_eq!(cond("rb")["queue_depth"], 4);
    assert_eq!(cond("rb")["test_size"], 4 << 20);
    assert_eq!(
        cond("rb")["workload"],
        "randread bs=4096 iodepth=4 numjobs=1"
    );
    assert_eq!(
        cond("sb")["workload"],
        "read bs=1048576 iodepth=4 numjobs=1"
    );
    for c in conds {
        assert!(c["engine"].as_str().is_some_and(|e| !e.is_empty()));
        assert_eq!(c["simulated"], false);
    }
    let mb = |job: &str| {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["group"] == job && r["metric"] == "MB/s")
            .and_then(|r| r["value"].as_f64())
            .unwrap()
    };
    // ra on a against rb on the baseline b: same workload, another I/O path.
    let words = format!(
        "job [ra] on {a} is {:.2}x job [rb] on the baseline {b} in MB/s, not under the same conditions (I/O path",
        mb("ra") / mb("rb")
    );

    // The page says the same, lists each job's conditions and warns.
    let html = d.path().join("r.html");
    raidlab()
        .arg("report")
        .arg(&json)
        .arg("-o")
        .arg(&html)
        .assert()
        .success();
    let page = fs::read_to_string(&html).unwrap();
    assert!(
        page.contains(&format!("<h3>Compared with {b}</h3>")),
        "{page}"
    );
    assert!(page.contains(&words), "page lacks {words:?}");
    assert!(page.contains(
        "<td>rb</td><td>randread bs=4096 iodepth=4 numjobs=1</td><td>O_DIRECT</td><td>4 MiB</td>"
    ));
    assert!(
        page.contains("The jobs of this result did not run under the same conditions (I/O path")
    );
    // The job the baseline has no counterpart for is the baseline's own (sb):
    // nothing to say; a's only job is paired.
    assert!(!page.contains("runs no job with its workload"));
    assert!(page.contains("These bars come from runs made under different conditions"));

    // Baseline a: b's sequential job has no counterpart on a, and says so.
    let out = raidlab().args(["bench", "job"]).arg(&f).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("Compared with {a} (the baseline")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "job [sb] on {b}: the baseline {a} runs no job with its workload (read bs=1048576 iodepth=4 numjobs=1)."
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("[rb] on {b}: O_DIRECT, 4M, one pass")),
        "{text}"
    );
}
