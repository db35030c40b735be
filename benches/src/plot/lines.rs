//! Line charts of time series ([`Timeline`]): one line a run, its major
//! events as dashed vertical lines, the others as ticks on the time axis,
//! a shaded span and marked points (the soak's RSS over time, its
//! restarts and faults, the settle, the warm-up and end readings).

use plotters::coord::CoordTranslate;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};
use serde_json::Value;

use super::canvas::{self, color, drawing, text_style, Area, INK, LABEL_SIZE, MUTED, WIDTH};
use super::data::Row;
use super::format::significant;
use super::spec::{Chart, Timeline};
use super::PlotError;

/// Height of the plot.
const PLOT_HEIGHT: u32 = 380;
/// Height of a legend row.
const LEGEND_LINE: i32 = 20;
/// Colours of the major event kinds, in the spec's order.
const EVENT_COLORS: [RGBColor; 3] = [
    RGBColor(214, 39, 40),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
];
/// Palette indices of the runs' lines (not the events' colours).
const RUN_COLORS: [usize; 3] = [0, 2, 4];
/// The colour of minor event ticks.
const TICK: RGBColor = RGBColor(120, 120, 120);

/// One run's series.
struct Run<'r> {
    row: &'r Row,
    samples: Vec<(f64, f64)>,
    events: Vec<(f64, String)>,
}

/// Renders `spec` from `rows`; `None` when no row belongs to it.
pub fn render(chart: &Chart, spec: &Timeline, rows: &[Row]) -> Result<Option<String>, PlotError> {
    let runs: Vec<Run<'_>> = rows
        .iter()
        .filter(|r| (spec.select)(r))
        .map(|row| run(spec, row))
        .collect::<Result<_, _>>()?;
    if runs.is_empty() {
        return Ok(None);
    }
    let legend = legend(spec, &runs);
    let legend_rows = legend_rows(&legend);
    let measured: Vec<&Row> = runs.iter().map(|r| r.row).collect();
    let notes = canvas::note_lines(chart.note, &measured, &[]);
    let legend_height = (legend_rows * LEGEND_LINE + 8) as u32;
    let height =
        canvas::TITLE_HEIGHT + legend_height + PLOT_HEIGHT + canvas::notes_height(notes.len());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing(chart.name))?;
        let body = canvas::title(&root, chart.name, chart.title)?;
        let (top, rest) = body.split_vertically(legend_height);
        draw_legend(&top, chart.name, &legend)?;
        let (plot, foot) = rest.split_vertically(PLOT_HEIGHT);
        draw_plot(&plot, chart.name, spec, &runs)?;
        canvas::notes(&foot, chart.name, &notes)?;
        root.present().map_err(drawing(chart.name))?;
    }
    Ok(Some(svg))
}

/// A run's samples and events, read from its row.
fn run<'r>(spec: &Timeline, row: &'r Row) -> Result<Run<'r>, PlotError> {
    let bad = |reason: String| PlotError::Parse {
        file: row.source.clone(),
        line: row.line,
        reason,
    };
    let pairs = |field: &str| -> Result<Vec<(f64, Value)>, PlotError> {
        let Some(items) = row.get(field).and_then(Value::as_array) else {
            return Err(bad(format!(
                "no \"{field}\" array of [seconds, value] pairs"
            )));
        };
        items
            .iter()
            .map(|item| match item.as_array().map(Vec::as_slice) {
                Some([t, v]) if t.as_f64().is_some_and(f64::is_finite) => {
                    Ok((t.as_f64().unwrap_or_default(), v.clone()))
                }
                _ => Err(bad(format!(
                    "\"{field}\" holds {item}, not a [seconds, value] pair"
                ))),
            })
            .collect()
    };
    let samples = pairs(spec.samples)?
        .into_iter()
        .map(|(t, v)| match v.as_f64() {
            Some(v) if v.is_finite() => Ok((t, v * spec.scale)),
            _ => Err(bad(format!("\"{}\" holds {v} as a value", spec.samples))),
        })
        .collect::<Result<_, _>>()?;
    let events = pairs(spec.events)?
        .into_iter()
        .map(|(t, v)| match v.as_str() {
            Some(kind) => Ok((t, kind.to_owned())),
            None => Err(bad(format!("\"{}\" holds {v} as a kind", spec.events))),
        })
        .collect::<Result<_, _>>()?;
    Ok(Run {
        row,
        samples,
        events,
    })
}

/// Legend entries: each run, each major event kind seen, the minor
/// events, the span.
fn legend(spec: &Timeline, runs: &[Run<'_>]) -> Vec<(String, ShapeStyle)> {
    let mut entries: Vec<(String, ShapeStyle)> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| ((spec.run_label)(r.row), run_color(i).filled()))
        .collect();
    let seen = |kind: &str| runs.iter().any(|r| r.events.iter().any(|(_, k)| k == kind));
    for (i, kind) in spec.major_events.iter().enumerate() {
        if seen(kind) {
            entries.push((
                kind.to_string(),
                EVENT_COLORS[i % EVENT_COLORS.len()].filled(),
            ));
        }
    }
    let minor = runs.iter().any(|r| {
        r.events
            .iter()
            .any(|(_, k)| !spec.major_events.contains(&k.as_str()))
    });
    if minor {
        entries.push(("other faults (ticks)".to_owned(), TICK.filled()));
    }
    if let Some((_, _, name)) = spec.span {
        entries.push((name.to_owned(), INK.mix(0.12).filled()));
    }
    entries
}

fn run_color(i: usize) -> RGBColor {
    color(RUN_COLORS[i % RUN_COLORS.len()])
}

/// (x, row) of each legend entry across the chart's width.
fn place_legend(entries: &[(String, ShapeStyle)]) -> Vec<(i32, i32)> {
    let mut places = Vec::new();
    let (mut x, mut row) = (12, 0);
    for (name, _) in entries {
        let w = canvas::legend_width(name);
        if x > 12 && x + w > WIDTH as i32 - 12 {
            (x, row) = (12, row + 1);
        }
        places.push((x, row));
        x += w + 18;
    }
    places
}

fn legend_rows(entries: &[(String, ShapeStyle)]) -> i32 {
    place_legend(entries).last().map_or(1, |(_, row)| row + 1)
}

fn draw_legend(
    area: &Area<'_>,
    chart: &'static str,
    entries: &[(String, ShapeStyle)],
) -> Result<(), PlotError> {
    for ((name, swatch), (x, row)) in entries.iter().zip(place_legend(entries)) {
        let y = LEGEND_LINE / 2 + 2 + row * LEGEND_LINE;
        canvas::legend_entry(area, chart, (x, y), *swatch, name)?;
    }
    Ok(())
}

fn draw_plot(
    area: &Area<'_>,
    chart: &'static str,
    spec: &Timeline,
    runs: &[Run<'_>],
) -> Result<(), PlotError> {
    let last = |r: &Run<'_>| r.samples.last().map_or(0.0, |s| s.0);
    let t_max = runs.iter().map(last).fold(1.0, f64::max);
    let v_max = runs
        .iter()
        .flat_map(|r| r.samples.iter().map(|s| s.1))
        .fold(0.0, f64::max);
    let v_max = if v_max > 0.0 { v_max * 1.25 } else { 1.0 };
    let mut plot = ChartBuilder::on(area)
        .margin(12)
        .margin_right(24)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..t_max, 0.0..v_max)
        .map_err(drawing(chart))?;
    let formatter = |v: &f64| significant(*v);
    plot.configure_mesh()
        .x_desc("seconds since the start")
        .y_desc(spec.axis)
        .x_label_formatter(&formatter)
        .y_label_formatter(&formatter)
        .axis_desc_style((canvas::FONT, LABEL_SIZE).into_font().color(&INK))
        .label_style((canvas::FONT, 13.0).into_font().color(&MUTED))
        .axis_style(MUTED)
        .bold_line_style(RGBColor(214, 214, 214))
        .light_line_style(RGBColor(240, 240, 240))
        .draw()
        .map_err(drawing(chart))?;
    let area = plot.plotting_area();
    for run in runs {
        if let Some((from, to, _)) = spec.span {
            if let (Some(a), Some(b)) = (run.row.num(from), run.row.num(to)) {
                let shade = Rectangle::new([(a, 0.0), (b, v_max)], INK.mix(0.06).filled());
                area.draw(&shade).map_err(drawing(chart))?;
            }
        }
    }
    for run in runs {
        for (t, kind) in &run.events {
            match spec.major_events.iter().position(|k| k == kind) {
                Some(i) => {
                    let style = EVENT_COLORS[i % EVENT_COLORS.len()].stroke_width(1);
                    area.draw(&DashedPathElement::new(
                        vec![(*t, 0.0), (*t, v_max)],
                        4,
                        4,
                        style,
                    ))
                }
                None => {
                    let tick = vec![(*t, 0.0), (*t, v_max * 0.04)];
                    area.draw(&PathElement::new(tick, TICK.stroke_width(1)))
                }
            }
            .map_err(drawing(chart))?;
        }
    }
    for (i, run) in runs.iter().enumerate() {
        let line = PathElement::new(run.samples.clone(), run_color(i).stroke_width(2));
        area.draw(&line).map_err(drawing(chart))?;
        draw_points(area, chart, spec, run, run_color(i))?;
    }
    Ok(())
}

/// The run's marked points, each a dot with its label and value.
fn draw_points<CT: CoordTranslate<From = (f64, f64)>>(
    area: &DrawingArea<SVGBackend<'_>, CT>,
    chart: &'static str,
    spec: &Timeline,
    run: &Run<'_>,
    c: RGBColor,
) -> Result<(), PlotError> {
    let style = text_style(13.0, INK, HPos::Center, VPos::Bottom);
    for (t_field, v_field, name) in spec.points {
        let (Some(t), Some(v)) = (run.row.num(t_field), run.row.num(v_field)) else {
            continue;
        };
        let point = EmptyElement::at((t, v))
            + Circle::new((0, 0), 4, c.filled())
            + Text::new(format!("{name} {}", significant(v)), (0, -8), style.clone());
        area.draw(&point).map_err(drawing(chart))?;
    }
    Ok(())
}
