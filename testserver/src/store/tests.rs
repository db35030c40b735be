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
    assert_eq!(a.kind, WatchEventType::Added);
    assert_eq!(b.kind, WatchEventType::Modified);
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
    assert_eq!(deleted, Some((WatchEventType::Deleted, c.unwrap_or(0))));
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
    //! list at any resourceVersion still inside the window, of one
    //! namespace or of all, in pages of any size, is the model's state at
    //! that version page by page: each page the next `size` keys, its
    //! continue key the last of them, its remainingItemCount the number of
    //! keys after it. Filtered, the pages hold the next `size` matching
    //! objects, continue while any key follows, and carry no count.

    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap as Model;

    /// Namespaces whose keys interleave: `a-b/..` < `a/..` < `a0/..` <
    /// `ab/..` in key order, and `a` starts the others' names.
    const NAMESPACES: [&str; 5] = ["a", "a-b", "a0", "ab", "b"];

    #[derive(Debug, Clone)]
    enum Op {
        Put(usize, u8, u8),
        Delete(usize, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        let ns = 0..NAMESPACES.len();
        prop_oneof![
            3 => (ns.clone(), 0u8..6, any::<u8>()).prop_map(|(n, k, v)| Op::Put(n, k, v)),
            1 => (ns, 0u8..6).prop_map(|(n, k)| Op::Delete(n, k)),
        ]
    }

    fn key(ns: usize, name: u8) -> (String, String) {
        let ns = NAMESPACES.get(ns).copied().unwrap_or("z");
        (format!("{ns}/n{name}"), ns.to_owned())
    }

    fn value_of(o: &StoredObject) -> String {
        o.value()["data"]["v"].as_str().unwrap_or("").to_owned()
    }

    fn even(v: &str) -> bool {
        v.parse::<u8>().is_ok_and(|v| v % 2 == 0)
    }

    fn even_object(o: &StoredObject) -> bool {
        even(&value_of(o))
    }

    /// One page as the model and the store see it: (key, value) items,
    /// continue key (relative to the prefix), remaining count.
    type Page = (Vec<(String, String)>, Option<String>, Option<u64>);

    /// The pages of the model's list of `prefix` in pages of `size`.
    fn model_pages(
        state: &Model<String, String>,
        prefix: &str,
        size: usize,
        filtered: bool,
    ) -> Vec<Page> {
        let listed: Vec<(&String, &String)> = state
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .collect();
        let mut pages = Vec::new();
        let mut from = 0;
        loop {
            let taken: Vec<usize> = (from..listed.len())
                .filter(|i| !filtered || listed.get(*i).is_some_and(|(_, v)| even(v)))
                .take(size)
                .collect();
            let items = taken
                .iter()
                .filter_map(|i| listed.get(*i))
                .map(|(k, v)| ((*k).clone(), (*v).clone()))
                .collect();
            let after = taken.last().map_or(listed.len(), |i| i + 1);
            let more = taken.len() == size && after < listed.len();
            if !more {
                pages.push((items, None, None));
                return pages;
            }
            let last = listed.get(after - 1).map(|(k, _)| k.as_str()).unwrap_or("");
            let last = last.strip_prefix(prefix).unwrap_or(last).to_owned();
            let remaining = (!filtered).then_some((listed.len() - after) as u64);
            pages.push((items, Some(last), remaining));
            from = after;
        }
    }

    /// The pages of the store's list of `prefix` at `at` in pages of `size`.
    fn store_pages(
        rs: &ResourceStore,
        store: &Store,
        prefix: &str,
        at: u64,
        size: usize,
        filtered: bool,
    ) -> Result<Vec<Page>, TooOld> {
        let mut pages = Vec::new();
        let mut start = None;
        loop {
            let q = ListQuery {
                prefix: prefix.into(),
                start: start.clone(),
                at_rv: Some(at),
                limit: Some(size),
                filter: if filtered { &even_object } else { &all },
                count_remaining: !filtered,
            };
            let p = rs.list_page(store, &q)?;
            let items = p
                .items
                .iter()
                .map(|o| (o.key().to_owned(), value_of(o)))
                .collect();
            start = p.last_key.as_ref().map(|k| format!("{k}\u{0}"));
            pages.push((items, p.last_key, p.remaining));
            if start.is_none() || pages.len() > 100 {
                return Ok(pages);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn pages_read_past_states_exactly(ops in proptest::collection::vec(op(), 1..80), window in 1usize..60, size in 1usize..6) {
            let store = Store::new(window);
            let rs = store.ensure_resource(&super::key());
            let mut model: Model<String, String> = Model::new();
            let mut states: Vec<(u64, Model<String, String>)> = vec![(store.current_rv(), model.clone())];
            for o in ops {
                let mut tx = rs.write(&store);
                match o {
                    Op::Put(ns, name, v) => {
                        let (k, ns) = key(ns, name);
                        tx.put(&k, cm(&ns, &format!("n{name}"), &v.to_string())).map_err(|e| TestCaseError::fail(e.to_string()))?;
                        model.insert(k, v.to_string());
                    }
                    Op::Delete(ns, name) => {
                        let (k, _) = key(ns, name);
                        let gone = tx.delete(&k).map_err(|e| TestCaseError::fail(e.to_string()))?;
                        prop_assert_eq!(gone.is_some(), model.remove(&k).is_some());
                    }
                }
                drop(tx);
                states.push((store.current_rv(), model.clone()));
            }
            let prefixes: Vec<String> = std::iter::once(String::new()).chain(NAMESPACES.iter().map(|n| format!("{n}/"))).collect();
            let mut readable = std::collections::BTreeSet::new();
            for (rv, state) in &states {
                for prefix in &prefixes {
                    for filtered in [false, true] {
                        match store_pages(&rs, &store, prefix, *rv, size, filtered) {
                            Ok(got) => {
                                prop_assert_eq!(got, model_pages(state, prefix, size, filtered), "prefix {:?} at {} filtered {}", prefix, rv, filtered);
                                readable.insert(*rv);
                            }
                            Err(TooOld { floor }) => prop_assert!(*rv < floor),
                        }
                    }
                }
            }
            // the window keeps the states of its last `window` writes readable
            let distinct: std::collections::BTreeSet<u64> = states.iter().map(|s| s.0).collect();
            prop_assert!(readable.len() >= distinct.len().min(window + 1), "{} of {} readable, window {}", readable.len(), distinct.len(), window);
            // the latest state is always readable
            let latest = states.last().map(|s| s.0).unwrap_or(0);
            prop_assert!(store_pages(&rs, &store, "", latest, size, false).is_ok());
        }
    }
}
