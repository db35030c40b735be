use super::*;
use serde_json::json;

fn key() -> StorageKey {
    StorageKey::new("", "configmaps")
}

fn cm(ns: &str, name: &str, v: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": {"v": v}})
}

fn all(_: &StoredObject) -> bool {
    true
}

fn names(p: &ListPage) -> Vec<String> {
    p.items.iter().map(|o| o.name().to_owned()).collect()
}

fn query(
    prefix: &str,
    start: Option<String>,
    at_rv: Option<u64>,
    limit: Option<usize>,
) -> ListQuery<'static> {
    ListQuery {
        prefix: prefix.into(),
        start,
        at_rv,
        limit,
        filter: &all,
        count_remaining: true,
    }
}

#[test]
fn writes_get_increasing_versions_and_events() -> Result<(), StoreError> {
    let store = Store::new(100);
    let rs = store.ensure_resource(&key());
    let mut tx = rs.write(&store);
    let a = tx.put("ns/a", cm("ns", "a", "1"))?;
    let b = tx.put("ns/a", cm("ns", "a", "2"))?;
    let c = tx.delete("ns/a")?.map(|e| e.rv);
    drop(tx);
    assert_eq!(a.kind, EventType::Added);
    assert_eq!(b.kind, EventType::Modified);
    assert!(a.rv < b.rv && Some(b.rv) < c);
    assert_eq!(
        b.object.value()["metadata"]["resourceVersion"],
        json!(b.rv.to_string())
    );
    let frame: Value = serde_json::from_slice(&b.frame)?;
    assert_eq!(frame["type"], "MODIFIED");
    assert_eq!(frame["object"]["data"]["v"], "2");
    assert_eq!(
        serde_json::from_slice::<Value>(b.object.json())?,
        *b.object.value()
    );
    let events = rs.events_from(0, 10).unwrap_or_default();
    let deleted = events.last().map(|e| (e.kind, e.object.resource_version()));
    assert_eq!(deleted, Some((EventType::Deleted, c.unwrap_or(0))));
    Ok(())
}

#[test]
fn pages_carry_keys_and_remaining_counts() -> Result<(), StoreError> {
    let store = Store::new(100);
    let rs = store.ensure_resource(&key());
    let mut tx = rs.write(&store);
    for (ns, n) in [("a", "1"), ("a", "2"), ("b", "1"), ("a", "3")] {
        tx.put(&format!("{ns}/{n}"), cm(ns, n, "x"))?;
    }
    drop(tx);
    let p1 = rs
        .list_page(&store, &query("a/", None, None, Some(2)))
        .map_err(|_| StoreError::Encode(serde::de::Error::custom("too old")))?;
    assert_eq!(names(&p1), ["1", "2"]);
    assert_eq!(p1.last_key.as_deref(), Some("2"));
    assert_eq!(p1.remaining, Some(1));
    let start = p1.last_key.map(|k| format!("{k}\u{0}"));
    let p2 = rs.list_page(&store, &query("a/", start, Some(p1.rv), Some(2)));
    let p2 = p2.map_err(|_| StoreError::Encode(serde::de::Error::custom("too old")))?;
    assert_eq!(names(&p2), ["3"]);
    assert_eq!(p2.last_key, None);
    let everything = rs.list_page(&store, &query("", None, None, None));
    assert_eq!(everything.map(|p| p.items.len()).ok(), Some(4));
    Ok(())
}

#[test]
fn reads_past_states_inside_the_window() -> Result<(), StoreError> {
    let store = Store::new(3);
    let rs = store.ensure_resource(&key());
    let mut tx = rs.write(&store);
    let first = tx.put("ns/a", cm("ns", "a", "1"))?.rv;
    tx.put("ns/b", cm("ns", "b", "1"))?;
    tx.put("ns/a", cm("ns", "a", "2"))?;
    tx.delete("ns/b")?;
    drop(tx);
    // at `first`: only a, with its first value
    let p = rs.list_page(&store, &query("", None, Some(first), None));
    let p = p.map_err(|_| StoreError::Encode(serde::de::Error::custom("too old")))?;
    assert_eq!(names(&p), ["a"]);
    assert_eq!(
        p.items.first().map(|o| o.value()["data"]["v"].clone()),
        Some(json!("1"))
    );
    let mut tx = rs.write(&store);
    tx.put("ns/c", cm("ns", "c", "1"))?;
    drop(tx);
    // the first event was evicted: that state is gone
    assert!(matches!(
        rs.list_page(&store, &query("", None, Some(first), None)),
        Err(TooOld { .. })
    ));
    store.compact();
    assert!(rs.seq_after(first + 1).is_err());
    Ok(())
}

#[test]
fn owner_index_tracks_dependents() -> Result<(), StoreError> {
    let store = Store::new(10);
    let rs = store.ensure_resource(&key());
    let mut owned = cm("ns", "child", "1");
    owned["metadata"]["ownerReferences"] =
        json!([{"uid": "owner-1", "name": "o", "kind": "X", "apiVersion": "v1"}]);
    owned["metadata"]["uid"] = json!("child-uid");
    let mut tx = rs.write(&store);
    tx.put("ns/child", owned)?;
    drop(tx);
    assert_eq!(
        store.dependents_of("owner-1"),
        vec![(key(), "ns/child".to_owned())]
    );
    assert_eq!(
        store.locate_uid("child-uid"),
        Some((key(), "ns/child".to_owned()))
    );
    rs.write(&store).delete("ns/child")?;
    assert!(store.dependents_of("owner-1").is_empty());
    assert_eq!(store.locate_uid("child-uid"), None);
    Ok(())
}

mod owners {
    //! The owner index against the objects: after any sequence of writes
    //! (same or new uid, same, reordered or other owners, other fields)
    //! and deletes, `locate_uid` and `dependents_of` answer what a scan of
    //! the stored objects answers.

    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        /// key, uid, owner uids, data value
        Put(u8, u8, Vec<u8>, u8),
        Delete(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        let owners = proptest::collection::vec(0u8..4, 0..3);
        prop_oneof![
            4 => (0u8..5, 0u8..3, owners, 0u8..3).prop_map(|(k, u, o, v)| Op::Put(k, u, o, v)),
            1 => (0u8..5).prop_map(Op::Delete),
        ]
    }

    fn object(k: u8, uid: &str, owners: &[u8], v: u8) -> Value {
        let mut o = cm("ns", &format!("o{k}"), &v.to_string());
        o["metadata"]["uid"] = json!(uid);
        if !owners.is_empty() {
            let refs: Vec<Value> = owners
                .iter()
                .map(|u| json!({"apiVersion": "v1", "kind": "X", "name": format!("x{u}"), "uid": format!("owner-{u}")}))
                .collect();
            o["metadata"]["ownerReferences"] = json!(refs);
        }
        o
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn index_matches_the_objects(ops in proptest::collection::vec(op(), 1..40)) {
            let store = Store::new(10);
            let rs = store.ensure_resource(&super::key());
            // uids are unique per object, as the server hands them out:
            // the uid of key `k` changes only with a generation counter
            let mut generation = [0u32; 5];
            for o in ops {
                let mut tx = rs.write(&store);
                match o {
                    Op::Put(k, new_uid, owners, v) => {
                        let g = generation.get_mut(usize::from(k)).ok_or_else(|| TestCaseError::fail("key"))?;
                        if new_uid == 0 || tx.get(&format!("ns/o{k}")).is_none() {
                            *g += 1;
                        }
                        let uid = format!("uid-{k}-{g}");
                        tx.put(&format!("ns/o{k}"), object(k, &uid, &owners, v)).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    }
                    Op::Delete(k) => {
                        tx.delete(&format!("ns/o{k}")).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    }
                }
                drop(tx);
                let stored: Vec<Arc<StoredObject>> = (0..5).filter_map(|k| rs.get(&format!("ns/o{k}"))).collect();
                for (k, g) in generation.iter().enumerate() {
                    for old in 0..=*g {
                        let uid = format!("uid-{k}-{old}");
                        let want = stored.iter().find(|o| o.uid() == uid).map(|o| (super::key(), o.key().to_owned()));
                        prop_assert_eq!(store.locate_uid(&uid), want, "uid {}", uid);
                    }
                }
                for u in 0..4 {
                    let owner = format!("owner-{u}");
                    let mut got = store.dependents_of(&owner);
                    got.sort();
                    let want: Vec<ObjectLocation> = stored
                        .iter()
                        .filter(|o| meta::owner_uids(o.value()).contains(&owner))
                        .map(|o| (super::key(), o.key().to_owned()))
                        .collect();
                    prop_assert_eq!(got, want, "owner {}", owner);
                }
            }
        }
    }
}

mod model {
    //! The store against a plain model: after any sequence of writes, a
    //! list at any resourceVersion still inside the window equals the
    //! model's state at that version, and pages of any size concatenate to
    //! the full list.

    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap as Model;

    #[derive(Debug, Clone)]
    enum Op {
        Put(u8, u8),
        Delete(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u8..12, any::<u8>()).prop_map(|(k, v)| Op::Put(k, v)),
            1 => (0u8..12).prop_map(Op::Delete),
        ]
    }

    fn key(k: u8) -> String {
        format!("ns{}/k{k:02}", k % 3)
    }

    fn page_all(
        rs: &ResourceStore,
        store: &Store,
        prefix: &str,
        at: u64,
        size: usize,
    ) -> Result<Vec<(String, String)>, TooOld> {
        let mut out = Vec::new();
        let mut start = None;
        loop {
            let q = ListQuery {
                prefix: prefix.into(),
                start: start.clone(),
                at_rv: Some(at),
                limit: Some(size),
                filter: &all,
                count_remaining: true,
            };
            let p = rs.list_page(store, &q)?;
            out.extend(p.items.iter().map(|o| {
                (
                    o.key().to_owned(),
                    o.value()["data"]["v"].as_str().unwrap_or("").to_owned(),
                )
            }));
            match p.last_key {
                Some(k) => start = Some(format!("{k}\u{0}")),
                None => return Ok(out),
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn lists_read_past_states_exactly(ops in proptest::collection::vec(op(), 1..60), window in 1usize..40, size in 1usize..5) {
            let store = Store::new(window);
            let rs = store.ensure_resource(&super::key());
            let mut model: Model<String, String> = Model::new();
            let mut states: Vec<(u64, Model<String, String>)> = vec![(store.current_rv(), model.clone())];
            for o in ops {
                let mut tx = rs.write(&store);
                match o {
                    Op::Put(k, v) => {
                        let name = key(k);
                        let (ns, n) = name.split_once('/').unwrap_or(("", ""));
                        tx.put(&name, cm(ns, n, &v.to_string())).map_err(|e| TestCaseError::fail(e.to_string()))?;
                        model.insert(name, v.to_string());
                    }
                    Op::Delete(k) => {
                        if tx.delete(&key(k)).map_err(|e| TestCaseError::fail(e.to_string()))?.is_some() {
                            model.remove(&key(k));
                        }
                    }
                }
                drop(tx);
                states.push((store.current_rv(), model.clone()));
            }
            let mut readable = std::collections::BTreeSet::new();
            for (rv, state) in &states {
                let want: Vec<(String, String)> = state.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                match page_all(&rs, &store, "", *rv, size) {
                    Ok(got) => {
                        prop_assert_eq!(got, want);
                        readable.insert(*rv);
                    }
                    Err(TooOld { floor }) => prop_assert!(*rv < floor),
                }
                let ns1: Vec<(String, String)> = state.iter().filter(|(k, _)| k.starts_with("ns1/")).map(|(k, v)| (k.strip_prefix("ns1/").unwrap_or(k).to_owned(), v.clone())).collect();
                if let Ok(got) = page_all(&rs, &store, "ns1/", *rv, size) {
                    let got: Vec<(String, String)> = got.into_iter().map(|(k, v)| (k.strip_prefix("ns1/").unwrap_or(&k).to_owned(), v)).collect();
                    prop_assert_eq!(got, ns1);
                }
            }
            // the window keeps the states of its last `window` writes readable
            let distinct: std::collections::BTreeSet<u64> = states.iter().map(|s| s.0).collect();
            prop_assert!(readable.len() >= distinct.len().min(window + 1), "{} of {} readable, window {}", readable.len(), distinct.len(), window);
            // the latest state is always readable
            let latest = states.last().map(|s| s.0).unwrap_or(0);
            prop_assert!(page_all(&rs, &store, "", latest, size).is_ok());
        }
    }
}
