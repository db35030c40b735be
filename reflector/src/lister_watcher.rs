//! [`ListerWatcher`]: what a reflector lists and watches through —
//! implemented for [`Api<K>`] (any typed or dynamic resource, in one
//! namespace or all) and for [`ListWatch<K>`] (an `Api<K>` with label and
//! field selectors).

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use kcontrol_client::{Api, Error, ListParams, ListStream, ObjectList, WatchEvent, WatchParams};
use kcontrol_indexer::{ApiResource, KubeObject};
use serde::de::DeserializeOwned;

/// A stream of watch events, as a [`ListerWatcher`] returns it.
pub type WatchEventStream<K> = BoxStream<'static, Result<WatchEvent<K>, Error>>;

/// Lists and watches one resource (client-go's `ListerWatcher`).
///
/// The reflector sets only paging and version parameters (`limit`,
/// `continue`, `resourceVersion`, `timeoutSeconds`, bookmarks and
/// `sendInitialEvents`); an implementation adds what selects the objects
/// (namespace, label and field selectors), the same for lists and watches.
///
/// Implement [`list`](Self::list) and [`watch`](Self::watch);
/// [`list_stream`](Self::list_stream) defaults to streaming a whole page
/// from `list`, and should be overridden where the transport can decode a
/// page item by item (as `Api<K>` does), so that a large page is never held
/// whole.
pub trait ListerWatcher<K: Send + 'static>: Send + Sync + 'static {
    /// Lists one page.
    fn list<'a>(&'a self, params: &'a ListParams) -> BoxFuture<'a, Result<ObjectList<K>, Error>>;

    /// Lists one page, decoded one object at a time as it arrives.
    fn list_stream<'a>(
        &'a self,
        params: &'a ListParams,
    ) -> BoxFuture<'a, Result<ListStream<K>, Error>> {
        self.list(params)
            .map(|page| page.map(ListStream::from_list))
            .boxed()
    }

    /// Watches from `resource_version`. An HTTP error is the `Err` of the
    /// call; once streaming, errors arrive as stream items (and a 410 as a
    /// [`WatchEvent::Error`]).
    fn watch<'a>(
        &'a self,
        params: &'a WatchParams,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<WatchEventStream<K>, Error>>;

    /// The resource listed and watched, when known: objects of another kind
    /// are then rejected (RF7), and logs name it.
    fn api_resource(&self) -> Option<ApiResource> {
        None
    }
}

impl<K> ListerWatcher<K> for Api<K>
where
    K: KubeObject + DeserializeOwned,
{
    fn list<'a>(&'a self, params: &'a ListParams) -> BoxFuture<'a, Result<ObjectList<K>, Error>> {
        Box::pin(Api::list(self, params))
    }

    fn list_stream<'a>(
        &'a self,
        params: &'a ListParams,
    ) -> BoxFuture<'a, Result<ListStream<K>, Error>> {
        Box::pin(Api::list_stream(self, params))
    }

    fn watch<'a>(
        &'a self,
        params: &'a WatchParams,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<WatchEventStream<K>, Error>> {
        Box::pin(async move {
            let stream = Api::watch(self, params, resource_version).await?;
            Ok(stream.boxed())
        })
    }

    fn api_resource(&self) -> Option<ApiResource> {
        Some(self.resource().clone())
    }
}

/// An [`Api<K>`] with label and field selectors: a [`ListerWatcher`] of the
/// selected objects (client-go's `ListWatch` from
/// `NewFilteredListWatchFromClient`).
///
/// ```
/// use kcontrol_client::{Api, Client, Config};
/// use kcontrol_indexer::k8s_openapi::api::core::v1::Pod;
/// use kcontrol_reflector::ListWatch;
///
/// # fn demo() -> Result<(), kcontrol_client::Error> {
/// let client = Client::new(Config::new("http://127.0.0.1:8001".parse().unwrap()))?;
/// let pods = ListWatch::new(Api::<Pod>::namespaced(client, "default"))
///     .labels("app=web")
///     .fields("spec.nodeName=node-1");
/// assert_eq!(pods.label_selector(), Some("app=web"));
/// # Ok(()) }
/// # demo().unwrap();
/// ```
pub struct ListWatch<K> {
    api: Api<K>,
    label_selector: Option<String>,
    field_selector: Option<String>,
}

impl<K> Clone for ListWatch<K> {
    fn clone(&self) -> Self {
        Self {
            api: self.api.clone(),
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
        }
    }
}

impl<K> std::fmt::Debug for ListWatch<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListWatch")
            .field("api", &self.api)
            .field("label_selector", &self.label_selector)
            .field("field_selector", &self.field_selector)
            .finish()
    }
}

impl<K> ListWatch<K> {
    /// Every object `api` reaches (its namespace, or all).
    pub fn new(api: Api<K>) -> Self {
        Self {
            api,
            label_selector: None,
            field_selector: None,
        }
    }

    /// Only objects matching this label selector (`app=web,tier!=db`).
    #[must_use]
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_owned()).filter(|s| !s.is_empty());
        self
    }

    /// Only objects matching this field selector (`metadata.name=x`).
    #[must_use]
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_owned()).filter(|s| !s.is_empty());
        self
    }

    /// The API handle.
    pub fn api(&self) -> &Api<K> {
        &self.api
    }

    /// The label selector, if any.
    pub fn label_selector(&self) -> Option<&str> {
        self.label_selector.as_deref()
    }

    /// The field selector, if any.
    pub fn field_selector(&self) -> Option<&str> {
        self.field_selector.as_deref()
    }

    fn list_params(&self, params: &ListParams) -> ListParams {
        ListParams {
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            ..params.clone()
        }
    }

    fn watch_params(&self, params: &WatchParams) -> WatchParams {
        WatchParams {
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            ..params.clone()
        }
    }
}

impl<K> ListerWatcher<K> for ListWatch<K>
where
    K: KubeObject + DeserializeOwned,
{
    fn list<'a>(&'a self, params: &'a ListParams) -> BoxFuture<'a, Result<ObjectList<K>, Error>> {
        Box::pin(async move { Api::list(&self.api, &self.list_params(params)).await })
    }

    fn list_stream<'a>(
        &'a self,
        params: &'a ListParams,
    ) -> BoxFuture<'a, Result<ListStream<K>, Error>> {
        Box::pin(async move { Api::list_stream(&self.api, &self.list_params(params)).await })
    }

    fn watch<'a>(
        &'a self,
        params: &'a WatchParams,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<WatchEventStream<K>, Error>> {
        Box::pin(async move {
            let stream =
                Api::watch(&self.api, &self.watch_params(params), resource_version).await?;
            Ok(stream.boxed())
        })
    }

    fn api_resource(&self) -> Option<ApiResource> {
        Some(self.api.resource().clone())
    }
}
