//! Decodes the first N items of kube-apiserver 1.36's ConfigMap list
//! (shared/fixtures) one way, for instruction counts: the items are cut
//! first, then `decode_items` (never inlined) decodes each into the
//! chosen type and keeps it, so a profiler can count that function alone:
//!
//! ```sh
//! cargo build --release -p kcontrol-proto --example decode_items
//! valgrind --tool=callgrind --toggle-collect='decode_items::decode_items_*' \
//!   target/release/examples/decode_items pb configmap 10000
//! callgrind_annotate --inclusive=yes callgrind.out.<pid>
//! ```
//!
//! (The pattern names the functions: `*decode_items*` would match the
//! crate's `decode_items::main` too, and count the fixture's unpacking.)
//!
//! Arguments: encoding (`json`: serde_json on the item's bytes, as the
//! client's `ListStream` does; `pb`: kcontrol-proto; `prost`: k8s-pb's
//! message, a reference; `json-strip` and `pb-strip`: the same for a cache
//! without managedFields, as the informer's `strip_managed_fields` decodes,
//! JSON dropping them after decoding and protobuf skipping them unread), type (`configmap`, `compact`, `meta`:
//! `PartialObjectMetadata<ConfigMap>`), N (default 10,000), and `meta` to
//! read the metadata-only lists (`meta.json`, `meta.pb`) instead of the
//! full ones. Prints the CPU seconds of the decoding.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use bytes::Bytes;
use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_fixtures::{cpu_seconds, load_prefix};
use kcontrol_indexer::compact::CompactConfigMap;
use kcontrol_indexer::{KubeObject, PartialObjectMetadata};
use kcontrol_proto::{DecodeOptions, ListDecoder, ListPart, Message};
use prost::Message as _;
use serde::de::{DeserializeOwned, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// The first `n` items of a protobuf list (the prefix may end anywhere).
fn pb_items(body: Vec<u8>, n: usize) -> (Vec<Bytes>, &'static Message) {
    let mut decoder = ListDecoder::new(1 << 20);
    decoder.push(Bytes::from(body));
    let mut items = Vec::with_capacity(n);
    while items.len() < n {
        match decoder.next_part().unwrap() {
            Some(ListPart::Item(b)) => items.push(b),
            Some(ListPart::Meta(_)) => {}
            None => break,
        }
    }
    (items, decoder.item().unwrap())
}

/// The first `n` items of a JSON list, each as its own bytes.
fn json_items(body: &[u8], n: usize) -> Vec<Box<RawValue>> {
    struct List<'a>(&'a mut Vec<Box<RawValue>>, usize);
    impl<'de> Visitor<'de> for List<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                if key == "items" {
                    return map.next_value_seed(Items(self.0, self.1));
                }
                map.next_value::<serde::de::IgnoredAny>()?;
            }
            Ok(())
        }
    }
    struct Items<'a>(&'a mut Vec<Box<RawValue>>, usize);
    impl<'de> serde::de::DeserializeSeed<'de> for Items<'_> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_seq(self)
        }
    }
    impl<'de> Visitor<'de> for Items<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("items")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while self.0.len() < self.1 {
                match seq.next_element::<Box<RawValue>>()? {
                    Some(item) => self.0.push(item),
                    None => return Ok(()),
                }
            }
            // enough: stop reading the (truncated) rest
            Err(serde::de::Error::custom("enough"))
        }
    }
    let mut out = Vec::with_capacity(n);
    let mut de = serde_json::Deserializer::from_slice(body);
    let _ = serde::Deserializer::deserialize_map(&mut de, List(&mut out, n));
    out
}

#[inline(never)]
fn decode_items_json<T: KubeObject + DeserializeOwned>(
    items: &[Box<RawValue>],
    strip: bool,
    out: &mut Vec<T>,
) {
    for item in items {
        // bytes, as the client's ListStream decodes them (UTF-8 checked)
        let mut obj: T = serde_json::from_slice(item.get().as_bytes()).unwrap();
        if strip {
            obj.drop_managed_fields();
        }
        out.push(obj);
    }
}

#[inline(never)]
fn decode_items_pb<T: DeserializeOwned>(
    items: &[Bytes],
    schema: &'static Message,
    options: DecodeOptions,
    out: &mut Vec<T>,
) {
    for item in items {
        out.push(kcontrol_proto::from_slice_with(item, schema, options).unwrap());
    }
}

#[inline(never)]
fn decode_items_prost(items: &[Bytes], out: &mut Vec<k8s_pb::api::core::v1::ConfigMap>) {
    for item in items {
        out.push(k8s_pb::api::core::v1::ConfigMap::decode(item.as_ref()).unwrap());
    }
}

fn timed<T>(what: &str, n: usize, work: impl FnOnce(&mut Vec<T>)) {
    let mut out = Vec::with_capacity(n);
    let start = cpu_seconds();
    work(&mut out);
    let spent = cpu_seconds() - start;
    println!("{what}: {} items in {spent:.3} CPU s", out.len());
    black_box(&out);
}

fn run<T: KubeObject + DeserializeOwned>(encoding: &str, n: usize, meta_lists: bool) {
    let (json_name, pb_name) = if meta_lists {
        ("meta.json", "meta.pb")
    } else {
        ("list.json", "list.pb")
    };
    // about 2 KB (JSON) and 1.3 KB (protobuf) an item, with room
    let prefix = n * 2_200 + 4_096;
    let what = format!("{encoding} {}", std::any::type_name::<T>());
    let strip = encoding.ends_with("-strip");
    match encoding.trim_end_matches("-strip") {
        "json" => {
            let Some(body) = load_prefix(json_name, prefix) else {
                println!("no fixtures");
                return;
            };
            let items = json_items(&body.unwrap(), n);
            timed::<T>(&what, n, |out| decode_items_json(&items, strip, out));
        }
        "pb" => {
            let Some(body) = load_prefix(pb_name, prefix) else {
                println!("no fixtures");
                return;
            };
            let (items, schema) = pb_items(body.unwrap(), n);
            let options = DecodeOptions::default().strip_managed_fields(strip);
            timed::<T>(&what, n, |out| {
                decode_items_pb(&items, schema, options, out)
            });
        }
        "prost" => {
            let Some(body) = load_prefix(pb_name, prefix) else {
                println!("no fixtures");
                return;
            };
            let (items, _) = pb_items(body.unwrap(), n);
            timed(&what, n, |out| decode_items_prost(&items, out));
        }
        other => panic!("unknown encoding {other} (json, pb, prost, json-strip, pb-strip)"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.to_owned());
    let encoding = arg(0, "pb");
    let n: usize = arg(2, "10000").parse().unwrap();
    let meta_lists = arg(3, "") == "meta";
    match arg(1, "configmap").as_str() {
        "configmap" => run::<ConfigMap>(&encoding, n, meta_lists),
        "compact" => run::<CompactConfigMap>(&encoding, n, meta_lists),
        "meta" => run::<PartialObjectMetadata<ConfigMap>>(&encoding, n, meta_lists),
        other => panic!("unknown type {other} (configmap, compact, meta)"),
    }
}
