//! Test support: a reflector over real loopback HTTP against the
//! testserver with an informer-like consumer (DeltaFifo popped into a
//! ThreadSafeStore), a recording lister-watcher (when and how each list and
//! watch was asked for), a programmable HTTP proxy (to play servers that
//! refuse WatchList, fail requests, or hold a body back), and bounded waits.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use kcontrol_client::{
    Api, Client, Config, Error as ClientError, ListParams, ListStream, ObjectList, WatchParams,
};
use kcontrol_deltafifo::{Delta, DeltaFifo, DeltaType, PopError, ProcessError};
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::{ApiResource, Object, ThreadSafeStore};
use kcontrol_reflector::{
    BackoffConfig, ListerWatcher, Reflector, ReflectorConfig, ReflectorError, ReflectorMetrics,
    RestartCause, WatchConfig, WatchEventStream,
};
use kcontrol_testserver::{RequestRecord, TestServer, Verb};
use serde_json::{json, Value};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const NS: &str = "default";

/// Every wait in these tests ends by this deadline.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Short backoff so fault tests run quickly (no jitter: delays are exact
/// lower bounds).
pub fn fast_backoff() -> BackoffConfig {
    BackoffConfig {
        initial: Duration::from_millis(20),
        max: Duration::from_millis(200),
        reset_after: Duration::from_secs(2),
        jitter: 0.0,
    }
}

/// client-go's watch settings with [`fast_backoff`].
pub fn fast_watch() -> WatchConfig {
    WatchConfig::default().backoff(fast_backoff())
}

/// A reflector configuration with [`fast_watch`].
pub fn fast_config<K>() -> ReflectorConfig<K> {
    ReflectorConfig::default().watch_config(fast_watch())
}

/// A server with short bookmark intervals.
pub async fn server() -> TestServer {
    TestServer::builder()
        .bookmark_interval(Duration::from_millis(300))
        .deployment_simulator(None)
        .start()
        .await
        .unwrap()
}

pub fn client_for(url: &str) -> Client {
    Client::new(
        Config::new(url.parse().unwrap())
            .with_rate_limit(None)
            .with_request_timeout(Some(Duration::from_secs(20))),
    )
    .unwrap()
}

pub fn configmap(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": "web"}},
        "data": {"value": value}})
}

/// Creates `n` ConfigMaps `cm-<i>`.
pub fn seed(server: &TestServer, n: usize) {
    let objects = server.objects();
    for i in 0..n {
        objects
            .create("configmaps", NS, configmap(&format!("cm-{i}"), "v0"))
            .unwrap();
    }
}

/// Updates a ConfigMap's value; returns its new resourceVersion.
pub fn update(server: &TestServer, name: &str, value: &str) -> u64 {
    server
        .objects()
        .update("configmaps", NS, configmap(name, value))
        .unwrap()
        .resource_version()
}

/// Bumps the server's resourceVersion without touching ConfigMaps.
pub fn bump_version(server: &TestServer) -> u64 {
    static N: AtomicU64 = AtomicU64::new(0);
    let name = format!("bump-{}", N.fetch_add(1, Ordering::Relaxed));
    server
        .objects()
        .create(
            "secrets",
            NS,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}}),
        )
        .unwrap()
        .resource_version()
}

/// The server's ConfigMaps: key → resourceVersion.
pub fn server_state(server: &TestServer) -> BTreeMap<String, String> {
    server
        .objects()
        .list("configmaps", Some(NS))
        .unwrap()
        .items
        .iter()
        .map(|o| (o.key().to_owned(), o.resource_version().to_string()))
        .collect()
}

/// The consumer's store: key → resourceVersion.
pub fn store_state(store: &ThreadSafeStore<ConfigMap>) -> BTreeMap<String, String> {
    store
        .list()
        .iter()
        .map(|o| {
            (
                kcontrol_indexer::meta_namespace_key(o.as_ref()).unwrap(),
                o.resource_version().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

pub use kcontrol_testserver::eventually_within;

/// Waits until the server has at least one watch open (a watch counts as
/// open once `close_all_watches` would end it): a converged store does not
/// mean the reflector's next watch has reached the server yet.
pub async fn wait_watch_open(server: &TestServer) {
    eventually_within("an open watch", DEADLINE, async || {
        server.counters().active_watches >= 1
    })
    .await;
}

/// Waits until the reflector's watch is open and has delivered an event (a
/// bookmark past a version bump), so that ending it is not a "very short
/// watch" (which relists, as in client-go).
pub async fn wait_watch_delivered(server: &TestServer, h: &Harness) {
    wait_watch_open(server).await;
    let rv = bump_version(server);
    let reflector = h.reflector.clone();
    eventually_within("an event on the watch", DEADLINE, async move || {
        reflector
            .last_sync_resource_version()
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|v| v >= rv)
    })
    .await;
}

/// Deltas popped by the consumer, by type; and what handlers would have
/// seen go back in time.
#[derive(Default, Debug)]
pub struct Popped {
    pub by_type: HashMap<DeltaType, u64>,
    pub tombstones: u64,
    /// Per key, the newest resourceVersion popped (deletions not counted).
    pub newest: HashMap<String, u64>,
    /// `key: newer → older` for every popped object older than one popped
    /// before it (an `on_update(new → old)`).
    pub regressions: Vec<String>,
    /// Keys popped as deleted, in order.
    pub deleted: Vec<String>,
    /// Per key, how many deltas other than deletions were popped.
    pub applied: HashMap<String, u64>,
}

impl Popped {
    pub fn count(&self, t: DeltaType) -> u64 {
        self.by_type.get(&t).copied().unwrap_or(0)
    }
    pub fn total(&self) -> u64 {
        self.by_type.values().sum()
    }
}

/// A reflector, its FIFO, and a consumer applying popped deltas to a store.
pub struct Harness {
    pub store: Arc<ThreadSafeStore<ConfigMap>>,
    pub fifo: Arc<DeltaFifo<ConfigMap>>,
    pub reflector: Arc<Reflector<ConfigMap>>,
    pub errors: Arc<Mutex<Vec<String>>>,
    pub popped: Arc<Mutex<Popped>>,
    pub shutdown: CancellationToken,
    run: Option<JoinHandle<()>>,
    consumer: Option<JoinHandle<()>>,
}

impl Harness {
    /// Starts a reflector over `lister_watcher` with `config` (its error
    /// handler is wrapped to record errors too).
    pub fn start(
        lister_watcher: Arc<dyn ListerWatcher<ConfigMap>>,
        config: ReflectorConfig<ConfigMap>,
    ) -> Self {
        let store = Arc::new(ThreadSafeStore::<ConfigMap>::new());
        let fifo = DeltaFifo::<ConfigMap>::builder()
            .known_objects(store.clone())
            .build();
        let errors = Arc::new(Mutex::new(Vec::new()));
        let recorded = errors.clone();
        let user_handler = config.error_handler.clone();
        let config = config.error_handler(move |e: &ReflectorError| {
            recorded.lock().unwrap().push(e.to_string());
            if let Some(h) = &user_handler {
                h(e);
            }
        });
        let reflector = Arc::new(Reflector::new(lister_watcher, fifo.clone(), config));
        let shutdown = CancellationToken::new();
        let run = tokio::spawn({
            let (reflector, shutdown) = (reflector.clone(), shutdown.clone());
            async move { reflector.run(shutdown).await }
        });
        let popped = Arc::new(Mutex::new(Popped::default()));
        let consumer = tokio::spawn(consume(fifo.clone(), store.clone(), popped.clone()));
        Self {
            store,
            fifo,
            reflector,
            errors,
            popped,
            shutdown,
            run: Some(run),
            consumer: Some(consumer),
        }
    }

    /// A reflector over `Api<ConfigMap>` in [`NS`] at `url`.
    pub fn for_url(url: &str, config: ReflectorConfig<ConfigMap>) -> Self {
        let api: Api<ConfigMap> = Api::namespaced(client_for(url), NS);
        Self::start(Arc::new(api), config)
    }

    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().unwrap().clone()
    }

    pub fn popped(&self, t: DeltaType) -> u64 {
        self.popped.lock().unwrap().count(t)
    }

    pub fn tombstones(&self) -> u64 {
        self.popped.lock().unwrap().tombstones
    }

    /// Waits until the store holds exactly the server's ConfigMaps (RF8).
    pub async fn converge(&self, server: &TestServer) {
        let start = Instant::now();
        loop {
            let want = server_state(server);
            let got = store_state(&self.store);
            if want == got && self.fifo.is_empty() {
                return;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "store did not converge: {} keys on the server, {} in the store, first difference {:?}; errors: {:?}",
                want.len(),
                got.len(),
                first_difference(&want, &got),
                self.errors()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for the first sync to be consumed.
    pub async fn synced(&self) {
        let fifo = self.fifo.clone();
        eventually_within("the initial sync", DEADLINE, async move || {
            fifo.has_synced()
        })
        .await;
    }

    /// Stops the reflector (bounded) and the consumer.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(run) = self.run.take() {
            tokio::time::timeout(Duration::from_secs(5), run)
                .await
                .expect("run returns promptly on shutdown")
                .unwrap();
        }
        self.fifo.close();
        if let Some(consumer) = self.consumer.take() {
            tokio::time::timeout(Duration::from_secs(5), consumer)
                .await
                .expect("the consumer ends when the FIFO closes")
                .unwrap();
        }
    }

    /// Whether `run` has returned.
    pub fn run_finished(&self) -> bool {
        self.run.as_ref().is_none_or(JoinHandle::is_finished)
    }

    pub fn take_run(&mut self) -> JoinHandle<()> {
        self.run.take().unwrap()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
        self.fifo.close();
    }
}

fn first_difference(
    want: &BTreeMap<String, String>,
    got: &BTreeMap<String, String>,
) -> Option<(String, Option<String>, Option<String>)> {
    want.keys()
        .chain(got.keys())
        .find(|k| want.get(*k) != got.get(*k))
        .map(|k| (k.clone(), want.get(k).cloned(), got.get(k).cloned()))
}

/// The informer's loop: pop each key's deltas and apply them in order.
async fn consume(
    fifo: Arc<DeltaFifo<ConfigMap>>,
    store: Arc<ThreadSafeStore<ConfigMap>>,
    popped: Arc<Mutex<Popped>>,
) {
    loop {
        let result = fifo
            .pop_async(|deltas, _| {
                let mut popped = popped.lock().unwrap();
                for delta in deltas.iter() {
                    *popped.by_type.entry(delta.kind()).or_default() += 1;
                    match delta {
                        Delta::Deleted(gone) => {
                            popped.tombstones += u64::from(gone.is_tombstone());
                            popped.deleted.push(deltas.key().to_owned());
                            store.delete_by_key(deltas.key());
                        }
                        other => {
                            let obj = other.object();
                            let rv: u64 = obj
                                .resource_version()
                                .and_then(|v| v.parse().ok())
                                .unwrap_or(0);
                            let key = deltas.key().to_owned();
                            let before = popped.newest.get(&key).copied().unwrap_or(0);
                            if rv < before {
                                popped.regressions.push(format!("{key}: {before} → {rv}"));
                            }
                            *popped.applied.entry(key.clone()).or_default() += 1;
                            popped.newest.insert(key, rv.max(before));
                            store.update(obj.clone()).unwrap();
                        }
                    }
                }
                Ok::<_, ProcessError<Infallible>>(())
            })
            .await;
        if matches!(result, Err(PopError::Closed)) {
            return;
        }
    }
}

/// One call a [`RecordingLw`] received.
#[derive(Clone, Debug)]
pub struct Call {
    pub at: Instant,
    pub watch: bool,
    pub resource_version: Option<String>,
    pub limit: Option<u32>,
    pub continue_token: Option<String>,
    pub timeout: Option<u32>,
    pub bookmarks: bool,
    pub send_initial_events: bool,
    /// `Ok` or the error's message.
    pub outcome: Result<(), String>,
}

type BeforeHook = Box<dyn Fn(&Call) + Send + Sync>;

/// A lister-watcher that records every call made through it (when, with
/// what) and can run a hook before forwarding a call to the real `Api`.
pub struct RecordingLw {
    pub api: Api<ConfigMap>,
    pub calls: Arc<Mutex<Vec<Call>>>,
    before: Option<BeforeHook>,
}

impl RecordingLw {
    pub fn new(api: Api<ConfigMap>) -> Self {
        Self {
            api,
            calls: Arc::new(Mutex::new(Vec::new())),
            before: None,
        }
    }

    pub fn before(mut self, hook: impl Fn(&Call) + Send + Sync + 'static) -> Self {
        self.before = Some(Box::new(hook));
        self
    }

    fn record<T>(&self, mut call: Call, result: &Result<T, ClientError>) {
        call.outcome = result.as_ref().map(|_| ()).map_err(ToString::to_string);
        self.calls.lock().unwrap().push(call);
    }

    fn list_call(params: &ListParams) -> Call {
        Call {
            at: Instant::now(),
            watch: false,
            resource_version: params.resource_version.clone(),
            limit: params.limit,
            continue_token: params.continue_token.clone(),
            timeout: None,
            bookmarks: false,
            send_initial_events: false,
            outcome: Ok(()),
        }
    }
}

impl ListerWatcher<ConfigMap> for RecordingLw {
    fn list<'a>(
        &'a self,
        params: &'a ListParams,
    ) -> BoxFuture<'a, Result<ObjectList<ConfigMap>, ClientError>> {
        async move {
            let call = Self::list_call(params);
            if let Some(hook) = &self.before {
                hook(&call);
            }
            let result = self.api.list(params).await;
            self.record(call, &result);
            result
        }
        .boxed()
    }

    fn list_stream<'a>(
        &'a self,
        params: &'a ListParams,
    ) -> BoxFuture<'a, Result<ListStream<ConfigMap>, ClientError>> {
        async move {
            let call = Self::list_call(params);
            if let Some(hook) = &self.before {
                hook(&call);
            }
            let result = self.api.list_stream(params).await;
            self.record(call, &result);
            result
        }
        .boxed()
    }

    fn watch<'a>(
        &'a self,
        params: &'a WatchParams,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<WatchEventStream<ConfigMap>, ClientError>> {
        async move {
            let call = Call {
                at: Instant::now(),
                watch: true,
                resource_version: Some(resource_version.to_owned()),
                limit: None,
                continue_token: None,
                timeout: params.timeout_seconds,
                bookmarks: params.allow_bookmarks,
                send_initial_events: params.send_initial_events,
                outcome: Ok(()),
            };
            if let Some(hook) = &self.before {
                hook(&call);
            }
            let result = self.api.watch(params, resource_version).await;
            self.record(call, &result);
            result.map(StreamExt::boxed)
        }
        .boxed()
    }

    fn api_resource(&self) -> Option<ApiResource> {
        Some(self.api.resource().clone())
    }
}

/// What the proxy does with a request.
pub enum Action {
    /// Forward it, with this query instead of the original.
    Forward(String),
    /// Forward it; after `after_bytes` bytes of the answer's body, `then`.
    ForwardThen {
        query: String,
        after_bytes: usize,
        then: Then,
    },
    /// Answer with this status and JSON body.
    Respond(u16, Value),
    /// Answer 200 with this body as it is (`application/json`).
    RespondRaw(String),
    /// Close the connection without an answer.
    Drop,
}

/// What happens to a forwarded body after some bytes.
pub enum Then {
    /// Hold the rest until the gate is notified.
    Hold(Arc<Notify>),
    /// Break the body off (the connection fails mid-body).
    Cut,
    /// End the body there, cleanly (a watch the server closes).
    End,
}

type Rule = Arc<dyn Fn(&http::Method, &str, &str) -> Action + Send + Sync>;

/// A loopback HTTP proxy in front of the testserver whose behaviour a test
/// programs per request (method, path, query).
pub struct Proxy {
    pub addr: SocketAddr,
    rule: Arc<Mutex<Rule>>,
    task: JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ProxyBody = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;

impl Proxy {
    /// A proxy forwarding everything to `target` (`http://127.0.0.1:port`).
    pub async fn start(target: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let forward: Rule = Arc::new(|_, _, q| Action::Forward(q.to_owned()));
        let rule = Arc::new(Mutex::new(forward));
        let target: Arc<str> = Arc::from(target);
        // a fresh upstream connection per request: no pooled connection
        // that a cut body left half-closed
        let http = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build_http::<Full<Bytes>>();
        let task = tokio::spawn({
            let rule = rule.clone();
            async move {
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        return;
                    };
                    let (rule, target, http) = (rule.clone(), target.clone(), http.clone());
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let (rule, target, http) = (rule.clone(), target.clone(), http.clone());
                            async move { proxy_one(req, rule, target, http).await }
                        });
                        let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                            .serve_connection(TokioIo::new(tcp), service)
                            .await;
                    });
                }
            }
        });
        Self { addr, rule, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn set_rule(
        &self,
        rule: impl Fn(&http::Method, &str, &str) -> Action + Send + Sync + 'static,
    ) {
        *self.rule.lock().unwrap() = Arc::new(rule);
    }
}

async fn proxy_one(
    req: http::Request<Incoming>,
    rule: Arc<Mutex<Rule>>,
    target: Arc<str>,
    http: hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        Full<Bytes>,
    >,
) -> Result<http::Response<ProxyBody>, std::io::Error> {
    let rule = rule.lock().unwrap().clone();
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().unwrap_or("").to_owned();
    let (query, gate) = match rule(&parts.method, &path, &query) {
        Action::Forward(q) => (q, None),
        Action::ForwardThen {
            query,
            after_bytes,
            then,
        } => (query, Some((after_bytes, then))),
        Action::Respond(code, value) => {
            let body = Full::new(Bytes::from(value.to_string()))
                .map_err(|never| match never {})
                .boxed_unsync();
            return Ok(http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(body)
                .unwrap());
        }
        Action::RespondRaw(raw) => {
            let body = Full::new(Bytes::from(raw))
                .map_err(|never| match never {})
                .boxed_unsync();
            return Ok(http::Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(body)
                .unwrap());
        }
        Action::Drop => return Err(std::io::Error::other("dropped by the test proxy")),
    };
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let uri = if query.is_empty() {
        format!("{target}{path}")
    } else {
        format!("{target}{path}?{query}")
    };
    let mut forward = http::Request::builder().method(parts.method).uri(uri);
    for (name, value) in &parts.headers {
        if name != http::header::HOST {
            forward = forward.header(name, value);
        }
    }
    let response = http
        .request(forward.body(Full::new(body)).unwrap())
        .await
        .map_err(std::io::Error::other)?;
    let (parts, body) = response.into_parts();
    let body = match gate {
        None => body.map_err(|e| Box::new(e) as BoxError).boxed_unsync(),
        Some((after_bytes, then)) => gated(body, after_bytes, then),
    };
    Ok(http::Response::from_parts(parts, body))
}

/// Forwards `body` in frames of at most 4 KiB; after `after_bytes` bytes,
/// holds the rest until a gate opens, or breaks the body off.
fn gated(body: Incoming, after_bytes: usize, then: Then) -> ProxyBody {
    let frames = http_body_util::BodyStream::new(body).flat_map(
        |frame: Result<Frame<Bytes>, hyper::Error>| {
            let pieces: Vec<Result<Frame<Bytes>, BoxError>> = match frame {
                Ok(f) if f.is_data() => {
                    let data = f.into_data().unwrap_or_default();
                    data.chunks(4096)
                        .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
                        .collect()
                }
                Ok(other) => vec![Ok(other)],
                Err(e) => vec![Err(Box::new(e) as BoxError)],
            };
            futures::stream::iter(pieces)
        },
    );
    let then = Arc::new(then);
    let stream = futures::stream::unfold(
        (Box::pin(frames), 0usize, false),
        move |(mut frames, mut sent, mut done)| {
            let then = then.clone();
            async move {
                if !done && sent >= after_bytes {
                    done = true;
                    match &*then {
                        Then::Hold(gate) => gate.notified().await,
                        Then::Cut => {
                            let cut: BoxError = "cut off by the test proxy".into();
                            return Some((Err(cut), (frames, sent, true)));
                        }
                        Then::End => return None,
                    }
                } else if done && matches!(&*then, Then::Cut | Then::End) {
                    return None;
                }
                let frame = frames.next().await?;
                if let Ok(f) = &frame {
                    if let Some(data) = f.data_ref() {
                        sent += data.len();
                    }
                }
                Some((frame, (frames, sent, done)))
            }
        },
    );
    StreamBody::new(stream).boxed_unsync()
}

/// A Status body, as kube-apiserver sends it.
pub fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code})
}

/// Runs `f` with a bound, failing the test when it takes longer.
pub async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// The calls of a kind.
pub fn calls(lw: &Arc<Mutex<Vec<Call>>>, watch: bool) -> Vec<Call> {
    lw.lock()
        .unwrap()
        .iter()
        .filter(|c| c.watch == watch)
        .cloned()
        .collect()
}

/// A query parameter (percent-decoded) of a raw query string.
pub fn param(query: &str, key: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

/// The server's logged requests with this verb on configmaps.
pub fn requests(server: &TestServer, verb: Verb) -> Vec<RequestRecord> {
    server
        .request_log()
        .into_iter()
        .filter(|r| r.verb == Some(verb) && r.resource.as_deref() == Some("configmaps"))
        .collect()
}

/// Seeds `n` ConfigMaps quickly (`bulk-<i>`).
pub fn bulk_seed(server: &TestServer, n: usize) {
    server
        .objects()
        .bulk_load(
            "configmaps",
            NS,
            (0..n).map(|i| configmap(&format!("bulk-{i}"), "v0")),
        )
        .unwrap();
}

/// What a [`Recorder`] saw, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Seen {
    /// The reflector waited this long before trying again.
    Backoff(Duration),
    /// A relist began, for this cause.
    Relisting(RestartCause),
    /// A watch began again, for this cause.
    WatchRestarting(RestartCause),
    /// `relist_incomplete` turned this way.
    RelistIncomplete(bool),
}

/// Reflector metrics that record the waits and restarts, in order.
#[derive(Default)]
pub struct Recorder {
    seen: Mutex<Vec<Seen>>,
}

impl Recorder {
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Each relist or restarted watch with its cause and the last wait
    /// before it (`None` when it came at once).
    pub fn restarts(&self) -> Vec<(Seen, Option<Duration>)> {
        let mut out = Vec::new();
        let mut wait = None;
        for s in self.seen() {
            match s {
                Seen::Backoff(d) => wait = Some(d),
                Seen::Relisting(_) | Seen::WatchRestarting(_) => out.push((s, wait.take())),
                Seen::RelistIncomplete(_) => {}
            }
        }
        out
    }

    fn push(&self, s: Seen) {
        self.seen.lock().unwrap().push(s);
    }
}

impl ReflectorMetrics for Recorder {
    fn backoff(&self, delay: Duration) {
        self.push(Seen::Backoff(delay));
    }
    fn relisting(&self, cause: RestartCause) {
        self.push(Seen::Relisting(cause));
    }
    fn watch_restarting(&self, cause: RestartCause) {
        self.push(Seen::WatchRestarting(cause));
    }
    fn relist_incomplete(&self, incomplete: bool) {
        self.push(Seen::RelistIncomplete(incomplete));
    }
}
