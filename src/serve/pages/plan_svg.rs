//! The plan as a server-rendered SVG: one column per wave, left to right, a box per task
//! (linked to its page, coloured by its status), data edges solid and order edges dashed.

use std::collections::HashMap;

use maud::{Markup, html};

use super::util::outcome_class;

const NODE_W: usize = 132;
const NODE_H: usize = 44;
const COL_GAP: usize = 72;
const ROW_GAP: usize = 20;
const PAD: usize = 16;

/// The graph of run `seq`'s plan: `waves` of task ids, `edges` as (from, to, type), and each
/// task's status.
pub(super) fn graph(
    seq: u64,
    waves: &[Vec<String>],
    edges: &[(String, String, String)],
    status: &dyn Fn(&str) -> String,
) -> Markup {
    let mut at: HashMap<&str, (usize, usize)> = HashMap::new();
    for (c, wave) in waves.iter().enumerate() {
        for (r, id) in wave.iter().enumerate() {
            let x = PAD + c * (NODE_W + COL_GAP);
            let y = PAD + 20 + r * (NODE_H + ROW_GAP);
            at.insert(id.as_str(), (x, y));
        }
    }
    let rows = waves.iter().map(Vec::len).max().unwrap_or(0);
    let width = 2 * PAD + waves.len() * NODE_W + waves.len().saturating_sub(1) * COL_GAP;
    let height = 2 * PAD + 20 + rows * NODE_H + rows.saturating_sub(1) * ROW_GAP;
    let tasks: usize = waves.iter().map(Vec::len).sum();
    let label = format!(
        "The plan of run {seq}: {tasks} tasks in {} waves, {} edges",
        waves.len(),
        edges.len()
    );
    html! {
        figure.plan {
            svg xmlns="http://www.w3.org/2000/svg" role="group" aria-labelledby=(format!("plan-title-{seq}"))
                width=(width) height=(height) viewBox=(format!("0 0 {width} {height}")) {
                title id=(format!("plan-title-{seq}")) { (label) }
                defs {
                    marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse" {
                        path class="arrowhead" d="M 0 0 L 10 5 L 0 10 z" {}
                    }
                }
                @for (c, _) in waves.iter().enumerate() {
                    text.wave x=(PAD + c * (NODE_W + COL_GAP)) y=(PAD + 10) { "wave " (c + 1) }
                }
                @for (from, to, kind) in edges {
                    @if let (Some(&(x1, y1)), Some(&(x2, y2))) = (at.get(from.as_str()), at.get(to.as_str())) {
                        line class=(if kind == "order" { "edge order" } else { "edge data" })
                            x1=(x1 + NODE_W) y1=(y1 + NODE_H / 2) x2=(x2) y2=(y2 + NODE_H / 2)
                            stroke-dasharray=[(kind == "order").then_some("6 4")]
                            marker-end="url(#arrow)" {
                            title { (from) " → " (to) ": " (if kind == "order" { "order only" } else { "data" }) }
                        }
                    }
                }
                @for wave in waves {
                    @for id in wave {
                        @let (x, y) = at[id.as_str()];
                        @let s = status(id);
                        a href=(format!("/view/run/{seq}/task/{id}")) {
                            title { "Task " (id) ": " (s) }
                            rect class=(format!("node {}", outcome_class(&s))) x=(x) y=(y) width=(NODE_W) height=(NODE_H) rx="6" {}
                            text.node-id x=(x + 10) y=(y + 18) { (super::util::clip(id, 16)) }
                            text.node-status x=(x + 10) y=(y + 35) { (s) }
                        }
                    }
                }
            }
            figcaption { (label) }
        }
    }
}
