//! raidlab-md: Linux md's on-disk formats, as plain bytes (work in progress).
