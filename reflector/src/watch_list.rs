//! WatchList (RF6): the state arrives as the initial events of a watch
//! with `sendInitialEvents=true`, streamed straight into the FIFO's replace
//! and finished at the bookmark annotated `k8s.io/initial-events-end`
//! (changes and plain bookmarks before it are applied too). A stream that
//! fails before that bookmark deletes nothing; like client-go, the
//! reflector then lists instead for this attempt, and tries WatchList again
//! on the next one.

use std::time::Instant;

use futures::{FutureExt, StreamExt};
use kcontrol_client::{Error as ClientError, WatchEvent};
use kcontrol_indexer::KubeObject;
use serde::de::DeserializeOwned;

use crate::backoff::watch_timeout_seconds;
use crate::error::ReflectorError;
use crate::list::BATCH;
use crate::lister_watcher::WatchEventStream;
use crate::metrics::WatchEventType;
use crate::reflector::{keep_newest, Reflector};
use crate::retry::Request;

/// Whether a watch request's error says the server refuses WatchList
/// (an old server rejecting `sendInitialEvents` or `resourceVersionMatch`
/// on a watch, or a disabled feature).
fn refuses_watch_list(e: &ClientError) -> bool {
    e.api_error()
        .is_some_and(|api| matches!(api.code(), 400 | 403 | 422))
}

/// A watch stream's next item, taken ahead (`None`: the stream ended).
type Taken<K> = Option<Result<WatchEvent<K>, ClientError>>;

/// A batch of initial ADDED events gathered (`gather_added`).
struct Gathered<K> {
    /// The newest version among the gathered objects.
    newest: Option<String>,
    /// The event after them, if it was taken; the failure that stopped
    /// the batch, if one did.
    next: Result<Option<Taken<K>>, ReflectorError>,
}

fn unsupported(reason: &str) -> ReflectorError {
    ReflectorError::WatchListUnsupported {
        reason: reason.to_owned(),
    }
}

impl<K> Reflector<K>
where
    K: KubeObject + DeserializeOwned,
{
    /// Syncs through WatchList; the watch to go on with once the initial
    /// events are in the FIFO. A version the server no longer serves (or
    /// has not reached) is retried once at once from `""` (RF1).
    pub(crate) async fn watch_list(&self) -> Result<WatchEventStream<K>, ReflectorError> {
        match self.watch_list_once().await {
            Err(e) if e.is_expired() || e.is_too_large_resource_version() => {
                self.note_retry(&e);
                self.state.lock().last_rv_unavailable = true;
                self.watch_list_once().await
            }
            other => other,
        }
    }

    async fn watch_list_once(&self) -> Result<WatchEventStream<K>, ReflectorError> {
        let rv = {
            let state = self.state.lock();
            // never older than what a failed attempt already delivered (RF1)
            let mut newest = state.delivered_floor.clone();
            if let Some(last) = &state.last_sync_rv {
                keep_newest(&mut newest, last);
            }
            if state.last_rv_unavailable {
                String::new()
            } else {
                newest.unwrap_or_default()
            }
        };
        let params = self
            .base_watch_params()
            .timeout(watch_timeout_seconds(
                self.config.watch_config.min_watch_timeout,
                rand::random::<f64>(),
            ))
            .streaming_lists();
        self.list_starting();
        self.watch_starting();
        let started = Instant::now();
        tracing::trace!(reflector = %self.config.name, resource_version = %rv, "watch-list");
        let sent = self
            .send_retrying(Request::Watch, || self.lister_watcher.watch(&params, &rv))
            .await;
        let stream = match sent {
            Ok(stream) => stream,
            Err(e) if refuses_watch_list(&e) => {
                return Err(unsupported(&format!("the watch was answered with {e}")))
            }
            Err(e) => return Err(ReflectorError::WatchStart(e)),
        };
        self.stream_initial_events(stream, started).await
    }

    /// Streams the initial events into a replace, finished at the
    /// initial-events-end bookmark; dropped (deleting nothing) on failure.
    /// ADDED events the stream has ready go to the FIFO together (as a
    /// list's items: RF9).
    async fn stream_initial_events(
        &self,
        mut stream: WatchEventStream<K>,
        started: Instant,
    ) -> Result<WatchEventStream<K>, ReflectorError> {
        let mut replace = self.begin_relist()?;
        let mut items = 0u64;
        let mut batch = Vec::with_capacity(BATCH);
        // the event after a batch, taken while gathering it
        let mut taken = None;
        loop {
            let next = match taken.take() {
                Some(next) => next,
                None => stream.next().await,
            };
            let event = match next {
                None => return Err(ReflectorError::WatchListIncomplete),
                Some(Err(e)) => return Err(ReflectorError::Watch(e)),
                Some(Ok(event)) => event,
            };
            match event {
                WatchEvent::Added(obj) => {
                    let gathered = self.gather_added(obj, &mut stream, &mut batch);
                    items += batch.len() as u64;
                    replace.extend(batch.drain(..))?;
                    self.note_delivered(gathered.newest.as_deref());
                    taken = gathered.next?;
                }
                WatchEvent::Bookmark(bookmark) if bookmark.is_initial_events_end() => {
                    self.accept_bookmark(&bookmark)?;
                    let rv = bookmark.metadata.resource_version;
                    if rv.is_empty() {
                        return Err(ReflectorError::MissingResourceVersion(
                            "initial-events-end bookmark",
                        ));
                    }
                    replace.finish(rv.as_str())?;
                    self.sync_finished();
                    self.metrics.list_finished(items, started.elapsed());
                    tracing::debug!(reflector = %self.config.name, resource_version = %rv, items, "watch-list synced");
                    self.set_last_sync_rv(rv);
                    return Ok(stream);
                }
                // servers before kubernetes#127012 (and some aggregated
                // ones) send changes and plain bookmarks among the initial
                // events: applied, as client-go applies them to its
                // temporary store
                WatchEvent::Bookmark(bookmark) => self.accept_bookmark(&bookmark)?,
                WatchEvent::Modified(obj) => {
                    self.metrics.watch_event(WatchEventType::Modified);
                    let delivered = obj.resource_version().map(str::to_owned);
                    replace.add(self.prepare(obj)?)?;
                    self.note_delivered(delivered.as_deref());
                }
                WatchEvent::Deleted(obj) => {
                    self.metrics.watch_event(WatchEventType::Deleted);
                    let delivered = obj.resource_version().map(str::to_owned);
                    replace.remove(self.prepare(obj)?)?;
                    self.note_delivered(delivered.as_deref());
                }
                WatchEvent::Error(status) => {
                    self.metrics.watch_event(WatchEventType::Error);
                    return Err(ReflectorError::WatchEvent(Box::new(status)));
                }
                WatchEvent::Unknown { event_type, .. } => {
                    return Err(ReflectorError::UnknownEventType(event_type));
                }
            }
        }
    }

    /// Prepares `first` and every ADDED event the stream has ready without
    /// waiting (up to [`BATCH`]) into `batch`, as a list's page does
    /// (`take_ready`): a failure stops it, keeping what came before.
    fn gather_added(
        &self,
        first: K,
        stream: &mut WatchEventStream<K>,
        batch: &mut Vec<K>,
    ) -> Gathered<K> {
        let mut newest = None;
        let mut obj = first;
        let next = loop {
            self.metrics.watch_event(WatchEventType::Added);
            match self.prepare(obj) {
                Ok(prepared) => {
                    if let Some(rv) = prepared.resource_version() {
                        keep_newest(&mut newest, rv);
                    }
                    batch.push(prepared);
                }
                Err(e) => break Err(e),
            }
            if batch.len() >= BATCH {
                break Ok(None);
            }
            match stream.next().now_or_never() {
                None => break Ok(None),
                Some(Some(Ok(WatchEvent::Added(next)))) => obj = next,
                Some(other) => break Ok(Some(other)),
            }
        };
        Gathered { newest, next }
    }
}
