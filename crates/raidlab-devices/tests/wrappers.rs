//! Every wrapper in this crate passes trim, write-zeroes, FUA writes and
//! flushes to the volume below as themselves (issue 33: `Recorded` turned trim
//! into "unsupported", the fault injector and the throttle turned write-zeroes
//! into streams of written zeros).

use raidlab_core::layer::probe::{lost_in, Probe};
use raidlab_core::Volume;
use raidlab_devices::throttle::Limits;
use raidlab_devices::{FaultVolume, Recorded, ThrottleVolume};
use std::sync::Arc;

const SIZE: u64 = 1 << 20;

fn check(what: &str, v: &dyn Volume, probe: &Probe) {
    let lost = lost_in(v, probe);
    assert!(
        lost.is_empty(),
        "{what} changes what passes through it: {lost:#?}"
    );
}

#[test]
fn recorded_passes_everything_through_and_counts_it() {
    let probe = Arc::new(Probe::new(SIZE));
    let v = Recorded::new(probe.clone());
    check("Recorded", &v, &probe);
    assert_eq!((v.flushes(), v.fua_writes(), v.discards()), (1, 1, 1));
    // write-zeroes and the FUA write are listed as writes; the trim is not.
    let listed: Vec<(u64, u64)> = v.take().iter().map(|a| (a.offset, a.len)).collect();
    assert_eq!(listed, vec![(4096, 8192), (0, 512)]);
}

#[test]
fn fault_volume_passes_everything_through_with_and_without_a_volatile_cache() {
    let probe = Arc::new(Probe::new(SIZE));
    check("FaultVolume", &FaultVolume::new(probe.clone()), &probe);
    check(
        "FaultVolume with a volatile cache",
        &FaultVolume::with_volatile_cache(probe.clone()),
        &probe,
    );
}

#[test]
fn throttle_passes_everything_through() {
    let probe = Arc::new(Probe::new(SIZE));
    let v = ThrottleVolume::new(probe.clone(), Limits::unlimited()).unwrap();
    check("ThrottleVolume", &v, &probe);
}

#[test]
fn the_probe_check_catches_a_wrapper_that_drops_trim() {
    // A wrapper written the old way (Volume by hand, trim forgotten) is caught.
    struct Forgetful(Arc<Probe>);
    impl Volume for Forgetful {
        fn name(&self) -> String {
            "forgetful".into()
        }
        fn size(&self) -> u64 {
            self.0.size()
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> raidlab_core::Result<()> {
            self.0.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> raidlab_core::Result<()> {
            self.0.write_at(buf, offset)
        }
        fn flush(&self) -> raidlab_core::Result<()> {
            self.0.flush()
        }
    }
    let probe = Arc::new(Probe::new(SIZE));
    let lost = lost_in(&Forgetful(probe.clone()), &probe);
    assert_eq!(lost.len(), 4, "{lost:#?}");
    assert!(lost[0].starts_with("discard:"), "{lost:#?}");
    assert!(lost[1].contains("[Write]"), "{lost:#?}");
}
