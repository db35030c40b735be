//! The client's decoders on the bytes a real kube-apiserver 1.36 sent for
//! 100,000 ConfigMaps (shared/fixtures/kube-apiserver-1.36): the list and
//! the WatchList stream, in JSON and in protobuf, each decoded through the
//! path an informer uses (`ListStream` item by item, `WatchStream` event by
//! event, the body fed in 64 KiB chunks as it arrives) into the three
//! cached types, in one run. Prints CPU seconds (best of 3) and the ratio
//! protobuf / JSON per row (the target: ≤ 0.6), and WatchList / list.
//!
//! `cargo run --release -p kcontrol-client --example decode_fixtures [-- --json]`
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use futures::executor::block_on;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_client::{ListStream, WatchEvent, WatchStream};
use kcontrol_fixtures::{cpu_seconds, load};
use kcontrol_indexer::compact::CompactConfigMap;
use kcontrol_indexer::PartialObjectMetadata;
use serde::de::DeserializeOwned;

const CHUNK: usize = 64 * 1024;

fn chunks(
    body: &Bytes,
) -> impl futures::Stream<Item = Result<Bytes, kcontrol_client::Error>> + Send + 'static {
    let body = body.clone();
    futures::stream::iter(
        (0..body.len())
            .step_by(CHUNK)
            .map(move |at| Ok(body.slice(at..body.len().min(at + CHUNK)))),
    )
}

/// Decodes a list body; the number of items.
fn list<T: DeserializeOwned + Send + 'static>(body: &Bytes, protobuf: bool) -> usize {
    let stream = if protobuf {
        ListStream::<T>::new_protobuf(chunks(body), "list", 1 << 24)
    } else {
        ListStream::<T>::new(chunks(body), "list", 1 << 24)
    };
    block_on(stream.map(|item| item.unwrap()).count())
}

/// Decodes a WatchList stream up to its end bookmark; the number of objects.
fn watch_list<T: DeserializeOwned + Send + 'static>(body: &Bytes, protobuf: bool) -> usize {
    let stream = if protobuf {
        WatchStream::<T>::new_protobuf(chunks(body), 1 << 24)
    } else {
        WatchStream::<T>::new(chunks(body), 1 << 24)
    };
    block_on(async {
        let mut stream = std::pin::pin!(stream);
        let mut n = 0;
        while let Some(event) = stream.next().await {
            match event.unwrap() {
                WatchEvent::Added(_) => n += 1,
                WatchEvent::Bookmark(b) if b.is_initial_events_end() => break,
                other => panic!("unexpected {}", other.type_name()),
            }
        }
        n
    })
}

fn best_of_3(work: impl Fn() -> usize) -> f64 {
    (0..3)
        .map(|_| {
            let start = cpu_seconds();
            assert_eq!(work(), 100_000);
            cpu_seconds() - start
        })
        .fold(f64::INFINITY, f64::min)
}

struct Bodies {
    list: [Bytes; 2],
    meta: [Bytes; 2],
    watch: [Bytes; 2],
}

/// CPU seconds of (list, WatchList) for `T`, JSON and protobuf: `[[list_json, list_pb], [wl_json, wl_pb]]`.
fn measure<T: DeserializeOwned + Send + 'static>(lists: &[Bytes; 2], b: &Bodies) -> [[f64; 2]; 2] {
    let mut out = [[0.0; 2]; 2];
    for (i, protobuf) in [false, true].into_iter().enumerate() {
        out[0][i] = best_of_3(|| list::<T>(&lists[i], protobuf));
        out[1][i] = best_of_3(|| watch_list::<T>(&b.watch[i], protobuf));
    }
    out
}

fn main() {
    let json_out = std::env::args().any(|a| a == "--json");
    let names = [
        "list.json",
        "list.pb",
        "meta.json",
        "meta.pb",
        "watchlist.json",
        "watchlist.pb",
    ];
    let mut loaded = Vec::new();
    for name in names {
        match load(name) {
            Some(bytes) => loaded.push(Bytes::from(bytes.unwrap())),
            None => {
                println!("no shared/fixtures/kube-apiserver-1.36 (set KCONTROL_FIXTURES)");
                return;
            }
        }
    }
    let b = Bodies {
        list: [loaded[0].clone(), loaded[1].clone()],
        meta: [loaded[2].clone(), loaded[3].clone()],
        watch: [loaded[4].clone(), loaded[5].clone()],
    };
    let rows = [
        ("ConfigMap", measure::<ConfigMap>(&b.list, &b)),
        ("CompactConfigMap", measure::<CompactConfigMap>(&b.list, &b)),
        // metadata only: the server's PartialObjectMetadataList for the list;
        // the WatchList stream (full objects) decoded into the same type
        (
            "metadata",
            measure::<PartialObjectMetadata<ConfigMap>>(&b.meta, &b),
        ),
    ];
    if !json_out {
        println!(
            "CPU seconds to decode 100,000 ConfigMaps from kube-apiserver 1.36's bytes (best of 3)"
        );
        println!(
            "{:<18} {:<10} {:>8} {:>9} {:>10}",
            "cached type", "mode", "JSON", "protobuf", "pb/JSON"
        );
    }
    for (name, m) in rows {
        for (mode, [j, p]) in [("list", m[0]), ("watchlist", m[1])] {
            if json_out {
                println!(
                    "{{\"scenario\":\"decode\",\"cached_type\":\"{name}\",\"mode\":\"{mode}\",\"json_cpu_seconds\":{j:.2},\"protobuf_cpu_seconds\":{p:.2},\"ratio\":{:.3}}}",
                    p / j
                );
            } else {
                println!("{name:<18} {mode:<10} {j:>8.2} {p:>9.2} {:>10.2}", p / j);
            }
        }
        if !json_out {
            println!(
                "{name:<18} {:<10} {:>8.2} {:>9.2}   (WatchList / list)",
                "",
                m[1][0] / m[0][0],
                m[1][1] / m[0][1]
            );
        }
    }
}
