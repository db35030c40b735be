//! The `ObjectReference` an Event points at (`involvedObject`), built from
//! any typed object.

use k8s_openapi::api::core::v1::ObjectReference;
use kcontrol_indexer::TypedResource;

/// A reference to `obj` as an Event's `involvedObject` names it: apiVersion,
/// kind, namespace, name, uid and resourceVersion (client-go's
/// `reference.GetReference`).
///
/// ```
/// use k8s_openapi::api::apps::v1::Deployment;
/// use kcontrol_client::events::object_reference;
/// use kcontrol_indexer::Object;
///
/// let mut deploy = Deployment::default();
/// deploy.meta_mut().name = Some("web".into());
/// deploy.meta_mut().namespace = Some("prod".into());
/// let reference = object_reference(&deploy);
/// assert_eq!(reference.api_version.as_deref(), Some("apps/v1"));
/// assert_eq!(reference.kind.as_deref(), Some("Deployment"));
/// assert_eq!(reference.name.as_deref(), Some("web"));
/// ```
pub fn object_reference<K: TypedResource>(obj: &K) -> ObjectReference {
    let resource = K::api_resource();
    ObjectReference {
        api_version: Some(resource.api_version().into_owned()),
        kind: Some(resource.kind.into_owned()),
        name: obj.name().map(str::to_owned),
        namespace: obj.namespace().map(str::to_owned),
        uid: obj.uid().map(str::to_owned),
        resource_version: obj.resource_version().map(str::to_owned),
        field_path: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use kcontrol_indexer::Object;

    #[test]
    fn references_carry_identity_and_version() {
        let mut cm = ConfigMap::default();
        cm.meta_mut().name = Some("a".into());
        cm.meta_mut().namespace = Some("ns".into());
        cm.meta_mut().uid = Some("u-1".into());
        cm.meta_mut().resource_version = Some("42".into());
        let r = object_reference(&cm);
        assert_eq!(r.api_version.as_deref(), Some("v1"));
        assert_eq!(r.kind.as_deref(), Some("ConfigMap"));
        assert_eq!(r.namespace.as_deref(), Some("ns"));
        assert_eq!(r.uid.as_deref(), Some("u-1"));
        assert_eq!(r.resource_version.as_deref(), Some("42"));

        let mut ns = Namespace::default();
        ns.meta_mut().name = Some("team".into());
        assert_eq!(object_reference(&ns).namespace, None);
    }
}
