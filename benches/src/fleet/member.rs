//! One member of a fleet: a controller's reflector with a client (and so a
//! connection) of its own, its own `User-Agent` (the server tells clients
//! apart by it), the informer's loop popping its DeltaFIFO into a store,
//! and a lister-watcher that records when each request was tried
//! (refused connections and request-level retries included).

use kcontrol_reflector::WatchConfig;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use futures::FutureExt;
use kcontrol_client::{
    Api, Client, Config, Error as ClientError, ListParams, ListStream, ObjectList, WatchParams,
};
use kcontrol_deltafifo::{Delta, DeltaFifo, PopError, ProcessError};
use kcontrol_indexer::compact::CompactConfigMap;
use kcontrol_indexer::{ApiResource, KubeObject, ThreadSafeStore};
use kcontrol_reflector::{
    ListerWatcher, PacingPreset, Reflector, ReflectorConfig, WatchEventStream,
};
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::fixtures::NAMESPACE;

/// A lister-watcher that notes the instant of every request it sends.
struct CountingLw {
    api: Api<CompactConfigMap>,
    sent: Arc<Mutex<Vec<Instant>>>,
}

impl CountingLw {
    fn note(&self) {
        self.sent.lock().push(Instant::now());
    }
}

impl ListerWatcher<CompactConfigMap> for CountingLw {
    fn list<'a>(
        &'a self,
        params: &'a ListParams,
    ) -> BoxFuture<'a, Result<ObjectList<CompactConfigMap>, ClientError>> {
        self.note();
        self.api.list(params).boxed()
    }

    fn list_stream<'a>(
        &'a self,
        params: &'a ListParams,
    ) -> BoxFuture<'a, Result<ListStream<CompactConfigMap>, ClientError>> {
        self.note();
        self.api.list_stream(params).boxed()
    }

    fn watch<'a>(
        &'a self,
        params: &'a WatchParams,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<WatchEventStream<CompactConfigMap>, ClientError>> {
        self.note();
        async move {
            let stream = self.api.watch(params, resource_version).await?;
            Ok(futures::StreamExt::boxed(stream))
        }
        .boxed()
    }

    fn api_resource(&self) -> Option<ApiResource> {
        Some(self.api.resource().clone())
    }
}

/// A running fleet member.
pub struct Member {
    store: Arc<ThreadSafeStore<CompactConfigMap>>,
    fifo: Arc<DeltaFifo<CompactConfigMap>>,
    sent: Arc<Mutex<Vec<Instant>>>,
    shutdown: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Member {
    /// Starts member `index` of a fleet paced by `pacing`, against `url`.
    pub fn start(
        url: &str,
        index: usize,
        pacing: PacingPreset,
        watch_list: bool,
    ) -> Result<Self, String> {
        let uri = url
            .parse()
            .map_err(|e| format!("the server URL {url}: {e}"))?;
        let mut config = Config::new(uri);
        config.user_agent = format!("kcontrol-bench-fleet/{}/{index}", pacing_name(pacing));
        let client = Client::new(config).map_err(|e| format!("a client: {e}"))?;
        let sent = Arc::new(Mutex::new(Vec::new()));
        let lw = CountingLw {
            api: Api::namespaced(client, NAMESPACE),
            sent: sent.clone(),
        };
        let store = Arc::new(ThreadSafeStore::<CompactConfigMap>::new());
        let fifo = DeltaFifo::<CompactConfigMap>::builder()
            .known_objects(store.clone())
            .build();
        let reflector = Arc::new(Reflector::new(
            Arc::new(lw),
            fifo.clone(),
            ReflectorConfig::default()
                .watch_config(
                    WatchConfig::default()
                        .use_watch_list(watch_list)
                        .pacing(pacing),
                )
                .name(format!("fleet-{index}")),
        ));
        let shutdown = CancellationToken::new();
        let run = tokio::spawn({
            let shutdown = shutdown.clone();
            async move { reflector.run(shutdown).await }
        });
        let consume = tokio::spawn(consume(fifo.clone(), store.clone()));
        Ok(Self {
            store,
            fifo,
            sent,
            shutdown,
            tasks: vec![run, consume],
        })
    }

    /// Whether the store holds exactly `want` (key → resourceVersion).
    pub fn in_sync(&self, want: &BTreeMap<String, String>) -> bool {
        if !self.fifo.has_synced() || self.store.len() != want.len() {
            return false;
        }
        self.store.list().iter().all(|o| {
            let key = format!(
                "{}/{}",
                o.namespace().unwrap_or_default(),
                o.name().unwrap_or_default()
            );
            want.get(&key).map(String::as_str) == o.resource_version()
        })
    }

    /// Requests sent from `from` (inclusive) to `to` (exclusive).
    pub fn sent_between(&self, from: Instant, to: Instant) -> usize {
        self.sent
            .lock()
            .iter()
            .filter(|at| **at >= from && **at < to)
            .count()
    }

    /// Stops the reflector and the loop.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.fifo.close();
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// The informer's loop: pop each key's deltas into the store.
async fn consume(
    fifo: Arc<DeltaFifo<CompactConfigMap>>,
    store: Arc<ThreadSafeStore<CompactConfigMap>>,
) {
    loop {
        let result = fifo
            .pop_async(|deltas, _| {
                match deltas.newest() {
                    Delta::Deleted(_) => drop(store.delete_by_key(deltas.key())),
                    newest => drop(store.add(newest.object().clone())),
                }
                Ok::<_, ProcessError<Infallible>>(())
            })
            .await;
        if matches!(result, Err(PopError::Closed)) {
            return;
        }
    }
}

/// The name of a pacing in rows.
pub fn pacing_name(pacing: PacingPreset) -> &'static str {
    match pacing {
        PacingPreset::ClientGo => "client-go",
        _ => "kcontrol",
    }
}
