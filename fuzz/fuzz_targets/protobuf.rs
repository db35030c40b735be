//! The protobuf decoder (kcontrol-proto): the input is cut into chunks at
//! points the input chooses and fed to the list and watch-frame decoders,
//! every part decoded into k8s-openapi's ConfigMap, the compact type and
//! serde_json's Value; the whole input also as an enveloped object and as
//! a ConfigMap message. Everything must return, never panic.
#![no_main]

use bytes::Bytes;
use kcontrol_indexer::compact::CompactConfigMap;
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_proto::watch::{event, FrameDecoder};
use kcontrol_proto::{from_object, from_slice, kind, ListDecoder, ListPart};
use libfuzzer_sys::fuzz_target;

fn object(bytes: &[u8]) {
    let _ = from_object::<ConfigMap>(bytes);
    let _ = from_object::<CompactConfigMap>(bytes);
    let _ = from_object::<serde_json::Value>(bytes);
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let step = 1 + usize::from(control & 0x3f) * 3;
    let limit = 16 + usize::from(control >> 6) * 1024;
    if let Some(schema) = kind("v1", "ConfigMap") {
        let _ = from_slice::<ConfigMap>(rest, schema);
        let _ = from_slice::<serde_json::Value>(rest, schema);
    }
    object(rest);
    let mut list = ListDecoder::new(limit);
    let mut frames = FrameDecoder::new(limit);
    for chunk in rest.chunks(step) {
        list.push(Bytes::copy_from_slice(chunk));
        frames.push(Bytes::copy_from_slice(chunk));
        while let Ok(Some(part)) = list.next_part() {
            if let (ListPart::Item(b), Some(item)) = (&part, list.item()) {
                let _ = from_slice::<ConfigMap>(b, item);
                let _ = from_slice::<serde_json::Value>(b, item);
            }
        }
        while let Ok(Some(frame)) = frames.next_frame() {
            assert!(frame.len() <= limit, "frame over the limit");
            if let Ok(e) = event(&frame) {
                object(e.object);
            }
        }
    }
    let _ = list.finish();
});
