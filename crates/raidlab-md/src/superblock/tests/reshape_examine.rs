//! examine's reshape facts: the JSON `reshape` object says what the text's
//! reshape lines say, for a grow with a new data offset, a backward change
//! over the same members, a shrink and a level change, and is null without
//! a reshape.

use super::*;
use serde_json::Value;

/// `sample`'s RAID 5 member mid-way through md's grow from 3 to 4 members,
/// the data offset moving down 1024 sectors, written and read back as bytes
/// so the facts are those a device would hold.
fn grow_3_to_4() -> Superblock {
    let mut sb = sample(5, 2, 4, 1);
    sb.feature_map |= feature::RESHAPE_ACTIVE | feature::NEW_OFFSET;
    sb.delta_disks = 1;
    sb.reshape_position = 6144;
    sb.new_level = 5;
    sb.new_layout = 2;
    sb.new_chunk = 128;
    sb.new_offset = -1024;
    Superblock::parse(&sb.to_bytes()).unwrap()
}

fn line(sb: &Superblock, label: &str) -> Option<String> {
    sb.examine_lines(64 << 11)
        .into_iter()
        .find(|(l, _)| l == label)
        .map(|(_, v)| v)
}

#[test]
fn a_grow_with_a_new_offset_in_json_and_text() {
    let sb = grow_3_to_4();
    assert_eq!(line(&sb, "Reshape pos'n").as_deref(), Some("3072"));
    assert_eq!(line(&sb, "Delta Devices").as_deref(), Some("1 (3->4)"));
    let new_offset = sb.data_offset - 1024;
    assert_eq!(
        line(&sb, "New Offset"),
        Some(format!("{new_offset} sectors"))
    );
    let j = sb.examine_json(64 << 11);
    let r = &j["reshape"];
    assert_eq!(r["position_sectors"], 6144);
    assert_eq!(r["direction"], "forwards");
    assert_eq!(r["delta_devices"], 1);
    assert_eq!(r["raid_devices_before"], 3);
    assert_eq!(r["raid_devices_after"], 4);
    assert_eq!(r["new_level"], "raid5");
    assert_eq!(r["new_level_number"], 5);
    assert_eq!(r["new_layout"], "left-symmetric");
    assert_eq!(r["new_layout_number"], 2);
    assert_eq!(r["new_chunk_sectors"], 128);
    assert_eq!(r["new_chunk_kib"], 64);
    assert_eq!(r["new_data_offset_sectors"], new_offset);
}

#[test]
fn a_chunk_change_over_the_same_members_backwards() {
    let mut sb = grow_3_to_4();
    sb.delta_disks = 0;
    sb.new_chunk = 256;
    sb.new_offset = 2048;
    sb.feature_map |= feature::RESHAPE_BACKWARDS;
    let sb = Superblock::parse(&sb.to_bytes()).unwrap();
    assert_eq!(line(&sb, "Delta Devices"), None);
    assert_eq!(line(&sb, "New Chunksize").as_deref(), Some("128K"));
    let r = &sb.examine_json(64 << 11)["reshape"];
    assert_eq!(r["direction"], "backwards");
    assert_eq!(r["delta_devices"], 0);
    assert_eq!(r["raid_devices_before"], 4);
    assert_eq!(r["new_chunk_kib"], 128);
    assert_eq!(r["new_data_offset_sectors"], sb.data_offset + 2048);
}

#[test]
fn a_shrink_goes_backwards_without_the_flag() {
    let mut sb = grow_3_to_4();
    sb.raid_disks = 3;
    sb.delta_disks = -1;
    sb.feature_map &= !(feature::RESHAPE_BACKWARDS | feature::NEW_OFFSET);
    sb.new_offset = 0;
    let sb = Superblock::parse(&sb.to_bytes()).unwrap();
    assert_eq!(line(&sb, "Delta Devices").as_deref(), Some("-1 (4->3)"));
    let r = &sb.examine_json(64 << 11)["reshape"];
    assert_eq!(r["direction"], "backwards");
    assert_eq!(
        (&r["raid_devices_before"], &r["raid_devices_after"]),
        (&4.into(), &3.into())
    );
    assert_eq!(r["new_data_offset_sectors"], Value::Null);
}

#[test]
fn a_level_change_names_the_new_layout_by_the_new_level() {
    let mut sb = grow_3_to_4();
    sb.new_level = 6;
    sb.new_layout = 18;
    let sb = Superblock::parse(&sb.to_bytes()).unwrap();
    assert_eq!(line(&sb, "New Level").as_deref(), Some("raid6"));
    let r = &sb.examine_json(64 << 11)["reshape"];
    assert_eq!(r["new_level"], "raid6");
    assert_eq!(r["new_layout"], "left-symmetric-6");
    assert_eq!(r["new_layout_number"], 18);
}

#[test]
fn no_reshape_is_null() {
    let j = sample(5, 2, 4, 1).examine_json(64 << 11);
    assert_eq!(j["reshape"], Value::Null);
    assert!(j.as_object().unwrap().contains_key("reshape"));
}
