//! A scripted executor: answers from a function of the call, with no model behind it. For
//! exact ledger-shape tests of the control loop and for embedders that want a deterministic
//! stand-in; `submit` never builds one from configuration.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::{Call, ExecError, Executor, Reply};

/// A script's failure is text: it stands for whatever a model or its transport could say, and
/// the tests and embedders that write scripts choose it freely.
type Script = dyn Fn(&Call<'_>) -> Result<String, String> + Send + Sync;

/// An executor whose answers come from a function. It counts its calls and keeps their
/// prompts.
pub struct Scripted {
    model: String,
    script: Box<Script>,
    calls: AtomicUsize,
    prompts: Mutex<Vec<String>>,
}

impl Scripted {
    /// An executor reporting `model` that answers with `script(call)`; an `Err` becomes an
    /// [`ExecError::Other`]. The error stays text: a script stands in for a model, whose
    /// failures are free text, and its writers (tests, embedders) choose the words.
    pub fn new(
        model: &str,
        script: impl Fn(&Call<'_>) -> Result<String, String> + Send + Sync + 'static,
    ) -> Scripted {
        Scripted {
            model: model.to_string(),
            script: Box::new(script),
            calls: AtomicUsize::new(0),
            prompts: Mutex::new(Vec::new()),
        }
    }

    /// How many calls it has answered (or failed).
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// The prompts it was given, in call order.
    pub fn prompts(&self) -> Vec<String> {
        self.prompts.lock().map(|p| p.clone()).unwrap_or_default()
    }
}

impl Executor for Scripted {
    fn call(&self, call: &Call<'_>) -> Result<Reply, ExecError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut p) = self.prompts.lock() {
            p.push(call.prompt.to_string());
        }
        let text = (self.script)(call).map_err(ExecError::Other)?;
        Ok(Reply {
            text,
            model: self.model.clone(),
            usage: None,
            elapsed: Duration::ZERO,
        })
    }

    fn model(&self) -> String {
        self.model.clone()
    }

    fn describe(&self) -> String {
        format!("scripted: {}", self.model)
    }
}
