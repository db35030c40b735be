//! Figures that the harness did not measure: peers (client-go, kube-rs,
//! kubernetes/sample-controller) measured elsewhere, and targets, each
//! with where it comes from. Charts draw them beside the harness's rows,
//! labelled with their source.
//!
//! A peer is written as rows with the harness's own field names, so that a
//! chart's series read it exactly as they read a run; a figure given as a
//! range (`Range(low, high)`) becomes two rows, the low and the high one,
//! drawn as a bar at their middle with the range as whiskers.

use serde_json::{Map, Value};

use super::data::Row;

/// A value of a peer's row.
#[derive(Clone, Copy, Debug)]
pub enum Figure {
    /// A string field (`scenario`, `mode`, ...).
    Text(&'static str),
    /// One measured number.
    Num(f64),
    /// A range of measured numbers, low to high.
    Range(f64, f64),
}

/// Figures measured by someone else, as harness rows.
#[derive(Debug)]
pub struct Peer {
    /// What the chart calls it (its category label).
    pub label: &'static str,
    /// Where and how it was measured.
    pub source: &'static str,
    /// The rows, each a list of fields.
    pub rows: &'static [&'static [(&'static str, Figure)]],
}

impl Peer {
    /// The rows: each row with a range twice (low, then high).
    pub fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        for fields in self.rows {
            let ranged = fields.iter().any(|(_, f)| matches!(f, Figure::Range(..)));
            let ends: &[bool] = if ranged { &[false, true] } else { &[false] };
            for &high in ends {
                let map: Map<String, Value> = fields
                    .iter()
                    .map(|(name, figure)| {
                        let value = match *figure {
                            Figure::Text(t) => Value::from(t),
                            Figure::Num(v) => Value::from(v),
                            Figure::Range(low, hi) => Value::from(if high { hi } else { low }),
                        };
                        ((*name).to_owned(), value)
                    })
                    .collect();
                rows.push(Row::peer(self.label, map));
            }
        }
        rows
    }
}

/// Targets a chart marks on its bars, with their source.
#[derive(Debug)]
pub struct Targets {
    /// The legend's label.
    pub label: &'static str,
    /// Where the targets are set.
    pub source: &'static str,
    /// (category, value) pairs.
    pub marks: &'static [(&'static str, f64)],
}

use Figure::{Num, Range, Text};

/// MiB in bytes.
const MIB: f64 = 1024.0 * 1024.0;

/// client-go's informer against a real kube-apiserver (issue 23); its rows
/// carry both the `informer` scenario's `scenario` and `wire-sync`'s
/// `mode`, so both charts read them.
pub const CLIENT_GO_INFORMER: Peer = Peer {
    label: "client-go informer (protobuf)",
    source: "client-go's informer with its defaults (protobuf) against a real kube-apiserver \
             v1.36.2 (etcd 3.6, watch cache on, TLS on loopback), 100,000 ConfigMaps of about \
             1 KiB, three interleaved rounds on an idle 2-core machine; steady RSS 247 MiB after \
             a forced GC (issue 23)",
    rows: &[
        &[
            ("scenario", Text("sync-list")),
            ("mode", Text("list")),
            ("sync_seconds", Range(1.27, 1.78)),
            // 247 MiB over 100,000 objects
            ("steady_rss_bytes_per_object", Num(247.0 * MIB / 100_000.0)),
        ],
        &[
            ("scenario", Text("sync-watchlist")),
            ("mode", Text("watchlist")),
            ("sync_seconds", Range(2.03, 2.37)),
        ],
    ],
};

/// kube-rs's reflector against a real kube-apiserver (issue 6).
pub const KUBE_RS_INFORMER: Peer = Peer {
    label: "kube-rs 5.0 reflector",
    source: "kube-rs 5.0 against a real kube-apiserver 1.36, 100,000 such ConfigMaps: sync \
             5.6 s (3.9 s with streaming list), 719 MB steady (issue 6)",
    rows: &[
        &[
            ("scenario", Text("sync-list")),
            ("sync_seconds", Num(5.6)),
            ("steady_rss_bytes_per_object", Num(719e6 / 100_000.0)),
        ],
        &[
            ("scenario", Text("sync-watchlist")),
            ("sync_seconds", Num(3.9)),
        ],
    ],
};

/// client-go's relist memory (issue 6).
pub const CLIENT_GO_RELIST: Peer = Peer {
    label: "client-go informer",
    source: "client-go against a real kube-apiserver 1.36, 100,000 such ConfigMaps: ~435 MB \
             steady, relist peaks 690-850 MB (issue 6)",
    rows: &[&[
        ("steady_rss_bytes", Num(435e6)),
        ("relist_peak_rss_bytes", Range(690e6, 850e6)),
    ]],
};

/// kube-rs's relist memory (issue 6).
pub const KUBE_RS_RELIST: Peer = Peer {
    label: "kube-rs 5.0 reflector",
    source: "kube-rs 5.0 against a real kube-apiserver 1.36, 100,000 such ConfigMaps: 719 MB \
             steady, 1,425 MB relist peak (issue 6)",
    rows: &[&[
        ("steady_rss_bytes", Num(719e6)),
        ("relist_peak_rss_bytes", Num(1_425e6)),
    ]],
};

/// kubernetes/sample-controller on client-go (issue 7).
pub const CLIENT_GO_SAMPLE_CONTROLLER: Peer = Peer {
    label: "client-go sample-controller · 1,000 Foos",
    source: "kubernetes/sample-controller (client-go) against a real kube-apiserver 1.36, \
             1,000 Foos at client QPS 1000: 9-11 s, 3.03 writes per Foo, 2.3-4.4 ms of \
             controller CPU per Foo, 41 MB (39.1 MiB) peak RSS (issue 7)",
    rows: &[&[
        ("foos", Num(1000.0)),
        ("wall_s", Range(9.0, 11.0)),
        ("writes_per_foo", Num(3.03)),
        ("ctl_cpu_ms_per_foo", Range(2.3, 4.4)),
        ("ctl_peak_rss_mib", Num(41e6 / MIB)),
    ]],
};

/// The work queue's targets (issue 27, item 9).
pub const QUEUE_TARGETS: Targets = Targets {
    label: "target on an idle machine",
    source: "targets of issue 27 (item 9), for an idle machine: single ≥ 5 M items/s and \
             ≥ 0.35x the channel, workers-2 ≥ 5 M/s, rate-limited ≥ 8 M/s, dedup-waiting \
             ≥ 80 M adds/s",
    marks: &[
        ("single", 5e6),
        ("workers-2", 5e6),
        ("rate-limited", 8e6),
        ("dedup-waiting", 80e6),
    ],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_gives_a_low_and_a_high_row_and_every_field() {
        let rows = CLIENT_GO_INFORMER.rows();
        assert_eq!(rows.len(), 4);
        let sync: Vec<f64> = rows.iter().filter_map(|r| r.num("sync_seconds")).collect();
        assert_eq!(sync, [1.27, 1.78, 2.03, 2.37]);
        assert!(rows
            .iter()
            .all(|r| r.peer && r.source == CLIENT_GO_INFORMER.label));
        assert_eq!(rows[0].scenario(), "sync-list");
        assert_eq!(rows[3].scenario(), "sync-watchlist");
        // a one-value figure is in both rows of its ranged row
        let steady = rows[1].num("steady_rss_bytes_per_object").unwrap();
        assert_eq!(rows[0].num("steady_rss_bytes_per_object"), Some(steady));
        assert_eq!(steady.round(), 2590.0);
        assert_eq!(KUBE_RS_RELIST.rows().len(), 1);
    }
}
