//! Building a checked [`SimConfig`] into a device: the preset devices, the
//! array of them (with its faults, rebuild, scrub, bitmap), the card that
//! runs it or passes its disks through, the host's scheduler, the cache tier.
//!
//! Decides what each configuration is made of; it must never accept what
//! `config` did not check, nor model a device itself (the models are theirs).

use super::*;

impl SimConfig {
    /// The host's I/O scheduler (`none` unless `[host]` or the short form
    /// names one).
    pub fn scheduler(&self) -> Scheduler {
        self.host.as_ref().map_or(Scheduler::None, |h| h.scheduler)
    }

    /// A fresh device of the configuration's preset (one member's, with an array).
    pub fn member(&self, extra: &[Preset]) -> Result<Box<dyn Device>, ConfigError> {
        self.device_named(&self.device, extra, None)
    }

    /// A fresh device of preset `name` (the file's own presets first), on a
    /// card port of `port_mb_per_s` when given.
    fn device_named(
        &self,
        name: &str,
        extra: &[Preset],
        port_mb_per_s: Option<f64>,
    ) -> Result<Box<dyn Device>, ConfigError> {
        let place = self.describe();
        let preset = match extra.iter().find(|p| p.name == name) {
            Some(p) => p.clone(),
            None => presets::preset(name).map_err(|e| err(&place, e.to_string()))?,
        };
        let preset = match port_mb_per_s {
            Some(rate) => preset.on_link(rate),
            None => preset,
        };
        preset
            .build()
            .map_err(|e| err(&place, format!("`{}`: {}", e.key, e.message)))
    }

    /// Build the device this configuration describes, fresh at virtual time 0.
    pub fn build(&self, extra: &[Preset]) -> Result<Box<dyn Device>, ConfigError> {
        let dev: Box<dyn Device> = match &self.cache {
            Some(_) => Box::new(self.build_cache(extra)?),
            None => self.build_origin(extra)?.0,
        };
        // `fs=`: a file system and the era's page cache in front (crate::fs).
        crate::fs::mount(self, dev).map_err(|m| err(self.describe(), m))
    }

    /// Build the configuration's cache tier in front of the rest (an error if
    /// it has none): for callers that read the cache's statistics.
    pub fn build_cache(&self, extra: &[Preset]) -> Result<SimCache, ConfigError> {
        let place = self.describe();
        let Some(c) = &self.cache else {
            return Err(err(
                &place,
                "the configuration has no cache (`cache=PRESET`)",
            ));
        };
        let (config, bytes) = c
            .config()
            .map_err(|(k, m)| err(&place, format!("`{k}`: {m}")))?;
        let (origin, optimal) = self.build_origin(extra)?;
        let dev = self
            .scheduler()
            .attach(self.device_named(&c.device, extra, None)?);
        let most = MAX_CACHE_BLOCKS * u64::from(config.block_size);
        SimCache::new(CacheSpec {
            name: place.clone(),
            cache_bytes: Some(bytes.unwrap_or(dev.capacity().min(most))),
            cache: dev,
            origin,
            origin_optimal_io: optimal,
            config,
        })
        .map_err(|m| err(&place, m))
    }

    /// The device without the cache, and what it says its best write is.
    fn build_origin(
        &self,
        extra: &[Preset],
    ) -> Result<(Box<dyn Device>, Option<u64>), ConfigError> {
        let place = self.describe();
        let sched = self.scheduler();
        let card = match &self.card {
            Some(c) => {
                let cards = card_presets()?;
                let known = cards.keys().cloned().collect::<Vec<_>>().join(", ");
                Some((
                    cards.get(&c.preset).cloned().ok_or_else(|| {
                        err(
                            &place,
                            format!("unknown card preset `{}`; known cards: {known}", c.preset),
                        )
                    })?,
                    c.mode,
                ))
            }
            None => None,
        };
        // A card's disks are on its ports, each as fast as the slower end.
        let port = card.as_ref().map(|(p, _)| p.port_mb_per_s);
        let one = || self.device_named(&self.device, extra, port);
        // Its pass-through disks share its host link.
        let bus = HostBus::new(
            card.as_ref()
                .map_or(f64::INFINITY, |(p, _)| p.host_link_mb_per_s),
        );
        let Some(a) = &self.array else {
            let dev = one()?;
            let dev: Box<dyn Device> = match card {
                Some((p, _)) => Box::new(PassThrough::new(dev, &p, bus.clone())),
                None => dev,
            };
            return Ok((sched.attach(dev), None));
        };
        let level = Level::from_name(&a.level).map_err(|e| err(&place, e.to_string()))?;
        let layout =
            Layout::parse(level, a.layout.as_deref()).map_err(|e| err(&place, e.to_string()))?;
        let chunk = match (&a.chunk, level) {
            (_, Level::Raid1) => 0,
            (Some(c), _) => parse_size(c).map_err(|e| err(&place, format!("`chunk`: {e}")))?,
            (None, _) => 512 << 10,
        };
        // A software array's members are what the host sees, each with its
        // scheduler (md has none of its own); a card's disks are the card's.
        let attach = |dev: Box<dyn Device>| -> Box<dyn Device> {
            match &card {
                Some((p, CardMode::PassThrough)) => {
                    sched.attach(Box::new(PassThrough::new(dev, p, bus.clone())))
                }
                Some((_, CardMode::Raid)) => dev,
                None => sched.attach(dev),
            }
        };
        let schedule = a
            .fault_schedule()
            .map_err(|(k, m)| err(&place, format!("`{k}`: {m}")))?;
        let mut members: Vec<Option<Box<dyn Device>>> = Vec::with_capacity(a.members);
        for role in 0..a.members {
            let dev = attach(schedule.slowed(role, one()?));
            let gone = a.failed.contains(&role) || a.rebuild == Some(role);
            members.push((!gone).then_some(dev));
        }
        let size = |v: &Option<String>, key: &str| {
            v.as_deref()
                .map(parse_size)
                .transpose()
                .map_err(|e| err(&place, format!("`{key}`: {e}")))
        };
        let rebuild = match a.rebuild {
            Some(role) => Some(RebuildSpec {
                role,
                device: attach(one()?),
                max_rate: size(&a.rebuild_max_rate, "rebuild_max_rate")?,
                from: size(&a.rebuild_from, "rebuild_from")?.unwrap_or(0),
            }),
            None => None,
        };
        let device_bytes = members
            .iter()
            .flatten()
            .map(|m| m.capacity())
            .min()
            .ok_or_else(|| err(&place, "every member has failed"))?;
        let mut member_bytes = device_bytes.saturating_sub(DATA_OFFSET);
        if let Some(s) = &a.member_size {
            let want = parse_size(s).map_err(|e| err(&place, format!("`member_size`: {e}")))?;
            if want > member_bytes {
                return Err(err(
                    &place,
                    format!("`member_size` {want} is more than a member's {member_bytes} bytes of data area"),
                ));
            }
            member_bytes = want;
        }
        let geometry = Geometry::new(level, layout, chunk, a.members, member_bytes)
            .map_err(|e| err(&place, e.to_string()))?;
        if let Some(r) = a.rebuild {
            let mut gone = a.failed.clone();
            gone.push(r);
            gone.sort_unstable();
            gone.dedup();
            if !geometry.survives(&gone) {
                return Err(err(
                    &place,
                    format!(
                        "`rebuild`: with role(s) {:?} failed, {} of {} members has nothing to rebuild role {r} from",
                        a.failed,
                        level.name(),
                        a.members
                    ),
                ));
            }
        }
        let check = match a.check {
            true => Some(ScrubSpec {
                max_rate: size(&a.check_max_rate, "check_max_rate")?,
                from: size(&a.check_from, "check_from")?.unwrap_or(0),
                repair: a.repair,
            }),
            false => None,
        };
        let mismatches = a
            .mismatches()
            .map_err(|m| err(&place, format!("`mismatch`: {m}")))?;
        let bitmap = a
            .bitmap_chunk()
            .map_err(|m| err(&place, format!("`bitmap`: {m}")))?;
        let faults = FaultSpec {
            spare: match schedule.spare() {
                Some(_) => Some(attach(one()?)),
                None => None,
            },
            max_rate: size(&a.rebuild_max_rate, "rebuild_max_rate")?,
            schedule,
        };
        let stripe_cache = (a.stripe_cache > 0).then(|| StripeCacheConfig {
            stripes: a.stripe_cache,
            hold: Duration::from_secs_f64(a.stripe_hold_ms / 1e3),
            kept_rows: a.kept_rows,
        });
        match a.engine.as_deref() {
            None | Some("live") => {}
            Some("replay") => {
                return Err(err(
                    &place,
                    "`engine = replay`: the replay of recorded plans was removed; the engine runs live (each request a task of raidlab's engine in virtual time): leave `engine` out",
                ))
            }
            Some(e) => {
                return Err(err(
                    &place,
                    format!("`engine = {e}`: the engine runs live; leave `engine` out (or say `live`)"),
                ))
            }
        }
        // The array: raidlab's engine run live.
        let make = |spec: ArraySpec| -> Result<Box<dyn ArrayModel>, ConfigError> {
            let mut a = TaskArray::build(spec, Some(faults), bitmap).map_err(|m| err(&place, m))?;
            a.set_mismatches(&mismatches).map_err(|m| err(&place, m))?;
            if let Some(c) = check {
                a.start_scrub(c).map_err(|m| err(&place, m))?;
            }
            Ok(Box::new(a))
        };
        match card {
            Some((p, CardMode::Raid)) => {
                if bitmap.is_some() {
                    return Err(err(
                        &place,
                        "`bitmap`: md's bitmap is software RAID's; a card running the array keeps none (use `card=NAME/pass-through`)",
                    ));
                }
                if a.members > p.ports as usize {
                    return Err(err(
                        &place,
                        format!(
                            "the card has {} ports; {} members cannot be attached",
                            p.ports, a.members
                        ),
                    ));
                }
                let engine = HostCost::engine(
                    p.parity_mb_per_s,
                    0.0,
                    "parity_mb_per_s: the card's parity engine (card preset)",
                );
                let array = make(ArraySpec {
                    name: place.clone(),
                    geometry,
                    members,
                    // The card gathers stripes in its own cache.
                    stripe_cache: None,
                    host: engine,
                    rebuild,
                })?;
                // The card gathers whole stripes itself: nothing to align to.
                // The host sees its logical drive, through its scheduler.
                Ok((
                    sched.attach(Box::new(
                        RaidCard::new_boxed(p, array).map_err(|m| err(&place, m))?,
                    )),
                    None,
                ))
            }
            _ => {
                let array = make(ArraySpec {
                    name: place.clone(),
                    geometry,
                    members,
                    stripe_cache,
                    host: self.host.clone().unwrap_or_default(),
                    rebuild,
                })?;
                let optimal = raidlab_core::Volume::optimal_io_size(array.engine());
                Ok((array.into_device(), optimal))
            }
        }
    }
}
