//! What a model can do: a small table by provider and model name, and a probe of a local
//! server's tool support.
//!
//! Owns the facts the assistant sizes a request by – the context window, whether native
//! tool calls work, whether to constrain calls to a JSON schema, the reply cap – so a small
//! local model gets a reply cap that fits its context instead of the whole context, and
//! tools it can actually call. The table is data (first matching pattern wins); a model it
//! does not know gets the safe defaults of its kind of endpoint: a local one is assumed
//! small, a cloud one large.

use std::net::IpAddr;

use serde::Deserialize;

use crate::error::Api;
use crate::http::{self, Call};
use crate::open_ai::OpenAiClient;

/// What a model can do, as far as Sextant knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Tokens of prompt plus reply the model takes.
    pub context_window: u32,
    /// Whether native tool calls are known to work.
    pub native_tools: bool,
    /// Whether to offer tools as a JSON schema by default (local OpenAI-compatible servers).
    pub constrain: bool,
    /// The reply cap (`max_tokens`).
    pub max_output_tokens: u32,
    /// Tool calls one turn may make: a tiny model calls tool after tool with arguments that
    /// fit the schema and mean nothing, and each call costs it half a minute on a laptop.
    pub max_tool_calls: u32,
}

/// One row: a model-name pattern (`*` matches any run of characters, case-insensitive)
/// and what such a model can do.
struct Row {
    api: Api,
    /// `None`: any endpoint; `Some(true)`: only a local one.
    local: Option<bool>,
    pattern: &'static str,
    caps: Capabilities,
}

const fn caps(context_window: u32, native_tools: bool, constrain: bool, out: u32) -> Capabilities {
    Capabilities {
        context_window,
        native_tools,
        constrain,
        max_output_tokens: out,
        // Large models get the loop's own cap; small ones a few calls a turn.
        max_tool_calls: if context_window >= 16_384 { 25 } else { 3 },
    }
}

/// First match wins, so narrow patterns come before broad ones.
const TABLE: &[Row] = &[
    Row {
        api: Api::Anthropic,
        local: None,
        pattern: "claude-*",
        caps: caps(200_000, true, false, 4096),
    },
    Row {
        api: Api::OpenAi,
        local: Some(false),
        pattern: "gpt-4.1*",
        caps: caps(1_000_000, true, false, 4096),
    },
    Row {
        api: Api::OpenAi,
        local: Some(false),
        pattern: "gpt-*",
        caps: caps(128_000, true, false, 4096),
    },
    Row {
        api: Api::OpenAi,
        local: Some(false),
        pattern: "o*",
        caps: caps(200_000, true, false, 4096),
    },
    // Small local models: a reply cap of an eighth of the context or less, constrained calls.
    Row {
        api: Api::OpenAi,
        local: None,
        pattern: "*smollm*",
        caps: caps(8192, false, true, 512),
    },
    Row {
        api: Api::OpenAi,
        local: None,
        pattern: "*qwen2.5*",
        caps: caps(32_768, true, true, 2048),
    },
    Row {
        api: Api::OpenAi,
        local: None,
        pattern: "*qwen3*",
        caps: caps(32_768, true, true, 2048),
    },
    Row {
        api: Api::OpenAi,
        local: None,
        pattern: "*llama3*",
        caps: caps(8192, true, true, 1024),
    },
    Row {
        api: Api::OpenAi,
        local: None,
        pattern: "*llama-3*",
        caps: caps(8192, true, true, 1024),
    },
    Row {
        api: Api::OpenAi,
        local: None,
        pattern: "*phi*",
        caps: caps(4096, false, true, 512),
    },
    Row {
        api: Api::OpenAi,
        local: None,
        pattern: "*gemma*",
        caps: caps(8192, false, true, 1024),
    },
];

/// Unknown cloud models: large and tool-capable, as every current cloud model is.
const CLOUD_DEFAULT: Capabilities = caps(128_000, true, false, 4096);
/// Unknown local models: assumed small – a 4 k context, calls constrained, a short reply.
const LOCAL_DEFAULT: Capabilities = caps(4096, false, true, 512);

/// What `model` at an endpoint of `api` can do (`local`: the endpoint is this machine or
/// its network, see [`is_local`]).
pub fn lookup(api: Api, local: bool, model: &str) -> Capabilities {
    let model = model.to_ascii_lowercase();
    TABLE
        .iter()
        .find(|row| {
            row.api == api
                && row.local.is_none_or(|l| l == local)
                && matches_pattern(row.pattern, &model)
        })
        .map(|row| row.caps)
        .unwrap_or(if local && api == Api::OpenAi {
            LOCAL_DEFAULT
        } else {
            CLOUD_DEFAULT
        })
}

/// `*` matches any run of characters; everything else matches itself.
fn matches_pattern(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// Whether `base_url` points at this machine or a private network (a server the user runs:
/// Ollama, llama.cpp, LM Studio, vLLM) rather than a cloud API.
pub fn is_local(base_url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base_url) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    match host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        Ok(IpAddr::V4(ip)) => ip.is_loopback() || ip.is_private() || ip.is_link_local(),
        Ok(IpAddr::V6(ip)) => ip.is_loopback() || (ip.segments()[0] & 0xfe00) == 0xfc00,
        Err(_) => host == "localhost" || host.ends_with(".localhost") || host.ends_with(".local"),
    }
}

/// Whether a server's chat template passes tools to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSupport {
    Supported,
    /// The server says its template has no tool support: tools sent natively are dropped.
    Unsupported,
    /// The server does not say (a cloud API, an older server, no answer).
    Unknown,
}

/// What a local server says about the model it runs, from its own endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerFacts {
    pub tools: ToolSupport,
    /// The context it really runs the model with, when it says.
    pub context: Option<ServerContext>,
}

impl ServerFacts {
    const UNKNOWN: ServerFacts = ServerFacts {
        tools: ToolSupport::Unknown,
        context: None,
    };
}

/// A context window a server reported, and which kind of server said so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerContext {
    pub tokens: u32,
    pub from: ServerKind,
}

/// The kinds of local server Sextant can ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// llama.cpp's `GET /props` (`n_ctx`, set by `-c`).
    LlamaCpp,
    /// Ollama's `POST /api/show` (`num_ctx` of the model's parameters).
    Ollama,
    /// vLLM's `GET /v1/models` (`max_model_len`).
    Vllm,
    /// LM Studio's `GET /api/v0/models/{model}` (`loaded_context_length`).
    LmStudio,
}

#[derive(Deserialize)]
struct LlamaProps {
    chat_template_caps: Option<TemplateCaps>,
    default_generation_settings: Option<GenerationSettings>,
    n_ctx: Option<u32>,
}

#[derive(Deserialize)]
struct GenerationSettings {
    n_ctx: Option<u32>,
}

#[derive(Deserialize)]
struct TemplateCaps {
    supports_tools: Option<bool>,
    supports_tool_calls: Option<bool>,
}

#[derive(Deserialize)]
struct OllamaShow {
    capabilities: Option<Vec<String>>,
    /// The Modelfile's parameters, one `name value` per line (`num_ctx 8192`).
    parameters: Option<String>,
    model_info: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The context Ollama runs a model with when nothing sets `num_ctx`.
const OLLAMA_DEFAULT_CTX: u32 = 4096;

impl OllamaShow {
    fn context(&self) -> Option<u32> {
        let set = self.parameters.as_deref().and_then(|p| {
            p.lines().find_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some("num_ctx"))
                    .then(|| words.next()?.parse().ok())
                    .flatten()
            })
        });
        // Without num_ctx Ollama runs its default, never more than the model was trained on.
        let trained = self.model_info.as_ref().and_then(|info| {
            info.iter()
                .find(|(k, _)| k.ends_with(".context_length"))
                .and_then(|(_, v)| v.as_u64())
                .map(|v| v.min(u32::MAX as u64) as u32)
        });
        set.or_else(|| trained.map(|t| t.min(OLLAMA_DEFAULT_CTX)))
    }
}

#[derive(Deserialize)]
struct ModelList {
    data: Vec<ListedModel>,
}

#[derive(Deserialize)]
struct ListedModel {
    id: String,
    max_model_len: Option<u32>,
}

#[derive(Deserialize)]
struct LmStudioModel {
    loaded_context_length: Option<u32>,
    max_context_length: Option<u32>,
}

fn tools_from(supported: bool) -> ToolSupport {
    if supported {
        ToolSupport::Supported
    } else {
        ToolSupport::Unsupported
    }
}

impl OpenAiClient {
    /// Asks the server what it runs `model` with – whether its template passes tools, and
    /// the context window it really has: llama.cpp's `GET /props`, then Ollama's
    /// `POST /api/show`, then vLLM's model list and LM Studio's model endpoint. Each is
    /// optional and quick to give up; no answer is ever an error (the probe must not stop a
    /// chat).
    pub async fn probe(&self, model: &str) -> ServerFacts {
        let Some(origin) = origin(&self.base_url()) else {
            return ServerFacts::UNKNOWN;
        };
        let config = self.probe_http();
        let headers = self.probe_headers();
        let get = |url: String| {
            let (config, headers) = (&config, &headers);
            async move {
                let call = Call {
                    api: Api::OpenAi,
                    url: &url,
                    model,
                };
                http::get_json::<serde_json::Value>(self.http(), config, &call, headers)
                    .await
                    .ok()
            }
        };
        // llama.cpp: a /props answer is the whole story.
        if let Some(props) = get(format!("{origin}/props"))
            .await
            .and_then(|v| serde_json::from_value::<LlamaProps>(v).ok())
        {
            let caps = props.chat_template_caps.as_ref();
            let tools = caps
                .and_then(|c| c.supports_tools.or(c.supports_tool_calls))
                .map_or(ToolSupport::Unknown, tools_from);
            let n_ctx = props
                .default_generation_settings
                .and_then(|g| g.n_ctx)
                .or(props.n_ctx)
                .filter(|n| *n > 0);
            if caps.is_some() || n_ctx.is_some() {
                return ServerFacts {
                    tools,
                    context: n_ctx.map(|tokens| ServerContext {
                        tokens,
                        from: ServerKind::LlamaCpp,
                    }),
                };
            }
        }
        let show = self
            .http()
            .post(format!("{origin}/api/show"))
            .headers(headers.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(serde_json::json!({ "model": model }).to_string())
            .timeout(config.read_timeout)
            .send()
            .await;
        if let Ok(response) = show.and_then(|r| r.error_for_status()) {
            if let Ok(show) = http::read_json::<OllamaShow>(response, &config, Api::OpenAi).await {
                if show.capabilities.is_some() || show.model_info.is_some() {
                    return ServerFacts {
                        tools: show
                            .capabilities
                            .as_ref()
                            .map_or(ToolSupport::Unknown, |c| {
                                tools_from(c.iter().any(|c| c == "tools"))
                            }),
                        context: show.context().map(|tokens| ServerContext {
                            tokens,
                            from: ServerKind::Ollama,
                        }),
                    };
                }
            }
        }
        let base = self.base_url();
        let listed = get(format!("{}/models", base.trim_end_matches('/')))
            .await
            .and_then(|v| serde_json::from_value::<ModelList>(v).ok())
            .and_then(|list| list.data.into_iter().find(|m| m.id == model))
            .and_then(|m| m.max_model_len);
        if let Some(tokens) = listed {
            return ServerFacts {
                tools: ToolSupport::Unknown,
                context: Some(ServerContext {
                    tokens,
                    from: ServerKind::Vllm,
                }),
            };
        }
        let lm_studio = get(format!("{origin}/api/v0/models/{model}"))
            .await
            .and_then(|v| serde_json::from_value::<LmStudioModel>(v).ok())
            .and_then(|m| m.loaded_context_length.or(m.max_context_length));
        ServerFacts {
            tools: ToolSupport::Unknown,
            context: lm_studio.map(|tokens| ServerContext {
                tokens,
                from: ServerKind::LmStudio,
            }),
        }
    }

    /// Whether the server's template passes tools to `model` (see [`OpenAiClient::probe`]).
    pub async fn tool_support(&self, model: &str) -> ToolSupport {
        self.probe(model).await.tools
    }
}

/// Capabilities sized by a context window the server reported: the reply cap an eighth of
/// it (256 to 4096 tokens), a few tool calls a turn below 16 k and the loop's cap above. What
/// the table knows about the model's tool calling is kept.
pub fn sized_by_context(base: Capabilities, context_window: u32) -> Capabilities {
    let window = context_window.max(1024);
    Capabilities {
        context_window: window,
        max_output_tokens: (window / 8).clamp(256, 4096),
        max_tool_calls: if window >= 16_384 { 25 } else { 3 },
        ..base
    }
}

/// `scheme://host:port` of a base URL (the version path dropped).
fn origin(base_url: &str) -> Option<String> {
    let url = reqwest::Url::parse(base_url).ok()?;
    let origin = url.origin();
    origin.is_tuple().then(|| origin.ascii_serialization())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_by_endpoint_and_name() {
        let cases: &[(Api, bool, &str, Capabilities)] = &[
            (
                Api::Anthropic,
                false,
                "claude-sonnet-4-5",
                caps(200_000, true, false, 4096),
            ),
            (
                Api::OpenAi,
                true,
                "SmolLM2-135M-Instruct.Q4_1.gguf",
                caps(8192, false, true, 512),
            ),
            (
                Api::OpenAi,
                false,
                "gpt-4.1-mini",
                caps(1_000_000, true, false, 4096),
            ),
            (
                Api::OpenAi,
                true,
                "qwen2.5:7b",
                caps(32_768, true, true, 2048),
            ),
            (Api::OpenAi, true, "my-own-finetune", LOCAL_DEFAULT),
            (Api::OpenAi, false, "deepseek-chat", CLOUD_DEFAULT),
            // A cloud-only row never matches a local server's model of the same name.
            (Api::OpenAi, true, "gpt-oss-20b", LOCAL_DEFAULT),
        ];
        for (api, local, model, want) in cases {
            assert_eq!(lookup(*api, *local, model), *want, "{model}");
        }
    }

    #[test]
    fn small_models_get_a_few_calls_a_turn_large_ones_the_loops_cap() {
        assert_eq!(lookup(Api::OpenAi, true, "smollm2").max_tool_calls, 3);
        assert_eq!(LOCAL_DEFAULT.max_tool_calls, 3);
        assert_eq!(lookup(Api::Anthropic, false, "claude-x").max_tool_calls, 25);
        assert_eq!(lookup(Api::OpenAi, true, "qwen2.5:7b").max_tool_calls, 25);
    }

    #[test]
    fn local_endpoints() {
        for url in [
            "http://127.0.0.1:8080/v1",
            "http://localhost:11434/v1",
            "http://192.168.1.20:1234/v1",
            "http://10.0.0.5/v1",
            "http://[::1]:8000/v1",
            "http://box.local:8080/v1",
        ] {
            assert!(is_local(url), "{url}");
        }
        for url in [
            "https://api.openai.com/v1",
            "http://8.8.8.8/v1",
            "not a url",
        ] {
            assert!(!is_local(url), "{url}");
        }
    }

    #[test]
    fn patterns() {
        assert!(matches_pattern("*smollm*", "hf/smollm2-135m"));
        assert!(matches_pattern("claude-*", "claude-x"));
        assert!(!matches_pattern("claude-*", "my-claude-x"));
        assert!(matches_pattern("a*b*c", "axxbyyc"));
        assert!(!matches_pattern("a*b*c", "axxbyy"));
        assert_eq!(
            origin("http://127.0.0.1:8080/v1/").as_deref(),
            Some("http://127.0.0.1:8080")
        );
    }
}
