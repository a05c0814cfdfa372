//! A task's tool calls as a server-rendered SVG timeline: a row per call, in the order they
//! were made, each a bar from the time its `tool_call` entry was written to the time its
//! `tool_result` was, on one time axis for the task, coloured by whether the call went through
//! and linked to its entry. A bar too short to see is drawn [`MIN_BAR`] wide; its title still
//! says its real duration. No script: the list below the drawing says the same in words.

use maud::{Markup, html};

use super::util::clip;

const LABEL_W: f64 = 180.0;
const PLOT_W: f64 = 600.0;
const ROW_H: f64 = 26.0;
const BAR_H: f64 = 16.0;
const PAD: f64 = 16.0;
const AXIS_H: f64 = 30.0;
/// The narrowest bar drawn, in pixels.
const MIN_BAR: f64 = 3.0;

/// One tool call as the timeline draws it.
pub(super) struct Call {
    /// The seq of its `tool_call` entry.
    pub(super) seq: u64,
    pub(super) tool: String,
    /// When its call and its result were written (the start when no result was).
    pub(super) start: f64,
    pub(super) end: f64,
    /// Whether it went through; `None` when no result was witnessed.
    pub(super) ok: Option<bool>,
}

/// A duration as a person reads it.
fn seconds(s: f64) -> String {
    if s >= 10.0 {
        format!("{s:.0} s")
    } else if s >= 1.0 {
        format!("{s:.1} s")
    } else {
        format!("{:.0} ms", s * 1000.0)
    }
}

/// Where each call's bar starts and how wide it is, in pixels from the plot's left edge.
fn bars(calls: &[Call]) -> Vec<(f64, f64)> {
    let t0 = calls.iter().map(|c| c.start).fold(f64::INFINITY, f64::min);
    let t1 = calls
        .iter()
        .map(|c| c.end)
        .fold(f64::NEG_INFINITY, f64::max);
    let span = t1 - t0;
    calls
        .iter()
        .map(|c| {
            if span.is_nan() || span <= 0.0 {
                return (0.0, MIN_BAR);
            }
            let x = (c.start - t0) / span * PLOT_W;
            let w = ((c.end - c.start) / span * PLOT_W).max(MIN_BAR);
            (x.min(PLOT_W - MIN_BAR), w)
        })
        .collect()
}

/// The timeline of task `task`'s `calls` (in the order they were made).
pub(super) fn graph(task: &str, calls: &[Call]) -> Markup {
    let t0 = calls.iter().map(|c| c.start).fold(f64::INFINITY, f64::min);
    let t1 = calls
        .iter()
        .map(|c| c.end)
        .fold(f64::NEG_INFINITY, f64::max);
    let span = (t1 - t0).max(0.0);
    let width = 2.0 * PAD + LABEL_W + PLOT_W;
    let height = 2.0 * PAD + AXIS_H + calls.len() as f64 * ROW_H;
    let left = PAD + LABEL_W;
    let axis_y = PAD + calls.len() as f64 * ROW_H + 6.0;
    let id = format!(
        "calls-title-{}",
        task.bytes().map(|b| format!("{b:02x}")).collect::<String>()
    );
    let label = format!(
        "The tool calls of task {task}: {} calls over {}, each a bar from its call to its result",
        calls.len(),
        seconds(span)
    );
    html! {
        figure.calls {
            svg xmlns="http://www.w3.org/2000/svg" role="group" aria-labelledby=(id)
                width=(width) height=(height) viewBox=(format!("0 0 {width} {height}")) {
                title id=(id) { (label) }
                @for (n, (c, (x, w))) in calls.iter().zip(bars(calls)).enumerate() {
                    @let y = PAD + n as f64 * ROW_H;
                    @let state = match c.ok { Some(true) => "ok", Some(false) => "bad", None => "wait" };
                    @let said = match c.ok { Some(true) => "went through", Some(false) => "failed", None => "no result witnessed" };
                    text.call-label x=(PAD) y=(format!("{:.1}", y + BAR_H - 3.0)) { (n + 1) ". " (clip(&c.tool, 20)) }
                    a href=(format!("/view/entry/{}", c.seq)) {
                        title { "Call " (n + 1) ", " (c.tool) ": " (seconds(c.end - c.start)) ", " (said) " (entry " (c.seq) ")" }
                        rect class=(format!("bar {state}")) x=(format!("{:.2}", left + x)) y=(format!("{y:.1}"))
                            width=(format!("{w:.2}")) height=(BAR_H) rx="3" {}
                    }
                }
                line.axis x1=(left) y1=(axis_y) x2=(left + PLOT_W) y2=(axis_y) {}
                @for k in 0..=4u32 {
                    @let x = left + PLOT_W * f64::from(k) / 4.0;
                    line.tick x1=(format!("{x:.1}")) y1=(axis_y) x2=(format!("{x:.1}")) y2=(axis_y + 5.0) {}
                    text.tick-label x=(format!("{x:.1}")) y=(axis_y + 18.0) text-anchor=(match k { 0 => "start", 4 => "end", _ => "middle" }) {
                        "+" (seconds(span * f64::from(k) / 4.0))
                    }
                }
            }
            figcaption { (label) ". The list below says the same." }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(start: f64, end: f64) -> Call {
        Call {
            seq: 0,
            tool: "read_file".into(),
            start,
            end,
            ok: Some(true),
        }
    }

    #[test]
    fn bars_are_placed_on_one_axis_and_sized_by_duration() {
        let b = bars(&[call(10.0, 11.0), call(12.0, 14.0), call(15.0, 19.0)]);
        let unit = PLOT_W / 9.0;
        let want = [(0.0, 1.0), (2.0, 2.0), (5.0, 4.0)];
        for ((x, w), (wx, ww)) in b.iter().zip(want) {
            assert!(
                (x - wx * unit).abs() < 1e-9 && (w - ww * unit).abs() < 1e-9,
                "{b:?}"
            );
        }
        // Calls written in the same instant are still drawn.
        assert_eq!(bars(&[call(5.0, 5.0)]), vec![(0.0, MIN_BAR)]);
        assert_eq!(seconds(0.25), "250 ms");
        assert_eq!(seconds(2.0), "2.0 s");
        assert_eq!(seconds(42.0), "42 s");
    }
}
