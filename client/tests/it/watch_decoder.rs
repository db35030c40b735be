//! The watch decoder against its contract: the same events whatever the
//! chunking (every single split position, and random multi-splits), frame
//! size limits, corrupt frames and transport errors ending the stream after
//! one error item, and arbitrary bytes never panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_client::{Error, WatchEvent, WatchStream};
use proptest::prelude::*;
use serde_json::json;

fn decode(chunks: Vec<Bytes>, limit: usize) -> Vec<Result<WatchEvent<ConfigMap>, Error>> {
    let source = futures::stream::iter(chunks.into_iter().map(Ok));
    futures::executor::block_on(WatchStream::<ConfigMap>::new(source, limit).collect())
}

fn ok_events(items: Vec<Result<WatchEvent<ConfigMap>, Error>>) -> Vec<WatchEvent<ConfigMap>> {
    items.into_iter().map(Result::unwrap).collect()
}

fn event(kind: &str, name: &str, rv: u32, value: &str) -> serde_json::Value {
    json!({"type": kind, "object": {"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv.to_string()},
        "data": {"value": value}}})
}

fn body_of(events: &[serde_json::Value]) -> Vec<u8> {
    let mut body = Vec::new();
    for e in events {
        serde_json::to_writer(&mut body, e).unwrap();
        body.push(b'\n');
    }
    body
}

fn sample_body() -> Vec<u8> {
    body_of(&[
        event("ADDED", "a", 1, "plain"),
        event(
            "MODIFIED",
            "a",
            2,
            "with\nnewline and \"quotes\" and ünïcödé ✓",
        ),
        json!({"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"resourceVersion": "3", "annotations": {"k8s.io/initial-events-end": "true"}}}}),
        event("DELETED", "a", 4, ""),
        json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "code": 410, "reason": "Expired",
            "message": "too old resource version: 1 (4)"}}),
    ])
}

#[test]
fn every_single_split_position_gives_the_same_events() {
    let body = sample_body();
    let whole = ok_events(decode(vec![Bytes::from(body.clone())], 1 << 20));
    assert_eq!(whole.len(), 5);
    for split in 0..=body.len() {
        let chunks = vec![
            Bytes::copy_from_slice(&body[..split]),
            Bytes::copy_from_slice(&body[split..]),
        ];
        assert_eq!(
            ok_events(decode(chunks, 1 << 20)),
            whole,
            "split at {split}"
        );
    }
}

#[test]
fn one_byte_chunks_give_the_same_events() {
    let body = sample_body();
    let whole = ok_events(decode(vec![Bytes::from(body.clone())], 1 << 20));
    let bytes: Vec<Bytes> = body.iter().map(|b| Bytes::copy_from_slice(&[*b])).collect();
    assert_eq!(ok_events(decode(bytes, 1 << 20)), whole);
}

fn split_at(body: &[u8], mut points: Vec<usize>) -> Vec<Bytes> {
    points.iter_mut().for_each(|p| *p %= body.len() + 1);
    points.sort_unstable();
    let mut chunks = Vec::new();
    let mut start = 0;
    for p in points {
        chunks.push(Bytes::copy_from_slice(&body[start..p]));
        start = p;
    }
    chunks.push(Bytes::copy_from_slice(&body[start..]));
    chunks
}

#[test]
fn frame_size_limit_is_exact() {
    let frame = serde_json::to_vec(&event("ADDED", "a", 1, "x")).unwrap();
    let body = Bytes::from([frame.as_slice(), b"\n"].concat());
    assert!(decode(vec![body.clone()], frame.len())[0].is_ok());
    let items = decode(vec![body], frame.len() - 1);
    assert_eq!(items.len(), 1);
    assert!(matches!(items[0], Err(Error::FrameTooLarge { .. })));
}

#[test]
fn an_unterminated_oversized_frame_fails_without_buffering_it_all() {
    // 100 chunks of 1 KiB and no newline, limit 4 KiB: the error comes
    // after about 4 KiB, and the rest of the input is never read.
    let read = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = read.clone();
    let source = futures::stream::iter((0..100).map(move |_| {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(Bytes::from(vec![b'x'; 1024]))
    }));
    let items: Vec<_> =
        futures::executor::block_on(WatchStream::<ConfigMap>::new(source, 4096).collect());
    assert_eq!(items.len(), 1);
    assert!(matches!(
        items[0],
        Err(Error::FrameTooLarge { limit: 4096 })
    ));
    assert!(read.load(std::sync::atomic::Ordering::SeqCst) <= 5);
}

#[test]
fn a_corrupt_frame_ends_the_stream_after_one_error() {
    let mut body = body_of(&[event("ADDED", "a", 1, "x")]);
    body.extend_from_slice(b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"b\"}\n");
    body.extend_from_slice(&body_of(&[event("ADDED", "c", 3, "x")]));
    let items = decode(vec![Bytes::from(body)], 1 << 20);
    assert_eq!(items.len(), 2);
    assert!(items[0].is_ok());
    assert!(matches!(items[1], Err(Error::Decode { .. })));
}

#[test]
fn unknown_event_types_keep_their_version_and_the_stream_goes_on() {
    let mut body = b"{\"type\":\"SNAPSHOT\",\"object\":{\"metadata\":{\"resourceVersion\":\"12\"},\"x\":[1]}}\n{\"object\":{},\"type\":\"PING\"}\n".to_vec();
    body.extend_from_slice(&body_of(&[event("ADDED", "c", 13, "x")]));
    let items = decode(vec![Bytes::from(body)], 1 << 20);
    assert_eq!(items.len(), 3);
    assert!(matches!(
        &items[0],
        Ok(WatchEvent::Unknown { event_type, resource_version: Some(rv) }) if event_type == "SNAPSHOT" && rv == "12"
    ));
    assert!(matches!(
        &items[1],
        Ok(WatchEvent::Unknown { event_type, resource_version: None }) if event_type == "PING"
    ));
    assert!(matches!(&items[2], Ok(WatchEvent::Added(_))));
}

#[test]
fn wrong_shapes_are_errors() {
    for bad in [
        &b"{\"type\":\"SNAPSHOT\",\"object\":{\"metadata\":7}}\n"[..],
        b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":7}}}\n",
        b"[1,2,3]\n",
        b"null\n",
        b"\xff\xfe\n",
    ] {
        let items = decode(vec![Bytes::from_static(bad)], 1 << 20);
        assert_eq!(items.len(), 1, "{}", String::from_utf8_lossy(bad));
        assert!(items[0].is_err());
    }
}

#[test]
fn a_transport_error_ends_the_stream() {
    let first = Bytes::from(body_of(&[event("ADDED", "a", 1, "x")]));
    let chunks: Vec<Result<Bytes, Error>> = vec![
        Ok(first),
        Err(Error::Transport("connection reset".into())),
        Ok(Bytes::from(body_of(&[event("ADDED", "b", 2, "x")]))),
    ];
    let items: Vec<_> = futures::executor::block_on(
        WatchStream::<ConfigMap>::new(futures::stream::iter(chunks), 1 << 20).collect(),
    );
    assert_eq!(items.len(), 2);
    assert!(items[0].is_ok());
    assert!(matches!(items[1], Err(Error::Transport(_))));
}

#[test]
fn a_last_frame_without_newline_is_delivered() {
    let mut body = body_of(&[event("ADDED", "a", 1, "x"), event("ADDED", "b", 2, "y")]);
    body.pop();
    assert_eq!(ok_events(decode(vec![Bytes::from(body)], 1 << 20)).len(), 2);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random events, randomly chunked, decode to exactly what was encoded.
    #[test]
    fn random_events_survive_random_chunking(
        specs in prop::collection::vec(
            (prop::sample::select(vec!["ADDED", "MODIFIED", "DELETED"]), "[a-z0-9-]{1,20}", any::<u32>(), any::<String>()),
            1..12,
        ),
        points in prop::collection::vec(any::<usize>(), 0..24),
        crlf in any::<bool>(),
    ) {
        let events: Vec<_> = specs.iter().map(|(k, n, rv, v)| event(k, n, *rv, v)).collect();
        let mut body = body_of(&events);
        if crlf {
            body = String::from_utf8(body).unwrap().replace('\n', "\r\n").into_bytes();
        }
        let decoded = ok_events(decode(split_at(&body, points), 1 << 20));
        prop_assert_eq!(decoded.len(), specs.len());
        for (got, (kind, name, rv, value)) in decoded.iter().zip(&specs) {
            prop_assert_eq!(got.type_name(), *kind);
            let (WatchEvent::Added(cm) | WatchEvent::Modified(cm) | WatchEvent::Deleted(cm)) = got else {
                return Err(TestCaseError::fail("unexpected event kind"));
            };
            prop_assert_eq!(cm.metadata.name.as_deref(), Some(name.as_str()));
            prop_assert_eq!(cm.metadata.resource_version.clone(), Some(rv.to_string()));
            prop_assert_eq!(cm.data.as_ref().and_then(|d| d.get("value")), Some(value));
        }
    }

    /// Arbitrary bytes never panic; an error is always the last item.
    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
        points in prop::collection::vec(any::<usize>(), 0..8),
        limit in 1usize..4096,
    ) {
        let items = decode(split_at(&bytes, points), limit);
        if let Some(pos) = items.iter().position(Result::is_err) {
            prop_assert_eq!(pos, items.len() - 1);
        }
    }

    /// Valid bodies with one byte flipped never panic either.
    #[test]
    fn corrupted_valid_bodies_never_panic(at in any::<usize>(), byte in any::<u8>(), points in prop::collection::vec(any::<usize>(), 0..8)) {
        let mut body = sample_body();
        let at = at % body.len();
        body[at] = byte;
        let items = decode(split_at(&body, points), 1 << 20);
        if let Some(pos) = items.iter().position(Result::is_err) {
            prop_assert_eq!(pos, items.len() - 1);
        }
    }
}
