//! `--busy`: the same comparison while a second process keeps both cores busy.
//!
//! Every bench that compares git forum with a baseline takes `--busy`. It then starts one
//! process group that spins on as many threads as the machine has cores (a shell loop per
//! core: nothing of ours, nothing that touches the disk) and stops it when the bench ends,
//! so both sides of each ratio meet the same contention. The header line says which mode ran.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

/// The spinning process group, stopped when dropped.
pub struct Busy {
    child: Child,
}

impl Busy {
    /// Starts the spinners when `args` holds `--busy`; `None` otherwise.
    pub fn from_args(args: &[String]) -> Option<Busy> {
        args.iter().any(|a| a == "--busy").then(Busy::start)
    }

    /// One shell per core, each in an endless arithmetic loop, all in one process group.
    pub fn start() -> Busy {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let one = "while :; do :; done";
        let script = vec![format!("{one} &"); cores.saturating_sub(1)]
            .into_iter()
            .chain(std::iter::once(one.to_string()))
            .collect::<Vec<_>>()
            .join("\n");
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start the busy loop (sh)");
        // Let the spinners reach their loops before anything is timed.
        std::thread::sleep(std::time::Duration::from_millis(200));
        Busy { child }
    }

    /// The words a header prints for the mode.
    pub fn label(busy: &Option<Busy>) -> &'static str {
        if busy.is_some() {
            "busy (a second process spins on every core)"
        } else {
            "idle (nothing else started by the bench)"
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(group) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
        let _ = self.child.wait();
    }
}
