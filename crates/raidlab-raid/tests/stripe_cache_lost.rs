//! Acknowledged bytes the stripe cache could not write to the members read
//! as an error until written again, also when they were lost while the write
//! that held them was still going down the rest of its range.

use raidlab_core::{Error, ErrorKind, ManualClock, Op, Result};
use raidlab_raid::stripe_cache::{Below, StripeCache, StripeCacheConfig};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

const STRIPE: u64 = 8192;

/// The members as one byte range: writes to `fail` fail. A write of the
/// whole stripe at `meddle_at` first lets the cache write out stripe 0, as
/// another writer's flush or eviction does while this write waits on a
/// member.
struct Below0 {
    bytes: Mutex<Vec<u8>>,
    fail: std::ops::Range<u64>,
    meddle_at: u64,
    cache: OnceLock<Arc<StripeCache>>,
}

impl Below for Below0 {
    fn write_direct(&self, buf: &[u8], offset: u64) -> Result<()> {
        if offset == self.meddle_at {
            if let Some(cache) = self.cache.get() {
                // Its failure is the write-out's, not this write's.
                let _ = cache.write_out_range(Some((0, STRIPE)), self);
            }
        }
        let end = offset + buf.len() as u64;
        if offset < self.fail.end && self.fail.start < end {
            return Err(Error::new(
                ErrorKind::Io,
                Op::Write,
                "injected member write error",
            ));
        }
        let mut bytes = self.bytes.lock().unwrap();
        bytes[offset as usize..end as usize].copy_from_slice(buf);
        Ok(())
    }

    fn read_direct(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let bytes = self.bytes.lock().unwrap();
        buf.copy_from_slice(&bytes[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }

    fn reads_for(&self, _: u64, _: u64) -> u64 {
        0
    }
}

/// One write holds the second half of stripe 0 and writes stripe 1 whole;
/// while stripe 1 goes down, stripe 0 is written out and fails. The write is
/// acknowledged (its own pieces went where they go), so the bytes it held
/// in stripe 0 must read as an error, not as the members' old zeros. Found
/// by the torture harness's queue depths (seed 1 run 589): the write cleared
/// the lost mark of its whole range once it ended, the mark stripe 0's
/// write-out had just made included.
#[test]
fn bytes_lost_while_their_write_goes_on_read_as_an_error() {
    let below = Below0 {
        bytes: Mutex::new(vec![0; 4 * STRIPE as usize]),
        fail: 4096..STRIPE,
        meddle_at: STRIPE,
        cache: OnceLock::new(),
    };
    let cfg = StripeCacheConfig {
        stripes: 4,
        hold: Duration::from_millis(20),
        ..StripeCacheConfig::default()
    };
    let cache = Arc::new(StripeCache::new(STRIPE, cfg, ManualClock::new()));
    let _ = below.cache.set(cache.clone());
    let data = vec![0xa5u8; (STRIPE + 4096) as usize];
    cache.write(&data, 4096, &below).unwrap();
    let mut back = vec![0u8; 4096];
    let read = cache.read(&mut back, 4096, &below);
    assert!(
        read.is_err(),
        "lost bytes read back as {:#04x}, with no error",
        back[0]
    );
    // Stripe 1 went down, and reads back.
    let mut whole = vec![0u8; STRIPE as usize];
    cache.read(&mut whole, STRIPE, &below).unwrap();
    assert!(whole.iter().all(|&b| b == 0xa5));
    // The next flush reports the loss too.
    assert!(cache.write_out_range(None, &below).is_err());
}
