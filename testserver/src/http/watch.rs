//! WATCH: start from a resourceVersion inside the history window (older:
//! HTTP 200 and one ERROR event with a 410 `Expired` Status), or from the
//! current state (synthetic ADDED events; with `sendInitialEvents` a
//! BOOKMARK annotated `k8s.io/initial-events-end` follows them); selectors
//! (objects leaving the selection are DELETED), periodic bookmarks and one
//! shortly before `timeoutSeconds` ends; faults. Each watcher reads the
//! shared history with its own cursor and sends the pre-encoded frames
//! (JSON lines; for protobuf, length-prefixed WatchEvents encoded per
//! watcher).

use super::body::ChannelBody;
use super::list::{parse_rv, wait_for_rv, Rv};
use super::negotiate::Output;
use super::render::{self, IncludeObject};
use super::{table, State};
use crate::flow_control::Seat;
use crate::resource::ResourceInfo;
use crate::selector::Filter;
use crate::status::{FieldError, StatusError};
use crate::store::{Event, ResourceStore, StoredObject, WatchEventType};
use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::BodyExt;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

const BATCH_EVENTS: usize = 1024;
const BATCH_BYTES: usize = 256 * 1024;
const CHANNEL_DEPTH: usize = 8;
/// kube sends the last bookmark this long before the watch's deadline.
const PRE_TIMEOUT_BOOKMARK: Duration = Duration::from_secs(2);

/// One frame of a watch stream.
fn frame(kind: &str, object: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(object.len() + 32);
    b.put_slice(b"{\"type\":\"");
    b.put_slice(kind.as_bytes());
    b.put_slice(b"\",\"object\":");
    b.put_slice(object);
    b.put_slice(b"}\n");
    b.freeze()
}

/// One frame of a protobuf watch stream: `object` is the enveloped object.
fn proto_frame(kind: &str, object: Bytes) -> Bytes {
    Bytes::from(crate::proto::watch_frame(kind, object.to_vec()))
}

/// The Content-Type of a watch stream.
fn stream_content_type(output: Output) -> &'static str {
    if output.is_protobuf() {
        crate::proto::WATCH_MEDIA_TYPE
    } else {
        "application/json"
    }
}

/// A Status as the object of an ERROR event in the stream's encoding.
fn status_object(e: &StatusError, output: Output) -> Bytes {
    let v = e.to_json();
    if output.is_protobuf() {
        crate::proto::encode_object(&v)
            .map(Bytes::from)
            .unwrap_or_default()
    } else {
        render::json_bytes(&v)
    }
}

/// A watch response carrying one ERROR event.
fn error_stream(
    e: &StatusError,
    output: Output,
) -> Result<hyper::Response<super::body::ResponseBody>, StatusError> {
    let object = status_object(e, output);
    let f = if output.is_protobuf() {
        proto_frame("ERROR", object)
    } else {
        frame("ERROR", &object)
    };
    hyper::Response::builder()
        .status(200)
        .header(http::header::CONTENT_TYPE, stream_content_type(output))
        .body(super::body::full(f))
        .map_err(|e| StatusError::internal(&e.to_string()))
}

struct Params {
    rv: Rv,
    send_initial: Option<bool>,
    bookmarks: bool,
    timeout: Duration,
}

fn parse_params(state: &State, q: &HashMap<String, String>) -> Result<Params, StatusError> {
    let rv = parse_rv(q.get("resourceVersion"))?;
    let rv_match = q
        .get("resourceVersionMatch")
        .map(String::as_str)
        .unwrap_or("");
    let send_initial = q
        .get("sendInitialEvents")
        .and_then(|v| super::request::parse_bool(v));
    let mut errs = Vec::new();
    if send_initial.is_some() && rv_match != "NotOlderThan" {
        errs.push(FieldError::forbidden(
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if !rv_match.is_empty() {
        if send_initial.is_none() {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if rv_match != "NotOlderThan" {
            errs.push(FieldError::not_supported(
                "resourceVersionMatch",
                json!(rv_match),
                &["NotOlderThan".into()],
            ));
        }
        if q.get("continue").is_some_and(|c| !c.is_empty()) {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
    }
    if !errs.is_empty() {
        return Err(StatusError::invalid(
            "meta.k8s.io",
            "ListOptions",
            "",
            &errs,
        ));
    }
    let timeout = match q.get("timeoutSeconds").and_then(|t| t.parse::<u64>().ok()) {
        Some(s) if s > 0 => Duration::from_secs(s),
        _ => state.config.default_watch_timeout,
    };
    Ok(Params {
        rv,
        send_initial,
        bookmarks: super::request::is_true(q.get("allowWatchBookmarks")),
        timeout,
    })
}

/// The version of a lagging replica that serves this watch from its cache,
/// if a fault says one does (only a watch from a version, without initial
/// events); a version newer than the replica's is 504.
fn lagging_replica(state: &State, p: &Params) -> Result<Option<u64>, StatusError> {
    let lagging = match (p.send_initial, p.rv) {
        (None | Some(false), Rv::At(_)) => state.faults.take_lagging(),
        _ => None,
    };
    if let (Some(replica_rv), Rv::At(n)) = (lagging, p.rv) {
        if n > replica_rv {
            return Err(StatusError::too_large_resource_version(n, replica_rv));
        }
    }
    Ok(lagging)
}

/// Where a watch starts: the objects it sends as initial ADDED events, the
/// resourceVersion they are at, and the history sequence number it reads
/// from next. `Err` is the 410 Status (to send as an ERROR event) of a
/// version older than the history.
fn initial_state(
    state: &State,
    rs: &ResourceStore,
    prefix: &str,
    p: &Params,
) -> Result<(Vec<Arc<StoredObject>>, u64, u64), StatusError> {
    Ok(match (p.send_initial, p.rv) {
        (Some(true), _) | (None, Rv::Unset | Rv::Any) => rs.snapshot(&state.core.store, prefix),
        (Some(false), Rv::Unset | Rv::Any) => {
            let (_, rv, seq) = rs.snapshot(&state.core.store, "\u{10FFFF}");
            (Vec::new(), rv, seq)
        }
        (_, Rv::At(n)) => match rs.seq_after(n) {
            Ok(seq) => (Vec::new(), n, seq),
            Err(floor) => return Err(StatusError::too_old_resource_version(n, floor)),
        },
    })
}

/// WATCH handler. `seat` (the admission limit's, if any) is held until the
/// watch is initialized: its initial events, and their end bookmark, are
/// queued to the client.
pub(crate) async fn watch(
    state: &Arc<State>,
    info: &Arc<ResourceInfo>,
    namespace: Option<&str>,
    q: &HashMap<String, String>,
    output: Output,
    seat: Option<Seat>,
) -> Result<hyper::Response<super::body::ResponseBody>, StatusError> {
    let p = parse_params(state, q)?;
    let scoped = crate::faults::ScopedResource {
        plural: &info.resource,
        group: &info.group,
    };
    if state.faults.initializing(scoped) {
        return Err(StatusError::storage_initializing());
    }
    let filter = Filter::parse(
        info,
        q.get("labelSelector").map(String::as_str),
        q.get("fieldSelector").map(String::as_str),
    )?;
    let rs = state.core.resource_store(info);
    let prefix = namespace
        .filter(|_| info.namespaced)
        .map(|n| format!("{n}/"))
        .unwrap_or_default();
    if state.faults.take_watch_expiry() {
        let asked = if let Rv::At(n) = p.rv {
            n
        } else {
            state.core.store.current_rv()
        };
        return error_stream(
            &StatusError::too_old_resource_version(asked, state.core.store.current_rv()),
            output,
        );
    }
    let lagging = lagging_replica(state, &p)?;
    if let Rv::At(n) = p.rv {
        wait_for_rv(state, n).await?;
    }
    let (initial, initial_rv, start_seq) = match initial_state(state, &rs, &prefix, &p) {
        Ok(start) => start,
        Err(too_old) => return error_stream(&too_old, output),
    };
    let end_bookmark = p.send_initial == Some(true) && p.bookmarks;
    let (tx, rx) = mpsc::channel(CHANNEL_DEPTH);
    let fast = sends_stored_frames(info, output, &filter);
    // subscribed before the watch counts as open: a close_all_watches from
    // then on ends it, even before its task first runs
    let mut close_rx = state.faults.subscribe_close();
    close_rx.borrow_and_update();
    let watcher = Watcher {
        state: state.clone(),
        info: info.clone(),
        rs,
        filter,
        output,
        prefix,
        tx,
        next_seq: start_seq,
        last_rv: initial_rv,
        bookmarks: p.bookmarks && lagging.is_none(),
        deadline: Instant::now() + p.timeout,
        sent: 0,
        fast,
        converts: state.admission.converts(&state.core, info),
        close_rx,
        stale_until: lagging,
        seat,
    };
    state.metrics.watch_started();
    tokio::spawn(watcher.run(initial, initial_rv, end_bookmark));
    hyper::Response::builder()
        .status(200)
        .header(http::header::CONTENT_TYPE, stream_content_type(output))
        .body(ChannelBody::new(rx).boxed())
        .map_err(|e| StatusError::internal(&e.to_string()))
}

/// Whether a watcher can send the history's pre-encoded JSON frames as they
/// are: JSON, the storage version, no per-object rendering, no selector.
fn sends_stored_frames(info: &ResourceInfo, output: Output, filter: &Filter) -> bool {
    output == Output::Json
        && info.is_storage_version()
        && info.behavior != crate::resource::Behavior::EventsV1
        && filter.is_empty()
}

struct Watcher {
    state: Arc<State>,
    info: Arc<ResourceInfo>,
    rs: Arc<ResourceStore>,
    filter: Filter,
    output: Output,
    prefix: String,
    tx: mpsc::Sender<Bytes>,
    next_seq: u64,
    last_rv: u64,
    bookmarks: bool,
    deadline: Instant,
    sent: u64,
    fast: bool,
    /// Objects are converted by the CRD's conversion webhook.
    converts: bool,
    /// Close-all-watches notifications, subscribed when the request came.
    close_rx: tokio::sync::watch::Receiver<u64>,
    /// Served by a lagging replica at this version: the watch ends once it
    /// has sent the events up to it.
    stale_until: Option<u64>,
    /// The admission seat, until the watch is initialized.
    seat: Option<Seat>,
}

/// Why a watch stream ends.
enum End {
    Closed,
}

/// What sending a batch of history events did.
enum Batch {
    /// Events were sent; more may follow at once.
    Sent,
    /// Nothing new: wait for the next event.
    Empty,
    /// The watch is over (close-after limit hit, or a lagging replica has
    /// sent all it has).
    Finished,
}

impl Watcher {
    async fn run(mut self, initial: Vec<Arc<StoredObject>>, initial_rv: u64, end_bookmark: bool) {
        let state = self.state.clone();
        let _ = self.serve(initial, initial_rv, end_bookmark).await;
        state.metrics.watch_ended();
    }

    /// One event frame in the stream's encoding; an object the protobuf
    /// mapping cannot encode becomes an ERROR event naming the field.
    fn event(&self, kind: &str, obj: &StoredObject) -> Bytes {
        match self.output {
            Output::Protobuf { .. } | Output::PartialMetadata { protobuf: true, .. } => {
                let value = match self.output {
                    Output::PartialMetadata { .. } => render::partial_metadata(obj.value(), false),
                    _ => render::object_value(&self.info, obj),
                };
                match crate::proto::encode_object(&value) {
                    Ok(b) => proto_frame(kind, Bytes::from(b)),
                    Err(e) => {
                        let status = StatusError::internal(&format!(
                            "the object cannot be encoded as protobuf: {e}"
                        ));
                        proto_frame("ERROR", status_object(&status, self.output))
                    }
                }
            }
            _ => frame(kind, &self.object_bytes(obj)),
        }
    }

    fn object_bytes(&self, obj: &StoredObject) -> Bytes {
        match self.output {
            Output::Json | Output::Yaml | Output::Protobuf { .. } => {
                render::object_json(&self.info, obj)
            }
            Output::PartialMetadata { v1beta1, .. } => {
                render::partial_metadata_json(obj.value(), v1beta1)
            }
            Output::Table { v1beta1 } => {
                let v = render::object_value(&self.info, obj);
                let rows = vec![table::row(&self.info, &v, IncludeObject::Metadata, v1beta1)];
                let t = table::table(
                    &self.info,
                    rows,
                    json!({"resourceVersion": obj.resource_version().to_string()}),
                    v1beta1,
                );
                render::json_bytes(&t)
            }
        }
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        // only the resourceVersion (and the annotation): kube-apiserver
        // omits a zero creationTimestamp since 1.33
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        // a bookmark is converted like any object: a PartialObjectMetadata
        // for a metadata-only watch, as kube-apiserver sends it
        let obj = match self.output {
            Output::PartialMetadata { v1beta1, .. } => {
                json!({"kind": "PartialObjectMetadata", "apiVersion": render::meta_api_version(v1beta1), "metadata": metadata})
            }
            _ => {
                json!({"kind": self.info.kind, "apiVersion": self.info.api_version(), "metadata": metadata})
            }
        };
        if self.output.is_protobuf() {
            return proto_frame(
                "BOOKMARK",
                crate::proto::encode_object(&obj)
                    .map(Bytes::from)
                    .unwrap_or_default(),
            );
        }
        frame("BOOKMARK", &render::json_bytes(&obj))
    }

    /// A frame that does not decode, in the stream's framing.
    fn corrupt(&self) -> Bytes {
        if self.output.is_protobuf() {
            // a well-framed WatchEvent whose bytes are not protobuf
            return Bytes::from_static(&[0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0xff]);
        }
        Bytes::from(format!(
            "{{\"type\":\"MODIFIED\",\"object\":{{\"kind\":\"{}\",\"apiVersion\":}}\n",
            self.info.kind
        ))
    }

    /// A well-formed ADDED event whose object is a `Status`.
    fn foreign(&self) -> Bytes {
        let status =
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"});
        if self.output.is_protobuf() {
            let object = crate::proto::encode_object(&status).unwrap_or_default();
            return proto_frame("ADDED", Bytes::from(object));
        }
        frame("ADDED", &render::json_bytes(&status))
    }

    /// The frame this watcher sends for an event, if any.
    fn convert(&self, ev: &Event) -> Option<Bytes> {
        if !ev.object.key().starts_with(self.prefix.as_str()) {
            return None;
        }
        if self.fast {
            return Some(ev.frame.clone());
        }
        let cur = ev.kind != WatchEventType::Deleted && self.filter.matches(&ev.object);
        let prev = ev.prev.as_ref().is_some_and(|p| self.filter.matches(p));
        match (cur, prev) {
            (true, false) => Some(self.event("ADDED", &ev.object)),
            (true, true) => Some(self.event(ev.kind.as_str(), &ev.object)),
            (false, true) if ev.kind == WatchEventType::Deleted => {
                Some(self.event("DELETED", &ev.object))
            }
            (false, true) => {
                let p = ev.prev.as_ref()?;
                let mut v = p.value().clone();
                crate::meta::set_meta_str(&mut v, "resourceVersion", &ev.rv.to_string());
                let gone =
                    crate::store::StoredObject::detached(v, ev.rv, p.key().to_owned()).ok()?;
                Some(self.event("DELETED", &gone))
            }
            (false, false) => None,
        }
    }

    /// A failed conversion ends the watch with an ERROR event, as
    /// kube-apiserver ends a watch it cannot encode.
    async fn conversion_failed(&self, e: &StatusError) -> End {
        let object = status_object(e, self.output);
        let f = match self.output {
            Output::Protobuf { .. } => proto_frame("ERROR", object),
            _ => frame("ERROR", &object),
        };
        let _ = self.tx.send(f).await;
        End::Closed
    }

    async fn send(&self, b: Bytes) -> Result<(), End> {
        self.tx.send(b).await.map_err(|_| End::Closed)
    }

    /// Appends one event frame; returns false when the close-after limit is hit.
    fn push_event(&mut self, buf: &mut BytesMut, f: Bytes) -> bool {
        if self.state.faults.take_corrupt_frame() {
            buf.put_slice(&self.corrupt());
        } else if self.state.faults.take_foreign_frame() {
            buf.put_slice(&self.foreign());
        } else {
            buf.put_slice(&f);
        }
        self.sent += 1;
        self.state
            .faults
            .close_after()
            .is_none_or(|n| self.sent < n)
    }

    async fn send_initial(&mut self, initial: Vec<Arc<StoredObject>>) -> Result<(), End> {
        let initial = if self.converts {
            let state = Arc::clone(&self.state);
            match state.admission.read(&state.core, &self.info, initial).await {
                Ok(items) => items,
                Err(e) => return Err(self.conversion_failed(&e).await),
            }
        } else {
            initial
        };
        let mut buf = BytesMut::new();
        for obj in initial {
            if !self.filter.matches(&obj) {
                continue;
            }
            let f = self.event("ADDED", &obj);
            if !self.push_event(&mut buf, f) {
                self.send(buf.freeze()).await?;
                return Err(End::Closed);
            }
            if buf.len() >= BATCH_BYTES {
                self.send(buf.split().freeze()).await?;
            }
        }
        if !buf.is_empty() {
            self.send(buf.freeze()).await?;
        }
        Ok(())
    }

    fn next_bookmark(&self, now: Instant) -> Option<Instant> {
        if !self.bookmarks {
            return None;
        }
        let mut at = now + self.state.config.bookmark_interval;
        let pre = self.deadline.checked_sub(PRE_TIMEOUT_BOOKMARK)?;
        if pre < at {
            at = pre;
        }
        (at > now).then_some(at)
    }

    async fn serve(
        &mut self,
        initial: Vec<Arc<StoredObject>>,
        initial_rv: u64,
        end_bookmark: bool,
    ) -> Result<(), End> {
        let mut seq_rx = self.rs.subscribe();
        let mut gone_rx = self.rs.subscribe_closed();
        let mut close_rx = self.close_rx.clone();
        let mut paused_rx = self.state.faults.subscribe_paused();
        let mut shutdown = self.state.shutdown.clone();
        self.send_initial(initial).await?;
        if end_bookmark {
            self.send(self.bookmark(initial_rv, true)).await?;
        }
        // initialized: a streaming watch takes no seat (APF)
        self.seat = None;
        let mut bookmark_at = self.next_bookmark(Instant::now());
        loop {
            seq_rx.borrow_and_update();
            if *gone_rx.borrow_and_update() || *shutdown.borrow_and_update() {
                return Ok(());
            }
            if !*paused_rx.borrow_and_update() {
                match self.send_batch().await? {
                    Batch::Finished => return Ok(()),
                    Batch::Sent => continue,
                    Batch::Empty => {}
                }
            }
            let sleep_bookmark = async {
                match bookmark_at {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                r = seq_rx.changed() => if r.is_err() { return Ok(()) },
                _ = gone_rx.changed() => return Ok(()),
                _ = close_rx.changed() => return Ok(()),
                _ = paused_rx.changed() => {},
                _ = shutdown.changed() => return Ok(()),
                _ = tokio::time::sleep_until(self.deadline) => return Ok(()),
                _ = self.tx.closed() => return Ok(()),
                _ = sleep_bookmark => {
                    if !*paused_rx.borrow() {
                        self.send_periodic_bookmark().await?;
                    }
                    bookmark_at = self.next_bookmark(Instant::now());
                }
            }
        }
    }
    /// Sends the next batch of history events (up to a lagging replica's
    /// version), converted and filtered.
    async fn send_batch(&mut self) -> Result<Batch, End> {
        let events = self
            .rs
            .events_from(self.next_seq, BATCH_EVENTS)
            .map_err(|_| End::Closed)?;
        if let Some(limit) = self.stale_until {
            // the replica has nothing newer: it ends the watch
            if events.first().is_none_or(|ev| ev.rv > limit) {
                return Ok(Batch::Finished);
            }
        }
        if events.is_empty() {
            return Ok(Batch::Empty);
        }
        let mut buf = BytesMut::new();
        let mut keep_going = true;
        for ev in &events {
            if self.stale_until.is_some_and(|limit| ev.rv > limit) {
                break;
            }
            self.next_seq = ev.seq + 1;
            self.last_rv = ev.rv;
            let converted;
            let ev = if self.converts {
                let state = Arc::clone(&self.state);
                converted = match state
                    .admission
                    .read_event(&state.core, &self.info, ev)
                    .await
                {
                    Ok(c) => c,
                    Err(e) => {
                        if !buf.is_empty() {
                            self.send(buf.split().freeze()).await?;
                        }
                        return Err(self.conversion_failed(&e).await);
                    }
                };
                &converted
            } else {
                ev
            };
            if let Some(f) = self.convert(ev) {
                if !self.push_event(&mut buf, f) {
                    keep_going = false;
                    break;
                }
            }
        }
        if !buf.is_empty() {
            self.send(buf.freeze()).await?;
        }
        Ok(if keep_going {
            Batch::Sent
        } else {
            Batch::Finished
        })
    }

    /// A periodic BOOKMARK at the newest version this watcher has passed.
    async fn send_periodic_bookmark(&mut self) -> Result<(), End> {
        let rv = self
            .rs
            .bookmark_rv(&self.state.core.store, self.next_seq, self.last_rv);
        self.last_rv = rv;
        self.send(self.bookmark(rv, false)).await
    }
}
