//! LIST: resourceVersion / resourceVersionMatch semantics, limit and
//! continue (with expiry), selectors, remainingItemCount; the body is
//! assembled from the stored objects' bytes with an exact length.

use super::body::{full, JoinedBody};
use super::negotiate::Output;
use super::render::{self, IncludeObject};
use super::{table, State};
use crate::resource::ResourceInfo;
use crate::selector::Filter;
use crate::status::{FieldError, StatusError};
use crate::store::{ContinueToken, ListQuery};
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The parsed `resourceVersion` parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rv {
    /// Absent or empty: most recent (consistent read).
    Unset,
    /// "0": any (served from the cache).
    Any,
    /// A specific version.
    At(u64),
}

/// Parses `resourceVersion`.
pub(crate) fn parse_rv(s: Option<&String>) -> Result<Rv, StatusError> {
    match s.map(String::as_str) {
        None | Some("") => Ok(Rv::Unset),
        Some("0") => Ok(Rv::Any),
        Some(v) => v.parse().map(Rv::At).map_err(|_| {
            StatusError::invalid(
                "meta.k8s.io",
                "ListOptions",
                "",
                &[FieldError::invalid(
                    "resourceVersion",
                    json!(v),
                    "must be a valid resource version",
                )],
            )
        }),
    }
}

fn list_options_invalid(errs: Vec<FieldError>) -> StatusError {
    StatusError::invalid("meta.k8s.io", "ListOptions", "", &errs)
}

/// Waits (bounded) until the store has reached `rv`; kube answers 504
/// "Too large resource version" when it does not get there.
pub(crate) async fn wait_for_rv(state: &State, rv: u64) -> Result<(), StatusError> {
    let deadline = Instant::now() + state.config.too_large_rv_wait;
    loop {
        let current = state.core.store.current_rv();
        if current >= rv {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(StatusError::too_large_resource_version(rv, current));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// LIST handler.
pub(crate) async fn list(
    state: &Arc<State>,
    info: &Arc<ResourceInfo>,
    namespace: Option<&str>,
    q: &HashMap<String, String>,
    output: Output,
) -> Result<hyper::Response<super::body::ResponseBody>, StatusError> {
    let rv = parse_rv(q.get("resourceVersion"))?;
    let rv_match = q
        .get("resourceVersionMatch")
        .map(String::as_str)
        .unwrap_or("");
    let cont = q.get("continue").map(String::as_str).unwrap_or("");
    let limit: Option<usize> = match q.get("limit").map(String::as_str) {
        None | Some("") => None,
        Some(l) => Some(
            l.parse::<i64>()
                .map_err(|_| StatusError::bad_request(format!("invalid limit: {l:?}")))?
                .max(0) as usize,
        ),
    };
    let mut errs = Vec::new();
    if !rv_match.is_empty() {
        if rv == Rv::Unset {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if !cont.is_empty() {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if rv_match != "Exact" && rv_match != "NotOlderThan" {
            errs.push(FieldError::not_supported(
                "resourceVersionMatch",
                json!(rv_match),
                &["Exact".into(), "NotOlderThan".into(), String::new()],
            ));
        }
        if rv_match == "Exact" && rv == Rv::Any {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if q.contains_key("sendInitialEvents") {
        errs.push(FieldError::forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    if !errs.is_empty() {
        return Err(list_options_invalid(errs));
    }
    if !cont.is_empty() && matches!(rv, Rv::At(_)) {
        return Err(StatusError::bad_request(
            "specifying resource version is not allowed when using continue",
        ));
    }
    let filter = Filter::parse(
        info,
        q.get("labelSelector").map(String::as_str),
        q.get("fieldSelector").map(String::as_str),
    )?;
    if state.faults.take_list_expiry() {
        return Err(StatusError::list_too_old());
    }
    let prefix = namespace
        .filter(|_| info.namespaced)
        .map(|n| format!("{n}/"))
        .unwrap_or_default();
    // what a watch cache serves may come from a lagging replica
    let cached = cont.is_empty()
        && match rv {
            Rv::Unset => false,
            Rv::Any => true,
            Rv::At(_) => rv_match == "NotOlderThan" || (rv_match.is_empty() && limit.is_none()),
        };
    let lagging = if cached {
        state.faults.take_lagging()
    } else {
        None
    };
    let (at_rv, start, limit) = if let Some(replica_rv) = lagging {
        let replica_rv = replica_rv.min(state.core.store.current_rv());
        if let Rv::At(n) = rv {
            if n > replica_rv {
                return Err(StatusError::too_large_resource_version(n, replica_rv));
            }
        }
        (Some(replica_rv), None, None)
    } else if cont.is_empty() {
        match rv {
            Rv::Unset => (None, None, limit),
            Rv::Any => (None, None, None),
            Rv::At(n) => {
                wait_for_rv(state, n).await?;
                let exact = rv_match == "Exact" || (rv_match.is_empty() && limit.is_some());
                (exact.then_some(n), None, limit)
            }
        }
    } else {
        let token = ContinueToken::decode(cont)
            .map_err(|e| StatusError::bad_request(format!("continue key is not valid: {e}")))?;
        (token.rv, Some(token.start), limit)
    };
    let rs = state.core.resource_store(info);
    let filter_fn = |o: &crate::store::StoredObject| filter.matches(o);
    let query = ListQuery {
        prefix,
        start: start.clone(),
        at_rv,
        limit,
        filter: &filter_fn,
        count_remaining: filter.is_empty(),
    };
    let page = match rs.list_page(&state.core.store, &query) {
        // a lagging replica's state older than the history: serve it fresh
        Err(_) if lagging.is_some() => rs.list_page(
            &state.core.store,
            &ListQuery {
                at_rv: None,
                ..query
            },
        ),
        other => other,
    };
    let page = page.map_err(|_| {
        if cont.is_empty() {
            StatusError::list_too_old()
        } else {
            let resume = start
                .as_deref()
                .map(|s| s.trim_end_matches('\u{0}').to_owned());
            StatusError::continue_expired(resume.map(|s| ContinueToken::after(&s, None)))
        }
    })?;
    let mut list_meta = json!({"resourceVersion": page.rv.to_string()});
    if let Some(k) = &page.last_key {
        list_meta["continue"] = json!(ContinueToken::after(k, Some(page.rv)));
    }
    if let Some(n) = page.remaining {
        list_meta["remainingItemCount"] = json!(n);
    }
    let items = state.admission.read(&state.core, info, page.items).await?;
    render_list(
        info,
        items,
        list_meta,
        output,
        IncludeObject::parse(q.get("includeObject").map(String::as_str)),
    )
}

/// Renders a list of objects in the requested representation.
pub(crate) fn render_list(
    info: &ResourceInfo,
    items: Vec<Arc<crate::store::StoredObject>>,
    list_meta: Value,
    output: Output,
    include: IncludeObject,
) -> Result<hyper::Response<super::body::ResponseBody>, StatusError> {
    let output = match output {
        Output::Protobuf { json_fallback } => {
            let values: Vec<Value> = items
                .iter()
                .map(|o| render::object_value(info, o))
                .collect();
            match crate::proto::encode_list(
                &info.api_version(),
                &info.list_kind,
                &list_meta,
                &values,
            ) {
                Ok(b) => {
                    return hyper::Response::builder()
                        .status(200)
                        .header(http::header::CONTENT_TYPE, crate::proto::MEDIA_TYPE)
                        .body(full(b))
                        .map_err(|e| StatusError::internal(&e.to_string()))
                }
                Err(_) if json_fallback => Output::Json,
                Err(e) => return Err(super::negotiate::proto_response_error(&e)),
            }
        }
        other => other,
    };
    let (body, content_type) = match output {
        // a protobuf list that needs its JSON fallback
        Output::Json | Output::Protobuf { .. } => {
            let head = format!(
                "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{},\"items\":[",
                info.list_kind,
                info.api_version(),
                list_meta
            );
            let parts: Vec<Bytes> = items.iter().map(|o| render::object_json(info, o)).collect();
            (
                JoinedBody::new(Bytes::from(head), parts, Bytes::from_static(b"]}")).boxed(),
                "application/json",
            )
        }
        Output::Yaml => {
            let items: Vec<Value> = items
                .iter()
                .map(|o| render::object_value(info, o))
                .collect();
            let v = json!({"kind": info.list_kind, "apiVersion": info.api_version(), "metadata": list_meta, "items": items});
            let (b, ct) = render::yaml(&v)?;
            (full(b), ct)
        }
        Output::PartialMetadata { protobuf: true, .. } => {
            let items: Vec<Value> = items
                .iter()
                .map(|o| render::partial_metadata(o.value(), false))
                .collect();
            let b = crate::proto::encode_list(
                render::meta_api_version(false),
                "PartialObjectMetadataList",
                &list_meta,
                &items,
            )
            .map_err(|e| super::negotiate::proto_response_error(&e))?;
            (full(Bytes::from(b)), crate::proto::MEDIA_TYPE)
        }
        Output::PartialMetadata { v1beta1, .. } => {
            let items: Vec<Value> = items
                .iter()
                .map(|o| render::partial_metadata(o.value(), v1beta1))
                .collect();
            let v = json!({"kind": "PartialObjectMetadataList", "apiVersion": render::meta_api_version(v1beta1), "metadata": list_meta, "items": items});
            (full(render::json_bytes(&v)), "application/json")
        }
        Output::Table { v1beta1 } => {
            let rows = items
                .iter()
                .map(|o| table::row(info, &render::object_value(info, o), include, v1beta1))
                .collect();
            (
                full(render::json_bytes(&table::table(
                    info, rows, list_meta, v1beta1,
                ))),
                "application/json",
            )
        }
    };
    hyper::Response::builder()
        .status(200)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(body)
        .map_err(|e| StatusError::internal(&e.to_string()))
}
