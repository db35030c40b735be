//! kcontrol's benchmark harness.
//!
//! `kcontrol-bench <scenario> [--json]` runs one scenario, each beside a
//! reference measured in the same process, and prints a table or, with
//! `--json`, one JSON object a line.

mod controller;
mod fixtures;
mod informer;
mod queue;
mod report;
mod rss;
mod store;
mod testserver;

use std::process::ExitCode;

use clap::{Parser, ValueEnum};

use report::Report;

#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Benchmark scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Scenario {
    /// Measures the harness itself: building the fixture objects.
    Fixtures,
    /// ThreadSafeStore: insert, update, get, by_index speed and memory per object.
    Store,
    /// Work queue throughput: single thread, dedup, N workers, rate-limited
    /// cycle, delayed items; each beside a channel carrying the same keys.
    Queue,
    /// The in-process API server: list MB/s, watch events/s, latency.
    Testserver,
    /// The sample-controller converging 1,000 and 10,000 Foos against the
    /// testserver (wall time, requests and writes per Foo, CPU per Foo of
    /// controller and server, peak RSS), then a forced relist's memory.
    Controller,
    /// Informer: initial sync (paged list and WatchList) beside a bare
    /// decode, and watch event to handler latency.
    Informer,
    /// Informer: memory of a relist of 100,000 objects forced by a 410.
    Relist,
}

/// kcontrol benchmark harness.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// The scenario to run.
    #[arg(value_enum)]
    scenario: Scenario,
    /// Print one JSON object a line instead of a table.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some(controller::CHILD_ARG) {
        return controller::child_main(argv.get(2..).unwrap_or_default());
    }
    let args = Args::parse();
    let mut report = Report::new(args.json);
    let result = match args.scenario {
        Scenario::Fixtures => fixtures::bench(&mut report),
        Scenario::Store => store::bench(&mut report),
        Scenario::Queue => queue::bench(&mut report),
        Scenario::Testserver => testserver::bench(&mut report),
        Scenario::Controller => controller::bench(&mut report),
        Scenario::Informer => informer::bench(&mut report),
        Scenario::Relist => informer::relist::bench(&mut report),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("kcontrol-bench: {err}");
            ExitCode::FAILURE
        }
    }
}
