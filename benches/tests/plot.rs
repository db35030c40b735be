//! `kcontrol-bench plot` end to end, on the committed results: the
//! committed charts are exactly what they give, `--check` fails naming a
//! chart whose results changed, and a bad line fails naming its file and
//! line. No benchmark runs here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

const BENCH: &str = env!("CARGO_BIN_EXE_kcontrol-bench");
const RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/results");
const PLOTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/plots");

fn plot(args: &[&str]) -> Output {
    Command::new(BENCH).arg("plot").args(args).output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Copies the committed results into `dir`.
fn copy_results(dir: &Path) {
    for entry in std::fs::read_dir(RESULTS).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
}

#[test]
fn the_committed_plots_are_what_the_committed_results_give() {
    let out = plot(&["--check"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn plot_writes_the_committed_plots_byte_for_byte() {
    let out_dir = tempfile::tempdir().unwrap();
    let out = plot(&["--out", out_dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut written: Vec<String> = std::fs::read_dir(out_dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert!(written.len() >= 5, "{written:?}");
    for name in &written {
        let fresh = std::fs::read(out_dir.path().join(name)).unwrap();
        let committed = std::fs::read(Path::new(PLOTS).join(name)).unwrap();
        assert!(fresh == committed, "{name} differs from docs/plots/{name}");
    }
    // charts whose scenario has no results yet are skipped, not errors
    let err = stderr(&out);
    if !Path::new(RESULTS).join("wire.jsonl").exists() {
        assert!(err.contains("wire-sync: no rows for it"), "{err}");
    }
}

#[test]
fn a_changed_result_fails_the_check_naming_its_chart() {
    let results = tempfile::tempdir().unwrap();
    copy_results(results.path());
    let relist = results.path().join("relist.jsonl");
    let text = std::fs::read_to_string(&relist).unwrap();
    let first = text.lines().next().unwrap();
    let mut row: serde_json::Value = serde_json::from_str(first).unwrap();
    let peak = row["relist_peak_rss_bytes"].as_f64().unwrap();
    row["relist_peak_rss_bytes"] = (peak * 1.5).into();
    let changed = text.replacen(first, &row.to_string(), 1);
    std::fs::write(&relist, changed).unwrap();

    let out = plot(&["--check", "--results", results.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("relist.svg"), "{err}");
    assert!(!err.contains("queue.svg"), "{err}");
}

#[test]
fn a_bad_line_fails_naming_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"scenario\":\"single\"}\n\nnot json\n").unwrap();
    let out = plot(&[bad.to_str().unwrap(), "--out", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("bad.jsonl:3: not JSON"), "{err}");
    // nothing was written
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn an_unknown_flag_is_a_usage_error() {
    let out = plot(&["--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--no-such-flag"), "{}", stderr(&out));
}
