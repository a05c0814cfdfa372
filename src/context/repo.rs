//! The repository as context, the pure half: which terms of a task's
//! instruction to look for, how to rank the files that hold them, how to trim a file, and how
//! the planner's map of the repository and a task's files are rendered. The git calls that feed
//! it (`git ls-files`, `git grep -l`, reading the files) are in `crate::surface::run::repo_context`.
//!
//! Everything here is bounded by the [`Limits`] it is given, so a large repository yields a map
//! of the same size as a small one's; the context budget then meters what is left.

/// How much of the repository reaches a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Paths listed in the map at most.
    pub(crate) map_files: usize,
    /// Bytes of the map's path list at most.
    pub(crate) map_bytes: usize,
    /// Lines of the README copied into the map at most.
    pub(crate) readme_lines: usize,
    /// Bytes of the README copied into the map at most.
    pub(crate) readme_bytes: usize,
    /// Terms of an instruction looked for at most.
    pub(crate) terms: usize,
    /// Files given to one task at most.
    pub(crate) task_files: usize,
    /// Bytes of each file given to a task at most.
    pub(crate) file_bytes: usize,
}

/// The limits a run uses: a map of about 1,500 tokens and three files of about 500 tokens each
/// per task (at Forum's 4 bytes per token).
pub(crate) const DEFAULT_LIMITS: Limits = Limits {
    map_files: 300,
    map_bytes: 4000,
    readme_lines: 30,
    readme_bytes: 2000,
    terms: 8,
    task_files: 3,
    file_bytes: 2000,
};

/// Words too common to find the right file with.
const STOP: &[&str] = &[
    "about", "add", "after", "all", "also", "and", "any", "are", "because", "been", "before",
    "being", "both", "but", "can", "check", "code", "could", "does", "done", "each", "file",
    "files", "fix", "for", "from", "function", "has", "have", "how", "into", "its", "just", "let",
    "make", "more", "most", "must", "new", "not", "now", "one", "only", "other", "our", "out",
    "over", "please", "should", "so", "some", "such", "task", "than", "that", "the", "their",
    "them", "then", "there", "these", "they", "this", "those", "through", "use", "used", "using",
    "very", "was", "what", "when", "where", "which", "while", "who", "why", "will", "with",
    "without", "would", "write", "you", "your",
];

/// How telling a term is: a path or file name first, then an identifier (`snake_case`,
/// `camelCase`, digits), then a plain word.
fn weight(term: &str) -> u8 {
    if term.contains('/') || term.contains('.') {
        3
    } else if term.contains('_')
        || term.chars().any(|c| c.is_ascii_digit())
        || term.chars().skip(1).any(|c| c.is_uppercase())
    {
        2
    } else {
        1
    }
}

/// The terms of `instruction` worth a `git grep`: words of three characters or more (letters,
/// digits, `_`, `-`, `.`, `/`; a trailing `.` or `-` dropped), without common words, each
/// once (case-insensitively), the most telling first and, among equals, in the order they
/// appear; at most `max`.
pub(crate) fn terms(instruction: &str, max: usize) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    let mut out: Vec<String> = Vec::new();
    let word = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/');
    for raw in instruction.split(|c: char| !word(c)) {
        let t = raw.trim_matches(|c| matches!(c, '.' | '-' | '/'));
        if t.chars().count() < 3 || !t.chars().any(char::is_alphabetic) {
            continue;
        }
        let lower = t.to_lowercase();
        if STOP.contains(&lower.as_str()) || seen.contains(&lower) {
            continue;
        }
        seen.push(lower);
        out.push(t.to_string());
    }
    // A stable sort keeps first-appearance order among terms of one weight.
    out.sort_by_key(|t| std::cmp::Reverse(weight(t)));
    out.truncate(max);
    out
}

/// Ranks files for a task. `hits` pairs each term with the files whose text holds it (what
/// `git grep -l` found); `paths` are all tracked files. A file scores 2 for each term in its
/// path (case-insensitively) and 1 for each term in its text; the best `max` with a score above
/// 0 come back, higher scores first, then shorter paths, then by path.
pub(crate) fn rank(hits: &[(String, Vec<String>)], paths: &[String], max: usize) -> Vec<String> {
    let mut scores: std::collections::BTreeMap<&str, u32> = std::collections::BTreeMap::new();
    for (term, files) in hits {
        let lower = term.to_lowercase();
        for p in paths {
            if p.to_lowercase().contains(&lower) {
                *scores.entry(p.as_str()).or_default() += 2;
            }
        }
        for f in files {
            *scores.entry(f.as_str()).or_default() += 1;
        }
    }
    let mut ranked: Vec<(&str, u32)> = scores.into_iter().filter(|(_, s)| *s > 0).collect();
    ranked.sort_by(|a, b| {
        b.1.cmp(&a.1)
            .then(a.0.len().cmp(&b.0.len()))
            .then(a.0.cmp(b.0))
    });
    ranked
        .into_iter()
        .take(max)
        .map(|(p, _)| p.to_string())
        .collect()
}

/// The marker after a file cut to its share of bytes.
pub(crate) const CUT_MARKER: &str = "... [cut]";

/// `text` cut to at most `max` bytes, at the end of a line when one ends inside the cut (else
/// at a character boundary), then [`CUT_MARKER`] on a line of its own; the text as it is when
/// it fits.
pub(crate) fn trim(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = match text[..end].rfind('\n') {
        Some(i) if i > 0 => &text[..i],
        _ => &text[..end],
    };
    format!("{cut}\n{CUT_MARKER}")
}

/// The first `lines` lines of `text`, then [`trim`] to `bytes`.
pub(crate) fn head(text: &str, lines: usize, bytes: usize) -> String {
    let taken: Vec<&str> = text.lines().take(lines).collect();
    let more = text.lines().nth(lines).is_some();
    let mut out = taken.join("\n");
    if more {
        out.push('\n');
        out.push_str(CUT_MARKER);
    }
    trim(&out, bytes)
}

/// The top-level README among `paths` (`README.md` before `README` before any other
/// `README.*`, case-insensitively), if any.
pub(crate) fn readme(paths: &[String]) -> Option<&str> {
    let top = |p: &&String| !p.contains('/') && p.to_lowercase().starts_with("readme");
    let rank = |p: &str| match p.to_lowercase().as_str() {
        "readme.md" => 0,
        "readme" => 1,
        _ => 2,
    };
    paths
        .iter()
        .filter(top)
        .min_by_key(|p| (rank(p), p.len()))
        .map(String::as_str)
}

/// The planner's map: how many files are tracked, the shallowest paths that fit the limits
/// (listed in path order), how many were left out, and the README's head. Empty when nothing
/// is tracked.
pub(crate) fn map(paths: &[String], readme: Option<(&str, &str)>, limits: &Limits) -> String {
    if paths.is_empty() {
        return String::new();
    }
    let mut by_depth: Vec<&String> = paths.iter().collect();
    by_depth.sort_by(|a, b| {
        let d = |p: &str| p.matches('/').count();
        d(a).cmp(&d(b)).then(a.cmp(b))
    });
    let mut shown: Vec<&String> = Vec::new();
    let mut bytes = 0;
    for p in by_depth {
        if shown.len() >= limits.map_files || bytes + p.len() + 1 > limits.map_bytes {
            break;
        }
        bytes += p.len() + 1;
        shown.push(p);
    }
    shown.sort();
    let mut out = format!(
        "Repository map ({} tracked file{}):\n",
        paths.len(),
        if paths.len() == 1 { "" } else { "s" }
    );
    for p in &shown {
        out.push_str(p);
        out.push('\n');
    }
    let left = paths.len() - shown.len();
    if left > 0 {
        out.push_str(&format!(
            "... and {left} more (the deepest paths are left out)\n"
        ));
    }
    if let Some((name, text)) = readme {
        let h = head(text, limits.readme_lines, limits.readme_bytes);
        if !h.trim().is_empty() {
            out.push_str(&format!("\n{name} (its start):\n{h}\n"));
        }
    }
    out.trim_end().to_string()
}

/// A task's files: each under a `--- PATH ---` line, cut to `limits.file_bytes`. Empty when
/// there are none.
pub(crate) fn task_files(files: &[(String, String)], limits: &Limits) -> String {
    if files.is_empty() {
        return String::new();
    }
    let mut out = String::from("Files of the repository that look relevant to this task:\n");
    for (path, text) in files {
        out.push_str(&format!(
            "\n--- {path} ---\n{}\n",
            trim(text.trim_end(), limits.file_bytes)
        ));
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn terms_prefer_paths_then_identifiers_and_drop_common_words() {
        assert_eq!(
            terms(
                "Fix the parse_date bug in src/dates.py and add a test for parseDate. The date is wrong.",
                8
            ),
            s(&[
                "src/dates.py",
                "parse_date",
                "parseDate",
                "bug",
                "test",
                "date",
                "wrong"
            ])
        );
        assert_eq!(terms("fix it, do it now", 8), Vec::<String>::new());
        assert_eq!(
            terms("Login LOGIN login logins", 8),
            s(&["Login", "logins"])
        );
        assert_eq!(terms("alpha beta gamma delta", 2), s(&["alpha", "beta"]));
        // Numbers alone are no terms; a trailing full stop is not part of the word.
        assert_eq!(terms("version 2024 of calc.", 8), s(&["version", "calc"]));
    }

    #[test]
    fn rank_counts_path_and_text_hits() {
        let paths = s(&[
            "README.md",
            "src/calc.py",
            "tests/test_calc.py",
            "docs/other.md",
        ]);
        let hits = vec![
            ("calc".to_string(), s(&["README.md", "src/calc.py"])),
            ("divide".to_string(), s(&["src/calc.py", "docs/other.md"])),
        ];
        assert_eq!(
            rank(&hits, &paths, 3),
            s(&["src/calc.py", "tests/test_calc.py", "README.md"])
        );
        assert_eq!(rank(&hits, &paths, 1), s(&["src/calc.py"]));
        assert_eq!(rank(&[], &paths, 3), Vec::<String>::new());
    }

    #[test]
    fn trim_cuts_at_a_line_end_and_says_so() {
        assert_eq!(trim("short", 10), "short");
        assert_eq!(trim("one\ntwo\nthree", 9), "one\ntwo\n... [cut]");
        assert_eq!(trim("abcdef", 3), "abc\n... [cut]");
        // "é" is two bytes: a cut inside it backs off to the boundary.
        assert_eq!(trim("aé", 2), "a\n... [cut]");
        assert_eq!(head("1\n2\n3\n4", 2, 100), "1\n2\n... [cut]");
    }

    #[test]
    fn readme_prefers_markdown_at_the_top() {
        assert_eq!(
            readme(&s(&["docs/README.md", "README", "README.md"])),
            Some("README.md")
        );
        assert_eq!(readme(&s(&["Readme.rst", "src/a.rs"])), Some("Readme.rst"));
        assert_eq!(readme(&s(&["src/a.rs"])), None);
    }

    #[test]
    fn map_lists_the_shallowest_paths_within_the_limits() {
        let paths = s(&["a/b/c/deep.rs", "src/lib.rs", "README.md", "src/main.rs"]);
        let limits = Limits {
            map_files: 3,
            ..DEFAULT_LIMITS
        };
        assert_eq!(
            map(&paths, Some(("README.md", "# Title\nline two\n")), &limits),
            "Repository map (4 tracked files):\nREADME.md\nsrc/lib.rs\nsrc/main.rs\n\
             ... and 1 more (the deepest paths are left out)\n\nREADME.md (its start):\n# Title\nline two"
        );
        let tight = Limits {
            map_bytes: 12,
            ..DEFAULT_LIMITS
        };
        assert_eq!(
            map(&paths, None, &tight),
            "Repository map (4 tracked files):\nREADME.md\n... and 3 more (the deepest paths are left out)"
        );
        assert_eq!(map(&[], None, &DEFAULT_LIMITS), "");
    }

    #[test]
    fn task_files_render_each_file_trimmed() {
        let limits = Limits {
            file_bytes: 8,
            ..DEFAULT_LIMITS
        };
        assert_eq!(
            task_files(
                &[
                    ("a.py".into(), "x = 1\n".into()),
                    ("b.py".into(), "line1\nline2\nline3\n".into())
                ],
                &limits
            ),
            "Files of the repository that look relevant to this task:\n\n--- a.py ---\nx = 1\n\n--- b.py ---\nline1\n... [cut]"
        );
        assert_eq!(task_files(&[], &limits), "");
    }
}
