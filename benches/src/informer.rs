//! The `informer` scenario: a `SharedIndexInformer<ConfigMap>` against the
//! testserver over loopback HTTP (issue 6's benchmarks).
//!
//! Rows:
//! - `sync-list` and `sync-watchlist` ([`sync`]): initial sync of 10,000
//!   and 100,000 fixture ConfigMaps (about 1 KiB of JSON each, with their
//!   managedFields) until the handler's registration `has_synced` (store
//!   filled and the handler has seen every object), with the first list
//!   (`resourceVersion=0`, one response, as kube-apiserver serves it from
//!   its watch cache) or with WatchList streaming. Beside it, in the same
//!   run, a bare `serde_json` decode of the same list bytes into
//!   `ObjectList<ConfigMap>`: its time and the resident growth it causes.
//!   Each size has rows for three cached types (`cached_type`): the full
//!   `ConfigMap` (list and WatchList), the lean `CompactConfigMap` (list
//!   and WatchList) and a metadata-only informer's
//!   `PartialObjectMetadata<ConfigMap>` (list), all against the same decode.
//! - `event-latency` ([`latency`]): watch event to handler latency, p50
//!   and p99, at 1,000 and 10,000 writes a second, through the server and
//!   HTTP, and through the informer alone (`path: "informer-only"`).
//!
//! The informer is built as a controller would build it: the
//! managedFields-stripping transform on, the client's default rate limit
//! (client-go's 5 QPS, burst 10), page size 500, jemalloc as the global
//! allocator (the crate's default feature).
//!
//! What the memory figures include: the server runs in a child process of
//! its own ([`server`]), and each measurement (the bare decode, each sync)
//! runs in a fresh child process that holds only the client, the Tokio
//! runtime and the informer (or the decoded list); so `sync_peak_rss_bytes`
//! is the whole measuring process's peak (`VmHWM`) during the sync, and
//! `steady_rss_bytes_per_object` its whole `VmRSS` two seconds after sync
//! divided by the objects, with no server memory in either.
//! `decoded_rss_bytes` is the resident growth of the decode child across
//! `serde_json::from_slice` (the list bytes were already resident before).
//! Times include the server serving the list on the same two cores.
//!
//! The `relist` scenario ([`relist`]) shares the server child and the
//! measuring children.
//!
//! The latency rows run the server in this process (memory is not measured
//! there): from just before the server stores an update to the handler's
//! `on_update`, through encoding, HTTP, decoding, the reflector, the
//! DeltaFIFO, the store and the handler's buffer and thread.

mod latency;
pub mod relist;
mod running;
mod server;
pub(crate) mod sync;

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use kcontrol_client::{Client, Config};
use serde_json::Value;

use crate::report::Report;

/// Environment variable naming the role of a child process.
const ROLE_ENV: &str = "KCONTROL_BENCH_INFORMER_ROLE";
/// Environment variables of a measuring child.
const URL_ENV: &str = "KCONTROL_BENCH_INFORMER_URL";
const NAMESPACE_ENV: &str = "KCONTROL_BENCH_INFORMER_NAMESPACE";
const OBJECTS_ENV: &str = "KCONTROL_BENCH_INFORMER_OBJECTS";
const WATCH_LIST_ENV: &str = "KCONTROL_BENCH_INFORMER_WATCH_LIST";
const KIND_ENV: &str = "KCONTROL_BENCH_INFORMER_KIND";
/// Options of the `tikv-jemallocator` build of jemalloc.
const MALLOC_CONF_ENV: &str = "_RJEM_MALLOC_CONF";

/// Objects of the sync rows.
const SIZES: [usize; 2] = [10_000, 100_000];

/// Runs the scenario, or a child's role when started as one.
pub fn bench(report: &mut Report) -> Result<(), String> {
    if let Some(result) = run_child_role() {
        return result;
    }
    let namespaces: Vec<(String, usize)> = SIZES.iter().map(|n| (namespace(*n), *n)).collect();
    let refs: Vec<(&str, usize)> = namespaces.iter().map(|(n, c)| (n.as_str(), *c)).collect();
    let server = server::ServerProcess::start("informer", &refs)?;
    for objects in SIZES {
        sync::bench(report, &server, objects, &namespace(objects))?;
    }
    drop(server);
    latency::bench(report)
}

fn namespace(objects: usize) -> String {
    format!("bench-{objects}")
}

/// When this process is a child of the informer or relist scenario, runs
/// its role and returns the outcome.
pub fn run_child_role() -> Option<Result<(), String>> {
    let role = std::env::var(ROLE_ENV).ok()?;
    Some(match role.as_str() {
        "server" => server::run_child(),
        other => ChildSpec::from_env(other).and_then(|spec| {
            let out = runtime()?.block_on(async {
                match other {
                    "decode" => sync::decode_child(&spec).await,
                    "sync" => sync::sync_child(&spec).await,
                    "relist" => relist::relist_child(&spec).await,
                    _ => Err(format!("{ROLE_ENV}: unknown role {other:?}")),
                }
            })?;
            #[allow(clippy::print_stdout)]
            {
                println!("{out}");
            }
            Ok(())
        }),
    })
}

/// What a measuring child does, and against what.
#[derive(Clone, Debug)]
pub struct ChildSpec {
    /// `decode`, `sync` or `relist`.
    pub role: String,
    /// The server's URL.
    pub url: String,
    /// Namespace of the objects.
    pub namespace: String,
    /// Objects in it.
    pub objects: usize,
    /// Sync through WatchList streaming.
    pub watch_list: bool,
    /// What the informer caches: `full` (k8s-openapi `ConfigMap`),
    /// `compact` (`CompactConfigMap`) or `metadata` (a metadata-only
    /// informer's `PartialObjectMetadata<ConfigMap>`).
    pub kind: &'static str,
    /// jemalloc options of the child (`_RJEM_MALLOC_CONF`), when not the
    /// defaults.
    pub malloc_conf: Option<&'static str>,
}

impl ChildSpec {
    fn from_env(role: &str) -> Result<Self, String> {
        let var = |name: &str| std::env::var(name).map_err(|e| format!("{name}: {e}"));
        Ok(Self {
            role: role.to_owned(),
            url: var(URL_ENV)?,
            namespace: var(NAMESPACE_ENV)?,
            objects: var(OBJECTS_ENV)?
                .parse()
                .map_err(|e| format!("{OBJECTS_ENV}: {e}"))?,
            watch_list: var(WATCH_LIST_ENV)? == "true",
            kind: match std::env::var(KIND_ENV).as_deref() {
                Ok("compact") => "compact",
                Ok("metadata") => "metadata",
                Ok("compact-metadata") => "compact-metadata",
                _ => "full",
            },
            malloc_conf: None,
        })
    }

    /// Runs this spec in a fresh child process (this binary, `scenario`)
    /// and returns the JSON object it printed.
    pub fn run(&self, scenario: &str) -> Result<HashMap<String, Value>, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
        let mut command = Command::new(exe);
        if let Some(conf) = self.malloc_conf {
            command.env(MALLOC_CONF_ENV, conf);
        }
        let out = command
            .arg(scenario)
            .env(ROLE_ENV, &self.role)
            .env(URL_ENV, &self.url)
            .env(NAMESPACE_ENV, &self.namespace)
            .env(OBJECTS_ENV, self.objects.to_string())
            .env(WATCH_LIST_ENV, self.watch_list.to_string())
            .env(KIND_ENV, self.kind)
            .output()
            .map_err(|e| format!("cannot start the {} child: {e}", self.role))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(format!(
                "the {} child failed ({}): {stderr}",
                self.role, out.status
            ));
        }
        serde_json::from_str(stdout.trim())
            .map_err(|e| format!("the {} child printed {stdout:?}: {e}", self.role))
    }
}

/// A number a child reported.
pub fn field(out: &HashMap<String, Value>, name: &str) -> Result<f64, String> {
    out.get(name)
        .and_then(Value::as_f64)
        .ok_or_else(|| format!("the child's result has no number {name:?}"))
}

/// A byte count a child reported.
pub fn bytes_field(out: &HashMap<String, Value>, name: &str) -> Result<u64, String> {
    out.get(name)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("the child's result has no byte count {name:?}"))
}

/// The Tokio runtime of every role: two worker threads, as many as cores.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("starting the Tokio runtime: {e}"))
}

/// A client of `url` with the default configuration.
fn client(url: &str) -> Result<Client, String> {
    let uri = url
        .parse()
        .map_err(|e| format!("server URL {url:?}: {e}"))?;
    Client::new(Config::new(uri)).map_err(|e| format!("client of {url}: {e}"))
}

/// Polls `done` every half millisecond until it holds, for at most `limit`.
async fn wait_until(what: &str, limit: Duration, done: impl Fn() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    while !done() {
        if Instant::now() >= deadline {
            return Err(format!("{what}: not within {limit:?}"));
        }
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
    Ok(())
}
