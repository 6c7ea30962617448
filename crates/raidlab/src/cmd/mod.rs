//! One module per command; `dispatch` routes to them.

mod bench;
mod bench_compare;
pub mod benchmarks;
mod cache;
pub mod cache_live;
mod create;
mod explain;
mod grow;
pub mod http;
pub mod info;
pub mod live;
pub mod manage;
pub mod monitor;
mod report;
mod scan;
mod seeds;
mod serve;
mod sim;
mod transfer;
mod watch;

use crate::cli::{BenchArgs, BenchCommand, Command};
use std::process::ExitCode;

pub fn dispatch(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Create(a) => create::run(a),
        Command::Examine(a) => info::examine(a),
        Command::Detail(a) => info::detail(a),
        Command::Export(a) => transfer::export(a),
        Command::Import(a) => transfer::import(a),
        Command::Explain(a) => explain::run(a),
        Command::Bench(BenchArgs {
            command: Some(BenchCommand::Parity(a)),
            ..
        }) => bench::parity(a),
        Command::Bench(BenchArgs {
            command: Some(BenchCommand::Cdm(a)),
            ..
        }) => benchmarks::cdm(a),
        Command::Bench(BenchArgs {
            command: Some(BenchCommand::Job(a)),
            ..
        }) => benchmarks::job(a),
        Command::Bench(BenchArgs {
            command: Some(BenchCommand::Bonnie(a)),
            ..
        }) => benchmarks::bonnie(a),
        Command::Bench(BenchArgs {
            command: Some(BenchCommand::Iozone(a)),
            ..
        }) => benchmarks::iozone(a),
        Command::Bench(BenchArgs {
            command: Some(BenchCommand::Replay(a)),
            ..
        }) => benchmarks::replay(a),
        Command::Bench(BenchArgs {
            command: Some(BenchCommand::Files(a)),
            ..
        }) => benchmarks::quick(a),
        Command::Bench(BenchArgs {
            command: None,
            main,
        }) => bench::main_job(main),
        Command::Fail(a) => manage::fail(a),
        Command::Remove(a) => manage::remove(a),
        Command::Add(a) => manage::add(a),
        Command::Replace(a) => manage::replace(a),
        Command::Grow(a) => grow::run(a),
        Command::Rebuild(a) => manage::rebuild(a),
        Command::Resync(a) => manage::resync(a),
        Command::Check(a) => manage::scrub(a, false),
        Command::Repair(a) => manage::scrub(a, true),
        Command::Report(a) => report::run(a),
        Command::Scan(a) => scan::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Stop(a) => live::stop(a),
        Command::Cache(c) => cache::run(c),
        Command::Sim(c) => sim::run(c),
        Command::Seeds(a) => seeds::run(a),
        Command::Monitor(a) => monitor::run(a),
    }
}
