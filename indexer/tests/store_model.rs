//! IX1–IX3 as a property test: random operations on a `ThreadSafeStore`
//! and on a plain `BTreeMap` model, with every index recomputed from
//! scratch from the model after each operation and compared.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::{
    meta_namespace_key, namespace_index_func, IndexFunc, Indexers, Object, StoreError,
    ThreadSafeStore, NAMESPACE_INDEX,
};
use proptest::prelude::*;

/// A test object: namespace ("" = cluster-scoped), name (None = nameless),
/// labels, and a marker telling versions apart.
#[derive(Clone, Debug)]
struct Obj {
    ns: &'static str,
    name: Option<&'static str>,
    labels: BTreeMap<String, String>,
    version: u32,
}

impl Obj {
    fn build(&self) -> Arc<ConfigMap> {
        let mut cm = ConfigMap::default();
        cm.meta_mut().namespace = (!self.ns.is_empty()).then(|| self.ns.to_owned());
        cm.meta_mut().name = self.name.map(str::to_owned);
        cm.meta_mut().labels = Some(self.labels.clone());
        cm.meta_mut().resource_version = Some(self.version.to_string());
        Arc::new(cm)
    }
}

fn obj() -> impl Strategy<Value = Obj> {
    (
        prop::sample::select(vec!["a", "b", "c", ""]),
        prop_oneof![
            20 => prop::sample::select(vec!["x", "y", "z", "w"]).prop_map(Some),
            1 => Just(None),
        ],
        prop::collection::btree_map(
            prop::sample::select(vec!["app", "tier", "shard"]).prop_map(str::to_owned),
            prop::sample::select(vec!["1", "2", "3"]).prop_map(str::to_owned),
            0..3,
        ),
        any::<u32>(),
    )
        .prop_map(|(ns, name, labels, version)| Obj {
            ns,
            name,
            labels,
            version,
        })
}

/// The indexers a test may add: every `key=value` label pair, and the `app` label.
fn indexer(name: &str) -> IndexFunc<ConfigMap> {
    match name {
        "pairs" => Arc::new(|cm: &ConfigMap| {
            cm.labels()
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect()
        }),
        "app" => Arc::new(|cm: &ConfigMap| cm.labels().get("app").cloned().into_iter().collect()),
        // Always the same two values: many objects per value, duplicate-free.
        _ => Arc::new(|cm: &ConfigMap| {
            let mut v = vec!["all".to_owned()];
            if cm.labels().is_empty() {
                v.push("unlabelled".to_owned());
            }
            v
        }),
    }
}

#[derive(Clone, Debug)]
enum Op {
    Add(Obj),
    Update(Obj),
    Delete(Obj),
    DeleteByKey(String),
    Replace(Vec<Obj>),
    AddIndexers(Vec<&'static str>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => obj().prop_map(Op::Add),
        4 => obj().prop_map(Op::Update),
        3 => obj().prop_map(Op::Delete),
        1 => prop::sample::select(vec!["a/x", "x", "a/", "/x", "a/x/y", ""]).prop_map(|k| Op::DeleteByKey(k.to_owned())),
        1 => prop::collection::vec(obj(), 0..8).prop_map(Op::Replace),
        1 => prop::collection::vec(prop::sample::select(vec!["pairs", "app", "groups"]), 1..3).prop_map(Op::AddIndexers),
    ]
}

struct Model {
    items: BTreeMap<String, Arc<ConfigMap>>,
    indexers: Vec<(String, IndexFunc<ConfigMap>)>,
}

impl Model {
    /// Every index computed from scratch: name → value → keys.
    fn indexes(&self) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
        let mut out = BTreeMap::new();
        for (name, func) in &self.indexers {
            let index: &mut BTreeMap<String, BTreeSet<String>> =
                out.entry(name.clone()).or_default();
            for (key, obj) in &self.items {
                for value in func(obj) {
                    index.entry(value).or_default().insert(key.clone());
                }
            }
        }
        out
    }
}

fn rv(obj: &Option<Arc<ConfigMap>>) -> Option<String> {
    obj.as_ref()
        .and_then(|o| o.resource_version().map(str::to_owned))
}

fn apply(store: &ThreadSafeStore<ConfigMap>, model: &mut Model, op: &Op) {
    match op {
        Op::Add(o) | Op::Update(o) => {
            let obj = o.build();
            let got = if matches!(op, Op::Add(_)) {
                store.add(Arc::clone(&obj))
            } else {
                store.update(Arc::clone(&obj))
            };
            match meta_namespace_key(obj.as_ref()) {
                Ok(key) => {
                    let prev = model.items.insert(key, obj);
                    assert_eq!(rv(&got.unwrap()), rv(&prev));
                }
                Err(e) => assert_eq!(got.unwrap_err(), StoreError::Key(e)),
            }
        }
        Op::Delete(o) => {
            let obj = o.build();
            let got = store.delete(&obj);
            match meta_namespace_key(obj.as_ref()) {
                Ok(key) => assert_eq!(rv(&got.unwrap()), rv(&model.items.remove(&key))),
                Err(e) => assert_eq!(got.unwrap_err(), StoreError::Key(e)),
            }
        }
        Op::DeleteByKey(key) => {
            assert_eq!(rv(&store.delete_by_key(key)), rv(&model.items.remove(key)));
        }
        Op::Replace(objs) => {
            let built: Vec<Arc<ConfigMap>> = objs.iter().map(Obj::build).collect();
            let got = store.replace(built.clone());
            if objs.iter().any(|o| o.name.is_none()) {
                assert!(got.is_err());
            } else {
                got.unwrap();
                model.items = built
                    .into_iter()
                    .map(|o| (meta_namespace_key(o.as_ref()).unwrap(), o))
                    .collect();
            }
        }
        Op::AddIndexers(names) => {
            let unique: BTreeSet<&str> = names.iter().copied().collect();
            let indexers: Indexers<ConfigMap> = unique
                .iter()
                .map(|n| ((*n).to_owned(), indexer(n)))
                .collect();
            let taken = unique
                .iter()
                .any(|n| model.indexers.iter().any(|(m, _)| m == n));
            let got = store.add_indexers(indexers);
            if taken {
                assert!(matches!(got, Err(StoreError::IndexerExists { .. })));
            } else {
                got.unwrap();
                for n in unique {
                    model.indexers.push((n.to_owned(), indexer(n)));
                }
            }
        }
    }
}

fn check(store: &ThreadSafeStore<ConfigMap>, model: &Model) {
    let mut keys = store.list_keys();
    keys.sort();
    assert_eq!(keys, model.items.keys().cloned().collect::<Vec<_>>());
    assert_eq!(store.len(), model.items.len());
    for (key, obj) in &model.items {
        assert!(Arc::ptr_eq(&store.get_by_key(key).unwrap(), obj), "{key}");
    }
    let mut listed: Vec<String> = store
        .list()
        .iter()
        .map(|o| meta_namespace_key(o.as_ref()).unwrap())
        .collect();
    listed.sort();
    assert_eq!(listed, keys);

    let mut names = store.indexer_names();
    names.sort();
    let mut want_names: Vec<String> = model.indexers.iter().map(|(n, _)| n.clone()).collect();
    want_names.sort();
    assert_eq!(names, want_names);

    for (name, want) in model.indexes() {
        let mut values = store.list_index_values(&name).unwrap();
        values.sort();
        assert_eq!(
            values,
            want.keys().cloned().collect::<Vec<_>>(),
            "values of {name}"
        );
        for (value, want_keys) in &want {
            let got: BTreeSet<String> = store
                .index_keys(&name, value)
                .unwrap()
                .into_iter()
                .collect();
            assert_eq!(&got, want_keys, "{name}={value}");
            let objs = store.by_index(&name, value).unwrap();
            let got: BTreeSet<String> = objs
                .iter()
                .map(|o| meta_namespace_key(o.as_ref()).unwrap())
                .collect();
            assert_eq!(&got, want_keys, "by_index {name}={value}");
            assert_eq!(objs.len(), want_keys.len());
            for obj in &objs {
                let key = meta_namespace_key(obj.as_ref()).unwrap();
                let current = &model.items[&key];
                assert!(
                    Arc::ptr_eq(obj, current),
                    "by_index {name}={value}: old {key}"
                );
            }
        }
        // index(): the union over a probe object's values.
        let func = &model.indexers.iter().find(|(n, _)| *n == name).unwrap().1;
        for probe in model.items.values().take(3) {
            let want: BTreeSet<String> = func(probe)
                .iter()
                .flat_map(|v| want.get(v).cloned().unwrap_or_default())
                .collect();
            let got: Vec<String> = store
                .index(&name, probe)
                .unwrap()
                .iter()
                .map(|o| meta_namespace_key(o.as_ref()).unwrap())
                .collect();
            assert_eq!(got.len(), want.len(), "index() returns each object once");
            assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), want);
        }
    }
    store.check_consistency().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn store_matches_model(initial in prop::collection::vec(prop::sample::select(vec!["pairs", "app"]), 0..2), ops in prop::collection::vec(op(), 1..60)) {
        let store = ThreadSafeStore::new();
        let mut model = Model {
            items: BTreeMap::new(),
            indexers: vec![(NAMESPACE_INDEX.to_owned(), Arc::new(namespace_index_func::<ConfigMap>))],
        };
        apply(&store, &mut model, &Op::AddIndexers(initial));
        check(&store, &model);
        for op in &ops {
            apply(&store, &mut model, op);
            check(&store, &model);
        }
    }
}
