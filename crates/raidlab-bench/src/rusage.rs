//! The process's resource usage from getrusage(2): CPU time, context switches
//! and page faults, for the CPU figures fio and Bonnie++ print. It only reads
//! the kernel's counters; it must never guess a figure the kernel did not give
//! (a failed call gives zeros, which the caller shows as measured nothing).

use std::time::Duration;

/// Counters since the process started, or the difference of two readings.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub user: Duration,
    pub system: Duration,
    /// Voluntary and involuntary context switches (fio's `ctx`).
    pub context_switches: u64,
    /// Page faults that needed I/O (fio's `majf`).
    pub major_faults: u64,
    /// Page faults served from memory (fio's `minf`).
    pub minor_faults: u64,
}

impl Usage {
    /// The whole process's usage so far (every thread's, to the microsecond).
    pub fn now() -> Usage {
        // SAFETY: rusage is plain old data (integers and timevals): all zeros
        // is a valid value.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage only writes the struct it is given, which lives here.
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
            return Usage::default();
        }
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.max(0) as u64)
                + Duration::from_micros(t.tv_usec.max(0) as u64)
        };
        let n = |v: libc::c_long| v.max(0) as u64;
        Usage {
            user: tv(ru.ru_utime),
            system: tv(ru.ru_stime),
            context_switches: n(ru.ru_nvcsw) + n(ru.ru_nivcsw),
            major_faults: n(ru.ru_majflt),
            minor_faults: n(ru.ru_minflt),
        }
    }

    /// What was used between `earlier` and this reading.
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
            context_switches: self
                .context_switches
                .saturating_sub(earlier.context_switches),
            major_faults: self.major_faults.saturating_sub(earlier.major_faults),
            minor_faults: self.minor_faults.saturating_sub(earlier.minor_faults),
        }
    }

    /// User plus system time, in seconds.
    pub fn cpu_seconds(&self) -> f64 {
        (self.user + self.system).as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinning_shows_as_cpu_time_and_differences_never_go_negative() {
        let a = Usage::now();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_mul(31).wrapping_add(7);
            std::hint::black_box(x);
        }
        let b = Usage::now();
        let d = b.since(&a);
        assert!(d.cpu_seconds() > 0.0, "{d:?}");
        assert_eq!(a.since(&b).cpu_seconds(), 0.0);
    }
}
