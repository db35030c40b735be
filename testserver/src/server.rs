//! [`TestServer`]: start, address, CA, kubeconfig, fault injection,
//! counters and request log, in-process access to the stored objects,
//! shutdown; and [`BlockingTestServer`] for tests and programs without an
//! async runtime of their own.

use crate::faults::Faults;
use crate::flow_control::FlowControl;
use crate::http::{self, HttpConfig, State};
use crate::kubeconfig::{self, KubeconfigUser};
use crate::metrics::{Counters, Metrics, RequestRecord};
use crate::objects::Objects;
use crate::resource::ResourceInfo;
use crate::rest::Core;
use crate::status::StatusError;
use crate::tls::Pki;
use crate::Error;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Options of a [`TestServer`]; see [`TestServer::builder`].
#[derive(Clone)]
pub struct TestServerBuilder {
    listen: SocketAddr,
    tls: bool,
    token: Option<String>,
    client_cert_auth: bool,
    history: usize,
    bookmark_interval: Duration,
    default_watch_timeout: Duration,
    too_large_rv_wait: Duration,
    deployment_simulator: Option<Duration>,
    request_log_capacity: usize,
    max_in_flight: Option<usize>,
    nodes: usize,
    resources: Vec<ResourceInfo>,
}

impl std::fmt::Debug for TestServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServerBuilder")
            .field("listen", &self.listen)
            .field("tls", &self.tls)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("client_cert_auth", &self.client_cert_auth)
            .field("history", &self.history)
            .field("bookmark_interval", &self.bookmark_interval)
            .field("deployment_simulator", &self.deployment_simulator)
            .field("max_in_flight", &self.max_in_flight)
            .field("nodes", &self.nodes)
            .finish_non_exhaustive()
    }
}

impl Default for TestServerBuilder {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: false,
            token: None,
            client_cert_auth: false,
            history: 10_000,
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(1800),
            too_large_rv_wait: Duration::from_secs(3),
            deployment_simulator: Some(Duration::from_millis(100)),
            request_log_capacity: 100_000,
            max_in_flight: None,
            nodes: 0,
            resources: Vec::new(),
        }
    }
}

impl TestServerBuilder {
    /// Address to bind (default `127.0.0.1:0`, a free port).
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Serve HTTPS with a CA generated at start (default: plain HTTP).
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }

    /// Require `Authorization: Bearer <token>` (or a client certificate,
    /// when that is enabled too).
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Require a client certificate signed by the server's CA (implies
    /// TLS; the kubeconfig carries one).
    pub fn client_cert_auth(mut self, on: bool) -> Self {
        self.client_cert_auth = on;
        if on {
            self.tls = true;
        }
        self
    }

    /// Events retained per resource (the watch-cache window; default 10,000).
    pub fn history_size(mut self, events: usize) -> Self {
        self.history = events.max(1);
        self
    }

    /// Period of BOOKMARK events on watches that allow them (default 1 min).
    pub fn bookmark_interval(mut self, d: Duration) -> Self {
        self.bookmark_interval = d;
        self
    }

    /// Watch duration when a request gives no `timeoutSeconds` (default 30 min).
    pub fn default_watch_timeout(mut self, d: Duration) -> Self {
        self.default_watch_timeout = d;
        self
    }

    /// How long a request for a future resourceVersion waits before 504
    /// (default 3 s, as kube-apiserver).
    pub fn too_large_resource_version_wait(mut self, d: Duration) -> Self {
        self.too_large_rv_wait = d;
        self
    }

    /// The Deployment status simulator's delay, `None` to turn it off
    /// (default 100 ms).
    pub fn deployment_simulator(mut self, delay: Option<Duration>) -> Self {
        self.deployment_simulator = delay;
        self
    }

    /// Requests kept in the request log (default 100,000; 0 keeps none).
    pub fn request_log_capacity(mut self, n: usize) -> Self {
        self.request_log_capacity = n;
        self
    }

    /// At most `limit` API requests in flight, as kube-apiserver's priority
    /// and fairness seats them: beyond it a request is answered 429 with
    /// `Retry-After: 1`; a watch holds its seat only until its initial
    /// events are sent (default: no limit; [`Faults::limit_in_flight`]
    /// changes it while serving).
    pub fn max_requests_in_flight(mut self, limit: usize) -> Self {
        self.max_in_flight = Some(limit).filter(|l| *l > 0);
        self
    }

    /// Starts with `n` Ready Nodes (`node-0`, `node-1`, …; default none).
    /// With Nodes, pods are scheduled and run, and Deployments (through
    /// their ReplicaSets), ReplicaSets, StatefulSets, DaemonSets and Jobs
    /// get pods and report their real status; see
    /// [`TestServer::add_node`].
    pub fn nodes(mut self, n: usize) -> Self {
        self.nodes = n;
        self
    }

    /// Serves a resource the built-in table lacks from the start; see
    /// [`TestServer::register_resource`].
    pub fn resource(mut self, info: ResourceInfo) -> Self {
        self.resources.push(info);
        self
    }

    /// Binds, starts serving and returns the running server. Must be called
    /// inside a Tokio runtime (multi-threaded recommended).
    pub async fn start(self) -> Result<TestServer, Error> {
        let listener = tokio::net::TcpListener::bind(self.listen).await?;
        let addr = listener.local_addr()?;
        let pki = if self.tls {
            Some(Pki::generate()?)
        } else {
            None
        };
        let acceptor = match &pki {
            Some(p) => Some(tokio_rustls::TlsAcceptor::from(p.server_config()?)),
            None => None,
        };
        let scheme = if self.tls { "https" } else { "http" };
        let url = format!("{scheme}://{addr}");
        let (core, inputs) = Core::new(self.history, self.deployment_simulator, addr.port());
        for info in self.resources {
            core.register_resource(info);
        }
        for i in 0..self.nodes {
            crate::controllers::nodes::add_node(&core, &format!("node-{i}"))
                .map_err(|e| Error::Io(std::io::Error::other(e.to_string())))?;
        }
        let flow_control = Arc::new(FlowControl::new(self.max_in_flight));
        let faults = Faults::new(core.clone(), flow_control);
        let metrics = Arc::new(Metrics::new(self.request_log_capacity));
        let admission = Arc::new(crate::admission::Admission::default());
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let state = Arc::new(State {
            core: core.clone(),
            admission: admission.clone(),
            faults: faults.clone(),
            metrics: metrics.clone(),
            config: HttpConfig {
                bookmark_interval: self.bookmark_interval,
                default_watch_timeout: self.default_watch_timeout,
                too_large_rv_wait: self.too_large_rv_wait,
                token: self.token.clone(),
                client_cert_auth: self.client_cert_auth,
                server_address: addr.to_string(),
            },
            shutdown: shutdown_rx.clone(),
        });
        let controllers = tokio::spawn(crate::controllers::run(
            core.clone(),
            inputs,
            shutdown_rx.clone(),
        ));
        let server = tokio::spawn(http::serve(listener, acceptor, state, shutdown_rx));
        tracing::info!(%url, "kcontrol-testserver listening");
        Ok(TestServer {
            url,
            addr,
            pki,
            token: self.token,
            core,
            admission,
            faults,
            metrics,
            shutdown: shutdown_tx,
            tasks: vec![server, controllers],
        })
    }

    /// Starts the server on a runtime of its own (two worker threads), for
    /// synchronous tests and programs.
    pub fn start_blocking(self) -> Result<BlockingTestServer, Error> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("kcontrol-testserver")
            .enable_all()
            .build()?;
        let server = runtime.block_on(self.start())?;
        Ok(BlockingTestServer {
            server,
            runtime: Some(runtime),
        })
    }
}
/// A running in-process Kubernetes API server. Dropping it stops serving.
pub struct TestServer {
    url: String,
    addr: SocketAddr,
    pki: Option<Pki>,
    token: Option<String>,
    core: Arc<Core>,
    admission: Arc<crate::admission::Admission>,
    faults: Faults,
    metrics: Arc<Metrics>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl TestServer {
    /// A builder with the defaults (plain HTTP on a free loopback port).
    pub fn builder() -> TestServerBuilder {
        TestServerBuilder::default()
    }

    /// Starts a server with the default options.
    pub async fn start() -> Result<Self, Error> {
        Self::builder().start().await
    }

    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The CA certificate (PEM) when serving HTTPS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.pki.as_ref().map(|p| p.ca_pem.as_str())
    }

    /// A client certificate and key (PEM) signed by the CA, when serving HTTPS.
    pub fn client_identity_pem(&self) -> Option<(&str, &str)> {
        self.pki
            .as_ref()
            .map(|p| (p.client_cert_pem.as_str(), p.client_key_pem.as_str()))
    }

    /// The bearer token the server requires, if any.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// A kubeconfig (YAML) for this server: the CA and, over HTTPS, the
    /// client certificate (so clients never prompt for credentials), plus
    /// the bearer token when one is required.
    pub fn kubeconfig(&self) -> String {
        let identity = self.client_identity_pem();
        kubeconfig::render(
            &self.url,
            self.ca_pem(),
            &KubeconfigUser {
                token: self.token.as_deref(),
                client_cert_pem: identity.map(|i| i.0),
                client_key_pem: identity.map(|i| i.1),
            },
        )
    }

    /// Writes [`kubeconfig`](Self::kubeconfig) to `path`.
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig())
    }

    /// The fault-injection handle.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Request counters.
    pub fn counters(&self) -> Counters {
        let mut c = self.metrics.counters();
        let flow_control = self.faults.flow_control();
        c.in_flight = flow_control.in_flight();
        c.rejected_in_flight = flow_control.rejected();
        c
    }

    /// The request log, oldest first.
    pub fn request_log(&self) -> Vec<RequestRecord> {
        self.metrics.requests()
    }

    /// Clears the request log and counters.
    pub fn clear_request_log(&self) {
        self.metrics.clear();
        self.faults.flow_control().clear_rejected();
    }

    /// In-process access to the stored objects.
    pub fn objects(&self) -> Objects {
        Objects::new(self.core.clone())
    }

    /// Webhooks (admission and CRD conversion) whose `clientConfig` names
    /// the Service `name` in `namespace` are called at `addr`: the server
    /// has no cluster network, so this stands for the Service's cluster IP.
    /// The URL, `Host` and TLS server name stay kube's
    /// (`https://<name>.<namespace>.svc:<port><path>`), so the webhook's
    /// certificate must be valid for `<name>.<namespace>.svc`. A Service
    /// nobody registered fails the call as an unknown Service does.
    pub fn register_service(&self, namespace: &str, name: &str, addr: SocketAddr) {
        self.admission.register_service(namespace, name, addr);
    }

    /// Adds a Ready Node named `name` (a Node object with a kubelet's
    /// status: Ready, capacity, an internal IP). Once the server has a
    /// Node, pods are bound to Nodes and reported Running and Ready (a
    /// Job's pods Succeeded); Deployments (through their ReplicaSets),
    /// ReplicaSets, StatefulSets, DaemonSets and Jobs get pods (named and
    /// labelled as kube's controllers make them, owned by the workload)
    /// and report their status from those pods. Without Nodes, workloads
    /// get no pods and Deployments report the simulated status. Also
    /// `POST /__admin/nodes?name=<name>`.
    pub fn add_node(&self, name: &str) -> Result<(), StatusError> {
        crate::controllers::nodes::add_node(&self.core, name).map(|_| ())
    }

    /// Serves a further resource: a built-in kind the table lacks
    /// (`ResourceInfo::of::<k8s_openapi::api::storage::v1::StorageClass>()`,
    /// which brings its OpenAPI schema) or any group, version and kind
    /// (`ResourceInfo::new`). It is stored with its schema's pruning (if
    /// it has one) and no further defaults, listed in discovery and
    /// `/openapi`, and replaces a resource served at the same
    /// group/version/plural.
    pub fn register_resource(&self, info: ResourceInfo) {
        self.core.register_resource(info);
    }

    /// Turns the Deployment status simulator on (with a delay) or off.
    pub fn set_deployment_simulator(&self, delay: Option<Duration>) {
        *self.core.deployment_sim.write() = delay;
    }

    /// Whether Pods can run (default true). False plays a cluster without
    /// nodes, as a kube-apiserver with no kubelet: the Deployment
    /// simulator reports each Deployment's generation observed and every
    /// replica unavailable, so none ever becomes available.
    pub fn set_nodes_ready(&self, ready: bool) {
        self.core
            .nodes_ready
            .store(ready, std::sync::atomic::Ordering::SeqCst);
    }

    /// Stops serving: open watches end, connections close.
    pub async fn shutdown(mut self) {
        self.shutdown.send_replace(true);
        for t in self.tasks.drain(..) {
            if let Err(e) = t.await {
                tracing::debug!(error = %e, "server task ended abnormally");
            }
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown.send_replace(true);
    }
}

/// A [`TestServer`] running on a runtime it owns; dereferences to the
/// [`TestServer`].
pub struct BlockingTestServer {
    server: TestServer,
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for BlockingTestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingTestServer")
            .field("server", &self.server)
            .finish()
    }
}

impl std::ops::Deref for BlockingTestServer {
    type Target = TestServer;

    fn deref(&self) -> &TestServer {
        &self.server
    }
}

impl BlockingTestServer {
    /// The runtime the server runs on (e.g. to spawn helpers next to it).
    pub fn runtime(&self) -> Option<&tokio::runtime::Runtime> {
        self.runtime.as_ref()
    }

    /// Stops the server and its runtime.
    pub fn shutdown(self) {
        drop(self);
    }
}

impl Drop for BlockingTestServer {
    fn drop(&mut self) {
        self.server.shutdown.send_replace(true);
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}
