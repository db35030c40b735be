//! Owner references, as controllers use them (client-go's
//! `metav1.NewControllerRef`, `metav1.GetControllerOf`,
//! `metav1.IsControlledBy`): an object a controller creates carries one
//! owner reference with `controller: true` naming its owner, so the
//! garbage collector deletes it with the owner, and events on it can be
//! mapped back to the owner's key
//! ([`EnqueueHandler::for_owner`](crate::handlers::EnqueueHandler::for_owner)).
//! [`apply_owned`] writes such an object by server-side apply.
//!
//! ```
//! use kcontrol_controller::owner::{get_controller_of, is_controlled_by, new_controller_ref};
//! use kcontrol_indexer::k8s_openapi::api::core::v1::{ConfigMap, Secret};
//!
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("settings".into());
//! cm.metadata.uid = Some("0b5e".into());
//! let mut secret = Secret::default();
//! secret.metadata.owner_references = Some(vec![new_controller_ref(&cm)]);
//! assert_eq!(get_controller_of(&secret.metadata).map(|r| r.kind.as_str()), Some("ConfigMap"));
//! assert!(is_controlled_by(&secret, &cm));
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kcontrol_client::{Api, Patch, PatchParams};
use kcontrol_indexer::{KubeObject, TypedResource};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The owner reference a controller puts on an object it creates for
/// `owner`: the owner's apiVersion, kind, name and uid, with
/// `controller: true` and `blockOwnerDeletion: true` (a foreground deletion
/// of the owner waits for the object). CT1.
///
/// The owner should come from the API server (or its cache): a missing
/// name or uid is written as an empty string, which the server refuses.
pub fn new_controller_ref<O: TypedResource>(owner: &O) -> OwnerReference {
    let resource = O::api_resource();
    OwnerReference {
        api_version: resource.api_version().into_owned(),
        kind: resource.kind.into_owned(),
        name: owner.name().unwrap_or_default().to_owned(),
        uid: owner.uid().unwrap_or_default().to_owned(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The owner reference with `controller: true`, if any (at most one is
/// valid; the first is returned). CT1.
pub fn get_controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|r| r.controller == Some(true))
}

/// Whether `obj`'s controller reference names `owner`, by uid (a deleted
/// and re-created owner of the same name is another owner). False when
/// either has no uid. Either may be a k8s-openapi object or a lean type.
/// CT1.
pub fn is_controlled_by<K: KubeObject + ?Sized, O: KubeObject + ?Sized>(
    obj: &K,
    owner: &O,
) -> bool {
    match (KubeObject::controller_ref(obj), KubeObject::uid(owner)) {
        (Some(reference), Some(uid)) => !uid.is_empty() && reference.uid == uid,
        _ => false,
    }
}

/// The API group of an `apiVersion` (`apps/v1` → `apps`, `v1` → the core
/// group, empty).
pub(crate) fn group_of(api_version: &str) -> &str {
    api_version
        .rsplit_once('/')
        .map_or("", |(group, _version)| group)
}

/// Server-side apply of an object that `owner` controls: sets `object`'s
/// controller reference to `owner` (replacing any other), then applies it
/// as `field_manager` with `force` — a controller owns the fields it
/// applies and takes them back from whoever changed them, as
/// controller-runtime's and kube-runtime's controllers apply. Apply creates
/// the object when it does not exist. Returns the object as stored.
///
/// It writes every time; [`apply_owned_if_changed`](crate::converge::apply_owned_if_changed)
/// (or [`Context::apply_owned`](crate::Context::apply_owned)) writes only
/// when the live object differs.
///
/// # Errors
/// When `object` has no name, or the API server refuses the apply.
pub async fn apply_owned<O, T>(
    api: &Api<T>,
    owner: &O,
    object: T,
    field_manager: &str,
) -> Result<T, kcontrol_client::Error>
where
    O: TypedResource,
    T: TypedResource + Serialize + DeserializeOwned,
{
    let object = with_controller_ref(owner, object)?;
    let name = object.name().unwrap_or_default().to_owned();
    api.patch(
        &name,
        &PatchParams::apply(field_manager).force(),
        &Patch::Apply(&object),
    )
    .await
}

/// `object` as [`apply_owned`] sends it: its controller reference is
/// `owner`'s (other controller references dropped), without the fields
/// the server owns (`managedFields`, `resourceVersion`).
pub(crate) fn with_controller_ref<O: TypedResource, T: TypedResource>(
    owner: &O,
    mut object: T,
) -> Result<T, kcontrol_client::Error> {
    if object.name().is_none() {
        return Err(kcontrol_client::Error::InvalidRequest(
            "apply_owned: the object has no name".to_owned(),
        ));
    }
    let mut refs: Vec<OwnerReference> = object
        .meta()
        .owner_references
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.controller != Some(true))
        .collect();
    refs.push(new_controller_ref(owner));
    object.meta_mut().owner_references = Some(refs);
    // fields the server owns are not the applier's to claim
    object.meta_mut().managed_fields = None;
    object.meta_mut().resource_version = None;
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};

    fn named<K: kcontrol_indexer::Object + Default>(name: &str, uid: &str) -> K {
        let mut obj = K::default();
        obj.meta_mut().name = Some(name.into());
        obj.meta_mut().uid = Some(uid.into());
        obj
    }

    #[test]
    fn ct1_controller_ref_names_the_owner_and_blocks_deletion() {
        let d: Deployment = named("web", "u-1");
        let r = new_controller_ref(&d);
        assert_eq!(
            (
                r.api_version.as_str(),
                r.kind.as_str(),
                r.name.as_str(),
                r.uid.as_str()
            ),
            ("apps/v1", "Deployment", "web", "u-1")
        );
        assert_eq!(
            (r.controller, r.block_owner_deletion),
            (Some(true), Some(true))
        );
        let ns: Namespace = named("team", "u-2");
        assert_eq!(new_controller_ref(&ns).api_version, "v1");
    }

    #[test]
    fn ct1_get_controller_of_skips_plain_owners() {
        let cm: ConfigMap = named("a", "u-a");
        let mut plain = new_controller_ref(&cm);
        plain.controller = None;
        plain.name = "plain".into();
        let mut s = Secret::default();
        assert!(get_controller_of(&s.metadata).is_none());
        s.metadata.owner_references = Some(vec![plain.clone()]);
        assert!(get_controller_of(&s.metadata).is_none());
        s.metadata.owner_references = Some(vec![plain, new_controller_ref(&cm)]);
        assert_eq!(
            get_controller_of(&s.metadata).map(|r| r.name.as_str()),
            Some("a")
        );
    }

    #[test]
    fn ct1_is_controlled_by_compares_uids() {
        let cm: ConfigMap = named("a", "u-a");
        let recreated: ConfigMap = named("a", "u-b");
        let no_uid: ConfigMap = named("a", "");
        let mut s = Secret::default();
        assert!(!is_controlled_by(&s, &cm));
        s.metadata.owner_references = Some(vec![new_controller_ref(&cm)]);
        assert!(is_controlled_by(&s, &cm));
        assert!(!is_controlled_by(&s, &recreated));
        assert!(!is_controlled_by(&s, &no_uid));
        let mut orphan_ref = Secret::default();
        orphan_ref.metadata.owner_references = Some(vec![new_controller_ref(&no_uid)]);
        assert!(!is_controlled_by(&orphan_ref, &no_uid));
    }

    #[test]
    fn group_of_api_versions() {
        assert_eq!(group_of("apps/v1"), "apps");
        assert_eq!(group_of("v1"), "");
        assert_eq!(
            group_of("samplecontroller.k8s.io/v1alpha1"),
            "samplecontroller.k8s.io"
        );
    }
}
