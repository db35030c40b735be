//! kcontrol's benchmark harness.
//!
//! `kcontrol-bench <scenario> [--json]` runs one scenario, each beside a
//! reference measured in the same process, and prints a table or, with
//! `--json`, one JSON object a line. `kcontrol-bench plot` draws SVG
//! charts of such lines ([`plot`]).

mod controller;
mod fixtures;
mod fleet;
mod informer;
mod plot;
mod queue;
mod report;
mod rss;
mod shards;
mod soak;
mod store;
mod testserver;
mod wire;

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
    /// Informer sync of 100,000 ConfigMaps from the bytes a real
    /// kube-apiserver 1.36 sent (list, WatchList, metadata-only list; JSON
    /// and protobuf), served paced as the real server sent them and
    /// unpaced, beside the floor: the same bytes received and dropped.
    Wire,
    /// Reflectors by the hundred against one testserver through a
    /// restart, a flapping server, watches failing with 503 and
    /// Retry-After, and WatchList answered 429; kcontrol's pacing beside
    /// client-go's, without and with an admission limit (requests while
    /// failing, LISTs, recovery, Retry-After violations).
    Fleet,
    /// The sample-controller sharded over three replicas (processes) on
    /// Leases beside one unsharded replica: peak RSS ratio, failover after
    /// a SIGKILL, double reconciles, unowned Foos, the share moved by a
    /// joining replica.
    Shards,
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
    /// wire: the kube-apiserver-1.36 fixture directory [default:
    /// $KCONTROL_BENCH_WIRE_FIXTURES, else
    /// ../shared/fixtures/kube-apiserver-1.36 from the workspace root].
    #[arg(long, value_name = "DIR")]
    fixtures: Option<PathBuf>,
    /// wire: only these paces (comma-separated) [default: all].
    #[arg(long, value_enum, value_delimiter = ',')]
    pace: Vec<wire::Pace>,
    /// wire: only these encodings [default: all].
    #[arg(long, value_enum, value_delimiter = ',')]
    encoding: Vec<wire::Encoding>,
    /// wire: only these modes [default: all].
    #[arg(long, value_enum, value_delimiter = ',')]
    mode: Vec<wire::Mode>,
    /// wire: only these cached types [default: all].
    #[arg(long, value_enum, value_delimiter = ',')]
    cached_type: Vec<wire::CachedType>,
    /// wire: run every row this many times, interleaved [default: 1].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: Option<u32>,
    /// shards: Foos [default: 30,000].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(10..=1_000_000))]
    objects: Option<u64>,
    /// fleet: reflectors per fleet [default: 200].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=5_000))]
    clients: Option<u64>,
    /// fleet: play only this fault (restart, flapping, retry-after,
    /// watchlist-429; repeatable) [default: all four].
    #[arg(long, value_name = "FAULT", value_parser = parse_fault)]
    fault: Vec<fleet::Fault>,
    /// fleet: how long the limited servers take to answer each request,
    /// holding its seat, in milliseconds [default: 200].
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(0..=10_000))]
    limited_service_ms: Option<u64>,
}

impl Args {
    /// The wire scenario's options; an error naming a wire flag given to
    /// another scenario.
    fn wire_options(&self) -> Result<wire::Options, String> {
        let given = [
            ("--fixtures", self.fixtures.is_some()),
            ("--pace", !self.pace.is_empty()),
            ("--encoding", !self.encoding.is_empty()),
            ("--mode", !self.mode.is_empty()),
            ("--cached-type", !self.cached_type.is_empty()),
            ("--rounds", self.rounds.is_some()),
        ];
        if self.scenario != Scenario::Wire {
            if let Some((flag, _)) = given.iter().find(|(_, set)| *set) {
                return Err(format!("{flag} applies to the wire scenario only"));
            }
        }
        Ok(wire::Options {
            fixtures: self.fixtures.clone(),
            paces: self.pace.clone(),
            encodings: self.encoding.clone(),
            modes: self.mode.clone(),
            cached_types: self.cached_type.clone(),
            rounds: self.rounds.unwrap_or(1),
        })
    }

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

fn parse_fault(text: &str) -> Result<fleet::Fault, String> {
    fleet::Fault::ALL
        .into_iter()
        .find(|f| f.name() == text.trim())
        .ok_or_else(|| "expected restart, flapping, retry-after or watchlist-429".to_owned())
}

impl Args {
    /// The fleet's options; an error naming a fleet flag given to another
    /// scenario.
    fn fleet_options(&self) -> Result<fleet::Options, String> {
        if self.scenario != Scenario::Fleet {
            if self.clients.is_some() {
                return Err("--clients applies to the fleet scenario only".to_owned());
            }
            if !self.fault.is_empty() {
                return Err("--fault applies to the fleet scenario only".to_owned());
            }
            if self.limited_service_ms.is_some() {
                return Err("--limited-service-ms applies to the fleet scenario only".to_owned());
            }
        }
        let clients = usize::try_from(self.clients.unwrap_or(200)).unwrap_or(200);
        let faults = if self.fault.is_empty() {
            fleet::Fault::ALL.to_vec()
        } else {
            self.fault.clone()
        };
        let limited_service =
            Duration::from_millis(self.limited_service_ms.unwrap_or(fleet::LIMITED_SERVICE_MS));
        Ok(fleet::Options {
            clients,
            faults,
            limited_service,
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
    if argv.get(1).map(String::as_str) == Some(wire::CHILD_ARG) {
        return wire::child_main();
    }
    if argv.get(1).map(String::as_str) == Some("plot") {
        return plot::main(argv.get(2..).unwrap_or_default());
    }
    let args = Args::parse();
    let options = args
        .soak_options()
        .and_then(|soak| Ok((soak, args.wire_options()?, args.fleet_options()?)));
    let (soak_options, wire_options, fleet_options) = match options {
        Ok(options) => options,
        Err(err) => {
            eprintln!("kcontrol-bench: {err}");
            return ExitCode::from(2);
        }
    };
    if args.objects.is_some() && args.scenario != Scenario::Shards {
        eprintln!("kcontrol-bench: --objects applies to the shards scenario only");
        return ExitCode::from(2);
    }
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
        Scenario::Wire => wire::bench(&mut report, &wire_options),
        Scenario::Fleet => fleet::bench(&mut report, &fleet_options),
        Scenario::Shards => {
            let n = args.objects.unwrap_or(30_000);
            shards::bench(&mut report, usize::try_from(n).unwrap_or(30_000))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("kcontrol-bench: {err}");
            ExitCode::FAILURE
        }
    }
}
