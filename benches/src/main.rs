//! kcontrol's benchmark harness.
//!
//! `kcontrol-bench <scenario> [--json]` runs one scenario, each beside a
//! reference measured in the same process, and prints a table or, with
//! `--json`, one JSON object a line. `kcontrol-bench plot` draws SVG
//! charts of such lines ([`plot`]).

mod controller;
mod fixtures;
mod informer;
mod plot;
mod queue;
mod report;
mod rss;
mod soak;
mod store;
mod testserver;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

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
    /// The sample-controller under random Foo churn and random faults
    /// (watch drops, 410s, compaction, 429 / 5xx bursts, a lagging
    /// replica, SIGTERM and SIGKILL restarts) for --duration; then it must
    /// converge with nothing lost, duplicated or orphaned.
    Soak,
}

/// kcontrol benchmark harness.
#[derive(Debug, Parser)]
#[command(
    version,
    about,
    after_help = "`kcontrol-bench plot [--help]` draws SVG charts of results (benches/results \
                  to docs/plots)."
)]
struct Args {
    /// The scenario to run.
    #[arg(value_enum)]
    scenario: Scenario,
    /// Print one JSON object a line instead of a table.
    #[arg(long)]
    json: bool,
    /// soak: how long churn and faults run, e.g. 60s or 10m [default: 60s].
    #[arg(long, value_name = "DURATION", value_parser = sample_controller::cli::parse_duration)]
    duration: Option<Duration>,
    /// soak: the seed of every random choice [default: from the clock,
    /// below 10^12 so that JSON readers keep it exact].
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// soak: names in the Foo pool [default: 100].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    foos: Option<u64>,
    /// soak: churn changes a second, on average [default: 20].
    #[arg(long, value_name = "R", value_parser = parse_rate)]
    rate: Option<f64>,
    /// soak: how long the end may take to converge [default: 120s].
    #[arg(long, value_name = "DURATION", value_parser = sample_controller::cli::parse_duration)]
    settle_timeout: Option<Duration>,
    /// soak: fail when the controller's RSS at the end exceeds this
    /// multiple of its RSS after warm-up (e.g. 1.1) [default: report only].
    #[arg(long, value_name = "X", value_parser = parse_rate)]
    max_rss_growth: Option<f64>,
    /// soak: run this `sample-controller` binary instead of the
    /// sample-controller code built into kcontrol-bench.
    #[arg(long, value_name = "PATH")]
    controller_bin: Option<PathBuf>,
}

impl Args {
    /// The soak's options; an error naming a soak flag given to another
    /// scenario.
    fn soak_options(&self) -> Result<soak::Options, String> {
        let given = [
            ("--duration", self.duration.is_some()),
            ("--seed", self.seed.is_some()),
            ("--foos", self.foos.is_some()),
            ("--rate", self.rate.is_some()),
            ("--settle-timeout", self.settle_timeout.is_some()),
            ("--max-rss-growth", self.max_rss_growth.is_some()),
            ("--controller-bin", self.controller_bin.is_some()),
        ];
        if self.scenario != Scenario::Soak {
            if let Some((flag, _)) = given.iter().find(|(_, set)| *set) {
                return Err(format!("{flag} applies to the soak scenario only"));
            }
        }
        let seed = self.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                // below 2^53: exact in any JSON reader (jq reads doubles)
                .map_or(0, |d| (d.as_nanos() % 1_000_000_000_000) as u64)
        });
        Ok(soak::Options {
            duration: self.duration.unwrap_or(Duration::from_secs(60)),
            seed,
            foos: self.foos.unwrap_or(100),
            rate: self.rate.unwrap_or(20.0),
            settle_timeout: self.settle_timeout.unwrap_or(Duration::from_secs(120)),
            max_rss_growth: self.max_rss_growth,
            controller_bin: self.controller_bin.clone(),
        })
    }
}

fn parse_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err("expected a number greater than 0".to_owned()),
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some(controller::CHILD_ARG) {
        return controller::child_main(argv.get(2..).unwrap_or_default());
    }
    if argv.get(1).map(String::as_str) == Some(soak::process::CHILD_ARG) {
        return soak::process::child_main(argv.get(2..).unwrap_or_default());
    }
    if argv.get(1).map(String::as_str) == Some("plot") {
        return plot::main(argv.get(2..).unwrap_or_default());
    }
    let args = Args::parse();
    let soak_options = match args.soak_options() {
        Ok(options) => options,
        Err(err) => {
            eprintln!("kcontrol-bench: {err}");
            return ExitCode::from(2);
        }
    };
    let mut report = Report::new(args.json);
    let result = match args.scenario {
        Scenario::Fixtures => fixtures::bench(&mut report),
        Scenario::Store => store::bench(&mut report),
        Scenario::Queue => queue::bench(&mut report),
        Scenario::Testserver => testserver::bench(&mut report),
        Scenario::Controller => controller::bench(&mut report),
        Scenario::Informer => informer::bench(&mut report),
        Scenario::Relist => informer::relist::bench(&mut report),
        Scenario::Soak => soak::bench(&mut report, &soak_options),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("kcontrol-bench: {err}");
            ExitCode::FAILURE
        }
    }
}
