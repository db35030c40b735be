//! [`Watched`]: one informer a controller registered a handler on, as the
//! cache-sync barrier reports it while it waits — the kind, the scope and
//! the informer's last list or watch error (a 404 says the API server does
//! not serve the resource), instead of a bare handler name.

use std::sync::Arc;

use kcontrol_indexer::{ApiResource, KubeObject};
use kcontrol_informer::{HandlerRegistration, HasSynced, InformerScope, SharedIndexInformer};

/// A handler registration with what it watches and where its errors are.
pub(crate) struct Watched {
    what: String,
    registration: HandlerRegistration,
    last_error: Box<dyn Fn() -> Option<String> + Send + Sync>,
}

impl Watched {
    pub(crate) fn new<T: KubeObject>(
        what: String,
        registration: HandlerRegistration,
        informer: Arc<SharedIndexInformer<T>>,
    ) -> Self {
        Self {
            what,
            registration,
            last_error: Box::new(move || informer.last_error()),
        }
    }

    /// `Kind.group/version in namespace ns` (or `in all namespaces`,
    /// `cluster-scoped`), with the label selector when there is one.
    pub(crate) fn describe(resource: &ApiResource, scope: &InformerScope) -> String {
        let kind = if resource.group.is_empty() {
            format!("{} ({})", resource.kind, resource.version)
        } else {
            format!(
                "{} ({}/{})",
                resource.kind, resource.group, resource.version
            )
        };
        let place = match (&scope.namespace, resource.namespaced) {
            (_, false) => "cluster-scoped".to_owned(),
            (Some(ns), true) => format!("in namespace {ns}"),
            (None, true) => "in all namespaces".to_owned(),
        };
        match &scope.label_selector {
            Some(selector) => format!("{kind} {place} matching {selector}"),
            None => format!("{kind} {place}"),
        }
    }
}

impl HasSynced for Watched {
    fn has_synced(&self) -> bool {
        self.registration.has_synced()
    }

    fn unsynced(&self) -> Vec<String> {
        if self.has_synced() {
            return Vec::new();
        }
        let why = (self.last_error)()
            .unwrap_or_else(|| "no list answered yet (no error so far)".to_owned());
        vec![format!("{}: {why}", self.what)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_name_the_kind_group_and_scope() {
        let deployments = ApiResource::new("apps", "v1", "Deployment", "deployments", true);
        let nodes = ApiResource::new("", "v1", "Node", "nodes", false);
        let mut scope = InformerScope::all();
        assert_eq!(
            Watched::describe(&deployments, &scope),
            "Deployment (apps/v1) in all namespaces"
        );
        scope.namespace = Some("team".into());
        scope.label_selector = Some("app=web".into());
        assert_eq!(
            Watched::describe(&deployments, &scope),
            "Deployment (apps/v1) in namespace team matching app=web"
        );
        assert_eq!(
            Watched::describe(&nodes, &scope),
            "Node (v1) cluster-scoped matching app=web"
        );
    }
}
