use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;

use super::*;
use crate::labels::Selector;
use crate::{meta_namespace_key, KubeObject, Lister, ThreadSafeStore, NAMESPACE_INDEX};

const JSON: &str = r#"{"apiVersion":"v1","kind":"ConfigMap",
    "metadata":{"name":"a","namespace":"ns","uid":"u","resourceVersion":"3",
        "labels":{"app":"web","tier":"front"},"annotations":{"note":"hello"},
        "managedFields":[{"manager":"m","operation":"Update","fieldsV1":{"f:data":{".":{}}}}]},
    "data":{"k1":"v1","k2":"a value longer than thirty-two bytes, owned by its object"},
    "binaryData":{"b":"AAE="},"immutable":true,"unknownField":{"x":[1,2]}}"#;

#[test]
fn decodes_a_configmap_like_k8s_openapi_reads_it() {
    let lean: CompactConfigMap = serde_json::from_str(JSON).unwrap();
    let full: ConfigMap = serde_json::from_str(JSON).unwrap();
    assert_eq!(lean.name(), Some("a"));
    assert_eq!(lean.resource_version(), Some("3"));
    assert_eq!(
        lean.labels().to_btree_map(),
        full.metadata.labels.clone().unwrap()
    );
    assert_eq!(lean.data.to_btree_map(), full.data.clone().unwrap());
    assert_eq!(lean.binary_data.get("b"), Some("AAE="));
    assert_eq!(lean.immutable, Some(true));
    let from_full = CompactConfigMap::from(&full);
    assert_eq!(from_full.metadata, lean.metadata);
    assert_eq!(from_full.data, lean.data);
    assert_eq!(from_full.binary_data, lean.binary_data);
    assert_eq!(meta_namespace_key(&lean).unwrap(), "ns/a");
}

#[test]
fn a_wrong_field_type_is_an_error() {
    let err = serde_json::from_str::<CompactConfigMap>(r#"{"data":{"k":1}}"#).unwrap_err();
    assert!(err.to_string().contains("string"), "{err}");
    assert!(serde_json::from_str::<CompactConfigMap>(r#"{"metadata":"x"}"#).is_err());
    assert!(serde_json::from_str::<CompactConfigMap>("[1]").is_err());
}

fn lean(ns: &str, name: &str, app: &str) -> Arc<CompactConfigMap> {
    let json = serde_json::json!({
        "metadata": {"namespace": ns, "name": name, "labels": {"app": app}},
    });
    Arc::new(serde_json::from_value(json).unwrap())
}

#[test]
fn stores_indexes_and_selects_lean_objects() {
    let store: Arc<ThreadSafeStore<CompactConfigMap>> = Arc::new(ThreadSafeStore::new());
    store
        .add_indexers(
            [(
                "app".to_owned(),
                Arc::new(|cm: &CompactConfigMap| {
                    cm.labels()
                        .get("app")
                        .map(str::to_owned)
                        .into_iter()
                        .collect()
                }) as crate::IndexFunc<CompactConfigMap>,
            )]
            .into(),
        )
        .unwrap();
    store.add(lean("a", "x", "web")).unwrap();
    store.add(lean("a", "y", "db")).unwrap();
    store.add(lean("b", "z", "web")).unwrap();
    let mut names: Vec<_> = store
        .by_index("app", "web")
        .unwrap()
        .iter()
        .map(|o| o.name().unwrap_or_default().to_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["x", "z"]);
    assert_eq!(store.by_index(NAMESPACE_INDEX, "a").unwrap().len(), 2);

    let lister = Lister::new(store.clone());
    let selector = Selector::parse("app in (db)").unwrap();
    let selected = lister.list_by_selector(&selector);
    assert_eq!(selected.len(), 1);
    assert_eq!(selected[0].name(), Some("y"));
    let web = Selector::parse("app=web").unwrap();
    assert_eq!(lister.list_namespaced_by_selector("b", &web).len(), 1);
    assert!(!Selector::parse("!app")
        .unwrap()
        .matches(lean("a", "q", "w").labels()));
    assert_eq!(lister.get("a", "x").unwrap().labels()["app"], *"web");
}
