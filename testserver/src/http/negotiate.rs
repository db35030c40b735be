//! Content negotiation: which representation the `Accept` header asks for
//! (plain JSON or YAML, a `meta.k8s.io` Table, PartialObjectMetadata) and
//! how request bodies are decoded (JSON or YAML; protobuf is refused).

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
    /// PartialObjectMetadata(List).
    PartialMetadata { v1beta1: bool },
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

/// Picks the first acceptable representation from an `Accept` header.
pub(crate) fn output(accept: Option<&str>) -> Result<Output, StatusError> {
    let Some(accept) = accept.map(str::trim).filter(|a| !a.is_empty()) else {
        return Ok(Output::Json);
    };
    for raw in accept.split(',') {
        let m = parse_media(raw);
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
                        return Ok(Output::PartialMetadata { v1beta1 })
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
        other => Err(StatusError::unsupported_media_type(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_what_kubectl_asks_for() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(
            output(Some(kubectl)).ok(),
            Some(Output::Table { v1beta1: false })
        );
        assert_eq!(
            output(Some("application/vnd.kubernetes.protobuf, */*")).ok(),
            Some(Output::Json)
        );
        assert_eq!(output(None).ok(), Some(Output::Json));
        assert_eq!(output(Some("application/yaml")).ok(), Some(Output::Yaml));
        assert_eq!(
            output(Some(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
            ))
            .ok(),
            Some(Output::PartialMetadata { v1beta1: false })
        );
        assert_eq!(
            output(Some("application/vnd.kubernetes.protobuf")).map_err(|e| e.code),
            Err(406)
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
            Err(415)
        );
        assert_eq!(decode_body(None, b"{").map_err(|e| e.code), Err(400));
    }
}
