//! Support for kcontrol's end-to-end tests (`tests/*.rs`): where a test
//! runs ([`Env`]: an in-process kcontrol-testserver, and a real cluster
//! when `KCONTROL_E2E_KUBECONFIG` names a kubeconfig), bounded waiting
//! ([`eventually_within`], the testserver's, re-exported), and reads
//! through the API that work on both.
//!
//! This is test code: a wait that times out panics with what it waited for.
#![allow(clippy::panic)]

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Namespace};
use kcontrol_client::{
    Api, Client, Config, DeleteParams, Kubeconfig, KubeconfigOptions, ListParams, PostParams,
    RateLimit,
};
use kcontrol_testserver::TestServer;
use sample_controller::Foo;

/// The variable naming a kubeconfig of a real cluster to run the suite against.
pub const REAL_CLUSTER_ENV: &str = "KCONTROL_E2E_KUBECONFIG";

/// Where a test runs.
#[derive(Clone)]
pub struct Env {
    /// A client with no client-side rate limit (a real cluster: 50 QPS).
    pub client: Client,
    /// A namespace of the test's own.
    pub namespace: String,
    server: Option<Arc<TestServer>>,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env")
            .field("target", &self.target())
            .field("namespace", &self.namespace)
            .finish()
    }
}

static NEXT: AtomicU32 = AtomicU32::new(0);

fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{:x}{}",
        nanos ^ std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Starts logging once (RUST_LOG, default warn) for tests that want it.
pub fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
}

impl Env {
    /// An in-process kcontrol-testserver over HTTPS, with the Foo CRD
    /// installed and a namespace named after the test.
    pub async fn testserver(test: &str) -> Self {
        Self::testserver_with(test, TestServer::builder().tls(true).history_size(100_000)).await
    }

    /// [`Env::testserver`] with a server of the given options.
    pub async fn testserver_with(
        test: &str,
        builder: kcontrol_testserver::TestServerBuilder,
    ) -> Self {
        let server = builder
            .start()
            .await
            .unwrap_or_else(|e| panic!("starting the testserver: {e}"));
        let kubeconfig = Kubeconfig::from_yaml(&server.kubeconfig())
            .unwrap_or_else(|e| panic!("the testserver's kubeconfig: {e}"));
        let config = Config::from_custom_kubeconfig(&kubeconfig, &KubeconfigOptions::default())
            .unwrap_or_else(|e| panic!("the testserver's kubeconfig: {e}"))
            .with_rate_limit(None);
        let env = Self {
            client: client(config),
            namespace: format!("e2e-{test}"),
            server: Some(Arc::new(server)),
        };
        env.prepare().await;
        env
    }

    /// The cluster `KCONTROL_E2E_KUBECONFIG` names, with the Foo CRD
    /// installed and a fresh namespace; `None` when the variable is unset.
    pub async fn real_cluster(test: &str) -> Option<Self> {
        let path = std::env::var_os(REAL_CLUSTER_ENV)?;
        let options = KubeconfigOptions {
            path: Some(path.into()),
            ..KubeconfigOptions::default()
        };
        let config = Config::from_kubeconfig(&options)
            .unwrap_or_else(|e| panic!("{REAL_CLUSTER_ENV}: {e}"))
            .with_rate_limit(Some(RateLimit {
                qps: 50.0,
                burst: 100,
            }));
        let env = Self {
            client: client(config),
            namespace: format!("kcontrol-e2e-{test}-{}", unique_suffix()),
            server: None,
        };
        env.prepare().await;
        Some(env)
    }

    async fn prepare(&self) {
        sample_controller::artifacts::install_foo_crd(&self.client, Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut ns = Namespace::default();
        ns.metadata.name = Some(self.namespace.clone());
        match Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_already_exists() => {}
            Err(e) => panic!("creating namespace {}: {e}", self.namespace),
        }
    }

    /// Deletes the namespace of a real-cluster run (the testserver goes
    /// with its last handle).
    pub async fn cleanup(&self) {
        if self.server.is_none() {
            let api = Api::<Namespace>::all(self.client.clone());
            if let Err(e) = api.delete(&self.namespace, &DeleteParams::default()).await {
                eprintln!("cleanup: deleting namespace {}: {e}", self.namespace);
            }
        }
    }

    /// The in-process server, `None` on a real cluster.
    pub fn server(&self) -> Option<&TestServer> {
        self.server.as_deref()
    }

    /// `"testserver"` or `"real cluster"`.
    pub fn target(&self) -> &'static str {
        if self.server.is_some() {
            "testserver"
        } else {
            "real cluster"
        }
    }

    /// How long to wait for something that takes `on_testserver` there: a
    /// real cluster pulls images and starts pods, so it gets longer.
    pub fn patience(&self, on_testserver: Duration) -> Duration {
        if self.server.is_some() {
            on_testserver
        } else {
            on_testserver * 10 + Duration::from_secs(120)
        }
    }

    /// Foos of the test's namespace.
    pub fn foos(&self) -> Api<Foo> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Deployments of the test's namespace.
    pub fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Every Event of the test's namespace about the object `name`.
    pub async fn events_about(&self, name: &str) -> Vec<Event> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), &self.namespace);
        match api.list(&ListParams::default()).await {
            Ok(list) => list
                .items
                .into_iter()
                .filter(|e| e.involved_object.name.as_deref() == Some(name))
                .collect(),
            Err(e) => panic!("listing events: {e}"),
        }
    }
}

fn client(config: Config) -> Client {
    Client::new(config).unwrap_or_else(|e| panic!("building a client: {e}"))
}

/// Runs `body` on the testserver, then on the real cluster of
/// `KCONTROL_E2E_KUBECONFIG`, or prints one line saying that part was skipped.
// the skip line is for the person running the suite: it goes to stdout,
// which the test harness shows with `--nocapture`
#[allow(clippy::print_stdout)]
pub async fn on_each_target<F, Fut>(test: &str, body: F)
where
    F: Fn(Env) -> Fut,
    Fut: Future<Output = ()>,
{
    body(Env::testserver(test).await).await;
    match Env::real_cluster(test).await {
        Some(env) => {
            body(env.clone()).await;
            env.cleanup().await;
        }
        None => println!("{test}: real-cluster part skipped ({REAL_CLUSTER_ENV} is not set)"),
    }
}

pub use kcontrol_testserver::{eventually, eventually_within};

/// A controller running in-process, watching the test's namespace only.
pub struct RunningController {
    /// The controller (its caches and counters).
    pub controller: Arc<sample_controller::controller::Controller>,
    shutdown: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<Result<(), sample_controller::controller::ControllerError>>,
}

impl RunningController {
    /// Starts a controller with `workers` workers and waits until its caches
    /// have synced.
    pub async fn start(env: &Env, workers: usize) -> Self {
        let options = sample_controller::controller::ControllerOptions {
            workers,
            namespace: Some(env.namespace.clone()),
            // the fault tests end watches every 150 ms: with client-go's
            // backoff (doubling to 30 s) the informers would spend most of
            // the test waiting; the backoff itself is proven by the
            // reflector's tests
            reflector_backoff: kcontrol_informer::BackoffConfig {
                initial: Duration::from_millis(50),
                max: Duration::from_secs(1),
                ..Default::default()
            },
            ..Default::default()
        };
        let controller = Arc::new(
            sample_controller::controller::Controller::new(env.client.clone(), options)
                .unwrap_or_else(|e| panic!("starting the controller: {e}")),
        );
        let shutdown = tokio_util::sync::CancellationToken::new();
        let task = {
            let controller = Arc::clone(&controller);
            let shutdown = shutdown.clone();
            tokio::spawn(async move { controller.run(shutdown).await })
        };
        let running = Arc::clone(&controller);
        eventually_within(
            "the controller's caches to sync",
            env.patience(Duration::from_secs(30)),
            || {
                let running = Arc::clone(&running);
                async move { running.is_running().then_some(()) }
            },
        )
        .await;
        Self {
            controller,
            shutdown,
            task,
        }
    }

    /// Stops it gracefully and waits until it has (informers stopped,
    /// queue drained, events flushed).
    pub async fn stop(self) {
        self.shutdown.cancel();
        match tokio::time::timeout(Duration::from_secs(60), self.task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => panic!("the controller failed: {e}"),
            Ok(Err(e)) => panic!("the controller task failed: {e}"),
            Err(_) => panic!("the controller did not stop within 60 s"),
        }
    }
}
