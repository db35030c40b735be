//! The two candidate protobuf decoders, measured on the bytes a real
//! kube-apiserver 1.36 sent for 100,000 ConfigMaps (shared/fixtures), beside
//! serde_json on the JSON list in the same run:
//! (a) prost decoding each item into k8s-pb's `ConfigMap`, then converting
//!     it to the cached type (k8s-openapi `ConfigMap`; `CompactConfigMap`
//!     and `PartialObjectMetadata` from that);
//! (b) kcontrol-proto's Deserializer, straight into the cached type.
//! Items are cut from the body first (both decoders get the same item
//! bytes); CPU seconds of the decoding only, best of 3.
//!
//! `cargo run --release -p kcontrol-proto --example candidates`
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use bytes::Bytes;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::ByteString;
use kcontrol_fixtures::{cpu_seconds, load};
use kcontrol_indexer::compact::CompactConfigMap;
use kcontrol_indexer::PartialObjectMetadata;
use kcontrol_proto::{ListDecoder, ListPart};
use prost::Message as _;
use serde::de::DeserializeOwned;

fn pb_items(body: &[u8]) -> (Vec<Bytes>, &'static kcontrol_proto::Message) {
    let mut decoder = ListDecoder::new(1 << 20);
    decoder.push(Bytes::copy_from_slice(body));
    let mut items = Vec::new();
    while let Some(part) = decoder.next_part().unwrap() {
        if let ListPart::Item(b) = part {
            items.push(b);
        }
    }
    (items, decoder.item().unwrap())
}

fn json_items(body: &[u8]) -> Vec<Box<serde_json::value::RawValue>> {
    #[derive(serde::Deserialize)]
    struct List {
        items: Vec<Box<serde_json::value::RawValue>>,
    }
    serde_json::from_slice::<List>(body).unwrap().items
}

// ---- (a): prost, then conversion (ConfigMap and what it holds) ----

fn time(t: Option<k8s_pb::apimachinery::pkg::apis::meta::v1::Time>) -> Option<meta::Time> {
    let s = t?.seconds?;
    let ts = k8s_openapi::jiff::Timestamp::from_second(s).ok()?;
    (s != -62_135_596_800).then_some(meta::Time(ts))
}

fn nonzero(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

fn object_meta(m: k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> meta::ObjectMeta {
    let map = |m: BTreeMap<String, String>| (!m.is_empty()).then_some(m);
    meta::ObjectMeta {
        name: nonzero(m.name),
        generate_name: nonzero(m.generate_name),
        namespace: nonzero(m.namespace),
        self_link: nonzero(m.self_link),
        uid: nonzero(m.uid),
        resource_version: nonzero(m.resource_version),
        generation: m.generation.filter(|g| *g != 0),
        creation_timestamp: time(m.creation_timestamp),
        deletion_timestamp: time(m.deletion_timestamp),
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        labels: map(m.labels),
        annotations: map(m.annotations),
        owner_references: (!m.owner_references.is_empty()).then(|| {
            m.owner_references
                .into_iter()
                .map(|o| meta::OwnerReference {
                    api_version: o.api_version.unwrap_or_default(),
                    kind: o.kind.unwrap_or_default(),
                    name: o.name.unwrap_or_default(),
                    uid: o.uid.unwrap_or_default(),
                    controller: o.controller,
                    block_owner_deletion: o.block_owner_deletion,
                })
                .collect()
        }),
        finalizers: (!m.finalizers.is_empty()).then_some(m.finalizers),
        managed_fields: (!m.managed_fields.is_empty()).then(|| {
            m.managed_fields
                .into_iter()
                .map(|f| meta::ManagedFieldsEntry {
                    manager: nonzero(f.manager),
                    operation: nonzero(f.operation),
                    api_version: nonzero(f.api_version),
                    time: time(f.time),
                    fields_type: nonzero(f.fields_type),
                    fields_v1: f.fields_v1.and_then(|v| {
                        serde_json::from_slice(&v.raw.unwrap_or_default())
                            .ok()
                            .map(meta::FieldsV1)
                    }),
                    subresource: nonzero(f.subresource),
                })
                .collect()
        }),
    }
}

fn prost_configmap(item: &[u8]) -> ConfigMap {
    let cm = k8s_pb::api::core::v1::ConfigMap::decode(item).unwrap();
    ConfigMap {
        metadata: cm.metadata.map(object_meta).unwrap_or_default(),
        data: (!cm.data.is_empty()).then_some(cm.data),
        binary_data: (!cm.binary_data.is_empty()).then(|| {
            cm.binary_data
                .into_iter()
                .map(|(k, v)| (k, ByteString(v)))
                .collect()
        }),
        immutable: cm.immutable,
    }
}

// ---- the measurement ----

fn best_of_3(mut work: impl FnMut() -> usize) -> f64 {
    (0..3)
        .map(|_| {
            let start = cpu_seconds();
            let n = work();
            assert_eq!(n, 100_000);
            cpu_seconds() - start
        })
        .fold(f64::INFINITY, f64::min)
}

/// Decodes every item with `decode`, keeping each result from being
/// optimised away; the number of items.
fn each<I, T>(items: &[I], decode: impl Fn(&I) -> T) -> usize {
    for item in items {
        std::hint::black_box(decode(item));
    }
    items.len()
}

fn direct<T: DeserializeOwned>(items: &[Bytes], schema: &'static kcontrol_proto::Message) -> f64 {
    best_of_3(|| {
        each(items, |b| {
            kcontrol_proto::from_slice::<T>(b, schema).unwrap()
        })
    })
}

fn json<T: DeserializeOwned>(items: &[Box<serde_json::value::RawValue>]) -> f64 {
    best_of_3(|| each(items, |i| serde_json::from_str::<T>(i.get()).unwrap()))
}

fn main() {
    let (Some(json_body), Some(pb_body)) = (load("list.json"), load("list.pb")) else {
        println!("no shared/fixtures/kube-apiserver-1.36 (set KCONTROL_FIXTURES)");
        return;
    };
    let (json_body, pb_body) = (json_body.unwrap(), pb_body.unwrap());
    let jitems = json_items(&json_body);
    let (pitems, schema) = pb_items(&pb_body);
    // the two decoders agree
    assert_eq!(
        prost_configmap(&pitems[7]),
        kcontrol_proto::from_slice::<ConfigMap>(&pitems[7], schema).unwrap()
    );
    println!("decode of 100,000 ConfigMaps from kube-apiserver's list (CPU s, best of 3)");
    println!(
        "{:<34} {:>8} {:>10} {:>10} {:>8} {:>8}",
        "cached type", "JSON", "(a) prost", "(b) direct", "a/JSON", "b/JSON"
    );
    let rows: [(&str, f64, f64, f64); 3] = [
        (
            "ConfigMap",
            json::<ConfigMap>(&jitems),
            best_of_3(|| each(&pitems, |b| prost_configmap(b))),
            direct::<ConfigMap>(&pitems, schema),
        ),
        (
            "CompactConfigMap",
            json::<CompactConfigMap>(&jitems),
            best_of_3(|| each(&pitems, |b| CompactConfigMap::from(&prost_configmap(b)))),
            direct::<CompactConfigMap>(&pitems, schema),
        ),
        (
            "PartialObjectMetadata<ConfigMap>",
            json::<PartialObjectMetadata<ConfigMap>>(&jitems),
            best_of_3(|| {
                each(&pitems, |b| {
                    PartialObjectMetadata::<ConfigMap>::new(prost_configmap(b).metadata)
                })
            }),
            direct::<PartialObjectMetadata<ConfigMap>>(&pitems, schema),
        ),
    ];
    for (name, j, a, b) in rows {
        println!(
            "{name:<34} {j:>8.2} {a:>10.2} {b:>10.2} {:>8.2} {:>8.2}",
            a / j,
            b / j
        );
    }
}
