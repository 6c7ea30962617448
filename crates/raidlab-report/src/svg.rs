//! One bar chart as inline SVG, drawn in Rust so that the page needs no script and
//! no network: horizontal bars, one per (test, target), clustered by test inside
//! each group, groups top to bottom in first-seen order (the articles' graphs
//! turned on their side, so long labels stay readable), a value at the end of
//! every bar rounded as the tool shows it and a tooltip with the exact number.
//! The axis starts at zero and ends just past the chart's largest bar: the
//! model gives each kind of test its own chart, so each gets its own scale.
//!
//! ```text
//!              0        500       1000
//! SEQ1M Q8T1   |         |         |
//!   read       ████████  564.95
//!              ████████████████  1116.34
//!   write      ...
//! ```

use crate::html::{esc, exact, short, shown_in};
use crate::model::{Chart, Model};
use std::fmt::Write as _;

/// Colour of target `i` (global first-seen order): the Okabe-Ito colour-blind-safe
/// set first, then more distinct colours; it wraps after 12 targets (the legend and
/// the tables still tell them apart).
pub const PALETTE: [&str; 12] = [
    "#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#6a3d9a", "#8c6d31",
    "#999999", "#b2182b", "#1b7837", "#f0e442",
];

pub fn colour(target: usize) -> &'static str {
    PALETTE[target % PALETTE.len()]
}

const BAR_H: f64 = 15.0;
const BAR_GAP: f64 = 2.0;
const TEST_GAP: f64 = 7.0;
const GROUP_HEAD: f64 = 18.0;
const GROUP_GAP: f64 = 8.0;
const TOP: f64 = 26.0;
const PAD: f64 = 8.0;
const PLOT_W: f64 = 520.0;
/// Rough width of one character at the chart's 12px font; used only to size the
/// label columns, so a wrong guess costs white space, not overlap of bars.
const CHAR_W: f64 = 7.0;

/// Longest group or test label drawn in full; longer ones end in `…` in the chart
/// (the tooltip and the table under it give them whole), so they never run into
/// the bars.
const MAX_LABEL: usize = 40;

fn clip(s: &str) -> String {
    if s.chars().count() <= MAX_LABEL {
        s.to_string()
    } else {
        let mut c: String = s.chars().take(MAX_LABEL - 1).collect();
        c.push('…');
        c
    }
}

fn text_w(s: &str) -> f64 {
    s.chars().count() as f64 * CHAR_W
}

/// A step of 1, 2 or 5 times a power of ten giving about five ticks over `range`.
fn nice_step(range: f64) -> f64 {
    let raw = range / 5.0;
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let f = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    f * p
}

/// `suite`: the suite the chart is of, which decides how its values are
/// rounded ([`shown_in`]).
pub fn chart(model: &Model, suite: &str, chart: &Chart, title: &str) -> String {
    let values: Vec<f64> = chart
        .groups
        .iter()
        .flat_map(|g| &g.tests)
        .flat_map(|t| &t.bars)
        .map(|b| b.1)
        .filter(|v| v.is_finite())
        .collect();
    let mut lo = values.iter().copied().fold(0f64, f64::min);
    let mut hi = values.iter().copied().fold(0f64, f64::max);
    if hi - lo <= 0.0 {
        hi = 1.0;
    }
    let step = nice_step(hi - lo);
    hi = (hi / step).ceil() * step;
    lo = (lo / step).floor() * step;

    let label_w = chart
        .groups
        .iter()
        .map(|g| {
            g.tests
                .iter()
                .map(|t| text_w(&clip(&t.name)) + 12.0)
                .fold(text_w(&clip(&g.name)), f64::max)
        })
        .fold(60.0, f64::max)
        + PAD;
    let value_w = values
        .iter()
        .map(|v| text_w(&shown_in(*v, suite, &chart.metric)))
        .fold(30.0, f64::max)
        + 10.0;
    let x0 = PAD + label_w;
    let x = |v: f64| x0 + (v - lo) / (hi - lo) * PLOT_W;
    let width = x0 + PLOT_W + value_w + PAD;
    let height = TOP
        + chart
            .groups
            .iter()
            .map(|g| {
                GROUP_HEAD
                    + GROUP_GAP
                    + g.tests
                        .iter()
                        .map(|t| t.bars.len() as f64 * (BAR_H + BAR_GAP) + TEST_GAP)
                        .sum::<f64>()
            })
            .sum::<f64>();

    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" role="img" aria-label="{}">"#,
        esc(title)
    );
    // Grid and axis labels first, so bars paint over them.
    let mut t = lo;
    let mut ticks = 0;
    while t <= hi + step * 1e-9 && ticks < 50 {
        let tx = x(t);
        let _ = write!(
            s,
            r#"<line class="grid{}" x1="{tx:.1}" y1="{:.1}" x2="{tx:.1}" y2="{:.1}"/><text class="tick" x="{tx:.1}" y="{:.1}">{}</text>"#,
            if t == 0.0 { " zero" } else { "" },
            TOP - 6.0,
            height,
            TOP - 10.0,
            esc(&short(t))
        );
        t = lo + step * (ticks + 1) as f64;
        ticks += 1;
    }
    let mut y = TOP;
    for g in &chart.groups {
        let _ = write!(
            s,
            r#"<text class="group" x="{PAD}" y="{:.1}">{}</text>"#,
            y + GROUP_HEAD - 5.0,
            esc(&clip(&g.name))
        );
        y += GROUP_HEAD;
        for test in &g.tests {
            let cluster = test.bars.len() as f64 * (BAR_H + BAR_GAP);
            let _ = write!(
                s,
                r#"<text class="test" x="{:.1}" y="{:.1}">{}</text>"#,
                PAD + 12.0,
                y + cluster / 2.0 + 4.0,
                esc(&clip(&test.name))
            );
            for &(target, v) in &test.bars {
                let v_draw = if v.is_finite() { v } else { 0.0 };
                let (a, b) = (x(v_draw.min(0.0)), x(v_draw.max(0.0)));
                let target_name = model.targets.get(target).map_or("", String::as_str);
                let _ = write!(
                    s,
                    r#"<rect class="bar" x="{a:.1}" y="{y:.1}" width="{:.1}" height="{BAR_H}" fill="{}"><title>{} · {} · {}: {} {}</title></rect>"#,
                    (b - a).max(0.0),
                    colour(target),
                    esc(&g.name),
                    esc(&test.name),
                    esc(target_name),
                    esc(&exact(v)),
                    esc(&chart.metric)
                );
                let (vx, anchor) = if v_draw < 0.0 {
                    (a - 4.0, "end")
                } else {
                    (b + 4.0, "start")
                };
                let _ = write!(
                    s,
                    r#"<text class="v" x="{vx:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
                    y + BAR_H - 3.5,
                    esc(&shown_in(v, suite, &chart.metric))
                );
                y += BAR_H + BAR_GAP;
            }
            y += TEST_GAP;
        }
        y += GROUP_GAP;
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(100.0), 20.0);
        assert_eq!(nice_step(3406.11), 1000.0);
        assert_eq!(nice_step(7.0), 2.0);
        assert!((nice_step(0.3) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn long_labels_are_clipped_on_a_char_boundary() {
        assert_eq!(clip("read"), "read");
        let long = "µ".repeat(50);
        let c = clip(&long);
        assert_eq!(c.chars().count(), MAX_LABEL);
        assert!(c.ends_with('…'));
    }

    #[test]
    fn palette_colours_are_distinct() {
        let mut p = PALETTE.to_vec();
        p.sort_unstable();
        p.dedup();
        assert_eq!(p.len(), PALETTE.len());
        assert_eq!(colour(12), colour(0));
    }
}
