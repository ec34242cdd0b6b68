//! The assistant's settings as the person chose them: the provider, its address and model,
//! the approvals, and which mechanisms are on ([`Mechanisms`]); what the model can do
//! follows from them. A leaf under the service and the mechanism table, which both read it.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sextant_commands::Policy;
use sextant_providers::capabilities::{self, Capabilities};
use sextant_providers::{
    AnthropicClient, AnthropicConfig, Api, ApiKey, Client, OpenAiClient, OpenAiConfig,
    ProviderError,
};

use crate::engine::language::Language;

/// Which wire format the provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    Anthropic,
    /// Chat Completions: OpenAI, Ollama, llama.cpp, vLLM, LM Studio, OpenRouter, …
    OpenaiCompatible,
}

/// The assistant's mechanisms, each its own persisted setting (spec 20, "Settings"), all on
/// by default. Off means absent: a mechanism that is off is not built for the turn and adds
/// zero bytes to its requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Mechanisms {
    /// Spec 20 §2: the remembered facts go with every request (when there is a store),
    /// after the cache breakpoint, in an envelope.
    pub memory: bool,
    /// Spec 20 §1: the sentinel instruction in the role block, its strip and its verdicts.
    pub context_probe: bool,
    /// Spec 20 §3: a chat started from another carries that chat's digest.
    pub handoff_seeding: bool,
    /// Spec 20 §5: each successful edit is checked by a Safe command, and the outcome is in
    /// its result.
    pub auto_verify: bool,
    /// Spec 20 §4: a message that names a domain gets its skill loaded by the app.
    pub skill_routing: bool,
    /// Spec 30 A2–A3: the model may search and cite this project's chats.
    pub archive_tools: bool,
    /// Spec 40 §1: the focus rules in the role block (cached), in the UI's language.
    pub focus_prompt: bool,
    /// Spec 40 §2: a message clearly about one job shows the model that job's tools.
    pub intent_narrowing: bool,
    /// Spec 40 §4: big tool results are shown to the model as their key lines, the older
    /// answers of a read made again as a pointer to the newest, and command documentation
    /// read in an earlier turn as a pointer to read it again (the log keeps them whole).
    pub tool_result_compression: bool,
    /// Spec 40 §3: over budget, the older history is summarized keeping its topics
    /// (instead of the oldest messages being dropped).
    pub topic_compaction: bool,
    /// Spec 40 §5: a note when the person switched topics.
    pub topic_marker: bool,
}

impl Default for Mechanisms {
    fn default() -> Self {
        Mechanisms {
            memory: true,
            context_probe: true,
            handoff_seeding: true,
            auto_verify: true,
            skill_routing: true,
            archive_tools: true,
            focus_prompt: true,
            intent_narrowing: true,
            tool_result_compression: true,
            topic_compaction: true,
            topic_marker: true,
        }
    }
}

impl ProviderKind {
    /// The stored name (`anthropic`, `openai-compatible`).
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenaiCompatible => "openai-compatible",
        }
    }
}

/// Whether tools are offered as a JSON schema the reply must match (spec: weak model
/// first). `Auto`: on for a local OpenAI-compatible server whose model the capability
/// table says to constrain (and for unknown local models), off for cloud providers.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum ConstrainedCalls {
    #[default]
    Auto,
    On,
    Off,
}

/// The user's assistant settings. `Debug` never shows the API key.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSettings {
    pub provider: ProviderKind,
    /// Anthropic: without `/v1`; OpenAI-compatible: with the version path.
    pub base_url: String,
    pub model: String,
    /// Held in memory only; never serialized, so a door echoing settings cannot leak it.
    #[serde(skip_serializing, default)]
    pub api_key: Option<String>,
    pub auto_approve_edits: bool,
    pub allow_device_control: bool,
    /// Spec 20: the docs block in the system prompt.
    pub docs_block: bool,
    /// Spec 20: the live state block (project summary, connection status) in every turn.
    pub live_state: bool,
    /// Which of the assistant's mechanisms are on.
    pub mechanisms: Mechanisms,
    /// The UI's language: the language of Sextant's own text in a request (focus, notes).
    pub language: Language,
    /// Tools as a JSON schema the reply must match (OpenAI-compatible servers only).
    pub constrained_calls: ConstrainedCalls,
    /// How long an approval prompt waits for an answer before the call is denied.
    pub approval_timeout: Duration,
    /// Silence from the server after which the panel hears `waiting` (and again as often).
    pub stall_notice: Duration,
}

impl ServiceSettings {
    pub fn new(
        provider: ProviderKind,
        base_url: impl Into<String>,
        model: impl Into<String>,
    ) -> Self {
        ServiceSettings {
            provider,
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            auto_approve_edits: false,
            allow_device_control: false,
            docs_block: true,
            live_state: true,
            mechanisms: Mechanisms::default(),
            language: Language::En,
            constrained_calls: ConstrainedCalls::Auto,
            approval_timeout: Duration::from_secs(300),
            stall_notice: Duration::from_secs(10),
        }
    }

    /// What the configured model can do (the capability table; unknown models get the
    /// defaults of their kind of endpoint).
    pub fn capabilities(&self) -> Capabilities {
        match self.provider {
            ProviderKind::Anthropic => capabilities::lookup(Api::Anthropic, false, &self.model),
            ProviderKind::OpenaiCompatible => capabilities::lookup(
                Api::OpenAi,
                capabilities::is_local(&self.base_url),
                &self.model,
            ),
        }
    }

    /// Whether this turn's tools go as a JSON schema (see [`ConstrainedCalls`]).
    pub fn constrained(&self) -> bool {
        self.provider == ProviderKind::OpenaiCompatible
            && match self.constrained_calls {
                ConstrainedCalls::On => true,
                ConstrainedCalls::Off => false,
                ConstrainedCalls::Auto => {
                    capabilities::is_local(&self.base_url) && self.capabilities().constrain
                }
            }
    }

    pub(crate) fn policy(&self) -> Policy {
        Policy {
            auto_approve_edits: self.auto_approve_edits,
            allow_device_control: self.allow_device_control,
            non_interactive: false,
            // The assistant never gets a standing yes: a program or a file outside the
            // user's folders is always a person's call, each time.
            allow_process_sources: false,
            paths_from_person: false,
        }
    }

    pub(crate) fn client(&self) -> Result<Client, ProviderError> {
        let key = self.api_key.clone().map(ApiKey::new);
        Ok(match self.provider {
            ProviderKind::Anthropic => {
                let mut config = AnthropicConfig::new(key.unwrap_or_else(|| ApiKey::new("")));
                config.base_url = self.base_url.clone();
                Client::Anthropic(AnthropicClient::new(config)?)
            }
            ProviderKind::OpenaiCompatible => {
                Client::OpenAi(OpenAiClient::new(OpenAiConfig::new(&self.base_url, key))?)
            }
        })
    }
}

impl fmt::Debug for ServiceSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceSettings")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("auto_approve_edits", &self.auto_approve_edits)
            .field("allow_device_control", &self.allow_device_control)
            .field("docs_block", &self.docs_block)
            .field("live_state", &self.live_state)
            .field("mechanisms", &self.mechanisms)
            .field("language", &self.language)
            .field("constrained_calls", &self.constrained_calls)
            .field("approval_timeout", &self.approval_timeout)
            .field("stall_notice", &self.stall_notice)
            .finish()
    }
}
