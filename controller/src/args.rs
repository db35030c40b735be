//! [`Args`]: the command-line flags every operator takes — where the API
//! server is, how fast to talk to it, what to watch, how many workers,
//! where `/metrics` and the health probes are served, leader election,
//! logging — as a clap `Args` struct to flatten into your own parser, and
//! [`Args::manager`], which sets up logging, the client and a
//! [`Manager`] from them in one call.
//!
//! ```
//! use clap::Parser;
//! use kcontrol_controller::Args;
//!
//! /// My operator.
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     kube: Args,
//!     /// A flag of my own.
//!     #[arg(long)]
//!     dry_run: bool,
//! }
//!
//! let cli = Cli::try_parse_from(["op", "--namespace", "team", "--workers", "4", "--leader-elect"]).unwrap();
//! assert_eq!(cli.kube.namespace.as_deref(), Some("team"));
//! assert_eq!(cli.kube.workers, 4);
//! assert!(cli.kube.leader_elect);
//! // a malformed flag is clap's error naming it, never a panic
//! let err = Cli::try_parse_from(["op", "--kube-api-qps", "fast"]).err().unwrap();
//! assert!(err.to_string().contains("--kube-api-qps"));
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;

use kcontrol_client::{Client, Config, ConfigError, KubeconfigOptions, RateLimit};
use tracing_subscriber::EnvFilter;

use crate::leader_election::LeaderElectionConfig;
use crate::manager::{Manager, ManagerError};

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line (for log collectors).
    Json,
}

/// The flags of an operator (see the [module docs](self)); flatten them
/// into your parser with `#[command(flatten)]`.
#[derive(Clone, Debug, clap::Args)]
#[non_exhaustive]
pub struct Args {
    /// The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else
    /// the in-cluster service account).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The API server's URL, overriding the kubeconfig's.
    #[arg(long, value_name = "URL", value_parser = parse_url)]
    pub master: Option<http::Uri>,
    /// Watch and reconcile only this namespace (default: all).
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Requests per second to the API server (client-side limit).
    #[arg(long = "kube-api-qps", value_name = "QPS", default_value = "20", value_parser = parse_qps, allow_negative_numbers = true)]
    pub qps: f64,
    /// Requests the client may send at once above the QPS.
    #[arg(long = "kube-api-burst", value_name = "N", default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub burst: u32,
    /// Reconciles running at once, per controller.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = parse_workers)]
    pub workers: usize,
    /// Where /metrics, /healthz and /readyz are served (host:port, or
    /// :port for every interface; 0 turns them off).
    #[arg(long, value_name = "ADDR", default_value = ":8080", value_parser = parse_bind_address)]
    pub metrics_bind_address: BindAddress,
    /// Run the controllers only while holding a Lease, so that of several
    /// replicas one writes.
    #[arg(long)]
    pub leader_elect: bool,
    /// The Lease's name (default: the operator's name).
    #[arg(long, value_name = "NAME")]
    pub leader_election_id: Option<String>,
    /// The Lease's namespace (default: the client's namespace, the pod's
    /// in a cluster).
    #[arg(long, value_name = "NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// Sync caches through WatchList streaming (`sendInitialEvents`)
    /// where the server supports it, instead of lists (client-go's
    /// `WatchListClient` feature).
    #[arg(long)]
    pub watch_list: bool,
    /// How log lines are written.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// What is logged: a level (info, debug...) or tracing's filter syntax
    /// (`info,kcontrol_reflector=debug`); default $RUST_LOG, else info.
    #[arg(long, value_name = "FILTER", value_parser = parse_filter)]
    pub log_level: Option<String>,
}

/// Where the health and metrics server listens: an address, or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindAddress {
    /// Not served.
    Off,
    /// Served on this address (port 0: any free port).
    On(SocketAddr),
}

/// Why [`Args`] could not set up the operator.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArgsError {
    /// No usable client configuration (kubeconfig, context, in-cluster).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The client could not be built from it.
    #[error(transparent)]
    Client(#[from] kcontrol_client::Error),
    /// The manager could not start (the health address cannot be bound).
    #[error(transparent)]
    Manager(#[from] ManagerError),
}

fn parse_url(s: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = s.parse().map_err(|e| format!("not a URL: {e}"))?;
    if uri.scheme().is_none() || uri.host().is_none() {
        return Err("expected a URL such as https://10.0.0.1:6443".to_owned());
    }
    Ok(uri)
}

fn parse_qps(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(qps) if qps.is_finite() && qps > 0.0 => Ok(qps),
        Ok(_) => Err("must be a positive number".to_owned()),
        Err(e) => Err(format!("not a number: {e}")),
    }
}

fn parse_workers(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("at least one worker is needed".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a count: {e}")),
    }
}

/// `host:port`, `:port` (every interface, as Go programs take it), or `0`.
fn parse_bind_address(s: &str) -> Result<BindAddress, String> {
    if s == "0" {
        return Ok(BindAddress::Off);
    }
    let full = match s.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => s.to_owned(),
    };
    full.parse()
        .map(BindAddress::On)
        .map_err(|e| format!("expected host:port, :port or 0 ({e})"))
}

fn parse_filter(s: &str) -> Result<String, String> {
    EnvFilter::try_new(s)
        .map(|_| s.to_owned())
        .map_err(|e| format!("not a log filter: {e}"))
}

impl Args {
    /// The client configuration the flags select: `--kubeconfig` and
    /// `--context` (else the usual kubeconfig, else in-cluster),
    /// `--master` over its server, `--kube-api-qps` and `--kube-api-burst`.
    ///
    /// # Errors
    /// When no configuration can be loaded (the error names the file and
    /// field, or both attempts of the inference).
    pub fn config(&self) -> Result<Config, ConfigError> {
        let mut config = if self.kubeconfig.is_some() || self.context.is_some() {
            Config::from_kubeconfig(&KubeconfigOptions {
                path: self.kubeconfig.clone(),
                context: self.context.clone(),
                ..KubeconfigOptions::default()
            })?
        } else {
            match (Config::infer(), &self.master) {
                (Ok(config), _) => config,
                // client-go: a master URL alone is a configuration
                (Err(_), Some(master)) => Config::new(master.clone()),
                (Err(e), None) => return Err(e),
            }
        };
        if let Some(master) = &self.master {
            config.cluster_url = master.clone();
        }
        Ok(config.with_rate_limit(Some(RateLimit {
            qps: self.qps,
            burst: self.burst,
        })))
    }

    /// Sets up logging as `--log-format` and `--log-level` say, once per
    /// process; false when a global subscriber was already set (it is
    /// kept).
    pub fn init_logging(&self) -> bool {
        let filter = match &self.log_level {
            Some(level) => EnvFilter::try_new(level),
            None => EnvFilter::try_from_default_env().or_else(|_| EnvFilter::try_new("info")),
        }
        .unwrap_or_else(|_| EnvFilter::new("info"));
        let builder = tracing_subscriber::fmt().with_env_filter(filter);
        match self.log_format {
            LogFormat::Text => builder.try_init().is_ok(),
            LogFormat::Json => builder.json().try_init().is_ok(),
        }
    }

    /// The client the flags select ([`config`](Self::config)).
    ///
    /// # Errors
    /// As [`config`](Self::config), or when the client cannot be built
    /// (a TLS setting it cannot use).
    pub fn client(&self) -> Result<Client, ArgsError> {
        Ok(Client::new(self.config()?)?)
    }

    /// The operator named `name`, set up in one call: logging
    /// ([`init_logging`](Self::init_logging)), the [`client`](Self::client),
    /// and a [`Manager`] on it — watching `--namespace` (through WatchList
    /// with `--watch-list`), `--workers` per
    /// controller, metrics and health served on `--metrics-bind-address`
    /// (bound now, so a taken port fails here), and with `--leader-elect`
    /// the Lease `--leader-election-id` (default `name`) in
    /// `--leader-election-namespace` (default the client's namespace).
    ///
    /// # Errors
    /// [`ArgsError`]: no configuration, no client, or the address cannot
    /// be bound.
    pub async fn manager(&self, name: &str) -> Result<Manager, ArgsError> {
        self.init_logging();
        let client = self.client()?;
        Ok(self.manager_on(client, name).await?)
    }

    /// [`manager`](Self::manager) on a client of your own (the flags that
    /// build a client are not used).
    ///
    /// # Errors
    /// When the health address cannot be bound.
    pub async fn manager_on(&self, client: Client, name: &str) -> Result<Manager, ManagerError> {
        let lease_namespace = self
            .leader_election_namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_owned());
        let mut manager = Manager::with_scope(client, self.namespace.clone()).workers(self.workers);
        if self.watch_list {
            let watch_config = manager.factory().watch_config().use_watch_list(true);
            manager = manager.watch_config(watch_config);
        }
        if self.leader_elect {
            let lease = self.leader_election_id.as_deref().unwrap_or(name);
            manager = manager.leader_election(LeaderElectionConfig::new(lease_namespace, lease));
        }
        if let BindAddress::On(addr) = self.metrics_bind_address {
            manager.serve_health(addr).await?;
        }
        Ok(manager)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(flags: &[&str]) -> Result<Args, String> {
        let argv = std::iter::once("op").chain(flags.iter().copied());
        Cli::try_parse_from(argv)
            .map(|c| c.args)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_an_operator_s() {
        let args = parse(&[]).unwrap();
        assert_eq!((args.qps, args.burst, args.workers), (20.0, 30, 2));
        assert_eq!(
            args.metrics_bind_address,
            BindAddress::On("0.0.0.0:8080".parse().unwrap())
        );
        assert!(!args.leader_elect);
        assert_eq!(args.log_format, LogFormat::Text);
    }

    #[test]
    fn every_flag_parses() {
        let args = parse(&[
            "--kubeconfig",
            "/tmp/kc",
            "--context",
            "dev",
            "--master",
            "https://10.0.0.1:6443",
            "-n",
            "team",
            "--kube-api-qps",
            "50.5",
            "--kube-api-burst",
            "100",
            "--workers",
            "8",
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--leader-elect",
            "--leader-election-id",
            "my-lock",
            "--leader-election-namespace",
            "ops",
            "--watch-list",
            "--log-format",
            "json",
            "--log-level",
            "info,kcontrol_reflector=debug",
        ])
        .unwrap();
        assert_eq!(args.kubeconfig, Some(PathBuf::from("/tmp/kc")));
        assert_eq!(args.master.unwrap().host(), Some("10.0.0.1"));
        assert_eq!((args.qps, args.burst, args.workers), (50.5, 100, 8));
        assert_eq!(
            args.metrics_bind_address,
            BindAddress::On("127.0.0.1:0".parse().unwrap())
        );
        assert_eq!(args.leader_election_id.as_deref(), Some("my-lock"));
        assert!(args.watch_list);
        assert_eq!(args.log_format, LogFormat::Json);
        assert_eq!(
            parse(&["--metrics-bind-address", "0"])
                .unwrap()
                .metrics_bind_address,
            BindAddress::Off
        );
    }

    /// `--watch-list` reaches the manager's informers; without it they
    /// list, managedFields dropped either way.
    #[tokio::test]
    async fn watch_list_reaches_the_managers_informers() {
        let client = Client::new(Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
        for (flags, watch_list) in [
            (&["--metrics-bind-address", "0"][..], false),
            (&["--metrics-bind-address", "0", "--watch-list"][..], true),
        ] {
            let manager = parse(flags)
                .unwrap()
                .manager_on(client.clone(), "op")
                .await
                .unwrap();
            let config = manager.factory().watch_config();
            assert_eq!(config.use_watch_list, watch_list, "{flags:?}");
            assert!(config.strip_managed_fields);
        }
    }

    #[test]
    fn malformed_flags_are_clap_errors_naming_the_flag() {
        for (flags, named) in [
            (&["--kube-api-qps", "0"][..], "--kube-api-qps"),
            (&["--kube-api-qps", "-3"], "--kube-api-qps"),
            (&["--kube-api-qps", "NaN"], "--kube-api-qps"),
            (&["--kube-api-burst", "0"], "--kube-api-burst"),
            (&["--workers", "0"], "--workers"),
            (&["--workers", "many"], "--workers"),
            (
                &["--metrics-bind-address", "localhost"],
                "--metrics-bind-address",
            ),
            (
                &["--metrics-bind-address", ":99999"],
                "--metrics-bind-address",
            ),
            (&["--master", "not a url"], "--master"),
            (&["--master", "/relative"], "--master"),
            (&["--log-format", "xml"], "--log-format"),
            (&["--log-level", "info,=["], "--log-level"),
            (&["--no-such-flag"], "--no-such-flag"),
        ] {
            let err = parse(flags).unwrap_err();
            assert!(err.contains(named), "{flags:?}: {err}");
        }
    }
}
