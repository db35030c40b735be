//! Field management: the apply sequence, updates taking
//! ownership, pruning, and properties of the field-set computation.

use super::*;
use proptest::prelude::*;
use serde_json::json;

fn cm_info() -> ResourceInfo {
    (*crate::builtin::configmaps()).clone()
}

fn writer(manager: &str) -> Writer<'_> {
    Writer {
        manager,
        api_version: "v1".into(),
        subresource: "",
    }
}

fn managers(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap_or("").to_owned(),
                        e["operation"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data})
}

#[test]
fn second_manager_conflicts_until_forced() {
    let info = cm_info();
    let live = apply(
        &info,
        &json!({}),
        &cm(json!({"a": "1"})),
        &writer("mgr-a"),
        false,
    )
    .unwrap_or_default();
    assert_eq!(managers(&live), vec![("mgr-a".into(), "Apply".into())]);
    assert_eq!(
        live["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {"f:a": {}}})
    );
    match apply(
        &info,
        &live,
        &cm(json!({"a": "2"})),
        &writer("mgr-b"),
        false,
    ) {
        Err(ApplyError::Conflicts(c)) => assert_eq!(
            c,
            vec![Conflict {
                manager: "\"mgr-a\"".into(),
                field: ".data.a".into()
            }]
        ),
        other => panic!("expected a conflict, got {other:?}"),
    }
    let forced =
        apply(&info, &live, &cm(json!({"a": "2"})), &writer("mgr-b"), true).unwrap_or_default();
    assert_eq!(forced["data"]["a"], "2");
    assert_eq!(managers(&forced), vec![("mgr-b".into(), "Apply".into())]);
}

#[test]
fn same_value_is_shared_and_pruning_respects_co_owners() {
    let info = cm_info();
    let live = apply(
        &info,
        &json!({}),
        &cm(json!({"a": "1", "b": "1"})),
        &writer("mgr-a"),
        false,
    )
    .unwrap_or_default();
    let shared = apply(
        &info,
        &live,
        &cm(json!({"a": "1"})),
        &writer("mgr-b"),
        false,
    )
    .unwrap_or_default();
    assert_eq!(managers(&shared).len(), 2);
    // mgr-a stops applying both: b goes, a stays (mgr-b owns it too)
    let empty = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let pruned = apply(&info, &shared, &empty, &writer("mgr-a"), false).unwrap_or_default();
    assert_eq!(pruned["data"], json!({"a": "1"}));
    assert_eq!(managers(&pruned), vec![("mgr-b".into(), "Apply".into())]);
}

#[test]
fn updates_take_ownership_without_conflict() {
    let info = cm_info();
    let live = apply(
        &info,
        &json!({}),
        &cm(json!({"a": "1"})),
        &writer("mgr-a"),
        false,
    )
    .unwrap_or_default();
    let mut new = live.clone();
    new["data"]["a"] = json!("2");
    new["data"]["z"] = json!("3");
    record_update(&info, Some(&live), &mut new, &writer("kubectl-edit"));
    assert_eq!(
        managers(&new),
        vec![("kubectl-edit".into(), "Update".into())]
    );
    assert_eq!(
        new["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {"f:a": {}, "f:z": {}}})
    );
    // the applier re-applying its old value now conflicts with the updater
    match apply(&info, &new, &cm(json!({"a": "1"})), &writer("mgr-a"), false) {
        Err(ApplyError::Conflicts(c)) => {
            assert_eq!(c[0].manager, "\"kubectl-edit\" using v1");
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    // an update that changes nothing keeps managedFields as they were
    let mut same = new.clone();
    record_update(&info, Some(&new), &mut same, &writer("other"));
    assert_eq!(same, new);
}

#[test]
fn create_records_the_update_manager_with_dots_for_maps() {
    let info = cm_info();
    let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default", "uid": "u", "labels": {"app": "x"}}, "data": {"k": "v"}});
    record_update(&info, None, &mut obj, &writer("kubectl-create"));
    assert_eq!(
        obj["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
    );
    // a request may reset managedFields with an empty list
    let mut reset = obj.clone();
    reset["metadata"]["managedFields"] = json!([]);
    record_update(&info, Some(&obj), &mut reset, &writer("x"));
    assert!(reset["metadata"].get("managedFields").is_none());
}

#[test]
fn more_than_ten_updaters_merge_into_ancient_changes() {
    let info = cm_info();
    let mut obj = cm(json!({}));
    record_update(&info, None, &mut obj, &writer("m00"));
    for i in 1..13 {
        let mut next = obj.clone();
        next["data"][format!("k{i}")] = json!("v");
        record_update(&info, Some(&obj), &mut next, &writer(&format!("m{i:02}")));
        obj = next;
    }
    let names: Vec<String> = managers(&obj).into_iter().map(|(m, _)| m).collect();
    assert_eq!(names.len(), 10, "{names:?}");
    assert!(names.contains(&"ancient-changes".to_owned()), "{names:?}");
    assert!(names.contains(&"m12".to_owned()));
    let ancient = obj["metadata"]["managedFields"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["manager"] == "ancient-changes"))
        .cloned()
        .unwrap_or_default();
    // each write beyond the cap merges the oldest: m00 (the `.` of data),
    // then m01, m02, m03; their fields stay owned, by the bucket
    assert_eq!(
        ancient["fieldsV1"]["f:data"],
        json!({".": {}, "f:k1": {}, "f:k2": {}, "f:k3": {}})
    );
}

#[test]
fn field_manager_defaults_and_validation() {
    assert_eq!(
        manager_from_user_agent("kubectl/v1.33.0 (linux/amd64) kubernetes/abc"),
        "kubectl"
    );
    assert_eq!(manager_from_user_agent(&"x".repeat(300)).len(), 128);
    assert!(validate_field_manager("ok").is_empty());
    assert_eq!(validate_field_manager(&"x".repeat(129)).len(), 1);
    assert_eq!(validate_field_manager("a\u{7}").len(), 1);
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        "[a-c]{1,2}".prop_map(Value::from),
        (0i64..3).prop_map(Value::from),
    ]
}

fn data() -> impl Strategy<Value = Value> {
    proptest::collection::btree_map("[a-d]", scalar(), 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

fn containers() -> impl Strategy<Value = Value> {
    proptest::collection::btree_map("[a-c]", scalar(), 0..3).prop_map(|m| {
        Value::Array(
            m.into_iter()
                .map(|(name, image)| json!({"name": name, "image": image}))
                .collect(),
        )
    })
}

fn config() -> impl Strategy<Value = Value> {
    (data(), containers()).prop_map(|(d, c)| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"x": d, "template": {"spec": {"containers": c}}}})
    })
}

#[test]
fn built_in_lists_merge_by_the_kinds_list_types() {
    // an EndpointSlice's ports are atomic (`+listType=atomic`), a
    // Service's a map keyed by port and protocol
    let eps = crate::builtin::get("discovery.k8s.io", "endpointslices");
    let slice = |port: i64| {
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "s"},
            "addressType": "IPv4", "ports": [{"port": port, "protocol": "TCP"}]})
    };
    let live = apply(&eps, &json!({}), &slice(80), &writer("a"), false).unwrap_or_default();
    assert_eq!(
        live["metadata"]["managedFields"][0]["fieldsV1"]["f:ports"],
        json!({})
    );
    match apply(&eps, &live, &slice(81), &writer("b"), false) {
        Err(ApplyError::Conflicts(c)) => assert_eq!(c[0].field, ".ports"),
        other => panic!("expected a conflict on the atomic list: {other:?}"),
    }
    let svcs = crate::builtin::get("", "services");
    let svc = |protocol: &str| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"ports": [{"port": 53, "protocol": protocol}]}})
    };
    let live = apply(&svcs, &json!({}), &svc("TCP"), &writer("a"), false).unwrap_or_default();
    let both = apply(&svcs, &live, &svc("UDP"), &writer("b"), false).unwrap_or_default();
    assert_eq!(both["spec"]["ports"].as_array().map(Vec::len), Some(2));
}

proptest! {
    /// Applying a configuration sets what it says; its manager owns
    /// exactly the configuration's fields; re-applying it is a no-op.
    #[test]
    fn apply_sets_what_it_owns(live_cfg in config(), cfg in config()) {
        let info = crate::builtin::deployments();
        let live = apply(&info, &json!({}), &live_cfg, &writer("a"), false).unwrap_or_default();
        let out = apply(&info, &live, &cfg, &writer("b"), true).unwrap_or_default();
        let set = walk::set_of(&cfg, ctx(&info)).unwrap_or_default();
        let expected = strip(&info, "", &set);
        let entries = decode(managed_fields(&out)).unwrap_or_default();
        let b = entries.iter().find(|e| e.manager == "b");
        prop_assert_eq!(b.map(|e| e.fields.clone()).unwrap_or_default(), expected.clone());
        // every field b owns is in the object with the configured value
        let mut view = out.clone();
        crate::meta::remove_meta(&mut view, "managedFields");
        let mut remerged = view.clone();
        walk::merge(&mut remerged, &cfg, ctx(&info));
        let cmp = walk::compare(&view, &remerged, ctx(&info));
        prop_assert!(cmp.is_same(), "{:?}", cmp);
        let again = apply(&info, &out, &cfg, &writer("b"), false);
        prop_assert!(again.is_ok());
        let again = again.unwrap_or_default();
        prop_assert_eq!(&again["spec"], &out["spec"]);
    }

    /// An update's manager owns every field it changed and no one else
    /// does; removed fields are owned by no one.
    #[test]
    fn update_owns_its_changes(a in config(), b in config()) {
        let info = crate::builtin::deployments();
        let mut old = a.clone();
        record_update(&info, None, &mut old, &Writer { manager: "m1", api_version: "apps/v1".into(), subresource: "" });
        let mut new = b.clone();
        record_update(&info, Some(&old), &mut new, &Writer { manager: "m2", api_version: "apps/v1".into(), subresource: "" });
        let cmp = walk::compare(&old, &new, ctx(&info));
        let changed = strip(&info, "", &cmp.changed());
        let removed = strip(&info, "", &cmp.removed);
        let entries = decode(managed_fields(&new)).unwrap_or_default();
        for e in &entries {
            if e.manager == "m2" {
                prop_assert_eq!(e.fields.clone(), changed.clone());
            } else {
                prop_assert!(e.fields.intersection(&changed).is_empty());
                prop_assert!(e.fields.intersection(&removed).is_empty());
            }
        }
        prop_assert!(entries.iter().all(|e| !e.fields.is_empty()));
    }
}
