//! A unified diff drawn on a page: unified (one column, each line classed as file header,
//! hunk, added, removed or context) or side by side (the old file's lines left, the new
//! file's right, a removed line beside the added line that replaced it), its code coloured by
//! [`super::syntax`]. The layout is chosen by a plain link (`?diff=split`, `?diff=unified`),
//! so it works with the keyboard and without script.

use maud::{Markup, html};

use super::syntax::{Colourer, Piece, Side};

/// The most patch lines a page shows (the rest: `git forum diff RUN`).
const PATCH_LINES: usize = 4000;

/// How a diff is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Layout {
    #[default]
    Unified,
    Split,
}

impl Layout {
    /// The layout the query's `diff` field asks for (unified unless `split`).
    pub(super) fn of(field: Option<&str>) -> Layout {
        match field {
            Some("split") => Layout::Split,
            _ => Layout::Unified,
        }
    }
}

/// What a line of a patch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Hunk,
    Add,
    Del,
    Ctx,
}

impl Kind {
    fn class(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Hunk => "hunk",
            Kind::Add => "add",
            Kind::Del => "del",
            Kind::Ctx => "ctx",
        }
    }
}

/// One line of a patch: its kind, its text without the `+`/`-`/` ` mark (whole for file and
/// hunk lines), its coloured pieces, and its numbers in the old and new file.
struct Row<'a> {
    kind: Kind,
    text: &'a str,
    pieces: Vec<Piece>,
    old: Option<u64>,
    new: Option<u64>,
}

/// Where each side of a hunk header `@@ -A,B +C,D @@` starts and how many lines it has
/// (`A`, `B`, `C`, `D`; a length left out is 1).
fn hunk_sides(line: &str) -> [(u64, u64); 2] {
    let mut words = line.split_whitespace().skip(1);
    let mut side = |sign: char| {
        let w = words
            .next()
            .and_then(|w| w.strip_prefix(sign))
            .unwrap_or("1");
        let (start, len) = w.split_once(',').unwrap_or((w, "1"));
        (start.parse().unwrap_or(1), len.parse().unwrap_or(0))
    };
    let old = side('-');
    [old, side('+')]
}

/// The path a file header names (`+++ b/PATH`, `diff --git a/X b/PATH`).
fn header_path(line: &str) -> Option<&str> {
    if let Some(p) = line.strip_prefix("+++ ") {
        return (p != "/dev/null").then(|| p.strip_prefix("b/").unwrap_or(p));
    }
    let rest = line.strip_prefix("diff --git ")?;
    rest.rsplit_once(" b/").map(|(_, p)| p)
}

/// The first [`PATCH_LINES`] lines of `p`, read and coloured.
fn rows(p: &str) -> Vec<Row<'_>> {
    let mut colour = Colourer::default();
    let (mut old, mut new) = (1u64, 1u64);
    // Lines of the current hunk still to come on each side: a removed line that begins
    // `--- ` is still a line of the hunk.
    let (mut old_left, mut new_left) = (0u64, 0u64);
    let mut out = Vec::new();
    for l in p.lines().take(PATCH_LINES) {
        let in_hunk = old_left > 0 || new_left > 0;
        let file = !in_hunk
            && (l.starts_with("+++ ")
                || l.starts_with("--- ")
                || l.starts_with("diff ")
                || l.starts_with("index "));
        let (kind, text, side) = if file {
            if let Some(path) = header_path(l) {
                colour.file(path);
            }
            (Kind::File, l, None)
        } else if !in_hunk && l.starts_with("@@") {
            let [(o, ol), (n, nl)] = hunk_sides(l);
            (old, new, old_left, new_left) = (o, n, ol, nl);
            colour.hunk();
            (Kind::Hunk, l, None)
        } else if l.starts_with('\\') {
            // `\ No newline at end of file`: about the line before, on neither side.
            (Kind::Hunk, l, None)
        } else if let Some(t) = l.strip_prefix('+') {
            (Kind::Add, t, Some(Side::New))
        } else if let Some(t) = l.strip_prefix('-') {
            (Kind::Del, t, Some(Side::Old))
        } else {
            (
                Kind::Ctx,
                l.strip_prefix(' ').unwrap_or(l),
                Some(Side::Both),
            )
        };
        let pieces = match side {
            Some(s) => colour.line(s, text),
            None => vec![(None, 0..text.len())],
        };
        let numbers = match kind {
            Kind::Add => (None, Some(new)),
            Kind::Del => (Some(old), None),
            Kind::Ctx => (Some(old), Some(new)),
            Kind::File | Kind::Hunk => (None, None),
        };
        old += u64::from(numbers.0.is_some());
        new += u64::from(numbers.1.is_some());
        old_left = old_left.saturating_sub(u64::from(numbers.0.is_some()));
        new_left = new_left.saturating_sub(u64::from(numbers.1.is_some()));
        out.push(Row {
            kind,
            text,
            pieces,
            old: numbers.0,
            new: numbers.1,
        });
    }
    out
}

/// The pieces of a line, each in a span of its class.
fn code(row: &Row<'_>) -> Markup {
    html! {
        @for (class, range) in &row.pieces {
            @let t = row.text.get(range.clone()).unwrap_or("");
            @match class { Some(c) => span class=(c) { (t) }, None => (t) }
        }
    }
}

/// The links that switch the layout of the diff on page `base` (its path).
pub(super) fn switch(base: &str, layout: Layout) -> Markup {
    let current = |l: Layout| (l == layout).then_some("true");
    html! {
        nav.diff-layout aria-label="Diff layout" {
            "Layout: "
            a href=(format!("{base}?diff=unified#diff")) aria-current=[current(Layout::Unified)] { "unified" }
            " · "
            a href=(format!("{base}?diff=split#diff")) aria-current=[current(Layout::Split)] { "side by side" }
        }
    }
}

/// Patch `p` in `layout`.
pub(super) fn patch(p: &str, layout: Layout) -> Markup {
    let total = p.lines().count();
    let rows = rows(p);
    html! {
        @if rows.is_empty() { p.note { "The patch is empty." } } @else {
            @match layout {
                Layout::Unified => (unified(&rows)),
                Layout::Split => (split(&rows)),
            }
            @if total > PATCH_LINES { p.note { (total - PATCH_LINES) " more lines not shown." } }
        }
    }
}

/// One column: each line with its mark.
fn unified(rows: &[Row<'_>]) -> Markup {
    html! {
        pre.diff tabindex="0" { code {
            @for r in rows {
                span class=(r.kind.class()) {
                    @match r.kind {
                        Kind::Add => "+", Kind::Del => "-", Kind::Ctx => " ", Kind::File | Kind::Hunk => "",
                    }
                    (code(r))
                }
            }
        } }
    }
}

/// Two columns: the old file's lines left, the new file's right.
fn split(rows: &[Row<'_>]) -> Markup {
    html! {
        div.scroll tabindex="0" {
            table.split {
                caption { "The change side by side: the old lines left, the new lines right" }
                thead { tr {
                    th scope="col" { "Old" } th scope="col" { "Before" }
                    th scope="col" { "New" } th scope="col" { "After" }
                } }
                tbody { @for pair in pairs(rows) { (split_row(pair)) } }
            }
        }
    }
}

/// One row of the side-by-side table: a header across both sides, or a line on each side.
enum Pair<'r, 'a> {
    Across(&'r Row<'a>),
    Sides(Option<&'r Row<'a>>, Option<&'r Row<'a>>),
}

/// The rows paired: context beside itself, each run of removed lines beside the run of added
/// lines that follows it, line by line.
fn pairs<'r, 'a>(rows: &'r [Row<'a>]) -> Vec<Pair<'r, 'a>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        match rows[i].kind {
            Kind::File | Kind::Hunk => {
                out.push(Pair::Across(&rows[i]));
                i += 1;
            }
            Kind::Ctx => {
                out.push(Pair::Sides(Some(&rows[i]), Some(&rows[i])));
                i += 1;
            }
            Kind::Del | Kind::Add => {
                let dels = rows[i..].iter().take_while(|r| r.kind == Kind::Del).count();
                let adds = rows[i + dels..]
                    .iter()
                    .take_while(|r| r.kind == Kind::Add)
                    .count();
                for k in 0..dels.max(adds) {
                    let old = (k < dels).then(|| &rows[i + k]);
                    let new = (k < adds).then(|| &rows[i + dels + k]);
                    out.push(Pair::Sides(old, new));
                }
                i += dels + adds;
            }
        }
    }
    out
}

fn split_row(pair: Pair<'_, '_>) -> Markup {
    match pair {
        Pair::Across(r) => html! {
            tr class=(r.kind.class()) { td colspan="4" { code { (r.text) } } }
        },
        Pair::Sides(old, new) => html! {
            tr {
                (side(old, Side::Old))
                (side(new, Side::New))
            }
        },
    }
}

/// One side's line number and code cells (empty where that side has no line).
fn side(row: Option<&Row<'_>>, which: Side) -> Markup {
    let (cell, number) = match which {
        Side::Old => ("old", row.and_then(|r| r.old)),
        _ => ("new", row.and_then(|r| r.new)),
    };
    html! {
        @match row {
            None => { td.ln {} td class=(format!("{cell} none")) {} }
            Some(r) => {
                td.ln { @if let Some(n) = number { (n) } }
                td class=(format!("{cell} {}", r.kind.class())) { code { (code(r)) } }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hunk_headers_and_file_headers_are_read() {
        assert_eq!(hunk_sides("@@ -3,4 +7,5 @@ fn x()"), [(3, 4), (7, 5)]);
        assert_eq!(hunk_sides("@@ -0,0 +1 @@"), [(0, 0), (1, 1)]);
        assert_eq!(header_path("+++ b/src/a.rs"), Some("src/a.rs"));
        assert_eq!(header_path("+++ /dev/null"), None);
        assert_eq!(header_path("diff --git a/x.py b/x.py"), Some("x.py"));
    }

    #[test]
    fn removed_and_added_runs_are_paired_line_by_line() {
        let p = "--- a/a.rs\n+++ b/a.rs\n@@ -1,3 +1,3 @@\n ctx\n-old1\n-old2\n+new1\n end\n";
        let rows = rows(p);
        let sides: Vec<(Option<&str>, Option<&str>)> = pairs(&rows)
            .into_iter()
            .filter_map(|p| match p {
                Pair::Sides(o, n) => Some((o.map(|r| r.text), n.map(|r| r.text))),
                Pair::Across(_) => None,
            })
            .collect();
        assert_eq!(
            sides,
            vec![
                (Some("ctx"), Some("ctx")),
                (Some("old1"), Some("new1")),
                (Some("old2"), None),
                (Some("end"), Some("end")),
            ]
        );
        // The numbers follow each side.
        let end = rows.iter().find(|r| r.text == "end").unwrap();
        assert_eq!((end.old, end.new), (Some(4), Some(3)));
    }

    #[test]
    fn a_removed_line_that_looks_like_a_header_stays_in_its_hunk() {
        let p = "--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,1 @@\n--- a comment\n select 1;\n";
        let kinds: Vec<Kind> = rows(p).iter().map(|r| r.kind).collect();
        assert_eq!(
            kinds,
            vec![Kind::File, Kind::File, Kind::Hunk, Kind::Del, Kind::Ctx]
        );
    }
}
