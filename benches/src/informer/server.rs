//! The API server of the informer and relist scenarios, in a child process
//! of its own (this binary started again with [`ROLE_ENV`] = `server`), so
//! that the memory figures of the measuring process hold no server memory.
//!
//! The child bulk-loads the fixture ConfigMaps into the namespaces it is
//! given, prints its URL on one line, and serves until its standard input
//! closes (the parent ended, or dropped its [`ServerProcess`]).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use kcontrol_testserver::TestServer;
use serde_json::json;

use super::{runtime, ROLE_ENV};
use crate::fixtures;

/// Environment variable listing the namespaces to load and their sizes:
/// `name:objects,name:objects`.
const NAMESPACES_ENV: &str = "KCONTROL_BENCH_INFORMER_NAMESPACES";

/// A running server child; dropping it ends the child.
pub struct ServerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    url: String,
}

impl ServerProcess {
    /// Starts the child of `scenario` with `namespaces` (name and objects)
    /// loaded, and waits for its URL.
    pub fn start(scenario: &str, namespaces: &[(&str, usize)]) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
        let spec: Vec<String> = namespaces.iter().map(|(n, c)| format!("{n}:{c}")).collect();
        let mut child = Command::new(exe)
            .arg(scenario)
            .env(ROLE_ENV, "server")
            .env(NAMESPACES_ENV, spec.join(","))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start the server child: {e}"))?;
        let stdin = child.stdin.take();
        let Some(stdout) = child.stdout.take() else {
            return Err("the server child has no stdout".to_owned());
        };
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| format!("reading the server child's URL: {e}"))?;
        let url = line.trim().to_owned();
        let mut server = Self { child, stdin, url };
        if !server.url.starts_with("http") {
            let status = server.child.try_wait().ok().flatten();
            return Err(format!(
                "the server child printed {:?} instead of its URL (exit: {status:?})",
                server.url
            ));
        }
        server.url.truncate(server.url.trim_end_matches('/').len());
        Ok(server)
    }

    /// The server's URL, `http://127.0.0.1:port`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Resident memory of the server child (`VmRSS` of its `/proc` entry).
    pub fn rss_bytes(&self) -> u64 {
        crate::rss::process_bytes(self.child.id(), "VmRSS:")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // End of input asks the child to shut down; kill it if it has not
        // after a while.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Child: loads the namespaces, prints the URL, serves until stdin closes.
pub fn run_child() -> Result<(), String> {
    let spec = std::env::var(NAMESPACES_ENV).unwrap_or_default();
    let mut namespaces = Vec::new();
    for part in spec.split(',').filter(|p| !p.is_empty()) {
        let (name, count) = part
            .split_once(':')
            .ok_or_else(|| format!("{NAMESPACES_ENV}: {part:?} is not name:objects"))?;
        let count: usize = count
            .parse()
            .map_err(|e| format!("{NAMESPACES_ENV}: {part:?}: {e}"))?;
        namespaces.push((name.to_owned(), count));
    }
    let total: usize = namespaces.iter().map(|(_, c)| c).sum();
    runtime()?.block_on(async move {
        let server = TestServer::builder()
            // every ADDED event of the load stays in the watch cache, with
            // room for the scenarios' own writes
            .history_size(total + 100_000)
            .deployment_simulator(None)
            .start()
            .await
            .map_err(|e| format!("starting the testserver: {e}"))?;
        let objects = server.objects();
        for (name, count) in &namespaces {
            let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            objects
                .create("namespaces", "", ns)
                .map_err(|e| format!("creating namespace {name}: {e}"))?;
            objects
                .bulk_load(
                    "configmaps",
                    name,
                    (0..*count).map(|i| fixtures::configmap_value(i, 0)),
                )
                .map_err(|e| format!("loading {count} ConfigMaps into {name}: {e}"))?;
        }
        #[allow(clippy::print_stdout)]
        {
            println!("{}", server.url());
        }
        std::io::stdout()
            .flush()
            .map_err(|e| format!("writing the URL: {e}"))?;
        // Blocks a runtime thread until the parent closes our stdin; the
        // server keeps serving on the other worker and the blocking pool.
        tokio::task::spawn_blocking(|| {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
        })
        .await
        .map_err(|e| format!("waiting for the end of input: {e}"))?;
        server.shutdown().await;
        Ok(())
    })
}
