//! Bonnie++'s small-file tests: create, stat and delete empty files in
//! sequential and random order in a fresh subdirectory. It must never touch a
//! file it did not create, and removes its subdirectory however the tests end.

use super::{Figure, FileTests, Meter};
use crate::engine::Control;
use raidlab_core::{Error, Op, Result};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Bonnie++'s file names: a number (so sequential order is creation order) and
/// random letters.
fn file_names(n: usize, rng: &mut ChaCha8Rng) -> Vec<String> {
    (0..n)
        .map(|i| {
            let tail: String = (0..rng.gen_range(0..=12))
                .map(|_| rng.gen_range(b'a'..=b'z') as char)
                .collect();
            format!("{i:07}{tail}")
        })
        .collect()
}

/// Create, stat and delete `n` empty files in a fresh subdirectory of `dir`, in
/// order, then in random order.
pub(super) fn file_tests(dir: &Path, n: usize, seed: u64, control: &Control) -> Result<FileTests> {
    let base = dir.join(format!("raidlab-bonnie-{}", std::process::id()));
    std::fs::create_dir(&base).map_err(|e| Error::io(Op::Write, base.display().to_string(), e))?;
    let result = file_tests_in(&base, n, seed, control);
    let _ = std::fs::remove_dir_all(&base);
    result
}

fn file_tests_in(base: &Path, n: usize, seed: u64, control: &Control) -> Result<FileTests> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let names = file_names(n, &mut rng);
    let paths: Vec<PathBuf> = names.iter().map(|nm| base.join(nm)).collect();
    let io = |op, p: &Path, e| Error::io(op, p.display().to_string(), e);
    let timed = |order: &[PathBuf], f: &dyn Fn(&Path) -> Result<()>| -> Result<Figure> {
        let m = Meter::wall();
        let mut worst = Duration::ZERO;
        let mut done = 0;
        for p in order {
            if control.stopped() {
                break;
            }
            let t0 = crate::target::monotonic_now();
            f(p)?;
            worst = worst.max(crate::target::monotonic_now() - t0);
            done += 1;
        }
        Ok(m.figure(done as f64, worst))
    };
    let create = |p: &Path| {
        std::fs::File::create(p)
            .map(drop)
            .map_err(|e| io(Op::Write, p, e))
    };
    let stat = |p: &Path| {
        std::fs::metadata(p)
            .map(drop)
            .map_err(|e| io(Op::Read, p, e))
    };
    let delete = |p: &Path| std::fs::remove_file(p).map_err(|e| io(Op::Discard, p, e));
    // Sequential: create in order, then stat and delete in directory order.
    let seq_create = timed(&paths, &create)?;
    let listed = list(base)?;
    let seq_stat = timed(&listed, &stat)?;
    let seq_delete = timed(&listed, &delete)?;
    // Random: create, stat and delete in shuffled orders.
    let mut order = paths.clone();
    order.shuffle(&mut rng);
    let ran_create = timed(&order, &create)?;
    order.shuffle(&mut rng);
    let ran_stat = timed(&order, &stat)?;
    order.shuffle(&mut rng);
    let ran_delete = timed(&order, &delete)?;
    Ok(FileTests {
        files: n,
        seq_create,
        seq_stat,
        seq_delete,
        ran_create,
        ran_stat,
        ran_delete,
    })
}

fn list(dir: &Path) -> Result<Vec<PathBuf>> {
    let name = dir.display().to_string();
    std::fs::read_dir(dir)
        .and_then(|it| it.map(|e| e.map(|e| e.path())).collect())
        .map_err(|e| Error::io(Op::Read, name, e))
}
