//! PNG charts for `zonelab reproduce`: a paper's published numbers next to ZoneLab's.
//!
//! Two kinds of chart, described as plain data ([`Chart`]) and drawn by [`render_png`]:
//! line charts (also used for time series; optionally with a logarithmic x axis) and
//! grouped bar charts. Text uses DejaVu Sans, embedded in the binary (see
//! `assets/LICENSE-DejaVu.txt`), so rendering needs no system font and the same data always
//! gives a byte-identical PNG.

use anyhow::{Context, Result, anyhow};
use plotters::coord::Shift;
use plotters::coord::ranged1d::{
    KeyPointHint, KeyPointWeight, NoDefaultFormatting, Ranged, ValueFormatter,
};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontStyle, register_font};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::OnceLock;

/// One named curve of a line chart; points are `(x, y)`, drawn in the given order.
///
/// A point with a non-finite coordinate (or, on a log x axis, `x <= 0`) is left out and
/// breaks the line there.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// What to draw.
#[derive(Debug, Clone, PartialEq)]
pub enum Chart {
    /// Line chart (or time series): one line per series, with markers when points are few.
    Lines {
        title: String,
        x_label: String,
        y_label: String,
        series: Vec<Series>,
        log_x: bool,
    },
    /// Grouped bars: `series[j].1[i]` is the value of series `j` in group `i`. Missing or
    /// non-finite values leave a gap; values beyond the last group are ignored.
    Bars {
        title: String,
        y_label: String,
        groups: Vec<String>,
        series: Vec<(String, Vec<f64>)>,
    },
}

/// Image size in pixels.
const WIDTH: u32 = 900;
const HEIGHT: u32 = 560;
/// The family name the embedded font is registered under ("sans-serif" is what plotters
/// asks for by default, so every text falls back to it).
const FONT: &str = "sans-serif";
static FONT_BYTES: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Colour-blind-friendly, distinct colours (Okabe & Ito), cycled when there are more series.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(0, 0, 0),       // black
    RGBColor(120, 120, 120), // grey (Okabe & Ito's yellow is too pale on white)
];
const GRID: RGBColor = RGBColor(225, 225, 225);
const TEXT: RGBColor = RGBColor(30, 30, 30);

/// Lines with at most this many points get a marker on each point.
const MARKER_MAX_POINTS: usize = 60;
/// Bars get their value written at their end when there are at most this many.
const BAR_LABEL_MAX_BARS: usize = 32;
/// The sizes a bar's value is written in, the first that fits.
const BAR_LABEL_SIZES: [f64; 2] = [12.0, 10.0];

fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Draws `chart` and writes it to `path` as an 8-bit RGB PNG of 900x560 pixels.
pub fn render_png(chart: &Chart, path: &Path) -> Result<()> {
    register_embedded_font()?;
    let mut pixels = vec![0u8; (WIDTH * HEIGHT * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (WIDTH, HEIGHT)).into_drawing_area();
        draw(chart, &root).map_err(|e| anyhow!("drawing the chart: {e}"))?;
        root.present()
            .map_err(|e| anyhow!("drawing the chart: {e}"))?;
    }
    write_png(&pixels, path).with_context(|| format!("writing {}", path.display()))
}

fn register_embedded_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| register_font(FONT, FontStyle::Normal, FONT_BYTES).is_ok());
    if ok {
        Ok(())
    } else {
        Err(anyhow!("the embedded font could not be loaded"))
    }
}

/// Encodes with fixed settings, so equal pixels give equal bytes.
fn write_png(pixels: &[u8], path: &Path) -> Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    let mut encoder = png::Encoder::new(&mut out, WIDTH, HEIGHT);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Balanced);
    encoder.set_filter(png::Filter::Adaptive);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(pixels)?;
    writer.finish()?;
    out.flush()?;
    Ok(())
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;
type DrawResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn draw(chart: &Chart, root: &Area) -> DrawResult<()> {
    root.fill(&WHITE)?;
    match chart {
        Chart::Lines {
            title,
            x_label,
            y_label,
            series,
            log_x,
        } => {
            let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
            let area = title_and_legend(root, title, &names, LegendMark::Line)?;
            draw_lines(&area, x_label, y_label, series, *log_x)
        }
        Chart::Bars {
            title,
            y_label,
            groups,
            series,
        } => {
            let names: Vec<&str> = series.iter().map(|(n, _)| n.as_str()).collect();
            let area = title_and_legend(root, title, &names, LegendMark::Box)?;
            draw_bars(&area, y_label, groups, series)
        }
    }
}

/// Sizes are even on purpose: plotters' ab_glyph text rounds each glyph's offset from
/// `size / 2`, and with odd sizes small glyphs (".", ",") come out a pixel too high.
fn font(size: f64) -> TextStyle<'static> {
    (FONT, size).into_font().color(&TEXT)
}

#[derive(Clone, Copy)]
enum LegendMark {
    Line,
    Box,
}

/// Draws the title and a legend row (wrapping to more rows when needed) above the plot, so
/// the legend never hides data; returns the area left for the plot.
fn title_and_legend<'a>(
    root: &Area<'a>,
    title: &str,
    names: &[&str],
    mark: LegendMark,
) -> DrawResult<Area<'a>> {
    let area = root.margin(8, 8, 12, 16);
    let area = if title.is_empty() {
        area
    } else {
        area.titled(title, font(22.0))?
    };
    if names.is_empty() {
        return Ok(area);
    }
    let style = font(14.0);
    let (width, _) = area.dim_in_pixel();
    let (swatch, gap, row_h) = (26i32, 22i32, 22i32);
    // Lay the entries out left to right, wrapping, then centre each row.
    let mut rows: Vec<Vec<(usize, i32)>> = vec![vec![]];
    let mut x = 0i32;
    for (i, name) in names.iter().enumerate() {
        let (tw, _) = area.estimate_text_size(name, &style)?;
        let w = swatch + 6 + tw as i32;
        if x > 0 && x + w > width as i32 {
            rows.push(vec![]);
            x = 0;
        }
        rows.last_mut().expect("rows is never empty").push((i, w));
        x += w + gap;
    }
    let legend_h = rows.len() as i32 * row_h + 6;
    let (legend, rest) = area.split_vertically(legend_h);
    for (r, row) in rows.iter().enumerate() {
        let row_w: i32 = row.iter().map(|&(_, w)| w).sum::<i32>() + gap * (row.len() as i32 - 1);
        let mut x = ((width as i32 - row_w) / 2).max(0);
        let y = r as i32 * row_h + row_h / 2;
        for &(i, w) in row {
            let c = colour(i);
            match mark {
                LegendMark::Line => {
                    legend.draw(&PathElement::new(
                        vec![(x, y), (x + swatch, y)],
                        c.stroke_width(3),
                    ))?;
                    legend.draw(&Circle::new((x + swatch / 2, y), 4, c.filled()))?;
                }
                LegendMark::Box => {
                    legend.draw(&Rectangle::new(
                        [(x + 4, y - 7), (x + swatch - 4, y + 7)],
                        c.filled(),
                    ))?;
                }
            }
            legend.draw(&Text::new(
                names[i].to_string(),
                (x + swatch + 6, y),
                style.pos(Pos::new(HPos::Left, VPos::Center)),
            ))?;
            x += w + gap;
        }
    }
    Ok(rest)
}

/// Axis numbers: short, no float noise ("0.30000000000000004"), exponents for the extremes.
fn fmt_num(v: f64) -> String {
    fmt_significant(v, 4)
}

/// A bar's value written at its end: three significant digits, as a bar is read to a few
/// percent and shorter labels fit more bars.
fn fmt_bar_value(v: f64) -> String {
    fmt_significant(v, 3)
}

/// About `digits` significant digits, trailing zeros trimmed; exponents below 1e-3 and from
/// 1e7.
fn fmt_significant(v: f64, digits: i32) -> String {
    if v == 0.0 {
        return "0".into();
    }
    if !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if !(1e-3..1e7).contains(&a) {
        let s = format!("{v:.2e}");
        // "1.50e6" -> "1.5e6", "1.00e6" -> "1e6"
        return match s.split_once('e') {
            Some((m, e)) => {
                let m = m.trim_end_matches('0').trim_end_matches('.');
                format!("{m}e{e}")
            }
            None => s,
        };
    }
    let decimals = (digits - 1 - a.log10().floor() as i32).clamp(0, 6) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A box in pixels: left, top, right, bottom (exclusive).
type PixelBox = (i32, i32, i32, i32);

fn boxes_overlap(a: PixelBox, b: PixelBox) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// Where to draw each of the `labels`, taken in order, each given as the boxes it would take
/// in the sizes to try: the first of them that overlaps none of the `obstacles` and none of
/// the labels placed before it, or none. A value label wider than its bar may reach over its
/// neighbours' while they are lower, but never covers another bar or label.
fn labels_that_fit(labels: &[Vec<PixelBox>], obstacles: &[PixelBox]) -> Vec<Option<usize>> {
    let mut drawn: Vec<PixelBox> = Vec::new();
    labels
        .iter()
        .map(|tries| {
            let place = tries.iter().position(|&l| {
                !obstacles
                    .iter()
                    .chain(drawn.iter())
                    .any(|&o| boxes_overlap(l, o))
            });
            if let Some(k) = place {
                drawn.push(tries[k]);
            }
            place
        })
        .collect()
}

/// `lo..=hi` padded by 5% on each side (or around a single value); `(0, 1)` if unusable.
fn linear_range(lo: f64, hi: f64) -> (f64, f64) {
    if !(lo.is_finite() && hi.is_finite()) || lo > hi {
        return (0.0, 1.0);
    }
    let span = hi - lo;
    let pad = if span > 0.0 {
        span * 0.05
    } else if lo != 0.0 {
        lo.abs() * 0.1
    } else {
        1.0
    };
    (lo - pad, hi + pad)
}

/// A padded range for a log axis over positive `lo..=hi`.
fn log_range(lo: f64, hi: f64) -> (f64, f64) {
    if !(lo.is_finite() && hi.is_finite()) || lo <= 0.0 || lo > hi {
        return (1.0, 10.0);
    }
    let pad = if hi > lo { (hi / lo).powf(0.05) } else { 2.0 };
    (lo / pad, hi * pad)
}

/// Ticks for a log axis over `lo..hi`: powers of two when the data are all powers of two
/// (request sizes, queue depths), else powers of ten, or 1-2-5 (then 1..9) steps when the
/// range spans too few decades to show three of them. At most about a dozen.
fn log_ticks(lo: f64, hi: f64, powers_of_two: bool) -> Vec<f64> {
    const MAX_TICKS: usize = 12;
    let inside = |v: f64| v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9);
    let thin = |v: Vec<f64>| -> Vec<f64> {
        let step = v.len().div_ceil(MAX_TICKS).max(1);
        v.into_iter().step_by(step).collect()
    };
    let exps = |base: f64| {
        let (a, b) = (lo.log(base).floor() as i32, hi.log(base).ceil() as i32);
        (a..=b).map(move |k| (k, base.powi(k)))
    };
    if powers_of_two {
        return thin(exps(2.0).map(|(_, v)| v).filter(|&v| inside(v)).collect());
    }
    let decades: Vec<f64> = exps(10.0).map(|(_, v)| v).filter(|&v| inside(v)).collect();
    if decades.len() >= 3 {
        return thin(decades);
    }
    for mantissas in [
        &[1.0, 2.0, 5.0][..],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
    ] {
        let ticks: Vec<f64> = exps(10.0)
            .flat_map(|(_, d)| mantissas.iter().map(move |m| m * d))
            .filter(|&v| inside(v))
            .collect();
        if ticks.len() >= 3 || mantissas.len() == 9 {
            return thin(ticks);
        }
    }
    unreachable!("the last mantissa set always returns")
}

/// A logarithmic x axis with the ticks of [`log_ticks`].
struct LogAxis {
    ln: RangedCoordf64,
    range: std::ops::Range<f64>,
    ticks: Vec<f64>,
}

impl LogAxis {
    fn new(lo: f64, hi: f64, powers_of_two: bool) -> Self {
        LogAxis {
            ln: (lo.ln()..hi.ln()).into(),
            range: lo..hi,
            ticks: log_ticks(lo, hi, powers_of_two),
        }
    }
}

impl Ranged for LogAxis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.ln.map(&value.ln(), limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        match hint.weight() {
            KeyPointWeight::Bold => self.ticks.clone(),
            KeyPointWeight::Any => vec![],
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.range.clone()
    }
}

impl ValueFormatter<f64> for LogAxis {
    fn format_ext(&self, value: &f64) -> String {
        fmt_num(*value)
    }
}

fn is_power_of_two(x: f64) -> bool {
    x > 0.0 && 2f64.powi(x.log2().round() as i32) == x
}

/// Min and max of the finite values, if any.
fn finite_bounds(values: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    values
        .into_iter()
        .filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
}

fn usable(p: (f64, f64), log_x: bool) -> bool {
    p.0.is_finite() && p.1.is_finite() && (!log_x || p.0 > 0.0)
}

fn draw_lines(
    area: &Area,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_x: bool,
) -> DrawResult<()> {
    let points = || {
        series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .filter(|&p| usable(p, log_x))
    };
    let xb = finite_bounds(points().map(|p| p.0));
    let yb = finite_bounds(points().map(|p| p.1));
    let (y0, y1) = match yb {
        None => (0.0, 1.0),
        Some((lo, hi)) => {
            let (a, b) = linear_range(lo, hi);
            // Non-negative data close enough to zero starts at zero, as papers usually do.
            if lo >= 0.0 && (a < 0.0 || lo <= 0.5 * hi) {
                (0.0, b)
            } else {
                (a, b)
            }
        }
    };
    if log_x {
        let (x0, x1) = xb.map_or((1.0, 10.0), |(lo, hi)| log_range(lo, hi));
        let pow2 = xb.is_some() && points().all(|p| is_power_of_two(p.0));
        let x = LogAxis::new(x0, x1, pow2);
        lines_in(area, x, y0..y1, x_label, y_label, series, true)
    } else {
        let (x0, x1) = xb.map_or((0.0, 1.0), |(lo, hi)| linear_range(lo, hi));
        let x: RangedCoordf64 = (x0..x1).into();
        lines_in(area, x, y0..y1, x_label, y_label, series, false)
    }
}

fn lines_in<X>(
    area: &Area,
    x: X,
    y: std::ops::Range<f64>,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_x: bool,
) -> DrawResult<()>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .margin_right(20)
        .x_label_area_size(48)
        .y_label_area_size(78)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .bold_line_style(GRID)
        .axis_style(TEXT)
        .x_desc(x_label)
        .y_desc(y_label)
        .axis_desc_style(font(16.0))
        .label_style(font(14.0))
        .x_label_formatter(&|v| fmt_num(*v))
        .y_label_formatter(&|v| fmt_num(*v))
        .draw()?;
    for (i, s) in series.iter().enumerate() {
        let c = colour(i);
        // Split into runs of usable points: a skipped point leaves a gap.
        let mut runs: Vec<Vec<(f64, f64)>> = vec![vec![]];
        for &p in &s.points {
            if usable(p, log_x) {
                runs.last_mut().expect("runs is never empty").push(p);
            } else if !runs.last().expect("runs is never empty").is_empty() {
                runs.push(vec![]);
            }
        }
        let total: usize = runs.iter().map(Vec::len).sum();
        let markers = total <= MARKER_MAX_POINTS;
        for run in &runs {
            // Segment by segment: plotters fills a thick polyline as one polygon, which
            // leaves holes and spikes where a dense line turns back on itself.
            chart.draw_series(
                run.windows(2)
                    .map(|w| PathElement::new(vec![w[0], w[1]], c.stroke_width(2))),
            )?;
            if markers || run.len() == 1 {
                chart.draw_series(run.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
            }
        }
    }
    Ok(())
}

/// The x axis of a bar chart: group `i` spans `i..i + 1`, labelled with its name at its centre.
struct GroupAxis {
    names: Vec<String>,
    linear: RangedCoordf64,
}

impl GroupAxis {
    fn new(names: &[String]) -> Self {
        GroupAxis {
            names: names.to_vec(),
            linear: (0.0..names.len().max(1) as f64).into(),
        }
    }
}

impl Ranged for GroupAxis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.linear.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Only bold points (labels and ticks): no light grid lines between groups.
        if matches!(hint.weight(), KeyPointWeight::Any) || self.names.is_empty() {
            return vec![];
        }
        // Label every group when they fit the hint, else every `step`-th.
        let step = self.names.len().div_ceil(hint.max_num_points().max(1));
        (0..self.names.len())
            .step_by(step)
            .map(|i| i as f64 + 0.5)
            .collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.linear.range()
    }
}

impl ValueFormatter<f64> for GroupAxis {
    fn format_ext(&self, value: &f64) -> String {
        let i = value.floor();
        if i >= 0.0 && (i as usize) < self.names.len() {
            self.names[i as usize].clone()
        } else {
            String::new()
        }
    }
}

fn draw_bars(
    area: &Area,
    y_label: &str,
    groups: &[String],
    series: &[(String, Vec<f64>)],
) -> DrawResult<()> {
    let n = groups.len();
    let m = series.len().max(1);
    let value = |j: usize, i: usize| -> Option<f64> {
        series[j].1.get(i).copied().filter(|v| v.is_finite())
    };
    let all = || (0..series.len()).flat_map(move |j| (0..n).filter_map(move |i| value(j, i)));
    let (lo, hi) = finite_bounds(all()).unwrap_or((0.0, 1.0));
    // Bars grow from zero, so zero is always on the axis; pad away from it.
    let (lo, hi) = (lo.min(0.0), hi.max(0.0));
    let span = if hi > lo { hi - lo } else { 1.0 };
    let y0 = if lo < 0.0 { lo - span * 0.08 } else { 0.0 };
    let y1 = if hi > 0.0 || lo == 0.0 {
        hi + span * 0.08
    } else {
        0.0
    };
    let y1 = if y1 > y0 { y1 } else { y0 + 1.0 };

    let label_size = if n > 12 { 12.0 } else { 14.0 };
    let mut chart = ChartBuilder::on(area)
        .margin_right(20)
        .x_label_area_size(40)
        .y_label_area_size(78)
        .build_cartesian_2d(GroupAxis::new(groups), y0..y1)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(WHITE)
        .bold_line_style(GRID)
        .axis_style(TEXT)
        .y_desc(y_label)
        .axis_desc_style(font(16.0))
        .label_style(font(14.0))
        .x_label_style(font(label_size))
        .x_labels(n.clamp(1, 40))
        .y_label_formatter(&|v| fmt_num(*v))
        .draw()?;

    let bar_w = 0.8 / m as f64;
    let bars = series.len() * n;
    // Values sit just beyond the end of their bar: above it, or below it when negative; in
    // the smaller size where the larger would cover a neighbour.
    let sizes = BAR_LABEL_SIZES.map(|size| {
        (
            font(size).pos(Pos::new(HPos::Center, VPos::Bottom)),
            font(size).pos(Pos::new(HPos::Center, VPos::Top)),
        )
    });
    let mut bar_boxes = Vec::new();
    // Per label: where it is drawn and in which styles, and the boxes those styles take.
    let mut labels = Vec::new();
    let mut label_boxes: Vec<Vec<PixelBox>> = Vec::new();
    for j in 0..series.len() {
        let c = colour(j);
        for i in 0..n {
            let Some(v) = value(j, i) else { continue };
            let left = i as f64 + 0.1 + j as f64 * bar_w;
            let right = left + bar_w;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(left, 0.0), (right, v)],
                c.filled(),
            )))?;
            let (x0, y0) = chart.backend_coord(&(left, v));
            let (x1, y1) = chart.backend_coord(&(right, 0.0));
            bar_boxes.push((x0.min(x1), y0.min(y1), x0.max(x1), y0.max(y1)));
            if bars <= BAR_LABEL_MAX_BARS {
                let text = fmt_bar_value(v);
                let dy = if v < 0.0 { 3 } else { -3 };
                let mut styles = Vec::new();
                let mut boxes = Vec::new();
                for (above, below) in &sizes {
                    let style = if v < 0.0 { below } else { above };
                    let (tw, th) = area.estimate_text_size(&text, style)?;
                    let (tw, th) = (tw as i32, th as i32);
                    let x = (x0 + x1) / 2 - tw / 2;
                    let top = if v < 0.0 { y0 + dy } else { y0 + dy - th };
                    styles.push(style);
                    boxes.push((x, top, x + tw, top + th));
                }
                labels.push(((left + right) / 2.0, v, text, dy, styles));
                label_boxes.push(boxes);
            }
        }
    }
    for (place, (x, v, text, dy, styles)) in labels_that_fit(&label_boxes, &bar_boxes)
        .into_iter()
        .zip(labels)
    {
        if let Some(k) = place {
            chart.draw_series(std::iter::once(
                EmptyElement::at((x, v)) + Text::new(text, (0, dy), styles[k].clone()),
            ))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh path in the temp directory, removed when dropped.
    struct TempPng(PathBuf);
    impl TempPng {
        fn new(tag: &str) -> Self {
            static N: AtomicUsize = AtomicUsize::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let name = format!("zonelab-plot-{}-{tag}-{n}.png", std::process::id());
            TempPng(std::env::temp_dir().join(name))
        }
    }
    impl Drop for TempPng {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// Renders twice; checks the PNG signature and that both files are identical.
    fn render_twice(chart: &Chart, tag: &str) -> Vec<u8> {
        let (a, b) = (TempPng::new(tag), TempPng::new(tag));
        render_png(chart, &a.0).unwrap();
        render_png(chart, &b.0).unwrap();
        let bytes = std::fs::read(&a.0).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{tag}: not a PNG");
        assert_eq!(bytes, std::fs::read(&b.0).unwrap(), "{tag}: renders differ");
        bytes
    }

    fn lines(series: Vec<Series>, log_x: bool) -> Chart {
        Chart::Lines {
            title: "Write throughput vs. request size".into(),
            x_label: "request size (KiB)".into(),
            y_label: "throughput (MiB/s)".into(),
            series,
            log_x,
        }
    }

    fn series(name: &str, points: &[(f64, f64)]) -> Series {
        Series {
            name: name.into(),
            points: points.to_vec(),
        }
    }

    fn paper_vs_zonelab() -> Vec<Series> {
        vec![
            series(
                "paper",
                &[
                    (4.0, 310.0),
                    (8.0, 560.0),
                    (16.0, 880.0),
                    (64.0, 1050.0),
                    (128.0, 1080.0),
                ],
            ),
            series(
                "ZoneLab",
                &[
                    (4.0, 295.0),
                    (8.0, 575.0),
                    (16.0, 905.0),
                    (64.0, 1032.0),
                    (128.0, 1071.0),
                ],
            ),
        ]
    }

    fn bars(groups: &[&str], series: Vec<(&str, Vec<f64>)>) -> Chart {
        Chart::Bars {
            title: "Write amplification by workload".into(),
            y_label: "write amplification".into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            series: series
                .into_iter()
                .map(|(n, v)| (n.to_string(), v))
                .collect(),
        }
    }

    #[test]
    fn line_charts_are_deterministic_pngs() {
        render_twice(&lines(paper_vs_zonelab(), false), "lines");
        render_twice(&lines(paper_vs_zonelab(), true), "lines-log");
    }

    #[test]
    fn time_series_with_many_points() {
        let pts: Vec<(f64, f64)> = (0..5000)
            .map(|i| {
                let t = i as f64 * 0.01;
                (
                    t,
                    800.0 + 150.0 * (t * 0.7).sin() + if i % 997 == 0 { -400.0 } else { 0.0 },
                )
            })
            .collect();
        let chart = Chart::Lines {
            title: "Throughput over time".into(),
            x_label: "time (s)".into(),
            y_label: "MiB/s".into(),
            series: vec![series("ZoneLab", &pts)],
            log_x: false,
        };
        render_twice(&chart, "timeseries");
    }

    #[test]
    fn bar_charts_are_deterministic_pngs() {
        let chart = bars(
            &[
                "seq write",
                "rand write",
                "RocksDB fillrandom",
                "mixed 70/30",
            ],
            vec![
                ("paper", vec![1.0, 2.8, 1.9, 2.2]),
                ("ZoneLab", vec![1.02, 2.65, 2.05, 2.31]),
            ],
        );
        render_twice(&chart, "bars");
    }

    #[test]
    fn bar_values_take_three_significant_digits() {
        assert_eq!(fmt_bar_value(57.0834), "57.1");
        assert_eq!(fmt_bar_value(94.8), "94.8");
        assert_eq!(fmt_bar_value(1.4649), "1.46");
        assert_eq!(fmt_bar_value(242.44), "242");
        assert_eq!(fmt_bar_value(-0.5), "-0.5");
        assert_eq!(fmt_bar_value(12_345.0), "12345");
        assert_eq!(fmt_num(57.0834), "57.08", "axes keep four");
    }

    #[test]
    fn a_label_takes_the_first_size_that_covers_no_bar_and_no_earlier_label() {
        // Two bars side by side, 10 px wide; labels 16 px wide (or 10 px in the smaller size)
        // centred over each.
        let low_bar = (0, 50, 10, 100);
        let high_bar = (10, 20, 20, 100);
        let over_low = vec![(-3, 35, 13, 47), (0, 38, 10, 47)];
        let over_high = vec![(7, 5, 23, 17), (10, 8, 20, 17)];
        // The low bar's label would reach into the high bar in the larger size, not in the
        // smaller; the high bar's is clear.
        assert_eq!(
            labels_that_fit(&[over_low.clone(), over_high], &[low_bar, high_bar]),
            vec![Some(1), Some(0)]
        );
        // Bars of equal height: the first label takes the larger size, and the second would
        // cover it in either.
        let twin = (10, 50, 20, 100);
        let over_twin = vec![(7, 35, 23, 47), (10, 38, 20, 47)];
        assert_eq!(
            labels_that_fit(&[over_low.clone(), over_twin], &[low_bar, twin]),
            vec![Some(0), None]
        );
        // A label that fits in no size is left out.
        let tall = (10, 0, 20, 100);
        let over_tall = vec![(7, -15, 23, -3), (10, -12, 20, -3)];
        let wide = vec![(-8, 35, 18, 47), (-6, 38, 16, 47)];
        assert_eq!(
            labels_that_fit(&[wide, over_tall], &[low_bar, tall]),
            vec![None, Some(0)]
        );
    }

    #[test]
    fn different_data_gives_different_pngs() {
        let a = render_twice(&lines(paper_vs_zonelab(), false), "diff-a");
        let mut other = paper_vs_zonelab();
        other[1].points[2].1 = 700.0;
        let b = render_twice(&lines(other, false), "diff-b");
        assert_ne!(a, b);
    }

    #[test]
    fn degenerate_lines_do_not_panic() {
        let nan = f64::NAN;
        let inf = f64::INFINITY;
        let cases = vec![
            lines(vec![], false),
            lines(vec![], true),
            lines(vec![series("empty", &[])], false),
            lines(vec![series("one", &[(3.0, 7.0)])], false),
            lines(vec![series("one", &[(3.0, 7.0)])], true),
            lines(vec![series("zero", &[(0.0, 0.0)])], false),
            lines(vec![series("flat", &[(1.0, 5.0), (2.0, 5.0)])], false),
            lines(vec![series("vertical", &[(2.0, 1.0), (2.0, 5.0)])], false),
            lines(
                vec![series("negative", &[(-5.0, -1e9), (5.0, -2e9)])],
                false,
            ),
            lines(vec![series("tiny", &[(1e-9, 1e-12), (2e-9, 3e-12)])], false),
            lines(
                vec![series("nan", &[(nan, 1.0), (1.0, nan), (inf, 2.0)])],
                false,
            ),
            lines(
                vec![series(
                    "gaps",
                    &[(1.0, 1.0), (2.0, nan), (3.0, 3.0), (4.0, -inf), (5.0, 2.0)],
                )],
                false,
            ),
            // Only non-positive x on a log axis: nothing usable.
            lines(vec![series("log", &[(0.0, 1.0), (-1.0, 2.0)])], true),
            lines(vec![series("narrow log", &[(3.0, 1.0), (8.0, 2.0)])], true),
            lines(
                (0..12)
                    .map(|i| {
                        series(
                            &format!("a rather long series name {i}"),
                            &[(i as f64, 1.0)],
                        )
                    })
                    .collect(),
                false,
            ),
            Chart::Lines {
                title: String::new(),
                x_label: String::new(),
                y_label: String::new(),
                series: vec![series("", &[(1.0, 1.0), (2.0, 2.0)])],
                log_x: false,
            },
        ];
        for (i, c) in cases.iter().enumerate() {
            render_twice(c, &format!("degenerate-lines-{i}"));
        }
    }

    #[test]
    fn degenerate_bars_do_not_panic() {
        let nan = f64::NAN;
        let cases = vec![
            bars(&[], vec![]),
            bars(&["a", "b"], vec![]),
            bars(&[], vec![("paper", vec![1.0, 2.0])]),
            bars(&["a"], vec![("paper", vec![])]),
            bars(&["a", "b"], vec![("paper", vec![0.0, 0.0])]),
            bars(&["a", "b"], vec![("paper", vec![-3.0, -1.0])]),
            bars(
                &["a", "b"],
                vec![("paper", vec![-3.0, 4.0]), ("ZoneLab", vec![2.0])],
            ),
            bars(&["a", "b"], vec![("paper", vec![nan, f64::INFINITY, 5.0])]),
            bars(
                &["a"],
                vec![("paper", vec![1e12]), ("ZoneLab", vec![9.9e11])],
            ),
            bars(
                &(0..40)
                    .map(|i| format!("g{i}"))
                    .collect::<Vec<_>>()
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
                (0..10)
                    .map(|j| ("s", (0..40).map(|i| (i * j) as f64).collect()))
                    .collect(),
            ),
        ];
        for (i, c) in cases.iter().enumerate() {
            render_twice(c, &format!("degenerate-bars-{i}"));
        }
    }

    #[test]
    fn unwritable_path_is_an_error() {
        let dir = TempPng::new("dir");
        std::fs::create_dir_all(&dir.0).unwrap();
        let err = render_png(&lines(paper_vs_zonelab(), false), &dir.0);
        std::fs::remove_dir(&dir.0).unwrap();
        assert!(err.is_err());
    }

    #[test]
    fn log_axis_ticks() {
        // Request sizes 4..128 KiB: powers of two.
        let (lo, hi) = log_range(4.0, 128.0);
        assert_eq!(log_ticks(lo, hi, true), [4.0, 8.0, 16.0, 32.0, 64.0, 128.0]);
        // Many decades: powers of ten only.
        assert_eq!(log_ticks(0.5, 2e4, false), [1.0, 10.0, 100.0, 1e3, 1e4]);
        // Too few decades: 1-2-5, then 1..9.
        assert_eq!(
            log_ticks(0.9, 60.0, false),
            [1.0, 2.0, 5.0, 10.0, 20.0, 50.0]
        );
        assert_eq!(log_ticks(2.5, 8.5, false), [3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        // Never more than about a dozen.
        assert!(log_ticks(1e-30, 1e30, false).len() <= 12);
        assert!(log_ticks(1.0, 2f64.powi(60), true).len() <= 12);
        assert!(is_power_of_two(0.5) && is_power_of_two(1024.0) && !is_power_of_two(12.0));
    }

    #[test]
    fn numbers_are_formatted_compactly() {
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(1000.0), "1000");
        assert_eq!(fmt_num(0.1 + 0.2), "0.3");
        assert_eq!(fmt_num(2.5), "2.5");
        assert_eq!(fmt_num(-12.75), "-12.75");
        assert_eq!(fmt_num(1.5e9), "1.5e9");
        assert_eq!(fmt_num(2e-5), "2e-5");
    }
}
