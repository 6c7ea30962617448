//! Faults at virtual times: a simulated array's members fail, grow latent
//! sector errors, and a spare arrives, so that raidlab's own failure handling
//! runs under the simulator's clock.
//!
//! Grammar (each fault one `KEY=VALUE`; in the short form one option each, in
//! TOML the `[array]` key `faults = ["fail=2@10s", ...]`):
//! - `fail=R@TIME`: member R fails at TIME: every operation on it errors from
//!   then on (a disk gone dead; the error is immediate and takes no device time);
//! - `lse=R/SECTOR+COUNT@TIME`: latent sector errors: from TIME, reads of
//!   member R's 512-byte sectors `[SECTOR, SECTOR+COUNT)` (LBAs of the whole
//!   device, superblock area included) fail; a write over one remaps it, as a
//!   disk does, so it reads again afterwards;
//! - `slow=R*FACTOR@TIME`: member R's device turns FACTOR (an integer, 2 to
//!   1000) times slower at TIME: every duration inside its model is
//!   multiplied from then on ([`slow`]); the device in the role from the
//!   start (not a spare);
//! - `spare=TIME`: a spare of the members' preset is added at TIME: the engine's
//!   live rebuild starts into the role it has taken out (the first failed role),
//!   under the workload, paced by `rebuild-rate` when given.
//!
//! TIME is a number with a unit: `ns`, `us`, `ms`, `s`, `m` or `h` (`0` alone
//! is the start). A fault names the device in its role at its time: a
//! `fail=` after a `spare=` for that role fails the new device.
//!
//! Decides: the grammar, the checks a schedule must pass (each naming its
//! part), and what a member operation meets at a virtual time ([`exec`]). It
//! must never decide what the array does about a fault: the engine's failure
//! handling (`raidlab_raid::array`'s failure stage) takes members out, plans
//! degraded and rewrites bad blocks, exactly as it does over real members.

pub mod exec;
pub mod report;
pub mod slow;

use crate::device::{Ns, MS, SEC, US};

/// Virtual time no fault may be scheduled after: a year, far beyond any run
/// (and well inside the nanosecond clock's 584 years).
pub const LATEST: Ns = 365 * 24 * 3600 * SEC;

/// One fault of a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Member `role` fails: every operation on it errors.
    Fail { role: usize },
    /// Reads of member `role`'s 512-byte sectors `[sector, sector+count)` fail
    /// until written.
    Lse {
        role: usize,
        sector: u64,
        count: u64,
    },
    /// A spare of the members' preset is added.
    Spare,
    /// Member `role`'s device turns `factor` times slower.
    Slow { role: usize, factor: u64 },
}

/// A fault and when it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timed {
    pub at: Ns,
    pub fault: Fault,
}

/// The faults of a configuration, in time order (as written among equal
/// times).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schedule {
    pub faults: Vec<Timed>,
}

/// Whether `key` is a fault option of the short form.
pub fn is_fault_key(key: &str) -> bool {
    matches!(key, "fail" | "lse" | "spare" | "slow")
}

/// Parse a virtual time: a number and a unit (`0` alone is the start).
pub fn parse_time(text: &str) -> Result<Ns, String> {
    let t = text.trim();
    if t == "0" {
        return Ok(0);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("`{t}` has no unit: say e.g. `10s`, `500ms`, `2m`, `1h`"))?;
    let (num, unit) = t.split_at(split);
    let scale = match unit {
        "ns" => 1,
        "us" => US,
        "ms" => MS,
        "s" => SEC,
        "m" => 60 * SEC,
        "h" => 3600 * SEC,
        _ => {
            return Err(format!(
                "`{t}`: unknown time unit `{unit}` (ns, us, ms, s, m, h)"
            ))
        }
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{t}`: `{num}` is not a number"))?;
    let ns = n * scale as f64;
    if !ns.is_finite() || ns > LATEST as f64 {
        return Err(format!(
            "`{t}` is beyond any run (faults happen within {} days of virtual time)",
            LATEST / (24 * 3600 * SEC)
        ));
    }
    Ok(ns.round() as Ns)
}

fn role(text: &str, whole: &str) -> Result<usize, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("`{whole}`: `{text}` is not a member role"))
}

/// Parse one fault, `KEY=VALUE`.
pub fn parse_one(item: &str) -> Result<Timed, String> {
    let Some((key, value)) = item.split_once('=') else {
        return Err(format!(
            "`{item}`: a fault is KEY=VALUE (fail=R@TIME, lse=R/SECTOR+COUNT@TIME, spare=TIME)"
        ));
    };
    let at_of = |v: &str| -> Result<(String, Ns), String> {
        let Some((what, at)) = v.rsplit_once('@') else {
            return Err(format!("`{item}`: say when, as `@TIME` (e.g. `@10s`)"));
        };
        Ok((
            what.to_string(),
            parse_time(at).map_err(|m| format!("`{item}`: {m}"))?,
        ))
    };
    match key {
        "fail" => {
            let (r, at) = at_of(value)?;
            Ok(Timed {
                at,
                fault: Fault::Fail {
                    role: role(&r, item)?,
                },
            })
        }
        "lse" => {
            let (what, at) = at_of(value)?;
            let shape = || format!("`{item}`: say `lse=R/SECTOR+COUNT@TIME` (512-byte sectors)");
            let (r, range) = what.split_once('/').ok_or_else(shape)?;
            let (sector, count) = range.split_once('+').ok_or_else(shape)?;
            let num = |s: &str| {
                s.trim()
                    .parse::<u64>()
                    .map_err(|_| format!("`{item}`: `{s}` is not a number of sectors"))
            };
            let (sector, count) = (num(sector)?, num(count)?);
            if count == 0 {
                return Err(format!(
                    "`{item}`: a latent error covers at least one sector"
                ));
            }
            if sector
                .checked_add(count)
                .and_then(|e| e.checked_mul(512))
                .is_none()
            {
                return Err(format!("`{item}`: the sectors run past any device"));
            }
            Ok(Timed {
                at,
                fault: Fault::Lse {
                    role: role(r, item)?,
                    sector,
                    count,
                },
            })
        }
        "slow" => {
            let (what, at) = at_of(value)?;
            let shape = || format!("`{item}`: say `slow=R*FACTOR@TIME` (FACTOR an integer)");
            let (r, factor) = what.split_once('*').ok_or_else(shape)?;
            let factor: u64 = factor.trim().parse().map_err(|_| shape())?;
            if !(2..=1000).contains(&factor) {
                return Err(format!(
                    "`{item}`: a slow member is 2 to 1000 times slower (got {factor})"
                ));
            }
            Ok(Timed {
                at,
                fault: Fault::Slow {
                    role: role(r, item)?,
                    factor,
                },
            })
        }
        "spare" => Ok(Timed {
            at: parse_time(value).map_err(|m| format!("`{item}`: {m}"))?,
            fault: Fault::Spare,
        }),
        _ => Err(format!(
            "`{item}`: unknown fault `{key}` (known: fail, lse, slow, spare)"
        )),
    }
}

impl Schedule {
    /// Parse the `faults` entries, each `KEY=VALUE`.
    pub fn parse(items: &[String]) -> Result<Schedule, String> {
        let mut faults = items
            .iter()
            .map(|i| parse_one(i))
            .collect::<Result<Vec<_>, _>>()?;
        // Stable: faults at the same time keep the order they were written in.
        faults.sort_by_key(|t| t.at);
        Ok(Schedule { faults })
    }

    pub fn is_empty(&self) -> bool {
        self.faults.is_empty()
    }

    /// Member `role`'s device, slowed as the schedule says (the first
    /// `slow=` for the role; the check refuses a second).
    pub fn slowed(
        &self,
        role: usize,
        dev: Box<dyn crate::device::Device>,
    ) -> Box<dyn crate::device::Device> {
        match self.faults.iter().find_map(|t| match t.fault {
            Fault::Slow { role: r, factor } if r == role => Some((factor, t.at)),
            _ => None,
        }) {
            Some((factor, at)) => Box::new(slow::Slowed::new(dev, factor, at)),
            None => dev,
        }
    }

    /// When the spare arrives, if one does.
    pub fn spare(&self) -> Option<Ns> {
        self.faults
            .iter()
            .find(|t| t.fault == Fault::Spare)
            .map(|t| t.at)
    }

    /// The checks that need only the member count and the roles failed from
    /// the start: roles exist, at most one spare, and a spare has a failed
    /// member to rebuild by its time. More failures than the level tolerates
    /// are allowed: the engine's refusals are then the result.
    /// Every latent sector error lies on its member: `capacity(role)` bytes.
    pub fn check_sectors(&self, capacity: impl Fn(usize) -> u64) -> Result<(), String> {
        for t in &self.faults {
            if let Fault::Lse {
                role,
                sector,
                count,
            } = t.fault
            {
                let cap = capacity(role);
                if (sector + count) * 512 > cap {
                    return Err(format!(
                        "{}: sectors {sector}..{} are past member {role}'s {} sectors",
                        describe(t),
                        sector + count,
                        cap / 512
                    ));
                }
            }
        }
        Ok(())
    }

    pub fn check(&self, members: usize, failed_from_start: &[usize]) -> Result<(), String> {
        for t in &self.faults {
            let r = match t.fault {
                Fault::Fail { role } | Fault::Lse { role, .. } | Fault::Slow { role, .. } => role,
                Fault::Spare => continue,
            };
            if r >= members {
                return Err(format!(
                    "{}: role {r} does not exist in an array of {members} members (roles 0 to {})",
                    describe(t),
                    members - 1
                ));
            }
            if failed_from_start.contains(&r) {
                return Err(format!(
                    "{}: role {r} has no device of its own from the start (`failed`, or a `rebuild` onto a new one); it has nothing to fault",
                    describe(t)
                ));
            }
        }
        for (i, t) in self.faults.iter().enumerate() {
            if let Fault::Slow { role, .. } = t.fault {
                if let Some(u) = self.faults[i + 1..]
                    .iter()
                    .find(|u| matches!(u.fault, Fault::Slow { role: r, .. } if r == role))
                {
                    return Err(format!(
                        "{} and {}: one `slow` per member",
                        describe(t),
                        describe(u)
                    ));
                }
            }
        }
        let spares: Vec<&Timed> = self
            .faults
            .iter()
            .filter(|t| t.fault == Fault::Spare)
            .collect();
        if spares.len() > 1 {
            return Err(format!(
                "{} and {}: one spare per run (the engine rebuilds one member at a time)",
                describe(spares[0]),
                describe(spares[1])
            ));
        }
        if let Some(s) = spares.first() {
            let failed_before = !failed_from_start.is_empty()
                || self
                    .faults
                    .iter()
                    .any(|t| matches!(t.fault, Fault::Fail { .. }) && t.at <= s.at);
            if !failed_before {
                return Err(format!(
                    "{}: no member has failed by then (add `fail=R@TIME` before it, or `failed=R`)",
                    describe(s)
                ));
            }
        }
        Ok(())
    }
}

/// A fault as written (for messages and reports).
pub fn describe(t: &Timed) -> String {
    let at = format_time(t.at);
    match t.fault {
        Fault::Fail { role } => format!("fail={role}@{at}"),
        Fault::Lse {
            role,
            sector,
            count,
        } => format!("lse={role}/{sector}+{count}@{at}"),
        Fault::Spare => format!("spare={at}"),
        Fault::Slow { role, factor } => format!("slow={role}*{factor}@{at}"),
    }
}

/// A virtual time in the grammar's own words, exact.
pub fn format_time(t: Ns) -> String {
    if t == 0 {
        "0".into()
    } else if t % SEC == 0 {
        format!("{}s", t / SEC)
    } else if t % MS == 0 {
        format!("{}ms", t / MS)
    } else if t % US == 0 {
        format!("{}us", t / US)
    } else {
        format!("{t}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(items: &[&str]) -> Result<Schedule, String> {
        Schedule::parse(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn the_grammar_reads_each_fault() {
        let sch = s(&["spare=1.5s", "fail=2@500ms", "lse=1/2048+16@0"]).unwrap();
        assert_eq!(
            sch.faults,
            vec![
                Timed {
                    at: 0,
                    fault: Fault::Lse {
                        role: 1,
                        sector: 2048,
                        count: 16
                    }
                },
                Timed {
                    at: 500 * MS,
                    fault: Fault::Fail { role: 2 }
                },
                Timed {
                    at: 1500 * MS,
                    fault: Fault::Spare
                },
            ]
        );
        assert_eq!(sch.spare(), Some(1500 * MS));
        sch.check(4, &[]).unwrap();
        assert_eq!(describe(&sch.faults[2]), "spare=1500ms");
    }

    #[test]
    fn bad_faults_name_their_part() {
        let e = s(&["fail=9@1s"]).unwrap().check(4, &[]).unwrap_err();
        assert!(e.contains("fail=9@1s") && e.contains("role 9"), "{e}");
        let e = s(&["spare=1s"]).unwrap().check(4, &[]).unwrap_err();
        assert!(
            e.contains("spare=1s") && e.contains("no member has failed"),
            "{e}"
        );
        let e = s(&["fail=1@2s", "spare=1s"])
            .unwrap()
            .check(4, &[])
            .unwrap_err();
        assert!(e.contains("no member has failed"), "{e}");
        s(&["spare=1s"]).unwrap().check(4, &[3]).unwrap();
        let e = s(&["fail=1@400d"]).unwrap_err();
        assert!(
            e.contains("fail=1@400d") && e.contains("unknown time unit"),
            "{e}"
        );
        let e = s(&["fail=1@9000h"]).unwrap_err();
        assert!(e.contains("beyond any run"), "{e}");
        let e = s(&["fail=1"]).unwrap_err();
        assert!(e.contains("@TIME"), "{e}");
        let e = s(&["lse=1/5@1s"]).unwrap_err();
        assert!(e.contains("SECTOR+COUNT"), "{e}");
        let e = s(&["lse=1/5+0@1s"]).unwrap_err();
        assert!(e.contains("at least one sector"), "{e}");
        let e = s(&["slower=1*2@1s"]).unwrap_err();
        assert!(e.contains("unknown fault `slower`"), "{e}");
        let e = s(&["slow=1*1.5@1s"]).unwrap_err();
        assert!(e.contains("FACTOR an integer"), "{e}");
        let e = s(&["slow=1*1@1s"]).unwrap_err();
        assert!(e.contains("2 to 1000"), "{e}");
        assert_eq!(
            s(&["slow=3*4@2s"]).unwrap().faults[0].fault,
            Fault::Slow { role: 3, factor: 4 }
        );
        let e = s(&["fail=1@1s", "spare=2s", "spare=3s"])
            .unwrap()
            .check(4, &[])
            .unwrap_err();
        assert!(e.contains("one spare"), "{e}");
        let e = s(&["fail=1@10"]).unwrap_err();
        assert!(e.contains("no unit"), "{e}");
    }
}
