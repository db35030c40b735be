//! The kube-apiserver 1.36 fixture bytes (`kube-apiserver-1.36/` beside
//! the workspace's `../shared/fixtures`): which file answers which request,
//! its content type, the rate the real server sent it at, and loading it
//! (gunzipped once, into memory).

use std::io::Read;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::{Encoding, Pace};

/// Environment variable naming the fixture directory (the `--fixtures`
/// flag wins over it).
pub const FIXTURES_ENV: &str = "KCONTROL_BENCH_WIRE_FIXTURES";

/// The default fixture directory, relative to the workspace root.
const DEFAULT_DIR: &str = "../shared/fixtures/kube-apiserver-1.36";

/// What a captured answer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Body {
    /// The list at `resourceVersion=0` (one answer).
    List,
    /// The WatchList stream: 100,000 ADDED events, then the
    /// initial-events-end bookmark.
    WatchList,
    /// The metadata-only list (`PartialObjectMetadataList`).
    MetadataList,
}

impl Body {
    /// The file name stem (`list`, `watchlist`, `meta`).
    fn stem(self) -> &'static str {
        match self {
            Body::List => "list",
            Body::WatchList => "watchlist",
            Body::MetadataList => "meta",
        }
    }
}

/// One captured answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Capture {
    /// What it holds.
    pub body: Body,
    /// How it is encoded.
    pub encoding: Encoding,
}

impl Capture {
    /// The gzip file of this capture, e.g. `list.json.gz`.
    pub fn file_name(self) -> String {
        let ext = match self.encoding {
            Encoding::Json => "json",
            Encoding::Protobuf => "pb",
        };
        format!("{}.{ext}.gz", self.body.stem())
    }

    /// The `Content-Type` the real server answered with (`*.headers`).
    pub fn content_type(self) -> &'static str {
        match (self.encoding, self.body) {
            (Encoding::Json, _) => "application/json",
            (Encoding::Protobuf, Body::WatchList) => {
                "application/vnd.kubernetes.protobuf;stream=watch"
            }
            (Encoding::Protobuf, _) => "application/vnd.kubernetes.protobuf",
        }
    }

    /// The `Accept` a client sends for this answer (the fixture README's).
    pub fn accept(self) -> &'static str {
        match (self.encoding, self.body) {
            (Encoding::Json, Body::MetadataList) => {
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
            }
            (Encoding::Json, _) => "application/json",
            (Encoding::Protobuf, Body::List) => "application/vnd.kubernetes.protobuf",
            (Encoding::Protobuf, Body::WatchList) => {
                "application/vnd.kubernetes.protobuf;stream=watch"
            }
            (Encoding::Protobuf, Body::MetadataList) => {
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
            }
        }
    }

    /// The path and query the real server was asked (the fixture README's).
    pub fn path_and_query(self) -> &'static str {
        match self.body {
            Body::List | Body::MetadataList => {
                "/api/v1/namespaces/bench/configmaps?resourceVersion=0&limit=500"
            }
            Body::WatchList => {
                "/api/v1/namespaces/bench/configmaps?watch=1&sendInitialEvents=true\
                 &resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion="
            }
        }
    }

    /// Bytes a second at `pace` (`None`: as fast as loopback allows). The
    /// real server's fastest figures from the fixture README: the JSON list
    /// 197.7 MB in 1.76 s, the protobuf list 130.8 MB in 1.12 s, the JSON
    /// metadata list 98.3 MB in 2.27 s, the protobuf one 26.9 MB in
    /// 0.26 s; a WatchList stream at its encoding's list rate.
    pub fn rate(self, pace: Pace) -> Option<f64> {
        if pace == Pace::Unpaced {
            return None;
        }
        let (bytes, seconds) = match (self.encoding, self.body) {
            (Encoding::Json, Body::List | Body::WatchList) => (197_716_607.0, 1.76),
            (Encoding::Json, Body::MetadataList) => (98_316_631.0, 2.27),
            (Encoding::Protobuf, Body::List | Body::WatchList) => (130_816_534.0, 1.12),
            (Encoding::Protobuf, Body::MetadataList) => (26_916_558.0, 0.26),
        };
        Some(bytes / seconds)
    }
}

/// The fixture directory: `flag`, else [`FIXTURES_ENV`], else
/// [`DEFAULT_DIR`] relative to the workspace root.
pub fn directory(flag: Option<&Path>) -> PathBuf {
    if let Some(dir) = flag {
        return dir.to_owned();
    }
    if let Some(dir) = std::env::var_os(FIXTURES_ENV) {
        return PathBuf::from(dir);
    }
    // benches/ sits in the workspace root
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(DEFAULT_DIR)
}

/// Reads and gunzips one capture from `dir`; an error names the file and
/// says how to point the benchmark elsewhere.
pub fn load(dir: &Path, capture: Capture) -> Result<Bytes, String> {
    let path = dir.join(capture.file_name());
    let file = std::fs::File::open(&path).map_err(|e| {
        format!(
            "cannot open the kube-apiserver fixture {} ({e}); the wire scenario needs \
             kube-apiserver-1.36/ from the project's shared fixtures: pass its directory \
             with --fixtures or {FIXTURES_ENV}",
            path.display()
        )
    })?;
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::io::BufReader::new(file))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot gunzip {}: {e}", path.display()))?;
    if bytes.is_empty() {
        return Err(format!("{} unpacks to nothing", path.display()));
    }
    Ok(Bytes::from(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_fixture_is_an_error_naming_its_path() {
        let dir = Path::new("/nonexistent/kube-apiserver-1.36");
        let capture = Capture {
            body: Body::List,
            encoding: Encoding::Json,
        };
        let err = load(dir, capture).unwrap_err();
        assert!(
            err.contains("/nonexistent/kube-apiserver-1.36/list.json.gz"),
            "{err}"
        );
        assert!(err.contains("--fixtures"), "{err}");
    }

    #[test]
    fn a_file_that_is_not_gzip_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("meta.pb.gz"), b"not gzip").unwrap();
        let capture = Capture {
            body: Body::MetadataList,
            encoding: Encoding::Protobuf,
        };
        let err = load(dir.path(), capture).unwrap_err();
        assert!(err.contains("cannot gunzip"), "{err}");
    }

    #[test]
    fn watch_lists_go_at_their_encodings_list_rate() {
        for encoding in [Encoding::Json, Encoding::Protobuf] {
            let list = Capture {
                body: Body::List,
                encoding,
            };
            let watch = Capture {
                body: Body::WatchList,
                encoding,
            };
            assert_eq!(list.rate(Pace::Real), watch.rate(Pace::Real));
            assert_eq!(list.rate(Pace::Unpaced), None);
        }
        let json = Capture {
            body: Body::List,
            encoding: Encoding::Json,
        };
        let rate = json.rate(Pace::Real).unwrap();
        assert!((rate * 1.76 - 197_716_607.0).abs() < 1.0);
    }
}
