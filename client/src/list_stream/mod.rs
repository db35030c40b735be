//! Streaming lists: [`Api::list_stream`](crate::Api::list_stream) decodes a
//! list answer item by item as its body arrives, so a list of any size is
//! never held whole — neither as bytes nor as decoded objects. A reflector
//! feeds each item to its DeltaFIFO as it comes (client-go's RF9 problem:
//! a relist that holds the whole list twice).
//!
//! [`ListScanner`] finds each element of `items` (and each other top-level
//! field: `kind`, `apiVersion`, `metadata`, in any order, before or after
//! the items) as a byte range; [`ListStream`] decodes each range with
//! `serde_json` into the caller's type and keeps the list's metadata. A
//! protobuf answer is cut the same way by kcontrol-proto's `ListDecoder`
//! and each item decoded by its schema (`protobuf.rs`).

mod protobuf;
mod scanner;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};
use http_body_util::BodyDataStream;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kcontrol_indexer::KubeObject;
use serde::de::{DeserializeOwned, Error as _, IgnoredAny};

pub use scanner::{ListPart, ListScanner, ScanError};

use crate::api::Api;
use crate::error::Error;
use crate::params::ListParams;
use crate::wire::ObjectList;

/// A boxed stream of body chunks.
type ChunkStream = Pin<Box<dyn Stream<Item = Result<Bytes, Error>> + Send>>;

/// Where the items come from.
enum Source<K> {
    /// A body being scanned.
    Body {
        chunks: ChunkStream,
        scanner: ListScanner,
        chunks_done: bool,
    },
    /// A protobuf body being cut.
    Protobuf {
        chunks: ChunkStream,
        decoder: kcontrol_proto::ListDecoder,
        chunks_done: bool,
    },
    /// A list already decoded.
    Decoded(std::vec::IntoIter<K>),
}

/// A list answer, decoded one item at a time: a [`Stream`] of the list's
/// objects; once it has ended (returned `None`), [`metadata`](Self::metadata)
/// holds the list's `resourceVersion` and `continue` token.
///
/// The stream ends with `None` only after the whole list was read and
/// found well formed; a truncated or malformed body, an undecodable item or
/// a transport failure is an `Err` item, after which the stream ends. So a
/// consumer that saw `None` knows it saw every item.
///
/// ```
/// use bytes::Bytes;
/// use futures::TryStreamExt;
/// use kcontrol_client::ListStream;
/// use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
///
/// let body = r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7"},
///     "items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#;
/// // split anywhere: each item is decoded as soon as its last byte arrives
/// let chunks = [&body[..30], &body[30..75], &body[75..]]
///     .map(|c| Ok(Bytes::copy_from_slice(c.as_bytes())));
/// let mut list = ListStream::<ConfigMap>::new(futures::stream::iter(chunks), "list of configmaps", 1 << 20);
/// # futures::executor::block_on(async {
/// let mut names = Vec::new();
/// while let Some(cm) = list.try_next().await? {
///     names.push(cm.metadata.name.unwrap());
/// }
/// assert_eq!(names, ["a", "b"]);
/// assert_eq!(list.resource_version(), Some("7"));
/// assert_eq!(list.kind(), Some("ConfigMapList"));
/// # Ok::<(), kcontrol_client::Error>(())
/// # })?;
/// # Ok::<(), kcontrol_client::Error>(())
/// ```
pub struct ListStream<K> {
    source: Source<K>,
    what: String,
    metadata: Option<ListMeta>,
    api_version: Option<String>,
    kind: Option<String>,
    items: u64,
    complete: bool,
    done: bool,
    deadline: Option<(Pin<Box<tokio::time::Sleep>>, Duration)>,
    decode: kcontrol_proto::DecodeOptions,
}

impl<K> std::fmt::Debug for ListStream<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListStream")
            .field("what", &self.what)
            .field("items", &self.items)
            .field("complete", &self.complete)
            .finish_non_exhaustive()
    }
}

impl<K> ListStream<K> {
    /// A stream over a list already decoded (for lister-watchers that get
    /// whole pages, and tests).
    pub fn from_list(list: ObjectList<K>) -> Self {
        let mut stream = Self::with_source(Source::Decoded(list.items.into_iter()));
        stream.metadata = Some(list.metadata);
        stream.api_version = list.api_version;
        stream.kind = list.kind;
        stream.named("list".to_owned())
    }

    fn with_source(source: Source<K>) -> Self {
        Self {
            source,
            what: String::new(),
            metadata: None,
            api_version: None,
            kind: None,
            items: 0,
            complete: false,
            done: false,
            deadline: None,
            decode: kcontrol_proto::DecodeOptions::default(),
        }
    }

    fn named(mut self, what: String) -> Self {
        self.what = what;
        self
    }

    /// Decodes the items of a protobuf answer without
    /// `metadata.managedFields`, skipped unread
    /// ([`ListParams::strip_managed_fields`]); JSON items keep them.
    #[must_use]
    pub fn strip_managed_fields(mut self, on: bool) -> Self {
        self.decode = self.decode.strip_managed_fields(on);
        self
    }

    /// The list's metadata (`resourceVersion`, `continue`,
    /// `remainingItemCount`), once it has been read: always after the
    /// stream ended, and earlier when the server sent it before the items
    /// (kube-apiserver does).
    pub fn metadata(&self) -> Option<&ListMeta> {
        self.metadata.as_ref()
    }

    /// The list's resourceVersion, once read (see [`metadata`](Self::metadata)).
    pub fn resource_version(&self) -> Option<&str> {
        self.metadata
            .as_ref()
            .and_then(|m| m.resource_version.as_deref())
            .filter(|v| !v.is_empty())
    }

    /// The token of the next page, once read; `None` on the last page.
    pub fn continue_token(&self) -> Option<&str> {
        self.metadata
            .as_ref()
            .and_then(|m| m.continue_.as_deref())
            .filter(|c| !c.is_empty())
    }

    /// `apiVersion` of the list, once read.
    pub fn api_version(&self) -> Option<&str> {
        self.api_version.as_deref()
    }

    /// `kind` of the list (`ConfigMapList`), once read.
    pub fn kind(&self) -> Option<&str> {
        self.kind.as_deref()
    }

    /// How many items have been handed out so far.
    pub fn items_read(&self) -> u64 {
        self.items
    }

    /// Whether the whole list has been read and found well formed (the
    /// stream returned `None`).
    pub fn is_complete(&self) -> bool {
        self.complete
    }
}

impl<K: DeserializeOwned> ListStream<K> {
    /// Decodes the list in `chunks` (a body, split anywhere). `what` names
    /// the list in errors (`"list of configmaps"`); an item (or other
    /// top-level value) over `max_item_size` bytes is an error.
    pub fn new<S>(chunks: S, what: impl Into<String>, max_item_size: usize) -> Self
    where
        S: Stream<Item = Result<Bytes, Error>> + Send + 'static,
    {
        Self::with_source(Source::Body {
            chunks: Box::pin(chunks),
            scanner: ListScanner::new(max_item_size),
            chunks_done: false,
        })
        .named(what.into())
    }

    /// Fails the stream with [`Error::Timeout`] if it has not ended after
    /// `limit` (counted from now). Must be called within a tokio runtime.
    #[must_use]
    pub fn with_timeout(mut self, limit: Duration) -> Self {
        self.deadline = Some((Box::pin(tokio::time::sleep(limit)), limit));
        self
    }

    /// Reads the whole list into an [`ObjectList`] (what
    /// [`Api::list`](crate::Api::list) returns, for comparison and tests).
    pub async fn collect_list(mut self) -> Result<ObjectList<K>, Error> {
        let mut items = Vec::new();
        while let Some(item) = self.try_next().await? {
            items.push(item);
        }
        Ok(ObjectList {
            api_version: self.api_version,
            kind: self.kind,
            metadata: self.metadata.unwrap_or_default(),
            items,
        })
    }

    fn decode_error(&self, what: String, source: serde_json::Error) -> Error {
        Error::Decode { what, source }
    }

    fn scan_error(&self, e: &ScanError) -> Error {
        self.decode_error(self.what.clone(), serde_json::Error::custom(e))
    }

    fn decode_item(&mut self, bytes: &[u8]) -> Result<K, Error> {
        let item = serde_json::from_slice(bytes).map_err(|source| {
            self.decode_error(format!("item {} of {}", self.items, self.what), source)
        })?;
        self.items += 1;
        Ok(item)
    }

    /// Records a top-level field other than the items.
    fn field(&mut self, name: &str, value: &[u8]) -> Result<(), Error> {
        let what = || format!("{name:?} of {}", self.what);
        let duplicate =
            || serde_json::Error::custom(format_args!("duplicate field {name:?} in the list"));
        match name {
            "metadata" => {
                if self.metadata.is_some() {
                    return Err(self.decode_error(what(), duplicate()));
                }
                let meta: ListMeta = serde_json::from_slice(value)
                    .map_err(|source| self.decode_error(what(), source))?;
                self.metadata = Some(meta);
            }
            "kind" | "apiVersion" => {
                let slot_taken = if name == "kind" {
                    self.kind.is_some()
                } else {
                    self.api_version.is_some()
                };
                if slot_taken {
                    return Err(self.decode_error(what(), duplicate()));
                }
                let text: Option<String> = serde_json::from_slice(value)
                    .map_err(|source| self.decode_error(what(), source))?;
                if name == "kind" {
                    self.kind = text;
                } else {
                    self.api_version = text;
                }
            }
            "items" => {
                // an `items` array is handed out item by item; anything else is `null`
                serde_json::from_slice::<Option<Vec<IgnoredAny>>>(value)
                    .map_err(|source| self.decode_error(what(), source))?;
                if value != b"null" {
                    return Err(self.decode_error(
                        what(),
                        serde_json::Error::custom("items must be an array or null"),
                    ));
                }
            }
            _ => {
                serde_json::from_slice::<IgnoredAny>(value)
                    .map_err(|source| self.decode_error(what(), source))?;
            }
        }
        Ok(())
    }

    /// Ends the stream with an error.
    fn fail(&mut self, error: Error) -> Poll<Option<Result<K, Error>>> {
        self.done = true;
        Poll::Ready(Some(Err(error)))
    }

    /// The next step of a body source.
    fn poll_body(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<K, Error>>> {
        loop {
            let Source::Body {
                chunks,
                scanner,
                chunks_done,
            } = &mut self.source
            else {
                return Poll::Ready(None);
            };
            let finished = *chunks_done;
            match scanner.next_part() {
                Err(e) => {
                    let e = self.scan_error(&e);
                    return self.fail(e);
                }
                Ok(Some(ListPart::Item(bytes))) => {
                    return match self.decode_item(&bytes) {
                        Ok(item) => Poll::Ready(Some(Ok(item))),
                        Err(e) => self.fail(e),
                    };
                }
                Ok(Some(ListPart::Field(name, value))) => {
                    if let Err(e) = self.field(&name, &value) {
                        return self.fail(e);
                    }
                    continue;
                }
                Ok(None) if finished => {
                    if let Err(e) = scanner.finish() {
                        let e = self.scan_error(&e);
                        return self.fail(e);
                    }
                    self.done = true;
                    self.complete = true;
                    if self.metadata.is_none() {
                        self.metadata = Some(ListMeta::default());
                    }
                    return Poll::Ready(None);
                }
                Ok(None) => {}
            }
            match chunks.poll_next_unpin(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(chunk))) => scanner.push(chunk),
                Poll::Ready(Some(Err(e))) => return self.fail(e),
                Poll::Ready(None) => *chunks_done = true,
            }
        }
    }
}

impl<K: DeserializeOwned> Stream for ListStream<K> {
    type Item = Result<K, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        // `ListStream` holds nothing pinned in place (the timer is boxed)
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if let Some((sleep, limit)) = &mut this.deadline {
            if sleep.as_mut().poll(cx).is_ready() {
                let limit = *limit;
                return this.fail(Error::Timeout(limit));
            }
        }
        if let Source::Protobuf { .. } = this.source {
            return this.poll_protobuf(cx);
        }
        if let Source::Decoded(items) = &mut this.source {
            return match items.next() {
                Some(item) => {
                    this.items += 1;
                    Poll::Ready(Some(Ok(item)))
                }
                None => {
                    this.done = true;
                    this.complete = true;
                    Poll::Ready(None)
                }
            };
        }
        this.poll_body(cx)
    }
}

impl<K> Unpin for ListStream<K> {}

impl<K: KubeObject + DeserializeOwned> Api<K> {
    /// Lists one page like [`list`](Self::list), but hands the objects out
    /// one at a time as the body arrives, so the page is never held whole
    /// (a list at resourceVersion `"0"` may be one page of every object).
    ///
    /// An HTTP error answer is the `Err` of this call; everything after the
    /// answer's head arrives through the stream. The request is rate-limited
    /// like any other; the request timeout covers the whole body.
    pub async fn list_stream(&self, params: &ListParams) -> Result<ListStream<K>, Error> {
        let uri = params
            .to_query()
            .with_path(&self.collection_path(self.namespace())?);
        let started = tokio::time::Instant::now();
        let client = self.client();
        let response = client.request_raw(self.read_request(&uri, true)?).await?;
        if !response.status().is_success() {
            return Err(client.error_response(response).await);
        }
        let protobuf = crate::content::is_protobuf(response.headers());
        let mapper = client.clone();
        let chunks = BodyDataStream::new(response.into_body())
            .map_err(move |e| mapper.transport_error(Box::new(e), false));
        let what = format!("list of {}", self.resource().plural);
        let stream = if protobuf {
            ListStream::new_protobuf(chunks, what, client.max_watch_frame_size())
                .strip_managed_fields(params.strip_managed_fields)
        } else {
            ListStream::new(chunks, what, client.max_watch_frame_size())
        };
        Ok(match client.request_timeout() {
            Some(limit) => stream.with_timeout(limit.saturating_sub(started.elapsed())),
            None => stream,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn decode(
        body: &str,
        splits: &[usize],
    ) -> Result<(Vec<ConfigMap>, ListStream<ConfigMap>), Error> {
        let mut chunks = Vec::new();
        let mut start = 0;
        for &s in splits {
            chunks.push(Ok(Bytes::copy_from_slice(&body.as_bytes()[start..s])));
            start = s;
        }
        chunks.push(Ok(Bytes::copy_from_slice(&body.as_bytes()[start..])));
        let mut stream = ListStream::new(futures::stream::iter(chunks), "list", 1 << 20);
        futures::executor::block_on(async {
            let mut items = Vec::new();
            while let Some(item) = stream.try_next().await? {
                items.push(item);
            }
            Ok((items, stream))
        })
    }

    #[test]
    fn metadata_after_items_is_read_at_the_end() {
        let body = r#"{"items":[{"metadata":{"name":"a"}}],"metadata":{"resourceVersion":"3","continue":"c"},"kind":"ConfigMapList","apiVersion":"v1","extra":{"x":[1]}}"#;
        let (items, stream) = decode(body, &[12, 40]).unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(stream.resource_version(), Some("3"));
        assert_eq!(stream.continue_token(), Some("c"));
        assert_eq!(stream.api_version(), Some("v1"));
        assert!(stream.is_complete());
    }

    #[test]
    fn a_bad_item_names_its_index_and_ends_the_stream() {
        let body = r#"{"items":[{"metadata":{"name":"a"}},{"metadata":5}]}"#;
        let err = decode(body, &[]).unwrap_err();
        assert!(err.to_string().contains("item 1 of list"), "{err}");
    }

    #[test]
    fn truncated_and_duplicate_fields_fail() {
        for bad in [
            r#"{"items":[{"metadata":{"name":"a"}}]"#,
            r#"{"metadata":{},"metadata":{},"items":[]}"#,
            r#"{"kind":"A","kind":"B"}"#,
            r#"{"items":{}}"#,
            r#"{"metadata":"x"}"#,
            r#"{"other":tru}"#,
        ] {
            assert!(decode(bad, &[]).is_err(), "{bad}");
        }
    }

    #[test]
    fn decoded_lists_stream_too() {
        let mut list = ObjectList::<ConfigMap>::default();
        list.metadata.resource_version = Some("9".into());
        list.items.push(ConfigMap::default());
        let mut stream = ListStream::from_list(list);
        assert_eq!(stream.resource_version(), Some("9"));
        let items: Vec<_> = futures::executor::block_on(stream.by_ref().collect::<Vec<_>>());
        assert_eq!(items.len(), 1);
        assert!(stream.is_complete());
    }
}
