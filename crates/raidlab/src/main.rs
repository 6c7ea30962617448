//! The `raidlab` command: parses arguments, validates them into a request, wires
//! volumes together and prints. It holds no storage logic of its own: layout,
//! planning, parity and on-disk formats live in the library crates.

/// `println!` that returns an error instead of panicking when stdout is closed
/// (`raidlab detail ... | head`); `main` treats a broken pipe as success.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)*)?;
    }};
}

/// `print!` that returns an error instead of panicking when stdout is closed.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout(), $($arg)*)?;
    }};
}

/// `outln!` into a `String` (output made in one place and printed in
/// another, e.g. by a server for a command).
macro_rules! textln {
    ($buf:ident) => {{
        use std::fmt::Write as _;
        writeln!($buf)?;
    }};
    ($buf:ident, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        writeln!($buf, $($arg)*)?;
    }};
}

mod cli;
mod cmd;
mod control;
mod metrics;
mod open;
mod socket_file;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(err) => {
            // A closed pipe (e.g. `raidlab export ... | head`) is not an error.
            if err
                .chain()
                .filter_map(|c| c.downcast_ref::<std::io::Error>())
                .any(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("raidlab: error: {err}");
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::from(1)
        }
    }
}

fn run() -> anyhow::Result<ExitCode> {
    let cli = cli::Cli::parse();
    raidlab_raid::exec::submit::set(cli.member_io)?;
    cmd::dispatch(cli.command)
}
