//! The report `mdadm --examine-bitmap` (`-X`) prints for an internal bitmap,
//! for `raidlab examine`: the header's fields and how many chunks are dirty.
//!
//! It decides only the wording and must never read or write a device (the
//! caller reads the bitmap with [`Bitmap::read_from`]).

use super::{state, Bitmap};
use crate::superblock::examine::human_size;

/// mdadm's chunk size words: the largest unit (B, KB, MB, GB, TB) that keeps
/// the number whole, e.g. "4 KB", "64 MB".
fn chunk_words(bytes: u32) -> String {
    let units = ["B", "KB", "MB", "GB", "TB"];
    let mut n = u64::from(bytes);
    let mut u = 0;
    while n >= 1024 && n % 1024 == 0 && u + 1 < units.len() {
        n /= 1024;
        u += 1;
    }
    format!("{n} {}", units[u])
}

impl Bitmap {
    /// `(label, value)` lines as `mdadm -X` prints them, without the
    /// `Filename` line. The uuid is the header's 16 bytes in order, as mdadm
    /// shows them (for 0.90, md's raw copy of the superblock's uuid words).
    pub fn examine_lines(&self) -> Vec<(String, String)> {
        let sb = &self.sb;
        let uuid = sb
            .uuid
            .chunks_exact(4)
            .map(|w| w.iter().map(|b| format!("{b:02x}")).collect::<String>())
            .collect::<Vec<_>>()
            .join(":");
        let chunks = self.chunks();
        let dirty = self.dirty_count();
        let pct = if chunks == 0 {
            0.0
        } else {
            dirty as f64 * 100.0 / chunks as f64
        };
        let write_mode = if sb.write_behind == 0 {
            "Normal".to_string()
        } else {
            format!("Allow write behind, max {}", sb.write_behind)
        };
        [
            ("Magic", "6d746962".to_string()),
            ("Version", sb.version.to_string()),
            ("UUID", uuid),
            ("Events", sb.events.to_string()),
            ("Events Cleared", sb.events_cleared.to_string()),
            (
                "State",
                if sb.state & state::STALE != 0 {
                    "Out of date".to_string()
                } else {
                    "OK".to_string()
                },
            ),
            ("Chunksize", chunk_words(sb.chunksize)),
            ("Daemon", format!("{}s flush period", sb.daemon_sleep)),
            ("Write Mode", write_mode),
            (
                "Sync Size",
                format!(
                    "{}{}",
                    sb.sync_size / 2,
                    human_size(sb.sync_size.saturating_mul(512))
                ),
            ),
            (
                "Bitmap",
                format!("{chunks} bits (chunks), {dirty} dirty ({pct:.1}%)"),
            ),
        ]
        .into_iter()
        .map(|(l, v)| (l.to_string(), v))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_words_as_mdadm() {
        assert_eq!(chunk_words(4096), "4 KB");
        assert_eq!(chunk_words(64 << 20), "64 MB");
        assert_eq!(chunk_words(1536), "1536 B");
        assert_eq!(chunk_words(1 << 30), "1 GB");
    }
}
