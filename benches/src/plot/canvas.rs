//! What every chart shares: the SVG canvas, sizes, colours, the title at
//! the top and the notes at the bottom (what was measured, where the data
//! and the peers' figures come from, the machine's load).
//!
//! Text is measured by plotters' built-in estimate (no font files: the
//! crate is built without its `ttf` feature) and written as SVG `<text>`
//! elements that the viewer renders in its own sans-serif font; layout here
//! uses its own estimate ([`text_width`]), generous enough for common
//! sans-serif fonts.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::data::Row;
use super::format::{significant, wrap};
use super::PlotError;

/// Width of every chart, in pixels.
pub const WIDTH: u32 = 1000;
/// Font family of every text (the viewer's sans-serif).
pub const FONT: &str = "sans-serif";
/// Sizes of text (plotters' sizes: the SVG gets them divided by 1.24).
pub const TITLE_SIZE: f64 = 24.0;
/// The size of panel titles.
pub const HEADING_SIZE: f64 = 17.0;
/// The size of labels and values.
pub const LABEL_SIZE: f64 = 15.0;
/// The size of the notes under a chart.
pub const NOTE_SIZE: f64 = 14.0;
/// Height of the title band.
pub const TITLE_HEIGHT: u32 = 40;
/// Height of one line of notes.
pub const NOTE_LINE: u32 = 17;

/// Series colours, in order.
pub const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(214, 39, 40),
];
/// Text and axes.
pub const INK: RGBColor = RGBColor(33, 33, 33);
/// Secondary text (peers, notes).
pub const MUTED: RGBColor = RGBColor(96, 96, 96);

/// The SVG area of a chart.
pub type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// The colour of series `i`.
pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// The colour halfway to white (peers' bars).
pub fn pale(c: RGBColor) -> RGBColor {
    let mix = |v: u8| ((u16::from(v) + 255) / 2) as u8;
    RGBColor(mix(c.0), mix(c.1), mix(c.2))
}

/// A text style of `size` and `color`, anchored at `h`/`v`.
pub fn text_style(size: f64, color: RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
    (FONT, size).into_font().color(&color).pos(Pos::new(h, v))
}

/// The style in italics.
pub fn italic(style: TextStyle<'static>) -> TextStyle<'static> {
    TextStyle {
        font: style.font.clone().style(FontStyle::Italic),
        ..style
    }
}

/// An estimate of a text's width in pixels: generous for sans-serif.
pub fn text_width(text: &str, size: f64) -> i32 {
    // the SVG font size is size / 1.24; an average glyph is under 0.6 em
    (text.chars().count() as f64 * size / 1.24 * 0.6).ceil() as i32
}

/// Characters of notes that fit in a line of the chart.
pub fn note_chars() -> usize {
    let per_char = NOTE_SIZE / 1.24 * 0.6;
    ((f64::from(WIDTH) - 24.0) / per_char) as usize
}

/// Maps a plotters error to the chart's.
pub fn drawing<E: std::error::Error + Send + Sync>(
    chart: &'static str,
) -> impl Fn(DrawingAreaErrorKind<E>) -> PlotError {
    move |e| PlotError::Render {
        chart,
        reason: e.to_string(),
    }
}

/// Draws `text` at `(x, y)` of `area`.
pub fn label(
    area: &Area<'_>,
    chart: &'static str,
    text: &str,
    at: (i32, i32),
    style: &TextStyle<'_>,
) -> Result<(), PlotError> {
    area.draw(&Text::new(text.to_owned(), at, style.clone()))
        .map_err(drawing(chart))
}

/// Draws the title band; returns the area below it.
pub fn title<'a>(area: &Area<'a>, chart: &'static str, title: &str) -> Result<Area<'a>, PlotError> {
    let (top, rest) = area.split_vertically(TITLE_HEIGHT);
    let style = text_style(TITLE_SIZE, INK, HPos::Left, VPos::Center);
    label(
        &top,
        chart,
        title,
        (12, TITLE_HEIGHT as i32 / 2 + 2),
        &style,
    )?;
    Ok(rest)
}

/// The lines of notes under a chart: its note, where its rows come from
/// and the load they were measured under, then `sources`.
pub fn note_lines(note: &str, rows: &[&Row], sources: &[String]) -> Vec<String> {
    let width = note_chars();
    let mut lines = wrap(note, width);
    lines.extend(wrap(&provenance(rows), width));
    for source in sources {
        lines.extend(wrap(source, width));
    }
    lines
}

/// Where the harness rows come from and how loaded the machine was.
pub fn provenance(rows: &[&Row]) -> String {
    let mut files: Vec<&str> = rows
        .iter()
        .filter(|r| !r.peer)
        .map(|r| r.source.as_str())
        .collect();
    files.sort_unstable();
    files.dedup();
    let loads: Vec<f64> = rows.iter().filter_map(|r| r.num("load_1m")).collect();
    let mut cpus: Vec<u64> = rows
        .iter()
        .filter_map(|r| r.get("cpus").and_then(serde_json::Value::as_u64))
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    let load = match (
        loads.iter().copied().reduce(f64::min),
        loads.iter().copied().reduce(f64::max),
    ) {
        (Some(lo), Some(hi)) => {
            let cpus = match cpus.as_slice() {
                [n] => format!(" on {n} CPUs"),
                _ => String::new(),
            };
            let range = if lo == hi {
                significant(lo)
            } else {
                format!("{}-{}", significant(lo), significant(hi))
            };
            format!(
                "load average (1 min) {range}{cpus} while measured: a shared machine, so \
                 compare ratios measured in the same run rather than absolute figures"
            )
        }
        _ => "the machine's load was not recorded with these rows".to_owned(),
    };
    format!(
        "Data: {} ({} rows); {load}.",
        files.join(", "),
        rows.iter().filter(|r| !r.peer).count()
    )
}

/// Draws `lines` of notes in `area`, from its top.
pub fn notes(area: &Area<'_>, chart: &'static str, lines: &[String]) -> Result<(), PlotError> {
    let style = text_style(NOTE_SIZE, MUTED, HPos::Left, VPos::Top);
    for (i, line) in lines.iter().enumerate() {
        let y = 6 + i as i32 * NOTE_LINE as i32;
        label(area, chart, line, (12, y), &style)?;
    }
    Ok(())
}

/// Height of `n` lines of notes with their margins.
pub fn notes_height(n: usize) -> u32 {
    12 + n as u32 * NOTE_LINE
}

/// A legend entry: a colour swatch and its name at `(x, y)`.
pub fn legend_entry(
    area: &Area<'_>,
    chart: &'static str,
    (x, y): (i32, i32),
    swatch: ShapeStyle,
    name: &str,
) -> Result<(), PlotError> {
    area.draw(&Rectangle::new([(x, y - 5), (x + 12, y + 5)], swatch))
        .map_err(drawing(chart))?;
    let style = text_style(LABEL_SIZE, INK, HPos::Left, VPos::Center);
    label(area, chart, name, (x + 17, y), &style)
}

/// The width of a legend entry (swatch and name).
pub fn legend_width(name: &str) -> i32 {
    17 + text_width(name, LABEL_SIZE)
}
