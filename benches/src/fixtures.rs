//! The benchmark object: a ConfigMap of about 1 KiB of compact JSON, shaped
//! like `../shared/fixtures/configmap-1k.json` (name `cm-NNNNNN`, three
//! labels, two annotations, one managedFields entry, four 45-byte data
//! values). Object `i` varies the name, uid, resourceVersion, the `shard`
//! label (`s` + two digits of `i mod 16`) and the number in each data value,
//! so every benchmark of the project measures the same shape.

use std::time::Instant;

use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::{json, Value};

use crate::report::{row, Report};

/// Namespace of every benchmark object.
pub const NAMESPACE: &str = "bench";

/// Object `i` as a JSON value, with resourceVersion `resource_version`.
pub fn configmap_value(i: usize, resource_version: u64) -> Value {
    json!({
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {
            "name": name(i),
            "namespace": NAMESPACE,
            "uid": uid(i),
            "resourceVersion": resource_version.to_string(),
            "creationTimestamp": "2026-11-21T23:00:00Z",
            "labels": { "app": "bench", "shard": format!("s{:02}", i % 16), "tier": "bench" },
            "annotations": {
                "bench.example.com/note": "synthetic object for informer memory and sync-time baselines",
                "bench.example.com/owner": "loader"
            },
            "managedFields": [{
                "manager": "bench-loader",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-11-21T23:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:data": { ".": {}, "f:alpha": {}, "f:beta": {}, "f:delta": {}, "f:gamma": {} },
                    "f:metadata": {
                        "f:annotations": { ".": {}, "f:bench.example.com/note": {}, "f:bench.example.com/owner": {} },
                        "f:labels": { ".": {}, "f:app": {}, "f:shard": {}, "f:tier": {} }
                    }
                }
            }]
        },
        "data": {
            "alpha": data_value(i, 1),
            "beta": data_value(i, 2),
            "delta": data_value(i, 4),
            "gamma": data_value(i, 3)
        }
    })
}

/// Object `i` as compact JSON bytes.
pub fn configmap_json(i: usize, resource_version: u64) -> Vec<u8> {
    serde_json::to_vec(&configmap_value(i, resource_version)).unwrap_or_default()
}

/// Object `i` decoded into the `k8s-openapi` type.
pub fn configmap(i: usize, resource_version: u64) -> Result<ConfigMap, serde_json::Error> {
    serde_json::from_value(configmap_value(i, resource_version))
}

/// `cm-NNNNNN`.
pub fn name(i: usize) -> String {
    format!("cm-{i:06}")
}

fn uid(i: usize) -> String {
    format!("6f1c2b1e-8a4d-4c6e-9d2f-{i:012x}")
}

/// `value-<i>-<n>-xxx…`, padded with `x` to 45 bytes.
fn data_value(i: usize, n: u8) -> String {
    let mut v = format!("value-{i}-{n}-");
    while v.len() < 45 {
        v.push('x');
    }
    v
}

/// The `fixtures` scenario: size of the shape and speed of building it.
pub fn bench(report: &mut Report) -> Result<(), String> {
    const N: usize = 100_000;
    let start = Instant::now();
    let mut bytes = 0usize;
    for i in 0..N {
        bytes += configmap_json(i, i as u64 + 1).len();
    }
    let secs = start.elapsed().as_secs_f64();
    let start = Instant::now();
    for i in 0..N {
        configmap(i, i as u64 + 1).map_err(|e| format!("fixture {i} does not decode: {e}"))?;
    }
    let typed_secs = start.elapsed().as_secs_f64();
    report.row(row([
        ("scenario", json!("fixtures")),
        ("objects", json!(N)),
        ("bytes_per_object", json!(bytes / N)),
        ("json_per_sec", json!(N as f64 / secs)),
        ("typed_per_sec", json!(N as f64 / typed_secs)),
    ]));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_matches_the_reference_fixture() {
        let v = configmap_value(42, 123_456);
        let size = serde_json::to_vec(&v).unwrap().len();
        assert!((950..=1150).contains(&size), "size {size}");
        assert_eq!(v["metadata"]["labels"]["shard"], "s10");
        assert_eq!(v["data"]["alpha"].as_str().unwrap().len(), 45);
        let cm = configmap(7, 1).unwrap();
        assert_eq!(cm.data.unwrap().len(), 4);
    }
}
