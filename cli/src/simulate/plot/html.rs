//! The plot as a self-contained page: the SVG inline and each panel's totals.

use super::svg::Escaped;
use super::{Panel, Plot};
use std::fmt::Write;

/// A page with `svg` (the plot drawn) and a table of each panel's totals.
pub(super) fn page(plot: &Plot, svg: &str) -> String {
    let mut html = String::new();
    // Writing to a String cannot fail.
    let _ = write!(
        html,
        "<!DOCTYPE html>\n\
         <html lang=\"en\">\n\
         <head>\n\
         <meta charset=\"utf-8\">\n\
         <title>{title}</title>\n\
         <style>\n\
         body {{ font-family: sans-serif; color: #222; margin: 16px; }}\n\
         table {{ border-collapse: collapse; margin-top: 12px; }}\n\
         th, td {{ padding: 4px 12px; border-bottom: 1px solid #ddd; text-align: left; }}\n\
         .count {{ text-align: right; font-variant-numeric: tabular-nums; }}\n\
         </style>\n\
         </head>\n\
         <body>\n\
         {svg}\
         <table>\n\
         <caption>Requests over the whole run</caption>\n\
         <thead><tr><th>limit</th><th class=\"count\">admitted</th>\
         <th class=\"count\">denied</th><th class=\"count\">delayed (of admitted)</th></tr></thead>\n\
         <tbody>\n",
        title = Escaped(&plot.title),
    );
    for panel in &plot.panels {
        let [admitted, denied, delayed] = totals(panel);
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td class=\"count\">{admitted}</td>\
             <td class=\"count\">{denied}</td><td class=\"count\">{delayed}</td></tr>",
            Escaped(&panel.title),
        );
    }
    html.push_str("</tbody>\n</table>\n</body>\n</html>\n");
    html
}

/// A panel's admitted, denied and delayed requests over the whole run.
fn totals(panel: &Panel) -> [u128; 3] {
    let total = |counts: &[u64]| counts.iter().map(|count| u128::from(*count)).sum();
    [
        total(&panel.admitted),
        total(&panel.denied),
        total(&panel.delayed),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::tests::small_plot;
    use super::super::{render, svg, PlotFormat};
    use super::*;

    #[test]
    fn the_page_holds_the_svg_and_each_panels_totals() {
        let plot = small_plot();
        let html = String::from_utf8(render(&plot, PlotFormat::Html).unwrap()).unwrap();
        assert!(html.contains(&svg::draw(&plot, None)));
        // admitted: 20 + s % 7 over 60 s; denied: s - 30 past 30 s; delayed: s % 5.
        let expected = [1200 + 8 * 21 + (1 + 2 + 3), 29 * 30 / 2, 12 * 10];
        assert_eq!(totals(&plot.panels[0]), expected);
        assert!(html.contains(
            "<tr><td>per-client (token_bucket, 20/s, burst 40)</td><td class=\"count\">1374</td>\
             <td class=\"count\">435</td><td class=\"count\">120</td></tr>"
        ), "{html}");
        assert!(html.contains("<td>login &lt;POST&gt; &amp; &quot;auth&quot;</td>"));
        assert!(html.contains("<td>idle</td><td class=\"count\">0</td>"));
    }

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        let html = page(&small_plot(), "<svg/>");
        for outside in ["src=", "href=", "<script", "<link", "url("] {
            assert!(!html.contains(outside), "{outside}");
        }
    }

    #[test]
    fn totals_do_not_overflow() {
        let panel = Panel {
            title: String::new(),
            admitted: vec![u64::MAX; 3],
            denied: vec![],
            delayed: vec![1],
        };
        assert_eq!(totals(&panel), [3 * u128::from(u64::MAX), 0, 1]);
    }
}
