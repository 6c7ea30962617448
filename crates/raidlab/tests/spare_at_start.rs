//! md's start of a degraded array with a hot spare, as users meet it:
//! `raidlab serve` of a RAID 5 with a member missing and a spare puts the
//! spare into the missing role and rebuilds it while it serves, its
//! progress shown as any rebuild's; the spare then holds the role's data
//! (the array reads right with another member left out). A read-only
//! serve leaves it a spare and says why. The offline `raidlab rebuild`
//! does the same as `mdadm --assemble` would, an unclean array's spare
//! only with `--force`.

mod common;

use common::verbs::*;
use common::{ServeOptions, Served};
use std::path::Path;
use std::time::{Duration, Instant};

const ALL: [&str; 4] = ["m0", "m1", "m2", "s"];
/// m2 left out: role 2 missing, the spare beside it.
const GIVEN: [&str; 3] = ["m0", "m1", "s"];

/// The array every test here starts from: a RAID 5 of m0, m1, m2 (64K
/// chunk) and the hot spare s, of 4 MiB members. `unclean`: created over
/// members that held data (resync pending: not known to be consistent),
/// `None`; otherwise created clean and filled, `Some` of what it holds.
fn raid5_and_a_spare(d: &Path, unclean: bool) -> Option<Vec<u8>> {
    let args = ["--level", "5", "--chunk", "64K", "--spares", "1"];
    if !unclean {
        return Some(create_imported(d, &ALL, "4M", &args));
    }
    for f in ALL {
        std::fs::write(d.join(f), pattern(4 << 20, 5)).unwrap();
    }
    ok(d, &with("create", &ALL, &args));
    None
}

fn state(v: &serde_json::Value, device: &str) -> String {
    v["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["device"].as_str().is_some_and(|d| d.ends_with(device)))
        .map(|m| m["state"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("{device} not in {v}"))
}

#[test]
fn serve_rebuilds_a_missing_role_onto_a_hot_spare_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = raid5_and_a_spare(d, false).unwrap();
    let given = GIVEN;
    let before = detail(d, &given);
    assert_eq!(state(&before, "s"), "spare", "{before}");

    // Read-only: nothing written, the spare stays one, and the server says
    // why.
    let spare_file = std::fs::read(d.join("s")).unwrap();
    let ro = Served::start_with(ServeOptions {
        dir: Some(d),
        socket: d.join("ro.sock"),
        args: &["--read-only", "m0", "m1", "s"],
        wait_control: true,
    });
    let said = ro.stop();
    assert!(
        said.contains("missing beside a hot spare") && said.contains("read-only"),
        "{said}"
    );
    assert_eq!(std::fs::read(d.join("s")).unwrap(), spare_file);

    let served = Served::start(d, &given);
    let t = Instant::now();
    let rebuilt = loop {
        let v = detail(d, &given);
        let r = &v["served"]["rebuild"];
        if !r.is_null() {
            assert!(r["error"].is_null(), "the rebuild stopped: {v}");
            assert_eq!(r["kind"], "rebuild", "{v}");
            assert_eq!(r["role"], 2, "{v}");
            if r["running"] == false {
                break v;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "no rebuild onto the spare finished in 120 s: {v}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let r = &rebuilt["served"]["rebuild"];
    assert_eq!(r["done"], r["total"], "{rebuilt}");
    assert!(r["device"].as_str().unwrap().ends_with('s'), "{rebuilt}");
    let said = served.stop();
    assert!(said.contains("goes into missing role 2"), "{said}");

    let after = detail(d, &given);
    assert_eq!(state(&after, "s"), "active", "{after}");
    assert_eq!(export(d, &given), data);
    check_clean(d, &given);
    // The spare holds role 2's data: with m1 left out too, role 1 is
    // computed from m0 and it.
    assert_eq!(export(d, &["m0", "s"]), data);
}

/// `mdadm --assemble` puts a degraded array's hot spare into its missing
/// role and recovers it: the offline `raidlab rebuild` of a RAID 5 missing
/// a member, beside a spare and with no rebuild recorded, does the same,
/// says which spare went where, and the spare then holds the role's data.
#[test]
fn offline_rebuild_puts_a_hot_spare_into_the_missing_role() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = raid5_and_a_spare(d, false).unwrap();
    let given = GIVEN;
    assert_eq!(state(&detail(d, &given), "s"), "spare");

    let said = ok(d, &with("rebuild", &given, &[]));
    assert!(
        said.contains("hot spare") && said.contains("s goes into missing role 2"),
        "{said}"
    );
    assert!(said.contains("into role 2"), "{said}");

    let after = detail(d, &given);
    assert_eq!(state(&after, "s"), "active", "{after}");
    assert_eq!(export(d, &given), data);
    check_clean(d, &given);
    // The spare holds role 2's data: with m1 left out too, role 1 is
    // computed from m0 and it.
    assert_eq!(export(d, &["m0", "s"]), data);
}

/// An array not known to be consistent (created over members that held
/// data: resync pending), degraded beside a spare: `rebuild` refuses as md
/// refuses a dirty degraded array, nothing written; `--force` counts it
/// consistent as md's `--force` marks it clean, and the spare goes in.
#[test]
fn offline_rebuild_onto_a_spare_of_an_unclean_array_needs_force() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    raid5_and_a_spare(d, true);
    let given = GIVEN;
    assert_eq!(detail(d, &given)["resync_pending"], true);
    let before = files(d, &given);
    let o = run(d, &with("rebuild", &given, &[]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--force"), "{err}");
    assert_eq!(files(d, &given), before, "a refused rebuild wrote");

    let said = ok(d, &with("rebuild", &given, &["--force"]));
    assert!(said.contains("s goes into missing role 2"), "{said}");
    assert_eq!(state(&detail(d, &given), "s"), "active");
}
