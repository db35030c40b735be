//! The watch phase (RF3, RF4, RF7): watch from the last synced version,
//! apply each event to the FIFO, and decide after each end or failure
//! whether to watch again (after a backoff when it failed) or to relist.

use std::convert::Infallible;
use std::time::Duration;

use futures::StreamExt;
use kcontrol_client::WatchEvent;
use kcontrol_indexer::KubeObject;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use crate::backoff::watch_timeout_seconds;
use crate::error::{Recovery, ReflectorError};
use crate::lister_watcher::WatchEventStream;
use crate::metrics::{RestartCause, WatchEventType};
use crate::reflector::Reflector;
use crate::retry::Request;

/// A watch that ends without events sooner than this counts as a failure.
const SHORT_WATCH: Duration = Duration::from_secs(1);

/// After this many bad events or objects in a row (RF7) without any event
/// processed in between, relist instead of watching again.
const BAD_EVENTS_BEFORE_RELIST: u32 = 3;

impl<K> Reflector<K>
where
    K: KubeObject + DeserializeOwned,
{
    /// Watches until a relist is needed (the error says why), starting
    /// with `initial` (a WatchList stream past its initial events) if given.
    pub(crate) async fn watch_loop(
        &self,
        initial: Option<WatchEventStream<K>>,
    ) -> Result<Infallible, ReflectorError> {
        let mut pending = initial;
        let mut bad_in_a_row = 0u32;
        loop {
            // a WatchList stream already delivered the initial events: it
            // is not a short watch if it ends right after them
            let continued = pending.is_some();
            let stream = match pending.take() {
                Some(stream) => stream,
                None => match self.start_watch().await {
                    Ok(stream) => stream,
                    Err(e) => {
                        self.recover(e, &mut bad_in_a_row).await?;
                        continue;
                    }
                },
            };
            let started = Instant::now();
            let (events, ended) = self.handle_watch(stream).await;
            let elapsed = started.elapsed();
            self.metrics.watch_ended(events, elapsed);
            if events > 0 {
                bad_in_a_row = 0;
                self.progressed();
            }
            match ended {
                Ok(()) if events == 0 && elapsed < SHORT_WATCH && !continued => {
                    self.recover(ReflectorError::ShortWatch(elapsed), &mut bad_in_a_row)
                        .await?;
                }
                Ok(()) => {
                    self.watch_ended_by(RestartCause::Closed);
                    tracing::trace!(reflector = %self.config.name, events, "watch ended; watching again");
                }
                Err(e) => self.recover(e, &mut bad_in_a_row).await?,
            }
        }
    }

    /// Records what ended the watch, then backs off for a failure that
    /// allows watching again (RF4, RF7), or returns it when a relist is
    /// needed.
    async fn recover(
        &self,
        error: ReflectorError,
        bad_in_a_row: &mut u32,
    ) -> Result<(), ReflectorError> {
        self.watch_ended_by(error.restart_cause());
        let preset = self.pacing.lock().preset();
        match error.watch_recovery(preset) {
            Recovery::Relist => {
                // RF5: a 410 after an outage is confirmed by the same watch
                // a second later before it costs the server a LIST
                let Some(wait) = self.confirm_before_relist(&error) else {
                    return Err(error);
                };
                self.note_retry(&error);
                tokio::time::sleep(wait).await;
                return Ok(());
            }
            Recovery::Rewatch => {}
            Recovery::RewatchUnlessRepeated => {
                *bad_in_a_row += 1;
                if *bad_in_a_row >= BAD_EVENTS_BEFORE_RELIST {
                    *bad_in_a_row = 0;
                    return Err(error);
                }
            }
        }
        match error.watch_recovery(preset) {
            // RF7: bad data is never silent (client-go would even relist)
            Recovery::RewatchUnlessRepeated => self.report(&error),
            // 429, an unreachable server: healed by watching again
            _ => self.note_retry(&error),
        }
        tokio::time::sleep(self.next_backoff(&error)).await;
        Ok(())
    }

    /// Starts a watch from the last synced version (RF3).
    async fn start_watch(&self) -> Result<WatchEventStream<K>, ReflectorError> {
        let rv = self.last_sync_resource_version().unwrap_or_default();
        let params = self.base_watch_params().timeout(watch_timeout_seconds(
            self.config.watch_config.min_watch_timeout,
            rand::random::<f64>(),
        ));
        self.watch_starting();
        tracing::trace!(reflector = %self.config.name, resource_version = %rv, "watch");
        self.send_retrying(Request::Watch, || self.lister_watcher.watch(&params, &rv))
            .await
            .map_err(ReflectorError::WatchStart)
    }

    /// Applies a watch's events until it ends: `Ok` when the server ended
    /// it, the error otherwise; with the number of events processed.
    async fn handle_watch(
        &self,
        mut stream: WatchEventStream<K>,
    ) -> (u64, Result<(), ReflectorError>) {
        let mut events = 0u64;
        loop {
            let result = match stream.next().await {
                None => return (events, Ok(())),
                // a connection reset or cut mid-stream is how watches end
                // when a server or proxy goes away: a normal close, as in
                // client-go (watch again at once, from the last version)
                Some(Err(e)) if e.is_transport() => {
                    tracing::debug!(reflector = %self.config.name, error = %e, "watch connection closed");
                    return (events, Ok(()));
                }
                Some(Err(e)) => Err(ReflectorError::Watch(e)),
                Some(Ok(event)) => self.handle_event(event),
            };
            if let Err(e) = result {
                return (events, Err(e));
            }
            events += 1;
        }
    }

    /// Applies one event to the FIFO and records its version.
    pub(crate) fn handle_event(&self, event: WatchEvent<K>) -> Result<(), ReflectorError> {
        let rv = match event {
            WatchEvent::Added(obj) => {
                self.metrics.watch_event(WatchEventType::Added);
                let rv = version_of(&obj);
                self.fifo.add(self.prepare(obj)?)?;
                rv
            }
            WatchEvent::Modified(obj) => {
                self.metrics.watch_event(WatchEventType::Modified);
                let rv = version_of(&obj);
                self.fifo.update(self.prepare(obj)?)?;
                rv
            }
            WatchEvent::Deleted(obj) => {
                self.metrics.watch_event(WatchEventType::Deleted);
                let rv = version_of(&obj);
                self.fifo.delete(self.prepare(obj)?)?;
                rv
            }
            WatchEvent::Bookmark(bookmark) => {
                self.accept_bookmark(&bookmark)?;
                Some(bookmark.metadata.resource_version)
            }
            WatchEvent::Error(status) => {
                self.metrics.watch_event(WatchEventType::Error);
                return Err(ReflectorError::WatchEvent(Box::new(status)));
            }
            // client-go's watch decoder rejects a type it does not know:
            // its change is lost, so the reflector relists (RF7)
            WatchEvent::Unknown { event_type, .. } => {
                return Err(ReflectorError::UnknownEventType(event_type));
            }
        };
        // an event without a version (no real server sends one) is applied
        // but does not move the version the next watch starts from
        if let Some(rv) = rv.filter(|v| !v.is_empty()) {
            self.set_last_sync_rv(rv);
        }
        Ok(())
    }
}

/// An object's resourceVersion, taken before any transform.
fn version_of<K: KubeObject>(obj: &K) -> Option<String> {
    obj.resource_version().map(str::to_owned)
}
