//! Memory of the store, as resident growth.
//!
//! Each phase runs in a fresh child process (this binary, started again
//! with `KCONTROL_BENCH_STORE_PHASE` set), so no phase inherits memory an
//! earlier one freed and the allocator kept. The child first writes the
//! JSON of all objects into one buffer allocated up front (so that building
//! the input leaves no freed memory behind for the phase to reuse), reads
//! `VmRSS`, runs the phase keeping its result alive, reads `VmRSS` again and
//! prints the difference.

use std::hint::black_box;
use std::process::Command;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::compact::CompactConfigMap;
use kcontrol_indexer::transform::strip_managed_fields;
use kcontrol_indexer::{PartialObjectMetadata, ThreadSafeStore};
use serde_json::json;

use super::N;
use crate::fixtures;
use crate::report::{row, Report};
use crate::rss;

/// Environment variable naming the phase a child process runs.
const PHASE_ENV: &str = "KCONTROL_BENCH_STORE_PHASE";

/// The global allocator of this binary.
const ALLOCATOR: &str = if cfg!(feature = "jemalloc") {
    "jemalloc"
} else {
    "system (glibc malloc)"
};

/// Each phase: what it keeps alive once done.
const PHASES: [&str; 5] = [
    "decoded",
    "store",
    "store-full",
    "store-compact",
    "store-metadata",
];

/// The phase this process should run, when it is a child.
pub fn child_phase() -> Option<String> {
    std::env::var(PHASE_ENV).ok()
}

/// All objects' JSON in one buffer allocated before measuring.
struct Input {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Input {
    fn generate() -> Self {
        let mut bytes = Vec::with_capacity(N * 1536);
        let mut ends = Vec::with_capacity(N);
        for i in 0..N {
            bytes.extend_from_slice(&fixtures::configmap_json(i, i as u64 + 1));
            ends.push(bytes.len());
        }
        Self { bytes, ends }
    }

    fn objects(&self) -> impl Iterator<Item = Result<ConfigMap, String>> + '_ {
        self.decoded()
    }

    /// Every object decoded straight from its JSON into `T`.
    fn decoded<T: k8s_openapi::serde::de::DeserializeOwned>(
        &self,
    ) -> impl Iterator<Item = Result<T, String>> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(self.ends.iter().copied()).map(|(start, end)| {
            let slice = self.bytes.get(start..end).unwrap_or_default();
            serde_json::from_slice(slice).map_err(|e| format!("fixture does not decode: {e}"))
        })
    }
}

/// What a phase keeps alive while its memory is measured.
enum Kept {
    Decoded(Vec<Arc<ConfigMap>>),
    Store(ThreadSafeStore<ConfigMap>),
    Compact(ThreadSafeStore<CompactConfigMap>),
    Metadata(ThreadSafeStore<PartialObjectMetadata<ConfigMap>>),
}

fn run_phase(phase: &str, input: &Input) -> Result<Kept, String> {
    match phase {
        "decoded" => {
            let mut objects = Vec::with_capacity(N);
            for obj in input.objects() {
                objects.push(Arc::new(obj?));
            }
            Ok(Kept::Decoded(objects))
        }
        "store" | "store-full" => {
            let store = ThreadSafeStore::new();
            for obj in input.objects() {
                let mut obj = obj?;
                if phase == "store" {
                    strip_managed_fields(&mut obj);
                }
                store.add(Arc::new(obj)).map_err(|e| e.to_string())?;
            }
            Ok(Kept::Store(store))
        }
        "store-compact" => {
            let store = ThreadSafeStore::new();
            for obj in input.decoded::<CompactConfigMap>() {
                store.add(Arc::new(obj?)).map_err(|e| e.to_string())?;
            }
            Ok(Kept::Compact(store))
        }
        "store-metadata" => {
            let store = ThreadSafeStore::new();
            for obj in input.decoded::<PartialObjectMetadata<ConfigMap>>() {
                let mut obj = obj?;
                strip_managed_fields(&mut obj);
                store.add(Arc::new(obj)).map_err(|e| e.to_string())?;
            }
            Ok(Kept::Metadata(store))
        }
        other => Err(format!("unknown memory phase {other:?}")),
    }
}

/// Child: runs one phase and prints `<resident growth in bytes>`.
pub fn run_child(phase: &str) -> Result<(), String> {
    let input = Input::generate();
    let before = rss::current_bytes();
    let kept = run_phase(phase, &input)?;
    let after = rss::current_bytes();
    let count = match black_box(&kept) {
        Kept::Decoded(v) => v.len(),
        Kept::Store(s) => s.len(),
        Kept::Compact(s) => s.len(),
        Kept::Metadata(s) => s.len(),
    };
    if count != N {
        return Err(format!("phase {phase} kept {count} objects, want {N}"));
    }
    #[allow(clippy::print_stdout)]
    {
        println!("{}", after.saturating_sub(before));
    }
    Ok(())
}

/// Parent: runs one phase in a child and returns its resident growth per object.
fn measure(phase: &str) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let out = Command::new(exe)
        .arg("store")
        .env(PHASE_ENV, phase)
        .output()
        .map_err(|e| format!("cannot start the {phase} phase: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!("phase {phase} failed ({}): {stderr}", out.status));
    }
    let bytes: u64 = stdout
        .trim()
        .parse()
        .map_err(|e| format!("phase {phase} printed {stdout:?}: {e}"))?;
    Ok(bytes as f64 / N as f64)
}

/// The `store-memory` row.
pub fn bench(report: &mut Report) -> Result<(), String> {
    let mut per_object = Vec::with_capacity(PHASES.len());
    for phase in PHASES {
        per_object.push(measure(phase)?);
    }
    let [decoded, store, full, compact, metadata] = per_object[..] else {
        return Err("missing phase result".to_owned());
    };
    let json_bytes = fixtures::configmap_json(N / 2, N as u64).len();
    report.row(row([
        ("scenario", json!("store-memory")),
        ("objects", json!(N)),
        ("store_bytes_per_object", json!(store.round())),
        ("store_bytes_per_object_full", json!(full.round())),
        ("compact_store_bytes_per_object", json!(compact.round())),
        ("compact_to_store", json!(compact / store)),
        ("metadata_store_bytes_per_object", json!(metadata.round())),
        ("decoded_bytes_per_object", json!(decoded.round())),
        ("full_to_decoded", json!(full / decoded)),
        ("json_bytes_per_object", json!(json_bytes)),
        ("allocator", json!(ALLOCATOR)),
        ("measured", json!("VmRSS growth per object, one fresh child process per phase: decode (+ strip managedFields for store_bytes_per_object) + add() into an empty store with the namespace index; decoded = the same objects in a Vec<Arc<ConfigMap>>; compact = CompactConfigMap decoded straight from the JSON into the same store (managedFields skipped while decoding); metadata = PartialObjectMetadata<ConfigMap> (the full ObjectMeta, managedFields stripped): what a metadata-only informer holds")),
    ]));
    Ok(())
}
