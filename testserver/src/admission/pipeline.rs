//! Writes through admission, in kube-apiserver's order: the object the
//! request makes (the body; the live object with the patch or the apply
//! configuration merged, at the request's version) goes through the
//! mutating webhooks; it is converted to the storage version (through the
//! CRD's conversion webhook when it has one); the storage's own defaults
//! and validation run in a dry run of the write (so a create gets its
//! name, uid and timestamps, an update its generation); the validating
//! webhooks see that final object (at the request's version); then
//! exactly that object is stored, an update only if the live object is
//! still the one it was computed from, otherwise the whole write starts
//! over (kube's `GuaranteedUpdate`), unless the request pinned a
//! resourceVersion. The webhooks' warnings join the answer's.

use super::convert;
use super::dispatch;
use super::matching::{Attributes, Operation};
use super::Admission;
use crate::meta;
use crate::patch::PatchType;
use crate::resource::{Behavior, ResourceInfo};
use crate::rest::{
    applied, patched, Core, DeleteOptions, DeleteOutcome, Subresource, WriteOptions, WriteResult,
};
use crate::status::StatusError;
use crate::store::StoredObject;
use serde_json::{json, Value};
use std::sync::Arc;

/// Attempts of an update that keeps meeting concurrent writes.
const ATTEMPTS: usize = 16;

/// What an update does to the live object.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Change<'a> {
    /// PUT of a whole object.
    Replace(&'a Value),
    /// PATCH of a type (apply included).
    Patch(PatchType, &'a [u8]),
}

/// The resource objects are stored as (and dry runs validate): the
/// storage version when a conversion webhook stands between, core/v1 for
/// events.k8s.io Events, else the request's.
fn storage_info(
    core: &Core,
    info: &Arc<ResourceInfo>,
    webhook: bool,
) -> Result<Arc<ResourceInfo>, StatusError> {
    if info.behavior == Behavior::EventsV1 {
        return Ok(crate::builtin::events());
    }
    if !webhook {
        return Ok(Arc::clone(info));
    }
    core.registry
        .get(&info.group, &info.storage_version, &info.resource)
        .ok_or_else(|| {
            StatusError::internal(&format!(
                "the storage version {} of {} is not served",
                info.storage_version,
                info.group_resource()
            ))
        })
}

impl Admission {
    /// A stored object as the request's version shows it.
    pub(crate) async fn view(
        &self,
        core: &Core,
        info: &ResourceInfo,
        stored: &Value,
    ) -> Result<Value, StatusError> {
        if info.behavior == Behavior::EventsV1 {
            return Ok(crate::events::from_core(stored));
        }
        if info.is_storage_version() {
            return Ok(stored.clone());
        }
        let mut out = convert::convert(
            core,
            &self.services,
            info,
            vec![stored.clone()],
            &info.version,
        )
        .await?;
        Ok(out.pop().unwrap_or(Value::Null))
    }

    /// An object at the request's version as stored.
    async fn storage_form(
        &self,
        core: &Core,
        info: &ResourceInfo,
        object: Value,
        webhook: bool,
        create: bool,
    ) -> Result<Value, StatusError> {
        if info.behavior == Behavior::EventsV1 {
            return crate::events::accept(&object, create);
        }
        if !webhook {
            return Ok(object);
        }
        let mut out = convert::convert(
            core,
            &self.services,
            info,
            vec![object],
            &info.storage_version,
        )
        .await?;
        Ok(out.pop().unwrap_or(Value::Null))
    }

    /// A write's answer at the request's version, the webhooks' warnings
    /// first.
    async fn answer(
        &self,
        core: &Core,
        info: &ResourceInfo,
        mut result: WriteResult,
        warnings: Vec<String>,
    ) -> Result<WriteResult, StatusError> {
        if convert::needs_webhook(core, info) {
            let value = self.view(core, info, result.object.value()).await?;
            let stored = StoredObject::detached(
                value,
                result.object.resource_version(),
                result.object.key().to_owned(),
            )
            .map_err(|e| StatusError::internal(&e.to_string()))?;
            result.object = Arc::new(stored);
        }
        let mut all = warnings;
        all.append(&mut result.warnings);
        result.warnings = all;
        Ok(result)
    }

    /// POST through admission.
    pub(crate) async fn create(
        &self,
        core: &Core,
        info: &Arc<ResourceInfo>,
        namespace: &str,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<WriteResult, StatusError> {
        let webhook = convert::needs_webhook(core, info);
        if !webhook && !dispatch::any_hooks(core) {
            return core.create(info, namespace, body, opts);
        }
        let mut object = body;
        admitted_create_object(info, namespace, &mut object)?;
        let mut attrs = attributes(
            Operation::Create,
            info,
            Subresource::Main,
            namespace,
            meta::name(&object),
            opts.dry_run,
        );
        let (object, mut warnings) =
            dispatch::mutate(core, &self.services, &attrs, Some(object), None).await?;
        let object = self
            .storage_form(core, info, object.unwrap_or(Value::Null), webhook, true)
            .await?;
        let storage = storage_info(core, info, webhook)?;
        let dry = WriteOptions {
            dry_run: true,
            ..opts.clone()
        };
        let prepared = core.create(&storage, namespace, object, &dry)?;
        let final_view = self.view(core, info, prepared.object.value()).await?;
        attrs.name = meta::name(&final_view).to_owned();
        warnings.extend(
            dispatch::validate(core, &self.services, &attrs, Some(&final_view), None).await?,
        );
        let result = if opts.dry_run {
            prepared
        } else {
            let commit = WriteOptions {
                prepared: true,
                ..opts.clone()
            };
            let mut r = core.create(
                &storage,
                namespace,
                prepared.object.value().clone(),
                &commit,
            )?;
            r.warnings = prepared.warnings;
            r
        };
        self.answer(core, info, result, warnings).await
    }

    /// PUT or PATCH (apply included) through admission; an apply, or a PUT
    /// of a resource that allows it, of a missing object creates it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn update(
        &self,
        core: &Core,
        info: &Arc<ResourceInfo>,
        namespace: &str,
        name: &str,
        change: Change<'_>,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<WriteResult, StatusError> {
        let webhook = convert::needs_webhook(core, info);
        if !webhook && !dispatch::any_hooks(core) {
            return match change {
                Change::Replace(body) => {
                    core.update(info, namespace, name, body.clone(), sub, opts)
                }
                Change::Patch(t, body) => core.patch(info, namespace, name, t, body, sub, opts),
            };
        }
        for _ in 0..ATTEMPTS {
            let live = match core.get(info, namespace, name) {
                Ok(live) => live,
                Err(e) if e.code == 404 && sub == Subresource::Main => {
                    return match change {
                        Change::Patch(PatchType::Apply, body) => {
                            let created = applied(info, name, &json!({}), body, sub, opts)?;
                            let recorded = WriteOptions {
                                fields_recorded: true,
                                ..opts.clone()
                            };
                            self.create(core, info, namespace, created, &recorded).await
                        }
                        Change::Replace(body) if info.allow_create_on_update => {
                            self.create(core, info, namespace, body.clone(), opts).await
                        }
                        _ => Err(e),
                    };
                }
                Err(e) => return Err(e),
            };
            match self
                .update_once(core, info, &live, change, sub, opts, webhook)
                .await
            {
                Err(Retry::Again) => continue,
                Err(Retry::Fail(e)) => return Err(e),
                Ok(r) => return Ok(r),
            }
        }
        Err(StatusError::conflict(
            &info.group_resource(),
            name,
            "the object kept changing while admission ran; please apply your changes to the latest version and try again",
        ))
    }

    /// One attempt of an update of `live`.
    #[allow(clippy::too_many_arguments)]
    async fn update_once(
        &self,
        core: &Core,
        info: &Arc<ResourceInfo>,
        live: &StoredObject,
        change: Change<'_>,
        sub: Subresource,
        opts: &WriteOptions,
        webhook: bool,
    ) -> Result<WriteResult, Retry> {
        let (namespace, name) = (live.namespace(), live.name());
        let old_view = self.view(core, info, live.value()).await?;
        let live_rv = live.resource_version().to_string();
        let (candidate, opts) =
            update_candidate(info, name, &old_view, &live_rv, change, sub, opts)?;
        // a conflict is retried unless the request pinned another version
        let retryable = meta::meta_str(&candidate, "resourceVersion") == live_rv;
        let retry = |e: StatusError| {
            if e.code == 409 && retryable {
                Retry::Again
            } else {
                Retry::Fail(e)
            }
        };
        let attrs = attributes(Operation::Update, info, sub, namespace, name, opts.dry_run);
        let (object, mut warnings) = dispatch::mutate(
            core,
            &self.services,
            &attrs,
            Some(candidate),
            Some(&old_view),
        )
        .await?;
        let mut object = self
            .storage_form(core, info, object.unwrap_or(Value::Null), webhook, false)
            .await?;
        if retryable && object.is_object() {
            meta::set_meta_str(&mut object, "resourceVersion", &live_rv);
        }
        let storage = storage_info(core, info, webhook)?;
        let dry = WriteOptions {
            dry_run: true,
            ..opts.clone()
        };
        let prepared = core
            .update(&storage, namespace, name, object, sub, &dry)
            .map_err(retry)?;
        let final_view = self.view(core, info, prepared.object.value()).await?;
        warnings.extend(
            dispatch::validate(
                core,
                &self.services,
                &attrs,
                Some(&final_view),
                Some(&old_view),
            )
            .await?,
        );
        let result = if opts.dry_run {
            prepared
        } else {
            let commit = WriteOptions {
                prepared: true,
                ..opts.clone()
            };
            let mut value = prepared.object.value().clone();
            meta::set_meta_str(&mut value, "resourceVersion", &live_rv);
            let mut r = core
                .update(&storage, namespace, name, value, sub, &commit)
                .map_err(retry)?;
            r.warnings = prepared.warnings;
            r
        };
        Ok(self.answer(core, info, result, warnings).await?)
    }

    /// DELETE through admission: the mutating webhooks are told (without
    /// an object), the validating ones get the live object as `oldObject`;
    /// the delete then applies to that very version of it.
    pub(crate) async fn delete(
        &self,
        core: &Core,
        info: &Arc<ResourceInfo>,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<DeleteOutcome, StatusError> {
        let webhook = convert::needs_webhook(core, info);
        if !dispatch::any_hooks(core) {
            let outcome = core.delete(info, namespace, name, opts)?;
            return if webhook {
                self.outcome_view(core, info, outcome).await
            } else {
                Ok(outcome)
            };
        }
        let attrs = attributes(
            Operation::Delete,
            info,
            Subresource::Main,
            namespace,
            name,
            opts.dry_run,
        );
        for _ in 0..ATTEMPTS {
            let live = core.get(info, namespace, name)?;
            let old_view = self.view(core, info, live.value()).await?;
            dispatch::mutate(core, &self.services, &attrs, None, None).await?;
            dispatch::validate(core, &self.services, &attrs, None, Some(&old_view)).await?;
            let pinned = opts
                .precondition_rv
                .as_deref()
                .is_some_and(|r| !r.is_empty());
            let mut at_live = opts.clone();
            at_live.precondition_rv = Some(live.resource_version().to_string());
            match core.delete(info, namespace, name, if pinned { opts } else { &at_live }) {
                Err(e) if e.code == 409 && !pinned => continue,
                Err(e) => return Err(e),
                Ok(outcome) if webhook => return self.outcome_view(core, info, outcome).await,
                Ok(outcome) => return Ok(outcome),
            }
        }
        Err(StatusError::conflict(
            &info.group_resource(),
            name,
            "the object kept changing while admission ran",
        ))
    }

    /// A delete's answer at the request's version.
    async fn outcome_view(
        &self,
        core: &Core,
        info: &ResourceInfo,
        outcome: DeleteOutcome,
    ) -> Result<DeleteOutcome, StatusError> {
        let convert = |o: Arc<StoredObject>| async move {
            let value = self.view(core, info, o.value()).await?;
            StoredObject::detached(value, o.resource_version(), o.key().to_owned())
                .map(Arc::new)
                .map_err(|e| StatusError::internal(&e.to_string()))
        };
        Ok(match outcome {
            DeleteOutcome::Deleted(o) => DeleteOutcome::Deleted(convert(o).await?),
            DeleteOutcome::Pending(o) => DeleteOutcome::Pending(convert(o).await?),
        })
    }

    /// DELETE of a collection through admission: each selected object is
    /// admitted and deleted on its own.
    pub(crate) async fn delete_collection(
        &self,
        core: &Core,
        info: &Arc<ResourceInfo>,
        namespace: Option<&str>,
        filter: &crate::selector::Filter,
        opts: &DeleteOptions,
    ) -> Result<Vec<Arc<StoredObject>>, StatusError> {
        if !dispatch::any_hooks(core) && !convert::needs_webhook(core, info) {
            return core.delete_collection(info, namespace, filter, opts);
        }
        let prefix = namespace
            .filter(|_| info.namespaced)
            .map(|n| format!("{n}/"))
            .unwrap_or_default();
        let (items, _, _) = core.resource_store(info).snapshot(&core.store, &prefix);
        let mut out = Vec::new();
        for obj in items.iter().filter(|o| filter.matches(o)) {
            match self
                .delete(core, info, obj.namespace(), obj.name(), opts)
                .await
            {
                Ok(DeleteOutcome::Deleted(o) | DeleteOutcome::Pending(o)) => out.push(o),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

/// An update attempt's failure: start over, or answer.
enum Retry {
    Again,
    Fail(StatusError),
}

/// What an update asks the object to become, before admission: the body of
/// a replace (at the live resourceVersion unless it names one), or the
/// live object (`old_view`) patched or applied to. Applying records its
/// own managed fields.
fn update_candidate(
    info: &ResourceInfo,
    name: &str,
    old_view: &Value,
    live_rv: &str,
    change: Change<'_>,
    sub: Subresource,
    opts: &WriteOptions,
) -> Result<(Value, WriteOptions), StatusError> {
    Ok(match change {
        Change::Replace(body) => {
            let mut c = body.clone();
            if meta::meta_str(&c, "resourceVersion").is_empty() && c.is_object() {
                meta::set_meta_str(&mut c, "resourceVersion", live_rv);
            }
            (c, opts.clone())
        }
        Change::Patch(PatchType::Apply, body) => {
            let c = applied(info, name, old_view, body, sub, opts)?;
            (
                c,
                WriteOptions {
                    fields_recorded: true,
                    ..opts.clone()
                },
            )
        }
        Change::Patch(t, body) => (patched(info, t, old_view, body)?, opts.clone()),
    })
}

impl From<StatusError> for Retry {
    fn from(e: StatusError) -> Self {
        Self::Fail(e)
    }
}

/// The attributes of a request.
fn attributes(
    op: Operation,
    info: &Arc<ResourceInfo>,
    sub: Subresource,
    namespace: &str,
    name: &str,
    dry_run: bool,
) -> Attributes {
    let namespace = if info.group.is_empty() && info.resource == "namespaces" {
        name
    } else {
        namespace
    };
    let kind = op.options_kind();
    let mut options = json!({"apiVersion": "meta.k8s.io/v1", "kind": kind});
    if dry_run {
        options["dryRun"] = json!(["All"]);
    }
    Attributes {
        operation: op,
        info: Arc::clone(info),
        subresource: match sub {
            Subresource::Main => String::new(),
            Subresource::Status => "status".into(),
            Subresource::Scale => "scale".into(),
        },
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        dry_run,
        options,
    }
}

/// The object of a create as admission sees it: its type, namespace, and
/// no system fields (kube wipes them before admission).
fn admitted_create_object(
    info: &ResourceInfo,
    namespace: &str,
    obj: &mut Value,
) -> Result<(), StatusError> {
    if !obj.is_object() {
        return Err(StatusError::bad_request(
            "the body of the request must be a JSON or YAML object",
        ));
    }
    let (api_version, kind) = meta::type_meta(obj);
    let (api_version, kind) = (api_version.is_empty(), kind.is_empty());
    let m = meta::ensure_object(obj);
    if api_version {
        m.insert("apiVersion".into(), json!(info.api_version()));
    }
    if kind {
        m.insert("kind".into(), json!(info.kind));
    }
    if info.namespaced && meta::namespace(obj).is_empty() {
        meta::set_meta_str(obj, "namespace", namespace);
    }
    let m = meta::metadata_mut(obj);
    for f in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        m.remove(f);
    }
    Ok(())
}
