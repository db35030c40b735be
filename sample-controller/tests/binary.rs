//! The built `sample-controller` binary as a user runs it: the
//! `--embedded --until-synced` demo exits 0; SIGTERM shuts it down
//! gracefully with exit 0; a bad kubeconfig or a bad flag is one line on
//! stderr and exit code 2.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BINARY: &str = env!("CARGO_BIN_EXE_sample-controller");

fn run(args: &[&str]) -> Output {
    Command::new(BINARY)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("running sample-controller")
}

fn stderr_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_embedded_demo_converges_and_exits_0() {
    let out = run(&[
        "--embedded",
        "--foos",
        "5",
        "--until-synced",
        "--timeout",
        "90s",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Foos synced 5/5"), "{stdout}");
    assert!(stdout.contains("All 5 Foos synced"), "{stdout}");
}

#[test]
fn a_demo_that_cannot_converge_in_time_exits_1() {
    let out = run(&[
        "--embedded",
        "--foos",
        "3",
        "--until-synced",
        "--timeout",
        "1ms",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let lines = stderr_lines(&out);
    let last = lines.last().unwrap();
    assert!(
        last.starts_with("sample-controller: error: timed out after 1ms"),
        "{lines:?}"
    );
}

#[test]
fn a_bad_kubeconfig_is_one_line_and_exit_2() {
    let dir = std::env::temp_dir().join(format!("sc-binary-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("kubeconfig");
    std::fs::write(&bad, "apiVersion: v1\nclusters: {not: [a list}\n").unwrap();
    let missing = dir.join("missing");
    for path in [&bad, &missing] {
        let out = run(&["--kubeconfig", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let lines = stderr_lines(&out);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("sample-controller: error: "),
            "{lines:?}"
        );
        assert!(
            lines[0].contains(path.to_str().unwrap()),
            "names the file: {lines:?}"
        );
        assert!(out.stdout.is_empty());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bad_flag_is_one_line_and_exit_2() {
    for args in [
        &["--workers", "0"][..],
        &["--resync-period", "often"],
        &["--until-synced"],
        &["--no-such-flag"],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let lines = stderr_lines(&out);
        assert_eq!(lines.len(), 1, "{args:?}: {lines:?}");
        assert!(
            lines[0].starts_with("sample-controller: error: "),
            "{lines:?}"
        );
    }
    let help = run(&["--help"]);
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--embedded"));
}

#[cfg(unix)]
#[test]
fn sigterm_shuts_down_gracefully_with_exit_0() {
    let mut child = Command::new(BINARY)
        .args(["--embedded", "--foos", "2"])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // wait for the first progress line: the controller is running
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let line = lines.next().expect("a progress line").unwrap();
        if line.starts_with("Foos synced") {
            break;
        }
        assert!(Instant::now() < deadline, "no progress line in 60 s");
    }
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = kcontrol_testserver::wait_with_output_within(
        "the controller to exit after SIGTERM",
        Duration::from_secs(60),
        child,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("SIGTERM"), "{stderr}");
    assert!(stderr.contains("controller stopped"), "{stderr}");
}
