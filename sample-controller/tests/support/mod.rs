//! What the process tests share: a `sample-controller` replica run as a
//! child process, its stderr collected line by line.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kcontrol_testserver::try_eventually_within;

/// The binary under test.
pub const BINARY: &str = env!("CARGO_BIN_EXE_sample-controller");

/// The longest a replica is waited for (a safety net, not a timing).
pub const SAFETY: Duration = Duration::from_secs(90);

/// A running replica, its stderr collected line by line.
pub struct Replica {
    /// A name for messages (a member or leader identity).
    pub name: String,
    pub child: Child,
    pub lines: Arc<Mutex<Vec<String>>>,
}

/// The binary against `kubeconfig`'s server in namespace `default`, no
/// resync, with `qps` and `burst` as the client's rate limit.
pub fn command(kubeconfig: &Path, qps: u32, burst: u32) -> Command {
    let mut command = Command::new(BINARY);
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--namespace", "default", "--resync-period", "0"])
        .args(["--qps", &qps.to_string(), "--burst", &burst.to_string()]);
    command
}

impl Replica {
    /// Starts `command` as `name`, stdin and stdout closed, stderr kept.
    pub fn start(name: &str, mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting sample-controller");
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Self {
            name: name.to_owned(),
            child,
            lines,
        }
    }

    /// Everything it wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Waits for a stderr line containing every one of `parts`.
    pub async fn wait_for_line(&self, parts: &[&str]) -> String {
        let line = try_eventually_within(format!("a line with {parts:?}"), SAFETY, async || {
            self.lines
                .lock()
                .unwrap()
                .iter()
                .find(|l| parts.iter().all(|p| l.contains(p)))
                .cloned()
        })
        .await;
        line.unwrap_or_else(|e| panic!("{e}:\n{}", self.stderr()))
    }

    /// Sends `signal` (`-TERM`, `-KILL`) with kill(1).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits until it exited.
    pub async fn wait_exit(&mut self) -> ExitStatus {
        let exited = try_eventually_within("the replica to exit", SAFETY, async || {
            self.child.try_wait().unwrap()
        })
        .await;
        exited.unwrap_or_else(|e| panic!("{e}:\n{}", self.stderr()))
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
