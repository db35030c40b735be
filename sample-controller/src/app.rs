//! The program: [`main`] parses the flags, sets up logging and the runtime,
//! and runs the controller against a cluster ([`run_cluster`]) or the
//! `--embedded` demo ([`run_embedded`]).

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::error::ErrorKind;
use clap::Parser;
use kcontrol_client::Client;
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::cli::{client_config, Args, CliError};
use crate::controller::{Controller, ControllerOptions};
use crate::embedded::{self, Progress, DEMO_NAMESPACE};
use crate::metrics::SharedRegistry;
use kcontrol_controller::Health;

/// Runs the program with the process's arguments and returns its exit code:
/// 0 success, 1 a failure while running (or a demo that did not converge in
/// time), 2 bad flags or configuration — each reported in one line on stderr.
pub fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) => return usage_error(&e),
    };
    init_logging(
        if args.embedded { "warn" } else { "info" },
        args.log_format == "json",
    );
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("sample-controller")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sample-controller: error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sample-controller: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// `--help` and `--version` print as clap prints them; a bad flag is one line.
fn usage_error(e: &clap::Error) -> ExitCode {
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    let text = e.to_string();
    let first = text.lines().next().unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    eprintln!("sample-controller: error: {first} (see --help)");
    ExitCode::from(2)
}

fn init_logging(default: &str, json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = if json {
        // one JSON object a line, with the fields of the enclosing spans
        // (a sync's key, a request's verb and resource)
        builder
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .try_init()
    } else {
        builder.try_init()
    };
}

/// Runs what the flags ask for until it finishes or a signal stops it.
pub async fn run(args: Args) -> Result<(), CliError> {
    if args.embedded {
        run_embedded(&args).await
    } else {
        run_cluster(&args).await
    }
}

fn options(
    args: &Args,
    namespace: Option<String>,
    served: Option<(SharedRegistry, Health)>,
) -> ControllerOptions {
    let (registry, health) = served.unzip();
    ControllerOptions {
        workers: usize::try_from(args.workers).unwrap_or(2),
        resync_period: args.resync(),
        namespace,
        registry,
        health,
        ..ControllerOptions::default()
    }
}

/// Starts the metrics endpoint (`/metrics`, `/healthz`, `/readyz`) when
/// `--metrics-addr` is given. It stops once `stop` is cancelled.
async fn metrics(
    args: &Args,
    stop: &CancellationToken,
) -> Result<Option<(SharedRegistry, Health)>, CliError> {
    let Some(addr) = args.metrics_addr else {
        return Ok(None);
    };
    let registry: SharedRegistry = Arc::new(Mutex::new(Registry::default()));
    let health = Health::with_registry(Arc::clone(&registry));
    let bound = health
        .serve(addr, stop.clone())
        .await
        .map_err(|e| CliError::Run(format!("serving metrics on {addr}: {e}")))?;
    tracing::info!(%bound, "serving metrics at /metrics, health at /healthz and /readyz");
    Ok(Some((registry, health)))
}

/// The controller against the cluster the flags select, until SIGINT or SIGTERM.
pub async fn run_cluster(args: &Args) -> Result<(), CliError> {
    let mut config = client_config(args)?;
    let leader_election = args.leader_election()?;
    if let Some(le) = &leader_election {
        // the identity in the User-Agent: the API server's audit log (and
        // the test server's request log) tell the replicas apart
        config.user_agent = format!("{} leader-elect/{}", config.user_agent, le.identity);
        tracing::info!(lease = %format!("{}/{}", le.namespace, le.name), identity = %le.identity, "leader election on");
    }
    tracing::info!(server = %config.cluster_url, "starting sample-controller");
    let client = Client::new(config).map_err(CliError::Client)?;
    let shutdown = CancellationToken::new();
    crate::signals::cancel_on_signal(shutdown.clone());
    // the endpoint outlives the controller's shutdown, answering 503 at /readyz
    let server_stop = CancellationToken::new();
    let _stop_server = server_stop.clone().drop_guard();
    let served = metrics(args, &server_stop).await?;
    let mut options = options(args, args.namespace.clone(), served);
    options.leader_election = leader_election;
    let controller = Controller::new(client, options).map_err(|e| CliError::Run(e.to_string()))?;
    controller
        .run(shutdown)
        .await
        .map_err(|e| CliError::Run(e.to_string()))?;
    if controller.lost_leadership() {
        return Err(CliError::Run(
            "leader election lost: the Lease was not renewed in time".to_owned(),
        ));
    }
    Ok(())
}

/// The demo: an in-process API server, the Foo CRD, `--foos` Foos and the
/// controller, with live progress; with `--until-synced`, done once every
/// Foo is in sync (an error after `--timeout`).
pub async fn run_embedded(args: &Args) -> Result<(), CliError> {
    let started = Instant::now();
    let run_error = |e: &dyn std::fmt::Display| CliError::Run(e.to_string());
    let server = embedded::start_server().await.map_err(|e| run_error(&e))?;
    let client = embedded::client_for(&server, args.rate_limit()).map_err(|e| run_error(&e))?;
    crate::artifacts::install_foo_crd(&client, Duration::from_secs(30))
        .await
        .map_err(|e| run_error(&e))?;
    let count = args.foo_count();
    say(&format!(
        "In-process API server at {} with the Foo CRD; creating {count} Foo{}...",
        server.url(),
        if count == 1 { "" } else { "s" }
    ));
    embedded::create_foos(&client, count)
        .await
        .map_err(|e| run_error(&e))?;

    let shutdown = CancellationToken::new();
    crate::signals::cancel_on_signal(shutdown.clone());
    let served = metrics(args, &shutdown).await?;
    let controller = Arc::new(
        Controller::new(
            client,
            options(args, Some(DEMO_NAMESPACE.to_owned()), served),
        )
        .map_err(|e| run_error(&e))?,
    );
    let stop_controller = CancellationToken::new();
    let running = {
        let controller = Arc::clone(&controller);
        let stop = stop_controller.clone();
        tokio::spawn(async move { controller.run(stop).await })
    };

    let objects = server.objects();
    let deadline = args
        .until_synced
        .then(|| started + args.until_synced_timeout());
    let outcome = watch_progress(&objects, &shutdown, deadline, started).await;

    stop_controller.cancel();
    match running.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(run_error(&e)),
        Err(e) => return Err(CliError::Run(format!("controller task: {e}"))),
    }
    let counters = server.counters();
    let writes: u64 = ["create", "update", "patch", "delete"]
        .iter()
        .map(|verb| {
            counters
                .by_verb_resource
                .iter()
                .filter(|((v, _), _)| v == verb)
                .map(|(_, n)| n)
                .sum::<u64>()
        })
        .sum();
    server.shutdown().await;
    match outcome {
        Watch::Synced(p) => {
            say(&format!(
                "All {} Foos synced in {:.1}s: {} Deployments, {} Normal and {} Warning events, {} API requests ({} writes).",
                p.foos,
                started.elapsed().as_secs_f64(),
                p.deployments,
                p.normal_events,
                p.warning_events,
                counters.total,
                writes
            ));
            Ok(())
        }
        Watch::Interrupted => Ok(()),
        Watch::TimedOut(p) => Err(CliError::Run(format!(
            "timed out after {:?}: {}/{} Foos synced (still waiting: {})",
            args.until_synced_timeout(),
            p.synced,
            p.foos,
            p.lagging.join("; ")
        ))),
    }
}

/// How watching the demo ended.
enum Watch {
    Synced(Progress),
    Interrupted,
    TimedOut(Progress),
}

/// Shows progress (a redrawn line on a terminal, a line a second
/// otherwise) until every Foo is synced (with a deadline), the deadline
/// passes, or a signal arrives.
async fn watch_progress(
    objects: &kcontrol_testserver::Objects,
    shutdown: &CancellationToken,
    deadline: Option<Instant>,
    started: Instant,
) -> Watch {
    let tty = std::io::stdout().is_terminal();
    let tick = if tty {
        Duration::from_millis(250)
    } else {
        Duration::from_secs(1)
    };
    let mut last_line = String::new();
    loop {
        let p = embedded::progress(objects);
        let line = embedded::render(&p, started.elapsed());
        if tty {
            print_redrawn(&line);
        } else if line != last_line {
            say(&line);
        }
        last_line = line;
        if deadline.is_some() && p.all_synced() {
            finish_line(tty);
            return Watch::Synced(p);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            finish_line(tty);
            return Watch::TimedOut(p);
        }
        tokio::select! {
            () = shutdown.cancelled() => {
                finish_line(tty);
                return Watch::Interrupted;
            }
            () = tokio::time::sleep(tick) => {}
        }
    }
}

#[allow(clippy::print_stdout)]
fn say(line: &str) {
    println!("{line}");
}

#[allow(clippy::print_stdout)]
fn print_redrawn(line: &str) {
    print!("\r\x1b[2K{line}");
    let _ = std::io::stdout().flush();
}

#[allow(clippy::print_stdout)]
fn finish_line(tty: bool) {
    if tty {
        println!();
    }
}
