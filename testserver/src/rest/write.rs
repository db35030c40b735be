//! Create, update and patch.

use super::strategy::{self, FieldValidation};
use super::{object_key, ControllerMsg, Core, Subresource, WriteOptions, WriteResult};
use crate::fields::{self, ApplyError};
use crate::meta;
use crate::patch::{self, PatchError, PatchType};
use crate::resource::{Behavior, ResourceInfo};
use crate::status::{FieldError, StatusError};
use crate::store::{StoredObject, WriteTxn};
use serde_json::{json, Value};
use std::sync::Arc;

const GENERATE_NAME_ATTEMPTS: usize = 8;

/// An object prepared for storage.
struct Prepared {
    value: Value,
    warnings: Vec<String>,
}

fn invalid(info: &ResourceInfo, name: &str, errs: &[FieldError]) -> StatusError {
    StatusError::invalid(&info.group, &info.kind, name, errs)
}

/// Checks and fills `apiVersion` and `kind`; stores in the storage version.
fn check_type_meta(core: &Core, info: &ResourceInfo, obj: &mut Value) -> Result<(), StatusError> {
    if !obj.is_object() {
        return Err(StatusError::bad_request(
            "the body of the request must be a JSON or YAML object",
        ));
    }
    let (api_version, kind) = meta::type_meta(obj);
    if !api_version.is_empty() {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        if group != info.group || core.registry.get(group, version, &info.resource).is_none() {
            return Err(StatusError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                info.api_version()
            )));
        }
    }
    if !kind.is_empty() && kind != info.kind {
        return Err(StatusError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            info.kind
        )));
    }
    let m = meta::ensure_object(obj);
    m.insert("apiVersion".into(), json!(info.storage_api_version()));
    m.insert("kind".into(), json!(info.kind));
    Ok(())
}

fn check_namespace_field(
    info: &ResourceInfo,
    namespace: &str,
    obj: &mut Value,
) -> Result<(), StatusError> {
    if info.namespaced {
        let given = meta::namespace(obj);
        if given.is_empty() {
            meta::set_meta_str(obj, "namespace", namespace);
        } else if given != namespace {
            return Err(StatusError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    } else {
        meta::remove_meta(obj, "namespace");
    }
    Ok(())
}

/// Runs defaults, schema and validation; returns warnings.
fn default_and_validate(
    info: &ResourceInfo,
    obj: &mut Value,
    old: Option<&Value>,
    opts: &WriteOptions,
) -> Result<Vec<String>, StatusError> {
    strategy::default_object(info, obj)?;
    meta::drop_empty_lists(obj);
    let mut errs = Vec::new();
    if old.is_none() {
        strategy::validate_name(info, meta::name(obj), &mut errs);
    }
    let outcome = strategy::apply_schema(info, obj, &mut errs);
    strategy::validate_kind(info, obj, old, &mut errs);
    if info.behavior == Behavior::CustomResourceDefinition {
        crate::crd::default_crd(obj);
        errs.extend(crate::crd::validate_crd(obj, old));
    }
    if !errs.is_empty() {
        return Err(invalid(info, meta::name(obj), &errs));
    }
    let unknown: Vec<String> = outcome
        .unknown
        .iter()
        .map(|f| format!("unknown field {}", crate::status::go_quote(f)))
        .collect();
    match opts.field_validation {
        FieldValidation::Strict if !unknown.is_empty() => Err(StatusError::bad_request(format!(
            "strict decoding error: {}",
            unknown.join(", ")
        ))),
        FieldValidation::Warn => Ok(unknown),
        _ => Ok(Vec::new()),
    }
}

/// The writer a write is recorded as.
fn writer<'a>(info: &ResourceInfo, opts: &'a WriteOptions, sub: Subresource) -> fields::Writer<'a> {
    fields::Writer {
        manager: opts.update_manager(),
        api_version: info.api_version(),
        subresource: match sub {
            Subresource::Main => "",
            Subresource::Status => "status",
            Subresource::Scale => "scale",
        },
    }
}

/// 409 `Apply failed with N conflict(s)`, with one `FieldManagerConflict`
/// cause per field, as kube-apiserver answers.
fn apply_conflict(conflicts: &[fields::Conflict]) -> StatusError {
    let message = match conflicts {
        [one] => format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            one.manager, one.field
        ),
        many => {
            let mut managers: Vec<&str> = many.iter().map(|c| c.manager.as_str()).collect();
            managers.sort_unstable();
            managers.dedup();
            let mut lines = Vec::new();
            for m in managers {
                lines.push(format!("conflicts with {m}:"));
                for c in many.iter().filter(|c| c.manager == m) {
                    lines.push(format!("- {}", c.field));
                }
            }
            format!(
                "Apply failed with {} conflicts: {}",
                many.len(),
                lines.join("\n")
            )
        }
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|c| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {}", c.manager), "field": c.field}))
        .collect();
    let mut e = StatusError::new(409, "Conflict", message);
    e.details = Some(Box::new(json!({ "causes": causes })));
    e
}

fn dry_run_object(value: Value, key: &str) -> Result<Arc<StoredObject>, StatusError> {
    let rv = value["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    crate::store::StoredObject::detached(value, rv, key.to_owned())
        .map(Arc::new)
        .map_err(|e| StatusError::internal(&e.to_string()))
}

impl Core {
    fn prepare_create(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        mut obj: Value,
        opts: &WriteOptions,
    ) -> Result<Prepared, StatusError> {
        check_type_meta(self, info, &mut obj)?;
        check_namespace_field(info, namespace, &mut obj)?;
        if meta::name(&obj).is_empty() {
            let generate = meta::meta_str(&obj, "generateName").to_owned();
            if generate.is_empty() {
                let e = FieldError::required("metadata.name", "name or generateName is required");
                return Err(invalid(info, "", &[e]));
            }
            let name = format!("{generate}{}", meta::random_suffix());
            meta::set_meta_str(&mut obj, "name", &name);
        }
        strategy::fill_create_metadata(info, &mut obj);
        if info.status_subresource {
            if let Some(m) = obj.as_object_mut() {
                m.remove("status");
            }
        }
        crate::kinds::prepare_for_create(info, &mut obj);
        if info.behavior == Behavior::Namespace {
            if let Some(m) = obj.as_object_mut() {
                m.insert("status".into(), json!({"phase": "Active"}));
            }
        }
        let warnings = default_and_validate(info, &mut obj, None, opts)?;
        if info.behavior == Behavior::CustomResourceDefinition {
            crate::crd::establish(&mut obj);
        }
        if !opts.fields_recorded {
            fields::record_update(info, None, &mut obj, &writer(info, opts, Subresource::Main));
        }
        Ok(Prepared {
            value: obj,
            warnings,
        })
    }

    /// POST: creates an object.
    pub(crate) fn create(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<WriteResult, StatusError> {
        if info.behavior == Behavior::EventsV1 && !opts.prepared {
            let core = crate::builtin::events();
            return self.create(&core, namespace, crate::events::accept(&body, true)?, opts);
        }
        let generated = meta::name(&body).is_empty();
        let rs = self.resource_store(info);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let prepared = if opts.prepared {
                Prepared {
                    value: body.clone(),
                    warnings: Vec::new(),
                }
            } else {
                self.prepare_create(info, namespace, body.clone(), opts)?
            };
            let name = meta::name(&prepared.value).to_owned();
            self.check_namespace(info, namespace, &name)?;
            let key = object_key(info, namespace, &name);
            let mut tx = rs.write(&self.store);
            if tx.get(&key).is_some() {
                if generated && attempt < GENERATE_NAME_ATTEMPTS {
                    continue;
                }
                return Err(StatusError::already_exists(&info.group_resource(), &name));
            }
            let mut value = prepared.value;
            let reserved = self.allocate(info, &mut value, None)?;
            if opts.dry_run {
                self.give_back(reserved);
                return Ok(WriteResult {
                    object: dry_run_object(value, &key)?,
                    created: true,
                    warnings: prepared.warnings,
                });
            }
            let ev = match tx.put(&key, value) {
                Ok(ev) => ev,
                Err(e) => {
                    self.give_back(reserved);
                    return Err(e.into());
                }
            };
            drop(tx);
            self.after_write(info, None, &ev.object);
            return Ok(WriteResult {
                object: ev.object.clone(),
                created: true,
                warnings: prepared.warnings,
            });
        }
    }

    /// PUT: replaces an object (or its status).
    pub(crate) fn update(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        name: &str,
        body: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<WriteResult, StatusError> {
        if info.behavior == Behavior::EventsV1 && !opts.prepared {
            let core = crate::builtin::events();
            let create = self
                .resource_store(info)
                .get(&object_key(info, namespace, name))
                .is_none();
            let body = crate::events::accept(&body, create)?;
            return self.update(&core, namespace, name, body, sub, opts);
        }
        let body_name = meta::name(&body).to_owned();
        if !body_name.is_empty() && body_name != name {
            return Err(StatusError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let mut body = body;
        if body_name.is_empty() && body.is_object() {
            meta::set_meta_str(&mut body, "name", name);
        }
        let key = object_key(info, namespace, name);
        let rs = self.resource_store(info);
        let existing = rs.get(&key);
        if existing.is_none() {
            if info.allow_create_on_update && sub == Subresource::Main {
                return self.create(info, namespace, body, opts);
            }
            return Err(StatusError::not_found(&info.group_resource(), name));
        }
        let mut tx = rs.write(&self.store);
        self.update_locked(info, &mut tx, &key, name, body, sub, opts)
    }

    /// Applies an update while holding the resource's lock.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn update_locked(
        &self,
        info: &ResourceInfo,
        tx: &mut WriteTxn<'_>,
        key: &str,
        name: &str,
        body: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<WriteResult, StatusError> {
        let Some(old) = tx.get(key) else {
            return Err(StatusError::not_found(&info.group_resource(), name));
        };
        let (new, warnings) = if opts.prepared {
            // computed by a dry run of this update (admission): stored as
            // it is if the object is still the one it was computed from
            if meta::meta_str(&body, "resourceVersion") != old.resource_version().to_string() {
                return Err(StatusError::stale(&info.group_resource(), name));
            }
            (body, Vec::new())
        } else {
            self.updated_object(info, &old, name, body, sub, opts)?
        };
        self.store_update(info, tx, key, name, &old, new, opts, warnings)
    }

    /// The object an update of `old` with `body` stores (status handling,
    /// system metadata, defaults and validation, generation, managed
    /// fields), and its warnings.
    fn updated_object(
        &self,
        info: &ResourceInfo,
        old: &StoredObject,
        name: &str,
        body: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<(Value, Vec<String>), StatusError> {
        let mut body = body;
        check_type_meta(self, info, &mut body)?;
        let given_rv = meta::meta_str(&body, "resourceVersion");
        if !given_rv.is_empty() && given_rv != old.resource_version().to_string() {
            return Err(StatusError::stale(&info.group_resource(), name));
        }
        let old_value = old.value();
        let recorded_fields = opts
            .fields_recorded
            .then(|| meta::metadata(&body).and_then(|m| m.get("managedFields").cloned()));
        let mut new = match sub {
            Subresource::Main | Subresource::Scale => {
                let mut n = body;
                if info.status_subresource {
                    if let Some(m) = n.as_object_mut() {
                        match old_value.get("status") {
                            Some(s) => m.insert("status".into(), s.clone()),
                            None => m.remove("status"),
                        };
                    }
                }
                n
            }
            Subresource::Status => {
                let mut n = old_value.clone();
                if let Some(m) = n.as_object_mut() {
                    match body.get("status") {
                        Some(s) => m.insert("status".into(), s.clone()),
                        None => m.remove("status"),
                    };
                }
                n
            }
        };
        strategy::keep_system_metadata(old_value, &mut new);
        crate::kinds::prepare_for_update(info, old_value, &mut new);
        if let Some(recorded) = recorded_fields {
            match recorded {
                Some(mf) => meta::metadata_mut(&mut new).insert("managedFields".into(), mf),
                None => meta::metadata_mut(&mut new).remove("managedFields"),
            };
        }
        let warnings = default_and_validate(info, &mut new, Some(old_value), opts)?;
        if info.tracks_generation && strategy::spec_changed(old_value, &new) {
            let gen = meta::generation(old_value) + 1;
            meta::metadata_mut(&mut new).insert("generation".into(), json!(gen));
        }
        if info.behavior == Behavior::CustomResourceDefinition
            && sub == Subresource::Main
            && !meta::is_deleting(&new)
        {
            crate::crd::establish(&mut new);
        }
        if !opts.fields_recorded {
            fields::record_update(info, Some(old_value), &mut new, &writer(info, opts, sub));
        }
        Ok((new, warnings))
    }

    /// Stores an updated object (unless nothing changed or it is a dry
    /// run), or removes it when it is terminating and nothing holds it.
    #[allow(clippy::too_many_arguments)]
    fn store_update(
        &self,
        info: &ResourceInfo,
        tx: &mut WriteTxn<'_>,
        key: &str,
        name: &str,
        old: &Arc<StoredObject>,
        mut new: Value,
        opts: &WriteOptions,
        warnings: Vec<String>,
    ) -> Result<WriteResult, StatusError> {
        let result = |object: Arc<StoredObject>, warnings| WriteResult {
            object,
            created: false,
            warnings,
        };
        if meta::is_deleting(&new) && super::delete::can_remove(info, &new) {
            if opts.dry_run {
                return Ok(result(dry_run_object(new, key)?, warnings));
            }
            return match tx.delete(key)? {
                Some(ev) => {
                    self.after_remove(info, &ev.object);
                    Ok(result(ev.object.clone(), warnings))
                }
                None => Err(StatusError::not_found(&info.group_resource(), name)),
            };
        }
        // compare with the old resourceVersion: a no-op update writes nothing
        meta::set_meta_str(
            &mut new,
            "resourceVersion",
            &old.resource_version().to_string(),
        );
        if new == *old.value() {
            return Ok(result(old.clone(), warnings));
        }
        let reserved = self.allocate(info, &mut new, Some(old.value()))?;
        if opts.dry_run {
            self.give_back(reserved);
            return Ok(result(dry_run_object(new, key)?, warnings));
        }
        let ev = match tx.put(key, new) {
            Ok(ev) => ev,
            Err(e) => {
                self.give_back(reserved);
                return Err(e.into());
            }
        };
        self.release(info, old.value(), Some(ev.object.value()));
        self.after_write(info, Some(old), &ev.object);
        Ok(result(ev.object.clone(), warnings))
    }

    /// PATCH: applies a patch of the given type.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn patch(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        body: &[u8],
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<WriteResult, StatusError> {
        if patch_type == PatchType::StrategicMerge && info.behavior == Behavior::CustomResource {
            return Err(strategic_on_custom_resource());
        }
        let events_v1 = info.behavior == Behavior::EventsV1;
        if patch_type == PatchType::Apply {
            if events_v1 {
                let config: Value = serde_yaml::from_slice(body)
                    .map_err(|e| StatusError::bad_request(format!("error decoding YAML: {e}")))?;
                let config = crate::events::accept(&config, false)?;
                let bytes = serde_json::to_vec(&config)
                    .map_err(|e| StatusError::internal(&e.to_string()))?;
                let core = crate::builtin::events();
                return self.apply(&core, namespace, name, &bytes, sub, opts);
            }
            return self.apply(info, namespace, name, body, sub, opts);
        }
        let key = object_key(info, namespace, name);
        let rs = self.resource_store(info);
        let mut tx = rs.write(&self.store);
        let Some(old) = tx.get(&key) else {
            return Err(StatusError::not_found(&info.group_resource(), name));
        };
        // events.k8s.io/v1 patches apply to the Event as that version shows it
        let view = if events_v1 {
            crate::events::from_core(old.value())
        } else {
            old.value().clone()
        };
        let mut patched = patched(info, patch_type, &view, body)?;
        if events_v1 {
            patched = crate::events::accept(&patched, false)?;
            let core = crate::builtin::events();
            return self.update_locked(&core, &mut tx, &key, name, patched, sub, opts);
        }
        self.update_locked(info, &mut tx, &key, name, patched, sub, opts)
    }

    /// Server-side apply: the applied configuration is merged into the live
    /// object (created when missing) and the manager's `Apply` entry in
    /// `managedFields` records what it sets; a change of a field another
    /// manager owns is a 409 conflict unless `force`.
    fn apply(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        name: &str,
        body: &[u8],
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<WriteResult, StatusError> {
        let recorded = WriteOptions {
            fields_recorded: true,
            ..opts.clone()
        };
        let key = object_key(info, namespace, name);
        let rs = self.resource_store(info);
        if rs.get(&key).is_none() {
            if sub == Subresource::Status {
                return Err(StatusError::not_found(&info.group_resource(), name));
            }
            let created = applied(info, name, &json!({}), body, sub, opts)?;
            return self.create(info, namespace, created, &recorded);
        }
        let mut tx = rs.write(&self.store);
        let Some(old) = tx.get(&key) else {
            return Err(StatusError::not_found(&info.group_resource(), name));
        };
        let merged = applied(info, name, old.value(), body, sub, opts)?;
        self.update_locked(info, &mut tx, &key, name, merged, sub, &recorded)
    }

    /// Work that follows a stored create or update.
    pub(crate) fn after_write(
        &self,
        info: &ResourceInfo,
        old: Option<&StoredObject>,
        new: &StoredObject,
    ) {
        match info.behavior {
            Behavior::Deployment => {
                let changed = old
                    .is_none_or(|o| meta::generation(o.value()) != meta::generation(new.value()));
                if changed {
                    self.notify(ControllerMsg::DeploymentChanged {
                        namespace: new.namespace().to_owned(),
                        name: new.name().to_owned(),
                    });
                }
            }
            Behavior::CustomResourceDefinition if !meta::is_deleting(new.value()) => {
                self.register_crd(new.value());
            }
            _ => {}
        }
        self.notify_write(info, old.is_none(), new);
        let owners = meta::owner_uids(new.value());
        if !owners.is_empty() && old.is_none_or(|o| meta::owner_uids(o.value()) != owners) {
            self.notify(ControllerMsg::CheckOwners {
                location: (info.group_resource(), new.key().to_owned()),
            });
        }
        if meta::is_deleting(new.value()) {
            let f = meta::finalizers(new.value());
            if f.iter().any(|x| x == "foregroundDeletion" || x == "orphan") {
                self.notify(ControllerMsg::OwnerDeleting);
            }
        }
    }

    /// Serves a further resource (replacing one at the same
    /// group/version/plural).
    pub(crate) fn register_resource(&self, info: ResourceInfo) {
        self.store.ensure_resource(&info.group_resource());
        self.registry.register(vec![info]);
    }

    /// Registers the resources a CRD serves.
    pub(crate) fn register_crd(&self, crd: &Value) {
        let infos = crate::crd::resource_infos(crd);
        if let Some(first) = infos.first() {
            let (group, resource) = (first.group.clone(), first.resource.clone());
            self.registry.unregister(&group, &resource);
            self.store.ensure_resource(&first.group_resource());
            self.registry.register(infos);
        }
    }
}

/// 415: custom resources take no strategic merge patch.
fn strategic_on_custom_resource() -> StatusError {
    StatusError::new(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
    )
}

/// The object a JSON, merge or strategic merge patch makes of `view`.
pub(crate) fn patched(
    info: &ResourceInfo,
    patch_type: PatchType,
    view: &Value,
    body: &[u8],
) -> Result<Value, StatusError> {
    match patch_type {
        PatchType::Json => patch::json_patch(view, body),
        PatchType::Merge => patch::merge_patch(view, body),
        _ if info.behavior == Behavior::CustomResource => {
            return Err(strategic_on_custom_resource())
        }
        _ => patch::strategic_merge_patch(view, body, crate::builtin::schemas::structural(info)),
    }
    .map_err(|e| patch_error(e, body))
}

/// The object server-side apply of `body` (YAML or JSON) by
/// `opts.field_manager` makes of `live` (`{}` when creating), its
/// `managedFields` recorded; an unpinned apply is pinned to `live`'s
/// resourceVersion.
pub(crate) fn applied(
    info: &ResourceInfo,
    name: &str,
    live: &Value,
    body: &[u8],
    sub: Subresource,
    opts: &WriteOptions,
) -> Result<Value, StatusError> {
    let manager = opts.field_manager.as_deref().unwrap_or("");
    if manager.is_empty() {
        let e = FieldError::required("fieldManager", "is required for apply patch");
        return Err(StatusError::invalid(
            "meta.k8s.io",
            "PatchOptions",
            "",
            &[e],
        ));
    }
    let applied: Value = serde_yaml::from_slice(body)
        .map_err(|e| StatusError::bad_request(format!("error decoding YAML: {e}")))?;
    if !applied.is_object() {
        return Err(StatusError::bad_request("apply patch must be an object"));
    }
    let applied_name = meta::name(&applied);
    if applied_name != name {
        return Err(StatusError::bad_request(format!(
            "the name of the object ({applied_name}) does not match the name on the URL ({name})"
        )));
    }
    let writer = fields::Writer {
        manager,
        ..writer(info, opts, sub)
    };
    let mut merged =
        fields::apply(info, live, &applied, &writer, opts.force).map_err(|e| match e {
            ApplyError::Conflicts(c) => apply_conflict(&c),
            ApplyError::Invalid(msg) => StatusError::internal(&format!(
                "failed to create typed patch object ({}/{}, Kind={}): {msg}",
                info.group, info.version, info.kind
            )),
        })?;
    let live_rv = meta::meta_str(live, "resourceVersion");
    if meta::meta_str(&applied, "resourceVersion").is_empty() && !live_rv.is_empty() {
        let rv = live_rv.to_owned();
        meta::set_meta_str(&mut merged, "resourceVersion", &rv);
    }
    Ok(merged)
}

fn patch_error(e: PatchError, body: &[u8]) -> StatusError {
    match e {
        PatchError::Decode(msg) => StatusError::bad_request(msg),
        PatchError::Apply(msg) => {
            let text = String::from_utf8_lossy(body).into_owned();
            StatusError::invalid(
                "",
                "",
                "",
                &[FieldError::invalid("patch", Value::String(text), msg)],
            )
        }
    }
}
