//! The depth chart: a server-rendered SVG of the last hour (no script), built with `maud` so
//! every text in it is escaped.

use maud::{Markup, html};

use crate::sampler::{Point, WINDOW};
use crate::view::now_ms;

const WIDTH: u64 = 600;
const HEIGHT: u64 = 120;

/// The polyline points of `series` over the last hour ending at `now`, scaled to `top`.
fn polyline(points: &[Point], series: fn(&Point) -> Option<u64>, now: u64, top: u64) -> String {
    let window = u64::try_from(WINDOW.as_millis()).unwrap_or(1).max(1);
    let start = now.saturating_sub(window);
    points
        .iter()
        .filter_map(|p| series(p).map(|v| (p.at_ms, v)))
        .map(|(at, v)| {
            let x = at.saturating_sub(start).min(window) * WIDTH / window;
            let y = HEIGHT - v.min(top) * HEIGHT / top.max(1);
            format!("{x},{y}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The chart of `points` (ready and dead letters), or a line saying there is none yet.
pub(crate) fn chart(points: &[Point]) -> Markup {
    let now = now_ms();
    let top = points
        .iter()
        .flat_map(|p| [p.ready, p.dead_letter])
        .flatten()
        .max()
        .unwrap_or(0)
        .max(1);
    let ready = polyline(points, |p| p.ready, now, top);
    let dead = polyline(points, |p| p.dead_letter, now, top);
    html! {
        @if points.is_empty() {
            p.muted { "No sample yet: the chart fills as the server samples the queue." }
        } @else {
            svg.chart xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (HEIGHT + 20) }
                role="img" aria-label="depth over the last hour" {
                title { "Depth over the last hour (max " (top) ")" }
                line x1="0" y1=(HEIGHT) x2=(WIDTH) y2=(HEIGHT) class="axis" {}
                polyline class="ready" fill="none" points=(ready) {}
                polyline class="dead" fill="none" points=(dead) {}
                // The latest sample as a dot: one sample draws no line.
                @for (class, series) in [("ready", &ready), ("dead", &dead)] {
                    @if let Some((x, y)) = series.rsplit(' ').next().and_then(|p| p.split_once(',')) {
                        circle class=(class) cx=(x) cy=(y) r="3" {}
                    }
                }
                text x="0" y=(HEIGHT + 15) class="label" { "-60 min" }
                text x=(WIDTH - 30) y=(HEIGHT + 15) class="label" { "now" }
                text x="4" y="12" class="label" { "max " (top) }
            }
            p.legend { span.ready { "— ready" } " " span.dead { "— dead letters" } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_now_at_the_top_is_drawn_top_right() {
        let now = now_ms();
        let points = [Point {
            at_ms: now,
            ready: Some(10),
            in_flight: None,
            dead_letter: None,
            consumed_per_sec: None,
        }];
        let line = polyline(&points, |p| p.ready, now, 10);
        assert_eq!(line, format!("{WIDTH},0"));
        let half = polyline(&points, |p| p.ready, now, 20);
        assert_eq!(half, format!("{WIDTH},{}", HEIGHT / 2));
        // A figure the broker does not give draws nothing, not a zero.
        assert_eq!(polyline(&points, |p| p.dead_letter, now, 10), "");
    }

    #[test]
    fn one_sample_is_a_dot_per_series_the_broker_reports() {
        let points = [Point {
            at_ms: now_ms(),
            ready: Some(2),
            in_flight: None,
            dead_letter: None,
            consumed_per_sec: None,
        }];
        let svg = chart(&points).into_string();
        assert!(svg.contains("<circle class=\"ready\""), "{svg}");
        assert!(!svg.contains("<circle class=\"dead\""), "{svg}");
    }

    #[test]
    fn no_sample_says_so() {
        assert!(chart(&[]).into_string().contains("No sample yet"));
    }
}
