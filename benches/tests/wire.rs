//! The `wire` scenario end to end on the bytes a real kube-apiserver 1.36
//! sent (shared/fixtures/kube-apiserver-1.36; skipped, saying so, without
//! them): the built `kcontrol-bench` binary serves the protobuf captures
//! from its loopback HTTPS server and its sync children, with clients
//! asking protobuf, must store all 100,000 ConfigMaps (the child checks
//! the store and whether the objects came by list or by WatchList; the
//! scenario checks that the child fetched the protobuf capture). The
//! `memory` role must sync the same from the protobuf captures in memory.
//! Figures are checked for presence and consistency, never for speed.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use kcontrol_testserver::wait_with_output_within;
use serde_json::Value;

const BENCH: &str = env!("CARGO_BIN_EXE_kcontrol-bench");

/// A safety net only: the children bound their own syncs. Generous because
/// each row starts two processes that sync or receive 27-135 MB on a shared
/// 2-core machine.
const DEADLINE: Duration = Duration::from_secs(240);

/// The fixture directory; `None` (the test is skipped, saying why) when the
/// fixtures are not beside the project (a clean clone, CI).
fn fixtures() -> Option<PathBuf> {
    let dir = kcontrol_fixtures::dir();
    if dir.is_none() {
        println!(
            "skipped: no shared/fixtures/kube-apiserver-1.36 beside the project (or $KCONTROL_FIXTURES)"
        );
    }
    dir
}

/// Runs `command` within [`DEADLINE`]; its stdout, after a success.
fn stdout_of(what: &str, mut command: Command) -> String {
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_with_output_within(what, DEADLINE, child);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The rows of `kcontrol-bench wire --json` over the fixtures in `dir`,
/// unpaced and protobuf, narrowed by `args`.
fn protobuf_rows(what: &str, dir: &Path, args: &[&str]) -> Vec<Value> {
    let mut command = Command::new(BENCH);
    command
        .args([
            "wire",
            "--json",
            "--pace",
            "unpaced",
            "--encoding",
            "protobuf",
        ])
        .args(args)
        .arg("--fixtures")
        .arg(dir);
    let stdout = stdout_of(what, command);
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}\n{stdout}")))
        .collect()
}

/// A positive number at `key`.
fn positive(row: &Value, key: &str) -> f64 {
    let value = row[key].as_f64().unwrap_or_else(|| panic!("{key}: {row}"));
    assert!(value > 0.0, "{key}: {row}");
    value
}

/// Two of the three cached types: `ConfigMap` from protobuf is checked item
/// by item on the same bytes by kcontrol-proto's fixture test, and its
/// row is the heaviest (CI time).
#[test]
fn protobuf_lists_sync_every_object_into_the_compact_and_metadata_caches() {
    let Some(dir) = fixtures() else { return };
    let rows = protobuf_rows(
        "kcontrol-bench wire (protobuf lists)",
        &dir,
        &[
            "--mode",
            "list",
            "--cached-type",
            "CompactConfigMap,metadata",
        ],
    );
    let cached: BTreeSet<&str> = rows
        .iter()
        .map(|r| r["cached_type"].as_str().unwrap())
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(
        cached,
        BTreeSet::from(["CompactConfigMap", "metadata"]),
        "{rows:?}"
    );
    for row in &rows {
        assert_eq!(row["scenario"], "wire-sync", "{row}");
        assert_eq!(row["pace"], "unpaced", "{row}");
        assert_eq!(row["encoding"], "protobuf", "{row}");
        assert_eq!(row["mode"], "list", "{row}");
        assert_eq!(row["objects"], 100_000, "{row}");
        let sync = positive(row, "sync_seconds");
        let floor = positive(row, "floor_seconds");
        let ratio = positive(row, "ratio");
        assert!((ratio - sync / floor).abs() < 1e-9, "{row}");
        for key in [
            "cpu_seconds",
            "steady_rss_bytes_per_object",
            "peak_rss_bytes",
        ] {
            positive(row, key);
        }
    }
}

#[test]
fn a_protobuf_watch_list_syncs_every_object() {
    let Some(dir) = fixtures() else { return };
    let rows = protobuf_rows(
        "kcontrol-bench wire (protobuf WatchList)",
        &dir,
        &["--mode", "watchlist", "--cached-type", "CompactConfigMap"],
    );
    let [row] = &rows[..] else {
        panic!("one row: {rows:?}")
    };
    assert_eq!(row["mode"], "watchlist", "{row}");
    assert_eq!(row["encoding"], "protobuf", "{row}");
    assert_eq!(row["objects"], 100_000, "{row}");
    positive(row, "sync_seconds");
    positive(row, "ratio");
}

/// The `memory` role (the informer over the capture in memory, for
/// profilers) decodes the protobuf captures through the client's decoders.
#[test]
fn the_memory_role_syncs_from_protobuf_captures() {
    let Some(dir) = fixtures() else { return };
    let row = "unpaced/protobuf/list/metadata";
    let mut command = Command::new(BENCH);
    command
        .arg("__wire-child")
        .env("KCONTROL_BENCH_WIRE_ROLE", "memory")
        .env("KCONTROL_BENCH_WIRE_ROW", row)
        .env("KCONTROL_BENCH_WIRE_FIXTURES", &dir)
        .env_remove("KCONTROL_BENCH_WIRE_OBJECTS");
    let stdout = stdout_of(&format!("the memory child of {row}"), command);
    let out: Value = serde_json::from_str(stdout.trim()).unwrap();
    positive(&out, "sync_seconds");
    positive(&out, "peak_rss_bytes");
}
