//! Bonnie++ on a simulated volume, for seeds C and D.
//!
//! Decides: the Bonnie++ configuration both seeds run (file size, request size,
//! seekers). It must never time anything with the wall clock.

use super::{cell, context, d, open, Cell, Config, Seed};
use crate::bonnie::{self, BonnieConfig};
use crate::engine::{Control, EngineKind};
use raidlab_core::Result;

/// Bonnie++'s file for seeds C and D: twice the articles' 2 GB of RAM.
pub const BONNIE_SIZE: u64 = 4 << 30;

/// Seeds C and D: Bonnie++'s block tests, then (D) its random seeks in 8 KiB
/// chunks, on the same simulated volume, in virtual time. Through a file
/// system and page cache (`fs=`, raidlab-sim `fs/`: seed C), the block tests
/// are its 8 KiB read()/write() calls and what reaches the volume is that
/// kernel's writeback and read-ahead; at block level (seed D), they are the
/// 1 MiB requests a file system makes of them.
pub(super) fn run(c: &Config) -> Result<Vec<Cell>> {
    let target = open(c, BONNIE_SIZE)?;
    let control = Control::new();
    let mut cfg = BonnieConfig {
        size: BONNIE_SIZE,
        chunk: if c.through_fs() {
            bonnie::DEFAULT_CHUNK
        } else {
            1 << 20
        },
        seeks: 8192,
        seekers: 5,
        files_k: 0,
        machine: "sim".into(),
        // Never run on a simulated target; the seeds' cells are the block tests.
        per_char: false,
        seed: 42,
        engine: EngineKind::Auto,
    };
    let r = bonnie::run(&target, None, &cfg, &control).map_err(|e| context(c, e))?;
    let mb = |f: bonnie::Figure| f.rate / 1e6;
    let mut cells = vec![
        cell(c, "block_output", "MB/s", mb(r.put_block)),
        cell(c, "rewrite", "MB/s", mb(r.rewrite)),
        cell(c, "block_input", "MB/s", mb(r.get_block)),
    ];
    if c.seed == Seed::D {
        cfg.chunk = bonnie::DEFAULT_CHUNK;
        cfg.seekers = d::SEEKERS;
        if c.through_fs() {
            // Another random sequence than the seek test bonnie::run already
            // ran (as Bonnie++ seeds each run anew): the same offsets would
            // find their pages in the page cache.
            cfg.seed ^= 0x5eed;
        }
        // Bonnie++'s seek test follows its block read, by when the rewrite's
        // writes have long gone down; the 1 MiB seek test above leaves
        // written data in the page cache of `file-locks=` configurations,
        // whose commit or kupdate pass would otherwise fall into this test
        // or leave it no room below the background limit.
        target.volume.flush().map_err(|e| context(c, e))?;
        let s = bonnie::random_seeks(&target, &cfg, &control).map_err(|e| context(c, e))?;
        cells.push(cell(c, "random_seeks", "seeks/s", s.rate));
    }
    Ok(cells)
}
