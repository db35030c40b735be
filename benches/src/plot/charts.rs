//! The charts `kcontrol-bench plot` draws, declared (see [`super`] for how
//! to add one). Each reads the rows it recognises by their fields, from
//! whichever file they are in; a chart none of whose rows is there is
//! skipped.

use super::data::Row;
use super::format::{self, median, ratio, significant};
use super::peers;
use super::spec::{Annotation, Bars, Chart, Kind, Panel, Series, Timeline};

/// Every chart, in the order they are written.
pub fn all() -> Vec<Chart> {
    vec![
        queue(),
        informer_sync(),
        wire_sync(),
        relist(),
        controller(),
        soak_rss(),
    ]
}

/// The median of a field over rows, formatted.
fn median_of(rows: &[&Row], field: &str) -> Option<f64> {
    median(&rows.iter().filter_map(|r| r.num(field)).collect::<Vec<_>>())
}

fn mib(v: f64) -> String {
    format!("{} MiB", significant(v))
}

fn ms(v: f64) -> String {
    format!("{} ms", significant(v))
}

fn queue() -> Chart {
    Chart {
        name: "queue",
        title: "Work queue throughput beside a channel carrying the same keys",
        note: "kcontrol-bench queue: each scenario (single thread; dedup adds with 2 workers; \
               adds of waiting keys; N workers; rate-limited add + forget; add_after) beside a \
               crossbeam channel carrying the same String keys in the same run, without \
               deduplication; the right column is the median of the same-run ratios \
               (queue ÷ channel; dedup-waiting also ÷ a plain Mutex<(HashSet, VecDeque)> \
               queue, client-go's design). delayed-paced (lateness at a fixed rate, not \
               throughput) is left out. Log scale.",
        kind: Kind::Bars(Bars {
            category: |r| {
                r.num("reference_items_per_sec")?;
                r.num("items_per_sec")?;
                let scenario = r.scenario();
                (!scenario.ends_with("-paced")).then(|| scenario.to_owned())
            },
            panels: vec![Panel {
                title: "items (or adds) per second",
                log: true,
                format: format::si,
                series: vec![
                    Series {
                        name: "kcontrol work queue",
                        value: |r| r.num("items_per_sec"),
                    },
                    Series {
                        name: "channel (same run)",
                        value: |r| r.num("reference_items_per_sec"),
                    },
                    Series {
                        name: "Mutex queue (same run)",
                        value: |r| r.num("mutex_adds_per_sec"),
                    },
                ],
                lines: vec![],
                annotate: Some(Annotation {
                    title: "÷ channel",
                    text: |rows| {
                        let channel = ratio(median_of(rows, "ratio")?);
                        Some(match median_of(rows, "mutex_ratio") {
                            Some(m) => format!("{channel}\n{} ÷ Mutex", ratio(m)),
                            None => channel,
                        })
                    },
                }),
                targets: Some(&peers::QUEUE_TARGETS),
            }],
            peers: vec![],
        }),
    }
}

/// The category of an informer row: its cached type.
fn cached_type(r: &Row) -> Option<&'static str> {
    let t = r.text("cached_type")?;
    Some(if t.starts_with("Compact") {
        "CompactConfigMap"
    } else if t.starts_with("PartialObjectMetadata") || t == "metadata" {
        "metadata only"
    } else if t == "ConfigMap" {
        "ConfigMap (stripped)"
    } else {
        return None;
    })
}

fn informer_sync() -> Chart {
    Chart {
        name: "informer-sync",
        title: "Informer initial sync of 100,000 ConfigMaps, by cached type",
        note: "kcontrol-bench informer: a SharedIndexInformer as a controller builds it \
               (managedFields stripped, page size 500) against the testserver in another \
               process over loopback HTTP; 100,000 ConfigMaps of ~1 KiB JSON; sync = run() to \
               has_synced; memory = the whole informer process's VmRSS 2 s after the sync over \
               the objects; dashed lines: serde_json decoding of the same list into \
               k8s-openapi ConfigMaps in a fresh process (cold: first decode; warm: best of 3 \
               more). Peers were measured against a real kube-apiserver, which sends JSON slower \
               than the testserver (issue 23): only roughly comparable; the wire-sync chart \
               compares on real kube-apiserver bytes.",
        kind: Kind::Bars(Bars {
            category: |r| {
                let mode = r.scenario();
                if (mode == "sync-list" || mode == "sync-watchlist")
                    && r.num("objects") == Some(100_000.0)
                {
                    cached_type(r).map(str::to_owned)
                } else {
                    None
                }
            },
            panels: vec![
                Panel {
                    title: "sync until has_synced",
                    log: false,
                    format: format::seconds,
                    series: vec![
                        Series {
                            name: "list",
                            value: |r| r.when("scenario", "sync-list")?.num("sync_seconds"),
                        },
                        Series {
                            name: "WatchList",
                            value: |r| r.when("scenario", "sync-watchlist")?.num("sync_seconds"),
                        },
                    ],
                    lines: vec![
                        Series {
                            name: "cold decode",
                            value: |r| r.num("decode_seconds"),
                        },
                        Series {
                            name: "warm",
                            value: |r| r.num("decode_warm_seconds"),
                        },
                    ],
                    annotate: None,
                    targets: None,
                },
                Panel {
                    title: "steady RSS per object",
                    log: false,
                    format: format::bytes,
                    series: vec![
                        Series {
                            name: "list",
                            value: |r| {
                                r.when("scenario", "sync-list")?
                                    .num("steady_rss_bytes_per_object")
                            },
                        },
                        Series {
                            name: "WatchList",
                            value: |r| {
                                r.when("scenario", "sync-watchlist")?
                                    .num("steady_rss_bytes_per_object")
                            },
                        },
                    ],
                    lines: vec![],
                    annotate: None,
                    targets: None,
                },
            ],
            peers: vec![&peers::CLIENT_GO_INFORMER, &peers::KUBE_RS_INFORMER],
        }),
    }
}

fn wire_sync() -> Chart {
    Chart {
        name: "wire-sync",
        title: "Informer sync on real kube-apiserver bytes, by cached type and encoding",
        note: "kcontrol-bench wire: the informer syncs from a loopback HTTPS server that sends \
               the bytes a real kube-apiserver 1.36 sent (../shared/fixtures/kube-apiserver-1.36), \
               paced at the rate it sent them; floor = receiving and discarding the same bytes at \
               the same pace; the right column is the list sync ÷ its floor.",
        kind: Kind::Bars(Bars {
            category: |r| {
                if r.scenario() != "wire-sync" || r.text("pace") != Some("real") {
                    return None;
                }
                Some(format!("{} · {}", cached_type(r)?, r.text("encoding")?))
            },
            panels: vec![
                Panel {
                    title: "sync until has_synced",
                    log: false,
                    format: format::seconds,
                    series: vec![
                        Series {
                            name: "list",
                            value: |r| r.when("mode", "list")?.num("sync_seconds"),
                        },
                        Series {
                            name: "WatchList",
                            value: |r| r.when("mode", "watchlist")?.num("sync_seconds"),
                        },
                        Series {
                            name: "floor (list bytes)",
                            value: |r| r.when("mode", "list")?.num("floor_seconds"),
                        },
                    ],
                    lines: vec![],
                    annotate: Some(Annotation {
                        title: "list ÷ floor",
                        text: |rows| {
                            let list: Vec<&Row> = rows
                                .iter()
                                .copied()
                                .filter(|r| r.text("mode") == Some("list"))
                                .collect();
                            median_of(&list, "ratio").map(ratio)
                        },
                    }),
                    targets: None,
                },
                Panel {
                    title: "steady RSS per object",
                    log: false,
                    format: format::bytes,
                    series: vec![
                        Series {
                            name: "list",
                            value: |r| r.when("mode", "list")?.num("steady_rss_bytes_per_object"),
                        },
                        Series {
                            name: "WatchList",
                            value: |r| {
                                r.when("mode", "watchlist")?
                                    .num("steady_rss_bytes_per_object")
                            },
                        },
                    ],
                    lines: vec![],
                    annotate: None,
                    targets: None,
                },
            ],
            peers: vec![&peers::CLIENT_GO_INFORMER],
        }),
    }
}

fn relist() -> Chart {
    Chart {
        name: "relist",
        title: "Memory of a relist of 100,000 objects into a full cache",
        note: "kcontrol-bench relist: the informer alone in a fresh process (server in another) \
               holds 100,000 ConfigMaps; a 410 on the re-watch forces a relist (a paged list, \
               or WatchList); steady = VmRSS 3 s after the initial sync, peak = VmHWM from the \
               410 until an object created after the relist reaches the handler; with \
               jemalloc's default options and with one arena (_RJEM_MALLOC_CONF=narenas:1). \
               The right column is the median peak ÷ steady of the same runs (issue 6's target: \
               at most 1.3x).",
        kind: Kind::Bars(Bars {
            category: |r| {
                if r.scenario() != "relist" {
                    return None;
                }
                let mode = if r.flag("watchlist")? {
                    "WatchList"
                } else {
                    "paged list"
                };
                let arenas = match r.text("malloc_conf")? {
                    "default" => "jemalloc defaults",
                    "narenas:1" => "one jemalloc arena",
                    other => other,
                };
                Some(format!("{mode} · {arenas}"))
            },
            panels: vec![Panel {
                title: "resident memory of the informer process",
                log: false,
                format: format::bytes,
                series: vec![
                    Series {
                        name: "steady",
                        value: |r| r.num("steady_rss_bytes"),
                    },
                    Series {
                        name: "relist peak",
                        value: |r| r.num("relist_peak_rss_bytes"),
                    },
                ],
                lines: vec![],
                annotate: Some(Annotation {
                    title: "peak ÷ steady",
                    text: |rows| median_of(rows, "ratio").map(ratio),
                }),
                targets: None,
            }],
            peers: vec![&peers::CLIENT_GO_RELIST, &peers::KUBE_RS_RELIST],
        }),
    }
}

fn controller() -> Chart {
    Chart {
        name: "controller",
        title: "sample-controller: CPU and memory converging N Foos",
        note: "kcontrol-bench controller: the sample-controller in a child process (2 workers, \
               client QPS limit 100,000, jemalloc) against the testserver (HTTPS on loopback, \
               Deployment simulator) in the bench process, from the Foos' creation until every \
               Foo reports its replicas available; CPU from /proc/<pid>/stat per Foo; RSS idle = \
               after the caches synced, peak = VmHWM. The right column is the wall time and its \
               ratio to a bare client doing the same three writes per Foo on the same server \
               (the floor). client-go's figures are from a real kube-apiserver.",
        kind: Kind::Bars(Bars {
            category: |r| {
                if r.scenario() != "controller" {
                    return None;
                }
                let foos = r.num("foos")?;
                Some(format!("kcontrol · {} Foos", significant(foos)))
            },
            panels: vec![
                Panel {
                    title: "CPU time per Foo",
                    log: false,
                    format: ms,
                    series: vec![
                        Series {
                            name: "controller",
                            value: |r| r.num("ctl_cpu_ms_per_foo"),
                        },
                        Series {
                            name: "API server (testserver)",
                            value: |r| r.num("srv_cpu_ms_per_foo"),
                        },
                    ],
                    lines: vec![],
                    annotate: Some(Annotation {
                        title: "converged in",
                        text: |rows| {
                            let wall = median_of(rows, "wall_s")?;
                            let floor = median_of(rows, "ratio")?;
                            Some(format!("{}\n{} floor", format::seconds(wall), ratio(floor)))
                        },
                    }),
                    targets: None,
                },
                Panel {
                    title: "controller RSS",
                    log: false,
                    format: mib,
                    series: vec![
                        Series {
                            name: "idle (caches synced)",
                            value: |r| r.num("ctl_idle_rss_mib"),
                        },
                        Series {
                            name: "peak",
                            value: |r| r.num("ctl_peak_rss_mib"),
                        },
                    ],
                    lines: vec![],
                    annotate: None,
                    targets: None,
                },
            ],
            peers: vec![&peers::CLIENT_GO_SAMPLE_CONTROLLER],
        }),
    }
}

fn soak_rss() -> Chart {
    Chart {
        name: "soak-rss",
        title: "Soak: the controller's memory under churn and faults",
        note: "kcontrol-bench soak: the sample-controller in a child process under random Foo \
               churn and one random fault every 0.5-2.5 s (watch drops, 410s, compaction, \
               429/5xx bursts, a lagging replica, watch cache (re)initialization; SIGTERM and \
               SIGKILL restarts in the first half only), then churn and faults stop and the state \
               must converge (shaded). RSS sampled every 0.5 s; a restart starts a new process. \
               rss_growth = end ÷ warm-up reading (each the median of 5).",
        kind: Kind::Timeline(Timeline {
            select: |r| r.scenario() == "soak" && r.get("rss_samples").is_some(),
            run_label: |r| {
                let seed = r
                    .get("seed")
                    .map_or_else(|| "?".to_owned(), ToString::to_string);
                let duration = r
                    .num("duration_s")
                    .map_or_else(|| "?".to_owned(), significant);
                let mut label = format!("seed {seed}, {duration} s");
                if let Some(growth) = r.num("rss_growth") {
                    label.push_str(&format!(": growth {}", ratio(growth)));
                }
                label
            },
            samples: "rss_samples",
            scale: 1.0 / (1024.0 * 1024.0),
            axis: "controller RSS (MiB)",
            events: "fault_times",
            major_events: &["sigkill", "sigterm"],
            span: Some(("churn_end_s", "settled_at_s", "settle")),
            points: &[
                ("rss_warm_at_s", "rss_warm_mib", "warm-up"),
                ("churn_end_s", "rss_end_mib", "end"),
            ],
        }),
    }
}
