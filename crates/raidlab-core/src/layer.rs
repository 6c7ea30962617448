//! A volume that sits on one other volume and changes only part of what passes
//! through it: a recorder, a fault injector, a throttle, counters, a gate.
//!
//! Decides one thing: whatever a wrapper does not name reaches the volume below
//! unchanged. Trim, write-zeroes, FUA writes, flushes, the sizes a volume
//! advertises and its mapped or stored views all pass through by default, so a
//! new wrapper cannot silently turn trim into "unsupported", write-zeroes into
//! a stream of written zeros, or a FUA write into a write and a flush (issue
//! 33 found three wrappers that had drifted so).
//!
//! Must never add behaviour of its own. A wrapper that must stop something from
//! passing (a fault injector hiding `mapped`, which would let readers bypass
//! its faults) overrides that method and says why there.
//!
//! Write `impl raidlab_core::Layer for X` without importing `Layer`, and inside
//! that impl ask the volume below for its name and size (`self.inner.name()`):
//! there `self.name()` could be either trait's and does not compile.

use crate::error::Result;
use crate::volume::{Mapped, StoredSink, Volume};

/// A wrapper around [`Layer::below`]. Every method defaults to the volume
/// below; a wrapper overrides only those it changes. Every `Layer` is a
/// [`Volume`].
pub trait Layer: Send + Sync {
    /// The volume this one passes requests to.
    fn below(&self) -> &dyn Volume;

    fn name(&self) -> String {
        self.below().name()
    }
    fn size(&self) -> u64 {
        self.below().size()
    }
    fn refresh_size(&self) -> Result<u64> {
        self.below().refresh_size()
    }
    fn block_size(&self) -> u32 {
        self.below().block_size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.below().read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.below().write_at(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        self.below().flush()
    }
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.below().write_at_fua(buf, offset)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        self.below().write_zeroes(offset, len)
    }
    fn preferred_io_size(&self) -> Option<u64> {
        self.below().preferred_io_size()
    }
    fn optimal_io_size(&self) -> Option<u64> {
        self.below().optimal_io_size()
    }
    fn is_writable(&self) -> bool {
        self.below().is_writable()
    }
    /// Whether a reader may be handed the bytes below without a request (a
    /// mapped view, stored ranges to splice). A wrapper that must see every
    /// read (a recorder, a fault injector, a throttle) says no, and then
    /// [`Layer::mapped`] and [`Layer::read_stored`] decline.
    fn passes_views(&self) -> bool {
        true
    }
    fn mapped(&self) -> Option<Mapped> {
        if self.passes_views() {
            self.below().mapped()
        } else {
            None
        }
    }
    fn read_stored(&self, offset: u64, len: u64, sink: &mut StoredSink<'_>) -> Result<bool> {
        if self.passes_views() {
            self.below().read_stored(offset, len, sink)
        } else {
            Ok(false)
        }
    }
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        self.below().discard(offset, len)
    }
    fn discard_zeroes(&self) -> bool {
        self.below().discard_zeroes()
    }
    /// Not the volume below's file: a request made straight to it would
    /// pass this wrapper by, so a wrapper hands one out only when it has
    /// said how it sees such requests ([`crate::RawFile::observer`]).
    fn raw_file(&self) -> Option<crate::RawFile<'_>> {
        None
    }
}

impl<L: Layer> Volume for L {
    fn name(&self) -> String {
        Layer::name(self)
    }
    fn size(&self) -> u64 {
        Layer::size(self)
    }
    fn refresh_size(&self) -> Result<u64> {
        Layer::refresh_size(self)
    }
    fn block_size(&self) -> u32 {
        Layer::block_size(self)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        Layer::read_at(self, buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        Layer::write_at(self, buf, offset)
    }
    fn flush(&self) -> Result<()> {
        Layer::flush(self)
    }
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        Layer::write_at_fua(self, buf, offset)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        Layer::write_zeroes(self, offset, len)
    }
    fn preferred_io_size(&self) -> Option<u64> {
        Layer::preferred_io_size(self)
    }
    fn optimal_io_size(&self) -> Option<u64> {
        Layer::optimal_io_size(self)
    }
    fn is_writable(&self) -> bool {
        Layer::is_writable(self)
    }
    fn mapped(&self) -> Option<Mapped> {
        Layer::mapped(self)
    }
    fn read_stored(&self, offset: u64, len: u64, sink: &mut StoredSink<'_>) -> Result<bool> {
        Layer::read_stored(self, offset, len, sink)
    }
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        Layer::discard(self, offset, len)
    }
    fn discard_zeroes(&self) -> bool {
        Layer::discard_zeroes(self)
    }
    fn raw_file(&self) -> Option<crate::RawFile<'_>> {
        Layer::raw_file(self)
    }
}

/// What a wrapper test needs: a volume below that writes down which kind of
/// request reached it, so a test can prove a wrapper passes trim,
/// write-zeroes, FUA and flush through as themselves.
pub mod probe {
    use super::*;
    use crate::error::Op;
    use std::sync::Mutex;

    /// Which method of the volume below a request arrived as.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Arrived {
        Read,
        Write,
        WriteFua,
        Flush,
        WriteZeroes,
        Discard,
    }

    /// A volume of `size` bytes that stores nothing, reads zeros and lists
    /// every request by kind.
    #[derive(Debug)]
    pub struct Probe {
        size: u64,
        seen: Mutex<Vec<Arrived>>,
    }

    impl Probe {
        pub fn new(size: u64) -> Probe {
            Probe {
                size,
                seen: Mutex::new(Vec::new()),
            }
        }

        /// The requests since the last call, in order.
        pub fn take(&self) -> Vec<Arrived> {
            std::mem::take(&mut *self.seen.lock().unwrap_or_else(|p| p.into_inner()))
        }

        fn saw(&self, a: Arrived) {
            self.seen.lock().unwrap_or_else(|p| p.into_inner()).push(a);
        }

        fn check(&self, op: Op, offset: u64, len: u64) -> Result<()> {
            crate::volume::check_range("probe", op, self.size, offset, len)
        }
    }

    impl Volume for Probe {
        fn name(&self) -> String {
            "probe".into()
        }
        fn size(&self) -> u64 {
            self.size
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
            self.check(Op::Read, offset, buf.len() as u64)?;
            self.saw(Arrived::Read);
            buf.fill(0);
            Ok(())
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
            self.check(Op::Write, offset, buf.len() as u64)?;
            self.saw(Arrived::Write);
            Ok(())
        }
        fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
            self.check(Op::Write, offset, buf.len() as u64)?;
            self.saw(Arrived::WriteFua);
            Ok(())
        }
        fn flush(&self) -> Result<()> {
            self.saw(Arrived::Flush);
            Ok(())
        }
        fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
            self.check(Op::Write, offset, len)?;
            self.saw(Arrived::WriteZeroes);
            Ok(())
        }
        fn discard(&self, offset: u64, len: u64) -> Result<()> {
            self.check(Op::Discard, offset, len)?;
            self.saw(Arrived::Discard);
            Ok(())
        }
        fn discard_zeroes(&self) -> bool {
            true
        }
    }

    /// Send one of each pass-through request through `v` (a wrapper over a
    /// [`Probe`]) and say which did not reach the probe as itself. An empty
    /// list means the wrapper passes them all.
    pub fn lost_in(v: &dyn Volume, probe: &Probe) -> Vec<String> {
        let _ = probe.take();
        let mut lost = Vec::new();
        let mut expect = |what: &str, r: Result<()>, want: Arrived| {
            let got = probe.take();
            match r {
                Err(e) => lost.push(format!("{what}: {e}")),
                Ok(()) if got != [want] => {
                    lost.push(format!("{what} arrived below as {got:?}, not [{want:?}]"))
                }
                Ok(()) => {}
            }
        };
        expect("discard", v.discard(0, 4096), Arrived::Discard);
        expect(
            "write_zeroes",
            v.write_zeroes(4096, 8192),
            Arrived::WriteZeroes,
        );
        expect(
            "write_at_fua",
            v.write_at_fua(&[1u8; 512], 0),
            Arrived::WriteFua,
        );
        expect("flush", v.flush(), Arrived::Flush);
        if !v.discard_zeroes() {
            lost.push("discard_zeroes: the probe's `true` did not pass".into());
        }
        lost
    }
}
