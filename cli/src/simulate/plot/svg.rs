//! The plot drawn as SVG: a title and legend, then one panel of stacked bars per limit.

use super::{Panel, Plot};
use std::fmt::{self, Write};

/// The drawing's width, px.
pub(super) const WIDTH: u32 = 900;
/// Height of the title and legend above the panels, px.
const HEADER: u32 = 56;
/// Height of one panel, px.
const PANEL: u32 = 220;
/// Height of the time axis caption below the panels, px.
const FOOTER: u32 = 28;
/// Left edge of the bars: room for the y tick labels and the y caption.
const LEFT: f64 = 66.0;
/// Right edge of the bars: room for half a date label.
const RIGHT: f64 = 866.0;
/// Top of the bars, from the panel's top: below the panel's title.
const BARS_TOP: f64 = 30.0;
/// Bottom of the bars (the time axis), from the panel's top.
const BARS_BOTTOM: f64 = 188.0;
/// At most this many bars, so that each is at least a pixel wide.
const MAX_BARS: usize = (RIGHT - LEFT) as usize;
/// At most this many intervals between y ticks.
const MAX_Y_INTERVALS: u128 = 5;
/// At most this many intervals between time ticks: a label is about 60 px wide.
const MAX_TIME_INTERVALS: u64 = 8;

/// Seconds a bar may sum, round on a clock; past the last, whole hours.
const BAR_SECONDS: [u64; 13] = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];
/// Seconds between time ticks, round on a clock; past the last, whole days.
const TICK_SECONDS: [u64; 18] = [
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
];
/// One day, s.
const DAY: u64 = 86400;

/// What each bar stacks, bottom to top: (legend, colour).
const SERIES: [(&str, &str); 3] = [
    ("admitted at once", "#2e8b47"),
    ("admitted after a delay", "#f2a900"),
    ("denied", "#d7362e"),
];
/// The colour of text.
const INK: &str = "#222";
/// The colour of the time axis and its ticks.
const AXIS: &str = "#666";
/// The colour of grid lines.
const GRID: &str = "#e6e6e6";

/// The drawing's height for this many panels, px.
pub(super) fn height(panels: usize) -> u32 {
    let panels = u32::try_from(panels).unwrap_or(u32::MAX);
    HEADER
        .saturating_add(PANEL.saturating_mul(panels))
        .saturating_add(FOOTER)
}

/// Draws text as outlines of one font, for a rasterizer that has no fonts.
pub(super) trait Outlines {
    /// Path data for `text` at `size` px, starting at (0, 0) on the baseline, and its width.
    fn outline(&self, text: &str, size: f64) -> (String, f64);
}

/// The plot as an SVG document, its text as `<text>`, or as paths when given `outlines`.
pub(super) fn draw(plot: &Plot, outlines: Option<&dyn Outlines>) -> String {
    let seconds = plot
        .panels
        .iter()
        .flat_map(|panel| {
            [
                panel.admitted.len(),
                panel.denied.len(),
                panel.delayed.len(),
            ]
        })
        .max()
        .unwrap_or(0)
        .max(1);
    let time = TimeAxis::new(plot.start, seconds);
    let height = height(plot.panels.len());

    let mut canvas = Canvas {
        svg: String::new(),
        outlines,
    };
    canvas.write(format_args!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\">\n\
         <title>{title}</title>\n\
         <rect width=\"{WIDTH}\" height=\"{height}\" fill=\"#fff\"/>\n",
        title = Escaped(&plot.title),
    ));
    canvas.text(LEFT, 24.0, 16, Anchor::Start, &plot.title);
    legend(&mut canvas);
    for (index, panel) in plot.panels.iter().enumerate() {
        let top = f64::from(HEADER) + f64::from(PANEL) * index as f64;
        draw_panel(&mut canvas, panel, &time, top);
    }
    let caption = format!(
        "time (UTC) from {}, {}",
        DateTime(plot.start),
        Span(time.bar_seconds * time.bars as u64)
    );
    let bottom = f64::from(height) - 10.0;
    canvas.text((LEFT + RIGHT) / 2.0, bottom, 12, Anchor::Middle, &caption);
    canvas.svg.push_str("</svg>\n");
    canvas.svg
}

/// The colour key, under the title.
fn legend(canvas: &mut Canvas) {
    let mut x = LEFT;
    for (label, colour) in SERIES {
        canvas.write(format_args!(
            "<rect x=\"{}\" y=\"35\" width=\"11\" height=\"11\" fill=\"{colour}\"/>\n",
            Num(x)
        ));
        canvas.text(x + 16.0, 45.0, 12, Anchor::Start, label);
        // About 6.5 px a character at 12 px, and a gap: the same in every viewer's font.
        x += 16.0 + 6.5 * label.len() as f64 + 20.0;
    }
}

/// One panel: its title, y axis with grid, time ticks and the stacked bars.
fn draw_panel(canvas: &mut Canvas, panel: &Panel, time: &TimeAxis, top: f64) {
    let bars = time.bars;
    let width = time.bar_seconds as usize;
    let admitted = sums(&panel.admitted, width, bars);
    let delayed = sums(&panel.delayed, width, bars);
    let denied = sums(&panel.denied, width, bars);
    // Bottom to top: admitted at once, admitted after a delay, denied.
    let levels: Vec<[u128; 4]> = (0..bars)
        .map(|bar| {
            let at_once = u128::from(admitted[bar].saturating_sub(delayed[bar]));
            let waited = at_once + u128::from(delayed[bar]);
            [0, at_once, waited, waited + u128::from(denied[bar])]
        })
        .collect();
    let scale = CountAxis::new(levels.iter().map(|level| level[3]).max().unwrap_or(0));

    let bottom = top + BARS_BOTTOM;
    let y = |count: u128| bottom - (BARS_BOTTOM - BARS_TOP) * count as f64 / scale.top as f64;
    canvas.text(LEFT, top + 20.0, 13, Anchor::Start, &panel.title);

    // Grid first, so that bars cover it.
    for tick in time.ticks() {
        canvas.write(format_args!(
            "<path d=\"M{} {}V{}\" stroke=\"{GRID}\"/>\n",
            Num(time.x(tick)),
            Num(top + BARS_TOP),
            Num(bottom),
        ));
    }
    for tick in scale.ticks() {
        let at = y(tick);
        canvas.write(format_args!(
            "<path d=\"M{} {}H{}\" stroke=\"{GRID}\"/>\n",
            Num(LEFT),
            Num(at),
            Num(RIGHT),
        ));
        canvas.text(LEFT - 6.0, at + 4.0, 11, Anchor::End, &scale.label(tick));
    }
    let middle = top + (BARS_TOP + BARS_BOTTOM) / 2.0;
    let caption = format!("requests per {}", Per(time.bar_seconds));
    canvas.vertical_text(16.0, middle, 11, &caption);

    // One path per series, a rectangle per non-empty bar.
    let step = (RIGHT - LEFT) / bars as f64;
    let inset = if step >= 4.0 { step * 0.1 } else { 0.0 };
    for (series, (_, colour)) in SERIES.iter().enumerate() {
        let mut path = String::new();
        for (bar, level) in levels.iter().enumerate() {
            let (low, high) = (level[series], level[series + 1]);
            if high == low {
                continue;
            }
            let left = LEFT + step * bar as f64 + inset;
            let right = LEFT + step * (bar + 1) as f64 - inset;
            // Writing to a String cannot fail.
            let _ = write!(
                path,
                "M{} {}H{}V{}H{}Z",
                Num(left),
                Num(y(high)),
                Num(right),
                Num(y(low)),
                Num(left)
            );
        }
        if !path.is_empty() {
            canvas.write(format_args!(
                "<path fill=\"{colour}\" shape-rendering=\"crispEdges\" d=\"{path}\"/>\n"
            ));
        }
    }

    // The time axis, over the bars' bottom edge.
    let mut ticks = String::new();
    for tick in time.ticks() {
        let x = time.x(tick);
        let _ = write!(ticks, "M{} {}v4", Num(x), Num(bottom));
        canvas.text(x, bottom + 16.0, 11, Anchor::Middle, &time.label(tick));
    }
    canvas.write(format_args!(
        "<path d=\"M{} {}H{}{ticks}\" stroke=\"{AXIS}\" fill=\"none\"/>\n",
        Num(LEFT),
        Num(bottom),
        Num(RIGHT),
    ));
}

/// The SVG being written, and how its text is drawn.
struct Canvas<'a> {
    /// The document so far.
    svg: String,
    /// The font to outline text with, or none for `<text>`.
    outlines: Option<&'a dyn Outlines>,
}

/// Which point of a line of text its position gives.
#[derive(Clone, Copy)]
enum Anchor {
    /// The text starts there.
    Start,
    /// The text is centred there.
    Middle,
    /// The text ends there.
    End,
}

impl Canvas<'_> {
    /// Appends markup.
    fn write(&mut self, markup: fmt::Arguments<'_>) {
        // Writing to a String cannot fail.
        let _ = self.svg.write_fmt(markup);
    }

    /// A line of text whose baseline's `anchor` is at (x, y).
    fn text(&mut self, x: f64, y: f64, size: u32, anchor: Anchor, content: &str) {
        self.line(x, y, size, anchor, false, content);
    }

    /// A line of text reading upwards, centred on (x, y).
    fn vertical_text(&mut self, x: f64, y: f64, size: u32, content: &str) {
        self.line(x, y, size, Anchor::Middle, true, content);
    }

    /// A line of text, as `<text>` or as outlines.
    fn line(&mut self, x: f64, y: f64, size: u32, anchor: Anchor, up: bool, content: &str) {
        let Some(outlines) = self.outlines else {
            let anchor = match anchor {
                Anchor::Start => "start",
                Anchor::Middle => "middle",
                Anchor::End => "end",
            };
            let (x, y) = (Num(x), Num(y));
            let place = if up {
                format!("transform=\"translate({x} {y}) rotate(-90)\"")
            } else {
                format!("x=\"{x}\" y=\"{y}\"")
            };
            self.write(format_args!(
                "<text {place} font-size=\"{size}\" text-anchor=\"{anchor}\" \
                 fill=\"{INK}\">{}</text>\n",
                Escaped(content),
            ));
            return;
        };
        let (path, width) = outlines.outline(content, f64::from(size));
        if path.is_empty() {
            return;
        }
        let shift = match anchor {
            Anchor::Start => 0.0,
            Anchor::Middle => width / 2.0,
            Anchor::End => width,
        };
        let turn = if up { " rotate(-90)" } else { "" };
        self.write(format_args!(
            "<path transform=\"translate({} {}){turn} translate({} 0)\" fill=\"{INK}\" \
             d=\"{path}\"/>\n",
            Num(x),
            Num(y),
            Num(-shift),
        ));
    }
}

/// Sums of `width` seconds each: [i] is seconds `i * width..(i + 1) * width`.
fn sums(per_second: &[u64], width: usize, bars: usize) -> Vec<u64> {
    let mut sums = vec![0_u64; bars];
    for (second, count) in per_second.iter().enumerate() {
        let sum = &mut sums[second / width];
        *sum = sum.saturating_add(*count);
    }
    sums
}

/// The time axis: bars of `bar_seconds` from `start`, ticks at round UTC times.
struct TimeAxis {
    /// Unix seconds of the first bar's start.
    start: u64,
    /// Seconds each bar sums.
    bar_seconds: u64,
    /// How many bars.
    bars: usize,
    /// Seconds between ticks.
    tick_seconds: u64,
}

impl TimeAxis {
    /// The axis for `seconds` of data from `start`.
    fn new(start: u64, seconds: usize) -> Self {
        let seconds = seconds as u64;
        let bar_seconds = round_up(&BAR_SECONDS, 3600, seconds.div_ceil(MAX_BARS as u64));
        let bars = seconds.div_ceil(bar_seconds);
        let span = bar_seconds * bars;
        let tick_seconds = round_up(&TICK_SECONDS, DAY, span.div_ceil(MAX_TIME_INTERVALS));
        TimeAxis {
            start,
            bar_seconds,
            bars: bars as usize,
            tick_seconds,
        }
    }

    /// The Unix seconds of the ticks: every multiple of `tick_seconds` within the bars.
    fn ticks(&self) -> impl Iterator<Item = u64> {
        let end = self
            .start
            .saturating_add(self.bar_seconds * self.bars as u64);
        let step = self.tick_seconds;
        let first = self.start.div_ceil(step).checked_mul(step);
        std::iter::successors(first, move |tick| tick.checked_add(step))
            .take_while(move |tick| *tick <= end)
    }

    /// Where the Unix second `at` is, px.
    fn x(&self, at: u64) -> f64 {
        let span = (self.bar_seconds * self.bars as u64) as f64;
        LEFT + (RIGHT - LEFT) * (at - self.start) as f64 / span
    }

    /// A tick's label: the time of day to the second or minute, or the date for whole days.
    fn label(&self, at: u64) -> String {
        let (hours, minutes, seconds) = (at % DAY / 3600, at % 3600 / 60, at % 60);
        if self.tick_seconds >= DAY {
            Date(at / DAY).to_string()
        } else if self.tick_seconds >= 60 {
            format!("{hours:02}:{minutes:02}")
        } else {
            format!("{hours:02}:{minutes:02}:{seconds:02}")
        }
    }
}

/// The smallest of `rounds` that is at least `value`, or else the next multiple of `unit`.
fn round_up(rounds: &[u64], unit: u64, value: u64) -> u64 {
    rounds
        .iter()
        .copied()
        .find(|round| *round >= value)
        .unwrap_or_else(|| value.div_ceil(unit) * unit)
}

/// A count axis from 0 to `top`, with ticks every `step`.
struct CountAxis {
    /// The axis' top, a multiple of `step`, at least one step.
    top: u128,
    /// 1, 2 or 5 times a power of ten.
    step: u128,
}

impl CountAxis {
    /// The axis for counts up to `max`.
    fn new(max: u128) -> Self {
        let mut magnitude = 1_u128;
        let step = loop {
            let round = [1, 2, 5]
                .map(|digit| digit * magnitude)
                .into_iter()
                .find(|step| max.div_ceil(*step) <= MAX_Y_INTERVALS);
            if let Some(step) = round {
                break step;
            }
            magnitude *= 10;
        };
        CountAxis {
            top: max.div_ceil(step).max(1) * step,
            step,
        }
    }

    /// The ticks' counts, from 0 to `top`.
    fn ticks(&self) -> impl Iterator<Item = u128> + '_ {
        (0..=self.top / self.step).map(|n| n * self.step)
    }

    /// A tick's label: the count, in thousands (k), millions (M)... when the top is 10 000 or more.
    fn label(&self, count: u128) -> String {
        const UNITS: [(u128, &str); 6] = [
            (1_000_000_000_000_000_000, "E"),
            (1_000_000_000_000_000, "P"),
            (1_000_000_000_000, "T"),
            (1_000_000_000, "G"),
            (1_000_000, "M"),
            (1_000, "k"),
        ];
        let unit = UNITS
            .iter()
            .find(|(unit, _)| self.top >= 10_000 && self.top >= *unit);
        let Some(&(unit, suffix)) = unit else {
            return count.to_string();
        };
        if count == 0 {
            return "0".to_owned();
        }
        let (whole, part) = (count / unit, count % unit);
        if part == 0 {
            return format!("{whole}{suffix}");
        }
        let digits = unit.ilog10() as usize;
        let fraction = format!("{part:0digits$}");
        format!("{whole}.{}{suffix}", fraction.trim_end_matches('0'))
    }
}

/// A coordinate with at most two decimals, so that the same plot is always the same text.
pub(super) struct Num(pub(super) f64);

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = format!("{:.2}", self.0);
        let text = text.trim_end_matches('0').trim_end_matches('.');
        f.write_str(if text == "-0" { "0" } else { text })
    }
}

/// Text escaped for XML content and attributes; characters XML 1.0 forbids become U+FFFD.
pub(super) struct Escaped<'a>(pub(super) &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            match c {
                '&' => f.write_str("&amp;")?,
                '<' => f.write_str("&lt;")?,
                '>' => f.write_str("&gt;")?,
                '"' => f.write_str("&quot;")?,
                '\'' => f.write_str("&#39;")?,
                '\t' | '\n' | '\r' => f.write_char(c)?,
                '\0'..='\u{1f}' | '\u{fffe}' | '\u{ffff}' => f.write_char('\u{fffd}')?,
                _ => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// What a bar sums: "second", or "5 s", "15 min", "2 h".
struct Per(u64);

impl fmt::Display for Per {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1 => f.write_str("second"),
            seconds => Span(seconds).fmt(f),
        }
    }
}

/// A duration in the largest of h, min or s that divides it.
struct Span(u64);

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            seconds if seconds >= 3600 && seconds % 3600 == 0 => write!(f, "{} h", seconds / 3600),
            seconds if seconds >= 60 && seconds % 60 == 0 => write!(f, "{} min", seconds / 60),
            seconds => write!(f, "{seconds} s"),
        }
    }
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS`, UTC.
struct DateTime(u64);

impl fmt::Display for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = self.0;
        write!(
            f,
            "{} {:02}:{:02}:{:02}",
            Date(at / DAY),
            at % DAY / 3600,
            at % 3600 / 60,
            at % 60
        )
    }
}

/// Days since 1970-01-01 as `YYYY-MM-DD`, in the proleptic Gregorian calendar.
struct Date(u64);

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Howard Hinnant's `civil_from_days`: eras of 400 years, years from March.
        let days = u128::from(self.0) + 719_468;
        let (era, day_of_era) = (days / 146_097, days % 146_097);
        let year_of_era =
            (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
        let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
        let month_from_march = (5 * day_of_year + 2) / 153;
        let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
        let month = if month_from_march < 10 {
            month_from_march + 3
        } else {
            month_from_march - 9
        };
        let year = era * 400 + year_of_era + u128::from(month <= 2);
        write!(f, "{year:04}-{month:02}-{day:02}")
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::small_plot;
    use super::*;
    use resvg::usvg;

    /// The bytes' 64-bit FNV-1a hash: stable across Rust releases, unlike `DefaultHasher`.
    fn fnv1a(bytes: &[u8]) -> u64 {
        bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
        })
    }

    /// The text of every `<text>` in an SVG, in order, after checking it is well-formed XML.
    fn texts(svg: &str) -> Vec<String> {
        let document = usvg::roxmltree::Document::parse(svg).expect("well-formed XML");
        let texts = document
            .descendants()
            .filter(|node| node.has_tag_name("text"));
        texts
            .map(|node| node.text().unwrap_or("").to_owned())
            .collect()
    }

    /// The SVG's tree, parsed as the PNG's rasterizer does.
    fn parse(svg: &str) -> usvg::Tree {
        texts(svg);
        usvg::Tree::from_str(svg, &usvg::Options::default()).expect("valid SVG")
    }

    /// A panel of `seconds` with 3 admitted (2 of them delayed) and 1 denied each second.
    fn panel(title: &str, seconds: usize) -> Panel {
        Panel {
            title: title.to_owned(),
            admitted: vec![3; seconds],
            denied: vec![1; seconds],
            delayed: vec![2; seconds],
        }
    }

    /// The `d` of the path filled with `colour`.
    fn series_path<'a>(svg: &'a str, colour: &str) -> &'a str {
        let start = format!("<path fill=\"{colour}\" shape-rendering=\"crispEdges\" d=\"");
        let from = svg.find(&start).expect("the series is drawn") + start.len();
        &svg[from..from + svg[from..].find('"').unwrap()]
    }

    #[test]
    fn the_svg_parses_at_its_size_with_every_title_unescaped() {
        let plot = small_plot();
        let svg = draw(&plot, None);
        let tree = parse(&svg);
        let expected_height = HEADER + 3 * PANEL + FOOTER;
        assert_eq!(tree.size().width(), 900.0);
        assert_eq!(tree.size().height(), expected_height as f32);
        assert_eq!(height(3), expected_height);

        let found = texts(&svg);
        assert!(found.contains(&plot.title));
        for panel in &plot.panels {
            assert!(found.contains(&panel.title), "{} in {found:?}", panel.title);
        }
        assert!(svg.contains("login &lt;POST&gt; &amp; &quot;auth&quot;"));
        assert!(!svg.contains("<POST>"));
    }

    /// Outlines each character as a unit square, 1 px apart.
    struct Squares;

    impl Outlines for Squares {
        fn outline(&self, text: &str, _size: f64) -> (String, f64) {
            let squares = (0..text.chars().count()).map(|at| format!("M{at} 0h1v-1h-1Z"));
            (squares.collect(), text.chars().count() as f64)
        }
    }

    #[test]
    fn outlined_text_replaces_every_text_element_in_place() {
        let plot = small_plot();
        let plain = draw(&plot, None);
        let outlined = draw(&plot, Some(&Squares));
        parse(&outlined);
        assert!(texts(&outlined).is_empty());
        // Every <text> but the blank ones becomes a path; the rest is the same.
        let lines = |svg: &str, prefix: &str| svg.lines().filter(|l| l.starts_with(prefix)).count();
        assert_eq!(lines(&plain, "<text"), lines(&outlined, "<path transform="));
        assert_eq!(lines(&plain, "<rect"), lines(&outlined, "<rect"));
        // Anchored at the end: shifted left by the width, "60" is 2 px wide.
        assert!(outlined.contains(
            "<path transform=\"translate(60 90) translate(-2 0)\" fill=\"#222\" d=\"M0 0h1v-1h-1ZM1 0h1v-1h-1Z\"/>"
        ), "{outlined}");
        // Upwards and centred: "requests per second" is 19 px wide.
        assert!(outlined
            .contains("<path transform=\"translate(16 165) rotate(-90) translate(-9.5 0)\""));
    }

    #[test]
    fn escaping_covers_markup_and_characters_xml_forbids() {
        let escaped = Escaped("a<b>&\"c\"'d'\u{1}\u{ffff}\té").to_string();
        assert_eq!(
            escaped,
            "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;\u{fffd}\u{fffd}\té"
        );
        let plot = Plot {
            title: "\u{0}]]>&".to_owned(),
            start: 0,
            panels: vec![panel("\u{7}<!--", 10)],
        };
        parse(&draw(&plot, None));
    }

    #[test]
    fn an_hour_is_summed_into_bars_of_five_seconds() {
        let svg = draw(
            &Plot {
                title: "an hour".to_owned(),
                start: 1_700_000_000,
                panels: vec![panel("per-client", 3600)],
            },
            None,
        );
        parse(&svg);
        assert!(svg.contains(">requests per 5 s</text>"), "{svg}");
        // 720 bars of each series; at once is 3 - 2 = 1 a second, so 5 a bar; the top is 20.
        for (_, colour) in SERIES {
            assert_eq!(series_path(&svg, colour).matches('M').count(), 720);
        }
        assert!(svg.contains(">20</text>"));
        assert!(svg.contains("from 2023-11-14 22:13:20, 1 h</text>"));
    }

    #[test]
    fn bars_sum_whole_widths_and_the_last_holds_the_rest() {
        assert_eq!(sums(&[1, 2, 3, 4, 5, 6, 7], 3, 3), [6, 15, 7]);
        assert_eq!(sums(&[u64::MAX, 1], 2, 1), [u64::MAX]);
        assert_eq!(sums(&[], 5, 2), [0, 0]);
    }

    #[test]
    fn bar_widths_are_round_and_never_more_than_the_pixels() {
        let axis = |seconds| {
            let axis = TimeAxis::new(0, seconds);
            (axis.bar_seconds, axis.bars)
        };
        assert_eq!(axis(1), (1, 1));
        assert_eq!(axis(MAX_BARS), (1, MAX_BARS));
        assert_eq!(axis(MAX_BARS + 1), (2, MAX_BARS / 2 + 1));
        assert_eq!(axis(3600), (5, 720));
        assert_eq!(axis(3601), (5, 721));
        assert_eq!(axis(86_400), (120, 720));
        assert_eq!(axis(30 * 86_400), (3600, 720));
        assert_eq!(axis(60 * 86_400), (7200, 720));
        for seconds in [1, 799, 800, 801, 4000, 10_000, 1_000_000, 100_000_000] {
            let (width, bars) = axis(seconds);
            assert!(bars <= MAX_BARS && bars as u64 * width >= seconds as u64);
        }
    }

    #[test]
    fn time_ticks_fall_on_round_utc_times_within_the_run() {
        // 22:13:20 for a minute: every 10 s from 22:13:20.
        let axis = TimeAxis::new(1_700_000_000, 60);
        let ticks: Vec<_> = axis.ticks().map(|tick| axis.label(tick)).collect();
        assert_eq!(
            ticks,
            ["22:13:20", "22:13:30", "22:13:40", "22:13:50", "22:14:00", "22:14:10", "22:14:20"]
        );
        // An hour from 22:13:20: every 10 min, on the clock's tens.
        let axis = TimeAxis::new(1_700_000_000, 3600);
        let ticks: Vec<_> = axis.ticks().map(|tick| axis.label(tick)).collect();
        assert_eq!(
            ticks,
            ["22:20", "22:30", "22:40", "22:50", "23:00", "23:10"]
        );
        assert_eq!(axis.x(1_700_000_000), LEFT);
        assert_eq!(axis.x(1_700_003_600), RIGHT);
        // Weeks: dates at midnight.
        let axis = TimeAxis::new(0, 20 * 86_400);
        assert_eq!(axis.label(axis.ticks().nth(1).unwrap()), "1970-01-04");
        // The end of time draws no tick past it.
        let axis = TimeAxis::new(u64::MAX - 10, 5);
        assert!(axis.ticks().all(|tick| tick >= u64::MAX - 10));
    }

    #[test]
    fn count_axes_end_on_a_round_tick() {
        let axis = |max| {
            let axis = CountAxis::new(max);
            (axis.step, axis.top)
        };
        assert_eq!(axis(0), (1, 1));
        assert_eq!(axis(1), (1, 1));
        assert_eq!(axis(5), (1, 5));
        assert_eq!(axis(6), (2, 6));
        assert_eq!(axis(41), (10, 50));
        assert_eq!(axis(999), (200, 1000));
        assert_eq!(
            axis(u128::from(u64::MAX) * 3),
            (2 * 10_u128.pow(19), 6 * 10_u128.pow(19))
        );
    }

    #[test]
    fn large_counts_are_labelled_in_thousands_or_millions() {
        let labels = |max| {
            let axis = CountAxis::new(max);
            axis.ticks()
                .map(|tick| axis.label(tick))
                .collect::<Vec<_>>()
        };
        assert_eq!(labels(4000), ["0", "1000", "2000", "3000", "4000"]);
        assert_eq!(labels(9000), ["0", "2k", "4k", "6k", "8k", "10k"]);
        assert_eq!(labels(24_000), ["0", "5k", "10k", "15k", "20k", "25k"]);
        assert_eq!(
            labels(1_000_000),
            ["0", "0.2M", "0.4M", "0.6M", "0.8M", "1M"]
        );
        assert_eq!(labels(2_500_001), ["0", "1M", "2M", "3M"]);
    }

    #[test]
    fn dates_and_spans_read_as_a_person_writes_them() {
        assert_eq!(DateTime(0).to_string(), "1970-01-01 00:00:00");
        assert_eq!(DateTime(951_782_400).to_string(), "2000-02-29 00:00:00");
        assert_eq!(DateTime(1_700_000_000).to_string(), "2023-11-14 22:13:20");
        assert_eq!(DateTime(4_102_444_799).to_string(), "2099-12-31 23:59:59");
        assert_eq!(Per(1).to_string(), "second");
        assert_eq!(Per(5).to_string(), "5 s");
        assert_eq!(Per(90).to_string(), "90 s");
        assert_eq!(Per(900).to_string(), "15 min");
        assert_eq!(Per(7200).to_string(), "2 h");
        assert_eq!(Num(1.0).to_string(), "1");
        assert_eq!(Num(1.005).to_string(), "1");
        assert_eq!(Num(12.5).to_string(), "12.5");
        assert_eq!(Num(-0.001).to_string(), "0");
    }

    #[test]
    fn the_same_plot_is_the_same_bytes() {
        let plot = small_plot();
        let svg = draw(&plot, None);
        assert_eq!(svg, draw(&plot.clone(), None));
        // A change to the drawing shows here: check the new drawing, then update both numbers.
        assert_eq!(
            (svg.len(), fnv1a(svg.as_bytes())),
            (12558, 17605094546842517120),
            "{svg}"
        );
    }

    #[test]
    fn an_empty_plot_still_draws_its_axes() {
        let svg = draw(
            &Plot {
                title: String::new(),
                start: 0,
                panels: vec![],
            },
            None,
        );
        let tree = parse(&svg);
        assert_eq!(tree.size().height(), (HEADER + FOOTER) as f32);
        assert!(svg.contains("from 1970-01-01 00:00:00, 1 s</text>"));
    }
}
