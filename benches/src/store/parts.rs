//! Where the bytes of one stored object go: exact live heap bytes (as the
//! allocator hands them out, size classes included) of each part of the
//! decoded ConfigMap and of the store's own bookkeeping, read from
//! jemalloc's `stats.allocated` before and after dropping each part.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::ThreadSafeStore;
use serde_json::json;
use tikv_jemalloc_ctl::{epoch, stats};

use super::{decode, N};
use crate::report::{row, Report};

/// Live heap bytes now.
fn allocated() -> Result<usize, String> {
    epoch::advance().map_err(|e| format!("jemalloc epoch: {e}"))?;
    stats::allocated::read().map_err(|e| format!("jemalloc stats.allocated: {e}"))
}

/// Heap bytes per object freed by `take` applied to every object.
fn freed_by(
    objects: &mut [Arc<ConfigMap>],
    mut take: impl FnMut(&mut ConfigMap),
) -> Result<f64, String> {
    let before = allocated()?;
    for obj in objects.iter_mut() {
        let obj = Arc::get_mut(obj).ok_or("object still shared")?;
        take(obj);
    }
    Ok(before.saturating_sub(allocated()?) as f64 / N as f64)
}

/// One `store-memory-part` row per part, largest first within the object.
pub fn bench(report: &mut Report) -> Result<(), String> {
    let mut objects: Vec<Arc<ConfigMap>> = Vec::with_capacity(N);
    let start = allocated()?;
    for i in 0..N {
        objects.push(Arc::new(decode(i, i as u64 + 1)?));
    }
    let total = allocated()?.saturating_sub(start) as f64 / N as f64;

    let before_store = allocated()?;
    let store = ThreadSafeStore::new();
    for obj in &objects {
        store.add(Arc::clone(obj)).map_err(|e| e.to_string())?;
    }
    let bookkeeping = allocated()?.saturating_sub(before_store) as f64 / N as f64;
    drop(store);

    let vec_capacity = objects
        .first()
        .and_then(|o| o.metadata.managed_fields.as_ref())
        .map_or(0, Vec::capacity);
    let mut parts = vec![(
        "managedFields[0].fieldsV1 (serde_json::Value tree, 5 maps)".to_owned(),
        freed_by(&mut objects, |o| {
            for entry in o.metadata.managed_fields.iter_mut().flatten() {
                entry.fields_v1 = None;
            }
        })?,
    )];
    parts.push((
        format!(
            "rest of managedFields (Vec of capacity {vec_capacity} x 176-byte entries, 4 strings)"
        ),
        freed_by(&mut objects, |o| o.metadata.managed_fields = None)?,
    ));
    parts.push((
        "data (BTreeMap, 4 entries)".to_owned(),
        freed_by(&mut objects, |o| o.data = None)?,
    ));
    parts.push((
        "annotations (BTreeMap, 2 entries)".to_owned(),
        freed_by(&mut objects, |o| o.metadata.annotations = None)?,
    ));
    parts.push((
        "labels (BTreeMap, 3 entries)".to_owned(),
        freed_by(&mut objects, |o| o.metadata.labels = None)?,
    ));
    parts.push((
        "name, namespace, uid, resourceVersion strings".to_owned(),
        freed_by(&mut objects, |o| {
            let m = &mut o.metadata;
            (m.name, m.namespace, m.uid, m.resource_version) = (None, None, None, None);
        })?,
    ));
    let before_structs = allocated()?;
    let vec_bytes = objects.capacity() * std::mem::size_of::<Arc<ConfigMap>>();
    drop(objects);
    let structs = before_structs
        .saturating_sub(allocated()?)
        .saturating_sub(vec_bytes) as f64
        / N as f64;
    parts.push((
        format!(
            "the ConfigMap struct in its Arc ({} + 16 bytes)",
            std::mem::size_of::<ConfigMap>()
        ),
        structs,
    ));

    let sum: f64 = parts.iter().map(|(_, b)| b).sum();
    let mut emit = |part: &str, bytes: f64| {
        report.row(row([
            ("scenario", json!("store-memory-part")),
            ("part", json!(part)),
            ("allocated_bytes_per_object", json!(bytes.round())),
            ("share_of_decoded_object", json!(bytes / total)),
        ]));
    };
    emit("decoded object, total", total);
    for (part, bytes) in &parts {
        emit(part, *bytes);
    }
    emit("(sum of the parts above)", sum);
    emit(
        "store bookkeeping: key, item slot, namespace index entry",
        bookkeeping,
    );
    Ok(())
}
