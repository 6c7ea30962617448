//! raidlab-raid: the array engine (work in progress).
