//! The informer alone: a lister-watcher whose list is empty and whose
//! watch yields the events a writer thread sends on a channel.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_client::{ListParams, ObjectList, WatchEvent, WatchParams};
use kcontrol_informer::{ResourceEventHandlerFuncs, SharedIndexInformer};
use kcontrol_reflector::{ListerWatcher, WatchEventStream};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio_util::sync::CancellationToken;

use super::{nanos_since, seq_of};
use crate::fixtures;
use crate::informer::wait_until;

/// Lists nothing; its first watch streams the channel, later ones wait.
struct ChannelWatch {
    events: Mutex<Option<UnboundedReceiver<ConfigMap>>>,
}

impl ListerWatcher<ConfigMap> for ChannelWatch {
    fn list<'a>(
        &'a self,
        _: &'a ListParams,
    ) -> BoxFuture<'a, Result<ObjectList<ConfigMap>, kcontrol_client::Error>> {
        Box::pin(async {
            let mut list = ObjectList::<ConfigMap>::default();
            list.metadata.resource_version = Some("1".to_owned());
            Ok(list)
        })
    }

    fn watch<'a>(
        &'a self,
        _: &'a WatchParams,
        _: &'a str,
    ) -> BoxFuture<'a, Result<WatchEventStream<ConfigMap>, kcontrol_client::Error>> {
        let events = self.events.lock().ok().and_then(|mut e| e.take());
        Box::pin(async move {
            let stream: WatchEventStream<ConfigMap> = match events {
                Some(mut rx) => futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
                    .map(|cm| Ok(WatchEvent::Added(cm)))
                    .boxed(),
                None => futures::stream::pending().boxed(),
            };
            Ok(stream)
        })
    }
}

/// Object `seq` as a new object at resourceVersion `seq + 2`.
fn event(seq: usize) -> Result<ConfigMap, String> {
    let mut cm = fixtures::configmap(seq, seq as u64 + 2)
        .map_err(|e| format!("fixture {seq} does not decode: {e}"))?;
    cm.data
        .get_or_insert_with(Default::default)
        .insert("seq".to_owned(), seq.to_string());
    Ok(cm)
}

/// Sends `events` to `tx` at `rate` a second, stamping each in `sent`.
fn write(
    tx: &UnboundedSender<ConfigMap>,
    events: Vec<ConfigMap>,
    sent: &[AtomicU64],
    rate: u64,
    base: Instant,
) {
    let start = Instant::now();
    let step = Duration::from_nanos(1_000_000_000 / rate);
    for ((seq, cm), at) in events.into_iter().enumerate().zip(sent) {
        let due = start + step * u32::try_from(seq).unwrap_or(u32::MAX);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        at.store(nanos_since(base), Ordering::SeqCst);
        if tx.send(cm).is_err() {
            return;
        }
    }
}

/// Latencies in microseconds of `rate * seconds` events, sorted.
pub async fn latencies(rate: u64, seconds: u64) -> Result<Vec<u64>, String> {
    let (tx, rx) = unbounded_channel();
    let informer = SharedIndexInformer::builder(ChannelWatch {
        events: Mutex::new(Some(rx)),
    })
    .strip_managed_fields()
    .build();
    let total = usize::try_from(rate * seconds).map_err(|e| e.to_string())?;
    let events = (0..total).map(event).collect::<Result<Vec<_>, _>>()?;
    let base = Instant::now();
    let sent: Arc<Vec<AtomicU64>> = Arc::new((0..total).map(|_| AtomicU64::new(0)).collect());
    let seen: Arc<Mutex<Vec<u64>>> = Arc::default();
    let (s, l) = (Arc::clone(&sent), Arc::clone(&seen));
    let reg = informer
        .add_event_handler(ResourceEventHandlerFuncs::new().add_func(
            move |cm: &Arc<ConfigMap>, _| {
                let now = nanos_since(base);
                if let Some(at) = seq_of(cm).and_then(|seq| s.get(seq)) {
                    let latency = now.saturating_sub(at.load(Ordering::SeqCst)) / 1_000;
                    if let Ok(mut seen) = l.lock() {
                        seen.push(latency);
                    }
                }
            },
        ))
        .map_err(|e| format!("adding the handler: {e}"))?;
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (informer, shutdown) = (Arc::clone(&informer), shutdown.clone());
        async move { informer.run(shutdown).await }
    });
    wait_until("initial sync", Duration::from_secs(60), || reg.has_synced()).await?;
    let writer = {
        let sent = Arc::clone(&sent);
        tokio::task::spawn_blocking(move || write(&tx, events, &sent, rate, base))
    };
    writer
        .await
        .map_err(|e| format!("the writer thread: {e}"))?;
    let all_seen = || seen.lock().map(|s| s.len() >= total).unwrap_or(true);
    let delivered = wait_until("delivery", Duration::from_secs(30), all_seen).await;
    shutdown.cancel();
    let _ = run.await;
    delivered?;
    let mut all = seen.lock().map(|s| s.clone()).unwrap_or_default();
    all.sort_unstable();
    Ok(all)
}
