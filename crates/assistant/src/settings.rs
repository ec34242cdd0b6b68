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

/// Limits the person set for the model; `None`: what the server says, else the table.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase", default)]
pub struct LimitOverrides {
    /// Tokens of prompt plus reply the model takes.
    pub context_window: Option<u32>,
    /// The reply cap.
    pub max_output_tokens: Option<u32>,
    /// Tool calls one turn may make.
    pub max_tool_calls: Option<u32>,
}

impl LimitOverrides {
    /// Why these values cannot be used, naming the field; `None` when they can.
    pub fn invalid(&self) -> Option<(&'static str, String)> {
        if let Some(w) = self
            .context_window
            .filter(|w| !(1024..=10_000_000).contains(w))
        {
            return Some((
                "contextWindow",
                format!("{w} is not a context window: give 1024 tokens or more"),
            ));
        }
        if let Some(o) = self.max_output_tokens {
            let window = self.context_window.unwrap_or(u32::MAX);
            if !(64..=window / 2).contains(&o) {
                return Some((
                    "maxOutputTokens",
                    format!(
                        "{o} does not fit: give 64 tokens or more, at most half the context window"
                    ),
                ));
            }
        }
        if let Some(c) = self.max_tool_calls.filter(|c| !(1..=100).contains(c)) {
            return Some((
                "maxToolCalls",
                format!("{c} is not a number of calls: give 1 to 100"),
            ));
        }
        None
    }
}

/// Where a limit's value came from, for the settings to say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum LimitOrigin {
    /// The person set it.
    You,
    /// The server refused a longer request, naming its context.
    ServerRefused,
    /// llama.cpp's `/props`.
    LlamaCpp,
    /// Ollama's `/api/show`.
    Ollama,
    /// vLLM's model list.
    Vllm,
    /// LM Studio's model endpoint.
    LmStudio,
    /// Sextant's table of known models (or its default for an unknown one).
    Table,
}

/// One limit and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Limit {
    pub value: u32,
    pub from: LimitOrigin,
}

/// The limits a turn is sized by, each with where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    pub context_window: Limit,
    pub max_output_tokens: Limit,
    pub max_tool_calls: Limit,
    /// Everything the request is sized by (these limits in place).
    #[serde(skip)]
    #[schemars(skip)]
    pub capabilities: Capabilities,
}

impl Limits {
    /// The person's setting, else the context the server refused above, else the one it
    /// says it runs, else the table; the reply cap and calls per turn follow the window
    /// unless the person set them.
    pub fn of(
        settings: &ServiceSettings,
        server: Option<capabilities::ServerContext>,
        refused_above: Option<u32>,
    ) -> Limits {
        use capabilities::ServerKind;
        let table = settings.capabilities();
        let said = server.map(|s| {
            let from = match s.from {
                ServerKind::LlamaCpp => LimitOrigin::LlamaCpp,
                ServerKind::Ollama => LimitOrigin::Ollama,
                ServerKind::Vllm => LimitOrigin::Vllm,
                ServerKind::LmStudio => LimitOrigin::LmStudio,
            };
            (s.tokens, from)
        });
        let (mut window, mut from) = match (settings.limits.context_window, said) {
            (Some(w), _) => (w, LimitOrigin::You),
            (None, Some(said)) => said,
            (None, None) => (table.context_window, LimitOrigin::Table),
        };
        // What the server refused above is what it enforces, whatever anyone said.
        if let Some(r) = refused_above.filter(|r| *r < window) {
            (window, from) = (r, LimitOrigin::ServerRefused);
        }
        let sized = if from == LimitOrigin::Table {
            table
        } else {
            capabilities::sized_by_context(table, window)
        };
        let window = sized.context_window;
        let out = match settings.limits.max_output_tokens {
            Some(o) => Limit {
                value: o.min(window / 2),
                from: LimitOrigin::You,
            },
            None => Limit {
                value: sized.max_output_tokens,
                from,
            },
        };
        let calls = match settings.limits.max_tool_calls {
            Some(c) => Limit {
                value: c,
                from: LimitOrigin::You,
            },
            None => Limit {
                value: sized.max_tool_calls,
                from,
            },
        };
        Limits {
            context_window: Limit {
                value: window,
                from,
            },
            max_output_tokens: out,
            max_tool_calls: calls,
            capabilities: Capabilities {
                max_output_tokens: out.value,
                max_tool_calls: calls.value,
                ..sized
            },
        }
    }
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
    /// The person's own limits for the model, each overriding what the server says and
    /// the table.
    pub limits: LimitOverrides,
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
            limits: LimitOverrides::default(),
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
            .field("limits", &self.limits)
            .field("approval_timeout", &self.approval_timeout)
            .field("stall_notice", &self.stall_notice)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capabilities::{ServerContext, ServerKind};

    fn local(model: &str) -> ServiceSettings {
        ServiceSettings::new(
            ProviderKind::OpenaiCompatible,
            "http://127.0.0.1:8080/v1",
            model,
        )
    }

    fn said(tokens: u32, from: ServerKind) -> Option<ServerContext> {
        Some(ServerContext { tokens, from })
    }

    #[test]
    fn limits_come_from_the_person_then_the_server_then_the_table() {
        use LimitOrigin::*;
        let overridden = |o: LimitOverrides| ServiceSettings {
            limits: o,
            ..local("my-finetune")
        };
        // (what, settings, what the server said, what it refused above, window, reply, calls)
        type Row = (
            &'static str,
            ServiceSettings,
            Option<ServerContext>,
            Option<u32>,
            Limit,
            Limit,
            Limit,
        );
        let rows: Vec<Row> = vec![
            (
                "an unknown local model, the server silent: the table's small default",
                local("my-finetune"),
                None,
                None,
                Limit {
                    value: 4096,
                    from: Table,
                },
                Limit {
                    value: 512,
                    from: Table,
                },
                Limit {
                    value: 3,
                    from: Table,
                },
            ),
            (
                "llama-server -c 2048",
                local("SmolLM2-135M-Instruct"),
                said(2048, ServerKind::LlamaCpp),
                None,
                Limit {
                    value: 2048,
                    from: LlamaCpp,
                },
                Limit {
                    value: 256,
                    from: LlamaCpp,
                },
                Limit {
                    value: 3,
                    from: LlamaCpp,
                },
            ),
            (
                "a 128 k Llama 3.3 on vLLM, which the table takes for an 8 k model",
                local("meta-llama/Llama-3.3-70B-Instruct"),
                said(131_072, ServerKind::Vllm),
                None,
                Limit {
                    value: 131_072,
                    from: Vllm,
                },
                Limit {
                    value: 4096,
                    from: Vllm,
                },
                Limit {
                    value: 25,
                    from: Vllm,
                },
            ),
            (
                "the server refused above 4096 though it says 8192",
                local("SmolLM2-135M-Instruct"),
                said(8192, ServerKind::LlamaCpp),
                Some(4096),
                Limit {
                    value: 4096,
                    from: ServerRefused,
                },
                Limit {
                    value: 512,
                    from: ServerRefused,
                },
                Limit {
                    value: 3,
                    from: ServerRefused,
                },
            ),
            (
                "the person's window wins; their call count too",
                overridden(LimitOverrides {
                    context_window: Some(32_768),
                    max_output_tokens: None,
                    max_tool_calls: Some(10),
                }),
                said(2048, ServerKind::Ollama),
                None,
                Limit {
                    value: 32_768,
                    from: You,
                },
                Limit {
                    value: 4096,
                    from: You,
                },
                Limit {
                    value: 10,
                    from: You,
                },
            ),
            (
                "but not over what the server refused above",
                overridden(LimitOverrides {
                    context_window: Some(32_768),
                    ..Default::default()
                }),
                said(2048, ServerKind::LlamaCpp),
                Some(2048),
                Limit {
                    value: 2048,
                    from: ServerRefused,
                },
                Limit {
                    value: 256,
                    from: ServerRefused,
                },
                Limit {
                    value: 3,
                    from: ServerRefused,
                },
            ),
        ];
        for (what, settings, server, refused, window, reply, calls) in rows {
            let limits = Limits::of(&settings, server, refused);
            assert_eq!(
                (
                    limits.context_window,
                    limits.max_output_tokens,
                    limits.max_tool_calls
                ),
                (window, reply, calls),
                "{what}"
            );
            assert_eq!(limits.capabilities.context_window, window.value, "{what}");
            assert_eq!(limits.capabilities.max_output_tokens, reply.value, "{what}");
        }
    }

    #[test]
    fn limits_a_person_cannot_mean_are_refused_by_name() {
        let bad = [
            (
                LimitOverrides {
                    context_window: Some(100),
                    ..Default::default()
                },
                "contextWindow",
            ),
            (
                LimitOverrides {
                    context_window: Some(4096),
                    max_output_tokens: Some(4000),
                    ..Default::default()
                },
                "maxOutputTokens",
            ),
            (
                LimitOverrides {
                    max_tool_calls: Some(0),
                    ..Default::default()
                },
                "maxToolCalls",
            ),
        ];
        for (o, field) in bad {
            assert_eq!(o.invalid().map(|(f, _)| f), Some(field), "{o:?}");
        }
        assert_eq!(LimitOverrides::default().invalid(), None);
    }
}
