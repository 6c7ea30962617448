//! The short form of a simulated target (what follows `sim:`): its parts
//! separated by `:` parsed into a [`SimConfig`], checked as a file is.
//!
//! Decides the short grammar only (the module doc of `config` lists it); it
//! must never build a device.

use super::*;

impl SimConfig {
    /// Parse the short form (what follows `sim:`).
    pub fn short(spec: &str) -> Result<SimConfig, ConfigError> {
        let place = format!("sim:{spec}");
        let parts: Vec<&str> = spec.split(':').collect();
        if parts.len() == 1 || parts[1].contains('=') {
            // One device, with cache and scheduler options only.
            let mut cache = None;
            let mut host = None;
            for opt in &parts[1..] {
                let Some((k, v)) = opt.split_once('=') else {
                    return Err(err(&place, format!("`{opt}`: options are KEY=VALUE")));
                };
                if host_option(&mut host, k, v).map_err(|m| err(&place, m))? {
                } else if !cache_option(&mut cache, k, v).map_err(|m| err(&place, m))? {
                    return Err(err(
                        &place,
                        format!("`{k}` is not an option of one device (known: scheduler, host, host-stripe-head-us, host-page-us, fs, file-locks, cache, cache-size, cache-block, cache-cutoff); an array is LEVEL:NxPRESET[:OPTION...]"),
                    ));
                }
            }
            let cfg = SimConfig {
                name: None,
                presets: None,
                device: parts[0].to_string(),
                array: None,
                card: None,
                host,
                cache,
            };
            cfg.check()
                .map_err(|(k, m)| err(&place, format!("`{k}`: {m}")))?;
            return Ok(cfg);
        }
        let level = parts[0];
        let Some((n, device)) = parts[1].split_once('x') else {
            return Err(err(
                &place,
                format!(
                    "`{}`: give the members as NxPRESET, e.g. 6xhdd-7200",
                    parts[1]
                ),
            ));
        };
        let members: usize = n.parse().map_err(|_| {
            err(
                &place,
                format!("`{n}` in `{}` is not a member count", parts[1]),
            )
        })?;
        let mut array = ArrayConf {
            level: level.into(),
            members,
            chunk: None,
            layout: None,
            failed: Vec::new(),
            stripe_cache: default_stripes(),
            stripe_hold_ms: default_hold(),
            kept_rows: default_kept_rows(),
            member_size: None,
            rebuild: None,
            rebuild_max_rate: None,
            rebuild_from: None,
            check: false,
            check_max_rate: None,
            check_from: None,
            repair: false,
            mismatch: Vec::new(),
            bitmap: None,
            faults: Vec::new(),
            engine: None,
        };
        let mut card = None;
        let mut cache = None;
        let mut host = None;
        for opt in &parts[2..] {
            let Some((k, v)) = opt.split_once('=') else {
                return Err(err(&place, format!("`{opt}`: options are KEY=VALUE")));
            };
            match k {
                "chunk" => array.chunk = Some(v.into()),
                "layout" => array.layout = Some(v.into()),
                "failed" => {
                    for r in v.split(',') {
                        array.failed.push(r.parse().map_err(|_| {
                            err(&place, format!("`failed={v}`: `{r}` is not a member role"))
                        })?);
                    }
                }
                "kept-rows" => {
                    array.kept_rows = v.parse().map_err(|_| {
                        err(&place, format!("`kept-rows={v}` is not a number of rows"))
                    })?
                }
                "stripe-cache" => {
                    array.stripe_cache = v.parse().map_err(|_| {
                        err(&place, format!("`stripe-cache={v}` is not a number of stripes"))
                    })?
                }
                "card" => {
                    let (preset, mode) = match v.split_once('/') {
                        Some((p, "pass-through")) => (p, CardMode::PassThrough),
                        Some((_, m)) => {
                            return Err(err(
                                &place,
                                format!("`card={v}`: unknown card mode `{m}` (use NAME or NAME/pass-through)"),
                            ))
                        }
                        None => (v, CardMode::Raid),
                    };
                    card = Some(CardConf {
                        preset: preset.into(),
                        mode,
                    });
                }
                "member-size" => array.member_size = Some(v.into()),
                "rebuild" => {
                    array.rebuild = Some(v.parse().map_err(|_| {
                        err(&place, format!("`rebuild={v}`: `{v}` is not a member role"))
                    })?)
                }
                "rebuild-rate" => array.rebuild_max_rate = Some(v.into()),
                "rebuild-from" => array.rebuild_from = Some(v.into()),
                "check" => {
                    (array.check, array.repair) = match v {
                        "yes" | "true" | "1" => (true, false),
                        "repair" => (true, true),
                        "no" | "false" | "0" => (false, false),
                        _ => {
                            return Err(err(
                                &place,
                                format!("`check={v}`: say `check=yes`, `check=repair` or `check=no`"),
                            ))
                        }
                    }
                }
                "mismatch" => array.mismatch.push(v.into()),
                "bitmap" => array.bitmap = Some(v.into()),
                "engine" => array.engine = Some(v.into()),
                "check-rate" => array.check_max_rate = Some(v.into()),
                "check-from" => array.check_from = Some(v.into()),
                _ if crate::faults::is_fault_key(k) => array.faults.push(format!("{k}={v}")),
                _ if host_option(&mut host, k, v).map_err(|m| err(&place, m))? => {}
                _ if cache_option(&mut cache, k, v).map_err(|m| err(&place, m))? => {}
                _ => {
                    return Err(err(
                        &place,
                        format!("unknown option `{k}` (known: chunk, layout, failed, stripe-cache, card, member-size, rebuild, rebuild-rate, rebuild-from, check, check-rate, check-from, mismatch, bitmap, engine, fail, lse, spare, scheduler, host, host-stripe-head-us, host-page-us, fs, file-locks, cache, cache-size, cache-block, cache-cutoff)"),
                    ))
                }
            }
        }
        let cfg = SimConfig {
            name: None,
            presets: None,
            device: device.into(),
            array: Some(array),
            card,
            host,
            cache,
        };
        cfg.check()
            .map_err(|(k, m)| err(&place, format!("`{k}`: {m}")))?;
        Ok(cfg)
    }
}
