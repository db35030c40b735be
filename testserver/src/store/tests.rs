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
