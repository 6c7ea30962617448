//! fio job files run end to end on memory and file targets, and the fio-shaped
//! JSON read back the way fio JSON consumers read it.

use raidlab_bench::fio;
use raidlab_bench::{Control, EngineKind};

#[test]
fn concurrent_jobs_clones_and_stonewall_give_fio_shaped_json() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data");
    let text = format!(
        "[global]\nbs=4k\nsize=2m\n\n[seq]\nrw=read\nfilename={f}\ndirect=1\niodepth=4\n\n[mix]\nrw=randrw\nrwmixread=75\nfilename=mem:4M\nnumjobs=2\n\n[after]\nstonewall\nrw=write\nfilename=mem:4M\nbs=64k\nzero_buffers\n",
        f = file.display()
    );
    let jobs = fio::parse("t.fio", &text).unwrap();
    let mut groups = Vec::new();
    let res = fio::run(&jobs, false, None, &Control::new(), &mut |g, js| {
        groups.push((g, js.len()))
    })
    .unwrap();
    assert_eq!(groups, [(0, 2), (1, 1)]);
    // seq, mix #0, mix #1, after.
    assert_eq!(res.len(), 4);
    let v = fio::fio_json(&res);
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 4);
    assert!(v["fio version"].as_str().unwrap().starts_with("raidlab-"));
    // The first job read the whole 2 MiB once (size without time_based).
    assert_eq!(jobs[0]["jobname"], "seq");
    assert_eq!(jobs[0]["read"]["io_bytes"], 2 << 20);
    assert_eq!(jobs[0]["read"]["total_ios"], 512);
    assert_eq!(jobs[0]["write"]["io_bytes"], 0);
    assert_eq!(jobs[1]["jobname"], "mix");
    assert_eq!(jobs[2]["jobname"], "mix");
    let (r, w) = (
        jobs[1]["read"]["total_ios"].as_u64().unwrap(),
        jobs[1]["write"]["total_ios"].as_u64().unwrap(),
    );
    assert_eq!(r + w, 512);
    assert!(r > w * 2, "75% reads: {r} reads, {w} writes");
    assert_eq!(jobs[3]["groupid"], 1);
    assert_eq!(jobs[3]["write"]["total_ios"], 32);
    // What fio JSON consumers read: bandwidth, IOPS, latency mean and percentiles.
    for j in jobs {
        for d in ["read", "write"] {
            let x = &j[d];
            if x["total_ios"].as_u64().unwrap() == 0 {
                continue;
            }
            assert!(x["bw_bytes"].as_u64().unwrap() > 0);
            assert!(x["bw"].as_u64().is_some());
            assert!(x["iops"].as_f64().unwrap() > 0.0);
            assert!(x["runtime"].as_u64().is_some());
            assert!(x["clat_ns"]["mean"].as_f64().unwrap() > 0.0);
            let p = &x["clat_ns"]["percentile"];
            let p50 = p["50.000000"].as_u64().unwrap();
            let p99 = p["99.000000"].as_u64().unwrap();
            assert!(p50 > 0 && p99 >= p50);
            assert!(x["lat_ns"]["percentile"]["99.990000"].as_u64().is_some());
        }
    }
    let rep = fio::report(&res);
    assert_eq!(rep.suite, "job");
    assert_eq!(rep.details["jobs"].as_array().unwrap().len(), 4);
    assert!(rep
        .rows
        .iter()
        .any(|r| r.group == "mix #1" && r.metric == "IOPS"));
}

#[test]
fn a_time_based_job_runs_for_its_runtime() {
    let jobs = fio::parse(
        "t.fio",
        "[r]\nfilename=mem:64K\nrw=randread\nruntime=1200ms\ntime_based\n",
    )
    .unwrap();
    let res = fio::run(&jobs, false, None, &Control::new(), &mut |_, _| {}).unwrap();
    let secs = res[0].elapsed.as_secs_f64();
    // At least its runtime; the upper bound only catches a hang, never a slow
    // machine.
    assert!((1.15..120.0).contains(&secs), "{secs}");
    // More than one pass over the 64 KiB target (16 reads): time, not size,
    // ended it.
    assert!(res[0].read.bytes > 64 << 10, "{} bytes", res[0].read.bytes);
    // fio's per-500 ms samples: two whole windows in 1.2 s, their summary
    // ordered, and what they counted no more than the run did.
    let j = fio::fio_json(&res);
    let job = &j["jobs"][0];
    let r = &job["read"];
    let n = r["bw_samples"].as_u64().unwrap();
    assert_eq!(n, (secs / 0.5) as u64, "{r}");
    assert_eq!(r["iops_samples"].as_u64().unwrap(), n);
    let f = |k: &str| r[k].as_f64().unwrap();
    assert!(
        f("bw_min") <= f("bw_mean").ceil() && f("bw_mean") <= f("bw_max"),
        "{r}"
    );
    assert!(
        f("iops_min") <= f("iops_mean").ceil() && f("iops_mean") <= f("iops_max"),
        "{r}"
    );
    assert!(f("bw_min") > 0.0 && f("bw_dev") >= 0.0, "{r}");
    let sampled_kib = f("bw_mean") * n as f64 * 0.5;
    assert!(
        sampled_kib <= (res[0].read.bytes / 1024) as f64 + 1.0,
        "{r}"
    );
    assert_eq!(f("bw_agg"), 100.0, "the only job of its group");
    // CPU from getrusage: a memory target keeps the CPU busy.
    let cpu = job["usr_cpu"].as_f64().unwrap() + job["sys_cpu"].as_f64().unwrap();
    assert!(
        cpu > 0.0 && job["ctx"].as_u64().is_some() && job["minf"].as_u64().is_some(),
        "{job}"
    );
}

#[test]
fn a_job_file_that_cannot_be_read_is_named() {
    let e = fio::parse_file(std::path::Path::new("/nonexistent/jobs.fio"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/jobs.fio"), "{e}");
}

/// Every 512-byte block of `data` (written from device offset 0) holds its own
/// offset in one of its eight cache lines.
fn stamped(data: &[u8]) -> bool {
    data.chunks_exact(512)
        .enumerate()
        .all(|(i, b)| (0..8).any(|l| b[l * 64..l * 64 + 8] == ((i * 512) as u64).to_le_bytes()))
}

/// Run the one job `options` (without a filename) on a new file in `dir` with
/// `engine`; its results and the file's bytes afterwards.
fn run_on_file(
    dir: &std::path::Path,
    engine: EngineKind,
    options: &str,
) -> (Vec<fio::CloneResult>, Vec<u8>) {
    let file = dir.join("data");
    let text = format!("[w]\nfilename={}\n{options}", file.display());
    let jobs = fio::parse("t.fio", &text).unwrap();
    let res = fio::run(&jobs, false, Some(engine), &Control::new(), &mut |_, _| {}).unwrap();
    let data = std::fs::read(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    (res, data)
}

#[test]
fn writes_are_stamped_as_fio_stamps_them_unless_told_not_to() {
    let dir = tempfile::tempdir().unwrap();
    for engine in [EngineKind::Auto, EngineKind::Threads] {
        for (opts, want_stamps) in [("", true), ("scramble_buffers=0\n", false)] {
            let job = format!("rw=write\nbs=64k\nsize=512k\niodepth=1\n{opts}");
            let (_, data) = run_on_file(dir.path(), engine, &job);
            assert_eq!(data.len(), 512 << 10);
            let chunks: Vec<&[u8]> = data.chunks(64 << 10).collect();
            let all_alike = chunks.iter().all(|c| *c == chunks[0]);
            // With one slot, unstamped writes repeat one buffer; stamped ones never do.
            assert_eq!(stamped(&data), want_stamps, "{engine:?} {opts:?}");
            assert_eq!(all_alike, !want_stamps, "{engine:?} {opts:?}");
        }
    }
}

#[test]
fn random_jobs_visit_each_block_once_unless_norandommap() {
    let dir = tempfile::tempdir().unwrap();
    for engine in [EngineKind::Auto, EngineKind::Threads] {
        for (opts, each_once) in [("", true), ("norandommap\n", false)] {
            // As many 4 KiB writes as blocks (size, not time, ends the job).
            let job = format!("rw=randwrite\nbs=4k\nsize=256k\niodepth=4\n{opts}");
            let (res, data) = run_on_file(dir.path(), engine, &job);
            assert_eq!(res[0].write.ios, 64);
            // Every block written carries its offset stamp; one never written
            // does not (independent picks leave some out and hit others twice).
            assert_eq!(stamped(&data), each_once, "{engine:?} {opts:?}");
        }
    }
}

/// fio's own consumer of its JSON, `fio_jsonplus_clat2csv` (shipped with the
/// fio package), reads raidlab's fio JSON: it indexes `read`, `write` and
/// `trim` of every job and each one's `slat_ns`, `clat_ns` and `lat_ns`, and
/// turns the latency `bins` into CSV; `--validate` checks the CSV against the
/// JSON bin by bin.
#[test]
fn fios_own_jsonplus_tool_reads_raidlabs_fio_json() {
    let tool = std::path::Path::new("/usr/bin/fio_jsonplus_clat2csv");
    if !tool.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} is missing: install fio (scripts/test.sh does)",
            tool.display()
        );
        eprintln!(
            "SKIPPED: {} is not installed (apt-get install fio)",
            tool.display()
        );
        return;
    }
    let jobs = fio::parse(
        "t.fio",
        "[global]\nbs=4k\nsize=1m\nfilename=mem:2M\n[r]\nrw=randread\n[m]\nrw=randrw\nstonewall\n",
    )
    .unwrap();
    let res = fio::run(&jobs, false, None, &Control::new(), &mut |_, _| {}).unwrap();
    let v = fio::fio_json(&res);
    for j in v["jobs"].as_array().unwrap() {
        for d in ["read", "write", "trim"] {
            for l in ["slat_ns", "clat_ns", "lat_ns"] {
                assert!(j[d][l]["N"].is_u64(), "{d}.{l} missing");
            }
        }
        assert!(j["sync"]["total_ios"].is_u64());
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    std::fs::write(&json, serde_json::to_string(&v).unwrap()).unwrap();
    let csv = dir.path().join("lat.csv");
    for extra in [&[][..], &["--validate"][..]] {
        let out = std::process::Command::new("python3")
            .arg(tool)
            .arg(&json)
            .arg(&csv)
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "fio_jsonplus_clat2csv {extra:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let said = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            said.matches(if extra.is_empty() {
                "generated"
            } else {
                "validated"
            })
            .count(),
            2,
            "{said}"
        );
    }
    // Job 0 read 256 blocks: the CSV's read clat counts add up to them.
    let text = std::fs::read_to_string(dir.path().join("lat_job0.csv")).unwrap();
    let total: u64 = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(4)?.trim().parse::<u64>().ok())
        .sum();
    assert_eq!(total, 256, "{text}");
}

#[test]
fn ramp_time_runs_first_on_the_same_target_and_counts_none_of_it() {
    // A RAID 5 whose stripe cache (64 stripes) takes a QD1 writer's first
    // 4K random writes at once, and later ones only as stripes go down: the
    // ramp fills it, so the measured second has no fill in it (as fio's
    // ramp_time leaves it out on a real array).
    let job = |ramp: &str| {
        format!(
            "[{n}]\nstonewall\nfilename=sim:raid5:4xnbdkit-hdd-seek:chunk=64K\nrw=randwrite\nbs=4k\niodepth=1\nsize=64M\nruntime=1\ntime_based\nrandseed=3\n{ramp}\n",
            n = if ramp.is_empty() { "cold" } else { "ramped" }
        )
    };
    let text = job("") + &job("ramp_time=1");
    let jobs = fio::parse("t.fio", &text).unwrap();
    assert_eq!(jobs[1].ramp, Some(std::time::Duration::from_secs(1)));
    let res = fio::run(&jobs, false, None, &Control::new(), &mut |_, _| {}).unwrap();
    let (cold, ramped) = (res[0].write.ios, res[1].write.ios);
    // Virtual time: only the measured second is reported.
    assert_eq!(res[1].elapsed, std::time::Duration::from_secs(1));
    assert!(
        ramped + 40 < cold,
        "the cold run counts the cache's fill: {cold} writes, ramped {ramped}"
    );
}
