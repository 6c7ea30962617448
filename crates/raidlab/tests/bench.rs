//! `raidlab bench` verbs as a user runs them: output shapes (table, raidlab-bench/1
//! JSON), several targets side by side, refusals naming what is wrong. Runs are
//! kept short; figures are only sanity-checked (accuracy is in docs/benchmarks.md).

use assert_cmd::Command;
use predicates::prelude::*;

fn raidlab() -> Command {
    Command::cargo_bin("raidlab").unwrap()
}

const FAST: &[&str] = &["--runs", "1", "--measure", "0.05", "--interval", "0"];

#[test]
fn cdm_json_follows_the_result_schema() {
    let out = raidlab()
        .args(["bench", "cdm", "mem:8M", "--size", "4M", "--json"])
        .args(FAST)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["format"], "raidlab-bench/1");
    assert_eq!(v["suite"], "cdm");
    assert_eq!(v["targets"][0], "mem:8M");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4 * 2 * 4);
    let metrics: std::collections::BTreeSet<_> =
        rows.iter().map(|r| r["metric"].as_str().unwrap()).collect();
    assert_eq!(
        metrics.into_iter().collect::<Vec<_>>(),
        ["IOPS", "MB/s", "MB/s avg", "latency µs"]
    );
    for r in rows {
        assert_eq!(r["suite"], "cdm");
        assert!(r["value"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["higher_is_better"], r["metric"] != "latency µs");
    }
    assert_eq!(v["rows"][0]["group"], "SEQ1M Q8T1");
    assert!(v["details"]["targets"][0]["cells"][0]["runs"].is_array());
}

#[test]
fn cdm_runs_several_targets_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    raidlab()
        .args([
            "bench",
            "cdm",
            "mem:8M",
            d,
            "--size",
            "4M",
            "--profile",
            "real-world",
        ])
        .args(FAST)
        .assert()
        .success()
        .stdout(predicate::str::contains("mem:8M"))
        .stdout(predicate::str::contains("SEQ1M Q1T1     read"))
        .stdout(predicate::str::contains("RND4K Q1T1     write"));
    // The test file made in the directory is gone.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn cdm_compares_with_the_chosen_baseline_and_records_conditions() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let args = [
        "bench",
        "cdm",
        "mem:8M",
        d,
        "--size",
        "4M",
        "--profile",
        "real-world",
    ];
    let out = stdout_ok(raidlab().args(args).args(FAST).args(["--baseline", d]));
    // CrystalDiskMark's grid per target, then the comparison with the baseline.
    assert!(out.contains("mem:8M (MB/s)"), "{out}");
    assert!(
        out.contains(&format!("Compared with {d} (the baseline")),
        "{out}"
    );
    let said = out
        .lines()
        .find(|l| l.starts_with("mem:8M is "))
        .unwrap_or_else(|| panic!("no ratio in words:\n{out}"));
    assert!(said.contains(&format!("x {d} in MB/s")), "{said}");
    let json = stdout_ok(
        raidlab()
            .args(args)
            .args(FAST)
            .args(["--baseline", d, "--json"]),
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["baseline"], d);
    assert_eq!(v["conditions"][0]["target"], "mem:8M");
    assert_eq!(v["conditions"][0]["io"], "in memory");
    // O_DIRECT where the directory's file system allows it.
    let direct = v["details"]["targets"][1]["direct"].as_bool().unwrap();
    let io = if direct { "O_DIRECT" } else { "page cache" };
    assert_eq!(v["conditions"][1]["io"], io);
    assert_eq!(v["conditions"][1]["test_size"], 4 << 20);
    assert_eq!(v["conditions"][1]["runs"], 1);
    // A baseline that is not a target: refused before anything is made.
    raidlab()
        .args(args)
        .args(["--baseline", "mem:9M"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(format!(
            "--baseline mem:9M is not one of the targets (mem:8M, {d})"
        )));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn cdm_refuses_bad_input_by_name() {
    raidlab()
        .args(["bench", "cdm", "mem:8M", "--profile", "turbo"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("turbo"));
    raidlab()
        .args(["bench", "cdm", "nbd://127.0.0.1:1/x"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("cannot connect to the NBD server"));
    raidlab()
        .args(["bench", "cdm", "mem:8M", "mem:8M"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("given twice"));
    raidlab()
        .args(["bench", "cdm", "/nonexistent-dir/x/y"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("/nonexistent-dir/x/y"));
}

#[test]
fn bench_with_no_target_runs_the_seeds_and_writes_the_report() {
    let dir = tempfile::tempdir().unwrap();
    // `--seeds` (hidden) narrows the main job to one cheap seed for the test.
    raidlab()
        .args(["bench", "--seeds", "A", "--output"])
        .arg(dir.path())
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "seed A: RAID for a faster desktop",
        ))
        // Every seed runs now that the cache tier is in the simulator: none
        // is reported as not run.
        .stdout(predicate::str::contains("not run").not())
        .stdout(predicate::str::contains("findings:"))
        .stderr(predicate::str::contains("raidlab-seeds.html"));
    let html = std::fs::read_to_string(dir.path().join("raidlab-seeds.html")).unwrap();
    assert!(
        html.contains("article") && html.contains("simulated") && html.contains("fg_under_scan")
    );
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("raidlab-seeds.json")).unwrap())
            .unwrap();
    assert_eq!(v["format"], "raidlab-seeds/1");
    assert!(v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["seed"] == "A"));
}

#[test]
fn bench_files_compares_a_raid5_with_one_member_and_writes_json() {
    let dir = tempfile::tempdir().unwrap();
    raidlab()
        .args(["bench", "files", "--measure", "0.05", "--dir"])
        .arg(dir.path())
        .arg("--output")
        .arg(dir.path())
        .assert()
        .success()
        .stdout(predicate::str::contains("RAID 5, 4 members"))
        .stdout(predicate::str::contains("single member"))
        .stderr(predicate::str::contains("JSON result"))
        .stderr(predicate::str::contains("HTML report"));
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    // Only the HTML report and the JSON result remain: the member files were
    // removed.
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(files[0].extension().unwrap(), "html");
    assert_eq!(files[1].extension().unwrap(), "json");
    let html = std::fs::read_to_string(&files[0]).unwrap();
    assert!(html.contains("RAID 5, 4 members") && html.contains("SEQ1M Q8T1"));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&files[1]).unwrap()).unwrap();
    assert_eq!(
        v["targets"],
        serde_json::json!(["RAID 5, 4 members", "single member"])
    );
}

#[test]
fn job_prints_fio_json_or_the_result_schema() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("j.fio");
    std::fs::write(
        &job,
        format!(
            "[global]\nsize=1m\n[w]\nfilename={}\nrw=randwrite\niodepth=4\n[r]\nfilename=mem:2M\nrw=read\nbs=64k\n",
            dir.path().join("data").display()
        ),
    )
    .unwrap();
    let fio = raidlab()
        .args(["bench", "job", "--json", "--output-format", "fio"])
        .arg(&job)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&fio).unwrap();
    assert_eq!(v["jobs"][0]["jobname"], "w");
    assert_eq!(v["jobs"][0]["write"]["io_bytes"], 1 << 20);
    assert_eq!(v["jobs"][1]["read"]["total_ios"], 16);
    let normal = raidlab()
        .args(["bench", "job", "--json"])
        .arg(&job)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&normal).unwrap();
    assert_eq!(v["format"], "raidlab-bench/1");
    assert_eq!(v["suite"], "job");
    assert!(v["details"]["jobs"].is_array());
    raidlab()
        .args(["bench", "job"])
        .arg(&job)
        .assert()
        .success()
        .stdout(predicate::str::contains("randwrite").not())
        .stdout(predicate::str::contains("w "));
}

#[test]
fn job_refuses_an_unsupported_option_naming_file_line_and_option() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("bad.fio");
    std::fs::write(&job, "[a]\nfilename=mem:1M\nverify=md5\n").unwrap();
    raidlab()
        .args(["bench", "job"])
        .arg(&job)
        .assert()
        .failure()
        .stderr(predicate::str::contains(format!(
            "{}:3: option 'verify' is not supported",
            job.display()
        )));
}

#[test]
fn bonnie_csv_is_accepted_by_bon_csv2html() {
    let dir = tempfile::tempdir().unwrap();
    let out = raidlab()
        .args([
            "bench",
            "bonnie",
            "--size",
            "8M",
            "--files",
            "1",
            "--machine",
            "testbox",
        ])
        .arg(dir.path())
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    let csv = text
        .lines()
        .find(|l| l.starts_with("1.98,2.00a,testbox,"))
        .unwrap_or_else(|| panic!("no CSV line in:\n{text}"));
    assert_eq!(csv.split(',').count(), 50, "{csv}");
    // Nothing left behind in the directory.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let Ok(mut child) = std::process::Command::new("bon_csv2html")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
    else {
        raidlab_core::skip::skip_or_fail(
            "bon_csv2html is not installed (Debian package bonnie++; scripts/test.sh installs it)",
        );
        return;
    };
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{csv}\n").as_bytes())
        .unwrap();
    let html = child.wait_with_output().unwrap();
    assert!(html.status.success());
    let html = String::from_utf8_lossy(&html.stdout);
    assert!(html.contains("testbox"), "{html}");
    assert!(html.contains("8M"), "{html}");
}

#[test]
fn iozone_prints_the_excel_report_and_json() {
    let dir = tempfile::tempdir().unwrap();
    raidlab()
        .args([
            "bench",
            "iozone",
            "--file-sizes",
            "64K:256K",
            "--record-sizes",
            "4K:16K",
        ])
        .arg(dir.path())
        .assert()
        .success()
        .stdout(predicate::str::contains("\"Writer report\""))
        .stdout(predicate::str::contains("\"Random write report\""))
        .stdout(predicate::str::contains("\"Re-Fread report\""))
        .stdout(predicate::str::contains(
            "kB  reclen    write  rewrite     read   reread     read    write     read  rewrite     read   fwrite frewrite    fread  freread",
        ))
        .stdout(predicate::str::contains("\"256\""));
    let out = raidlab()
        .args([
            "bench",
            "iozone",
            "mem:1M",
            "--file-sizes",
            "1M",
            "--record-sizes",
            "64K",
            "--json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["suite"], "iozone");
    // IOzone -a's thirteen tests of the one cell.
    assert_eq!(v["rows"].as_array().unwrap().len(), 13);
    assert_eq!(v["rows"][0]["test"], "1M/64K");
    raidlab()
        .args([
            "bench",
            "iozone",
            "mem:1M",
            "--file-sizes",
            "4K",
            "--record-sizes",
            "8K",
        ])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "records must not be larger than files",
        ));
}

/// The column group of each target in a side-by-side table line: the text
/// between one " | " and the next (the first piece is the row's keys).
fn groups(line: &str) -> Vec<String> {
    line.split(" | ")
        .skip(1)
        .map(|g| g.trim().to_string())
        .collect()
}

/// Standard output of a command that must succeed.
fn stdout_ok(cmd: &mut Command) -> String {
    String::from_utf8(cmd.assert().success().get_output().stdout.clone()).unwrap()
}

/// The side-by-side table's first line: the key headings, then the targets.
fn table_header(text: &str) -> &str {
    text.lines()
        .find(|l| l.starts_with("test ") && l.contains(" | "))
        .unwrap_or_else(|| panic!("no table header in:\n{text}"))
}

/// The table line whose key columns start with `key` (after squeezing spaces).
fn table_row<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find(|l| {
            let k = l.split(" | ").next().unwrap_or("");
            k.split_whitespace().collect::<Vec<_>>().join(" ") == key
        })
        .unwrap_or_else(|| panic!("no row '{key}' in:\n{text}"))
}

#[test]
fn bonnie_prints_several_targets_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let text = stdout_ok(
        raidlab()
            .args(["bench", "bonnie", "--size", "8M", "--files", "1", "mem:16M"])
            .arg(dir.path()),
    );
    let d = dir.path().display().to_string();
    let header = table_header(&text);
    let names = groups(header);
    assert_eq!(names.len(), 2, "{header}");
    assert_eq!(names[0], "mem:16M");
    // A long directory name keeps its end.
    let tail: String = d
        .chars()
        .rev()
        .take(10)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    assert!(names[1].ends_with(&tail), "{header}");
    // Block tests and seeks: a figure for each target.
    for key in [
        "block write MB/s",
        "block rewrite MB/s",
        "block read MB/s",
        "seeks random seeks seeks/s",
    ] {
        let g = groups(table_row(&text, key));
        assert_eq!(g.len(), 2, "{key}: {g:?}");
        for v in &g {
            // An 8M test is over in well under 0.5 s: Bonnie++'s +++++ (too
            // short to measure), or a rate when the machine is slow.
            let first = v.split_whitespace().next().unwrap();
            if first == "+++++" {
                assert!(v.contains("+++ "), "{key}: {g:?}");
            } else {
                let rate: f64 = first.parse().unwrap();
                assert!(rate > 0.0, "{key}: {g:?}");
            }
            assert!(v.ends_with("us") || v.ends_with("ms"), "{key}: {g:?}");
        }
    }
    // File tests run only on the directory: a dash for the memory target.
    let g = groups(table_row(&text, "files sequential create files/s"));
    assert_eq!(g[0], "-", "{g:?}");
    let first = g[1].split_whitespace().next().unwrap();
    assert!(
        first == "+++++" || first.parse::<f64>().unwrap() > 0.0,
        "{g:?}"
    );
    // One CSV line per target, as before.
    let csv: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("1.98,2.00a,"))
        .collect();
    assert_eq!(csv.len(), 2, "{text}");
}

#[test]
fn iozone_prints_several_targets_side_by_side() {
    let text = stdout_ok(raidlab().args([
        "bench",
        "iozone",
        "mem:1M",
        "mem:2M",
        "--file-sizes",
        "256K:512K",
        "--record-sizes",
        "64K:128K",
    ]));
    let header = table_header(&text);
    assert_eq!(groups(header), ["mem:1M", "mem:2M"], "{header}");
    // IOzone -a's thirteen tests x two file sizes x two record sizes, each
    // with a KiB/s per target.
    for test in [
        "write",
        "rewrite",
        "read",
        "re-read",
        "random read",
        "random write",
        "bkwd read",
        "record rewrite",
        "stride read",
        "fwrite",
        "re-fwrite",
        "fread",
        "re-fread",
    ] {
        for cell in ["256K 64K", "256K 128K", "512K 64K", "512K 128K"] {
            let g = groups(table_row(&text, &format!("{test} {cell}")));
            assert_eq!(g.len(), 2, "{test} {cell}: {g:?}");
            for v in g {
                assert!(v.parse::<f64>().unwrap() > 0.0, "{test} {cell}: {v}");
            }
        }
    }
    // IOzone's -R report is still there for each target.
    assert_eq!(text.matches("\"Writer report\"").count(), 2, "{text}");
}

/// An NBD URI target: `raidlab serve` exports a RAID 5, `raidlab bench cdm`
/// measures it through raidlab's NBD client, and the data written by the
/// benchmark really went through the array (the array checks clean after).
#[test]
fn cdm_on_an_nbd_export_of_an_array() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let members: Vec<String> = (0..4)
        .map(|i| d.join(format!("m{i}")).display().to_string())
        .collect();
    raidlab()
        .args([
            "create",
            "--level",
            "5",
            "--chunk",
            "64K",
            "--member-size",
            "16M",
        ])
        .args(&members)
        .assert()
        .success();
    let sock = d.join("s.sock");
    // The server's own words, shown if anything below fails.
    let log = d.join("serve.log");
    let mut server = std::process::Command::new(assert_cmd::cargo::cargo_bin("raidlab"))
        .arg("serve")
        .args(&members)
        .args(["-N", "r5", "--socket"])
        .arg(&sock)
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let said = || std::fs::read_to_string(&log).unwrap_or_default();
    // Wait for the socket (it appears only once it listens); the deadline
    // only catches a server that never listens, never a slow start.
    let t = std::time::Instant::now();
    while !sock.exists() {
        assert!(
            server.try_wait().unwrap().is_none(),
            "raidlab serve exited before listening:\n{}",
            said()
        );
        assert!(
            t.elapsed() < std::time::Duration::from_secs(60),
            "raidlab serve did not listen within 60 s:\n{}",
            said()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let uri = format!("nbd+unix:///r5?socket={}", sock.display());
    let out = raidlab()
        .args(["bench", "cdm", &uri, "--size", "8M"])
        .args(FAST)
        .output()
        .unwrap();
    // Stop the server the way a user does (SIGTERM: drain, flush, mark clean).
    let _ = std::process::Command::new("kill")
        .arg(server.id().to_string())
        .status();
    let status = server.wait().unwrap();
    assert!(
        out.status.success(),
        "bench over NBD failed: {}\nthe server said:\n{}",
        String::from_utf8_lossy(&out.stderr),
        said()
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("NBD export of"), "{text}");
    assert!(text.contains("RND4K Q1T1     write"), "{text}");
    assert!(
        status.success(),
        "serve did not stop cleanly: {status:?}\n{}",
        said()
    );
    raidlab().arg("check").args(&members).assert().success();
}

#[test]
fn replay_runs_fio_and_blkparse_traces_fast_or_timed() {
    let dir = tempfile::tempdir().unwrap();
    let v3 = dir.path().join("v3.log");
    std::fs::write(
        &v3,
        "fio version 3 iolog\n0 /x add\n1 /x open\n2 /x write 0 4096\n3 /x read 0 4096\n250000 /x read 8192 4096\n250001 /x close\n",
    )
    .unwrap();
    let out = raidlab()
        .args(["bench", "replay"])
        .arg(&v3)
        .args(["mem:1M", "--timed", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["suite"], "replay");
    assert_eq!(v["details"]["targets"][0]["read"]["ios"], 2);
    assert_eq!(v["details"]["targets"][0]["write"]["ios"], 1);
    // The last read was recorded 250 ms in: a timed replay cannot be shorter.
    assert!(v["details"]["targets"][0]["seconds"].as_f64().unwrap() >= 0.25);
    let blk = dir.path().join("blk.txt");
    std::fs::write(
        &blk,
        "  8,0    0        1     0.000000000   10  Q   W 0 + 8 [dd]\n  8,0    0        2     0.000100000   10  Q   R 8 + 8 [dd]\n",
    )
    .unwrap();
    raidlab()
        .args(["bench", "replay"])
        .arg(&blk)
        .arg(dir.path())
        .assert()
        .success()
        .stdout(predicate::str::contains("Blkparse"))
        .stdout(predicate::str::contains("write"));
    let bad = dir.path().join("bad.log");
    std::fs::write(&bad, "fio version 2 iolog\n/x read 0 zz\n").unwrap();
    raidlab()
        .args(["bench", "replay"])
        .arg(&bad)
        .arg("mem:1M")
        .assert()
        .failure()
        .stderr(predicate::str::contains(format!(
            "{}:2: length 'zz'",
            bad.display()
        )));
}

/// Whether `tool` is on the PATH (bonnie++ is in /usr/sbin: root's PATH has it).
fn have(tool: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `bon_csv2html`'s page for these CSV lines.
fn bon_csv2html(lines: &[&str]) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("bon_csv2html")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("cannot start bon_csv2html");
    let mut input = lines.join("\n");
    input.push('\n');
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "bon_csv2html failed on:\n{input}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The per-character tests run by default (as bonnie++ without `-f`): raidlab's
/// CSV line carries putc and getc figures and their latencies, and
/// `bon_csv2html` renders them as it renders the real bonnie++'s line on the
/// same directory. `--fast` leaves them empty, as `bonnie++ -f` does.
#[test]
fn bonnie_per_char_figures_render_beside_bonnie_plus_plus() {
    if !have("bonnie++") || !have("bon_csv2html") {
        raidlab_core::skip::skip_or_fail(
            "bonnie++ or bon_csv2html is not installed (Debian package bonnie++; scripts/test.sh installs it)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A byte at a time through an 8 KiB stream is about as fast as the target
    // takes 8 KiB requests (O_DIRECT, raidlab's default), so a test this small
    // can end under Bonnie++'s 0.5 s and print +++++ (rightly). Grow the file
    // until both per-char tests are long enough to give numbers.
    let mut run = None;
    for size in ["64M", "256M", "1G"] {
        let text = stdout_ok(
            raidlab()
                .args(["bench", "bonnie", "--size", size, "--files", "0"])
                .args(["--machine", "raidlabbox"])
                .arg(dir.path()),
        );
        let line = text
            .lines()
            .find(|l| l.starts_with("1.98,2.00a,raidlabbox,"))
            .unwrap_or_else(|| panic!("no CSV line in:\n{text}"))
            .to_string();
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 50, "{line}");
        // Run by default: never the empty fields of bonnie++ -f.
        for i in [9, 10, 15, 16, 38, 41] {
            assert!(!f[i].is_empty(), "field {i} empty in {line}");
        }
        if f[9] != "+++++" && f[15] != "+++++" {
            run = Some((text, line));
            break;
        }
    }
    let (text, ours) = run.expect("the per-char tests took under 0.5 s even on a 1 GiB file");
    let f: Vec<&str> = ours.split(',').collect();
    // putc, putc_cpu, getc, getc_cpu: numbers; their latencies (fields 38
    // and 41) in Bonnie++'s units.
    for i in [9, 10, 15, 16] {
        assert!(f[i].parse::<u64>().is_ok(), "field {i} of {ours}");
    }
    assert!(f[9].parse::<u64>().unwrap() > 0, "{ours}");
    assert!(f[15].parse::<u64>().unwrap() > 0, "{ours}");
    for i in [38, 41] {
        assert!(
            f[i].ends_with("us") || f[i].ends_with("ms"),
            "field {i} of {ours}"
        );
    }
    // The table has them too, in MB/s: the CSV's K/sec x 1.024 / 1000.
    for (key, i) in [("per char write MB/s", 9), ("per char read MB/s", 15)] {
        let g = groups(table_row(&text, key));
        let mb: f64 = g[0].split_whitespace().next().unwrap().parse().unwrap();
        let kib: f64 = f[i].parse().unwrap();
        assert!(
            (mb - kib * 1.024 / 1000.0).abs() < 0.2,
            "{key}: {g:?}, {ours}"
        );
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    // The real bonnie++ on the same directory: 64 MiB, told the RAM is 32 MiB
    // so it accepts a file that small; no file tests.
    let mut cmd = std::process::Command::new("bonnie++");
    cmd.arg("-d").arg(dir.path()).args([
        "-s",
        "64M",
        "-r",
        "32",
        "-n",
        "0",
        "-m",
        "bonniebox",
        "-q",
    ]);
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        cmd.args(["-u", "root"]);
    }
    let out = cmd.output().expect("cannot start bonnie++");
    assert!(
        out.status.success(),
        "bonnie++ failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs_text = String::from_utf8_lossy(&out.stdout).into_owned();
    let theirs = theirs_text
        .lines()
        .find(|l| l.starts_with("1.98,2.00a,bonniebox,"))
        .unwrap_or_else(|| panic!("no CSV line from bonnie++:\n{theirs_text}"))
        .to_string();
    let t: Vec<&str> = theirs.split(',').collect();
    // The same layout: as many fields, per-char figures in the same places.
    assert_eq!(t.len(), f.len(), "{theirs}\n{ours}");
    assert!(t[9].parse::<u64>().is_ok(), "{theirs}");

    let html = bon_csv2html(&[&theirs, &ours]);
    // Each line is a row of the page, its putc and getc K/sec in cells of
    // their own, as bon_csv2html shows bonnie++'s.
    for (name, fields) in [("bonniebox", &t), ("raidlabbox", &f)] {
        let row_start = html
            .find(name)
            .unwrap_or_else(|| panic!("{name} not in the page:\n{html}"));
        let row = &html[row_start..];
        let row = &row[..row.find("</tr>").unwrap_or(row.len())];
        for i in [9, 15] {
            let cell = format!(">{}</td>", fields[i]);
            assert!(row.contains(&cell), "{name}: no {cell} in its row:\n{row}");
        }
    }

    // --fast skips them, as bonnie++ -f: the fields are empty.
    let text = stdout_ok(
        raidlab()
            .args([
                "bench",
                "bonnie",
                "--size",
                "8M",
                "--files",
                "0",
                "--fast",
                "--machine",
                "fastbox",
            ])
            .arg(dir.path()),
    );
    let fast = text
        .lines()
        .find(|l| l.starts_with("1.98,2.00a,fastbox,"))
        .unwrap_or_else(|| panic!("no CSV line in:\n{text}"));
    let ff: Vec<&str> = fast.split(',').collect();
    assert_eq!(ff.len(), 50, "{fast}");
    for i in [9, 10, 15, 16, 38, 41] {
        assert_eq!(ff[i], "", "field {i} of {fast}");
    }
}

/// The per-character figures are rows of the raidlab-bench/1 result, so
/// `raidlab report` shows them beside the block tests; `--fast` has none.
#[test]
fn bonnie_per_char_rows_reach_raidlab_report() {
    let d = tempfile::tempdir().unwrap();
    for (name, fast) in [("all", false), ("fast", true)] {
        let mut cmd = raidlab();
        cmd.args(["bench", "bonnie", "--size", "8M", "--files", "0", "--json"])
            .arg("mem:16M");
        if fast {
            cmd.arg("--fast");
        }
        let json = stdout_ok(&mut cmd);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let per_char: Vec<_> = v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["group"] == "per char")
            .collect();
        let result = &v["details"]["results"][0];
        if fast {
            assert!(per_char.is_empty(), "{json}");
            assert!(result["put_char"].is_null() && result["get_char"].is_null());
            continue;
        }
        // write and read, each a rate and its slowest chunk.
        assert_eq!(per_char.len(), 4, "{json}");
        assert!(result["put_char"]["rate"].as_f64().unwrap() > 0.0);
        assert!(result["get_char"]["rate"].as_f64().unwrap() > 0.0);
        let input = d.path().join(format!("{name}.json"));
        std::fs::write(&input, &json).unwrap();
        let html = d.path().join(format!("{name}.html"));
        raidlab()
            .arg("report")
            .arg(&input)
            .arg("-o")
            .arg(&html)
            .assert()
            .success();
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(page.contains("per char"), "no per-char rows in the report");
        for r in per_char {
            let value = r["value"].as_f64().unwrap().to_string();
            assert!(
                page.contains(&format!(
                    ": {value} {}</title>",
                    r["metric"].as_str().unwrap()
                )),
                "{value} not in the page"
            );
        }
    }
}
