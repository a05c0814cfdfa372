//! Signals at the command line: during a run the first SIGINT or SIGTERM interrupts it
//! (witnessed, resumable), a second one or a run that does not wind down ends the process; a
//! `git forum worker` stops pulling at the first and ends at the second ([`watch`]).
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
    watch(
        move |first| {
            interrupt.raise(first);
            crate::surface::run::stop_all();
        },
        Some(INTERRUPT_GRACE),
        |first| {
            crate::surface::run::stop_all();
            eprintln!(
                "error: interrupted by {first}: the run did not wind down in time (a model call was still out); `git forum runs` shows it as interrupted"
            );
            std::process::exit(128 + i32::from(signal_number(first)));
        },
    )
}

/// Watches for SIGINT and SIGTERM on a thread of its own: the first one calls `first` with its
/// name; a second one more than [`ECHO`] later (or, given `grace`, that long after the first
/// with no second) calls `last` with the first one's name, which ends the process.
pub(crate) fn watch(
    first: impl FnOnce(&'static str) + Send + 'static,
    grace: Option<Duration>,
    last: impl FnOnce(&'static str) -> std::convert::Infallible + Send + 'static,
) -> Result<(), CliError> {
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
            let name = poll_fn(|cx| either(&mut int, &mut term, cx)).await;
            first(name);
            let mut echo = std::pin::pin!(tokio::time::sleep(ECHO));
            poll_fn(|cx| {
                // Drain what arrives meanwhile: the same Ctrl-C, delivered twice.
                while either(&mut int, &mut term, cx).is_ready() {}
                echo.as_mut().poll(cx)
            })
            .await;
            let mut grace = std::pin::pin!(async {
                match grace {
                    Some(g) => tokio::time::sleep(g).await,
                    None => std::future::pending().await,
                }
            });
            poll_fn(|cx| {
                if grace.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(());
                }
                either(&mut int, &mut term, cx).map(|_| ())
            })
            .await;
            match last(name) {}
        })
    });
    Ok(())
}
