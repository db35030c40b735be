//! The measuring children of the wire scenario: this binary started again
//! as `kcontrol-bench __wire-child` with its task in the environment, so
//! that each measurement has a process of its own (its RSS and CPU hold
//! only the client, the runtime and the informer; no server, no other row).
//!
//! Both measuring roles build the same client: the server's CA trusted and
//! reads asked in the row's encoding ([`kcontrol_client::ContentType`]).
//!
//! - `floor`: one request for a capture through that client and TLS, with
//!   the capture's own `Accept` (the fixture README's), its body received
//!   and dropped chunk by chunk; the time from sending the request until
//!   the capture's last byte arrived.
//! - `sync`: one informer's initial sync ([`crate::informer::sync::sync_with`]):
//!   time from `run` to the handler registration's `has_synced`, CPU time
//!   of the process over it, peak RSS, RSS two seconds later; the informer
//!   asks and decodes as the client's content type says.
//! - `memory` (for profiling, not run by the scenario): the same sync
//!   from the capture held in memory ([`super::memory`]), decoded by the
//!   client's decoders of the capture's encoding.

use std::collections::HashMap;
use std::process::Command;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::BodyExt;
use kcontrol_client::{Client, Config, ContentType};
use serde_json::{json, Value};

use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::compact::CompactConfigMap;
use kcontrol_indexer::compact::CompactPartialObjectMetadata;
use kcontrol_indexer::PartialObjectMetadata;
use kcontrol_informer::SharedIndexInformer;

use super::fixture::{self, Capture};
use super::memory::CaptureListerWatcher;
use super::{tls, CachedType, Encoding, Row, OBJECTS};
use crate::informer::sync::sync_of;
use crate::informer::ChildSpec;

/// The first argument that makes this binary a wire child.
pub const CHILD_ARG: &str = "__wire-child";

const ROLE_ENV: &str = "KCONTROL_BENCH_WIRE_ROLE";
const URL_ENV: &str = "KCONTROL_BENCH_WIRE_URL";
const CA_ENV: &str = "KCONTROL_BENCH_WIRE_CA";
const ROW_ENV: &str = "KCONTROL_BENCH_WIRE_ROW";
const BYTES_ENV: &str = "KCONTROL_BENCH_WIRE_BYTES";
/// A command (split at spaces) to run each sync child under, for
/// profiling the paced path, for example
/// `perf record -F 4999 --call-graph dwarf,32768 -o /tmp/perf.sync`.
const WRAP_ENV: &str = "KCONTROL_BENCH_WIRE_WRAP";
/// Objects in the capture of the `memory` role (default [`OBJECTS`]).
const OBJECTS_ENV: &str = "KCONTROL_BENCH_WIRE_OBJECTS";

/// A child to start: its role and what it measures.
pub struct Task<'a> {
    /// `floor` or `sync`.
    pub role: &'static str,
    /// The server's URL.
    pub url: &'a str,
    /// The CA the server's certificate chains to (PEM).
    pub ca_pem: &'a str,
    /// The row measured.
    pub row: Row,
    /// The capture's length (what a floor must receive).
    pub bytes: usize,
}

impl Task<'_> {
    /// The command that runs `exe` as this child: the sync child under the
    /// profiler [`WRAP_ENV`] names, if set.
    fn command(&self, exe: std::path::PathBuf) -> Command {
        let wrap = std::env::var(WRAP_ENV).unwrap_or_default();
        let mut words = wrap.split_whitespace();
        match words.next() {
            Some(program) if self.role == "sync" => {
                let mut command = Command::new(program);
                command.args(words).arg(exe);
                command
            }
            _ => Command::new(exe),
        }
    }

    /// Runs the task in a fresh child process and returns the JSON object
    /// it printed.
    pub fn run(&self) -> Result<HashMap<String, Value>, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
        let out = self
            .command(exe)
            .arg(CHILD_ARG)
            .env(ROLE_ENV, self.role)
            .env(URL_ENV, self.url)
            .env(CA_ENV, self.ca_pem)
            .env(ROW_ENV, self.row.key())
            .env(BYTES_ENV, self.bytes.to_string())
            .output()
            .map_err(|e| format!("cannot start the {} child: {e}", self.role))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(format!(
                "the {} child of {} failed ({}): {stderr}",
                self.role,
                self.row.key(),
                out.status
            ));
        }
        serde_json::from_str(stdout.trim())
            .map_err(|e| format!("the {} child printed {stdout:?}: {e}", self.role))
    }
}

/// Entry point of a child: runs the task in the environment and prints its
/// JSON result.
pub fn child_main() -> std::process::ExitCode {
    match run_task() {
        Ok(out) => {
            #[allow(clippy::print_stdout)]
            {
                println!("{out}");
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{CHILD_ARG}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run_task() -> Result<Value, String> {
    let var = |name: &str| std::env::var(name).map_err(|e| format!("{name}: {e}"));
    let role = var(ROLE_ENV)?;
    let row = Row::from_key(&var(ROW_ENV)?)?;
    let spec = ChildSpec {
        role: role.clone(),
        url: String::new(),
        namespace: "bench".to_owned(),
        objects: OBJECTS,
        watch_list: row.mode.is_watch_list(),
        kind: row.cached_type.informer_kind(),
        malloc_conf: None,
    };
    let runtime = crate::informer::runtime()?;
    if role == "memory" {
        let mut spec = spec;
        // a cut capture (for a profiler) holds fewer objects
        if let Ok(objects) = std::env::var(OBJECTS_ENV) {
            spec.objects = objects.parse().map_err(|e| format!("{OBJECTS_ENV}: {e}"))?;
        }
        return runtime.block_on(memory_sync(&spec, row));
    }
    // the floor's client is the sync's; the floor names the encoding in
    // its own Accept, which the client keeps
    let config = client_config(&var(URL_ENV)?, &var(CA_ENV)?, row.encoding)?;
    runtime.block_on(async {
        let client = Client::new(config).map_err(|e| format!("the client: {e}"))?;
        match role.as_str() {
            "floor" => {
                let bytes = var(BYTES_ENV)?
                    .parse()
                    .map_err(|e| format!("{BYTES_ENV}: {e}"))?;
                floor(&client, row.capture(), bytes).await
            }
            "sync" => crate::informer::sync::sync_with(&spec, client).await,
            other => Err(format!("{ROLE_ENV}: unknown role {other:?}")),
        }
    })
}

/// The `memory` role: the row's sync from its capture held in this
/// process ([`CaptureListerWatcher`]), without server or transport.
async fn memory_sync(spec: &ChildSpec, row: Row) -> Result<Value, String> {
    let capture = row.capture();
    let data = fixture::load(&fixture::directory(None), capture)?;
    let lw = if row.mode.is_watch_list() {
        CaptureListerWatcher::new(Bytes::new(), data, capture.encoding)
    } else {
        CaptureListerWatcher::new(data, Bytes::new(), capture.encoding)
    };
    match row.cached_type {
        CachedType::ConfigMap => {
            let builder = SharedIndexInformer::<ConfigMap>::builder(lw);
            sync_of(spec, builder, true).await
        }
        CachedType::CompactConfigMap => {
            sync_of(
                spec,
                SharedIndexInformer::<CompactConfigMap>::builder(lw),
                false,
            )
            .await
        }
        CachedType::Metadata => {
            let builder = SharedIndexInformer::<PartialObjectMetadata<ConfigMap>>::builder(lw);
            sync_of(spec, builder, true).await
        }
        CachedType::CompactMetadata => {
            let builder =
                SharedIndexInformer::<CompactPartialObjectMetadata<ConfigMap>>::builder(lw);
            sync_of(spec, builder, true).await
        }
    }
}

/// The client of a row: the server's CA trusted, reads in the row's
/// encoding (protobuf: what client-go's informers ask, and the client's
/// default), every other setting the default (client-go's rate limit, page
/// size and timeouts).
fn client_config(url: &str, ca_pem: &str, encoding: Encoding) -> Result<Config, String> {
    let uri = url
        .parse()
        .map_err(|e| format!("server URL {url:?}: {e}"))?;
    let mut config = Config::new(uri).with_content_type(content_type(encoding));
    config.tls.root_certs = tls::certificates(ca_pem)?;
    Ok(config)
}

/// The client's content type of an encoding.
fn content_type(encoding: Encoding) -> ContentType {
    match encoding {
        Encoding::Json => ContentType::Json,
        Encoding::Protobuf => ContentType::Protobuf,
    }
}

/// Receives `capture` and drops it chunk by chunk: the time from sending
/// the request to its `bytes`-th byte.
async fn floor(client: &Client, capture: Capture, bytes: usize) -> Result<Value, String> {
    let request = http::Request::get(capture.path_and_query())
        .header(http::header::ACCEPT, capture.accept())
        .body(Bytes::new())
        .map_err(|e| format!("the floor request: {e}"))?;
    let start = Instant::now();
    let response = client
        .request_raw(request)
        .await
        .map_err(|e| format!("GET {}: {e}", capture.path_and_query()))?;
    if !response.status().is_success() {
        return Err(format!(
            "{} answered {}",
            capture.file_name(),
            response.status()
        ));
    }
    let mut body = response.into_body();
    let mut received = 0usize;
    // a watch stays open after its bytes: stop at the last one
    while received < bytes {
        match body.frame().await {
            None => break,
            Some(frame) => {
                let frame = frame.map_err(|e| format!("reading {}: {e}", capture.file_name()))?;
                if let Some(data) = frame.data_ref() {
                    received += data.len();
                }
            }
        }
    }
    let floor_seconds = start.elapsed().as_secs_f64();
    if received != bytes {
        return Err(format!(
            "{}: received {received} bytes, want {bytes}",
            capture.file_name()
        ));
    }
    Ok(json!({ "floor_seconds": floor_seconds, "bytes": received }))
}
