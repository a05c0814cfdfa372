fn main() -> std::process::ExitCode {
    // Started as the reaper of a worker's process tree (`git_forum::exec::command::reaper`)?
    if let Some(code) = git_forum::exec::command::reaper::run_if_asked() {
        return code;
    }
    // Started as the egress bridge inside a worker's sandbox (`git_forum::egress`)?
    if let Some(code) = git_forum::egress::bridge_if_asked() {
        return code;
    }
    git_forum::exec::command::use_reaper();
    git_forum::cli::main()
}
