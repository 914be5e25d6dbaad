//! One SVG per backend: first-token time against prompt length, and decode
//! speed against context length; measured points as dots, the fit as a line
//! (dashed where it extrapolates).

use std::fmt::Write;

use crate::cli::probe::model::{Fitted, Point};

const W: f64 = 360.0;
const H: f64 = 240.0;
const PAD: f64 = 48.0;

struct Panel<'a> {
    x0: f64,
    title: &'a str,
    x_label: &'a str,
    y_label: &'a str,
    x_max: f64,
    y_max: f64,
}

impl Panel<'_> {
    fn x(&self, v: f64) -> f64 {
        self.x0 + PAD + v / self.x_max * (W - 1.5 * PAD)
    }

    fn y(&self, v: f64) -> f64 {
        H - PAD + 8.0 - v / self.y_max * (H - 1.7 * PAD)
    }

    fn axes(&self, out: &mut String) {
        let (left, bottom) = (self.x(0.0), self.y(0.0));
        let _ = write!(
            out,
            r##"<text x="{}" y="18" font-weight="bold">{}</text><line x1="{left}" y1="{bottom}" x2="{}" y2="{bottom}" stroke="#333"/><line x1="{left}" y1="{bottom}" x2="{left}" y2="{}" stroke="#333"/>"##,
            self.x0 + PAD,
            self.title,
            self.x(self.x_max),
            self.y(self.y_max),
        );
        for i in 0..=4 {
            let f = f64::from(i) / 4.0;
            let (xv, yv) = (self.x_max * f, self.y_max * f);
            let _ = write!(
                out,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="10">{}</text>"##,
                self.x(xv),
                bottom + 14.0,
                short(xv),
                left - 4.0,
                self.y(yv) + 3.0,
                short(yv),
            );
        }
        let _ = write!(
            out,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="11">{}</text><text x="{:.1}" y="{:.1}" font-size="11">{}</text>"##,
            self.x(self.x_max / 2.0),
            H - 6.0,
            self.x_label,
            self.x0 + 4.0,
            self.y(self.y_max) - 8.0,
            self.y_label,
        );
    }

    fn curve(&self, out: &mut String, f: impl Fn(f64) -> Option<f64>, measured_to: f64) {
        for (dashed, from, to) in [(false, 0.0, measured_to), (true, measured_to, self.x_max)] {
            let points: Vec<String> = (0..=40)
                .filter_map(|i| {
                    let xv = from + (to - from) * f64::from(i) / 40.0;
                    let yv = f(xv)?.clamp(0.0, self.y_max);
                    Some(format!("{:.1},{:.1}", self.x(xv), self.y(yv)))
                })
                .collect();
            let dash = if dashed {
                r#" stroke-dasharray="4 3""#
            } else {
                ""
            };
            let _ = write!(
                out,
                r##"<polyline points="{}" fill="none" stroke="#1f77b4"{dash}/>"##,
                points.join(" ")
            );
        }
    }

    fn dots(&self, out: &mut String, dots: impl Iterator<Item = (f64, f64)>) {
        for (xv, yv) in dots {
            let _ = write!(
                out,
                r##"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="#d62728"/>"##,
                self.x(xv),
                self.y(yv)
            );
        }
    }
}

fn short(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The plot for one backend, up to `context` tokens.
pub fn plot(name: &str, points: &[Point], fit: &Fitted, context: u32) -> String {
    let x_max = f64::from(context);
    let measured_to = points
        .iter()
        .map(|p| f64::from(p.prompt_tokens))
        .fold(0.0, f64::max);
    let ttft_max = fit.prefill.cold_ms(f64::from(context)).max(1.0) * 1.1;
    let decode_max = points
        .iter()
        .filter_map(|p| p.decode_tokens_per_s)
        .chain(fit.decode_at(0))
        .fold(1.0, f64::max)
        * 1.15;
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{H}" font-family="sans-serif" font-size="12"><title>{name}</title><rect width="100%" height="100%" fill="white"/>"#,
        2.0 * W
    );
    let ttft = Panel {
        x0: 0.0,
        title: &format!("{name}: time to first token"),
        x_label: "prompt tokens (uncached)",
        y_label: "ms",
        x_max,
        y_max: ttft_max,
    };
    ttft.axes(&mut out);
    ttft.curve(&mut out, |x| Some(fit.prefill.cold_ms(x)), measured_to);
    ttft.dots(
        &mut out,
        points
            .iter()
            .map(|p| (f64::from(p.prompt_tokens), p.ttft_ms)),
    );
    let decode = Panel {
        x0: W,
        title: &format!("{name}: decode speed"),
        x_label: "context tokens",
        y_label: "tok/s",
        x_max,
        y_max: decode_max,
    };
    decode.axes(&mut out);
    decode.curve(&mut out, |x| fit.decode_at(x as u32), measured_to);
    decode.dots(
        &mut out,
        points
            .iter()
            .filter_map(|p| Some((f64::from(p.prompt_tokens), p.decode_tokens_per_s?))),
    );
    out.push_str("</svg>\n");
    out
}
