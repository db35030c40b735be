//! Content negotiation: which representation the `Accept` header asks for
//! (plain JSON, YAML or protobuf, a `meta.k8s.io` Table,
//! PartialObjectMetadata) and how request bodies are decoded (JSON, YAML,
//! or protobuf for the built-in kinds [`crate::proto`] maps).

use crate::status::StatusError;
use serde_json::Value;

/// The representation of a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Output {
    /// The objects as stored (`application/json`).
    Json,
    /// The objects as YAML (`application/yaml`).
    Yaml,
    /// A `meta.k8s.io/v1` (or v1beta1) Table.
    Table { v1beta1: bool },
    /// PartialObjectMetadata(List); `protobuf`: in
    /// `application/vnd.kubernetes.protobuf` (meta.k8s.io/v1 only, for
    /// every resource, custom ones too, as kube-apiserver).
    PartialMetadata { v1beta1: bool, protobuf: bool },
    /// `application/vnd.kubernetes.protobuf` (built-in kinds only);
    /// `json_fallback`: the `Accept` header also lists JSON, which answers
    /// when an object has a field the protobuf mapping does not support.
    Protobuf { json_fallback: bool },
}

struct MediaType<'a> {
    essence: String,
    params: Vec<(&'a str, &'a str)>,
}

fn parse_media(s: &str) -> MediaType<'_> {
    let mut parts = s.split(';');
    let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let params = parts
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim().trim_matches('"')))
        .collect();
    MediaType { essence, params }
}

impl MediaType<'_> {
    fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }
}

impl Output {
    /// Whether the answer is protobuf.
    pub(crate) fn is_protobuf(self) -> bool {
        matches!(
            self,
            Output::Protobuf { .. } | Output::PartialMetadata { protobuf: true, .. }
        )
    }
}

/// The PartialObjectMetadata(List) a media type's parameters ask for, if
/// any: `Some(v1beta1)`.
fn partial_metadata(m: &MediaType<'_>) -> Option<bool> {
    if m.param("g") != Some("meta.k8s.io") {
        return None;
    }
    let v1beta1 = match m.param("v") {
        Some("v1") => false,
        Some("v1beta1") => true,
        _ => return None,
    };
    matches!(
        m.param("as"),
        Some("PartialObjectMetadata" | "PartialObjectMetadataList")
    )
    .then_some(v1beta1)
}

/// Picks the first acceptable representation from an `Accept` header;
/// protobuf only when `protobuf` (the resource is a built-in kind with a
/// protobuf mapping), as kube-apiserver serves no protobuf for custom
/// resources.
pub(crate) fn output(accept: Option<&str>, protobuf: bool) -> Result<Output, StatusError> {
    let Some(accept) = accept.map(str::trim).filter(|a| !a.is_empty()) else {
        return Ok(Output::Json);
    };
    for raw in accept.split(',') {
        let m = parse_media(raw);
        if m.essence == crate::proto::MEDIA_TYPE {
            // PartialObjectMetadata in protobuf: meta.k8s.io/v1 only (v1beta1's
            // list has other field numbers); Tables are served as JSON only
            if m.param("as").is_some() {
                if partial_metadata(&m) == Some(false) {
                    return Ok(Output::PartialMetadata {
                        v1beta1: false,
                        protobuf: true,
                    });
                }
                continue;
            }
            if protobuf {
                let json_fallback = accept.split(',').any(|r| {
                    let e = parse_media(r).essence;
                    matches!(e.as_str(), "application/json" | "*/*" | "application/*")
                });
                return Ok(Output::Protobuf { json_fallback });
            }
            continue;
        }
        let json_like = matches!(
            m.essence.as_str(),
            "application/json" | "*/*" | "application/*"
        );
        if !(json_like || m.essence == "application/yaml") {
            continue;
        }
        match m.param("as") {
            None => {
                return Ok(if m.essence == "application/yaml" {
                    Output::Yaml
                } else {
                    Output::Json
                });
            }
            Some(kind) if json_like && m.param("g") == Some("meta.k8s.io") => {
                let v1beta1 = match m.param("v") {
                    Some("v1") => false,
                    Some("v1beta1") => true,
                    _ => continue,
                };
                match kind {
                    "Table" => return Ok(Output::Table { v1beta1 }),
                    "PartialObjectMetadata" | "PartialObjectMetadataList" => {
                        return Ok(Output::PartialMetadata {
                            v1beta1,
                            protobuf: false,
                        })
                    }
                    _ => continue,
                }
            }
            Some(_) => continue,
        }
    }
    Err(StatusError::not_acceptable())
}

/// Decodes a create/update body by its Content-Type.
pub(crate) fn decode_body(content_type: Option<&str>, body: &[u8]) -> Result<Value, StatusError> {
    let essence = content_type
        .map(|c| parse_media(c).essence)
        .unwrap_or_default();
    match essence.as_str() {
        "" | "application/json" | "*/*" => serde_json::from_slice(body).map_err(|e| {
            StatusError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        }),
        "application/yaml" | "application/x-yaml" | "text/yaml" => serde_yaml::from_slice(body)
            .map_err(|e| StatusError::bad_request(format!("error converting YAML to JSON: {e}"))),
        crate::proto::MEDIA_TYPE => crate::proto::decode_object(body).map_err(proto_request_error),
        other => Err(StatusError::unsupported_media_type(other)),
    }
}

/// A request body's protobuf that cannot be converted: 415 for what this
/// server does not map (a kind, a field), 400 for malformed input.
pub(crate) fn proto_request_error(e: crate::proto::ProtoError) -> StatusError {
    use crate::proto::ProtoError;
    match e {
        ProtoError::Unsupported(_) | ProtoError::UnknownKind(_) => StatusError::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - {e}; accepted media types include: application/json, application/yaml"),
        ),
        ProtoError::Invalid { .. } | ProtoError::Decode(_) => {
            StatusError::bad_request(format!("decoding the protobuf body: {e}"))
        }
    }
}

/// A response object that has no protobuf form here (406, naming the field).
pub(crate) fn proto_response_error(e: &crate::proto::ProtoError) -> StatusError {
    StatusError::new(
        406,
        "NotAcceptable",
        format!("the object cannot be served as application/vnd.kubernetes.protobuf: {e}; ask for application/json"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_what_kubectl_asks_for() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(
            output(Some(kubectl), true).ok(),
            Some(Output::Table { v1beta1: false })
        );
        assert_eq!(
            output(Some("application/vnd.kubernetes.protobuf, */*"), false).ok(),
            Some(Output::Json)
        );
        assert_eq!(output(None, true).ok(), Some(Output::Json));
        assert_eq!(
            output(Some("application/yaml"), true).ok(),
            Some(Output::Yaml)
        );
        assert_eq!(
            output(
                Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
                true
            )
            .ok(),
            Some(Output::PartialMetadata {
                v1beta1: false,
                protobuf: false
            })
        );
        // client-go's metadata client: protobuf first, for any resource
        let metadata_client = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        for protobuf in [true, false] {
            assert_eq!(
                output(Some(metadata_client), protobuf).ok(),
                Some(Output::PartialMetadata {
                    v1beta1: false,
                    protobuf: true
                })
            );
        }
        // v1beta1 in protobuf is not served: the next media type answers
        assert_eq!(
            output(Some("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1,application/json"), true).ok(),
            Some(Output::Json)
        );
        assert_eq!(
            output(Some("application/vnd.kubernetes.protobuf"), false).map_err(|e| e.code),
            Err(406)
        );
        // built-in kinds: protobuf, with a JSON fallback when JSON is listed too
        assert_eq!(
            output(Some("application/vnd.kubernetes.protobuf, */*"), true).ok(),
            Some(Output::Protobuf {
                json_fallback: true
            })
        );
        assert_eq!(
            output(Some("application/vnd.kubernetes.protobuf"), true).ok(),
            Some(Output::Protobuf {
                json_fallback: false
            })
        );
        // a protobuf Table is answered as a JSON Table
        assert_eq!(
            output(Some("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io"), true).ok(),
            Some(Output::Table { v1beta1: false })
        );
    }

    #[test]
    fn decodes_json_and_yaml() {
        assert!(decode_body(Some("application/json"), b"{\"a\":1}").is_ok());
        assert_eq!(
            decode_body(Some("application/yaml"), b"a: 1\n").ok(),
            Some(serde_json::json!({"a": 1}))
        );
        assert_eq!(
            decode_body(Some("application/vnd.kubernetes.protobuf"), b"").map_err(|e| e.code),
            Err(400)
        );
        assert_eq!(
            decode_body(Some("application/cbor"), b"").map_err(|e| e.code),
            Err(415)
        );
        assert_eq!(decode_body(None, b"{").map_err(|e| e.code), Err(400));
    }
}
