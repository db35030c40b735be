//! The client's path without the transport: a [`ListerWatcher`] that
//! answers from a capture held in memory, cut in the server's 64 KiB
//! chunks, through the same decoders the client picks for a response body
//! of the capture's encoding ([`ListStream::new`] or
//! [`ListStream::new_protobuf`], [`WatchStream::new`] or
//! [`WatchStream::new_protobuf`]). The `memory` child role syncs an
//! informer from it, so that an instruction-exact profiler (callgrind)
//! sees only the decoders, the reflector, the DeltaFIFO and the informer:
//!
//! ```sh
//! KCONTROL_BENCH_WIRE_ROLE=memory KCONTROL_BENCH_WIRE_ROW=unpaced/protobuf/watchlist/ConfigMap \
//!   valgrind --tool=callgrind target/release/kcontrol-bench __wire-child
//! ```
//!
//! (`KCONTROL_BENCH_WIRE_FIXTURES` may point at captures cut to fewer
//! objects, with `KCONTROL_BENCH_WIRE_OBJECTS` saying how many.)

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::serde::de::DeserializeOwned;
use kcontrol_client::{
    Error, ListParams, ListStream, ObjectList, WatchParams, WatchStream,
    DEFAULT_MAX_WATCH_FRAME_SIZE,
};
use kcontrol_indexer::KubeObject;
use kcontrol_reflector::{ListerWatcher, WatchEventStream};

use super::pace::CHUNK;
use super::Encoding;

/// Answers lists with `list` and WatchList watches with `watch_list`, both
/// in `encoding`; any other watch stays open without events.
pub struct CaptureListerWatcher {
    list: Bytes,
    watch_list: Bytes,
    encoding: Encoding,
}

impl CaptureListerWatcher {
    /// A lister-watcher of these captures in `encoding` (either may be
    /// empty when the sync does not use it).
    pub fn new(list: Bytes, watch_list: Bytes, encoding: Encoding) -> Self {
        Self {
            list,
            watch_list,
            encoding,
        }
    }
}

/// `data` in the server's chunks, as a body stream.
fn chunks(data: &Bytes) -> impl futures::Stream<Item = Result<Bytes, Error>> + Send + 'static {
    let data = data.clone();
    let starts = (0..data.len()).step_by(CHUNK);
    futures::stream::iter(starts.map(move |at| Ok(data.slice(at..(at + CHUNK).min(data.len())))))
}

impl<K: KubeObject + DeserializeOwned> ListerWatcher<K> for CaptureListerWatcher {
    fn list<'a>(&'a self, params: &'a ListParams) -> BoxFuture<'a, Result<ObjectList<K>, Error>> {
        async move { self.list_stream(params).await?.collect_list().await }.boxed()
    }

    fn list_stream<'a>(
        &'a self,
        params: &'a ListParams,
    ) -> BoxFuture<'a, Result<ListStream<K>, Error>> {
        let (body, what) = (chunks(&self.list), "list of configmaps");
        // the decoding the params ask, as `Api::list_stream` does
        let stream = match self.encoding {
            Encoding::Json => ListStream::new(body, what, DEFAULT_MAX_WATCH_FRAME_SIZE),
            Encoding::Protobuf => {
                ListStream::new_protobuf(body, what, DEFAULT_MAX_WATCH_FRAME_SIZE)
                    .strip_managed_fields(params.strip_managed_fields)
            }
        };
        async move { Ok(stream) }.boxed()
    }

    fn watch<'a>(
        &'a self,
        params: &'a WatchParams,
        _resource_version: &'a str,
    ) -> BoxFuture<'a, Result<WatchEventStream<K>, Error>> {
        let body = if params.send_initial_events {
            self.watch_list.clone()
        } else {
            Bytes::new()
        };
        // the watch stays open after its bytes, as a server holds it
        let open = chunks(&body).chain(futures::stream::pending());
        let stream = match self.encoding {
            Encoding::Json => WatchStream::<K>::new(open, DEFAULT_MAX_WATCH_FRAME_SIZE),
            Encoding::Protobuf => WatchStream::new_protobuf(open, DEFAULT_MAX_WATCH_FRAME_SIZE)
                .strip_managed_fields(params.strip_managed_fields),
        }
        .boxed();
        async move { Ok(stream) }.boxed()
    }
}
