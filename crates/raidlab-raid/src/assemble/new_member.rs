//! What may become a member of a new array: a device handed to `create` or
//! `create_zoned`, and the refusal of one that holds someone's md array or
//! cannot be written. Both creators ask this before writing anything; it
//! must never write a device itself.

use super::*;

/// A device for `create`, and whether it is known to hold nothing but zeros in the
/// area the array will use (a fresh sparse file), so no initial resync is needed.
#[derive(Debug, Clone)]
pub struct NewMember {
    pub device: Device,
    pub zeroed: bool,
}

/// Refuse a device that carries an md superblock (someone's data) unless
/// `force`, or that was opened read-only.
pub(super) fn check_new_members(members: &[NewMember], force: bool) -> Result<()> {
    for m in members {
        if let Some(sb) = Superblock::read_from(m.device.volume.as_ref())
            .ok()
            .flatten()
        {
            if !force {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    Op::Open,
                    format!(
                        "already carries an md superblock (array {}, {}, role {}): it may hold someone's data. Use --force to overwrite it",
                        format_uuid(&sb.set_uuid),
                        Level::from_md(sb.level).map_or_else(|_| format!("level {}", sb.level), |l| l.name().to_string()),
                        sb.dev_number
                    ),
                )
                .on_device(m.device.path.clone()));
            }
        }
        if !m.device.volume.is_writable() {
            return Err(Error::new(
                ErrorKind::ReadOnly,
                Op::Open,
                "cannot write the superblock: opened read-only",
            )
            .on_device(m.device.path.clone()));
        }
    }
    Ok(())
}
