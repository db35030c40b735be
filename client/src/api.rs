//! [`Api<K>`]: a typed handle on one resource (optionally within one
//! namespace) with list, watch, get, create, replace, patch, delete and the
//! status subresource. Works for every `k8s-openapi` type, for custom
//! resource structs, and for [`DynamicObject`]s with an [`ApiResource`]
//! given at run time.

use std::marker::PhantomData;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{Method, Request};
use kcontrol_indexer::{
    compact::CompactPartialObjectMetadata, ApiResource, DynamicObject, KubeObject, KubeResource,
    PartialObjectMetadata,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::client::Client;
use crate::error::Error;
use crate::params::{DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchParams};
use crate::path::ResourcePath;
use crate::status::Status;
use crate::watch::WatchStream;
use crate::wire::{DeleteResponse, KindOnly, ObjectList};

const JSON: &str = "application/json";

/// A handle on one resource, in one namespace or across all of them.
///
/// Cluster-scoped resources ignore the namespace. An `Api` made with
/// [`Api::all`] lists and watches every namespace; to create or replace
/// through it, the object must carry its namespace, and name-only calls
/// (`get`, `patch`, `delete`) on a namespaced resource need a namespaced `Api`.
pub struct Api<K> {
    client: Client,
    resource: ApiResource,
    namespace: Option<String>,
    /// Reads ask for PartialObjectMetadata ([`Api::metadata`]).
    metadata_only: bool,
    _k: PhantomData<fn() -> K>,
}

impl<K> Clone for Api<K> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            resource: self.resource.clone(),
            namespace: self.namespace.clone(),
            metadata_only: self.metadata_only,
            _k: PhantomData,
        }
    }
}

impl<K> std::fmt::Debug for Api<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("resource", &self.resource)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl<K: KubeResource> Api<K> {
    /// Objects of `K` in `namespace`.
    pub fn namespaced(client: Client, namespace: &str) -> Self {
        Self::with_resource(client, Some(namespace), K::api_resource())
    }

    /// Objects of `K` in every namespace (or a cluster-scoped resource).
    pub fn all(client: Client) -> Self {
        Self::with_resource(client, None, K::api_resource())
    }

    /// Objects of `K` in the client's default namespace.
    pub fn default_namespaced(client: Client) -> Self {
        let namespace = client.default_namespace().to_owned();
        Self::with_resource(client, Some(&namespace), K::api_resource())
    }

    /// The same objects, metadata only: lists, watches and gets ask the
    /// API server for `PartialObjectMetadata` (`Accept:
    /// application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,
    /// application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json`
    /// as client-go's metadata client does; without protobuf when the
    /// client's [`ContentType`](crate::ContentType) is JSON), so specs and
    /// data never cross the wire nor get decoded. Writes are not metadata-only.
    pub fn metadata(self) -> Api<PartialObjectMetadata<K>> {
        self.metadata_as()
    }

    /// [`metadata`](Self::metadata), decoded into
    /// [`CompactPartialObjectMetadata`]: the same requests, a smaller cache.
    pub fn compact_metadata(self) -> Api<CompactPartialObjectMetadata<K>> {
        self.metadata_as()
    }

    /// The same objects, metadata only, decoded as `M`.
    fn metadata_as<M>(self) -> Api<M> {
        Api {
            client: self.client,
            resource: self.resource,
            namespace: self.namespace,
            metadata_only: true,
            _k: PhantomData,
        }
    }
}

impl Api<DynamicObject> {
    /// Dynamic objects of `resource` in `namespace`.
    pub fn namespaced_with(client: Client, namespace: &str, resource: &ApiResource) -> Self {
        Self::with_resource(client, Some(namespace), resource.clone())
    }

    /// Dynamic objects of `resource` in every namespace.
    pub fn all_with(client: Client, resource: &ApiResource) -> Self {
        Self::with_resource(client, None, resource.clone())
    }

    /// Dynamic objects of `resource` in the client's default namespace.
    pub fn default_namespaced_with(client: Client, resource: &ApiResource) -> Self {
        let namespace = client.default_namespace().to_owned();
        Self::with_resource(client, Some(&namespace), resource.clone())
    }
}

impl<K> Api<K> {
    fn with_resource(client: Client, namespace: Option<&str>, resource: ApiResource) -> Self {
        let namespace = namespace.filter(|_| resource.namespaced).map(str::to_owned);
        Self {
            client,
            resource,
            namespace,
            metadata_only: false,
            _k: PhantomData,
        }
    }

    /// The resource this handle works on.
    pub fn resource(&self) -> &ApiResource {
        &self.resource
    }

    /// The namespace, `None` for all namespaces or a cluster-scoped resource.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Whether reads ask for metadata only ([`Api::metadata`]).
    pub fn is_metadata_only(&self) -> bool {
        self.metadata_only
    }

    /// A GET of `uri` with the `Accept` of the client's content type
    /// (protobuf for built-in kinds, metadata-only); `list` says whether it
    /// reads a collection (a list, not a get or a watch).
    pub(crate) fn read_request(&self, uri: &str, list: bool) -> Result<Request<Bytes>, Error> {
        let mut req = request(Method::GET, uri, Vec::new(), None)?;
        let accept = self
            .client
            .content_type()
            .accept(&self.resource, self.metadata_only, list);
        if let Some(accept) = accept {
            req.headers_mut()
                .insert(http::header::ACCEPT, http::HeaderValue::from_static(accept));
        }
        Ok(req)
    }

    pub(crate) fn collection_path(&self, namespace: Option<&str>) -> Result<String, Error> {
        ResourcePath::of(&self.resource)
            .maybe_namespace(namespace)
            .build()
    }

    /// The namespace for a call on one named object.
    fn object_namespace<'a>(
        &'a self,
        object_ns: Option<&'a str>,
        verb: &str,
    ) -> Result<Option<&'a str>, Error> {
        if !self.resource.namespaced {
            return Ok(None);
        }
        match self.namespace.as_deref().or(object_ns) {
            Some(ns) => Ok(Some(ns)),
            None => Err(Error::InvalidRequest(format!(
                "{verb} of a namespaced {} needs a namespace: use Api::namespaced",
                self.resource.kind
            ))),
        }
    }

    fn object_path(
        &self,
        name: &str,
        subresource: Option<&str>,
        object_ns: Option<&str>,
        verb: &str,
    ) -> Result<String, Error> {
        let namespace = self.object_namespace(object_ns, verb)?;
        let mut path = ResourcePath::of(&self.resource)
            .maybe_namespace(namespace)
            .name(name);
        if let Some(sub) = subresource {
            path = path.subresource(sub);
        }
        path.build()
    }
}

pub(crate) fn request(
    method: Method,
    uri: &str,
    body: Vec<u8>,
    content_type: Option<&str>,
) -> Result<Request<Bytes>, Error> {
    let mut builder = Request::builder().method(method).uri(uri);
    if let Some(ct) = content_type {
        builder = builder.header(CONTENT_TYPE, ct);
    }
    builder
        .body(Bytes::from(body))
        .map_err(|e| Error::InvalidRequest(format!("cannot build the request for {uri}: {e}")))
}

fn to_json<T: Serialize>(value: &T) -> Result<Vec<u8>, Error> {
    serde_json::to_vec(value)
        .map_err(|e| Error::InvalidRequest(format!("cannot serialize the object: {e}")))
}

impl<K: KubeObject + DeserializeOwned> Api<K> {
    fn what(&self, verb: &str) -> String {
        format!("{verb} {} answer", self.resource.plural)
    }

    /// Lists one page of objects. The answer's
    /// [`resource_version`](ObjectList::resource_version) is where a
    /// following watch starts; [`continue_token`](ObjectList::continue_token)
    /// fetches the next page.
    pub async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, Error> {
        let uri = params
            .to_query()
            .with_path(&self.collection_path(self.namespace.as_deref())?);
        self.client
            .request_json(self.read_request(&uri, true)?, &self.what("list"))
            .await
    }

    /// Watches from `resource_version` (`""`: from the current state, `"0"`:
    /// from any cached state). An HTTP error (e.g. 410 for a compacted
    /// version) is the `Err` of this call; once streaming, a 410 arrives as a
    /// [`WatchEvent::Error`](crate::WatchEvent::Error) item.
    pub async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<K>, Error> {
        let uri = params
            .to_query(resource_version)?
            .with_path(&self.collection_path(self.namespace.as_deref())?);
        let stream = self
            .client
            .request_watch(self.read_request(&uri, false)?)
            .await?;
        Ok(stream.strip_managed_fields(params.strip_managed_fields))
    }

    /// Gets an object by name.
    pub async fn get(&self, name: &str) -> Result<K, Error> {
        let uri = self.object_path(name, None, None, "get")?;
        self.client
            .request_json(self.read_request(&uri, false)?, &self.what("get"))
            .await
    }

    /// Gets an object by name; `None` when it does not exist (404).
    pub async fn get_opt(&self, name: &str) -> Result<Option<K>, Error> {
        match self.get(name).await {
            Ok(object) => Ok(Some(object)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Gets an object through its `status` subresource.
    pub async fn get_status(&self, name: &str) -> Result<K, Error> {
        let uri = self.object_path(name, Some("status"), None, "get status")?;
        self.client
            .request_json(
                request(Method::GET, &uri, Vec::new(), None)?,
                &self.what("get status"),
            )
            .await
    }

    /// Deletes an object. The answer is the object while deletion is still
    /// in progress (finalizers, graceful deletion), or a `Status` once it is gone.
    pub async fn delete(
        &self,
        name: &str,
        params: &DeleteParams,
    ) -> Result<DeleteResponse<K>, Error> {
        let uri = self.object_path(name, None, None, "delete")?;
        let body = self
            .client
            .request_bytes(request(Method::DELETE, &uri, params.body()?, Some(JSON))?)
            .await?;
        let decode_error = |source| Error::Decode {
            what: self.what("delete"),
            source,
        };
        let kind: KindOnly<'_> = serde_json::from_slice(&body).map_err(decode_error)?;
        if kind.kind.as_deref() == Some("Status") {
            let status: Status = serde_json::from_slice(&body).map_err(decode_error)?;
            Ok(DeleteResponse::Deleted(status))
        } else {
            Ok(DeleteResponse::Pending(
                serde_json::from_slice(&body).map_err(decode_error)?,
            ))
        }
    }
}

impl<K: KubeObject + DeserializeOwned + Serialize> Api<K> {
    /// Creates an object (POST). `generateName` is honoured by the server.
    pub async fn create(&self, params: &PostParams, object: &K) -> Result<K, Error> {
        let namespace = if self.resource.namespaced {
            self.object_namespace(object.namespace(), "create")?
        } else {
            None
        };
        let uri = params
            .to_query()
            .with_path(&self.collection_path(namespace)?);
        let req = request(Method::POST, &uri, to_json(object)?, Some(JSON))?;
        self.client.request_json(req, &self.what("create")).await
    }

    /// Replaces an object (PUT). A stale `metadata.resourceVersion` fails
    /// with 409 Conflict ([`Error::is_conflict`]).
    pub async fn replace(&self, name: &str, params: &PostParams, object: &K) -> Result<K, Error> {
        let uri = params.to_query().with_path(&self.object_path(
            name,
            None,
            object.namespace(),
            "replace",
        )?);
        let req = request(Method::PUT, &uri, to_json(object)?, Some(JSON))?;
        self.client.request_json(req, &self.what("replace")).await
    }

    /// Replaces an object's status (PUT on the `status` subresource).
    pub async fn replace_status(
        &self,
        name: &str,
        params: &PostParams,
        object: &K,
    ) -> Result<K, Error> {
        let uri = params.to_query().with_path(&self.object_path(
            name,
            Some("status"),
            object.namespace(),
            "replace status",
        )?);
        let req = request(Method::PUT, &uri, to_json(object)?, Some(JSON))?;
        self.client
            .request_json(req, &self.what("replace status"))
            .await
    }

    /// Patches an object.
    pub async fn patch<P: Serialize>(
        &self,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K, Error> {
        self.patch_at(name, None, params, patch).await
    }

    /// Patches an object's status subresource.
    pub async fn patch_status<P: Serialize>(
        &self,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K, Error> {
        self.patch_at(name, Some("status"), params, patch).await
    }

    async fn patch_at<P: Serialize>(
        &self,
        name: &str,
        subresource: Option<&str>,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K, Error> {
        let uri = params.to_query(patch)?.with_path(&self.object_path(
            name,
            subresource,
            None,
            "patch",
        )?);
        let req = request(
            Method::PATCH,
            &uri,
            patch.body()?,
            Some(patch.content_type()),
        )?;
        self.client.request_json(req, &self.what("patch")).await
    }
}
