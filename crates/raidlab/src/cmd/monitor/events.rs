//! Which events one poll of one array gives, from what the previous poll saw
//! and what this one sees: mdadm's monitor rules (Monitor.c's check_array)
//! over raidlab's `detail` instead of /proc/mdstat. Pure: it must never do
//! I/O, so every rule is tested on plain snapshots.

/// What one poll saw of one array.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub uuid: String,
    /// md's pattern has a `_`: a role is missing, failed or still rebuilding.
    pub degraded: bool,
    /// Each member's device (absolute) and state, `detail`'s words.
    pub members: Vec<(String, String)>,
    /// A rebuild, resync, check or repair running: percent done (mdstat's figure).
    pub progress: Option<u8>,
    /// A cache in front of the array, if one is served there.
    pub cache: Option<CacheSnapshot>,
    /// A server answered. When false the array was read from its members,
    /// where nothing runs: no progress says nothing about how a rebuild ended.
    pub served: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CacheSnapshot {
    pub device: String,
    pub dirty_blocks: u64,
    pub cache_blocks: u64,
    pub dirty_target_pct: u8,
    /// The cache device failed (`cache detail`'s state `failed`).
    pub failed: bool,
}

impl CacheSnapshot {
    fn above_target(&self) -> bool {
        // In whole blocks, so a target of 0 % fires on the first dirty block.
        self.dirty_blocks * 100 > u64::from(self.dirty_target_pct) * self.cache_blocks
    }
}

impl Snapshot {
    pub fn spares(&self) -> usize {
        self.members.iter().filter(|(_, s)| s == "spare").count()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub name: String,
    pub member: Option<String>,
}

fn ev(name: &str, member: Option<&str>) -> Event {
    Event {
        name: name.into(),
        member: member.map(str::to_string),
    }
}

/// What the monitor remembers of one watched array between polls.
#[derive(Debug, Default)]
pub struct Tracked {
    /// The last snapshot; None before the first one.
    pub last: Option<Snapshot>,
    /// mdadm's `err`: the array could not be seen at the last poll (or, for
    /// an array found by scanning, has not been seen yet), so seeing it again
    /// is a NewArray and its DeviceDisappeared is said once.
    pub gone: bool,
    /// SparesMissing below this many spares.
    pub spares: Option<usize>,
}

fn in_sync(state: &str) -> bool {
    state == "active"
}

impl Tracked {
    /// The events of this poll; `now` is None when the array cannot be seen.
    pub fn poll(&mut self, now: Option<Snapshot>, increment: u8) -> Vec<Event> {
        let mut out = Vec::new();
        let Some(now) = now else {
            if !self.gone {
                out.push(ev("DeviceDisappeared", None));
            }
            self.gone = true;
            return out;
        };
        let new_array = std::mem::take(&mut self.gone);
        if new_array {
            out.push(ev("NewArray", None));
        }
        let prev = self.last.take();
        let first = prev.is_none();
        // mdadm says DegradedArray when it first sees an array degraded;
        // raidlab also says it when a watched array becomes degraded, which
        // is when an administrator most needs it.
        if now.degraded && (first || new_array || prev.as_ref().is_some_and(|p| !p.degraded)) {
            out.push(ev("DegradedArray", None));
        }
        if first {
            if let Some(want) = self.spares.filter(|&w| w > 0) {
                if now.spares() < want {
                    out.push(ev("SparesMissing", None));
                }
            }
        }
        // Failures first, then the rebuild they started, then the spare that
        // rebuild made active: the order in which they happened, whatever
        // fell between the same two polls.
        let mut activated = Vec::new();
        if let (Some(p), false) = (&prev, new_array) {
            let was = |dev: &str| {
                p.members
                    .iter()
                    .find(|(d, _)| d == dev)
                    .map(|(_, s)| s.as_str())
            };
            for (dev, state) in &p.members {
                // Gone from the list altogether: for an active one, a failure.
                if in_sync(state) && !now.members.iter().any(|(d, _)| d == dev) {
                    out.push(ev("Fail", Some(dev)));
                }
            }
            for (dev, state) in &now.members {
                let before = was(dev);
                if before.is_some_and(in_sync) && !in_sync(state) {
                    out.push(ev("Fail", Some(dev)));
                } else if state == "faulty" && before.is_some_and(|b| b != "faulty") {
                    out.push(ev("FailSpare", Some(dev)));
                } else if in_sync(state) && !before.is_some_and(in_sync) {
                    activated.push(ev("SpareActive", Some(dev)));
                }
            }
        }
        if let Some(p) = &prev {
            let inc = increment.max(1);
            match (p.progress, now.progress) {
                (None, Some(_)) => out.push(ev("RebuildStarted", None)),
                (Some(a), Some(b)) if b / inc > a / inc => {
                    out.push(ev(&format!("Rebuild{:02}", (b / inc) * inc), None))
                }
                // A server that stopped mid-rebuild leaves the array to be
                // read from its members, with no progress: finished only if
                // it is whole.
                (Some(_), None) if now.served || !now.degraded => {
                    out.push(ev("RebuildFinished", None))
                }
                _ => {}
            }
        }
        out.append(&mut activated);
        let cache_above = |s: &Snapshot| s.cache.as_ref().is_some_and(CacheSnapshot::above_target);
        if cache_above(&now) && !prev.as_ref().is_some_and(cache_above) {
            let dev = now.cache.as_ref().map(|c| c.device.as_str());
            out.push(ev("CacheDirtyAboveTarget", dev));
        }
        // Said once, at first sight too (as DegradedArray is): a failed cache
        // device stays failed until the server is restarted without it.
        let cache_failed = |s: &Snapshot| s.cache.as_ref().is_some_and(|c| c.failed);
        if cache_failed(&now) && !prev.as_ref().is_some_and(cache_failed) {
            let dev = now.cache.as_ref().map(|c| c.device.as_str());
            out.push(ev("CacheDeviceFailed", dev));
        }
        self.last = Some(now);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(members: &[(&str, &str)], progress: Option<u8>) -> Snapshot {
        let members: Vec<(String, String)> = members
            .iter()
            .map(|(d, s)| (d.to_string(), s.to_string()))
            .collect();
        let active = members.iter().filter(|(_, s)| s == "active").count();
        Snapshot {
            uuid: "u".into(),
            degraded: active < 3,
            members,
            progress,
            cache: None,
            served: true,
        }
    }

    fn names(e: &[Event]) -> Vec<String> {
        e.iter()
            .map(|e| match &e.member {
                Some(m) => format!("{} {m}", e.name),
                None => e.name.clone(),
            })
            .collect()
    }

    const OK: [(&str, &str); 4] = [
        ("a", "active"),
        ("b", "active"),
        ("c", "active"),
        ("s", "spare"),
    ];

    #[test]
    fn a_failure_taken_over_by_a_spare_reads_as_mdadm_reports_it() {
        let mut t = Tracked::default();
        assert!(t.poll(Some(snap(&OK, None)), 20).is_empty());
        let failed = [
            ("a", "faulty"),
            ("b", "active"),
            ("c", "active"),
            ("s", "rebuilding"),
        ];
        assert_eq!(
            names(&t.poll(Some(snap(&failed, Some(3))), 20)),
            ["DegradedArray", "Fail a", "RebuildStarted"]
        );
        assert!(t.poll(Some(snap(&failed, Some(19))), 20).is_empty());
        assert_eq!(
            names(&t.poll(Some(snap(&failed, Some(45))), 20)),
            ["Rebuild40"]
        );
        let done = [
            ("a", "faulty"),
            ("b", "active"),
            ("c", "active"),
            ("s", "active"),
        ];
        assert_eq!(
            names(&t.poll(Some(snap(&done, None)), 20)),
            ["RebuildFinished", "SpareActive s"]
        );
    }

    #[test]
    fn a_server_stopped_mid_rebuild_is_not_a_finished_rebuild() {
        let rebuilding = [
            ("a", "faulty"),
            ("b", "active"),
            ("c", "active"),
            ("s", "rebuilding"),
        ];
        let mut t = Tracked::default();
        t.poll(Some(snap(&rebuilding, Some(30))), 20);
        let offline = |members: &[(&str, &str)]| Snapshot {
            served: false,
            ..snap(members, None)
        };
        let waiting = [
            ("a", "faulty"),
            ("b", "active"),
            ("c", "active"),
            ("s", "spare"),
        ];
        assert!(t.poll(Some(offline(&waiting)), 20).is_empty());
        // Served again, the rebuild resumes and then ends while watched.
        assert_eq!(
            names(&t.poll(Some(snap(&rebuilding, Some(50))), 20)),
            ["RebuildStarted"]
        );
        let whole = [
            ("a", "faulty"),
            ("b", "active"),
            ("c", "active"),
            ("s", "active"),
        ];
        assert_eq!(
            names(&t.poll(Some(offline(&whole)), 20)),
            ["RebuildFinished", "SpareActive s"]
        );
    }

    #[test]
    fn first_sight_says_degraded_and_missing_spares_but_no_member_events() {
        let mut t = Tracked {
            spares: Some(1),
            ..Tracked::default()
        };
        let deg = [("a", "faulty"), ("b", "active"), ("c", "active")];
        assert_eq!(
            names(&t.poll(Some(snap(&deg, Some(50))), 20)),
            ["DegradedArray", "SparesMissing"]
        );
        // Still degraded: said once.
        assert!(t.poll(Some(snap(&deg, Some(55))), 20).is_empty());
    }

    #[test]
    fn a_spare_that_fails_is_failspare_and_a_vanished_active_member_is_fail() {
        let mut t = Tracked::default();
        t.poll(Some(snap(&OK, None)), 20);
        let later = [("b", "active"), ("c", "active"), ("s", "faulty")];
        assert_eq!(
            names(&t.poll(Some(snap(&later, None)), 20)),
            ["DegradedArray", "Fail a", "FailSpare s"]
        );
    }

    #[test]
    fn disappearing_is_said_once_and_coming_back_is_a_new_array() {
        let mut t = Tracked::default();
        t.poll(Some(snap(&OK, None)), 20);
        assert_eq!(names(&t.poll(None, 20)), ["DeviceDisappeared"]);
        assert!(t.poll(None, 20).is_empty());
        let deg = [("a", "faulty"), ("b", "active"), ("c", "active")];
        // Back (degraded meanwhile): new, so no member events from the old view.
        assert_eq!(
            names(&t.poll(Some(snap(&deg, None)), 20)),
            ["NewArray", "DegradedArray"]
        );
    }

    #[test]
    fn an_array_found_by_scanning_is_new_at_first_sight() {
        let mut t = Tracked {
            gone: true,
            ..Tracked::default()
        };
        assert_eq!(names(&t.poll(Some(snap(&OK, None)), 20)), ["NewArray"]);
    }

    #[test]
    fn dirty_cache_above_target_is_said_when_it_goes_above() {
        let mut t = Tracked::default();
        let with = |dirty| Snapshot {
            cache: Some(CacheSnapshot {
                device: "ssd".into(),
                dirty_blocks: dirty,
                cache_blocks: 1000,
                dirty_target_pct: 10,
                failed: false,
            }),
            ..snap(&OK, None)
        };
        assert!(
            t.poll(Some(with(100)), 20).is_empty(),
            "at the target is not above it"
        );
        assert_eq!(
            names(&t.poll(Some(with(101)), 20)),
            ["CacheDirtyAboveTarget ssd"]
        );
        assert!(t.poll(Some(with(500)), 20).is_empty());
        t.poll(Some(with(0)), 20);
        assert_eq!(
            names(&t.poll(Some(with(200)), 20)),
            ["CacheDirtyAboveTarget ssd"]
        );
    }

    #[test]
    fn a_failed_cache_device_is_said_once_and_at_first_sight() {
        let with = |failed| Snapshot {
            cache: Some(CacheSnapshot {
                device: "ssd".into(),
                dirty_blocks: 0,
                cache_blocks: 1000,
                dirty_target_pct: 10,
                failed,
            }),
            ..snap(&OK, None)
        };
        let mut t = Tracked::default();
        assert!(t.poll(Some(with(false)), 20).is_empty());
        assert_eq!(
            names(&t.poll(Some(with(true)), 20)),
            ["CacheDeviceFailed ssd"]
        );
        assert!(t.poll(Some(with(true)), 20).is_empty(), "said once");
        let mut first = Tracked::default();
        assert_eq!(
            names(&first.poll(Some(with(true)), 20)),
            ["CacheDeviceFailed ssd"]
        );
    }
}
