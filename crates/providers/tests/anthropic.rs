//! The Anthropic client against the scripted server (transcripts in fixtures/providers).

mod common;

use std::time::Duration;

use common::{collect, fast_http, tool_request};
use serde_json::json;
use sextant_providers::script::{Script, ScriptServer};
use sextant_providers::{
    AnthropicClient, AnthropicConfig, ApiKey, Event, Message, ProviderError, Request, StopReason,
    ToolCall, Usage,
};

const KEY: &str = "sk-ant-test-0123456789";

async fn serve(fixture: &str) -> (ScriptServer, AnthropicClient) {
    let server = ScriptServer::start(Script::fixture(fixture)).await;
    let mut config = AnthropicConfig::new(ApiKey::new(KEY));
    config.base_url = server.url();
    config.http = fast_http();
    (server, AnthropicClient::new(config).unwrap())
}

#[tokio::test]
async fn streams_text_split_across_chunks_with_cache_usage() {
    let (server, client) = serve("anthropic_text").await;
    let reply = collect(
        client
            .stream(&Request::new("claude-test", 256))
            .await
            .unwrap(),
    )
    .await
    .ok();
    assert_eq!(reply.text(), "Voltage is 3.3 V – stable ✓");
    assert_eq!(reply.stop(), Some(StopReason::EndTurn));
    assert_eq!(
        reply.last_usage(),
        Some(Usage {
            input_tokens: 25,
            output_tokens: 12,
            cache_read_tokens: 3400,
            cache_creation_tokens: 1200,
            estimated: false
        })
    );
    // Usage comes before Stop, so a caller has it when the reply ends.
    assert!(matches!(
        reply.events[reply.events.len() - 2],
        Event::Usage(_)
    ));

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(sent.header("x-api-key"), Some(KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(sent.json()["stream"], json!(true));
}

#[tokio::test]
async fn two_tool_use_blocks_then_the_tool_results_round_trip() {
    let (server, client) = serve("anthropic_parallel_tools").await;
    let mut request = tool_request();
    let reply = collect(client.stream(&request).await.unwrap()).await.ok();
    assert_eq!(reply.text(), "Checking both.");
    assert_eq!(reply.stop(), Some(StopReason::ToolUse));
    let calls = reply.tool_calls();
    assert_eq!(
        calls,
        vec![
            ToolCall {
                id: "toolu_01A".into(),
                name: "project_dataset_get".into(),
                arguments: json!({"id": "ds-7"})
            },
            ToolCall {
                id: "toolu_01B".into(),
                name: "io_status".into(),
                arguments: json!({})
            },
        ]
    );
    let starts: Vec<_> = reply
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCallStart { index, id, .. } => Some((*index, id.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(starts, vec![(1, "toolu_01A"), (2, "toolu_01B")]);

    // Second turn: the assistant's calls and both results go back.
    request.messages.push(Message::Assistant {
        text: reply.text(),
        tool_calls: calls,
    });
    request.messages.push(Message::tool_result(
        "toolu_01A",
        r#"{"id":"ds-7","title":"Voltage"}"#,
    ));
    request
        .messages
        .push(Message::tool_result("toolu_01B", "connected"));
    let reply = collect(client.stream(&request).await.unwrap()).await.ok();
    assert_eq!(reply.text(), "ds-7 is Voltage; the source is connected.");

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let body = requests[1].json();
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "What is ds-7, and is the source up?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking both."},
                {"type": "tool_use", "id": "toolu_01A", "name": "project_dataset_get", "input": {"id": "ds-7"}},
                {"type": "tool_use", "id": "toolu_01B", "name": "io_status", "input": {}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "{\"id\":\"ds-7\",\"title\":\"Voltage\"}"},
                {"type": "tool_result", "tool_use_id": "toolu_01B", "content": "connected"},
                // The per-request block follows the history, so the prefix cache keeps
                // every earlier message.
                {"type": "text", "text": "Project: demo.ssproj"}
            ]}
        ])
    );
    // Cache breakpoints where the caller put them: the first system block and the last tool.
    assert_eq!(
        body["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(body["system"].as_array().unwrap().len(), 1);
    assert!(body["tools"][0].get("cache_control").is_none());
    assert_eq!(
        body["tools"][1]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(body["tools"][0]["input_schema"]["required"], json!(["id"]));
}

#[tokio::test]
async fn rate_limit_waits_for_retry_after_and_retries_once() {
    let (server, client) = serve("anthropic_rate_limited").await;
    let reply = collect(
        client
            .stream(&Request::new("claude-test", 16))
            .await
            .unwrap(),
    )
    .await
    .ok();
    assert_eq!(reply.text(), "ok");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "exactly one retry");
    // The server asked for 1 s; our own backoff is 20 ms, so only honouring the header
    // explains a gap this long (a lower bound: a slow machine cannot make this flaky).
    let gap = requests[1].at - requests[0].at;
    assert!(gap >= Duration::from_millis(950), "retried after {gap:?}");
    assert_eq!(
        requests[0].body, requests[1].body,
        "the retry resends the same bytes"
    );
}

#[tokio::test]
async fn bad_key_is_a_typed_error_and_not_retried() {
    let (server, client) = serve("anthropic_bad_key").await;
    let error = client
        .stream(&Request::new("claude-test", 16))
        .await
        .err()
        .expect("an error");
    match &error {
        ProviderError::BadKey {
            status: 401,
            message,
            ..
        } => assert_eq!(message, "invalid x-api-key"),
        other => panic!("expected BadKey, got {other:?}"),
    }
    assert!(!error.to_string().contains(KEY));
    assert_eq!(server.requests().len(), 1, "a 401 is never retried");
}

#[tokio::test]
async fn unknown_model_is_not_found() {
    let (server, client) = serve("anthropic_not_found").await;
    let error = client
        .stream(&Request::new("claude-nope", 16))
        .await
        .err()
        .expect("an error");
    match &error {
        ProviderError::NotFound { model, message, .. } => {
            assert_eq!(
                (model.as_str(), message.as_str()),
                ("claude-nope", "model: claude-nope")
            );
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn connection_reset_mid_tool_call_reports_the_partial_call() {
    let (_server, client) = serve("anthropic_cut_mid_tool").await;
    let reply = collect(client.stream(&tool_request()).await.unwrap()).await;
    assert!(
        reply.tool_calls().is_empty(),
        "an incomplete call is never reported complete"
    );
    match reply.error {
        Some(ProviderError::StreamCut {
            partial_tool_calls,
            ref detail,
            ..
        }) => {
            assert_eq!(partial_tool_calls.len(), 1, "{detail}");
            let call = &partial_tool_calls[0];
            assert_eq!(
                (call.id.as_str(), call.name.as_str()),
                ("toolu_01C", "project_source_update")
            );
            assert_eq!(call.raw_arguments, r#"{"id": "src-1", "baud"#);
        }
        other => panic!("expected StreamCut, got {other:?}"),
    }
}

#[tokio::test]
async fn malformed_tool_arguments_name_the_raw_text() {
    let (_server, client) = serve("anthropic_malformed_args").await;
    let reply = collect(client.stream(&tool_request()).await.unwrap()).await;
    let error = reply.error.expect("an error");
    match &error {
        ProviderError::MalformedToolArguments { id, name, raw, .. } => {
            assert_eq!(
                (id.as_str(), name.as_str()),
                ("toolu_01D", "project_dataset_add")
            );
            assert_eq!(raw, r#"{"title": "Temp",}"#);
        }
        other => panic!("expected MalformedToolArguments, got {other:?}"),
    }
    assert!(
        error.to_string().contains(r#"{"title": "Temp",}"#),
        "{error}"
    );
}

#[tokio::test]
async fn error_event_mid_stream_ends_the_stream_after_the_text_so_far() {
    let (_server, client) = serve("anthropic_overloaded_event").await;
    let reply = collect(
        client
            .stream(&Request::new("claude-test", 16))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(reply.text(), "Hel");
    match &reply.error {
        Some(error @ ProviderError::Api { kind, message, .. }) => {
            assert_eq!(
                (kind.as_str(), message.as_str()),
                ("overloaded_error", "Overloaded")
            );
            assert!(error.is_transient());
        }
        other => panic!("expected Api error, got {other:?}"),
    }
}

#[tokio::test]
async fn same_request_gives_byte_identical_bodies() {
    let (server, client) = serve("anthropic_two_replies").await;
    collect(client.stream(&tool_request()).await.unwrap())
        .await
        .ok();
    collect(client.stream(&tool_request()).await.unwrap())
        .await
        .ok();
    let requests = server.requests();
    assert_eq!(requests[0].body, requests[1].body);
    // The caller's key order survives (no sorting): the prompt cache sees the schema as written.
    let body = String::from_utf8(requests[0].body.clone()).unwrap();
    let order = [
        "\"type\":\"object\"",
        "\"properties\"",
        "\"required\"",
        "\"additionalProperties\"",
    ];
    let positions: Vec<usize> = order.iter().map(|k| body.find(k).unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{body}");
    assert_eq!(
        body.as_bytes(),
        sextant_providers::anthropic::request_body(&tool_request())
    );
}

#[tokio::test]
async fn lists_models() {
    let (server, client) = serve("anthropic_models").await;
    let models = client.list_models().await.unwrap();
    let ids: Vec<_> = models
        .iter()
        .map(|m| (m.id.as_str(), m.display_name.as_deref()))
        .collect();
    assert_eq!(
        ids,
        vec![
            ("claude-sonnet-4-5", Some("Claude Sonnet 4.5")),
            ("claude-haiku-4-5", Some("Claude Haiku 4.5"))
        ]
    );
    let sent = &server.requests()[0];
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("GET", "/v1/models?limit=1000")
    );
    assert_eq!(sent.header("x-api-key"), Some(KEY));
}

#[test]
fn client_debug_never_shows_the_key() {
    let config = AnthropicConfig::new(ApiKey::new(KEY));
    let client = AnthropicClient::new(config.clone()).unwrap();
    for shown in [
        format!("{config:?}"),
        format!("{client:?}"),
        format!("{config:#?}"),
    ] {
        assert!(!shown.contains(KEY), "{shown}");
        assert!(!shown.contains("0123456789"), "{shown}");
    }
}

/// `MAX_ERROR_BODY` in `src/http.rs`: the most of an error response's body the client reads.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// An error response with a megabyte body: the client reads at most `MAX_ERROR_BODY` of it,
/// so the error stays small whatever the server sends, and still names the status. The JSON
/// case fails if the whole body is read: its message is then the megabyte itself.
#[tokio::test]
async fn a_megabyte_error_body_gives_a_bounded_error_that_names_the_status() {
    const MIB: usize = 1024 * 1024;
    let json_body = format!(
        r#"{{"type":"error","error":{{"type":"invalid_request_error","message":"{}"}}}}"#,
        "x".repeat(MIB)
    );
    let cases = [
        (400, json_body, "HTTP 400"),
        (418, "y".repeat(MIB), "HTTP 418"),
    ];
    for (status, text, named) in cases {
        let script: Script = serde_json::from_value(json!({
            "turns": [{"status": status, "text": text}]
        }))
        .unwrap();
        let server = ScriptServer::start(script).await;
        let mut config = AnthropicConfig::new(ApiKey::new(KEY));
        config.base_url = server.url();
        config.http = common::fast_http();
        let client = AnthropicClient::new(config).unwrap();
        let error = client
            .stream(&Request::new("claude-test", 16))
            .await
            .err()
            .expect("an error");
        let shown = error.to_string();
        assert!(
            shown.len() <= MAX_ERROR_BODY + 512,
            "HTTP {status}: an error of {} bytes",
            shown.len()
        );
        assert!(shown.contains(named), "{}", &shown[..shown.len().min(300)]);
        match (status, &error) {
            (400, ProviderError::BadRequest { .. }) => {}
            (418, ProviderError::Http { status: 418, .. }) => {}
            (_, other) => panic!("HTTP {status}: unexpected {other:?}"),
        }
        assert_eq!(server.requests().len(), 1, "HTTP {status} is not retried");
    }
}
