//! The controller under soak: the sample-controller program in a child
//! process, started against the kubeconfig of the bench's testserver,
//! ready once its `/readyz` answers 200, stopped by SIGTERM (a graceful
//! shutdown, which must exit 0) or SIGKILL.
//!
//! By default the child is this binary again (`__sample-controller ARGS`),
//! which runs `sample_controller::app::run` on the parsed
//! `sample_controller::cli::Args`: the `sample-controller` binary's own
//! code (flags, signal handling, metrics endpoint), with its jemalloc
//! options, as the `controller` scenario runs it; `--controller-bin PATH`
//! runs a built `sample-controller` binary instead.

use std::fs::File;
use std::io::{Read, Write};
use std::iter;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use sample_controller::cli::Args;

use crate::controller::{procstat, NAMESPACE};

/// The hidden first argument that makes this binary the sample-controller.
pub const CHILD_ARG: &str = "__sample-controller";

/// How long a started controller may take to report ready.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// How the soak starts its controller.
#[derive(Clone, Debug)]
pub struct Launcher {
    /// The testserver's kubeconfig.
    pub kubeconfig: PathBuf,
    /// Where the controller's stdout and stderr go (appended).
    pub log: PathBuf,
    /// A `sample-controller` binary to run instead of this one.
    pub program: Option<PathBuf>,
}

/// A running controller process.
pub struct Controller {
    child: Child,
    pid: String,
}

/// How a controller process ended when asked to.
#[derive(Debug)]
pub enum Ended {
    /// It exited by itself (`status`) within the time given.
    Exited(ExitStatus),
    /// It was still running at the deadline and was killed.
    Hung,
}

impl Launcher {
    fn command(&self, metrics: SocketAddr) -> Result<Command, String> {
        let mut command = match &self.program {
            Some(program) => Command::new(program),
            None => {
                let mut c = crate::controller::child_command()?;
                c.arg(CHILD_ARG);
                c
            }
        };
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("{}: {e}", self.log.display()))?;
        let log2 = log
            .try_clone()
            .map_err(|e| format!("{}: {e}", self.log.display()))?;
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--namespace", NAMESPACE, "--workers", "2"])
            .args(["--qps", "200", "--burst", "400"])
            .arg("--metrics-addr")
            .arg(metrics.to_string())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        Ok(command)
    }

    /// Starts a controller and waits until it is ready. The metrics port is
    /// chosen free just before; if another process takes it first the
    /// controller exits at once and is started again on another port.
    pub fn start(&self) -> Result<Controller, String> {
        let mut last_error = String::new();
        for _ in 0..3 {
            let metrics = free_port()?;
            let mut child = self
                .command(metrics)?
                .spawn()
                .map_err(|e| format!("starting the controller: {e}"))?;
            match wait_ready(&mut child, metrics) {
                Ok(()) => {
                    let pid = child.id().to_string();
                    return Ok(Controller { child, pid });
                }
                Err(Some(status)) => {
                    last_error = format!(
                        "the controller exited with {status} before it was ready (log: {})",
                        self.log.display()
                    )
                }
                Err(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "the controller was not ready within {READY_TIMEOUT:?} (log: {})",
                        self.log.display()
                    ));
                }
            }
        }
        Err(last_error)
    }
}

impl Controller {
    /// Its process id, as `/proc` names it.
    pub fn pid(&self) -> &str {
        &self.pid
    }

    /// Its resident memory now.
    pub fn rss(&self) -> u64 {
        procstat::rss_bytes(&self.pid)
    }

    /// Whether it is still running (`Some(status)` once it exited).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Sends SIGTERM and waits up to `timeout` for the process to exit
    /// (then kills it).
    pub fn terminate(mut self, timeout: Duration) -> Result<Ended, String> {
        let sent = Command::new("kill")
            .args(["-TERM", &self.pid])
            .status()
            .map_err(|e| format!("running kill: {e}"))?;
        if !sent.success() {
            return Err(format!("kill -TERM {} failed: {sent}", self.pid));
        }
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(status)) => return Ok(Ended::Exited(status)),
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(format!("waiting for the controller: {e}")),
            }
        }
        self.kill()?;
        Ok(Ended::Hung)
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub fn kill(mut self) -> Result<(), String> {
        self.child
            .kill()
            .map_err(|e| format!("killing the controller: {e}"))?;
        self.child
            .wait()
            .map(drop)
            .map_err(|e| format!("waiting for the controller: {e}"))
    }
}

impl Drop for Controller {
    /// A controller left running (the soak failed half-way) is killed.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn free_port() -> Result<SocketAddr, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("finding a free port: {e}"))
}

/// Polls `/readyz` until it answers 200. `Err(Some(status))` when the
/// process exited first, `Err(None)` on timeout.
fn wait_ready(child: &mut Child, addr: SocketAddr) -> Result<(), Option<ExitStatus>> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(Some(status));
        }
        if http_status(addr, "/readyz") == Some(200) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(None);
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// The status code of a GET of `path` on `addr` (plain HTTP/1.1), `None`
/// when there is no answer.
fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    // one write: the request in one piece
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    let text = std::str::from_utf8(&head).ok()?;
    text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

/// The child: the sample-controller program with the flags in `args`,
/// logging to stderr (`RUST_LOG`, default `info`).
pub fn child_main(args: &[String]) -> ExitCode {
    let argv = iter::once("sample-controller".to_owned()).chain(args.iter().cloned());
    let args = match Args::try_parse_from(argv) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("{CHILD_ARG}: {e}");
            return ExitCode::from(2);
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("sample-controller")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{CHILD_ARG}: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(sample_controller::app::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{CHILD_ARG}: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// The last `n` lines of the controller's log (for a failure report).
pub fn log_tail(log: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The readiness probe reads a status line, and reports no answer as
    /// `None` (a closed port, a server that says nothing useful).
    #[test]
    fn http_status_reads_the_status_line() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            for answer in ["HTTP/1.1 503 Service Unavailable\r\n\r\n", "garbage"] {
                let (mut s, _) = listener.accept().unwrap();
                // the whole request: closing with unread bytes would reset
                // the connection and lose the answer
                let mut request = Vec::new();
                let mut buf = [0u8; 256];
                while !request.ends_with(b"\r\n\r\n") {
                    let n = s.read(&mut buf).unwrap();
                    assert!(n > 0, "the request ended early");
                    request.extend_from_slice(&buf[..n]);
                }
                s.write_all(answer.as_bytes()).unwrap();
            }
        });
        assert_eq!(http_status(addr, "/readyz"), Some(503));
        assert_eq!(http_status(addr, "/readyz"), None);
        server.join().unwrap();
        assert_eq!(http_status(free_port().unwrap(), "/readyz"), None);
    }
}
