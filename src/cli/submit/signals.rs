//! Signals during a run at the command line: the first SIGINT or SIGTERM interrupts the run
//! (witnessed, resumable), a second one or a run that does not wind down ends the process.
//!
//! One Ctrl-C can arrive twice: the terminal sends SIGINT to the whole process group, and when
//! the run was started as `git forum`, git (in that group too) forwards the signal to its
//! child. A signal within [`ECHO`] of the first is taken as that echo, not as a second press.

use std::sync::Arc;
use std::time::Duration;

use super::CliError;
use crate::surface::run::Interrupt;

/// Seconds an interrupted run has to wind down (a model call over HTTP cannot be cut short)
/// before the process exits anyway.
const INTERRUPT_GRACE: Duration = Duration::from_secs(10);

/// How long after the first signal another one still counts as the same (git's forwarded copy
/// of a terminal's SIGINT); a person pressing Ctrl-C again to force the exit is slower.
const ECHO: Duration = Duration::from_secs(1);

pub(crate) fn signal_number(name: &str) -> u8 {
    match name {
        "SIGINT" => 2,
        _ => 15,
    }
}

/// Watches for SIGINT and SIGTERM while a run is in flight. The first one raises `interrupt`
/// (the run writes nothing more and ends by witnessing it) and kills the process group of
/// every command running (workers, context commands, verifiers); a second one more than
/// [`ECHO`] later, or a run that has not wound down after [`INTERRUPT_GRACE`], ends the process
/// at once.
pub(crate) fn watch_signals(interrupt: Arc<Interrupt>) -> Result<(), CliError> {
    use std::future::poll_fn;
    use std::task::Poll;
    use tokio::signal::unix::{SignalKind, signal};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::unavailable(format!("cannot watch for signals: {e}")))?;
    let (int, term) = {
        let _guard = rt.enter();
        let int = signal(SignalKind::interrupt());
        let term = signal(SignalKind::terminate());
        match (int, term) {
            (Ok(i), Ok(t)) => (i, t),
            (Err(e), _) | (_, Err(e)) => {
                return Err(CliError::unavailable(format!(
                    "cannot watch for signals: {e}"
                )));
            }
        }
    };
    let (mut int, mut term) = (int, term);
    fn either(
        int: &mut tokio::signal::unix::Signal,
        term: &mut tokio::signal::unix::Signal,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<&'static str> {
        if int.poll_recv(cx).is_ready() {
            return Poll::Ready("SIGINT");
        }
        if term.poll_recv(cx).is_ready() {
            return Poll::Ready("SIGTERM");
        }
        Poll::Pending
    }
    std::thread::spawn(move || {
        rt.block_on(async move {
            use std::future::Future;
            let first = poll_fn(|cx| either(&mut int, &mut term, cx)).await;
            interrupt.raise(first);
            crate::surface::run::stop_all();
            let mut echo = std::pin::pin!(tokio::time::sleep(ECHO));
            poll_fn(|cx| {
                // Drain what arrives meanwhile: the same Ctrl-C, delivered twice.
                while either(&mut int, &mut term, cx).is_ready() {}
                echo.as_mut().poll(cx)
            })
            .await;
            let mut grace = std::pin::pin!(tokio::time::sleep(INTERRUPT_GRACE));
            poll_fn(|cx| {
                if grace.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(());
                }
                either(&mut int, &mut term, cx).map(|_| ())
            })
            .await;
            crate::surface::run::stop_all();
            eprintln!(
                "error: interrupted by {first}: the run did not wind down in time (a model call was still out); `git forum runs` shows it as interrupted"
            );
            std::process::exit(128 + i32::from(signal_number(first)));
        })
    });
    Ok(())
}
