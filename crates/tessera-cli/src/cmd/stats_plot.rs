//! `tessera stats --plot OUT.svg`: each tensor's histogram (40 bins over its finite
//! range, numpy's `histogram` rule, [`tessera::values::histogram`]) drawn as a small
//! panel of bars in one SVG file. Hand-written SVG: a grid of panels, each a title, the
//! bars as `<rect>`s (heights relative to the panel's largest bin) and the range under
//! it; no plotting crate is needed for a few rectangles. Text from the file is escaped
//! for XML. Only SVG is written (a PNG would need a rasteriser).

use std::fmt::Write as _;

/// Bins per histogram.
pub const BINS: usize = 40;

/// One tensor's histogram: its name, the bin edges and the counts.
pub struct Panel {
    /// Tensor name (as in the file; escaped here).
    pub name: String,
    /// `BINS + 1` edges.
    pub edges: Vec<f64>,
    /// `BINS` counts.
    pub counts: Vec<u64>,
}

const W: f64 = 260.0;
const H: f64 = 120.0;
const COLS: usize = 3;

fn xml(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            c if c.is_control() => o.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => o.push(c),
        }
    }
    o
}

fn short(x: f64) -> String {
    if x != 0.0 && !(1e-3..1e4).contains(&x.abs()) {
        format!("{x:.2e}")
    } else {
        format!("{x:.3}")
    }
}

/// The SVG document for `panels`.
pub fn svg(title: &str, panels: &[Panel]) -> String {
    let rows = panels.len().div_ceil(COLS).max(1);
    let (width, height) = (W * COLS as f64, 30.0 + H * rows as f64);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="10">"#
    );
    let _ = writeln!(
        s,
        r##"<rect width="100%" height="100%" fill="#fff"/><text x="8" y="18" font-size="13">{}</text>"##,
        xml(title)
    );
    for (i, p) in panels.iter().enumerate() {
        let (x0, y0) = (W * (i % COLS) as f64, 30.0 + H * (i / COLS) as f64);
        let (px, py, pw, ph) = (x0 + 10.0, y0 + 16.0, W - 20.0, H - 40.0);
        let _ = writeln!(
            s,
            r#"<g><text x="{px}" y="{}">{}</text>"#,
            y0 + 10.0,
            xml(&p.name)
        );
        let top = p.counts.iter().copied().max().unwrap_or(0).max(1) as f64;
        let bw = pw / p.counts.len().max(1) as f64;
        for (k, &c) in p.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let h = (c as f64 / top * ph).max(0.5);
            let _ = writeln!(
                s,
                r##"<rect x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="#4a7bb7"><title>{c}</title></rect>"##,
                px + k as f64 * bw,
                py + ph - h,
                (bw - 0.5).max(0.5),
                h
            );
        }
        let _ = writeln!(
            s,
            r##"<line x1="{px}" y1="{0}" x2="{1}" y2="{0}" stroke="#333"/><text x="{px}" y="{2}">{3}</text><text x="{1}" y="{2}" text-anchor="end">{4}</text></g>"##,
            py + ph,
            px + pw,
            py + ph + 12.0,
            xml(&short(p.edges.first().copied().unwrap_or(0.0))),
            xml(&short(p.edges.last().copied().unwrap_or(0.0)))
        );
    }
    s.push_str("</svg>\n");
    s
}
