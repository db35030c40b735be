//! Unit tests of the store: each IX contract on small examples, and the
//! error paths (the store is unchanged after a refused operation).

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

use super::*;

fn cm(ns: &str, name: &str, labels: &[(&str, &str)]) -> Arc<ConfigMap> {
    let mut cm = ConfigMap::default();
    cm.metadata.namespace = (!ns.is_empty()).then(|| ns.to_owned());
    cm.metadata.name = (!name.is_empty()).then(|| name.to_owned());
    cm.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
    );
    Arc::new(cm)
}

/// Every label value is an index value.
fn by_label_values(cm: &ConfigMap) -> Vec<String> {
    cm.labels().values().cloned().collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn names(objs: Vec<Arc<ConfigMap>>) -> Vec<String> {
    sorted(
        objs.iter()
            .filter_map(|o| meta_namespace_key(o.as_ref()).ok())
            .collect(),
    )
}

fn store() -> ThreadSafeStore<ConfigMap> {
    let store = ThreadSafeStore::new();
    store.add_indexer("label-values", by_label_values).unwrap();
    store
}

/// The observable state: keys, and every index value with its keys.
fn snapshot(store: &ThreadSafeStore<ConfigMap>) -> Vec<(String, String, Vec<String>)> {
    let mut out = vec![("items".into(), String::new(), sorted(store.list_keys()))];
    for name in store.indexer_names() {
        for value in sorted(store.list_index_values(&name).unwrap()) {
            let keys = sorted(store.index_keys(&name, &value).unwrap());
            out.push((name.clone(), value, keys));
        }
    }
    out
}

#[test]
fn ix1_update_moves_index_entries_and_delete_removes_them() {
    let store = store();
    assert_eq!(store.add(cm("a", "x", &[("app", "web")])).unwrap(), None);
    store
        .add(cm("b", "y", &[("app", "web"), ("tier", "front")]))
        .unwrap();
    assert_eq!(
        sorted(store.index_keys("label-values", "web").unwrap()),
        ["a/x", "b/y"]
    );

    let old = store.update(cm("a", "x", &[("app", "db")])).unwrap();
    assert_eq!(old.unwrap().labels()["app"], "web");
    assert_eq!(store.index_keys("label-values", "web").unwrap(), ["b/y"]);
    assert_eq!(store.index_keys("label-values", "db").unwrap(), ["a/x"]);

    let gone = store.delete(&cm("b", "y", &[])).unwrap();
    assert!(gone.is_some());
    assert!(store.index_keys("label-values", "web").unwrap().is_empty());
    assert!(store
        .index_keys("label-values", "front")
        .unwrap()
        .is_empty());
    assert_eq!(
        sorted(store.list_index_values("label-values").unwrap()),
        ["db"]
    );
    assert_eq!(store.list_index_values(NAMESPACE_INDEX).unwrap(), ["a"]);
    store.check_consistency().unwrap();
}

#[test]
fn ix2_queries() {
    let store = store();
    store
        .add(cm("a", "x", &[("app", "web"), ("tier", "front")]))
        .unwrap();
    store.add(cm("a", "y", &[("app", "db")])).unwrap();
    store.add(cm("b", "z", &[("tier", "front")])).unwrap();
    store.add(cm("b", "w", &[("app", "other")])).unwrap();

    assert_eq!(
        names(store.by_index(NAMESPACE_INDEX, "a").unwrap()),
        ["a/x", "a/y"]
    );
    assert!(store.by_index(NAMESPACE_INDEX, "none").unwrap().is_empty());
    // index(): objects sharing any value with the given one.
    let probe = cm("q", "probe", &[("one", "web"), ("two", "front")]);
    assert_eq!(
        names(store.index("label-values", &probe).unwrap()),
        ["a/x", "b/z"]
    );
    let probe = cm("q", "probe", &[("one", "db")]);
    assert_eq!(names(store.index("label-values", &probe).unwrap()), ["a/y"]);
    assert!(store
        .index("label-values", &cm("q", "p", &[]))
        .unwrap()
        .is_empty());
    assert_eq!(
        names(store.index(NAMESPACE_INDEX, &probe).unwrap()),
        Vec::<String>::new()
    );
    assert_eq!(names(store.list()), ["a/x", "a/y", "b/w", "b/z"]);
    assert_eq!(sorted(store.list_keys()), ["a/x", "a/y", "b/w", "b/z"]);
    assert_eq!(store.len(), 4);
    assert!(store.contains_key("b/w"));
    assert_eq!(
        store.get(&cm("a", "y", &[])).unwrap().unwrap().labels()["app"],
        "db"
    );
    assert!(store.get_by_key("a/zzz").is_none());
    let filtered =
        store.by_index_filtered(NAMESPACE_INDEX, "b", |o| o.labels().contains_key("app"));
    assert_eq!(names(filtered.unwrap()), ["b/w"]);
    assert_eq!(
        names(store.list_filtered(|o| o.labels().is_empty())),
        Vec::<String>::new()
    );

    store
        .replace(vec![cm("c", "v", &[("app", "web")]), cm("a", "x", &[])])
        .unwrap();
    assert_eq!(sorted(store.list_keys()), ["a/x", "c/v"]);
    assert_eq!(store.index_keys("label-values", "web").unwrap(), ["c/v"]);
    assert!(store.by_index(NAMESPACE_INDEX, "b").unwrap().is_empty());
    assert_eq!(
        sorted(store.list_index_values(NAMESPACE_INDEX).unwrap()),
        ["a", "c"]
    );
    store.check_consistency().unwrap();
}

#[test]
fn ix2_stored_objects_are_shared_not_copied() {
    let store = store();
    let obj = cm("a", "x", &[]);
    store.add(Arc::clone(&obj)).unwrap();
    assert!(Arc::ptr_eq(&store.get_by_key("a/x").unwrap(), &obj));
    assert!(Arc::ptr_eq(
        &store.by_index(NAMESPACE_INDEX, "a").unwrap()[0],
        &obj
    ));
}

#[test]
fn ix3_indexers_added_later_index_what_is_there() {
    let store = ThreadSafeStore::new();
    store.add(cm("a", "x", &[("app", "web")])).unwrap();
    store.add(cm("b", "y", &[("app", "web")])).unwrap();
    store.add(cm("b", "z", &[])).unwrap();
    store.add_indexer("label-values", by_label_values).unwrap();
    assert_eq!(
        sorted(store.index_keys("label-values", "web").unwrap()),
        ["a/x", "b/y"]
    );
    assert_eq!(store.indexer_names(), [NAMESPACE_INDEX, "label-values"]);
    store.check_consistency().unwrap();
}

#[test]
fn cluster_scoped_objects_key_by_name_and_index_under_empty_namespace() {
    let store: ThreadSafeStore<Namespace> = ThreadSafeStore::new();
    let mut ns = Namespace::default();
    ns.metadata.name = Some("kube-system".into());
    store.add(Arc::new(ns)).unwrap();
    assert!(store.get_by_key("kube-system").is_some());
    assert_eq!(
        store.index_keys(NAMESPACE_INDEX, "").unwrap(),
        ["kube-system"]
    );
}

#[test]
fn custom_indexers_only() {
    let mut indexers: Indexers<ConfigMap> = Indexers::new();
    indexers.insert("label-values".into(), Arc::new(by_label_values));
    let store = ThreadSafeStore::with_indexers(indexers);
    store.add(cm("a", "x", &[("k", "v"), ("k2", "v")])).unwrap();
    assert_eq!(store.index_keys("label-values", "v").unwrap(), ["a/x"]);
    assert_eq!(
        store.by_index(NAMESPACE_INDEX, "a"),
        Err(StoreError::UnknownIndex {
            name: NAMESPACE_INDEX.into()
        })
    );
    store.update(cm("a", "x", &[("k", "v")])).unwrap();
    store.check_consistency().unwrap();
    store.delete_by_key("a/x");
    assert!(store.list_index_values("label-values").unwrap().is_empty());
}

#[test]
fn nameless_objects_are_refused_and_change_nothing() {
    let store = store();
    store.add(cm("a", "x", &[("app", "web")])).unwrap();
    let before = snapshot(&store);
    let nameless = cm("a", "", &[("app", "web")]);
    assert_eq!(
        store.add(Arc::clone(&nameless)),
        Err(StoreError::Key(KeyError::MissingName))
    );
    assert_eq!(
        store.update(Arc::clone(&nameless)),
        Err(StoreError::Key(KeyError::MissingName))
    );
    assert!(store.delete(&nameless).is_err());
    assert!(store.get(&nameless).is_err());
    let err = store
        .replace(vec![cm("b", "y", &[]), nameless])
        .unwrap_err();
    assert_eq!(err.to_string(), "object has no name, so it has no key");
    assert_eq!(snapshot(&store), before);
}

#[test]
fn malformed_and_unknown_keys_find_nothing() {
    let store = store();
    store.add(cm("a", "x", &[])).unwrap();
    let before = snapshot(&store);
    for key in ["", "/", "a/", "/x", "a/x/y", "a//x", "b/x"] {
        assert!(store.get_by_key(key).is_none(), "{key}");
        assert_eq!(store.delete_by_key(key), None, "{key}");
    }
    assert_eq!(snapshot(&store), before);
}

#[test]
fn unknown_indexes_and_duplicate_indexers_are_errors() {
    let store = store();
    store.add(cm("a", "x", &[("app", "web")])).unwrap();
    let unknown = StoreError::UnknownIndex {
        name: "nope".into(),
    };
    assert_eq!(store.by_index("nope", "v"), Err(unknown.clone()));
    assert_eq!(store.index_keys("nope", "v"), Err(unknown.clone()));
    assert_eq!(store.list_index_values("nope"), Err(unknown.clone()));
    assert_eq!(
        store.index("nope", &cm("a", "x", &[])).unwrap_err(),
        unknown
    );

    let mut both: Indexers<ConfigMap> = Indexers::new();
    both.insert("fresh".into(), Arc::new(by_label_values));
    both.insert(NAMESPACE_INDEX.into(), Arc::new(namespace_index_func));
    assert_eq!(
        store.add_indexers(both),
        Err(StoreError::IndexerExists {
            name: NAMESPACE_INDEX.into()
        })
    );
    assert_eq!(store.indexer_names(), [NAMESPACE_INDEX, "label-values"]);
    assert!(store.add_indexer("label-values", by_label_values).is_err());
}

#[test]
fn a_panicking_index_function_leaves_the_store_unchanged() {
    let store = ThreadSafeStore::new();
    store
        .add_indexer("picky", |cm: &ConfigMap| {
            assert!(
                !cm.labels().contains_key("boom"),
                "index function refuses this object"
            );
            by_label_values(cm)
        })
        .unwrap();
    store.add(cm("a", "x", &[("app", "web")])).unwrap();
    let before = snapshot(&store);
    for op in 0..3 {
        let result = catch_unwind(AssertUnwindSafe(|| match op {
            0 => drop(store.add(cm("a", "x", &[("boom", "1")]))),
            1 => drop(store.add(cm("a", "new", &[("boom", "1")]))),
            _ => drop(store.replace(vec![cm("a", "y", &[("boom", "1")])])),
        }));
        assert!(result.is_err());
        assert_eq!(snapshot(&store), before, "op {op}");
        store.check_consistency().unwrap();
    }
}

#[test]
fn known_objects_reads_the_store() {
    let store = store();
    store.add(cm("a", "x", &[])).unwrap();
    let known: &dyn KnownObjects<ConfigMap> = &store;
    assert_eq!(known.list_keys(), ["a/x"]);
    assert!(known.get_by_key("a/x").is_some());
    assert!(known.get_by_key("a/y").is_none());
    store.add(cm("b", "y", &[])).unwrap();
    let mut shared: Vec<String> = known
        .list_shared_keys()
        .iter()
        .map(|k| k.to_string())
        .collect();
    shared.sort();
    assert_eq!(shared, sorted(known.list_keys()));
}

#[test]
fn duplicate_index_values_from_one_object_are_one_entry() {
    let store = store();
    store
        .add(cm("a", "x", &[("k1", "same"), ("k2", "same")]))
        .unwrap();
    assert_eq!(store.index_keys("label-values", "same").unwrap(), ["a/x"]);
    store.update(cm("a", "x", &[("k1", "same")])).unwrap();
    assert_eq!(store.index_keys("label-values", "same").unwrap(), ["a/x"]);
    store.delete_by_key("a/x");
    assert!(store.list_index_values("label-values").unwrap().is_empty());
    store.check_consistency().unwrap();
}

#[test]
fn debug_shows_size_and_indexers() {
    let store = store();
    store.add(cm("a", "x", &[])).unwrap();
    assert_eq!(
        format!("{store:?}"),
        r#"ThreadSafeStore { len: 1, indexers: ["namespace", "label-values"] }"#
    );
}
