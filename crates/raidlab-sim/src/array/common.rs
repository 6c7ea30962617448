//! What a simulated array is built from and how its members' time moves: the
//! checks of a spec, the array's parameters and description, moving the members' time on and
//! taking due timers.
//!
//! Decides nothing about when a request's I/O happens; that is
//! [`super::TaskArray`]'s.

use super::{ArraySpec, RebuildSpec, DATA_OFFSET, IDLE};
use crate::device::{Completion, Device, ModelInfo, Ns, Param};
use raidlab_layout::Geometry;
use raidlab_raid::stripe_cache::StripeCacheConfig;

/// `spec` (with `rebuild` taken out of it) can be built: one member per
/// role, a rebuild only of a failed role, every device large enough.
pub(super) fn check_spec(spec: &ArraySpec, rebuild: Option<&RebuildSpec>) -> Result<(), String> {
    spec.host.check()?;
    let g = spec.geometry;
    if spec.members.len() != g.raid_disks {
        return Err(format!(
            "{} members given for {} raid devices",
            spec.members.len(),
            g.raid_disks
        ));
    }
    if let Some(r) = rebuild {
        match spec.members.get(r.role) {
            Some(None) => {}
            Some(Some(_)) => {
                return Err(format!(
                    "role {} is in service: only a failed member can be rebuilt",
                    r.role
                ))
            }
            None => return Err(format!("no role {} to rebuild", r.role)),
        }
    }
    for (role, m) in spec
        .members
        .iter()
        .enumerate()
        .map(|(role, m)| (role, m.as_ref()))
        .chain(rebuild.map(|r| (r.role, Some(&r.device))))
    {
        if let Some(m) = m {
            if m.capacity() < DATA_OFFSET + g.member_bytes {
                return Err(format!(
                    "member {role} holds {} bytes, less than the {} the array needs (data {} + {} before it)",
                    m.capacity(),
                    DATA_OFFSET + g.member_bytes,
                    g.member_bytes,
                    DATA_OFFSET
                ));
            }
        }
    }
    Ok(())
}

/// The array's own parameters: its geometry and stripe cache.
pub(super) fn array_params(g: &Geometry, cache: Option<StripeCacheConfig>) -> Vec<Param> {
    let mut p = vec![
        Param {
            name: "chunk".into(),
            value: g.chunk_bytes as f64,
            unit: "bytes".into(),
        },
        Param {
            name: "raid_devices".into(),
            value: g.raid_disks as f64,
            unit: "members".into(),
        },
    ];
    if let Some(cfg) = cache {
        p.push(Param {
            name: "stripe_cache".into(),
            value: cfg.stripes as f64,
            unit: "stripes".into(),
        });
        p.push(Param {
            name: "stripe_hold".into(),
            value: cfg.hold.as_secs_f64() * 1e3,
            unit: "ms".into(),
        });
    }
    p
}

/// The array as `raidlab sim show` describes it, its members as parts.
pub(super) fn array_info(
    model: &str,
    name: &str,
    g: &Geometry,
    params: Vec<Param>,
    sources: Vec<String>,
    members: &[Option<Box<dyn Device>>],
) -> ModelInfo {
    ModelInfo {
        model: model.into(),
        name: format!(
            "{name} {}{}",
            g.level.name(),
            if g.is_parity() {
                format!(" {}", g.layout.name())
            } else {
                String::new()
            }
        ),
        params,
        sources,
        parts: members
            .iter()
            .map(|m| match m {
                Some(m) => m.info(),
                None => ModelInfo {
                    model: "missing".into(),
                    name: "failed member".into(),
                    params: Vec::new(),
                    sources: Vec::new(),
                    parts: Vec::new(),
                },
            })
            .collect(),
    }
}

/// Move every member whose next event is due by `now` on to `now`, its
/// completions into `done`. Whether any was due.
pub(super) fn advance_members(
    members: &mut [Option<Box<dyn Device>>],
    member_next: &mut [Ns],
    now: Ns,
    done: &mut Vec<Completion>,
) -> bool {
    let mut any = false;
    for (m, next) in members.iter_mut().zip(member_next.iter_mut()) {
        if *next <= now {
            if let Some(m) = m {
                m.advance(now, done);
                *next = m.next_event().unwrap_or(IDLE);
                any = true;
            }
        }
    }
    any
}

/// Move every timer due at or before `now` (`(time, order, seq)`, soonest
/// first, then in the order they were set) to `ready`; whether any was.
pub(super) fn due_timers(
    timers: &mut std::collections::BinaryHeap<std::cmp::Reverse<(Ns, u64, u64)>>,
    now: Ns,
    ready: &mut std::collections::VecDeque<u64>,
) -> bool {
    let mut any = false;
    while let Some(&std::cmp::Reverse((t, _, seq))) = timers.peek() {
        if t > now {
            break;
        }
        timers.pop();
        ready.push_back(seq);
        any = true;
    }
    any
}
