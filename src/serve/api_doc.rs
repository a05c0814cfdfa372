//! The API reference (`docs/api.md`), written from the routes and the typed requests: each
//! route with the MCP tools that call it, and each tool's fields (name, type, default, whether
//! required, description). `git forum __api-doc` prints it; a test holds the committed file
//! to it.

use std::fmt::Write as _;

use super::dispatch::ROUTES;
use super::mcp::tools::{Input, TOOLS, Target};

/// The route a tool calls, as `METHOD /path` (`<seq>` for a seq segment).
fn route_of(target: Target) -> String {
    match target {
        Target::Get(p) => format!("GET {p}"),
        Target::GetSeq(p) => format!("GET {p}<seq>"),
        Target::Post(p) => format!("POST {p}"),
        Target::GetPath(p) => format!("GET {p}<path>"),
    }
}

/// A table cell: no line breaks, `|` escaped.
fn cell(text: &str) -> String {
    text.replace('\n', " ").replace('|', "\\|")
}

/// The whole reference, as Markdown.
pub fn markdown() -> String {
    let mut out = String::new();
    out.push_str(
        "# API reference\n\n\
         Generated from the typed requests in `src/surface/request/` by `git forum __api-doc`; \
         do not edit by hand (`git forum __api-doc > docs/api.md` rewrites it).\n\n\
         The daemon (`git forum serve`) takes each POST route's fields as a JSON object body, and a \
         GET route's as query fields; the MCP server (`git forum mcp`) takes the same fields as a \
         tool's arguments. A field left out (or `null`) takes its default; an unknown field, a \
         field of the wrong type and a missing required field are refused with one line naming \
         the field (HTTP 400, an MCP tool error).\n\n## Routes\n\n\
         | route | what it does | MCP tools |\n|---|---|---|\n",
    );
    for (method, path, what) in ROUTES {
        let route = format!("{method} {path}");
        let tools: Vec<String> = TOOLS
            .iter()
            .filter(|t| route_of(t.target) == route)
            .map(|t| format!("[`{}`](#{})", t.name, anchor(t.name)))
            .collect();
        let _ = writeln!(out, "| `{route}` | {} | {} |", cell(what), tools.join(", "));
    }
    out.push_str("\n## MCP tools\n");
    for t in TOOLS {
        let spec = t.spec();
        let _ = write!(out, "\n### {}\n\n`{}`", t.name, route_of(t.target));
        if !t.aliases.is_empty() {
            let names: Vec<String> = t.aliases.iter().map(|a| format!("`{a}`")).collect();
            let _ = write!(out, "; also answers to {}", names.join(", "));
        }
        let _ = write!(out, ".\n\n{}\n", spec.description);
        match t.input {
            Input::None(_) => out.push_str("\nTakes no fields.\n"),
            Input::Typed(_) if spec.fields.is_empty() => out.push_str("\nTakes no fields.\n"),
            Input::Typed(_) => {
                out.push_str(
                    "\n| field | type | default | required | description |\n|---|---|---|---|---|\n",
                );
                for f in &spec.fields {
                    let ty = match &f.items {
                        Some(items) if items != "any" => format!("{} of {items}", f.ty),
                        _ => f.ty.clone(),
                    };
                    let default = f
                        .default
                        .as_ref()
                        .map(|d| format!("`{d}`"))
                        .unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "| `{}` | {ty} | {default} | {} | {} |",
                        f.name,
                        if f.required { "yes" } else { "" },
                        cell(&f.description)
                    );
                }
            }
        }
    }
    out
}

/// The anchor GitHub gives a heading: lower case, dots dropped.
fn anchor(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
        .collect::<String>()
        .to_lowercase()
}
