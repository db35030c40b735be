//! The list phase (RF1, RF2, RF9): list at the version RF1 asks for,
//! falling back to a consistent read on 410; page through the list,
//! falling back to one full list when a continue token expires; stream
//! every object into the FIFO's replace as it is decoded (buffered after a
//! relist failed part way, [`crate::relist`]); each page request retried
//! after the wait its answer asks for ([`crate::retry`]).

use std::time::Instant;

use futures::{FutureExt, StreamExt};
use kcontrol_client::{ListParams, ListStream, ResourceVersionMatch};
use kcontrol_indexer::KubeObject;
use serde::de::DeserializeOwned;

use crate::error::ReflectorError;
use crate::reflector::{keep_newest, Reflector};
use crate::relist::Relist;
use crate::retry::Request;

/// The most objects of a list handed to the FIFO together: what a 64 KiB
/// chunk of small objects holds.
pub(crate) const BATCH: usize = 256;

/// What a successful list brought.
struct Listed {
    resource_version: String,
    items: u64,
}

/// What one page brought.
struct Page {
    resource_version: Option<String>,
    continue_token: Option<String>,
}

impl<K> Reflector<K>
where
    K: KubeObject + DeserializeOwned,
{
    /// Lists into the FIFO (client-go's `list`): at the version RF1 asks
    /// for, retried at once at `""` when that version is unavailable.
    pub(crate) async fn list(&self) -> Result<(), ReflectorError> {
        self.list_starting();
        let started = Instant::now();
        let (rv, rv_match) = self.list_target();
        let listed = match self.list_at(&rv, rv_match).await {
            Err(e) if e.is_expired() || e.is_too_large_resource_version() => {
                self.note_retry(&e);
                self.state.lock().last_rv_unavailable = true;
                let (rv, rv_match) = self.list_target();
                self.list_at(&rv, rv_match).await?
            }
            other => other?,
        };
        self.sync_finished();
        self.metrics.list_finished(listed.items, started.elapsed());
        tracing::debug!(
            reflector = %self.config.name,
            asked = %rv,
            resource_version = %listed.resource_version,
            items = listed.items,
            "listed"
        );
        self.set_last_sync_rv(listed.resource_version);
        Ok(())
    }

    /// The page size for a list at `rv` (client-go's pager choice): relists
    /// at a specific version go unpaged so the watch cache serves them,
    /// unless the server has shown it pages even at `"0"`.
    pub(crate) fn page_limit(&self, rv: &str) -> Option<u32> {
        let size = self.config.watch_config.page_size;
        if size == 0 {
            return None;
        }
        let paginated = self.state.lock().paginated_result;
        if !paginated && !rv.is_empty() && rv != "0" {
            return None;
        }
        Some(size)
    }

    /// One list at `rv`, page by page, streamed into a replace.
    async fn list_at(
        &self,
        rv: &str,
        rv_match: Option<ResourceVersionMatch>,
    ) -> Result<Listed, ReflectorError> {
        let mut params = ListParams {
            resource_version: Some(rv.to_owned()),
            resource_version_match: rv_match,
            limit: self.page_limit(rv),
            ..self.base_list_params()
        };
        let mut replace = self.begin_relist()?;
        let mut items = 0u64;
        let mut first_page = true;
        let mut fell_back = false;
        let resource_version = loop {
            let sent = self
                .send_retrying(Request::List, || self.lister_watcher.list_stream(&params))
                .await;
            let page = match sent {
                Ok(stream) => self.drain_page(stream, &mut replace, &mut items).await,
                Err(e) => Err(ReflectorError::List(e)),
            };
            let page = match page {
                Ok(page) => page,
                Err(e) if params.continue_token.is_some() && e.is_expired() && !fell_back => {
                    // RF2: the snapshot behind the token is gone; list it all
                    // again in one go, deleting nothing for the partial pages,
                    // and not older than what they delivered (RF1)
                    self.note_retry(&e);
                    drop(replace);
                    replace = self.begin_relist()?;
                    let (rv, rv_match) = self.list_target();
                    params = ListParams {
                        resource_version: Some(rv),
                        resource_version_match: rv_match,
                        ..self.base_list_params()
                    };
                    items = 0;
                    fell_back = true;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if first_page && rv == "0" && page.continue_token.is_some() {
                self.state.lock().paginated_result = true;
            }
            first_page = false;
            match page.continue_token {
                Some(token) => {
                    params.continue_token = Some(token);
                    // a continue token carries its snapshot's version
                    params.resource_version = None;
                    params.resource_version_match = None;
                }
                None => break page.resource_version,
            }
        };
        // some aggregated servers send none: like client-go, store the list
        // and watch from "" (the server's current state)
        let resource_version = resource_version.unwrap_or_else(|| {
            tracing::debug!(reflector = %self.config.name, "the list answer carried no resourceVersion");
            String::new()
        });
        replace.finish(resource_version.as_str())?;
        Ok(Listed {
            resource_version,
            items,
        })
    }

    /// Queues every object of a page as it is decoded (RF9): those
    /// decoded from the bytes at hand go in together (at most
    /// [`BATCH`]), so the FIFO takes its lock and wakes its consumer once
    /// per chunk rather than once per object.
    async fn drain_page(
        &self,
        mut stream: ListStream<K>,
        replace: &mut Relist<'_, K>,
        items: &mut u64,
    ) -> Result<Page, ReflectorError> {
        // the list's version once the server has sent it (kube-apiserver
        // sends it before the items), noted once; else each batch's newest
        let mut list_version_noted = false;
        let mut batch = Vec::with_capacity(BATCH);
        while let Some(first) = stream.next().await {
            let failed = self.take_ready(first, &mut stream, &mut batch).err();
            let mut item_version = None;
            if stream.resource_version().is_none() {
                for rv in batch.iter().filter_map(|obj| obj.resource_version()) {
                    keep_newest(&mut item_version, rv);
                }
            }
            *items += batch.len() as u64;
            replace.extend(batch.drain(..))?;
            if !replace.is_buffered() {
                match stream.resource_version() {
                    Some(_) if list_version_noted => {}
                    Some(list_version) => {
                        self.note_delivered(Some(list_version));
                        list_version_noted = true;
                    }
                    None => self.note_delivered(item_version.as_deref()),
                }
            }
            if let Some(e) = failed {
                return Err(e);
            }
        }
        Ok(Page {
            resource_version: stream.resource_version().map(str::to_owned),
            continue_token: stream.continue_token().map(str::to_owned),
        })
    }

    /// Prepares `first` and every item the stream has ready without
    /// waiting into `batch` (up to [`BATCH`]); stops at the first failure,
    /// keeping what came before it.
    fn take_ready(
        &self,
        first: Result<K, kcontrol_client::Error>,
        stream: &mut ListStream<K>,
        batch: &mut Vec<K>,
    ) -> Result<(), ReflectorError> {
        let mut next = Some(first);
        while let Some(item) = next.take() {
            batch.push(self.prepare(item.map_err(ReflectorError::List)?)?);
            if batch.len() < BATCH {
                next = stream.next().now_or_never().flatten();
            }
        }
        Ok(())
    }
}
