//! Resource requests: scope and subresource checks, body decoding, the
//! write options, and the answers kube-apiserver gives for each verb.

use super::body::{full, ResponseBody};
use super::negotiate::{self, Output};
use super::render::{self, IncludeObject};
use super::request::{ApiRequest, Verb};
use super::{list, watch, State};
use crate::admission::Change;
use crate::flow_control::Seat;
use crate::patch::PatchType;
use crate::resource::ResourceInfo;
use crate::rest::{
    DeleteOptions, DeleteOutcome, FieldValidation, Propagation, Subresource, WriteOptions,
    WriteResult,
};
use crate::selector::Filter;
use crate::status::StatusError;
use bytes::Bytes;
use http::request::Parts;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// kube-apiserver's limit on request bodies.
const MAX_BODY: usize = 3 * 1024 * 1024;

type Resp = hyper::Response<ResponseBody>;

fn header(parts: &Parts, name: http::header::HeaderName) -> Option<&str> {
    parts.headers.get(name).and_then(|v| v.to_str().ok())
}

async fn read_body(body: Incoming) -> Result<Bytes, StatusError> {
    match http_body_util::Limited::new(body, MAX_BODY).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(StatusError::new(
                413,
                "RequestEntityTooLarge",
                format!("Request entity too large: limit is {MAX_BODY}"),
            ))
        }
        Err(e) => Err(StatusError::bad_request(format!(
            "reading the request body: {e}"
        ))),
    }
}

/// The write options of a request; `kind` names its options type
/// (`CreateOptions`, `UpdateOptions`, `PatchOptions`) in validation errors.
fn write_options(
    q: &HashMap<String, String>,
    parts: &Parts,
    kind: &str,
    apply: bool,
) -> Result<WriteOptions, StatusError> {
    let dry_run = match q.get("dryRun").map(String::as_str) {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(StatusError::bad_request(format!(
                "unsupported dry run option: {other:?} (only \"All\" is supported)"
            )))
        }
    };
    let field_manager = q.get("fieldManager").cloned();
    let mut errs =
        crate::fields::validate_field_manager(field_manager.as_deref().unwrap_or_default());
    let force = match q.get("force").map(String::as_str) {
        _ if kind != "PatchOptions" => false,
        None | Some("") => false,
        Some(v) => super::request::parse_bool(v).ok_or_else(|| {
            StatusError::bad_request(format!("invalid boolean value for force: {v:?}"))
        })?,
    };
    if force && !apply {
        errs.push(crate::status::FieldError::forbidden(
            "force",
            "may not be specified for non-apply patch",
        ));
    }
    if !errs.is_empty() {
        return Err(StatusError::invalid("meta.k8s.io", kind, "", &errs));
    }
    let user_agent = header(parts, http::header::USER_AGENT).unwrap_or("");
    Ok(WriteOptions {
        dry_run,
        field_validation: FieldValidation::parse(q.get("fieldValidation").map(String::as_str))?,
        field_manager,
        default_manager: Some(crate::fields::manager_from_user_agent(user_agent)),
        force,
        fields_recorded: false,
        prepared: false,
    })
}

fn respond(
    code: u16,
    bytes: Bytes,
    content_type: &str,
    warnings: &[String],
) -> Result<Resp, StatusError> {
    let mut b = hyper::Response::builder()
        .status(code)
        .header(http::header::CONTENT_TYPE, content_type);
    for w in warnings {
        b = b.header("Warning", format!("299 - {}", crate::status::go_quote(w)));
    }
    b.body(full(bytes))
        .map_err(|e| StatusError::internal(&e.to_string()))
}

fn write_response(
    info: &ResourceInfo,
    r: &WriteResult,
    output: Output,
    ok_code: u16,
) -> Result<Resp, StatusError> {
    let code = if r.created { 201 } else { ok_code };
    let (bytes, ct) = render::render_one(info, &r.object, output, IncludeObject::Metadata)?;
    respond(code, bytes, ct, &r.warnings)
}

/// Serves a resource request; `seat` is a watch's admission seat, handed
/// back once the watch is initialized.
pub(crate) async fn resource(
    state: &Arc<State>,
    req: &ApiRequest,
    parts: &Parts,
    body: Incoming,
    q: &HashMap<String, String>,
    seat: Option<Seat>,
) -> Result<Resp, StatusError> {
    let info = served_resource(state, req)?;
    let namespace = req.namespace.as_deref();
    let name = req.name.as_deref();
    if req.subresource.as_deref() == Some("scale") && info.scale.is_some() {
        return scale(state, &info, req, parts, body, q).await;
    }
    let sub = subresource(&info, req)?;
    let output = negotiate::output(header(parts, http::header::ACCEPT), info.protobuf())?;
    let ns = namespace.unwrap_or("");
    match (req.verb, name) {
        (Verb::Get, Some(name)) => {
            let obj = state.core.get(&info, ns, name)?;
            let obj = state.admission.read_one(&state.core, &info, obj).await?;
            let include = IncludeObject::parse(q.get("includeObject").map(String::as_str));
            let (bytes, ct) = render::render_one(&info, &obj, output, include)?;
            respond(200, bytes, ct, &[])
        }
        (Verb::List, _) => list::list(state, &info, namespace, q, output).await,
        (Verb::Watch, _) => watch::watch(state, &info, namespace, q, output, seat).await,
        (Verb::Create, None) => {
            let bytes = read_body(body).await?;
            let obj = negotiate::decode_body(header(parts, http::header::CONTENT_TYPE), &bytes)?;
            let opts = write_options(q, parts, "CreateOptions", false)?;
            let r = state
                .admission
                .create(&state.core, &info, ns, obj, &opts)
                .await?;
            write_response(&info, &r, output, 201)
        }
        (Verb::Update, Some(name)) => {
            let bytes = read_body(body).await?;
            let obj = negotiate::decode_body(header(parts, http::header::CONTENT_TYPE), &bytes)?;
            let opts = write_options(q, parts, "UpdateOptions", false)?;
            let change = Change::Replace(&obj);
            let r = state
                .admission
                .update(&state.core, &info, ns, name, change, sub, &opts)
                .await?;
            write_response(&info, &r, output, 200)
        }
        (Verb::Patch, Some(name)) => {
            let patch_type = patch_type(parts)?;
            let opts = write_options(q, parts, "PatchOptions", patch_type == PatchType::Apply)?;
            let bytes = read_body(body).await?;
            let change = Change::Patch(patch_type, &bytes);
            let r = state
                .admission
                .update(&state.core, &info, ns, name, change, sub, &opts)
                .await?;
            write_response(&info, &r, output, 200)
        }
        (Verb::Delete, Some(name)) => {
            let opts = delete_options(body, q).await?;
            let outcome = state
                .admission
                .delete(&state.core, &info, ns, name, &opts)
                .await?;
            delete_response(&info, outcome, output)
        }
        (Verb::DeleteCollection, None) => {
            delete_collection(state, &info, namespace, body, q, output).await
        }
        _ => Err(StatusError::method_not_allowed()),
    }
}

/// The resource a request names, if it is served at that scope: a
/// namespaced resource is reached without a namespace only to list or watch
/// across namespaces, a cluster-scoped one never with one.
fn served_resource(state: &State, req: &ApiRequest) -> Result<Arc<ResourceInfo>, StatusError> {
    let info = state
        .core
        .registry
        .get(&req.group, &req.version, &req.resource)
        .ok_or_else(StatusError::route_not_found)?;
    let namespace = req.namespace.as_deref();
    if !info.namespaced && namespace.is_some() {
        return Err(StatusError::route_not_found());
    }
    if info.namespaced && namespace.is_none() && !matches!(req.verb, Verb::List | Verb::Watch) {
        return Err(StatusError::route_not_found());
    }
    Ok(info)
}

/// The main resource or its `status` subresource (get, update and patch
/// only); any other subresource is not found.
fn subresource(info: &ResourceInfo, req: &ApiRequest) -> Result<Subresource, StatusError> {
    let sub = match req.subresource.as_deref() {
        None => Subresource::Main,
        Some("status") if info.status_subresource => Subresource::Status,
        Some(_) => return Err(StatusError::route_not_found()),
    };
    if sub == Subresource::Status && !matches!(req.verb, Verb::Get | Verb::Update | Verb::Patch) {
        return Err(StatusError::method_not_allowed());
    }
    Ok(sub)
}

/// The patch type of a PATCH body, from its content type (415 if unknown).
fn patch_type(parts: &Parts) -> Result<PatchType, StatusError> {
    let ct = header(parts, http::header::CONTENT_TYPE).unwrap_or("");
    PatchType::from_content_type(ct).ok_or_else(|| {
        StatusError::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json",
        )
    })
}

/// DELETE on a collection: deletes what the selectors match and answers
/// the deleted objects as a list.
async fn delete_collection(
    state: &State,
    info: &Arc<ResourceInfo>,
    namespace: Option<&str>,
    body: Incoming,
    q: &HashMap<String, String>,
    output: Output,
) -> Result<Resp, StatusError> {
    let opts = delete_options(body, q).await?;
    let filter = Filter::parse(
        info,
        q.get("labelSelector").map(String::as_str),
        q.get("fieldSelector").map(String::as_str),
    )?;
    let deleted = state
        .admission
        .delete_collection(&state.core, info, namespace, &filter, &opts)
        .await?;
    let rv = state.core.store.current_rv();
    list::render_list(
        info,
        deleted,
        json!({"resourceVersion": rv.to_string()}),
        output,
        IncludeObject::Metadata,
    )
}

/// The `scale` subresource.
async fn scale(
    state: &Arc<State>,
    info: &ResourceInfo,
    req: &ApiRequest,
    parts: &Parts,
    body: Incoming,
    q: &HashMap<String, String>,
) -> Result<Resp, StatusError> {
    let (Some(ns), Some(name)) = (req.namespace.as_deref(), req.name.as_deref()) else {
        return Err(StatusError::route_not_found());
    };
    // autoscaling/v1 Scale has a protobuf encoding
    let output = negotiate::output(header(parts, http::header::ACCEPT), true)?;
    let scale = match req.verb {
        Verb::Get => state.core.get_scale(info, ns, name)?,
        Verb::Update => {
            let opts = write_options(q, parts, "UpdateOptions", false)?;
            let bytes = read_body(body).await?;
            let obj = negotiate::decode_body(header(parts, http::header::CONTENT_TYPE), &bytes)?;
            state.core.update_scale(info, ns, name, obj, &opts)?
        }
        Verb::Patch => {
            let ct = header(parts, http::header::CONTENT_TYPE).unwrap_or("");
            let patch_type = PatchType::from_content_type(ct).ok_or_else(|| {
                StatusError::new(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json",
                )
            })?;
            let opts = write_options(q, parts, "PatchOptions", patch_type == PatchType::Apply)?;
            let bytes = read_body(body).await?;
            state
                .core
                .patch_scale(info, ns, name, patch_type, &bytes, &opts)?
        }
        _ => return Err(StatusError::method_not_allowed()),
    };
    let (bytes, ct) = render::render_value(&scale, output)?;
    respond(200, bytes, ct, &[])
}

async fn delete_options(
    body: Incoming,
    q: &HashMap<String, String>,
) -> Result<DeleteOptions, StatusError> {
    let bytes = read_body(body).await?;
    let mut opts = if bytes.iter().all(u8::is_ascii_whitespace) {
        DeleteOptions::default()
    } else if bytes.starts_with(b"k8s\0") {
        // a protobuf client (kubectl's typed clients) sends DeleteOptions so
        let v = crate::proto::decode_object(&bytes).map_err(negotiate::proto_request_error)?;
        DeleteOptions::from_body(&v)?
    } else {
        let v: Value = serde_json::from_slice(&bytes)
            .or_else(|_| serde_yaml::from_slice(&bytes))
            .map_err(|e| StatusError::bad_request(format!("decoding DeleteOptions: {e}")))?;
        DeleteOptions::from_body(&v)?
    };
    if let Some(p) = q.get("propagationPolicy").filter(|p| !p.is_empty()) {
        opts.propagation = Some(Propagation::parse(p)?);
    } else if let Some(o) = q.get("orphanDependents") {
        opts.propagation = Some(if o == "true" {
            Propagation::Orphan
        } else {
            Propagation::Background
        });
    }
    if q.get("dryRun").is_some_and(|d| d == "All") {
        opts.dry_run = true;
    }
    Ok(opts)
}

fn delete_response(
    info: &ResourceInfo,
    outcome: DeleteOutcome,
    output: Output,
) -> Result<Resp, StatusError> {
    match outcome {
        DeleteOutcome::Deleted(obj) if !info.return_deleted_object => {
            let mut details = serde_json::Map::new();
            details.insert("name".into(), json!(obj.name()));
            if !info.group.is_empty() {
                details.insert("group".into(), json!(info.group));
            }
            details.insert("kind".into(), json!(info.resource));
            details.insert("uid".into(), json!(obj.uid()));
            let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details});
            let (bytes, ct) = render::render_value(&status, output)?;
            respond(200, bytes, ct, &[])
        }
        DeleteOutcome::Deleted(obj) | DeleteOutcome::Pending(obj) => {
            let (bytes, ct) = render::render_one(info, &obj, output, IncludeObject::Metadata)?;
            respond(200, bytes, ct, &[])
        }
    }
}
