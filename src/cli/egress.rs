//! `git forum __egress-bridge`: the bridge a confined worker runs inside (hidden; git forum
//! starts it as the sandbox's command, see `crate::egress`).

use std::ffi::OsString;

use super::{CliError, Ctx};
use crate::egress::bridge::{self, Listen};

/// `git forum __egress-bridge --listen ADDR:PORT=SOCKET... -- PROGRAM ARGS...`.
#[derive(Debug, clap::Args)]
pub(crate) struct BridgeArgs {
    /// A loopback address to listen on and the Unix socket its connections go to
    /// (`127.0.0.1:3128=/path/proxy.sock`); repeatable.
    #[arg(long = "listen", value_name = "ADDR:PORT=SOCKET", required = true, value_parser = Listen::parse)]
    listen: Vec<Listen>,
    /// The program to run, and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    command: Vec<OsString>,
}

/// Listens, runs the program, and exits with its status.
pub(crate) fn run(_ctx: &Ctx, args: BridgeArgs) -> Result<(), CliError> {
    let (program, rest) = args
        .command
        .split_first()
        .ok_or_else(|| CliError::usage("__egress-bridge: give the program to run after --"))?;
    match bridge::run(&args.listen, program, rest) {
        Ok(0) => Ok(()),
        Ok(code) => Err(CliError::silent(code)),
        Err(e) => Err(CliError::unavailable(format!("__egress-bridge: {e}"))),
    }
}
