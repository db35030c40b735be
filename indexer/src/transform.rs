//! Ready-made transforms, applied to objects before they are stored (an
//! informer's transform hook), to keep only what a controller reads.

use crate::object::KubeObject;

/// Drops `metadata.managedFields`: server-side-apply bookkeeping that
/// controllers rarely read and that is often the largest part of an
/// object's metadata. Informers use it as their default transform when
/// asked to save memory.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
/// use kcontrol_indexer::{transform::strip_managed_fields, Object};
///
/// let mut cm = ConfigMap::default();
/// cm.meta_mut().managed_fields = Some(vec![ManagedFieldsEntry::default()]);
/// strip_managed_fields(&mut cm);
/// assert!(cm.meta().managed_fields.is_none());
/// ```
pub fn strip_managed_fields<K: KubeObject>(obj: &mut K) {
    obj.drop_managed_fields();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DynamicObject;

    #[test]
    fn strips_only_managed_fields() {
        let json = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "a", "namespace": "ns", "labels": { "k": "v" },
                "managedFields": [{ "manager": "m", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": { "f:data": {} } }]
            },
            "data": { "x": "y" }
        });
        let mut obj: DynamicObject = serde_json::from_value(json.clone()).unwrap();
        strip_managed_fields(&mut obj);
        let mut want = json;
        want["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        assert_eq!(serde_json::to_value(&obj).unwrap(), want);
    }
}
