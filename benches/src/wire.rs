//! The `wire` scenario (issue 23 item 4): an informer's initial sync of
//! 100,000 ConfigMaps from the exact bytes a real kube-apiserver 1.36 sent
//! (`kube-apiserver-1.36/` of the shared fixtures: the list, the WatchList
//! stream and the metadata-only list, in JSON and protobuf), served by a
//! loopback HTTPS server that does nothing else ([`server`]).
//!
//! One row for each pace (`real`: at the rates the real server sent them,
//! see [`fixture::Capture::rate`]; `unpaced`: as fast as loopback allows),
//! encoding, mode (`list`: the first list at `resourceVersion=0`, one
//! answer; `watchlist`: WatchList streaming) and cached type (`ConfigMap`
//! with managedFields stripped, `CompactConfigMap`, `metadata`: a
//! metadata-only informer's `PartialObjectMetadata<ConfigMap>`). No
//! metadata-only WatchList was captured, so `metadata` rows are lists only.
//!
//! Each row runs two fresh child processes ([`child`]), one after the
//! other: the floor (the same request through the same client and TLS at
//! the same pace, its bytes received and dropped) and the sync (time from
//! `run` to `has_synced`, the process's CPU time over it, its peak RSS
//! and its RSS two seconds after, per object). The server runs in this
//! process, so neither child's memory holds it; times include the server
//! sending on the same two cores. `--rounds N` repeats every row N times,
//! interleaved (round after round, not row after row).
//!
//! The sync child of a protobuf row asks protobuf as client-go's informers
//! do (`Config::with_content_type(ContentType::Protobuf)`), a JSON row's
//! JSON; a row whose sync child did not fetch the row's capture (another
//! encoding or body) is an error, not a figure.

mod child;
mod fixture;
mod memory;
mod pace;
mod server;
mod tls;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use clap::ValueEnum;
use serde_json::{json, Value};

pub use child::{child_main, CHILD_ARG};
use fixture::{Body, Capture};
use server::WireServer;

use crate::informer::{bytes_field, field};
use crate::report::{row, Report};

/// Objects in every capture.
pub const OBJECTS: usize = 100_000;

/// How fast the server sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum)]
pub enum Pace {
    /// At the rate the real server sent the capture.
    Real,
    /// As fast as loopback allows.
    Unpaced,
}

/// The wire encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum)]
pub enum Encoding {
    /// `application/json`.
    Json,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

/// How the informer syncs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum)]
pub enum Mode {
    /// The first list, at `resourceVersion=0`.
    List,
    /// WatchList streaming (`sendInitialEvents=true`).
    Watchlist,
}

impl Mode {
    fn is_watch_list(self) -> bool {
        self == Mode::Watchlist
    }
}

/// What the informer caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum)]
pub enum CachedType {
    /// k8s-openapi's `ConfigMap`, managedFields stripped.
    #[value(name = "ConfigMap")]
    ConfigMap,
    /// `kcontrol_indexer::compact::CompactConfigMap`.
    #[value(name = "CompactConfigMap")]
    CompactConfigMap,
    /// A metadata-only informer's `PartialObjectMetadata<ConfigMap>`.
    #[value(name = "metadata")]
    Metadata,
    /// A compact metadata-only informer's
    /// `CompactPartialObjectMetadata<ConfigMap>` (the same requests).
    #[value(name = "compact-metadata")]
    CompactMetadata,
}

impl CachedType {
    /// The `kind` of the informer scenario's sync child.
    fn informer_kind(self) -> &'static str {
        match self {
            CachedType::ConfigMap => "full",
            CachedType::CompactConfigMap => "compact",
            CachedType::Metadata => "metadata",
            CachedType::CompactMetadata => "compact-metadata",
        }
    }

    /// Whether the informer lists metadata only.
    fn is_metadata(self) -> bool {
        matches!(self, CachedType::Metadata | CachedType::CompactMetadata)
    }
}

/// The name of a value as the CLI and the output spell it.
fn name<T: ValueEnum>(value: T) -> String {
    value
        .to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_owned())
}

/// The value named `text` (as [`name`] spells it).
fn parse<T: ValueEnum>(text: &str) -> Result<T, String> {
    T::from_str(text, false).map_err(|e| format!("{text:?}: {e}"))
}

/// One measured combination.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Row {
    /// How fast the server sends.
    pub pace: Pace,
    /// The wire encoding.
    pub encoding: Encoding,
    /// List or WatchList.
    pub mode: Mode,
    /// What the informer caches.
    pub cached_type: CachedType,
}

impl Row {
    /// The capture that answers this row's sync.
    pub fn capture(self) -> Capture {
        let body = match (self.mode, self.cached_type) {
            (Mode::Watchlist, _) => Body::WatchList,
            (Mode::List, t) if t.is_metadata() => Body::MetadataList,
            (Mode::List, _) => Body::List,
        };
        Capture {
            body,
            encoding: self.encoding,
        }
    }

    /// `pace/encoding/mode/cached_type`, as a child is told its row.
    fn key(self) -> String {
        format!(
            "{}/{}/{}/{}",
            name(self.pace),
            name(self.encoding),
            name(self.mode),
            name(self.cached_type)
        )
    }

    /// The row of a [`Row::key`].
    fn from_key(key: &str) -> Result<Self, String> {
        let parts: Vec<&str> = key.split('/').collect();
        let [pace, encoding, mode, cached_type] = parts[..] else {
            return Err(format!("{key:?} is not pace/encoding/mode/cached_type"));
        };
        Ok(Self {
            pace: parse(pace)?,
            encoding: parse(encoding)?,
            mode: parse(mode)?,
            cached_type: parse(cached_type)?,
        })
    }
}

/// The scenario's options (empty lists: every value).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The fixture directory (else the environment's, else the default).
    pub fixtures: Option<PathBuf>,
    /// Paces to run.
    pub paces: Vec<Pace>,
    /// Encodings to run.
    pub encodings: Vec<Encoding>,
    /// Modes to run.
    pub modes: Vec<Mode>,
    /// Cached types to run.
    pub cached_types: Vec<CachedType>,
    /// How many times each row runs, interleaved (at least 1).
    pub rounds: u32,
}

/// `chosen`, or every value when it is empty.
fn or_all<T: ValueEnum + Clone>(chosen: &[T]) -> Vec<T> {
    if chosen.is_empty() {
        T::value_variants().to_vec()
    } else {
        chosen.to_vec()
    }
}

impl Options {
    /// The rows to run, in order (a metadata-only WatchList has no capture).
    pub fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        for pace in or_all(&self.paces) {
            for encoding in or_all(&self.encodings) {
                for mode in or_all(&self.modes) {
                    for cached_type in or_all(&self.cached_types) {
                        if mode == Mode::Watchlist && cached_type.is_metadata() {
                            continue;
                        }
                        rows.push(Row {
                            pace,
                            encoding,
                            mode,
                            cached_type,
                        });
                    }
                }
            }
        }
        rows
    }
}

/// Runs the scenario.
pub fn bench(report: &mut Report, options: &Options) -> Result<(), String> {
    let rows = options.rows();
    if rows.is_empty() {
        return Err("wire: no row left (a metadata-only WatchList has no capture)".to_owned());
    }
    let dir = fixture::directory(options.fixtures.as_deref());
    let mut captures = HashMap::new();
    for capture in rows.iter().map(|r| r.capture()).collect::<BTreeSet<_>>() {
        captures.insert(capture, fixture::load(&dir, capture)?);
    }
    let captures: server::Captures = Arc::new(captures);
    let tls = tls::generate()?;
    let runtime = crate::informer::runtime()?;
    let mut servers = HashMap::new();
    for pace in rows.iter().map(|r| r.pace).collect::<BTreeSet<_>>() {
        let server = runtime.block_on(WireServer::start(
            Arc::clone(&captures),
            pace,
            Arc::clone(&tls.config),
        ))?;
        servers.insert(pace, server);
    }
    for _round in 0..options.rounds.max(1) {
        for &row in &rows {
            let server = servers
                .get(&row.pace)
                .ok_or_else(|| format!("wire: no server for {}", row.key()))?;
            let capture = row.capture();
            let url = server.url();
            let task = |role| child::Task {
                role,
                url: &url,
                ca_pem: &tls.ca_pem,
                row,
                bytes: captures.get(&capture).map_or(0, Bytes::len),
            };
            let floor = field(&task("floor").run()?, "floor_seconds")?;
            let served = server.served(capture);
            let sync = task("sync").run()?;
            if server.served(capture) == served {
                return Err(format!(
                    "wire: the sync child of {} never fetched {} (its client asked another \
                     encoding or body)",
                    row.key(),
                    capture.file_name()
                ));
            }
            report.row(row_of(row, floor, &sync)?);
        }
    }
    drop(servers);
    Ok(())
}

/// The output row of a floor and a sync child's figures.
fn row_of(r: Row, floor: f64, sync: &HashMap<String, Value>) -> Result<crate::report::Row, String> {
    let seconds = field(sync, "sync_seconds")?;
    let steady = bytes_field(sync, "steady_rss_bytes")? as f64;
    Ok(row([
        ("scenario", json!("wire-sync")),
        ("pace", json!(name(r.pace))),
        ("encoding", json!(name(r.encoding))),
        ("mode", json!(name(r.mode))),
        ("cached_type", json!(name(r.cached_type))),
        ("objects", json!(OBJECTS)),
        ("sync_seconds", json!(seconds)),
        ("floor_seconds", json!(floor)),
        ("ratio", json!(seconds / floor)),
        ("cpu_seconds", json!(field(sync, "cpu_seconds")?)),
        (
            "steady_rss_bytes_per_object",
            json!((steady / OBJECTS as f64).round()),
        ),
        (
            "peak_rss_bytes",
            json!(bytes_field(sync, "peak_rss_bytes")?),
        ),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_by_default_but_the_metadata_watch_list() {
        let rows = Options::default().rows();
        // 2 paces x 2 encodings x (4 list + 2 WatchList)
        assert_eq!(rows.len(), 24);
        assert!(!rows
            .iter()
            .any(|r| r.mode == Mode::Watchlist && r.cached_type.is_metadata()));
        let only = Options {
            paces: vec![Pace::Unpaced],
            encodings: vec![Encoding::Json],
            modes: vec![Mode::Watchlist],
            ..Options::default()
        };
        assert_eq!(only.rows().len(), 2);
    }

    #[test]
    fn a_row_key_round_trips_and_bad_keys_are_errors() {
        for r in Options::default().rows() {
            assert_eq!(Row::from_key(&r.key()).unwrap(), r);
        }
        assert_eq!(
            Row {
                pace: Pace::Real,
                encoding: Encoding::Protobuf,
                mode: Mode::List,
                cached_type: CachedType::CompactConfigMap,
            }
            .key(),
            "real/protobuf/list/CompactConfigMap"
        );
        assert!(Row::from_key("real/json/list").is_err());
        assert!(Row::from_key("fast/json/list/ConfigMap").is_err());
    }

    #[test]
    fn rows_map_to_their_captures() {
        let row = |mode, cached_type| Row {
            pace: Pace::Real,
            encoding: Encoding::Json,
            mode,
            cached_type,
        };
        assert_eq!(
            row(Mode::List, CachedType::Metadata).capture().body,
            Body::MetadataList
        );
        assert_eq!(
            row(Mode::List, CachedType::ConfigMap).capture().body,
            Body::List
        );
        assert_eq!(
            row(Mode::Watchlist, CachedType::CompactConfigMap)
                .capture()
                .body,
            Body::WatchList
        );
    }
}
