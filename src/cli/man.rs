//! `git forum man`: the man page generated from the clap definition. git turns
//! `git forum --help` into `man git-forum`, so the page must be installed for it to work.

use std::path::PathBuf;

use super::{CliError, Ctx};

/// Write the git-forum(1) man page to DIR/git-forum.1 (or to standard output).
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Directory to write git-forum.1 into, e.g. ~/.local/share/man/man1.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// The roff text of the man page.
pub fn render() -> Result<Vec<u8>, std::io::Error> {
    let cmd = super::command().name("git-forum");
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut buf)?;
    Ok(buf)
}

pub fn run(ctx: &Ctx, args: ManArgs) -> Result<(), CliError> {
    let page = render().map_err(|e| CliError::internal(format!("rendering the man page: {e}")))?;
    match args.out {
        None => ctx.out(String::from_utf8_lossy(&page).trim_end()),
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .map_err(|e| CliError::internal(format!("creating {}: {e}", dir.display())))?;
            let path = dir.join("git-forum.1");
            std::fs::write(&path, page)
                .map_err(|e| CliError::internal(format!("writing {}: {e}", path.display())))?;
            ctx.out(&format!("wrote {}", path.display()))
        }
    }
}
