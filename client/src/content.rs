//! Content negotiation, as client-go's `rest.ContentConfig` does it for the
//! typed clientsets of built-in kinds (`UseProtobufAsDefault`) and for its
//! metadata client: what reads ask for ([`ContentType`], the `Accept`
//! header) and how an answer is decoded (by its `Content-Type`: JSON with
//! serde_json, `application/vnd.kubernetes.protobuf` with kcontrol-proto).
//!
//! Reads (list, get, watch, WatchList) of a kind kcontrol-proto has a
//! schema for ask `application/vnd.kubernetes.protobuf,application/json`
//! (client-go's exact header): a server that cannot encode an object in
//! protobuf answers JSON, and the answer's `Content-Type` decides. Custom
//! resources and kinds without a schema ask JSON. Metadata-only reads ask
//! for `PartialObjectMetadata(List)` in protobuf, then in JSON, then the
//! plain object in JSON (client-go's metadata client), for every resource,
//! custom ones too. Writes send and ask JSON. [`ContentType::Json`] turns
//! protobuf off for a client.

use http::header::CONTENT_TYPE;
use http::HeaderMap;
use kcontrol_indexer::ApiResource;
use serde::de::DeserializeOwned;

use crate::error::Error;

/// What a client asks the API server to encode reads in (client-go's
/// `ContentConfig.ContentType` and `AcceptContentTypes`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContentType {
    /// Protobuf for the built-in kinds that have it (and for metadata-only
    /// reads), JSON for everything else: what client-go's clientsets and
    /// informers do. The default.
    #[default]
    Protobuf,
    /// JSON for every request.
    Json,
}

/// `Accept` of a protobuf read of a built-in kind (client-go's
/// `UseProtobufAsDefault`).
pub(crate) const ACCEPT_PROTOBUF: &str = "application/vnd.kubernetes.protobuf,application/json";
/// `Accept` of a metadata-only list, protobuf first (client-go's metadata client).
pub(crate) const METADATA_LIST_PROTOBUF: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
/// `Accept` of a metadata-only get or watch, protobuf first.
pub(crate) const METADATA_OBJECT_PROTOBUF: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
/// `Accept` of a metadata-only list in JSON.
pub(crate) const METADATA_LIST_JSON: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
/// `Accept` of a metadata-only get or watch in JSON.
pub(crate) const METADATA_OBJECT_JSON: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

impl ContentType {
    /// The `Accept` header of a read of `resource` (`list`: a collection;
    /// `metadata_only`: PartialObjectMetadata); `None`: plain JSON.
    pub(crate) fn accept(
        self,
        resource: &ApiResource,
        metadata_only: bool,
        list: bool,
    ) -> Option<&'static str> {
        let protobuf = self == ContentType::Protobuf;
        Some(match (metadata_only, protobuf, list) {
            (true, true, true) => METADATA_LIST_PROTOBUF,
            (true, true, false) => METADATA_OBJECT_PROTOBUF,
            (true, false, true) => METADATA_LIST_JSON,
            (true, false, false) => METADATA_OBJECT_JSON,
            (false, true, _) if has_protobuf(resource) => ACCEPT_PROTOBUF,
            (false, _, _) => return None,
        })
    }
}

/// Whether objects of `resource` have a protobuf schema (built-in kinds).
pub fn has_protobuf(resource: &ApiResource) -> bool {
    kcontrol_proto::kind(&resource.api_version(), &resource.kind).is_some()
}

/// Whether an answer's `Content-Type` is protobuf.
pub(crate) fn is_protobuf(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| {
            essence
                .trim()
                .eq_ignore_ascii_case(kcontrol_proto::MEDIA_TYPE)
        })
}

/// Decodes a whole body by its encoding; `what` names it in errors.
pub(crate) fn decode<T: DeserializeOwned>(
    protobuf: bool,
    body: &[u8],
    what: &str,
) -> Result<T, Error> {
    if protobuf {
        kcontrol_proto::from_object(body).map_err(|source| Error::DecodeProtobuf {
            what: what.to_owned(),
            source,
        })
    } else {
        serde_json::from_slice(body).map_err(|source| Error::Decode {
            what: what.to_owned(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn built_in_kinds_ask_protobuf_custom_resources_json() {
        let cm = ApiResource::of::<ConfigMap>();
        let foo = ApiResource::new("samplecontroller.k8s.io", "v1alpha1", "Foo", "foos", true);
        let crd = ApiResource::new(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
        );
        assert_eq!(
            ContentType::Protobuf.accept(&cm, false, true),
            Some(ACCEPT_PROTOBUF)
        );
        assert_eq!(
            ContentType::Protobuf.accept(&cm, false, false),
            Some(ACCEPT_PROTOBUF)
        );
        assert_eq!(ContentType::Protobuf.accept(&foo, false, true), None);
        assert_eq!(ContentType::Protobuf.accept(&crd, false, true), None);
        assert_eq!(ContentType::Json.accept(&cm, false, true), None);
        // metadata only: protobuf for every resource, custom ones too
        assert_eq!(
            ContentType::Protobuf.accept(&foo, true, true),
            Some(METADATA_LIST_PROTOBUF)
        );
        assert_eq!(
            ContentType::Protobuf.accept(&cm, true, false),
            Some(METADATA_OBJECT_PROTOBUF)
        );
        assert_eq!(
            ContentType::Json.accept(&cm, true, true),
            Some(METADATA_LIST_JSON)
        );
        assert_eq!(
            ContentType::Json.accept(&foo, true, false),
            Some(METADATA_OBJECT_JSON)
        );
    }

    #[test]
    fn the_answer_decides_the_decoder() {
        let mut h = HeaderMap::new();
        assert!(!is_protobuf(&h));
        h.insert(CONTENT_TYPE, "application/json".parse().unwrap());
        assert!(!is_protobuf(&h));
        h.insert(
            CONTENT_TYPE,
            "application/vnd.kubernetes.protobuf;stream=watch"
                .parse()
                .unwrap(),
        );
        assert!(is_protobuf(&h));
        h.insert(
            CONTENT_TYPE,
            "Application/Vnd.Kubernetes.Protobuf".parse().unwrap(),
        );
        assert!(is_protobuf(&h));
        let err = decode::<ConfigMap>(true, b"{}", "get configmaps answer").unwrap_err();
        assert!(matches!(err, Error::DecodeProtobuf { .. }), "{err}");
        assert!(err.to_string().contains("get configmaps answer"), "{err}");
    }
}
