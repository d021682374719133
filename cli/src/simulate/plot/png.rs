//! The plot rasterized to PNG: its SVG with the text as outlines of an embedded font, so that
//! the image is the same on every machine, fonts installed or not.

use super::svg::{self, Num, Outlines};
use super::Plot;
use resvg::tiny_skia::{Pixmap, Transform};
use resvg::usvg;
use std::fmt::Write;
use ttf_parser::{Face, GlyphId, OutlineBuilder};

/// Open Sans 1.10 (Apache-2.0, `assets/OpenSans-LICENSE.txt`), from Debian's fonts-open-sans:
/// the only font the PNG's text uses. 212 KiB, where DejaVu Sans would be 740.
static FONT: &[u8] = include_bytes!("../../../assets/OpenSans-Regular.ttf");

/// The plot as a PNG image, as large as its SVG.
pub(super) fn image(plot: &Plot) -> Result<Vec<u8>, String> {
    let font = Font::embedded()?;
    rasterize(&svg::draw(plot, Some(&font)))
}

/// An SVG without text as a PNG image of its size.
fn rasterize(svg: &str) -> Result<Vec<u8>, String> {
    let tree = usvg::Tree::from_str(svg, &usvg::Options::default())
        .map_err(|error| format!("cannot rasterize the plot: {error}"))?;
    let size = tree.size().to_int_size();
    let mut pixmap = Pixmap::new(size.width(), size.height()).ok_or_else(|| {
        format!(
            "cannot rasterize the plot: {} x {} px is too large",
            size.width(),
            size.height()
        )
    })?;
    resvg::render(&tree, Transform::identity(), &mut pixmap.as_mut());
    pixmap
        .encode_png()
        .map_err(|error| format!("cannot encode the plot as PNG: {error}"))
}

/// A font whose glyphs stand in for text.
struct Font<'a> {
    face: Face<'a>,
}

impl Font<'static> {
    /// The embedded font.
    fn embedded() -> Result<Self, String> {
        let face = Face::parse(FONT, 0)
            .map_err(|error| format!("cannot read the plot's embedded font: {error}"))?;
        Ok(Font { face })
    }
}

impl Font<'_> {
    /// The kerning between two glyphs, in font units: from the `kern` table, if any.
    fn kerning(&self, left: GlyphId, right: GlyphId) -> i16 {
        let Some(table) = self.face.tables().kern else {
            return 0;
        };
        table
            .subtables
            .into_iter()
            .filter(|subtable| subtable.horizontal && !subtable.variable)
            .find_map(|subtable| subtable.glyphs_kerning(left, right))
            .unwrap_or(0)
    }
}

impl Outlines for Font<'_> {
    fn outline(&self, text: &str, size: f64) -> (String, f64) {
        let mut pen = Pen {
            path: String::new(),
            scale: size / f64::from(self.face.units_per_em()),
            x: 0.0,
        };
        let mut previous = None;
        for c in text.chars() {
            // Characters the font lacks show as its "missing" box, glyph 0.
            let glyph = self.face.glyph_index(c).unwrap_or(GlyphId(0));
            if let Some(previous) = previous {
                pen.x += f64::from(self.kerning(previous, glyph)) * pen.scale;
            }
            self.face.outline_glyph(glyph, &mut pen);
            let advance = self.face.glyph_hor_advance(glyph).unwrap_or(0);
            pen.x += f64::from(advance) * pen.scale;
            previous = Some(glyph);
        }
        (pen.path, pen.x)
    }
}

/// Writes glyph outlines as SVG path data, scaled to px, y down, from `x` on.
struct Pen {
    /// The path data so far.
    path: String,
    /// Px per font unit.
    scale: f64,
    /// Where the current glyph starts, px.
    x: f64,
}

impl Pen {
    /// A command and its points, in font units.
    fn command(&mut self, command: char, points: &[(f32, f32)]) {
        self.path.push(command);
        for (index, (x, y)) in points.iter().enumerate() {
            let x = self.x + f64::from(*x) * self.scale;
            let y = -f64::from(*y) * self.scale;
            let separator = if index == 0 { "" } else { " " };
            // Writing to a String cannot fail.
            let _ = write!(self.path, "{separator}{} {}", Num(x), Num(y));
        }
    }
}

impl OutlineBuilder for Pen {
    fn move_to(&mut self, x: f32, y: f32) {
        self.command('M', &[(x, y)]);
    }

    fn line_to(&mut self, x: f32, y: f32) {
        self.command('L', &[(x, y)]);
    }

    fn quad_to(&mut self, x1: f32, y1: f32, x: f32, y: f32) {
        self.command('Q', &[(x1, y1), (x, y)]);
    }

    fn curve_to(&mut self, x1: f32, y1: f32, x2: f32, y2: f32, x: f32, y: f32) {
        self.command('C', &[(x1, y1), (x2, y2), (x, y)]);
    }

    fn close(&mut self) {
        self.path.push('Z');
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::small_plot;
    use super::super::{render, Panel, PlotFormat};
    use super::*;

    /// Width and height from a PNG's IHDR chunk, which follows the 8-byte signature.
    fn png_size(png: &[u8]) -> (u32, u32) {
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&png[12..16], b"IHDR");
        let word = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
        (word(16), word(20))
    }

    #[test]
    fn the_png_is_as_large_as_the_drawing_and_the_same_each_time() {
        let plot = small_plot();
        let png = render(&plot, PlotFormat::Png).unwrap();
        assert_eq!(png_size(&png), (svg::WIDTH, svg::height(3)));
        assert_eq!(png, render(&plot, PlotFormat::Png).unwrap());
    }

    #[test]
    fn text_is_drawn_with_the_embedded_font() {
        let font = Font::embedded().unwrap();
        let (path, width) = font.outline("tollgate", 12.0);
        // 8 glyphs of about half an em.
        assert!((35.0..60.0).contains(&width), "{width}");
        assert!(path.starts_with('M') && path.ends_with('Z'), "{path}");
        assert_eq!(font.outline(" ", 12.0).0, "");

        // The title's pixels: dark where the glyphs are, on white.
        let plot = super::super::Plot {
            title: "WWWWWWWW".to_owned(),
            start: 0,
            panels: vec![],
        };
        let png = Pixmap::decode_png(&image(&plot).unwrap()).unwrap();
        let title_row = (60..140).map(|x| png.pixel(x, 18).unwrap());
        assert!(
            title_row.clone().any(|pixel| pixel.red() < 100),
            "no text drawn"
        );
        assert_eq!(png.pixel(450, 18).unwrap().red(), 255);
    }

    #[test]
    fn kerning_pulls_pairs_together() {
        let font = Font::embedded().unwrap();
        let apart = font.outline("A", 100.0).1 + font.outline("V", 100.0).1;
        assert!(font.outline("AV", 100.0).1 < apart);
    }

    #[test]
    fn a_broken_drawing_is_an_error_not_a_panic() {
        let error = rasterize("<svg").unwrap_err();
        assert!(error.starts_with("cannot rasterize the plot: "), "{error}");
    }

    /// `cargo test -p tollgate-cli write_examples -- --ignored` writes /tmp/plot-example.svg,
    /// .png and .html, and /tmp/plot-example-hour.png: an hour of bursts.
    #[test]
    #[ignore = "writes files, to look at"]
    fn write_examples() {
        let plot = small_plot();
        for (format, path) in [
            (PlotFormat::Svg, "/tmp/plot-example.svg"),
            (PlotFormat::Png, "/tmp/plot-example.png"),
            (PlotFormat::Html, "/tmp/plot-example.html"),
        ] {
            std::fs::write(path, render(&plot, format).unwrap()).unwrap();
        }
        let offered = |second: u64| 30 + 25 * u64::from(second % 600 < 120) + second % 13;
        let hour = |limit: u64, queue: u64| Panel {
            title: format!("per-client (gcra, {limit}/s, queue {queue})"),
            admitted: (0..3600).map(|s| offered(s).min(limit + queue)).collect(),
            denied: (0..3600)
                .map(|s| offered(s).saturating_sub(limit + queue))
                .collect(),
            delayed: (0..3600)
                .map(|s| offered(s).min(limit + queue).saturating_sub(limit))
                .collect(),
        };
        let plot = super::super::Plot {
            title: "an hour of bursts".to_owned(),
            start: 1_700_000_000,
            panels: vec![hour(40, 5), hour(35, 20)],
        };
        let png = render(&plot, PlotFormat::Png).unwrap();
        std::fs::write("/tmp/plot-example-hour.png", png).unwrap();
    }
}
