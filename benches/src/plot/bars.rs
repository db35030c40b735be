//! Horizontal bar charts ([`Bars`]): categories down the left, one panel
//! per measure side by side, in each panel a bar per series and category
//! at the median of the category's rows with whiskers over their range,
//! the median printed at its end; peers' categories below the harness's,
//! paler; reference lines, target marks and an annotation column where the
//! panel asks for them.

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::CoordTranslate;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::canvas::{self, color, drawing, label, pale, text_style, text_width, Area};
use super::canvas::{INK, LABEL_SIZE, MUTED, WIDTH};
use super::data::Row;
use super::format::{median, wrap};
use super::spec::{Bars, Chart, Panel};
use super::PlotError;

/// The rows of one category.
struct Group<'r> {
    label: String,
    peer: bool,
    rows: Vec<&'r Row>,
}

/// Median and range of a series' values in a category.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Stat {
    median: f64,
    low: f64,
    high: f64,
}

impl Stat {
    fn of(values: &[f64]) -> Option<Self> {
        Some(Self {
            median: median(values)?,
            low: values.iter().copied().reduce(f64::min)?,
            high: values.iter().copied().reduce(f64::max)?,
        })
    }
}

/// Pixel sizes of a bar chart.
const LABEL_LINE: i32 = 16;
const PANEL_TITLE: i32 = 24;
const LEGEND_LINE: i32 = 20;
const X_AXIS: u32 = 34;
const LABEL_COLUMN_MAX: i32 = 300;

/// Renders `spec` from `rows`; `None` when no row belongs to it.
pub fn render(chart: &Chart, spec: &Bars, rows: &[Row]) -> Result<Option<String>, PlotError> {
    let peer_rows: Vec<(String, Vec<Row>)> = spec
        .peers
        .iter()
        .map(|p| (p.label.to_owned(), p.rows()))
        .collect();
    let groups = groups(spec, rows, &peer_rows);
    if groups.iter().all(|g| g.peer) {
        return Ok(None);
    }
    let layout = Layout::new(spec, &groups);
    let measured: Vec<&Row> = groups
        .iter()
        .filter(|g| !g.peer)
        .flat_map(|g| g.rows.iter().copied())
        .collect();
    let notes = canvas::note_lines(chart.note, &measured, &sources(spec));
    let height = canvas::TITLE_HEIGHT + layout.plots_height() + canvas::notes_height(notes.len());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing(chart.name))?;
        let body = canvas::title(&root, chart.name, chart.title)?;
        let (plots, foot) = body.split_vertically(layout.plots_height());
        let (labels, mut rest) = plots.split_horizontally(layout.label_width);
        draw_labels(&labels, chart.name, &layout, &groups)?;
        for (i, panel) in spec.panels.iter().enumerate() {
            let (area, next) = rest.split_horizontally(layout.panel_width);
            draw_panel(&area, chart.name, &layout, panel, &groups)?;
            if i + 1 < spec.panels.len() {
                rest = next;
            }
        }
        canvas::notes(&foot, chart.name, &notes)?;
        root.present().map_err(drawing(chart.name))?;
    }
    Ok(Some(svg))
}

/// The harness rows by category (in order of first appearance), then the
/// peers, one category each.
fn groups<'r>(spec: &Bars, rows: &'r [Row], peers: &'r [(String, Vec<Row>)]) -> Vec<Group<'r>> {
    let mut groups: Vec<Group<'r>> = Vec::new();
    for row in rows {
        let Some(category) = (spec.category)(row) else {
            continue;
        };
        match groups.iter_mut().find(|g| g.label == category) {
            Some(group) => group.rows.push(row),
            None => groups.push(Group {
                label: category,
                peer: false,
                rows: vec![row],
            }),
        }
    }
    groups.extend(peers.iter().map(|(label, rows)| Group {
        label: label.clone(),
        peer: true,
        rows: rows.iter().collect(),
    }));
    groups
}

/// The peers' and targets' sources, for the notes.
fn sources(spec: &Bars) -> Vec<String> {
    let mut sources: Vec<String> = spec
        .peers
        .iter()
        .map(|p| format!("{}: {}.", p.label, p.source))
        .collect();
    for target in spec.panels.iter().filter_map(|p| p.targets) {
        sources.push(format!("Targets: {}.", target.source));
    }
    sources
}

/// Where things go.
struct Layout {
    label_width: u32,
    panel_width: u32,
    header: i32,
    category_height: i32,
    categories: usize,
    /// Each category's label, wrapped.
    label_lines: Vec<Vec<String>>,
}

impl Layout {
    fn new(spec: &Bars, groups: &[Group<'_>]) -> Self {
        let widest = groups
            .iter()
            .map(|g| text_width(&g.label, LABEL_SIZE))
            .max()
            .unwrap_or(0);
        let label_width = (widest + 20).min(LABEL_COLUMN_MAX);
        let chars = ((label_width - 20) as f64 / (LABEL_SIZE / 1.24 * 0.6)) as usize;
        let label_lines: Vec<Vec<String>> = groups.iter().map(|g| wrap(&g.label, chars)).collect();
        let panels = spec.panels.len().max(1) as u32;
        let panel_width = (WIDTH - label_width as u32) / panels;
        let legend_lines = spec
            .panels
            .iter()
            .map(|p| {
                let places = place_legend(&legend(p, groups), panel_width as i32);
                places.last().map_or(1, |(_, row)| row + 1)
            })
            .max()
            .unwrap_or(1);
        let bars = spec
            .panels
            .iter()
            .map(|p| p.series.len())
            .max()
            .unwrap_or(1) as i32;
        let annotated = spec.panels.iter().any(|p| p.annotate.is_some());
        let most_lines = label_lines.iter().map(Vec::len).max().unwrap_or(1) as i32;
        let category_height = (bars * 15 + 12).max(most_lines * LABEL_LINE + 10).max(30);
        Self {
            label_width: label_width as u32,
            panel_width,
            // a line more for the headings of annotation columns
            header: PANEL_TITLE + legend_lines * LEGEND_LINE + 6 + if annotated { 18 } else { 0 },
            category_height,
            categories: groups.len(),
            label_lines,
        }
    }

    fn plots_height(&self) -> u32 {
        (self.header + self.category_height * self.categories as i32) as u32 + X_AXIS
    }

    /// The pixel y of category `i`'s middle.
    fn center(&self, i: usize) -> i32 {
        self.header + self.category_height * i as i32 + self.category_height / 2
    }
}

/// Where each legend entry goes in a panel `width` wide: its x and its
/// row, entries filling a row before the next.
fn place_legend(entries: &[(String, ShapeStyle)], width: i32) -> Vec<(i32, i32)> {
    let mut places = Vec::new();
    let (mut x, mut row) = (8, 0);
    for (name, _) in entries {
        let w = canvas::legend_width(name);
        if x > 8 && x + w > width {
            (x, row) = (8, row + 1);
        }
        places.push((x, row));
        x += w + 16;
    }
    places
}

/// The legend's entries of a panel: (name, swatch style).
fn legend(panel: &Panel, groups: &[Group<'_>]) -> Vec<(String, ShapeStyle)> {
    let mut entries: Vec<(String, ShapeStyle)> = panel
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.to_owned(), color(i).filled()))
        .collect();
    for line in &panel.lines {
        let value = line_value(line, groups).map(|v| format!(" {}", (panel.format)(v)));
        entries.push((
            format!("{} (dashed){}", line.name, value.unwrap_or_default()),
            INK.stroke_width(1),
        ));
    }
    if let Some(targets) = panel.targets {
        entries.push((targets.label.to_owned(), TARGET.filled()));
    }
    entries
}

const TARGET: RGBColor = RGBColor(200, 0, 0);

/// The median of a reference line's value over the harness rows.
fn line_value(line: &super::spec::Series, groups: &[Group<'_>]) -> Option<f64> {
    let values: Vec<f64> = groups
        .iter()
        .filter(|g| !g.peer)
        .flat_map(|g| g.rows.iter().filter_map(|r| (line.value)(r)))
        .collect();
    median(&values)
}

fn draw_labels(
    area: &Area<'_>,
    chart: &'static str,
    layout: &Layout,
    groups: &[Group<'_>],
) -> Result<(), PlotError> {
    for (i, (group, lines)) in groups.iter().zip(&layout.label_lines).enumerate() {
        let style = if group.peer {
            canvas::italic(text_style(LABEL_SIZE, MUTED, HPos::Right, VPos::Center))
        } else {
            text_style(LABEL_SIZE, INK, HPos::Right, VPos::Center)
        };
        let top = layout.center(i) - (lines.len() as i32 - 1) * LABEL_LINE / 2;
        for (j, line) in lines.iter().enumerate() {
            let at = (layout.label_width as i32 - 10, top + j as i32 * LABEL_LINE);
            label(area, chart, line, at, &style)?;
        }
    }
    Ok(())
}

/// Each category's annotation (none for peers).
fn annotations(panel: &Panel, groups: &[Group<'_>]) -> Vec<Option<String>> {
    groups
        .iter()
        .map(|g| match &panel.annotate {
            Some(a) if !g.peer => (a.text)(&g.rows),
            _ => None,
        })
        .collect()
}

/// The value axis of a panel: from zero (or the decade below the least
/// value on a log axis) to past the largest, with room for the labels.
fn value_range(panel: &Panel, groups: &[Group<'_>]) -> (f64, f64) {
    let mut values: Vec<f64> = Vec::new();
    for group in groups {
        for series in &panel.series {
            values.extend(group.rows.iter().filter_map(|r| (series.value)(r)));
        }
        values.extend(panel.lines.iter().filter_map(|l| line_value(l, groups)));
    }
    if let Some(targets) = panel.targets {
        values.extend(targets.marks.iter().map(|(_, v)| *v));
    }
    let high = values.iter().copied().fold(0.0, f64::max);
    if panel.log {
        let low = values
            .iter()
            .copied()
            .filter(|v| *v > 0.0)
            .fold(f64::INFINITY, f64::min);
        let low = if low.is_finite() {
            10f64.powf(low.log10().floor())
        } else {
            1.0
        };
        let high = 10f64.powf((high.max(low) * 3.0).log10().ceil());
        (low, high)
    } else {
        (0.0, if high > 0.0 { high * 1.3 } else { 1.0 })
    }
}

fn draw_panel(
    area: &Area<'_>,
    chart: &'static str,
    layout: &Layout,
    panel: &Panel,
    groups: &[Group<'_>],
) -> Result<(), PlotError> {
    let title = text_style(canvas::HEADING_SIZE, INK, HPos::Left, VPos::Center);
    label(area, chart, panel.title, (8, PANEL_TITLE / 2 + 2), &title)?;
    let entries = legend(panel, groups);
    let places = place_legend(&entries, layout.panel_width as i32);
    for ((name, swatch), (x, row)) in entries.iter().zip(places) {
        let y = PANEL_TITLE + LEGEND_LINE / 2 + row * LEGEND_LINE;
        canvas::legend_entry(area, chart, (x, y), *swatch, name)?;
    }
    let texts = annotations(panel, groups);
    let column = texts
        .iter()
        .flatten()
        .flat_map(|t| t.lines())
        .chain(panel.annotate.as_ref().map(|a| a.title))
        .map(|line| text_width(line, LABEL_SIZE) + 14)
        .max()
        .unwrap_or(16);
    let (plot, notes) = area.split_horizontally(layout.panel_width as i32 - column);
    let (low, high) = value_range(panel, groups);
    if panel.log {
        draw_bars(
            &plot,
            chart,
            layout,
            panel,
            groups,
            (low..high).log_scale(),
            low,
        )?;
    } else {
        draw_bars(&plot, chart, layout, panel, groups, low..high, low)?;
    }
    if let Some(annotation) = &panel.annotate {
        let heading = text_style(LABEL_SIZE, MUTED, HPos::Left, VPos::Bottom);
        label(
            &notes,
            chart,
            annotation.title,
            (6, layout.header - 4),
            &heading,
        )?;
    }
    let style = text_style(LABEL_SIZE, INK, HPos::Left, VPos::Center);
    for (i, text) in texts.iter().enumerate() {
        let lines: Vec<&str> = text
            .as_deref()
            .map(|t| t.lines().collect())
            .unwrap_or_default();
        let top = layout.center(i) - (lines.len() as i32 - 1) * LABEL_LINE / 2;
        for (j, line) in lines.iter().enumerate() {
            label(
                &notes,
                chart,
                line,
                (6, top + j as i32 * LABEL_LINE),
                &style,
            )?;
        }
    }
    Ok(())
}

/// Draws a panel's axis and bars; `base` is where bars start.
fn draw_bars<X>(
    area: &Area<'_>,
    chart: &'static str,
    layout: &Layout,
    panel: &Panel,
    groups: &[Group<'_>],
    x: X,
    base: f64,
) -> Result<(), PlotError>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let n = groups.len() as f64;
    let mut plot = ChartBuilder::on(area)
        .margin_top(layout.header)
        .margin_left(4)
        .x_label_area_size(X_AXIS)
        .build_cartesian_2d(x, RangedCoordf64::from(n..0.0))
        .map_err(drawing(chart))?;
    let formatter = |v: &f64| (panel.format)(*v);
    plot.configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .x_labels(6)
        .x_label_formatter(&formatter)
        .label_style((canvas::FONT, 13.0).into_font().color(&MUTED))
        .axis_style(MUTED)
        .bold_line_style(RGBColor(214, 214, 214))
        .light_line_style(RGBColor(240, 240, 240))
        .draw()
        .map_err(drawing(chart))?;
    let slot = 0.8 / panel.series.len().max(1) as f64;
    let area = plot.plotting_area();
    for (i, group) in groups.iter().enumerate() {
        let top = i as f64 + 0.1;
        for (k, series) in panel.series.iter().enumerate() {
            let values: Vec<f64> = group
                .rows
                .iter()
                .filter_map(|r| (series.value)(r))
                .collect();
            if let Some(stat) = Stat::of(&values) {
                let slot = (top + k as f64 * slot, top + (k + 1) as f64 * slot);
                let bar = Bar {
                    stat,
                    base,
                    slot,
                    color: color(k),
                    peer: group.peer,
                };
                bar.draw(area, chart, panel.format)?;
            }
        }
        if let Some(targets) = panel.targets {
            for (_, value) in targets.marks.iter().filter(|(c, _)| *c == group.label) {
                let mark = vec![(*value, top - 0.05), (*value, top + 0.85)];
                area.draw(&PathElement::new(mark, TARGET.stroke_width(2)))
                    .map_err(drawing(chart))?;
            }
        }
    }
    for line in &panel.lines {
        if let Some(v) = line_value(line, groups) {
            let dashed = DashedPathElement::new(vec![(v, 0.0), (v, n)], 5, 4, INK.stroke_width(1));
            area.draw(&dashed).map_err(drawing(chart))?;
        }
    }
    Ok(())
}

/// One bar: a series' statistic in a category's slot (`slot`: its top
/// and bottom on the category axis).
struct Bar {
    stat: Stat,
    base: f64,
    slot: (f64, f64),
    color: RGBColor,
    peer: bool,
}

impl Bar {
    /// Draws the bar from `base` to the median, whiskers over the range
    /// when there is one, and the median's value past their end.
    fn draw<CT: CoordTranslate<From = (f64, f64)>>(
        &self,
        area: &DrawingArea<SVGBackend<'_>, CT>,
        chart: &'static str,
        format: fn(f64) -> String,
    ) -> Result<(), PlotError> {
        let Self {
            stat,
            base,
            slot: (y0, y1),
            color,
            peer,
        } = *self;
        let (pad, yc) = ((y1 - y0) * 0.1, (y0 + y1) / 2.0);
        let bar = [(base, y0 + pad), (stat.median, y1 - pad)];
        let fill = if peer { pale(color) } else { color };
        area.draw(&Rectangle::new(bar, fill.filled()))
            .map_err(drawing(chart))?;
        if peer {
            area.draw(&Rectangle::new(bar, color.stroke_width(1)))
                .map_err(drawing(chart))?;
        }
        if stat.high > stat.low {
            let whisker = INK.stroke_width(1);
            let cap = (y1 - y0) * 0.25;
            area.draw(&PathElement::new(
                vec![(stat.low, yc), (stat.high, yc)],
                whisker,
            ))
            .map_err(drawing(chart))?;
            for end in [stat.low, stat.high] {
                area.draw(&PathElement::new(
                    vec![(end, yc - cap), (end, yc + cap)],
                    whisker,
                ))
                .map_err(drawing(chart))?;
            }
        }
        let value = text_style(13.0, INK, HPos::Left, VPos::Center);
        let text = EmptyElement::at((stat.high.max(stat.median), yc))
            + Text::new(format(stat.median), (5, 0), value);
        area.draw(&text).map_err(drawing(chart))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_is_the_median_and_the_range() {
        assert_eq!(Stat::of(&[]), None);
        let s = Stat::of(&[3.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((s.median, s.low, s.high), (2.5, 1.0, 10.0));
    }
}
