//! Field management as kube-apiserver does it for server-side apply:
//! `metadata.managedFields` records, per manager and operation, the set of
//! fields it owns. Every write records it: creates, updates and patches as
//! `Update` entries (a manager takes the fields it changed from whoever
//! owned them), applies as `Apply` entries (a change of a field another
//! manager owns is a conflict unless forced; fields an applier stops
//! applying are removed when no one else owns them).

mod set;
mod walk;

pub(crate) use set::{path_string, FieldSet};
pub(crate) use walk::Ctx;

use crate::meta;
use crate::resource::{Behavior, ResourceInfo};
use serde_json::{json, Value};

/// At most this many `Update` entries; older ones merge into
/// [`ANCIENT_CHANGES`] (kube-apiserver's cap).
const MAX_UPDATE_MANAGERS: usize = 10;

/// The manager the oldest `Update` entries merge into, per apiVersion.
const ANCIENT_CHANGES: &str = "ancient-changes";

/// kube-apiserver's limit on `fieldManager`.
pub(crate) const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// `Apply` or `Update`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Operation {
    /// Server-side apply.
    Apply,
    /// Any other write.
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Self::Apply => "Apply",
            Self::Update => "Update",
        }
    }
}

/// Who writes: the manager and what it writes through.
#[derive(Clone, Debug)]
pub(crate) struct Writer<'a> {
    /// The field manager.
    pub manager: &'a str,
    /// The apiVersion of the request.
    pub api_version: String,
    /// `status`, or empty for the main resource.
    pub subresource: &'a str,
}

/// One `managedFields` entry.
#[derive(Clone, Debug, PartialEq)]
struct Entry {
    manager: String,
    operation: Operation,
    api_version: String,
    time: Option<String>,
    subresource: String,
    fields: FieldSet,
}

impl Entry {
    fn same_identity(&self, manager: &str, op: Operation, api_version: &str, sub: &str) -> bool {
        self.manager == manager
            && self.operation == op
            && self.subresource == sub
            && (op == Operation::Apply || self.api_version == api_version)
    }

    /// The manager as conflict messages name it.
    fn display(&self) -> String {
        let mut s = crate::status::go_quote(&self.manager);
        if !self.subresource.is_empty() {
            s = format!(
                "{s} with subresource {}",
                crate::status::go_quote(&self.subresource)
            );
        }
        if self.operation == Operation::Update {
            s = format!("{s} using {}", self.api_version);
        }
        s
    }

    fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert("operation".into(), json!(self.operation.as_str()));
        m.insert("apiVersion".into(), json!(self.api_version));
        if let Some(t) = &self.time {
            m.insert("time".into(), json!(t));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if !self.subresource.is_empty() {
            m.insert("subresource".into(), json!(self.subresource));
        }
        Value::Object(m)
    }

    fn from_json(v: &Value) -> Option<Entry> {
        let operation = match v.get("operation")?.as_str()? {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return None,
        };
        if v.get("fieldsType").and_then(Value::as_str) != Some("FieldsV1") {
            return None;
        }
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        Some(Entry {
            manager: s("manager").unwrap_or_default(),
            operation,
            api_version: s("apiVersion").unwrap_or_default(),
            time: s("time"),
            subresource: s("subresource").unwrap_or_default(),
            fields: FieldSet::from_fields_v1(v.get("fieldsV1")?).ok()?,
        })
    }
}

/// Decodes `managedFields`; `None` when any entry is malformed.
fn decode(v: Option<&Value>) -> Option<Vec<Entry>> {
    match v {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::Array(a)) => a.iter().map(Entry::from_json).collect(),
        Some(_) => None,
    }
}

/// Merges the oldest `Update` entries, per apiVersion, into an
/// `ancient-changes` entry until at most [`MAX_UPDATE_MANAGERS`] remain.
fn cap_updates(entries: &mut Vec<Entry>) {
    let mut updaters: Vec<usize> = (0..entries.len())
        .filter(|&i| {
            entries
                .get(i)
                .is_some_and(|e| e.operation == Operation::Update)
        })
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    updaters.sort_by(|&a, &b| {
        let key = |i: usize| entries.get(i).map(|e| (e.time.clone(), e.manager.clone()));
        key(a).cmp(&key(b))
    });
    let mut remaining = updaters.len();
    let mut first_of_version: std::collections::HashMap<String, usize> = Default::default();
    let mut merged_away = Vec::new();
    for i in updaters {
        if remaining <= MAX_UPDATE_MANAGERS {
            break;
        }
        let Some(e) = entries.get(i).cloned() else {
            continue;
        };
        let bucket = entries.iter().position(|b| {
            b.manager == ANCIENT_CHANGES
                && b.operation == Operation::Update
                && b.api_version == e.api_version
                && b.subresource.is_empty()
        });
        match (first_of_version.get(&e.api_version).copied(), bucket) {
            (Some(_), Some(b)) if b != i => {
                if let Some(target) = entries.get_mut(b) {
                    target.fields.union_with(&e.fields);
                    target.time = e.time.clone();
                }
                merged_away.push(i);
                remaining -= 1;
            }
            (Some(first), _) => {
                // the first of this version becomes the bucket
                if let Some(f) = entries.get_mut(first) {
                    f.manager = ANCIENT_CHANGES.to_owned();
                    f.subresource.clear();
                    f.fields.union_with(&e.fields);
                    f.time = e.time.clone();
                }
                merged_away.push(i);
                remaining -= 1;
            }
            (None, _) => {
                first_of_version.insert(e.api_version.clone(), i);
            }
        }
    }
    merged_away.sort_unstable();
    for i in merged_away.into_iter().rev() {
        if i < entries.len() {
            entries.remove(i);
        }
    }
}

/// Encodes entries in kube's order (Apply before Update, then by time,
/// manager, apiVersion, subresource), dropping empty ones.
fn encode(mut entries: Vec<Entry>) -> Value {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|a, b| {
        (
            a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    Value::Array(entries.iter().map(Entry::to_json).collect())
}

fn managed_fields(obj: &Value) -> Option<&Value> {
    meta::metadata(obj).and_then(|m| m.get("managedFields"))
}

fn set_managed_fields(obj: &mut Value, v: Value) {
    let m = meta::metadata_mut(obj);
    if v.is_null() || v.as_array().is_some_and(Vec::is_empty) {
        m.remove("managedFields");
    } else {
        m.insert("managedFields".into(), v);
    }
}

/// The walk context of a resource: a custom resource's schema, or a
/// built-in kind's structural schema (its merge rules).
fn ctx(info: &ResourceInfo) -> Ctx<'_> {
    let custom = info.behavior == Behavior::CustomResource;
    Ctx {
        custom,
        schema: if custom {
            info.schema.as_deref()
        } else {
            crate::builtin::schemas::structural(info)
        },
    }
}

/// Drops what no manager owns: type and system metadata, and the part of
/// the object the other subresource writes.
fn strip(info: &ResourceInfo, sub: &str, set: &FieldSet) -> FieldSet {
    let mut s = if sub == "status" {
        set.only_subtree(&["f:status".to_owned()])
    } else {
        set.clone()
    };
    if set.is_empty() {
        return s;
    }
    if sub != "status" && info.status_subresource {
        s.remove_subtree(&["f:status".to_owned()]);
    }
    for f in ["f:apiVersion", "f:kind"] {
        s.remove_subtree(&[f.to_owned()]);
    }
    let metadata = "f:metadata".to_owned();
    if s.owns_at_or_below(std::slice::from_ref(&metadata)) {
        s.remove_subtree(&[metadata.clone(), "f:managedFields".to_owned()]);
        s.unset(std::slice::from_ref(&metadata));
        for f in [
            "f:name",
            "f:namespace",
            "f:creationTimestamp",
            "f:selfLink",
            "f:uid",
            "f:generation",
            "f:resourceVersion",
            "f:deletionTimestamp",
            "f:deletionGracePeriodSeconds",
        ] {
            s.unset(&[metadata.clone(), f.to_owned()]);
        }
        if !s.owns_at_or_below(std::slice::from_ref(&metadata)) {
            s.remove_subtree(std::slice::from_ref(&metadata));
        }
    }
    s
}

/// The managers that owned fields before this write: the request's
/// `managedFields` when it sets them (`[]` resets), else the stored ones.
fn base_entries(old: Option<&Value>, new: &Value, sub: &str) -> Vec<Entry> {
    let from_old = || {
        old.and_then(|o| decode(managed_fields(o)))
            .unwrap_or_default()
    };
    if !sub.is_empty() {
        return from_old();
    }
    match managed_fields(new) {
        Some(Value::Array(a)) if a.is_empty() => Vec::new(),
        Some(Value::Array(a)) if a.len() == 1 && a[0].as_object().is_some_and(|m| m.is_empty()) => {
            Vec::new()
        }
        given => match decode(given) {
            Some(e) if !e.is_empty() && given != old.and_then(managed_fields) => e,
            _ => from_old(),
        },
    }
}

/// Records an `Update` by `writer` of `old` (none on create) into `new`'s
/// `managedFields`: the writer takes every field it added or changed, the
/// others lose those and the removed ones.
pub(crate) fn record_update(
    info: &ResourceInfo,
    old: Option<&Value>,
    new: &mut Value,
    writer: &Writer<'_>,
) {
    let empty = json!({});
    let cmp = walk::compare(old.unwrap_or(&empty), new, ctx(info));
    let changed = strip(info, writer.subresource, &cmp.changed());
    let removed = strip(info, writer.subresource, &cmp.removed);
    if changed.is_empty() && removed.is_empty() {
        // nothing changed: managedFields stay as stored, unless the request
        // sets other ones (or resets them)
        if let Some(o) = old {
            let stored = managed_fields(o);
            let given = managed_fields(new);
            let keep = !writer.subresource.is_empty()
                || given == stored
                || given.is_none()
                || decode(given).is_none();
            if keep {
                let v = stored.cloned().unwrap_or(Value::Null);
                set_managed_fields(new, v);
                return;
            }
        }
    }
    let mut entries = base_entries(old, new, writer.subresource);
    for e in &mut entries {
        e.fields = e.fields.difference(&changed).difference(&removed);
    }
    if !changed.is_empty() {
        let now = crate::timeutil::now_rfc3339();
        match entries.iter_mut().find(|e| {
            e.same_identity(
                writer.manager,
                Operation::Update,
                &writer.api_version,
                writer.subresource,
            )
        }) {
            Some(e) => {
                e.fields.union_with(&changed);
                e.time = Some(now);
            }
            None => entries.push(Entry {
                manager: writer.manager.to_owned(),
                operation: Operation::Update,
                api_version: writer.api_version.clone(),
                time: Some(now),
                subresource: writer.subresource.to_owned(),
                fields: changed,
            }),
        }
    }
    entries.retain(|e| !e.fields.is_empty());
    cap_updates(&mut entries);
    set_managed_fields(new, encode(entries));
}

/// One field another manager owns and an apply would change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Conflict {
    /// The owner, as kube prints it (`"mgr"`, `"mgr" using apps/v1`).
    pub manager: String,
    /// The field, as kube prints it (`.spec.replicas`).
    pub field: String,
}

/// Why an apply failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApplyError {
    /// Fields owned by other managers would change.
    #[error("{} conflicts", .0.len())]
    Conflicts(Vec<Conflict>),
    /// The configuration cannot be tracked (a list item without its key).
    #[error("{0}")]
    Invalid(String),
}

/// Server-side apply of `config` by `writer` onto `live` (`{}` when the
/// object does not exist): the merged object with its new
/// `managedFields`, or the conflicts.
pub(crate) fn apply(
    info: &ResourceInfo,
    live: &Value,
    config: &Value,
    writer: &Writer<'_>,
    force: bool,
) -> Result<Value, ApplyError> {
    let ctx = ctx(info);
    let mut entries = decode(managed_fields(live)).unwrap_or_default();
    let applied = strip(
        info,
        writer.subresource,
        &walk::set_of(config, ctx).map_err(ApplyError::Invalid)?,
    );
    let mut merged = live.clone();
    meta::remove_meta(&mut merged, "managedFields");
    let mut cfg = config.clone();
    meta::remove_meta(&mut cfg, "managedFields");
    walk::merge(&mut merged, &cfg, ctx);
    let mine = entries
        .iter()
        .position(|e| e.same_identity(writer.manager, Operation::Apply, "", writer.subresource));
    remove_unapplied(&mut merged, &entries, mine, &applied);
    let cmp = walk::compare(live, &merged, ctx);
    let changed = strip(info, writer.subresource, &cmp.changed());
    let removed = strip(info, writer.subresource, &cmp.removed);
    if !force {
        check_conflicts(info, live, &entries, mine, &changed, writer)?;
    }
    for (i, e) in entries.iter_mut().enumerate() {
        if Some(i) != mine {
            e.fields = e.fields.difference(&changed).difference(&removed);
        }
    }
    let now = (!cmp.is_same() || mine.is_none()).then(crate::timeutil::now_rfc3339);
    record_apply(&mut entries, mine, applied, writer, now);
    entries.retain(|e| !e.fields.is_empty());
    cap_updates(&mut entries);
    set_managed_fields(&mut merged, encode(entries));
    Ok(merged)
}

/// Removes from `merged` what the applier (entry `mine`) owned before and
/// applies no more, unless someone else (or the new configuration,
/// `applied`) owns it.
fn remove_unapplied(
    merged: &mut Value,
    entries: &[Entry],
    mine: Option<usize>,
    applied: &FieldSet,
) {
    let Some(last) = mine.and_then(|i| entries.get(i)).map(|e| e.fields.clone()) else {
        return;
    };
    let mut keep = applied.clone();
    for (i, e) in entries.iter().enumerate() {
        if Some(i) != mine {
            keep.union_with(&e.fields);
        }
    }
    for path in last.difference(&keep).paths() {
        if !keep.owns_at_or_below(&path) {
            walk::remove_path(merged, &path, &keep);
        }
    }
}

/// The conflicts of an unforced apply: fields in `changed` that other
/// managers own (kubectl takes over what its client-side apply set).
fn check_conflicts(
    info: &ResourceInfo,
    live: &Value,
    entries: &[Entry],
    mine: Option<usize>,
    changed: &FieldSet,
    writer: &Writer<'_>,
) -> Result<(), ApplyError> {
    let mut conflicts = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if Some(i) == mine {
            continue;
        }
        for path in e.fields.intersection(changed).paths() {
            conflicts.push((e.display(), path));
        }
    }
    if !conflicts.is_empty() && writer.manager == "kubectl" {
        // kubectl's server-side apply takes over what its client-side apply
        // set (and still matches the live object) without conflicts
        if let Some(allowed) = last_applied_fields(info, live) {
            conflicts.retain(|(_, path)| !allowed.contains(path));
        }
    }
    if conflicts.is_empty() {
        return Ok(());
    }
    conflicts.sort();
    Err(ApplyError::Conflicts(
        conflicts
            .into_iter()
            .map(|(manager, path)| Conflict {
                manager,
                field: path_string(&path),
            })
            .collect(),
    ))
}

/// Gives the applier's entry (`mine`, or a new one) the `applied` fields,
/// the writer's apiVersion, and `now` when the apply changed something.
fn record_apply(
    entries: &mut Vec<Entry>,
    mine: Option<usize>,
    applied: FieldSet,
    writer: &Writer<'_>,
    now: Option<String>,
) {
    match mine.and_then(|i| entries.get_mut(i)) {
        Some(e) => {
            e.fields = applied;
            e.api_version.clone_from(&writer.api_version);
            if now.is_some() {
                e.time = now;
            }
        }
        None => entries.push(Entry {
            manager: writer.manager.to_owned(),
            operation: Operation::Apply,
            api_version: writer.api_version.clone(),
            time: now,
            subresource: writer.subresource.to_owned(),
            fields: applied,
        }),
    }
}

/// The fields of the client-side apply annotation that still have their
/// applied values in the live object.
fn last_applied_fields(info: &ResourceInfo, live: &Value) -> Option<FieldSet> {
    let annotations = meta::annotations(live);
    let text = annotations.get("kubectl.kubernetes.io/last-applied-configuration")?;
    let last: Value = serde_json::from_str(text).ok()?;
    if last.get("apiVersion").and_then(Value::as_str) != Some(info.api_version().as_str()) {
        return None;
    }
    let set = walk::set_of(&last, ctx(info)).ok()?;
    let cmp = walk::compare(&last, live, ctx(info));
    Some(
        set.difference(&cmp.modified)
            .difference(&cmp.added)
            .difference(&cmp.removed),
    )
}

/// The default field manager of a non-apply write: the User-Agent up to
/// its first `/`, printable characters only, at most 128 bytes.
pub(crate) fn manager_from_user_agent(ua: &str) -> String {
    let prefix = ua.split('/').next().unwrap_or("");
    let mut out = String::new();
    for c in prefix.chars().filter(|c| !c.is_control()) {
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

/// kube-apiserver's checks of `fieldManager`.
pub(crate) fn validate_field_manager(manager: &str) -> Vec<crate::status::FieldError> {
    let mut errs = Vec::new();
    if manager.len() > FIELD_MANAGER_MAX_LENGTH {
        errs.push(crate::status::FieldError {
            kind: crate::status::FieldErrorKind::TooLong,
            field: "fieldManager".into(),
            value: None,
            detail: format!("may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes"),
        });
    }
    for (i, c) in manager.chars().enumerate() {
        if c.is_control() {
            errs.push(crate::status::FieldError::invalid(
                "fieldManager",
                json!(manager),
                format!("invalid character U+{:04X} (at position {i})", c as u32),
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests;
