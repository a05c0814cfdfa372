//! [`RealFacts`]: the environment, `PATH` and name resolution as they are, for the runtime
//! checks of [`crate::exec::config`] (`runtime inspect`, `submit`, the daemon's executors).
//! Only whether a key variable is set is asked, never its value.

use std::path::Path;
use std::sync::Arc;

use crate::exec::config::Facts;
use crate::exec::endpoint;
use crate::exec::http::{SystemLookup, VetError, VettingResolver};

/// The environment and `PATH` as they are.
pub(crate) struct RealFacts;

impl Facts for RealFacts {
    fn var_is_set(&self, name: &str) -> bool {
        std::env::var_os(name).is_some_and(|v| !v.is_empty())
    }

    fn refuses_host(&self, host: &str, policy: &endpoint::Policy) -> Option<String> {
        // The very check the HTTP client makes at connection time.
        let resolver = VettingResolver::new(*policy, Arc::new(SystemLookup));
        match resolver.vet(host) {
            Err(e @ VetError::Refused { .. }) => Some(e.to_string()),
            // Nothing to connect to yet is a connection failure at run time, not a refusal.
            Err(VetError::Lookup { .. }) | Ok(_) => None,
        }
    }

    fn anthropic_url(&self) -> String {
        crate::exec::anthropic::messages_url()
    }

    fn program_found(&self, program: &str) -> bool {
        if program.contains('/') {
            return is_executable(Path::new(program));
        }
        std::env::var_os("PATH").is_some_and(|path| {
            std::env::split_paths(&path)
                .filter(|d| !d.as_os_str().is_empty())
                .any(|d| is_executable(&d.join(program)))
        })
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_facts_find_programs_and_never_read_values() {
        assert!(RealFacts.program_found("sh"));
        assert!(RealFacts.program_found("/bin/sh"));
        assert!(!RealFacts.program_found("git-forum-no-such-program-xyz"));
        assert!(!RealFacts.program_found("/nonexistent/prog"));
        let plain = tempfile::NamedTempFile::new().unwrap();
        assert!(!RealFacts.program_found(plain.path().to_str().unwrap()));
        assert!(RealFacts.var_is_set("PATH"));
        assert!(!RealFacts.var_is_set("GIT_FORUM_SURELY_UNSET_VAR"));
    }
}
