//! The `soak` scenario end to end: the built `kcontrol-bench` binary runs
//! a short soak (the sample-controller in a child process, churn and
//! faults against the in-process testserver) and must report, in one
//! JSON line, a converged state with nothing lost, duplicated or
//! orphaned. Bounded by the soak's own settle timeout, not by sleeps.

use std::process::Command;

use serde_json::Value;

const BENCH: &str = env!("CARGO_BIN_EXE_kcontrol-bench");

#[test]
fn a_short_soak_converges_with_nothing_lost_duplicated_or_orphaned() {
    let out = Command::new(BENCH)
        .args(["soak", "--duration", "12s", "--json", "--seed", "16"])
        .args(["--foos", "30", "--rate", "10", "--settle-timeout", "180s"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{}\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON line: {stdout}");
    let row: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(row["scenario"], "soak");
    assert_eq!(row["seed"], 16);
    assert_eq!(row["converged"], true, "{row}");
    for zero in ["lost", "duplicated", "orphaned", "bad_exits"] {
        assert_eq!(row[zero], 0, "{zero}: {row}");
    }
    for key in ["events", "faults", "relists", "restarts", "rss_growth"] {
        assert!(row[key].is_number(), "{key}: {row}");
    }
    assert!(row["events"].as_u64().unwrap() > 0, "{row}");
    assert!(row["faults"].as_u64().unwrap() > 0, "{row}");
    assert!(row["rss_growth"].as_f64().unwrap() > 0.0, "{row}");
    // the time series `kcontrol-bench plot` draws: a sample every 0.5 s
    // from the start through the settle, in time order, and every fault
    let samples = row["rss_samples"].as_array().unwrap();
    assert!(samples.len() >= 10, "{row}");
    let times: Vec<f64> = samples.iter().map(|s| s[0].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
    assert!(samples.iter().all(|s| s[1].as_u64().unwrap() > 0), "{row}");
    let churn_end = row["churn_end_s"].as_f64().unwrap();
    assert!(
        churn_end >= 12.0 && times[times.len() - 1] >= churn_end - 1.0,
        "{row}"
    );
    let faults = row["fault_times"].as_array().unwrap();
    assert_eq!(
        faults.len() as u64,
        row["faults"].as_u64().unwrap(),
        "{row}"
    );
    assert!(faults.iter().all(|f| f[1].is_string()), "{row}");
}

#[test]
fn soak_flags_are_refused_for_other_scenarios() {
    let out = Command::new(BENCH)
        .args(["fixtures", "--duration", "10s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--duration"), "{stderr}");
}
