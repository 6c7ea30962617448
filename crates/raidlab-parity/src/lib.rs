//! raidlab-parity: RAID parity math (work in progress).
