fn main() -> std::process::ExitCode {
    git_forum::cli::main()
}
