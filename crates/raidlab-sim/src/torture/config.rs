//! The torture harness's random array configurations: level, md layout,
//! member count, chunk, metadata version, consistency policy and stripe cache,
//! drawn from a seeded RNG among the combinations raidlab creates. It decides
//! what a run builds, never what happens to it.

use raidlab_layout::{Layout, Level, ParityLayout, Raid10Layout};
use raidlab_md::MetadataVersion;
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// md's consistency policy: what makes a power cut safe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// A full resync after an unclean stop.
    Resync,
    /// An internal write-intent bitmap: the resync covers dirty chunks only.
    Bitmap,
    /// md's partial parity log (RAID 5).
    Ppl,
    /// md's write journal on its own device (RAID 4/5/6).
    Journal,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::Resync => "resync",
            Policy::Bitmap => "bitmap",
            Policy::Ppl => "ppl",
            Policy::Journal => "journal",
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub level: Level,
    pub layout: Layout,
    pub members: usize,
    pub chunk: u64,
    pub metadata: MetadataVersion,
    pub policy: Policy,
    pub stripe_cache: bool,
}

/// Bytes of data area per member: tens of stripes, and a whole-array check
/// that stays cheap.
pub const DATA_BYTES: u64 = 256 << 10;

impl Config {
    /// A configuration drawn from `rng`, of `level` if given.
    pub fn random(rng: &mut ChaCha8Rng, level: Option<Level>) -> Config {
        use Level::*;
        let level = level.unwrap_or_else(|| {
            *[Raid0, Raid1, Raid4, Raid5, Raid6, Raid10]
                .choose(rng)
                .unwrap_or(&Raid5)
        });
        let (members, layout) = match level {
            Raid0 => (rng.gen_range(2..=4), Layout::Plain),
            Raid1 => (rng.gen_range(2..=3), Layout::Plain),
            Raid4 => (
                rng.gen_range(3..=5),
                Layout::Parity(ParityLayout::ParityLast),
            ),
            Raid5 => {
                use ParityLayout::*;
                let l = *[
                    LeftSymmetric,
                    LeftAsymmetric,
                    RightSymmetric,
                    RightAsymmetric,
                ]
                .choose(rng)
                .unwrap_or(&LeftSymmetric);
                (rng.gen_range(3..=5), Layout::Parity(l))
            }
            Raid6 => {
                use ParityLayout::*;
                let l = *[LeftSymmetric, LeftAsymmetric, RightSymmetric, ParityLast]
                    .choose(rng)
                    .unwrap_or(&LeftSymmetric);
                (rng.gen_range(4..=6), Layout::Parity(l))
            }
            Raid10 => {
                let n = rng.gen_range(2..=4);
                let name = *["n2", "f2", "o2"].choose(rng).unwrap_or(&"n2");
                let l = Raid10Layout::from_name(name).unwrap_or_else(|_| {
                    Raid10Layout::from_name("n2").expect("n2 is a RAID 10 layout")
                });
                (n, Layout::Raid10(l))
            }
        };
        let chunk = *[4u64, 8, 16, 64].choose(rng).unwrap_or(&8) << 10;
        let parity = matches!(level, Raid4 | Raid5 | Raid6);
        let mut policies = vec![Policy::Resync];
        if level != Raid0 {
            policies.push(Policy::Bitmap);
        }
        if level == Raid5 {
            policies.push(Policy::Ppl);
        }
        if parity {
            policies.push(Policy::Journal);
        }
        let policy = *policies.choose(rng).unwrap_or(&Policy::Resync);
        let mut versions = vec![MetadataVersion::V1_1, MetadataVersion::V1_2];
        if !matches!(policy, Policy::Ppl | Policy::Journal) {
            versions.push(MetadataVersion::V1_0);
            versions.push(MetadataVersion::V0_90);
        }
        let metadata = *versions.choose(rng).unwrap_or(&MetadataVersion::V1_2);
        Config {
            level,
            layout,
            members,
            chunk,
            metadata,
            policy,
            stripe_cache: parity && rng.gen_bool(0.7),
        }
    }

    /// Bytes of each member device: metadata, logs and [`DATA_BYTES`].
    pub fn device_bytes(&self) -> u64 {
        match (self.metadata, self.policy) {
            // The superblock (and bitmap) at the end: a little room for them.
            (MetadataVersion::V1_0 | MetadataVersion::V0_90, _) => DATA_BYTES + (192 << 10),
            // With a partial parity log mdadm's data offset is 2 MiB.
            (_, Policy::Ppl) => (2 << 20) + DATA_BYTES,
            _ => (1 << 20) + DATA_BYTES,
        }
    }

    /// A short kind for the per-kind tallies: level and policy.
    pub fn kind(&self) -> String {
        format!("{} {}", self.level.name(), self.policy.name())
    }

    pub fn label(&self) -> String {
        let layout = match self.layout {
            Layout::Plain => String::new(),
            l => format!(" {}", l.name()),
        };
        let version = match self.metadata {
            MetadataVersion::V0_90 => "0.90",
            MetadataVersion::V1_0 => "1.0",
            MetadataVersion::V1_1 => "1.1",
            MetadataVersion::V1_2 => "1.2",
        };
        format!(
            "{}{layout}, {} members, chunk {}K, metadata {version}, {}, stripe cache {}",
            self.level.name(),
            self.members,
            self.chunk >> 10,
            self.policy.name(),
            if self.stripe_cache { "on" } else { "off" }
        )
    }

    pub fn has_parity(&self) -> bool {
        matches!(self.level, Level::Raid4 | Level::Raid5 | Level::Raid6)
    }
}
