//! `simulate --plot FILE`: per-second admitted, delayed and denied requests, one panel a limit.
//!
//! Each panel stacks, per bar, the requests admitted at once (green), those admitted after a
//! delay (amber) and the denied ones (red): a bar's height is every request of its seconds.
//! Each panel's y axis ends on a round count above its highest bar.
//! Runs longer than 800 seconds sum several seconds per bar, and the y axis says
//! how many ("requests per 5 s"). The time axis shows the UTC time of day at round times, and
//! its caption the date and time of the first second: a trace's times then read as in its logs.
//!
//! The SVG is written by hand and is the same bytes for the same plot; the HTML page holds it
//! inline with a table of totals; the PNG is the same drawing rasterized, its text outlined
//! with an embedded font.

mod html;
mod png;
mod svg;

use std::path::Path;

/// One panel of a plot: one limit (or one limit under one algorithm, when algorithms are compared).
#[derive(Debug, Clone)]
pub(crate) struct Panel {
    /// The panel's title, e.g. `per-client (token_bucket, 20/s, burst 40)`.
    pub(crate) title: String,
    /// Requests per second from the plot's start: [i] is second i.
    pub(crate) admitted: Vec<u64>,
    /// Requests denied, per second as `admitted`.
    pub(crate) denied: Vec<u64>,
    /// Requests admitted after a delay, per second as `admitted`: counted in `admitted` too.
    pub(crate) delayed: Vec<u64>,
}

/// A plot: panels stacked vertically, one shared time axis in seconds from `start`.
#[derive(Debug, Clone)]
pub(crate) struct Plot {
    /// The plot's title, above the panels.
    pub(crate) title: String,
    /// The first second, Unix seconds: the axis shows the UTC time of day at round times, and
    /// its caption the full date and time of this second.
    pub(crate) start: u64,
    /// The panels, top to bottom.
    pub(crate) panels: Vec<Panel>,
}

/// The file formats a plot is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PlotFormat {
    /// An SVG drawing.
    Svg,
    /// A PNG image of the same drawing, 900 px wide.
    Png,
    /// A page with the SVG inline and the totals of each panel.
    Html,
}

impl PlotFormat {
    /// The format named by a path's extension: `.svg`, `.png` or `.html`, in any case.
    pub(crate) fn from_path(path: &Path) -> Result<Self, String> {
        let extension = path.extension().and_then(|extension| extension.to_str());
        match extension.map(str::to_ascii_lowercase).as_deref() {
            Some("svg") => Ok(PlotFormat::Svg),
            Some("png") => Ok(PlotFormat::Png),
            Some("html") => Ok(PlotFormat::Html),
            _ => Err(format!(
                "cannot tell the plot's format from `{}`: its name must end in .svg, .png or .html",
                path.display()
            )),
        }
    }
}

/// The plot as bytes of the format.
pub(crate) fn render(plot: &Plot, format: PlotFormat) -> Result<Vec<u8>, String> {
    match format {
        PlotFormat::Svg => Ok(svg::draw(plot, None).into_bytes()),
        PlotFormat::Html => Ok(html::page(plot, &svg::draw(plot, None)).into_bytes()),
        PlotFormat::Png => png::image(plot),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three panels over a minute, with a title that needs escaping.
    pub(super) fn small_plot() -> Plot {
        let seconds = |f: fn(u64) -> u64| (0..60).map(f).collect::<Vec<_>>();
        Plot {
            title: "tollgate simulate rules.yaml".to_owned(),
            start: 1_700_000_000,
            panels: vec![
                Panel {
                    title: "per-client (token_bucket, 20/s, burst 40)".to_owned(),
                    admitted: seconds(|s| 20 + s % 7),
                    denied: seconds(|s| s.saturating_sub(30)),
                    delayed: seconds(|s| s % 5),
                },
                Panel {
                    title: "login <POST> & \"auth\"".to_owned(),
                    admitted: seconds(|s| s % 3),
                    denied: seconds(|s| s % 2),
                    delayed: vec![],
                },
                Panel {
                    title: "idle".to_owned(),
                    admitted: vec![],
                    denied: vec![],
                    delayed: vec![],
                },
            ],
        }
    }

    #[test]
    fn formats_come_from_the_extension_in_any_case() {
        let format = |path: &str| PlotFormat::from_path(Path::new(path));
        assert_eq!(format("out.svg"), Ok(PlotFormat::Svg));
        assert_eq!(format("dir.d/OUT.PNG"), Ok(PlotFormat::Png));
        assert_eq!(format("/tmp/report.Html"), Ok(PlotFormat::Html));
    }

    #[test]
    fn other_extensions_are_refused_with_the_ones_accepted() {
        for path in ["out.txt", "out", "svg", "out.svg.gz", ".png", "out.htm"] {
            let error = PlotFormat::from_path(Path::new(path)).unwrap_err();
            assert!(error.contains(path), "{error}");
            assert!(error.contains(".svg, .png or .html"), "{error}");
        }
    }

    #[test]
    fn every_format_renders() {
        let plot = small_plot();
        let svg = render(&plot, PlotFormat::Svg).unwrap();
        assert!(svg.starts_with(b"<svg "));
        let html = render(&plot, PlotFormat::Html).unwrap();
        assert!(html.starts_with(b"<!DOCTYPE html>"));
        let png = render(&plot, PlotFormat::Png).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    }
}
