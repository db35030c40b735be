//! `kcontrol-bench plot`: SVG charts of the benchmark results.
//!
//! It reads the JSON lines the scenarios print with `--json` (the files
//! given, or every `*.jsonl` in `benches/results/`), and writes one SVG a
//! chart to `docs/plots/<name>.svg`, which BENCHMARKS.md embeds. Rows are
//! recognised by their fields (`scenario`, `cached_type`, ...), not by the
//! file they are in. A chart none of whose rows is there is skipped with a
//! message; `--check` writes nothing and fails when a chart differs from
//! its file (a test runs it on the committed results and plots).
//!
//! Rendering is deterministic: the same rows give byte-identical SVG.
//! Charts are drawn with plotters' SVG backend, built without its `ttf`
//! feature, so nothing reads font files or asks fontconfig: plotters then
//! estimates text extents from the font size alone and writes `<text>`
//! elements (family `sans-serif`) that the viewer renders with its own
//! fonts. Numbers are printed with Rust's own formatting; rows keep file
//! order; no hash map is iterated.
//!
//! # Adding a chart
//! A chart is a value in [`charts::all`]; adding one is adding a function
//! there that returns a [`spec::Chart`]:
//! - bars ([`spec::Bars`]): `category` maps a row to its category label
//!   (`None` for rows the chart does not read); each [`spec::Panel`] is a
//!   measure on its own axis, with a [`spec::Series`] a bar (a field of the
//!   row, `|r| r.num("sync_seconds")`, or of some rows,
//!   `|r| r.when("mode", "list")?.num(..)`); optional reference lines,
//!   target marks and a per-category annotation (a ratio, say);
//! - a time series ([`spec::Timeline`]): which rows, the field holding
//!   `[[seconds, value], ...]` and the one holding `[[seconds, "kind"], ...]`.
//!
//! Peers' figures (client-go, kube-rs) and targets live in [`peers`] with
//! their sources, as rows with the harness's field names, and a bar chart
//! lists the peers it draws. Then run the scenario with `--json` into
//! `benches/results/<scenario>.jsonl`, run `plot`, embed
//! `docs/plots/<name>.svg` in BENCHMARKS.md, commit all three.

mod bars;
mod canvas;
mod charts;
mod data;
mod format;
mod lines;
mod peers;
mod spec;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;

use data::Row;
use spec::{Chart, Kind};

/// Why `plot` failed.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// A file or directory could not be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not a result row.
    #[error("{file}:{line}: {reason}")]
    Parse {
        /// The file's name.
        file: String,
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// No result files.
    #[error("no *.jsonl files in {}", dir.display())]
    NoResults {
        /// The directory searched.
        dir: PathBuf,
    },
    /// plotters failed to draw.
    #[error("drawing {chart}: {reason}")]
    Render {
        /// The chart.
        chart: &'static str,
        /// plotters' error.
        reason: String,
    },
    /// A chart could not be written.
    #[error("writing {}: {source}", path.display())]
    Write {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `--check` found charts that are not what the results give.
    #[error(
        "{} not what `kcontrol-bench plot` makes of the results: {}; run it and commit the plots",
        if stale.len() == 1 { "this chart is" } else { "these charts are" },
        stale.join(", ")
    )]
    Stale {
        /// The charts' paths.
        stale: Vec<String>,
    },
}

/// The directory of the committed results.
const RESULTS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/results");
/// The directory of the committed charts.
const PLOTS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/plots");

/// `kcontrol-bench plot`: SVG charts of benchmark results.
#[derive(Debug, Parser)]
#[command(name = "kcontrol-bench plot", about, long_about = None)]
struct Args {
    /// Result files (JSON lines, as a scenario prints with --json)
    /// [default: every *.jsonl in --results].
    files: Vec<PathBuf>,
    /// The directory of result files.
    #[arg(long, value_name = "DIR", default_value = RESULTS_DIR)]
    results: PathBuf,
    /// Where the SVG charts go.
    #[arg(long, value_name = "DIR", default_value = PLOTS_DIR)]
    out: PathBuf,
    /// Write nothing; fail if a chart differs from its file.
    #[arg(long)]
    check: bool,
}

/// Runs `kcontrol-bench plot ARGS`.
pub fn main(args: &[String]) -> ExitCode {
    let argv = std::iter::once("kcontrol-bench plot".to_owned()).chain(args.iter().cloned());
    let args = match Args::try_parse_from(argv) {
        Ok(args) => args,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() { 2 } else { 0 });
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("kcontrol-bench plot: {err}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), PlotError> {
    let files = if args.files.is_empty() {
        let files = data::result_files(&args.results)?;
        if files.is_empty() {
            return Err(PlotError::NoResults {
                dir: args.results.clone(),
            });
        }
        files
    } else {
        args.files.clone()
    };
    let rows = data::read_files(&files)?;
    let mut stale = Vec::new();
    for chart in charts::all() {
        let path = args.out.join(format!("{}.svg", chart.name));
        let Some(svg) = render(&chart, &rows)? else {
            eprintln!(
                "plot: {}: no rows for it in the results; skipped",
                chart.name
            );
            continue;
        };
        if args.check {
            if std::fs::read(&path).ok().as_deref() != Some(svg.as_bytes()) {
                stale.push(path.display().to_string());
            }
            continue;
        }
        write(&path, &svg)?;
        eprintln!("plot: wrote {}", path.display());
    }
    if stale.is_empty() {
        Ok(())
    } else {
        Err(PlotError::Stale { stale })
    }
}

/// The SVG of `chart` from `rows`; `None` when no row belongs to it.
pub fn render(chart: &Chart, rows: &[Row]) -> Result<Option<String>, PlotError> {
    match &chart.kind {
        Kind::Bars(spec) => bars::render(chart, spec, rows),
        Kind::Timeline(spec) => lines::render(chart, spec, rows),
    }
}

fn write(path: &Path, svg: &str) -> Result<(), PlotError> {
    let failed = |source| PlotError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(failed)?;
    }
    std::fs::write(path, svg).map_err(failed)
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn rows(lines: &[Value]) -> Vec<Row> {
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        data::parse("test.jsonl", &text.join("\n")).unwrap()
    }

    fn chart(name: &str) -> Chart {
        charts::all().into_iter().find(|c| c.name == name).unwrap()
    }

    fn queue_rows(single: f64) -> Vec<Row> {
        rows(&[
            json!({"scenario": "single", "items_per_sec": single, "reference_items_per_sec": 1.6e7,
                   "ratio": single / 1.6e7, "load_1m": 4.5, "cpus": 2}),
            json!({"scenario": "dedup-waiting", "items_per_sec": 9.1e7, "reference_items_per_sec": 1.6e7,
                   "ratio": 5.7, "mutex_adds_per_sec": 1.6e7, "mutex_ratio": 5.7, "load_1m": 5.0, "cpus": 2}),
            json!({"scenario": "controller", "foos": 1000, "ctl_cpu_ms_per_foo": 0.25}),
        ])
    }

    #[test]
    fn the_same_rows_give_the_same_svg_and_other_rows_another() {
        let queue = chart("queue");
        let a = render(&queue, &queue_rows(3.6e6)).unwrap().unwrap();
        let b = render(&queue, &queue_rows(3.6e6)).unwrap().unwrap();
        assert_eq!(a, b);
        let c = render(&queue, &queue_rows(3.7e6)).unwrap().unwrap();
        assert_ne!(a, c);
        // what the chart says: its title, categories, the ratio, the load,
        // the peers' and targets' sources
        for text in [
            queue.title,
            ">single<",
            ">dedup-waiting<",
            "0.23x",
            "5.7x · 5.7x Mutex",
            "load average (1 min) 4.5-5 on 2 CPUs",
            "Targets: targets of issue 27",
        ] {
            assert!(a.contains(text), "{text} not in {a}");
        }
    }

    #[test]
    fn text_is_svg_text_in_the_viewers_font_and_no_font_file_is_used() {
        let svg = render(&chart("queue"), &queue_rows(3.6e6))
            .unwrap()
            .unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("<text") && svg.contains("font-family=\"sans-serif\""));
        for absent in ["@font-face", "base64", "<image"] {
            assert!(!svg.contains(absent), "{absent} in {svg}");
        }
    }

    #[test]
    fn a_chart_without_its_rows_is_skipped() {
        let only_queue = queue_rows(3.6e6);
        for chart in charts::all() {
            let svg = render(&chart, &only_queue).unwrap();
            assert_eq!(
                svg.is_some(),
                chart.name == "queue" || chart.name == "controller",
                "{}",
                chart.name
            );
        }
        assert!(charts::all()
            .iter()
            .all(|c| render(c, &[]).unwrap().is_none()));
    }

    /// The wire-sync rows issue 23 specifies give their chart, beside
    /// client-go's figures.
    #[test]
    fn wire_sync_rows_by_cached_type_and_encoding() {
        let mut lines = Vec::new();
        for (encoding, floor) in [("json", 1.76), ("protobuf", 1.12)] {
            for mode in ["list", "watchlist"] {
                for pace in ["real", "unpaced"] {
                    lines.push(
                        json!({"scenario": "wire-sync", "pace": pace, "encoding": encoding,
                        "mode": mode, "cached_type": "CompactConfigMap", "objects": 100000,
                        "sync_seconds": floor * 1.05, "floor_seconds": floor, "ratio": 1.05,
                        "cpu_seconds": 1.0, "steady_rss_bytes_per_object": 1380,
                        "peak_rss_bytes": 1.4e8}),
                    );
                }
            }
        }
        let svg = render(&chart("wire-sync"), &rows(&lines)).unwrap().unwrap();
        for text in [
            ">CompactConfigMap · json<",
            ">CompactConfigMap · protobuf<",
            "client-go informer (protobuf)",
            ">1.05x<",
        ] {
            assert!(svg.contains(text), "{text} not in {svg}");
        }
        // the informer chart does not take them
        assert!(render(&chart("informer-sync"), &rows(&lines))
            .unwrap()
            .is_none());
    }

    #[test]
    fn a_soak_row_gives_its_time_series_and_bad_samples_name_the_line() {
        let soak = json!({"scenario": "soak", "seed": 16, "duration_s": 60.0, "rss_growth": 0.99,
            "rss_samples": [[0.5, 15_000_000], [1.0, 16_000_000], [61.0, 16_100_000]],
            "fault_times": [[0.7, "sigkill"], [0.9, "watch_drop"]],
            "rss_warm_at_s": 36.0, "rss_warm_mib": 15.2, "churn_end_s": 60.0, "rss_end_mib": 15.3,
            "settled_at_s": 61.0});
        let svg = render(&chart("soak-rss"), &rows(std::slice::from_ref(&soak)))
            .unwrap()
            .unwrap();
        for text in [
            "seed 16, 60 s: growth 0.99x",
            ">sigkill<",
            "other faults (ticks)",
            "warm-up 15.2",
        ] {
            assert!(svg.contains(text), "{text} not in {svg}");
        }
        let mut bad = soak;
        bad["rss_samples"] = json!([[0.5, 15_000_000], [1.0]]);
        let lines = rows(&[json!({"scenario": "x"}), bad]);
        let err = render(&chart("soak-rss"), &lines).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("test.jsonl:2: \"rss_samples\" holds [1.0]"),
            "{err}"
        );
    }
}
