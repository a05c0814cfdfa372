//! The request of `git forum blame` (`GET /blame`, MCP `blame`).

use serde::Deserialize;

use super::Request;
use crate::surface::Error;

/// Who wrote each line of a file, by the record: for each line the commit git blame names and, when it is a change commit of a run (by its trailers, or by patch id after a cherry-pick, rebase or squash merge), the run, task, lane, model, the tool call that wrote the line, the checks its change passed, the ship verdict, the task's tokens and cost, with an inclusion proof of the task entry. Returns {file, rev, lines, tasks, checkpoint, verified}.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Blame {
    /// The file to blame, relative to the current directory (the repository's top for the daemon and MCP).
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Only lines A to B (1-based, inclusive), as A,B.
    #[arg(short = 'L', long, value_name = "A,B")]
    #[serde(default)]
    pub lines: Option<String>,
    /// The revision to blame the file at (default: HEAD).
    #[arg(value_name = "REV")]
    #[serde(default)]
    pub rev: Option<String>,
    /// Check each line's proof and its commit's tie to its entry (the trailer's entry hash, the change entry's commit or patch id, the recorded blob of the file); fail naming the first line where one does not hold.
    #[arg(long)]
    #[serde(default)]
    pub verify: bool,
}

impl Blame {
    /// The range `lines` asks for, `None` for the whole file.
    pub(crate) fn range(&self) -> Result<Option<(u64, u64)>, Error> {
        let Some(l) = self.lines.as_deref() else {
            return Ok(None);
        };
        let bad = || {
            Error::usage(format!(
                "lines {l:?} is not a range: give A,B with 1 <= A <= B (lines A to B)"
            ))
        };
        let (a, b) = l.split_once(',').ok_or_else(bad)?;
        let a: u64 = a.trim().parse().map_err(|_| bad())?;
        let b: u64 = b.trim().parse().map_err(|_| bad())?;
        if a == 0 || b < a {
            return Err(bad());
        }
        Ok(Some((a, b)))
    }
}

impl Request for Blame {
    fn validate(&self) -> Result<(), Error> {
        if self.file.trim().is_empty() {
            return Err(Error::usage("file is empty: name the file to blame"));
        }
        self.range().map(|_| ())
    }
}
