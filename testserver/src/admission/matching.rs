//! Which webhooks a request calls, as kube-apiserver's `ShouldCallHook`
//! decides: the namespace selector (the namespace's labels; a namespace
//! request's own labels on create and update), the object selector (the
//! new or the old object's labels), then the rules (operations, API
//! groups, versions, resources with `resource/subresource` and `*`
//! patterns, scope), first at the request's version and, with
//! `matchPolicy: Equivalent`, at the other served versions of the same
//! resource (the webhook then gets the object converted to that version).

use super::config::Hook;
use crate::resource::ResourceInfo;
use crate::rest::Core;
use crate::status::{GroupResource, StatusError};
use kcontrol_indexer::k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The admission operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
        }
    }
}

/// What the admission of one request is about.
#[derive(Clone, Debug)]
pub(crate) struct Attributes {
    pub operation: Operation,
    /// The resource at the request's version.
    pub info: Arc<ResourceInfo>,
    /// `""`, `status` or `scale`.
    pub subresource: String,
    /// The namespace (a namespace request's own name).
    pub namespace: String,
    /// The object's name (empty on a create with generateName).
    pub name: String,
    pub dry_run: bool,
    /// `CreateOptions`, `UpdateOptions` or `DeleteOptions`.
    pub options: Value,
}

impl Attributes {
    fn is_namespace_resource(&self) -> bool {
        self.info.group.is_empty() && self.info.resource == "namespaces"
    }
}

/// A webhook to call, and the version of the resource it gets.
#[derive(Clone, Debug)]
pub(crate) struct Invocation {
    pub hook: Arc<Hook>,
    pub info: Arc<ResourceInfo>,
}

fn exact_or_wildcard(items: Option<&Vec<String>>, requested: &str) -> bool {
    items.is_some_and(|v| v.iter().any(|i| i == "*" || i == requested))
}

/// Whether `rule` matches the request at `version` of its resource.
fn rule_matches(rule: &RuleWithOperations, attrs: &Attributes, version: &str) -> bool {
    let scope = match rule.scope.as_deref() {
        None | Some("*") => true,
        Some("Namespaced") => !attrs.is_namespace_resource() && !attrs.namespace.is_empty(),
        Some("Cluster") => attrs.is_namespace_resource() || attrs.namespace.is_empty(),
        Some(_) => false,
    };
    let operation = rule.operations.as_ref().is_some_and(|ops| {
        ops.iter()
            .any(|o| o == "*" || o == attrs.operation.as_str())
    });
    let resource = rule.resources.as_ref().is_some_and(|list| {
        list.iter().any(|r| {
            let (res, sub) = r.split_once('/').unwrap_or((r.as_str(), ""));
            (res == "*" || res == attrs.info.resource) && (sub == "*" || sub == attrs.subresource)
        })
    });
    scope
        && operation
        && exact_or_wildcard(rule.api_groups.as_ref(), &attrs.info.group)
        && exact_or_wildcard(rule.api_versions.as_ref(), version)
        && resource
}

fn labels(obj: Option<&Value>) -> Option<BTreeMap<String, String>> {
    obj.filter(|o| o.is_object()).map(crate::meta::labels)
}

/// The namespace selector's verdict (an error when the namespace the
/// selector needs does not exist: kube answers its 404).
fn namespace_matches(
    core: &Core,
    hook: &Hook,
    attrs: &Attributes,
    object: Option<&Value>,
) -> Result<bool, StatusError> {
    if attrs.namespace.is_empty() && !attrs.is_namespace_resource() {
        return Ok(true);
    }
    if hook.namespace_selector.is_empty() {
        return Ok(true);
    }
    let own = attrs.is_namespace_resource()
        && attrs.subresource.is_empty()
        && matches!(attrs.operation, Operation::Create | Operation::Update);
    let ns_labels = if own {
        labels(object).unwrap_or_default()
    } else {
        let ns = GroupResource::new("", "namespaces");
        let stored = core
            .store
            .resource(&ns)
            .and_then(|rs| rs.get(&attrs.namespace))
            .ok_or_else(|| StatusError::not_found(&ns, &attrs.namespace))?;
        crate::meta::labels(stored.value())
    };
    Ok(hook.namespace_selector.matches(&ns_labels))
}

/// The other served versions of the request's resource (a CRD's).
fn equivalents(core: &Core, attrs: &Attributes) -> Vec<Arc<ResourceInfo>> {
    core.registry
        .all()
        .into_iter()
        .filter(|i| {
            i.group == attrs.info.group
                && i.resource == attrs.info.resource
                && i.version != attrs.info.version
        })
        .collect()
}

/// Whether `hook` is called for this request, and at which version.
pub(crate) fn should_call(
    core: &Core,
    hook: &Arc<Hook>,
    attrs: &Attributes,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<Option<Invocation>, StatusError> {
    let ns = namespace_matches(core, hook, attrs, object);
    if matches!(ns, Ok(false)) {
        return Ok(None);
    }
    if !hook.object_selector.is_empty() {
        let selected =
            |o: Option<&Value>| labels(o).is_some_and(|l| hook.object_selector.matches(&l));
        if !selected(object) && !selected(old) {
            return Ok(None);
        }
    }
    let invocation = |info: Arc<ResourceInfo>| Invocation {
        hook: Arc::clone(hook),
        info,
    };
    let mut found = hook
        .rules
        .iter()
        .any(|r| rule_matches(r, attrs, &attrs.info.version))
        .then(|| invocation(Arc::clone(&attrs.info)));
    if found.is_none() && hook.equivalent {
        let others = equivalents(core, attrs);
        found = hook.rules.iter().find_map(|r| {
            others
                .iter()
                .find(|eq| rule_matches(r, attrs, &eq.version))
                .map(|eq| invocation(Arc::clone(eq)))
        });
    }
    match found {
        Some(i) => ns.map(|_| Some(i)),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(op: Operation, sub: &str, namespace: &str) -> Attributes {
        let mut info = (*crate::builtin::configmaps()).clone();
        info.version = "v1".into();
        Attributes {
            operation: op,
            info: Arc::new(info),
            subresource: sub.into(),
            namespace: namespace.into(),
            name: "x".into(),
            dry_run: false,
            options: Value::Null,
        }
    }

    fn rule(ops: &[&str], resources: &[&str], scope: &str) -> RuleWithOperations {
        let strings = |v: &[&str]| Some(v.iter().map(|s| (*s).to_owned()).collect());
        RuleWithOperations {
            api_groups: strings(&[""]),
            api_versions: strings(&["*"]),
            operations: strings(ops),
            resources: strings(resources),
            scope: Some(scope.into()),
        }
    }

    #[test]
    fn rules_match_as_kube_apiservers_do() {
        let create = attrs(Operation::Create, "", "default");
        assert!(rule_matches(
            &rule(&["CREATE"], &["configmaps"], "*"),
            &create,
            "v1"
        ));
        assert!(rule_matches(
            &rule(&["*"], &["*"], "Namespaced"),
            &create,
            "v1"
        ));
        assert!(!rule_matches(
            &rule(&["*"], &["*"], "Cluster"),
            &create,
            "v1"
        ));
        assert!(!rule_matches(
            &rule(&["UPDATE"], &["configmaps"], "*"),
            &create,
            "v1"
        ));
        // `*` is every resource but no subresource; `*/*` both
        let status = attrs(Operation::Update, "status", "default");
        assert!(!rule_matches(&rule(&["*"], &["*"], "*"), &status, "v1"));
        assert!(rule_matches(&rule(&["*"], &["*/*"], "*"), &status, "v1"));
        assert!(rule_matches(
            &rule(&["*"], &["configmaps/status"], "*"),
            &status,
            "v1"
        ));
        assert!(!rule_matches(
            &rule(&["*"], &["configmaps"], "*"),
            &status,
            "v1"
        ));
    }
}
