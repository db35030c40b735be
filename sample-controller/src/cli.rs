//! The command line: flags ([`Args`]), the client configuration they
//! select ([`client_config`]), and exit codes ([`CliError::exit_code`]):
//! 0 success, 1 a failure while running, 2 bad flags or configuration.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use kcontrol_client::{Config, ConfigError, KubeconfigOptions, RateLimit};
use kcontrol_controller::{LeaderElectionConfig, ShardingConfig};

/// client-go's default client-side rate limit.
pub const DEFAULT_QPS: f64 = 5.0;
/// client-go's default burst.
pub const DEFAULT_BURST: u32 = 10;
/// The embedded demo's rate limit: its server is in-process, so the limit
/// only keeps the demo from looking like a load test.
pub const EMBEDDED_QPS: f64 = 500.0;
/// The embedded demo's burst.
pub const EMBEDDED_BURST: u32 = 1000;

/// Foo → Deployment controller (kubernetes/sample-controller, on kcontrol).
///
/// Watches Foos (samplecontroller.k8s.io/v1alpha1) and Deployments, and for
/// each Foo keeps a Deployment of nginx with the Foo's replicas, reporting
/// the available replicas in the Foo's status. With --embedded it runs a
/// whole demo with no cluster: an in-process API server, the Foo CRD, a few
/// Foos, and the controller converging them.
#[derive(Clone, Debug, Parser)]
#[command(name = "sample-controller", version, about, long_about)]
pub struct Args {
    /// Path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, then the
    /// in-cluster service account).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use instead of current-context.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,

    /// The API server URL; overrides the kubeconfig's server.
    #[arg(long, value_name = "URL", value_parser = parse_master)]
    pub master: Option<http::Uri>,

    /// Watch Foos and Deployments in this namespace only (default: all).
    #[arg(long, short = 'n', value_name = "NS")]
    pub namespace: Option<String>,

    /// Workers draining the work queue.
    #[arg(long, value_name = "N", default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub workers: u32,

    /// Informer resync period, e.g. 30s or 10m (0 turns resyncs off).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub resync_period: Duration,

    /// Serve Prometheus metrics (work queue, informers, controller) at
    /// http://ADDR/metrics.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,

    /// Client-side requests per second (default 5, client-go's; 500 with --embedded).
    #[arg(long, value_name = "Q", value_parser = parse_qps)]
    pub qps: Option<f64>,

    /// Client-side burst (default 10, client-go's; 1000 with --embedded).
    #[arg(long, value_name = "B", value_parser = clap::value_parser!(u32).range(1..))]
    pub burst: Option<u32>,

    /// Run the demo: an in-process API server, the Foo CRD, --foos Foos,
    /// and the controller, with live progress.
    #[arg(long, conflicts_with_all = ["kubeconfig", "context", "master"])]
    pub embedded: bool,

    /// Foos the demo creates (replicas 1 to 3).
    #[arg(long, value_name = "N", requires = "embedded",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub foos: Option<u32>,

    /// Exit 0 once every Foo's status matches its Deployment (exit 1 after
    /// --timeout), instead of running until Ctrl-C.
    #[arg(long, requires = "embedded")]
    pub until_synced: bool,

    /// The bound of --until-synced (default: 60s plus 20ms per Foo).
    #[arg(long, value_name = "DURATION", requires = "until_synced", value_parser = parse_duration)]
    pub timeout: Option<Duration>,

    /// Run workers only while this replica holds a coordination.k8s.io/v1
    /// Lease (informers run on standbys too, keeping their caches warm).
    #[arg(long)]
    pub leader_elect: bool,

    /// The Lease's namespace (default: --namespace, else "default").
    #[arg(long, value_name = "NS", requires = "leader_elect")]
    pub leader_elect_namespace: Option<String>,

    /// The Lease's name.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "sample-controller",
        requires = "leader_elect"
    )]
    pub leader_elect_name: String,

    /// This replica's identity in the Lease (default: hostname and a random suffix).
    #[arg(long, value_name = "ID", requires = "leader_elect")]
    pub leader_elect_identity: Option<String>,

    /// How long a standby waits, after it last saw the Lease change, before
    /// it takes the Lease (whole seconds).
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: Duration,

    /// How long the leader keeps trying to renew before it stops leading.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: Duration,

    /// Between two tries to acquire or renew the Lease.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: Duration,

    /// Shard the Foos across the replicas running with this ring name: each
    /// holds a member Lease, caches and reconciles only the Foos (and
    /// Deployments) labelled with its member name; the replica elected on
    /// the Lease `<ring>-sharder` assigns them. Lease timings: the
    /// --leader-elect-* durations.
    #[arg(long, value_name = "RING", conflicts_with_all = ["leader_elect", "embedded"])]
    pub shard_ring: Option<String>,

    /// The namespace of the ring's Leases (default: --namespace, else "default").
    #[arg(long, value_name = "NS", requires = "shard_ring")]
    pub shard_namespace: Option<String>,

    /// This replica's member name in the ring (a DNS label; default: the
    /// host name and a random suffix).
    #[arg(long, value_name = "NAME", requires = "shard_ring")]
    pub shard_member: Option<String>,

    /// Append one line per reconcile to this file: `<replica> <key>
    /// <start> <end>` (nanoseconds since the Unix epoch), for checking
    /// that no key was reconciled by two replicas at once.
    #[arg(long, value_name = "PATH")]
    pub reconcile_log: Option<PathBuf>,

    /// Log lines as text or as JSON objects (one a line).
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

/// The default number of Foos of the demo.
pub const DEFAULT_FOOS: u32 = 3;

impl Args {
    /// Foos the demo creates.
    pub fn foo_count(&self) -> u32 {
        self.foos.unwrap_or(DEFAULT_FOOS)
    }

    /// The bound of `--until-synced`.
    pub fn until_synced_timeout(&self) -> Duration {
        self.timeout.unwrap_or_else(|| {
            Duration::from_secs(60) + Duration::from_millis(20) * self.foo_count()
        })
    }

    /// The client-side rate limit the flags ask for.
    pub fn rate_limit(&self) -> RateLimit {
        let (qps, burst) = if self.embedded {
            (EMBEDDED_QPS, EMBEDDED_BURST)
        } else {
            (DEFAULT_QPS, DEFAULT_BURST)
        };
        RateLimit {
            qps: self.qps.unwrap_or(qps),
            burst: self.burst.unwrap_or(burst),
        }
    }

    /// The leader election the flags ask for (`None` without
    /// `--leader-elect`); a bad combination of durations is a usage error.
    pub fn leader_election(&self) -> Result<Option<LeaderElectionConfig>, CliError> {
        if !self.leader_elect {
            return Ok(None);
        }
        let namespace = self
            .leader_elect_namespace
            .clone()
            .or_else(|| self.namespace.clone())
            .unwrap_or_else(|| "default".to_owned());
        let mut config = LeaderElectionConfig::new(namespace, self.leader_elect_name.clone());
        if let Some(identity) = &self.leader_elect_identity {
            config.identity.clone_from(identity);
        }
        config.lease_duration = self.leader_elect_lease_duration;
        config.renew_deadline = self.leader_elect_renew_deadline;
        config.retry_period = self.leader_elect_retry_period;
        config
            .validate()
            .map_err(|e| CliError::Usage(e.to_string()))?;
        Ok(Some(config))
    }

    /// The sharding the flags ask for (`None` without `--shard-ring`); bad
    /// names or durations are usage errors.
    pub fn sharding(&self) -> Result<Option<ShardingConfig>, CliError> {
        let Some(ring) = &self.shard_ring else {
            return Ok(None);
        };
        let namespace = self
            .shard_namespace
            .clone()
            .or_else(|| self.namespace.clone())
            .unwrap_or_else(|| "default".to_owned());
        let mut config = ShardingConfig::new(namespace, ring.clone()).lease_timings(
            self.leader_elect_lease_duration,
            self.leader_elect_renew_deadline,
            self.leader_elect_retry_period,
        );
        if let Some(member) = &self.shard_member {
            config = config.member(member.clone());
        }
        config
            .validate()
            .map_err(|e| CliError::Usage(e.to_string()))?;
        Ok(Some(config))
    }

    /// The informers' resync period; `None` when turned off.
    pub fn resync(&self) -> Option<Duration> {
        (!self.resync_period.is_zero()).then_some(self.resync_period)
    }
}

/// Why the program stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The configuration could not be loaded (kubeconfig, in-cluster).
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// A client could not be built from the configuration (TLS material...).
    #[error("{0}")]
    Client(kcontrol_client::Error),
    /// The flags are valid one by one but not together.
    #[error("{0}")]
    Usage(String),
    /// Something failed while running.
    #[error("{0}")]
    Run(String),
}

impl CliError {
    /// 2 for configuration errors (like clap's for bad flags), 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Config(_) | Self::Client(_) | Self::Usage(_) => 2,
            Self::Run(_) => 1,
        }
    }
}

/// Parses a duration such as `30s`, `10m`, `1h30m` or `0`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("{e} (expected a duration such as 30s, 10m or 1h30m)"))
}

fn parse_qps(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(q) if q.is_finite() && q > 0.0 => Ok(q),
        _ => Err("expected a number of requests per second greater than 0".to_owned()),
    }
}

fn parse_master(text: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = text.trim().parse().map_err(|e| format!("{e}"))?;
    match (uri.scheme_str(), uri.authority()) {
        (Some("http" | "https"), Some(_)) => Ok(uri),
        _ => Err("expected a URL such as https://10.0.0.1:6443".to_owned()),
    }
}

/// The client configuration the flags select, as client-go's
/// `BuildConfigFromFlags` does: `--kubeconfig` (and `--context`), else the
/// default kubeconfig or the in-cluster service account; `--master`
/// replaces the server URL (and alone, with no kubeconfig anywhere, is
/// enough). The rate limit comes from `--qps` / `--burst`.
pub fn client_config(args: &Args) -> Result<Config, CliError> {
    let options = KubeconfigOptions {
        path: args.kubeconfig.clone(),
        context: args.context.clone(),
        ..KubeconfigOptions::default()
    };
    let explicit = args.kubeconfig.is_some() || args.context.is_some();
    let mut config = match &args.master {
        Some(master) if !explicit => match Config::from_kubeconfig(&options) {
            Ok(config) => config,
            Err(ConfigError::NoKubeconfig(_)) => Config::new(master.clone()),
            Err(e) => return Err(e.into()),
        },
        _ if explicit => Config::from_kubeconfig(&options)?,
        _ => Config::infer()?,
    };
    if let Some(master) = &args.master {
        config.cluster_url = master.clone();
    }
    config.rate_limit = Some(args.rate_limit());
    config.user_agent = format!(
        "sample-controller/{} (kcontrol; {}/{})",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH
    );
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("sample-controller").chain(args.iter().copied()))
    }

    #[test]
    fn defaults_are_client_go_s() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.workers, 2);
        assert_eq!(a.resync(), Some(Duration::from_secs(30)));
        assert_eq!(
            a.rate_limit(),
            RateLimit {
                qps: 5.0,
                burst: 10
            }
        );
        assert!(!a.embedded);
        assert_eq!(a.foo_count(), 3);
    }

    #[test]
    fn every_flag_parses() {
        let a = parse(&[
            "--kubeconfig",
            "/tmp/kc",
            "--context",
            "dev",
            "--master",
            "https://10.0.0.1:6443",
            "--namespace",
            "team",
            "--workers",
            "8",
            "--resync-period",
            "10m",
            "--metrics-addr",
            "127.0.0.1:9090",
            "--qps",
            "50.5",
            "--burst",
            "100",
        ])
        .unwrap();
        assert_eq!(
            a.kubeconfig.as_deref(),
            Some(std::path::Path::new("/tmp/kc"))
        );
        assert_eq!(a.context.as_deref(), Some("dev"));
        assert_eq!(a.master.unwrap().to_string(), "https://10.0.0.1:6443/");
        assert_eq!(a.namespace.as_deref(), Some("team"));
        assert_eq!(a.workers, 8);
        assert_eq!(a.resync_period, Duration::from_secs(600));
        assert_eq!(a.metrics_addr.unwrap().port(), 9090);
        assert_eq!(a.qps, Some(50.5));
        assert_eq!(a.burst, Some(100));
        assert_eq!(parse(&["--resync-period", "0"]).unwrap().resync(), None);
    }

    #[test]
    fn the_demo_flags() {
        let a = parse(&["--embedded", "--foos", "10", "--until-synced"]).unwrap();
        assert!(a.embedded && a.until_synced);
        assert_eq!(a.foo_count(), 10);
        assert_eq!(a.until_synced_timeout(), Duration::from_millis(60_200));
        assert_eq!(
            a.rate_limit(),
            RateLimit {
                qps: 500.0,
                burst: 1000
            }
        );
        let a = parse(&[
            "--embedded",
            "--until-synced",
            "--timeout",
            "5s",
            "--qps",
            "7",
        ])
        .unwrap();
        assert_eq!(a.until_synced_timeout(), Duration::from_secs(5));
        assert_eq!(a.rate_limit().qps, 7.0);
    }

    #[test]
    fn bad_flags_are_usage_errors() {
        for bad in [
            &["--workers", "0"][..],
            &["--workers", "many"],
            &["--resync-period", "soon"],
            &["--qps", "0"],
            &["--qps", "-1"],
            &["--burst", "0"],
            &["--master", "not a url"],
            &["--master", "ftp://x"],
            &["--metrics-addr", "localhost"],
            &["--foos", "3"],
            &["--until-synced"],
            &["--embedded", "--kubeconfig", "/tmp/kc"],
            &["--embedded", "--foos", "0"],
            &["--unknown"],
        ] {
            let err = parse(bad).unwrap_err();
            assert_ne!(err.kind(), ErrorKind::DisplayHelp, "{bad:?}");
            assert_eq!(err.exit_code(), 2, "{bad:?}");
        }
    }

    #[test]
    fn leader_election_flags() {
        assert!(parse(&[]).unwrap().leader_election().unwrap().is_none());
        let a = parse(&["--leader-elect", "--namespace", "team"]).unwrap();
        let c = a.leader_election().unwrap().unwrap();
        assert_eq!(
            (c.namespace.as_str(), c.name.as_str()),
            ("team", "sample-controller")
        );
        assert_eq!(c.lease_duration, Duration::from_secs(15));
        assert_eq!(c.renew_deadline, Duration::from_secs(10));
        assert_eq!(c.retry_period, Duration::from_secs(2));
        let a = parse(&[
            "--leader-elect",
            "--leader-elect-namespace",
            "ops",
            "--leader-elect-name",
            "foo-lock",
            "--leader-elect-identity",
            "me",
            "--leader-elect-lease-duration",
            "3s",
            "--leader-elect-renew-deadline",
            "2s",
            "--leader-elect-retry-period",
            "500ms",
        ])
        .unwrap();
        let c = a.leader_election().unwrap().unwrap();
        assert_eq!(
            (c.namespace.as_str(), c.name.as_str(), c.identity.as_str()),
            ("ops", "foo-lock", "me")
        );
        let bad = parse(&["--leader-elect", "--leader-elect-renew-deadline", "20s"]).unwrap();
        assert_eq!(bad.leader_election().unwrap_err().exit_code(), 2);
        assert!(
            parse(&["--leader-elect-name", "x"]).is_err(),
            "requires --leader-elect"
        );
        assert!(parse(&["--log-format", "xml"]).is_err());
        assert_eq!(parse(&["--log-format", "json"]).unwrap().log_format, "json");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("30").unwrap_err().contains("30s"));
    }

    #[test]
    fn kubeconfig_flags_select_the_configuration() {
        let dir = std::env::temp_dir().join(format!("sc-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad = dir.join("bad.yaml");
        std::fs::write(&bad, "clusters: [this is: not, valid").unwrap();
        let err =
            client_config(&parse(&["--kubeconfig", bad.to_str().unwrap()]).unwrap()).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("bad.yaml"), "{err}");

        let missing = dir.join("missing.yaml");
        let err = client_config(&parse(&["--kubeconfig", missing.to_str().unwrap()]).unwrap())
            .unwrap_err();
        assert!(err.to_string().contains("missing.yaml"), "{err}");

        let good = dir.join("good.yaml");
        std::fs::write(
            &good,
            "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n\
             users: [{name: u, user: {}}]\n\
             contexts: [{name: x, context: {cluster: c, user: u, namespace: team}}]\n\
             current-context: x\n",
        )
        .unwrap();
        let config = client_config(
            &parse(&[
                "--kubeconfig",
                good.to_str().unwrap(),
                "--master",
                "http://127.0.0.1:2",
                "--qps",
                "9",
            ])
            .unwrap(),
        )
        .unwrap();
        assert_eq!(config.cluster_url.to_string(), "http://127.0.0.1:2/");
        assert_eq!(config.default_namespace, "team");
        assert_eq!(config.rate_limit.unwrap().qps, 9.0);
        assert!(config.user_agent.starts_with("sample-controller/"));
        let err = client_config(
            &parse(&["--kubeconfig", good.to_str().unwrap(), "--context", "nope"]).unwrap(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
