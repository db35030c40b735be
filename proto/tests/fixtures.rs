//! On the bytes a real kube-apiserver 1.36 sent (shared/fixtures): every one
//! of the 100,000 ConfigMaps decoded from the protobuf list equals the one
//! decoded from the JSON list, into k8s-openapi's `ConfigMap`,
//! `CompactConfigMap` and `PartialObjectMetadata<ConfigMap>`; the same for
//! the WatchList streams and the metadata-only lists (whose ObjectMeta,
//! managedFields stripped, is decoded straight from the bytes).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::fmt::Debug;

use bytes::Bytes;
use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_fixtures as fixtures;
use kcontrol_indexer::compact::CompactConfigMap;
use kcontrol_indexer::PartialObjectMetadata;
use kcontrol_proto::{from_object, ListDecoder, ListPart};
use serde::de::{DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// A fixture's bytes; `None` (the test is skipped, saying why) when the
/// fixtures are not beside the project (a clean clone, CI).
fn fixture(name: &str) -> Option<Vec<u8>> {
    match fixtures::load(name) {
        Some(bytes) => Some(bytes.expect("read the fixture")),
        None => {
            println!(
                "skipped: no {name} in shared/fixtures/kube-apiserver-1.36 beside the project (or $KCONTROL_FIXTURES)"
            );
            None
        }
    }
}

/// Calls `each` for every element of a JSON list's `items`, one at a time.
struct EachItem<F>(F);

impl<'de, F: FnMut(&serde_json::value::RawValue)> Visitor<'de> for EachItem<F> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list")
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" {
                map.next_value_seed(Items(&mut self.0))?;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

struct Items<'a, F>(&'a mut F);

impl<'de, F: FnMut(&serde_json::value::RawValue)> DeserializeSeed<'de> for Items<'_, F> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, F: FnMut(&serde_json::value::RawValue)> Visitor<'de> for Items<'_, F> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("items")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element::<&serde_json::value::RawValue>()? {
            (self.0)(item);
        }
        Ok(())
    }
}

/// The protobuf list's items, cut in 16 KiB chunks as a body arrives.
fn pb_items(body: &[u8]) -> (Vec<Bytes>, &'static kcontrol_proto::Message) {
    let mut decoder = ListDecoder::new(1 << 20);
    let mut items = Vec::new();
    for chunk in body.chunks(16 * 1024) {
        decoder.push(Bytes::copy_from_slice(chunk));
        while let Some(part) = decoder.next_part().unwrap() {
            if let ListPart::Item(b) = part {
                items.push(b);
            }
        }
    }
    decoder.finish().unwrap();
    (items, decoder.item().unwrap())
}

/// Compares every item of the two lists decoded into `T` (by `same`).
fn compare_lists<T: DeserializeOwned + Debug>(
    json: &[u8],
    pb: &[u8],
    same: impl Fn(&T, &T) -> bool,
) -> usize {
    let (items, schema) = pb_items(pb);
    let mut n = 0;
    let mut de = serde_json::Deserializer::from_slice(json);
    serde::Deserializer::deserialize_map(
        &mut de,
        EachItem(|raw: &serde_json::value::RawValue| {
            let want: T = serde_json::from_str(raw.get()).unwrap();
            let got: T = kcontrol_proto::from_slice(&items[n], schema).unwrap();
            assert!(
                same(&want, &got),
                "item {n}: JSON {want:?}\nprotobuf {got:?}"
            );
            n += 1;
        }),
    )
    .unwrap();
    assert_eq!(n, items.len());
    n
}

fn compact_eq(a: &CompactConfigMap, b: &CompactConfigMap) -> bool {
    a.metadata == b.metadata
        && a.data == b.data
        && a.binary_data == b.binary_data
        && a.immutable == b.immutable
}

#[test]
fn every_configmap_of_the_protobuf_list_equals_the_json_one() {
    let (Some(json), Some(pb)) = (fixture("list.json"), fixture("list.pb")) else {
        return;
    };
    assert_eq!(
        compare_lists::<ConfigMap>(&json, &pb, PartialEq::eq),
        100_000
    );
    assert_eq!(
        compare_lists::<CompactConfigMap>(&json, &pb, compact_eq),
        100_000
    );
    assert_eq!(
        compare_lists::<PartialObjectMetadata<ConfigMap>>(&json, &pb, PartialEq::eq),
        100_000
    );
}

#[test]
fn every_item_of_the_protobuf_metadata_list_equals_the_json_one() {
    let (Some(json), Some(pb)) = (fixture("meta.json"), fixture("meta.pb")) else {
        return;
    };
    assert_eq!(
        compare_lists::<PartialObjectMetadata<ConfigMap>>(&json, &pb, PartialEq::eq),
        100_000
    );
}

#[test]
fn every_item_of_the_protobuf_metadata_list_decodes_directly_as_by_the_serde_walk() {
    let Some(pb) = fixture("meta.pb") else {
        return;
    };
    let (items, schema) = pb_items(&pb);
    let strip = kcontrol_proto::DecodeOptions::default().strip_managed_fields(true);
    for (n, item) in items.iter().enumerate() {
        // without stripping, the serde walk decodes the managedFields too
        let mut walk: PartialObjectMetadata<ConfigMap> =
            kcontrol_proto::from_slice(item, schema).unwrap();
        assert!(walk.metadata.managed_fields.is_some(), "item {n}");
        walk.metadata.managed_fields = None;
        let direct: PartialObjectMetadata<ConfigMap> =
            kcontrol_proto::from_slice_with(item, schema, strip).unwrap();
        assert_eq!(direct, walk, "item {n}");
    }
    assert_eq!(items.len(), 100_000);
}

/// The events of a protobuf watch stream: (type, enveloped object).
fn pb_events(body: &[u8]) -> Vec<(String, Bytes)> {
    let mut decoder = kcontrol_proto::watch::FrameDecoder::new(1 << 20);
    let mut out = Vec::new();
    for chunk in body.chunks(16 * 1024) {
        decoder.push(Bytes::copy_from_slice(chunk));
        while let Some(frame) = decoder.next_frame().unwrap() {
            let e = kcontrol_proto::watch::event(&frame).unwrap();
            let object = frame.slice_ref(e.object);
            out.push((e.event_type.to_owned(), object));
        }
    }
    out
}

#[derive(Deserialize)]
struct JsonEvent<T> {
    #[serde(rename = "type")]
    event_type: String,
    object: T,
}

fn compare_watch<T: DeserializeOwned + Debug>(
    json: &[u8],
    pb: &[u8],
    same: impl Fn(&T, &T) -> bool,
) {
    let events = pb_events(pb);
    let lines: Vec<&[u8]> = json
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(lines.len(), events.len());
    assert_eq!(events.len(), 100_001);
    for (i, (line, (event_type, object))) in lines.iter().zip(&events).enumerate() {
        let want: JsonEvent<serde_json::Value> = serde_json::from_slice(line).unwrap();
        assert_eq!(&want.event_type, event_type, "event {i}");
        if event_type == "ADDED" {
            let want: JsonEvent<T> = serde_json::from_slice(line).unwrap();
            let got: T = from_object(object).unwrap();
            assert!(
                same(&want.object, &got),
                "event {i}: JSON {:?}\nprotobuf {got:?}",
                want.object
            );
        } else {
            // the end bookmark: the same JSON but for its resourceVersion
            // (the two streams were captured one after the other)
            let mut got: serde_json::Value = from_object(object).unwrap();
            let mut want = want.object;
            let rv = |v: &mut serde_json::Value| {
                v["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("resourceVersion")
            };
            assert!(rv(&mut got)
                .unwrap()
                .as_str()
                .is_some_and(|v| !v.is_empty()));
            assert!(rv(&mut want).is_some());
            assert_eq!(want, got, "event {i}");
        }
    }
}

#[test]
fn every_event_of_the_protobuf_watchlist_equals_the_json_one() {
    let (Some(json), Some(pb)) = (fixture("watchlist.json"), fixture("watchlist.pb")) else {
        return;
    };
    compare_watch::<ConfigMap>(&json, &pb, PartialEq::eq);
    compare_watch::<CompactConfigMap>(&json, &pb, compact_eq);
}
