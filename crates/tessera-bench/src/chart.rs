//! The SVG bar chart of the table's ratios (docs/benchmarks.svg): one bar per row, its
//! length the ratio (peer / tessera, linear), a line at 1x (parity) and a mark at each
//! row's goal; green when the goal is met, amber when faster than the peer but short of
//! the goal, red when slower. Plain SVG text, no dependency.

/// One bar: label, ratio (None: not measured), goal.
pub type Bar = (String, Option<f64>, f64);

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The chart.
pub fn svg(title: &str, bars: &[Bar]) -> String {
    let (label_w, plot_w, row_h, top) = (400.0, 460.0, 26.0, 44.0);
    let max = bars
        .iter()
        .flat_map(|(_, r, g)| [r.unwrap_or(0.0), *g])
        .fold(2.0f64, f64::max)
        .min(10.0)
        * 1.1;
    let x = |v: f64| label_w + plot_w * (v.min(max) / max);
    let h = top + row_h * bars.len() as f64 + 36.0;
    let w = label_w + plot_w + 70.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"22\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
        esc(title)
    );
    for (i, (label, ratio, goal)) in bars.iter().enumerate() {
        let y = top + row_h * i as f64;
        s += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
            label_w - 8.0,
            y + 16.0,
            esc(label)
        );
        match ratio {
            Some(r) => {
                let color = if *r >= *goal {
                    "#2e9d4f"
                } else if *r >= 1.0 {
                    "#e0a020"
                } else {
                    "#d04040"
                };
                s += &format!(
                    "<rect x=\"{label_w}\" y=\"{}\" width=\"{:.1}\" height=\"{}\" fill=\"{color}\"/>\n\
                     <text x=\"{:.1}\" y=\"{}\">{r:.2}x</text>\n",
                    y + 4.0,
                    x(*r) - label_w,
                    row_h - 8.0,
                    x(*r) + 4.0,
                    y + 16.0
                );
            }
            None => {
                s += &format!(
                    "<text x=\"{}\" y=\"{}\" fill=\"#888\">not measured</text>\n",
                    label_w + 4.0,
                    y + 16.0
                );
            }
        }
        // The goal: a short dark tick across the bar's lane.
        s += &format!(
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#222\" stroke-width=\"2\"/>\n",
            x(*goal),
            y + 1.0,
            y + row_h - 1.0
        );
    }
    let bottom = top + row_h * bars.len() as f64;
    s += &format!(
        "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#555\" stroke-dasharray=\"4 3\"/>\n\
         <text x=\"{0:.1}\" y=\"{3}\" text-anchor=\"middle\">1x (parity)</text>\n\
         <text x=\"{4}\" y=\"{5}\" fill=\"#444\">bar: peer time / tessera time (above 1: tessera faster); tick: the goal</text>\n",
        x(1.0),
        top - 4.0,
        bottom,
        bottom + 14.0,
        10.0,
        bottom + 30.0
    );
    s += "</svg>\n";
    s
}
