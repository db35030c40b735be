//! Properties of the decoder: arbitrary bytes never panic (every entry
//! point returns an error or a value), and arbitrary ConfigMaps encoded by
//! prost (k8s-pb's messages, as kube-apiserver's Go code writes them: Go
//! non-pointer scalars always present) decode to exactly the k8s-openapi
//! object their JSON would be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use bytes::Bytes;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pbmeta;
use kcontrol_indexer::compact::CompactConfigMap;
use kcontrol_indexer::PartialObjectMetadata;
use kcontrol_proto::{
    from_object, from_object_with, from_slice, from_slice_with, kind, DecodeOptions, ListDecoder,
};
use proptest::prelude::*;
use prost::Message as _;

fn schema() -> &'static kcontrol_proto::Message {
    kind("v1", "ConfigMap").unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), step in 1usize..64) {
        let _ = from_slice::<ConfigMap>(&bytes, schema());
        let _ = from_slice::<serde_json::Value>(&bytes, schema());
        let _ = from_slice::<CompactConfigMap>(&bytes, schema());
        let mut enveloped = b"k8s\0".to_vec();
        enveloped.extend_from_slice(&bytes);
        let _ = from_object::<serde_json::Value>(&enveloped);
        let _ = from_object::<ConfigMap>(&bytes);
        let _ = kcontrol_proto::watch::event(&bytes);
        for body in [&bytes, &enveloped] {
            let mut list = ListDecoder::new(256);
            let mut frames = kcontrol_proto::watch::FrameDecoder::new(256);
            for chunk in body.chunks(step) {
                list.push(Bytes::copy_from_slice(chunk));
                frames.push(Bytes::copy_from_slice(chunk));
                while let Ok(Some(part)) = list.next_part() {
                    if let (kcontrol_proto::ListPart::Item(b), Some(item)) = (&part, list.item()) {
                        let _ = from_slice::<ConfigMap>(b, item);
                    }
                }
                while let Ok(Some(frame)) = frames.next_frame() {
                    if let Ok(e) = kcontrol_proto::watch::event(&frame) {
                        let _ = from_object::<serde_json::Value>(e.object);
                    }
                }
            }
            let _ = list.finish();
        }
    }

    #[test]
    fn prost_encoded_configmaps_decode_as_their_json(cm in configmap()) {
        let bytes = cm.encode_to_vec();
        let want = expected(cm);
        let got: ConfigMap = from_slice(&bytes, schema()).unwrap();
        prop_assert_eq!(&got, &want);
        // and the generic form of the enveloped object equals the object's JSON
        let value: serde_json::Value = from_object(&enveloped(bytes)).unwrap();
        prop_assert_eq!(value, serde_json::to_value(&want).unwrap());
    }

    /// Skipping managedFields unread gives the object decoded whole with
    /// its managedFields dropped, and nothing else changed.
    #[test]
    fn stripping_managed_fields_equals_dropping_them_after(cm in configmap()) {
        let bytes = cm.encode_to_vec();
        let mut want = expected(cm);
        want.metadata.managed_fields = None;
        let strip = DecodeOptions::default().strip_managed_fields(true);
        let got: ConfigMap = from_slice_with(&bytes, schema(), strip).unwrap();
        prop_assert_eq!(&got, &want);
        let got: ConfigMap = from_object_with(&enveloped(bytes), strip).unwrap();
        prop_assert_eq!(&got, &want);
    }

    /// A metadata-only object's ObjectMeta, decoded straight from the bytes
    /// (`object_meta`, which `PartialObjectMetadata` asks for when
    /// managedFields are stripped), equals the serde walk's and the JSON's.
    #[test]
    fn object_meta_decoded_directly_equals_the_serde_walk(cm in configmap()) {
        let item = partial(cm.metadata.clone().unwrap());
        let has_managed_fields = !cm.metadata.as_ref().unwrap().managed_fields.is_empty();
        let mut want = expected(cm).metadata;
        want.managed_fields = None;
        let strip = DecodeOptions::default().strip_managed_fields(true);
        let direct: PartialObjectMetadata<ConfigMap> =
            from_slice_with(&item, partial_schema(), strip).unwrap();
        prop_assert_eq!(&direct.metadata, &want);
        let walk: Walk = from_slice_with(&item, partial_schema(), strip).unwrap();
        prop_assert_eq!(&walk.metadata, &want);
        // kept managedFields go the serde walk's way
        let whole: PartialObjectMetadata<ConfigMap> = from_slice(&item, partial_schema()).unwrap();
        prop_assert_eq!(whole.metadata.managed_fields.is_some(), has_managed_fields);
    }

    /// On damaged bytes (one byte changed, or cut short) the direct decoder
    /// and the serde walk agree: the same ObjectMeta, or both an error.
    #[test]
    fn object_meta_on_damaged_bytes_agrees_with_the_serde_walk(
        cm in configmap(),
        at in any::<proptest::sample::Index>(),
        byte in any::<u8>(),
        cut in any::<bool>(),
    ) {
        let mut meta = cm.metadata.unwrap().encode_to_vec();
        if !meta.is_empty() {
            let i = at.index(meta.len());
            if cut { meta.truncate(i) } else { meta[i] = byte }
        }
        let item = wrap(&meta);
        let strip = DecodeOptions::default().strip_managed_fields(true);
        let direct = from_slice_with::<PartialObjectMetadata<ConfigMap>>(&item, partial_schema(), strip);
        let walk = from_slice_with::<Walk>(&item, partial_schema(), strip);
        match (direct, walk) {
            (Ok(d), Ok(w)) => prop_assert_eq!(d.metadata, w.metadata),
            (Err(_), Err(_)) => {}
            (d, w) => prop_assert!(false, "direct {:?}, walk {:?}", d.map(|d| d.metadata), w.map(|w| w.metadata)),
        }
    }
}

/// A metadata-only object decoded by the serde walk (no direct decoder).
#[derive(serde::Deserialize)]
struct Walk {
    #[serde(default)]
    metadata: meta::ObjectMeta,
}

fn partial_schema() -> &'static kcontrol_proto::Message {
    kind("meta.k8s.io/v1", "PartialObjectMetadata").unwrap()
}

/// A `PartialObjectMetadata` list item holding `metadata`.
fn partial(metadata: pbmeta::ObjectMeta) -> Vec<u8> {
    wrap(&metadata.encode_to_vec())
}

/// A `PartialObjectMetadata` list item whose field 1 holds `meta`.
fn wrap(meta: &[u8]) -> Vec<u8> {
    let mut item = vec![0x0a];
    let mut len = meta.len();
    while len >= 0x80 {
        item.push((len as u8 & 0x7f) | 0x80);
        len >>= 7;
    }
    item.push(len as u8);
    item.extend_from_slice(meta);
    item
}

/// `raw` in the envelope kube-apiserver sends: `k8s\0` + runtime.Unknown.
fn enveloped(raw: Vec<u8>) -> Vec<u8> {
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = b"k8s\0".to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[a-z0-9./-]{1,12}", "\\PC{0,8}"]
}

fn time() -> impl Strategy<Value = Option<pbmeta::Time>> {
    prop_oneof![
        Just(None),
        // Go's zero time marshals as an empty message
        Just(Some(pbmeta::Time {
            seconds: None,
            nanos: None
        })),
        (0i64..4_000_000_000).prop_map(|s| Some(pbmeta::Time {
            seconds: Some(s),
            nanos: Some(0)
        })),
    ]
}

fn configmap() -> impl Strategy<Value = k8s_pb::api::core::v1::ConfigMap> {
    let map = || proptest::collection::btree_map("[a-z./]{1,10}", text(), 0..4);
    let owner = (
        text(),
        text(),
        text(),
        text(),
        any::<Option<bool>>(),
        any::<Option<bool>>(),
    )
        .prop_map(|(a, k, n, u, c, b)| pbmeta::OwnerReference {
            api_version: Some(a),
            kind: Some(k),
            name: Some(n),
            uid: Some(u),
            controller: c,
            block_owner_deletion: b,
        });
    let managed =
        (text(), time(), "[a-z:]{0,6}").prop_map(|(m, t, f)| pbmeta::ManagedFieldsEntry {
            manager: Some(m),
            operation: Some("Update".into()),
            api_version: Some("v1".into()),
            time: t,
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(pbmeta::FieldsV1 {
                raw: Some(format!("{{\"f:{f}\":{{}}}}").into_bytes()),
            }),
            subresource: Some(String::new()),
        });
    let meta = (
        (text(), text(), text(), text(), 0i64..3, time(), time()),
        (
            any::<Option<i64>>(),
            map(),
            map(),
            proptest::collection::vec(owner, 0..2),
        ),
        (
            proptest::collection::vec("[a-z/]{1,8}", 0..3),
            proptest::collection::vec(managed, 0..2),
        ),
    )
        .prop_map(
            |(
                (name, gen_name, ns, rv, generation, created, deleted),
                (grace, labels, annotations, owners),
                (finalizers, managed),
            )| {
                pbmeta::ObjectMeta {
                    // Go non-pointer scalars: always on the wire, zero or not
                    name: Some(name),
                    generate_name: Some(gen_name),
                    namespace: Some(ns),
                    self_link: Some(String::new()),
                    uid: Some("u".into()),
                    resource_version: Some(rv),
                    generation: Some(generation),
                    creation_timestamp: created.or(Some(pbmeta::Time {
                        seconds: None,
                        nanos: None,
                    })),
                    deletion_timestamp: deleted,
                    deletion_grace_period_seconds: grace,
                    labels,
                    annotations,
                    owner_references: owners,
                    finalizers,
                    managed_fields: managed,
                }
            },
        );
    let binary = proptest::collection::btree_map(
        "[a-z]{1,5}",
        proptest::collection::vec(any::<u8>(), 0..6),
        0..3,
    );
    (meta, map(), binary, any::<Option<bool>>()).prop_map(
        |(metadata, data, binary_data, immutable)| k8s_pb::api::core::v1::ConfigMap {
            metadata: Some(metadata),
            data,
            binary_data,
            immutable,
        },
    )
}

/// What the object's JSON decodes to: Go's JSON leaves non-pointer zeros
/// (omitempty) and zero times out, keeps pointers set to zero.
fn expected(cm: k8s_pb::api::core::v1::ConfigMap) -> ConfigMap {
    let nonempty = |s: Option<String>| s.filter(|s| !s.is_empty());
    let time = |t: Option<pbmeta::Time>| {
        let s = t?.seconds?;
        Some(meta::Time(
            k8s_openapi::jiff::Timestamp::from_second(s).unwrap(),
        ))
    };
    let map = |m: BTreeMap<String, String>| (!m.is_empty()).then_some(m);
    let m = cm.metadata.unwrap();
    ConfigMap {
        metadata: meta::ObjectMeta {
            name: nonempty(m.name),
            generate_name: nonempty(m.generate_name),
            namespace: nonempty(m.namespace),
            self_link: nonempty(m.self_link),
            uid: nonempty(m.uid),
            resource_version: nonempty(m.resource_version),
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
                        api_version: o.api_version.unwrap(),
                        kind: o.kind.unwrap(),
                        name: o.name.unwrap(),
                        uid: o.uid.unwrap(),
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
                        manager: nonempty(f.manager),
                        operation: nonempty(f.operation),
                        api_version: nonempty(f.api_version),
                        time: time(f.time),
                        fields_type: nonempty(f.fields_type),
                        fields_v1: Some(meta::FieldsV1(
                            serde_json::from_slice(&f.fields_v1.unwrap().raw.unwrap()).unwrap(),
                        )),
                        subresource: nonempty(f.subresource),
                    })
                    .collect()
            }),
        },
        data: map(cm.data),
        binary_data: (!cm.binary_data.is_empty()).then(|| {
            cm.binary_data
                .into_iter()
                .map(|(k, v)| (k, k8s_openapi::ByteString(v)))
                .collect()
        }),
        immutable: cm.immutable,
    }
}
