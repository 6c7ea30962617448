//! The one rule for tests whose real component (a tool, a browser, a kernel
//! feature) cannot run on this machine: under CI (`CI=true`, as `.ci/run` runs
//! the suite) that is a failure, because CI installs everything and a green run
//! must mean the thing was checked; elsewhere the test says `SKIPPED: why`
//! loudly and returns.
//!
//! For tests only; the product never calls it. It never decides anything
//! about storage.

/// Whether this run is CI's, where every real component must be present.
pub fn on_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Skip the calling test with `why`, or fail it under CI. Returns only when
/// the test may skip.
#[track_caller]
pub fn skip_or_fail(why: &str) {
    if on_ci() {
        panic!("{why}: CI=true requires it, so this is a failure, not a skip (scripts/test.sh installs what the tests need)");
    }
    eprintln!("\nSKIPPED: {why}\n");
}
