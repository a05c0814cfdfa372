//! The executor flags shared by every command that runs (or explains) models: `runtime
//! inspect` today, `submit` next. Precedence and merging live in [`crate::exec::config`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::exec::config::{Flags, TierFlags};
use crate::roster::Tier;

/// Executor flags. Default slot: `--chat-url` > `--api` > `--cmd`/`--claude` > the runtime
/// config's default; tier flags replace the config's tiers one by one (a tier chat URL beats a
/// tier cmd).
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Executors")]
pub(crate) struct ExecutorArgs {
    /// Runtime config file (default: .forum/runtime.toml in the repository).
    #[arg(long, value_name = "FILE")]
    pub(crate) runtime_config: Option<PathBuf>,
    /// Default executor: run CMD with the prompt as its last argument (no shell; split with
    /// POSIX shell rules).
    #[arg(long, value_name = "CMD")]
    pub(crate) cmd: Option<String>,
    /// Default executor: an OpenAI-compatible chat completions endpoint (the full URL).
    #[arg(long, value_name = "URL")]
    pub(crate) chat_url: Option<String>,
    /// Model for --chat-url (default "default"), --api, --claude, --codex or --aider.
    #[arg(long, value_name = "MODEL")]
    pub(crate) model: Option<String>,
    /// Name of the environment variable holding the key for --chat-url or --api.
    #[arg(long, value_name = "VAR")]
    pub(crate) api_key_env: Option<String>,
    /// Default executor: the Anthropic Messages API (key from ANTHROPIC_API_KEY). The only
    /// kind is anthropic.
    #[arg(
        long,
        value_name = "KIND",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "anthropic"
    )]
    pub(crate) api: Option<String>,
    /// Default executor: Claude Code (`claude -p`); under --work it edits the task's
    /// worktree (file tools only, --permission-mode acceptEdits).
    #[arg(long)]
    pub(crate) claude: bool,
    /// Default executor: the Codex CLI (`codex exec`); under --work it runs in its
    /// workspace-write sandbox in the task's worktree.
    #[arg(long)]
    pub(crate) codex: bool,
    /// Default executor: aider (`aider --message PROMPT --yes-always`); under --work it edits
    /// the task's worktree and leaves the commit to git forum.
    #[arg(long)]
    pub(crate) aider: bool,
    /// Command executor for lanes of the cheap tier.
    #[arg(long, value_name = "CMD")]
    pub(crate) cheap_cmd: Option<String>,
    /// Command executor for lanes of the capable tier.
    #[arg(long, value_name = "CMD")]
    pub(crate) capable_cmd: Option<String>,
    /// Command executor for lanes of the frontier tier.
    #[arg(long, value_name = "CMD")]
    pub(crate) frontier_cmd: Option<String>,
    /// Chat endpoint for the cheap tier.
    #[arg(long, value_name = "URL")]
    pub(crate) cheap_chat_url: Option<String>,
    /// Chat endpoint for the capable tier.
    #[arg(long, value_name = "URL")]
    pub(crate) capable_chat_url: Option<String>,
    /// Chat endpoint for the frontier tier.
    #[arg(long, value_name = "URL")]
    pub(crate) frontier_chat_url: Option<String>,
    /// Model for --cheap-chat-url (default "cheap").
    #[arg(long, value_name = "MODEL")]
    pub(crate) cheap_model: Option<String>,
    /// Model for --capable-chat-url (default "capable").
    #[arg(long, value_name = "MODEL")]
    pub(crate) capable_model: Option<String>,
    /// Model for --frontier-chat-url (default "frontier").
    #[arg(long, value_name = "MODEL")]
    pub(crate) frontier_model: Option<String>,
    /// Key variable for --cheap-chat-url.
    #[arg(long, value_name = "VAR")]
    pub(crate) cheap_api_key_env: Option<String>,
    /// Key variable for --capable-chat-url.
    #[arg(long, value_name = "VAR")]
    pub(crate) capable_api_key_env: Option<String>,
    /// Key variable for --frontier-chat-url.
    #[arg(long, value_name = "VAR")]
    pub(crate) frontier_api_key_env: Option<String>,
    /// Allow chat endpoints on private and link-local addresses (a model server on the LAN).
    #[arg(long)]
    pub(crate) allow_private: bool,
    /// The chat endpoints' models answer with json_schema structured output: OpenAI's
    /// endpoint then takes a model outside the known set (as `json_schema = true` does).
    #[arg(long)]
    pub(crate) json_schema: bool,
}

impl ExecutorArgs {
    /// The flags as the pure merge takes them.
    pub(crate) fn to_flags(&self) -> Flags {
        let mut tiers = BTreeMap::new();
        for (tier, cmd, chat_url, model, key) in [
            (
                Tier::Cheap,
                &self.cheap_cmd,
                &self.cheap_chat_url,
                &self.cheap_model,
                &self.cheap_api_key_env,
            ),
            (
                Tier::Capable,
                &self.capable_cmd,
                &self.capable_chat_url,
                &self.capable_model,
                &self.capable_api_key_env,
            ),
            (
                Tier::Frontier,
                &self.frontier_cmd,
                &self.frontier_chat_url,
                &self.frontier_model,
                &self.frontier_api_key_env,
            ),
        ] {
            let tf = TierFlags {
                cmd: cmd.clone(),
                chat_url: chat_url.clone(),
                model: model.clone(),
                api_key_env: key.clone(),
            };
            if tf != TierFlags::default() {
                tiers.insert(tier, tf);
            }
        }
        Flags {
            cmd: self.cmd.clone(),
            chat_url: self.chat_url.clone(),
            model: self.model.clone(),
            api_key_env: self.api_key_env.clone(),
            api: self.api.clone(),
            claude: self.claude,
            codex: self.codex,
            aider: self.aider,
            tiers,
            allow_private: self.allow_private,
            json_schema: self.json_schema,
        }
    }
}
