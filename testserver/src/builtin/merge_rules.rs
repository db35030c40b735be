//! The merge rules of the built-in kinds' fields (`semantics.rs`, generated
//! from the Go types of Kubernetes) and their lookup: list types and keys
//! for server-side apply, patch strategies and merge keys for strategic
//! merge patches, atomic maps and structs. Attached to the kinds' OpenAPI
//! schemas as kube-apiserver publishes them (`x-kubernetes-*`).

use serde_json::{json, Map, Value};

/// How a list field merges under server-side apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ListType {
    /// Not a list (an atomic map, or a patch strategy on a non-list).
    NotAList,
    /// Replaced as a whole.
    Atomic,
    /// Scalars merged by value.
    Set,
    /// Items merged by these key fields.
    Map(&'static [&'static str]),
}

/// The rules of one field of one OpenAPI definition.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Field {
    /// The OpenAPI definition (`io.k8s.api.core.v1.PodSpec`).
    pub definition: &'static str,
    /// The field's JSON name.
    pub field: &'static str,
    /// `x-kubernetes-list-type` and `x-kubernetes-list-map-keys`.
    pub list: ListType,
    /// `x-kubernetes-map-type: atomic`.
    pub map_atomic: bool,
    /// `x-kubernetes-patch-strategy` (`merge`, `retainKeys`, `merge,retainKeys`).
    pub patch_strategy: &'static str,
    /// `x-kubernetes-patch-merge-key`.
    pub patch_merge_key: &'static str,
}

/// The rules of `definition`'s `field`, if it has any.
pub(crate) fn field(definition: &str, field: &str) -> Option<&'static Field> {
    let table = super::semantics::FIELDS;
    table
        .binary_search_by(|f| (f.definition, f.field).cmp(&(definition, field)))
        .ok()
        .and_then(|i| table.get(i))
}

/// Whether a struct is replaced and owned as a whole.
pub(crate) fn atomic_struct(definition: &str) -> bool {
    super::semantics::ATOMIC_STRUCTS
        .binary_search(&definition)
        .is_ok()
}

/// The `x-kubernetes-*` extensions of a field, as kube's OpenAPI has them.
pub(crate) fn extensions(f: &Field) -> Map<String, Value> {
    let mut m = Map::new();
    match f.list {
        ListType::NotAList => {}
        ListType::Atomic => {
            m.insert("x-kubernetes-list-type".into(), json!("atomic"));
        }
        ListType::Set => {
            m.insert("x-kubernetes-list-type".into(), json!("set"));
        }
        ListType::Map(keys) => {
            m.insert("x-kubernetes-list-type".into(), json!("map"));
            m.insert("x-kubernetes-list-map-keys".into(), json!(keys));
        }
    }
    if f.map_atomic {
        m.insert("x-kubernetes-map-type".into(), json!("atomic"));
    }
    if !f.patch_strategy.is_empty() {
        m.insert(
            "x-kubernetes-patch-strategy".into(),
            json!(f.patch_strategy),
        );
    }
    if !f.patch_merge_key.is_empty() {
        m.insert(
            "x-kubernetes-patch-merge-key".into(),
            json!(f.patch_merge_key),
        );
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_for_binary_search() {
        let t = super::super::semantics::FIELDS;
        assert!(t
            .windows(2)
            .all(|w| (w[0].definition, w[0].field) < (w[1].definition, w[1].field)));
        let s = super::super::semantics::ATOMIC_STRUCTS;
        assert!(s.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn kube_merge_keys_differ_from_list_keys_where_kube_says_so() {
        let ports = field("io.k8s.api.core.v1.ServiceSpec", "ports");
        assert_eq!(
            ports.map(|f| (f.list, f.patch_merge_key)),
            Some((ListType::Map(&["port", "protocol"]), "port"))
        );
        let c = field("io.k8s.api.core.v1.Container", "ports");
        assert_eq!(
            c.map(|f| (f.list, f.patch_merge_key)),
            Some((
                ListType::Map(&["containerPort", "protocol"]),
                "containerPort"
            ))
        );
        let volumes = field("io.k8s.api.core.v1.PodSpec", "volumes");
        assert_eq!(volumes.map(|f| f.patch_strategy), Some("merge,retainKeys"));
        assert_eq!(
            field("io.k8s.api.core.v1.PodSpec", "tolerations").map(|f| f.list),
            Some(ListType::Atomic)
        );
        assert!(field("io.k8s.api.core.v1.PodSpec", "hostname").is_none());
        assert!(atomic_struct(
            "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"
        ));
        assert!(!atomic_struct("io.k8s.api.core.v1.PodSpec"));
        let ext = extensions(
            field("io.k8s.api.core.v1.PodSpec", "nodeSelector").unwrap_or(&Field {
                definition: "",
                field: "",
                list: ListType::NotAList,
                map_atomic: false,
                patch_strategy: "",
                patch_merge_key: "",
            }),
        );
        assert_eq!(ext.get("x-kubernetes-map-type"), Some(&json!("atomic")));
    }
}
