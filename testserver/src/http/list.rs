//! LIST: resourceVersion / resourceVersionMatch semantics, limit and
//! continue (with expiry), selectors, remainingItemCount; the body is
//! assembled from the stored objects' bytes with an exact length.

use super::body::{full, JoinedBody, ResponseBody};
use super::negotiate::Output;
use super::render::{self, IncludeObject};
use super::{table, State};
use crate::resource::ResourceInfo;
use crate::selector::Filter;
use crate::status::{FieldError, StatusError};
use crate::store::{ContinueToken, ListPage, ListQuery, StoredObject};
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

/// The paging and consistency parameters of a LIST request.
struct ListParams<'q> {
    rv: Rv,
    /// `resourceVersionMatch`, empty when absent.
    rv_match: &'q str,
    /// The continue token, empty when absent.
    cont: &'q str,
    limit: Option<usize>,
}

impl<'q> ListParams<'q> {
    /// Parses and validates the query as kube-apiserver's ListOptions
    /// validation does.
    fn parse(q: &'q HashMap<String, String>) -> Result<Self, StatusError> {
        let params = Self {
            rv: parse_rv(q.get("resourceVersion"))?,
            rv_match: q
                .get("resourceVersionMatch")
                .map(String::as_str)
                .unwrap_or(""),
            cont: q.get("continue").map(String::as_str).unwrap_or(""),
            limit: parse_limit(q.get("limit"))?,
        };
        let mut errs = params.rv_match_errors();
        if q.contains_key("sendInitialEvents") {
            errs.push(FieldError::forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            ));
        }
        if !errs.is_empty() {
            return Err(list_options_invalid(errs));
        }
        if !params.cont.is_empty() && matches!(params.rv, Rv::At(_)) {
            return Err(StatusError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        Ok(params)
    }

    /// What is wrong with `resourceVersionMatch` given the other parameters.
    fn rv_match_errors(&self) -> Vec<FieldError> {
        let (rv, rv_match) = (self.rv, self.rv_match);
        let mut errs = Vec::new();
        if rv_match.is_empty() {
            return errs;
        }
        if rv == Rv::Unset {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if !self.cont.is_empty() {
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
        errs
    }

    /// Whether a watch cache would serve this list (so it may come from a
    /// lagging replica).
    fn served_from_cache(&self) -> bool {
        self.cont.is_empty()
            && match self.rv {
                Rv::Unset => false,
                Rv::Any => true,
                Rv::At(_) => {
                    self.rv_match == "NotOlderThan"
                        || (self.rv_match.is_empty() && self.limit.is_none())
                }
            }
    }
}

/// Parses `limit` (negative means no limit, as 0 does).
fn parse_limit(limit: Option<&String>) -> Result<Option<usize>, StatusError> {
    match limit.map(String::as_str) {
        None | Some("") => Ok(None),
        Some(l) => Ok(Some(
            l.parse::<i64>()
                .map_err(|_| StatusError::bad_request(format!("invalid limit: {l:?}")))?
                .max(0) as usize,
        )),
    }
}

/// Where a list page is read: at which resourceVersion (`None`: latest),
/// from which key, and how many objects.
type ReadWindow = (Option<u64>, Option<String>, Option<usize>);

/// The window a list reads, from its parameters, a lagging replica's
/// resourceVersion if one serves it, or its continue token.
async fn read_window(
    state: &State,
    params: &ListParams<'_>,
    lagging: Option<u64>,
) -> Result<ReadWindow, StatusError> {
    let (rv, limit) = (params.rv, params.limit);
    if let Some(replica_rv) = lagging {
        let replica_rv = replica_rv.min(state.core.store.current_rv());
        if let Rv::At(n) = rv {
            if n > replica_rv {
                return Err(StatusError::too_large_resource_version(n, replica_rv));
            }
        }
        return Ok((Some(replica_rv), None, None));
    }
    if !params.cont.is_empty() {
        let token = ContinueToken::decode(params.cont)
            .map_err(|e| StatusError::bad_request(format!("continue key is not valid: {e}")))?;
        return Ok((token.rv, Some(token.start), limit));
    }
    Ok(match rv {
        Rv::Unset => (None, None, limit),
        Rv::Any => (None, None, None),
        Rv::At(n) => {
            wait_for_rv(state, n).await?;
            let exact =
                params.rv_match == "Exact" || (params.rv_match.is_empty() && limit.is_some());
            (exact.then_some(n), None, limit)
        }
    })
}

/// Reads one page; a lagging replica's state older than the history is
/// served fresh, and a state too old otherwise is 410 Gone.
fn read_page(
    state: &State,
    info: &ResourceInfo,
    query: ListQuery<'_>,
    lagging: bool,
    continuing: bool,
) -> Result<ListPage, StatusError> {
    let start = query.start.clone();
    let rs = state.core.resource_store(info);
    let page = match rs.list_page(&state.core.store, &query) {
        Err(_) if lagging => rs.list_page(
            &state.core.store,
            &ListQuery {
                at_rv: None,
                ..query
            },
        ),
        other => other,
    };
    page.map_err(|_| {
        if !continuing {
            StatusError::list_too_old()
        } else {
            let resume = start
                .as_deref()
                .map(|s| s.trim_end_matches('\u{0}').to_owned());
            StatusError::continue_expired(resume.map(|s| ContinueToken::after(&s, None)))
        }
    })
}

/// The list's `metadata`: resourceVersion, continue, remainingItemCount.
fn list_meta(page: &ListPage) -> Value {
    let mut list_meta = json!({"resourceVersion": page.rv.to_string()});
    if let Some(k) = &page.last_key {
        list_meta["continue"] = json!(ContinueToken::after(k, Some(page.rv)));
    }
    if let Some(n) = page.remaining {
        list_meta["remainingItemCount"] = json!(n);
    }
    list_meta
}

/// LIST handler.
pub(crate) async fn list(
    state: &Arc<State>,
    info: &Arc<ResourceInfo>,
    namespace: Option<&str>,
    q: &HashMap<String, String>,
    output: Output,
) -> Result<hyper::Response<ResponseBody>, StatusError> {
    let params = ListParams::parse(q)?;
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
    let lagging = if params.served_from_cache() {
        state.faults.take_lagging()
    } else {
        None
    };
    let (at_rv, start, limit) = read_window(state, &params, lagging).await?;
    let filter_fn = |o: &StoredObject| filter.matches(o);
    let query = ListQuery {
        prefix,
        start,
        at_rv,
        limit,
        filter: &filter_fn,
        count_remaining: filter.is_empty(),
    };
    let page = read_page(
        state,
        info,
        query,
        lagging.is_some(),
        !params.cont.is_empty(),
    )?;
    let list_meta = list_meta(&page);
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
    items: Vec<Arc<StoredObject>>,
    list_meta: Value,
    output: Output,
    include: IncludeObject,
) -> Result<hyper::Response<ResponseBody>, StatusError> {
    let output = match output {
        Output::Protobuf { json_fallback } => match protobuf_list(info, &items, &list_meta) {
            Ok(b) => return respond(full(b), crate::proto::MEDIA_TYPE),
            Err(_) if json_fallback => Output::Json,
            Err(e) => return Err(super::negotiate::proto_response_error(&e)),
        },
        other => other,
    };
    let (body, content_type) = list_body(info, &items, list_meta, output, include)?;
    respond(body, content_type)
}

/// A list of full objects as protobuf.
fn protobuf_list(
    info: &ResourceInfo,
    items: &[Arc<StoredObject>],
    list_meta: &Value,
) -> Result<Vec<u8>, crate::proto::ProtoError> {
    let values: Vec<Value> = items
        .iter()
        .map(|o| render::object_value(info, o))
        .collect();
    crate::proto::encode_list(&info.api_version(), &info.list_kind, list_meta, &values)
}

/// A 200 answer with `body` as `content_type`.
fn respond(
    body: ResponseBody,
    content_type: &'static str,
) -> Result<hyper::Response<ResponseBody>, StatusError> {
    hyper::Response::builder()
        .status(200)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(body)
        .map_err(|e| StatusError::internal(&e.to_string()))
}

/// The body of a list in every representation but full-object protobuf,
/// with its content type.
fn list_body(
    info: &ResourceInfo,
    items: &[Arc<StoredObject>],
    list_meta: Value,
    output: Output,
    include: IncludeObject,
) -> Result<(ResponseBody, &'static str), StatusError> {
    Ok(match output {
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
            let metadata = items.iter().map(|o| render::metadata_of(o.value()));
            let b = crate::proto::encode_metadata_list(&list_meta, metadata)
                .map_err(|e| super::negotiate::proto_response_error(&e))?;
            (full(Bytes::from(b)), crate::proto::MEDIA_TYPE)
        }
        Output::PartialMetadata { v1beta1, .. } => {
            let head = format!(
                "{{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"{}\",\"metadata\":{},\"items\":[",
                render::meta_api_version(v1beta1),
                list_meta
            );
            let parts: Vec<Bytes> = items
                .iter()
                .map(|o| render::partial_metadata_json(o.value(), v1beta1))
                .collect();
            (
                JoinedBody::new(Bytes::from(head), parts, Bytes::from_static(b"]}")).boxed(),
                "application/json",
            )
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
    })
}
