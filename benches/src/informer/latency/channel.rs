//! The informer alone: a lister-watcher whose list is empty and whose
//! watch yields the events a writer thread sends on a channel.

use kcontrol_reflector::WatchConfig;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_client::{ListParams, ObjectList, WatchEvent, WatchParams};
use kcontrol_informer::{ResourceEventHandlerFuncs, SharedIndexInformer};
use kcontrol_reflector::{ListerWatcher, WatchEventStream};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use super::record::Latencies;
use super::{delivered, SYNC_LIMIT};
use crate::fixtures;
use crate::informer::running::Running;

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

/// Latencies in microseconds of `rate * seconds` events, sorted.
pub async fn latencies(rate: u64, seconds: u64) -> Result<Vec<u64>, String> {
    let (tx, rx) = unbounded_channel();
    let informer = SharedIndexInformer::builder(ChannelWatch {
        events: Mutex::new(Some(rx)),
    })
    .watch_config(WatchConfig::default().strip_managed_fields(true))
    .build();
    let total = usize::try_from(rate * seconds).map_err(|e| e.to_string())?;
    let events = (0..total).map(event).collect::<Result<Vec<_>, _>>()?;
    let lat = Arc::new(Latencies::new(total));
    let reg = informer
        .add_event_handler(ResourceEventHandlerFuncs::new().add_func({
            let lat = Arc::clone(&lat);
            move |cm: &Arc<ConfigMap>, _| lat.record(cm)
        }))
        .map_err(|e| format!("adding the handler: {e}"))?;
    let run = Running::synced(&informer, &reg, SYNC_LIMIT).await?;
    let writer = {
        let lat = Arc::clone(&lat);
        tokio::task::spawn_blocking(move || {
            lat.pace(rate, events.into_iter(), |seq, cm| {
                tx.send(cm)
                    .map_err(|_| format!("event {seq}: the informer's watch has ended"))
            })
        })
    };
    delivered(writer, &lat, run).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_reaches_the_handler_once() -> Result<(), String> {
        let lat = crate::informer::runtime()?.block_on(latencies(500, 1))?;
        assert_eq!(lat.len(), 500);
        assert!(lat.windows(2).all(|w| w[0] <= w[1]));
        Ok(())
    }
}
