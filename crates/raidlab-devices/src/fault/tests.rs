use super::*;
use crate::MemVolume;

#[test]
fn a_tripwire_loses_power_at_the_chosen_write_on_every_member_it_holds() {
    let a = FaultVolume::with_volatile_cache(MemVolume::new(8192));
    let b = FaultVolume::with_volatile_cache(MemVolume::new(8192));
    let wire = Tripwire::new(3);
    a.set_tripwire(Some(wire.clone()));
    b.set_tripwire(Some(wire.clone()));
    a.write_at(&[1; 512], 0).unwrap();
    a.flush().unwrap();
    b.write_at(&[2; 512], 0).unwrap();
    assert!(!wire.tripped());
    // The third write is where the power goes: it and all after are lost.
    a.write_at(&[3; 512], 512).unwrap();
    assert!(wire.tripped());
    b.write_at_fua(&[4; 512], 512).unwrap();
    b.write_zeroes(0, 512).unwrap();
    b.flush().unwrap();
    let mut buf = [0u8; 1024];
    b.read_at(&mut buf, 0).unwrap();
    assert_eq!(
        (buf[0], buf[512]),
        (2, 0),
        "reads see what came before the cut"
    );
    for v in [&a, &b] {
        v.power_cut_with(PowerCutPolicy::DropAll).unwrap();
        v.restart();
    }
    a.read_at(&mut buf, 0).unwrap();
    assert_eq!(
        (buf[0], buf[512]),
        (1, 0),
        "the flushed write stays, the lost one never came"
    );
    b.read_at(&mut buf, 0).unwrap();
    assert_eq!(
        (buf[0], buf[512]),
        (0, 0),
        "b's unflushed write was dropped by the cut"
    );
    // The cut disarmed it: writes land again.
    b.write_at_fua(&[5; 512], 512).unwrap();
    b.read_at(&mut buf, 0).unwrap();
    assert_eq!(buf[512], 5);
}

#[test]
fn sector_pieces_split_at_absolute_boundaries() {
    let data = vec![1u8; 1200];
    let pieces = sector_pieces(500, &data);
    let shape: Vec<(u64, usize)> = pieces.iter().map(|(o, d)| (*o, d.len())).collect();
    assert_eq!(shape, vec![(500, 12), (512, 512), (1024, 512), (1536, 164)]);
    assert!(sector_pieces(7, &[]).is_empty());
}

#[test]
fn overlap_is_half_open_and_ignores_empty() {
    assert!(overlaps(&(10..20), 19, 1));
    assert!(!overlaps(&(10..20), 20, 5));
    assert!(!overlaps(&(10..20), 5, 5));
    assert!(overlaps(&(10..20), 5, 6));
    assert!(!overlaps(&(10..20), 12, 0));
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = 20..10;
    assert!(!overlaps(&reversed, 0, 100));
}

#[test]
fn overlapping_corrupt_ranges_flip_each_byte_once() {
    let mut buf = [0u8; 10];
    invert_overlaps(&mut buf, 100, &[102..106, 104..108, 0..101]);
    assert_eq!(buf, [0xff, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0]);
}

#[test]
fn overlay_holds_only_written_bytes() {
    let mut o = Overlay::default();
    o.record(&[9u8; 3], 510);
    let mut buf = [1u8; 8];
    o.overlay(&mut buf, 508);
    assert_eq!(buf, [1, 1, 9, 9, 9, 1, 1, 1]);
    o.record(&[7u8; 1], 511);
    o.overlay(&mut buf, 508);
    assert_eq!(buf, [1, 1, 9, 7, 9, 1, 1, 1]);
}

#[test]
fn a_misdirected_write_lands_elsewhere_once_and_a_misdirected_read_reads_elsewhere() {
    let v = FaultVolume::with_volatile_cache(MemVolume::new(8192));
    v.write_at(&[1u8; 512], 1024).unwrap();
    v.misdirect_next_write(1024..8192, 4096);
    // Outside `within`: goes where asked, the misdirection stays armed.
    v.write_at(&[2u8; 512], 0).unwrap();
    v.write_at(&[3u8; 512], 1024).unwrap();
    v.write_at(&[4u8; 512], 2048).unwrap();
    let mut b = [0u8; 512];
    for (at, want) in [(0, 2u8), (1024, 1), (5120, 3), (2048, 4)] {
        v.read_at(&mut b, at).unwrap();
        assert_eq!(b, [want; 512], "at {at}");
    }
    let m = v.misdirected();
    assert_eq!(m.len(), 1);
    assert_eq!(
        (m[0].intended.clone(), m[0].landed.clone()),
        (1024..1536, 5120..5632)
    );
    assert!(m[0].intended_differs && m[0].landed_differs);
    // Too near the end to go further on: it goes back.
    v.misdirect_next_read(1024..8192, 4096);
    v.read_at(&mut b, 5120).unwrap();
    assert_eq!(b, [1u8; 512]);
    v.read_at(&mut b, 5120).unwrap();
    assert_eq!(b, [3u8; 512], "once only");
    assert!(v.misdirected()[0].intended_differs);
}

#[test]
fn failed_drain_keeps_the_cache_for_a_retry() {
    let inner = std::sync::Arc::new(FaultVolume::new(MemVolume::new(4096)));
    let v = FaultVolume::with_volatile_cache(inner.clone());
    v.write_at(&[5u8; 512], 0).unwrap();
    v.write_at(&[6u8; 512], 1024).unwrap();
    inner.fail_writes(1024..1025);
    assert!(v.flush().is_err());
    assert_eq!(v.pending_writes(), 2);
    inner.clear_faults();
    v.flush().unwrap();
    assert_eq!(v.pending_writes(), 0);
    let mut b = [0u8; 512];
    inner.read_at(&mut b, 1024).unwrap();
    assert_eq!(b, [6u8; 512]);
}
