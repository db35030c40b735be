//! A [`ListStream`] over a protobuf list answer: kcontrol-proto's
//! `ListDecoder` cuts the body into the list metadata and the items as the
//! chunks arrive, and each item is decoded by its schema straight into the
//! caller's type.

use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kcontrol_proto::{ListDecoder, ListPart, Message};
use serde::de::{DeserializeOwned, Error as _};

use super::{ListStream, Source};
use crate::error::Error;

impl<K: DeserializeOwned> ListStream<K> {
    /// Decodes the protobuf list in `chunks` (a body, split anywhere).
    /// `what` names the list in errors; an item over `max_item_size` bytes
    /// is an error.
    pub fn new_protobuf<S>(chunks: S, what: impl Into<String>, max_item_size: usize) -> Self
    where
        S: Stream<Item = Result<Bytes, Error>> + Send + 'static,
    {
        Self::with_source(Source::Protobuf {
            chunks: Box::pin(chunks),
            decoder: ListDecoder::new(max_item_size),
            chunks_done: false,
        })
        .named(what.into())
    }

    fn protobuf_error(&self, what: String, source: kcontrol_proto::Error) -> Error {
        Error::DecodeProtobuf { what, source }
    }

    /// Decodes one part with `schema`; the schema is known once the
    /// envelope's type meta was read, which comes before any part. `what`
    /// names the part in an error, and is only called for one (a string
    /// built per item cost a tenth of the decode).
    fn proto_decode<T: DeserializeOwned>(
        &self,
        bytes: &[u8],
        schema: Option<&'static Message>,
        what: impl FnOnce() -> String,
    ) -> Result<T, Error> {
        let Some(schema) = schema else {
            let e = kcontrol_proto::Error::custom("no list schema");
            return Err(self.protobuf_error(what(), e));
        };
        kcontrol_proto::from_slice_with(bytes, schema, self.decode)
            .map_err(|e| self.protobuf_error(what(), e))
    }

    /// Records the end of a complete list.
    fn proto_complete(&mut self) -> Poll<Option<Result<K, Error>>> {
        if let Source::Protobuf { decoder, .. } = &self.source {
            self.api_version = Some(decoder.api_version().to_owned());
            self.kind = Some(decoder.kind().to_owned());
        }
        self.done = true;
        self.complete = true;
        if self.metadata.is_none() {
            self.metadata = Some(ListMeta::default());
        }
        Poll::Ready(None)
    }

    /// The next step of a protobuf source.
    pub(super) fn poll_protobuf(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<K, Error>>> {
        loop {
            let Source::Protobuf {
                decoder,
                chunks_done,
                ..
            } = &mut self.source
            else {
                return Poll::Ready(None);
            };
            let finished = *chunks_done;
            let part = match decoder.next_part() {
                Err(e) => {
                    let e = self.protobuf_error(self.what.clone(), e);
                    return self.fail(e);
                }
                Ok(None) if finished => {
                    if let Err(e) = decoder.finish() {
                        let e = self.protobuf_error(self.what.clone(), e);
                        return self.fail(e);
                    }
                    return self.proto_complete();
                }
                Ok(part) => part,
            };
            // the schemas are known once the envelope's type meta was read
            let (item_schema, meta_schema) = (decoder.item(), decoder.list_meta());
            match part {
                Some(ListPart::Item(bytes)) => {
                    let what = || format!("item {} of {}", self.items, self.what);
                    return match self.proto_decode(&bytes, item_schema, what) {
                        Ok(item) => {
                            self.items += 1;
                            Poll::Ready(Some(Ok(item)))
                        }
                        Err(e) => self.fail(e),
                    };
                }
                Some(ListPart::Meta(bytes)) => {
                    let what = || format!("\"metadata\" of {}", self.what);
                    match self.proto_decode(&bytes, meta_schema, what) {
                        Ok(meta) => self.metadata = Some(meta),
                        Err(e) => return self.fail(e),
                    }
                    continue;
                }
                None => {}
            }
            let Source::Protobuf {
                chunks,
                chunks_done,
                decoder,
            } = &mut self.source
            else {
                return Poll::Ready(None);
            };
            match chunks.poll_next_unpin(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(chunk))) => decoder.push(chunk),
                Poll::Ready(Some(Err(e))) => return self.fail(e),
                Poll::Ready(None) => *chunks_done = true,
            }
        }
    }
}
