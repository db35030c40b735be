//! `kcontrol-testserver`: runs the in-process Kubernetes API server as a
//! program, prints its URL, writes a kubeconfig on request, and serves
//! until Ctrl-C.

use clap::Parser;
use kcontrol_testserver::TestServer;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// A Kubernetes API server for tests and demos.
#[derive(Parser, Debug)]
#[command(name = "kcontrol-testserver", version, about)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Write a kubeconfig for the server to this file.
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Serve HTTPS with a CA generated at start.
    #[arg(long)]
    tls: bool,
    /// Require this bearer token.
    #[arg(long)]
    token: Option<String>,
    /// Require a client certificate (implies --tls; the kubeconfig carries one).
    #[arg(long)]
    client_cert_auth: bool,
    /// Events retained per resource (the watch-cache window).
    #[arg(long, default_value_t = 10_000)]
    history_size: usize,
    /// Seconds between watch bookmarks.
    #[arg(long, default_value_t = 60)]
    bookmark_interval: u64,
    /// Delay of the Deployment status simulator in milliseconds.
    #[arg(long, default_value_t = 100)]
    deployment_delay_ms: u64,
    /// Turn the Deployment status simulator off.
    #[arg(long)]
    no_deployment_simulator: bool,
    /// Start with this many Ready Nodes (pods then run, workloads get pods).
    #[arg(long, default_value_t = 0)]
    nodes: usize,
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut builder = TestServer::builder()
        .listen(args.listen)
        .tls(args.tls)
        .client_cert_auth(args.client_cert_auth)
        .history_size(args.history_size)
        .nodes(args.nodes)
        .bookmark_interval(Duration::from_secs(args.bookmark_interval.max(1)))
        .deployment_simulator(
            (!args.no_deployment_simulator)
                .then(|| Duration::from_millis(args.deployment_delay_ms)),
        );
    if let Some(t) = args.token {
        builder = builder.bearer_token(t);
    }
    let server = builder.start().await?;
    if let Some(path) = &args.kubeconfig_out {
        server
            .write_kubeconfig(path)
            .map_err(|e| format!("writing the kubeconfig to {}: {e}", path.display()))?;
    }
    #[allow(clippy::print_stdout)]
    {
        println!("{}", server.url());
    }
    shutdown_signal().await;
    server.shutdown().await;
    Ok(())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
        match term {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("RUST_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kcontrol-testserver: {e}");
            ExitCode::FAILURE
        }
    }
}
