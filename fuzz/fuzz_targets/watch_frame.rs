//! The watch stream's frame decoder and event decoding: the input is cut
//! into chunks at points the input chooses, with a small frame limit so the
//! size checks are reached. Every frame must be within the limit and hold no
//! newline; decoding an event must return, never panic.
#![no_main]

use bytes::Bytes;
use kcontrol_client::watch::{decode_event, FrameDecoder};
use kcontrol_client::WatchEvent;
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use libfuzzer_sys::fuzz_target;

fn check(frame: &Bytes, limit: usize) {
    assert!(
        frame.len() <= limit,
        "frame of {} bytes over the limit {limit}",
        frame.len()
    );
    assert!(!frame.contains(&b'\n'), "a frame holds a newline");
    if let Ok(event) = decode_event::<ConfigMap>(frame) {
        if let WatchEvent::Bookmark(b) = &event {
            let _ = b.resource_version();
        }
    }
    let _ = decode_event::<serde_json::Value>(frame);
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    // Limit 16..=4111 bytes; chunk length 1..=16 times the low bits.
    let limit = 16 + usize::from(control) * 16;
    let step = 1 + usize::from(control & 0x0f) * 7;
    let mut decoder = FrameDecoder::new(limit);
    for chunk in rest.chunks(step) {
        decoder.push(Bytes::copy_from_slice(chunk));
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => check(&frame, limit),
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    if let Ok(Some(frame)) = decoder.finish() {
        check(&frame, limit);
    }
});
