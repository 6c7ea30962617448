//! `raidlab grow --size max` of a served array whose member files were
//! enlarged (`truncate`) after the server opened them: the server asks each
//! member its size again, as md does, so the array grows into the new room
//! while served (detail says the new size, a new NBD connection reaches past
//! the old end, every byte written before reads back, parity checks after);
//! and offline, where the members are opened afresh, the same again.

mod common;

use common::verbs::{check_clean, create_imported, detail, export, ok, with, MIB};
use common::Served;
use raidlab_core::Volume;
use raidlab_nbd::client::NbdVolume;
use std::path::Path;

/// `truncate -s SIZE` of every member: sparse room after the old end.
fn enlarge(d: &Path, members: &[&str], size: u64) {
    for m in members {
        std::fs::OpenOptions::new()
            .write(true)
            .open(d.join(m))
            .unwrap()
            .set_len(size)
            .unwrap();
    }
}

fn member_data_bytes(d: &Path, members: &[&str]) -> u64 {
    detail(d, members)["member_data_bytes"].as_u64().unwrap()
}

#[test]
fn members_enlarged_while_served_are_grown_into_by_size_max() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let m = ["m0", "m1", "m2"];
    let mut want = create_imported(d, &m, "16M", &["--level", "5"]);
    let size0 = want.len() as u64;
    let member0 = member_data_bytes(d, &m);
    let srv = Served::start(d, &m);

    // A write through the server before the members grow, kept in `want`.
    let nbd = NbdVolume::connect(&srv.uri()).expect("NBD connect");
    assert_eq!(nbd.size(), size0);
    let early: Vec<u8> = (0..MIB as u32).map(|i| (i * 13 + i / 4091) as u8).collect();
    let at = size0 as usize - early.len() - 4096;
    nbd.write_at(&early, at as u64).unwrap();
    nbd.flush().unwrap();
    want[at..at + early.len()].copy_from_slice(&early);
    drop(nbd);

    // The disks grew under the running server.
    enlarge(d, &m, 32 * MIB);
    let out = ok(d, &with("grow", &m, &["--size", "max"]));
    let v = detail(d, &m);
    let size1 = v["array_size_bytes"].as_u64().unwrap();
    let member1 = v["member_data_bytes"].as_u64().unwrap();
    // Each member's 16 MiB more, less what a 64K chunk rounds away, on
    // two data members.
    assert!(
        member1 >= member0 + 16 * MIB - 64 * 1024 && member1 <= member0 + 16 * MIB,
        "member data {member0} -> {member1}: {out}\n{v}"
    );
    assert_eq!(size1, 2 * member1, "{v}");
    assert!(v["served"].is_object(), "the server answered: {v}");
    assert!(v["served"]["scrub"]["error"].is_null(), "{v}");

    // A new connection sees the new size and reaches past the old end.
    let nbd = NbdVolume::connect(&srv.uri()).expect("NBD connect");
    assert_eq!(nbd.size(), size1);
    let late: Vec<u8> = (0..2 * MIB as u32)
        .map(|i| (i * 29 + i / 4093) as u8)
        .collect();
    let from = size0 - MIB;
    nbd.write_at(&late, from).unwrap();
    nbd.flush().unwrap();
    let mut back = vec![0u8; size1 as usize];
    nbd.read_at(&mut back, 0).unwrap();
    drop(nbd);
    want.resize(size1 as usize, 0);
    want[from as usize..from as usize + late.len()].copy_from_slice(&late);
    assert!(
        back[..from as usize] == want[..from as usize],
        "the old contents read back through the server"
    );
    assert!(back[from as usize..from as usize + late.len()] == late[..]);
    srv.stop();

    let v = detail(d, &m);
    assert_eq!(v["array_size_bytes"].as_u64(), Some(size1), "{v}");
    let got = export(d, &m);
    assert_eq!(got.len() as u64, size1);
    assert!(
        got[..from as usize + late.len()] == want[..from as usize + late.len()],
        "every byte written reads back after the stop"
    );
    check_clean(d, &m);

    // Offline: members enlarged while nothing has them open are opened
    // afresh, and grown into the same way.
    enlarge(d, &m, 48 * MIB);
    ok(d, &with("grow", &m, &["--size", "max"]));
    let member2 = member_data_bytes(d, &m);
    assert!(
        member2 >= member1 + 16 * MIB - 64 * 1024,
        "{member1} -> {member2}"
    );
    let got = export(d, &m);
    assert!(got[..from as usize + late.len()] == want[..from as usize + late.len()]);
    check_clean(d, &m);
}
