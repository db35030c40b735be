//! What a chart is, declared: which rows it reads, how it groups them and
//! which of their fields it draws ([`super::charts`] lists the charts).

use super::data::Row;
use super::peers::{Peer, Targets};

/// One chart: `docs/plots/<name>.svg`.
#[derive(Debug)]
pub struct Chart {
    /// The file stem of the SVG.
    pub name: &'static str,
    /// The title drawn at its top.
    pub title: &'static str,
    /// What was measured and how (wrapped under the chart).
    pub note: &'static str,
    /// How it draws its rows.
    pub kind: Kind,
}

/// The kinds of chart.
#[derive(Debug)]
pub enum Kind {
    /// Horizontal bars by category, one panel per measure.
    Bars(Bars),
    /// Values over time, one line a run, with events marked.
    Timeline(Timeline),
}

/// Horizontal bars: a category (a row of the chart) per distinct value of
/// [`Bars::category`], one bar per [`Series`] in each [`Panel`]. Several
/// rows of a category (several runs) give a bar at their median and
/// whiskers over their range.
#[derive(Debug)]
pub struct Bars {
    /// A row's category (its label), or `None` for a row this chart does
    /// not read. Categories are drawn in the order they first appear.
    pub category: fn(&Row) -> Option<String>,
    /// Side-by-side panels sharing the categories.
    pub panels: Vec<Panel>,
    /// Peers drawn as categories of their own below the harness's, their
    /// bars paler, their sources under the chart.
    pub peers: Vec<&'static Peer>,
}

/// One measure of a bar chart, on its own value axis.
#[derive(Debug)]
pub struct Panel {
    /// The measure and its unit, above the panel and on its axis.
    pub title: &'static str,
    /// A logarithmic value axis (for figures spanning decades).
    pub log: bool,
    /// How values are printed (bar ends and axis labels).
    pub format: fn(f64) -> String,
    /// The bars of each category.
    pub series: Vec<Series>,
    /// Vertical reference lines: the median of a value over the chart's
    /// harness rows.
    pub lines: Vec<Series>,
    /// A column of text beside each category at the panel's right.
    pub annotate: Option<Annotation>,
    /// Target marks on categories' bars.
    pub targets: Option<&'static Targets>,
}

/// Text beside each category (a ratio, say), from the category's harness
/// rows; peers get none.
#[derive(Debug)]
pub struct Annotation {
    /// The column's heading.
    pub title: &'static str,
    /// A category's text (lines split at `\n`), or `None`.
    pub text: fn(&[&Row]) -> Option<String>,
}

/// A named value read from rows.
#[derive(Debug)]
pub struct Series {
    /// The legend's label.
    pub name: &'static str,
    /// The value of a row, `None` where the row has none for this series.
    pub value: fn(&Row) -> Option<f64>,
}

/// A time series of each run: `samples` is a field holding
/// `[[seconds, value], ...]`, `events` one holding `[[seconds, "kind"], ...]`.
#[derive(Debug)]
pub struct Timeline {
    /// Whether the chart reads a row.
    pub select: fn(&Row) -> bool,
    /// A run's label in the legend.
    pub run_label: fn(&Row) -> String,
    /// The field of samples.
    pub samples: &'static str,
    /// Scales a sample's value to the axis unit.
    pub scale: f64,
    /// The value axis' title.
    pub axis: &'static str,
    /// The field of events.
    pub events: &'static str,
    /// Event kinds drawn as full-height lines (the others as ticks).
    pub major_events: &'static [&'static str],
    /// A shaded span: the fields of its start and end seconds, its label.
    pub span: Option<(&'static str, &'static str, &'static str)>,
    /// Points marked on the run: (seconds field, value field in axis unit,
    /// label).
    pub points: &'static [(&'static str, &'static str, &'static str)],
}
