//! The program: [`main`] parses the flags, sets up logging and the runtime,
//! and runs the controller against a cluster ([`run_cluster`]) or the
//! `--embedded` demo ([`run_embedded`]).

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::Parser;
use kcontrol_client::Client;
use tokio_util::sync::CancellationToken;

use crate::cli::{client_config, Args, CliError};
use crate::controller::{Controller, ControllerOptions};
#[cfg(feature = "embedded")]
pub use crate::demo::run_embedded;
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

/// `--embedded` in a build without the `embedded` feature: a usage error.
#[cfg(not(feature = "embedded"))]
async fn run_embedded(_args: &Args) -> Result<(), CliError> {
    Err(CliError::Usage(
        "--embedded needs the in-process API server, which this build leaves out: \
         build sample-controller with the `embedded` feature (on by default)"
            .to_owned(),
    ))
}

pub(crate) fn options(
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

/// The metrics endpoint's registry and health (`/metrics`, `/healthz`,
/// `/readyz`) when `--metrics-addr` is given; [`serve`] starts serving
/// them once the controller has added its readiness checks.
pub(crate) fn endpoint(args: &Args) -> Option<(SharedRegistry, Health)> {
    args.metrics_addr?;
    let registry = SharedRegistry::new();
    let health = Health::with_registry(registry.clone());
    Some((registry, health))
}

/// Serves `endpoint` at `--metrics-addr` until `stop` is cancelled. Called
/// after `Controller::new`, which adds the informers and handlers as
/// readiness checks: served sooner, `/readyz` would answer 200 with no
/// check at all while they are being added.
pub(crate) async fn serve(
    args: &Args,
    endpoint: Option<&(SharedRegistry, Health)>,
    stop: &CancellationToken,
) -> Result<(), CliError> {
    let (Some(addr), Some((_, health))) = (args.metrics_addr, endpoint) else {
        return Ok(());
    };
    let bound = health
        .serve(addr, stop.clone())
        .await
        .map_err(|e| CliError::Run(format!("serving metrics on {addr}: {e}")))?;
    tracing::info!(%bound, "serving metrics at /metrics, health at /healthz and /readyz");
    Ok(())
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
    // the first SIGINT/SIGTERM shuts down gracefully, a second exits
    let shutdown = kcontrol_controller::signals::shutdown_on_signal()
        .map_err(|e| CliError::Run(format!("installing the signal handlers: {e}")))?;
    // the endpoint outlives the controller's shutdown, answering 503 at /readyz
    let server_stop = CancellationToken::new();
    let _stop_server = server_stop.clone().drop_guard();
    let endpoint = endpoint(args);
    let mut options = options(args, args.namespace.clone(), endpoint.clone());
    options.leader_election = leader_election;
    options.sharding = args.sharding()?;
    options.reconcile_log.clone_from(&args.reconcile_log);
    let controller = Controller::new(client, options).map_err(|e| CliError::Run(e.to_string()))?;
    serve(args, endpoint.as_ref(), &server_stop).await?;
    controller
        .run(shutdown)
        .await
        .map_err(|e| CliError::Run(e.to_string()))?;
    if controller.lost_leadership() {
        return Err(CliError::Run(
            "leader election lost: the Lease was not renewed in time".to_owned(),
        ));
    }
    if controller.lost_membership() {
        return Err(CliError::Run(
            "ring membership lost: the member Lease was not renewed in time".to_owned(),
        ));
    }
    Ok(())
}

#[cfg(all(test, not(feature = "embedded")))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn embedded_without_the_feature_is_a_usage_error() {
        let args = Args::try_parse_from(["sample-controller", "--embedded"])
            .unwrap_or_else(|e| panic!("{e}"));
        let err = run(args)
            .await
            .err()
            .unwrap_or_else(|| panic!("--embedded ran"));
        assert!(matches!(err, CliError::Usage(_)), "{err}");
        assert!(err.to_string().contains("`embedded` feature"), "{err}");
        assert_eq!(err.exit_code(), 2);
    }
}
