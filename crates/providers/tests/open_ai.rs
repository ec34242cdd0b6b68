//! The OpenAI-compatible client against the scripted server (transcripts in
//! fixtures/providers).

mod common;

use common::{collect, fast_http, tool_request};
use serde_json::json;
use sextant_providers::script::{Script, ScriptServer};
use sextant_providers::{
    ApiKey, Event, HttpConfig, Message, OpenAiClient, OpenAiConfig, ProviderError, Request,
    StopReason, ToolCall, Usage,
};

const KEY: &str = "sk-test-abcdef0123456789";

async fn serve_with(fixture: &str, http: HttpConfig) -> (ScriptServer, OpenAiClient) {
    let server = ScriptServer::start(Script::fixture(fixture)).await;
    let mut config = OpenAiConfig::new(format!("{}/v1", server.url()), Some(ApiKey::new(KEY)));
    config.http = http;
    (server, OpenAiClient::new(config).unwrap())
}

async fn serve(fixture: &str) -> (ScriptServer, OpenAiClient) {
    serve_with(fixture, fast_http()).await
}

#[tokio::test]
async fn streams_text_with_crlf_and_cached_usage() {
    let (server, client) = serve("openai_text").await;
    let reply = collect(
        client
            .stream(&Request::new("test-model", 256))
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
            input_tokens: 3000 - 2048,
            output_tokens: 12,
            cache_read_tokens: 2048,
            cache_creation_tokens: 0,
            estimated: false
        })
    );
    let sent = &server.requests()[0];
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = sent.json();
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn two_parallel_tool_calls_then_the_tool_results_round_trip() {
    let (server, client) = serve("openai_parallel_tools").await;
    let mut request = tool_request();
    let reply = collect(client.stream(&request).await.unwrap()).await.ok();
    assert_eq!(reply.stop(), Some(StopReason::ToolUse));
    let calls = reply.tool_calls();
    assert_eq!(
        calls,
        vec![
            ToolCall {
                id: "call_A".into(),
                name: "project_dataset_get".into(),
                arguments: json!({"id": "ds-7"})
            },
            ToolCall {
                id: "call_B".into(),
                name: "io_status".into(),
                arguments: json!({})
            },
        ]
    );
    // The argument deltas kept their own call's index while interleaving.
    let deltas: Vec<_> = reply
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCallArgsDelta { index, delta } => Some((*index, delta.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, vec![(0, "{\"id\":"), (1, "{}"), (0, " \"ds-7\"}")]);
    assert_eq!(reply.last_usage().map(|u| u.input_tokens), Some(410));

    request.messages.push(Message::Assistant {
        text: reply.text(),
        tool_calls: calls,
    });
    request.messages.push(Message::tool_result(
        "call_A",
        r#"{"id":"ds-7","title":"Voltage"}"#,
    ));
    request
        .messages
        .push(Message::tool_result("call_B", "connected"));
    let reply = collect(client.stream(&request).await.unwrap()).await.ok();
    assert_eq!(reply.text(), "ds-7 is Voltage; the source is connected.");

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let body = requests[1].json();
    assert_eq!(
        body["messages"],
        json!([
            // The per-request block follows the history, so the server's prefix cache keeps
            // every earlier message.
            {"role": "system", "content": "You are Sextant's assistant."},
            {"role": "user", "content": "What is ds-7, and is the source up?"},
            // `content: ""`, never null: llama.cpp answers 500 to null.
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_A", "type": "function",
                 "function": {"name": "project_dataset_get", "arguments": "{\"id\":\"ds-7\"}"}},
                {"id": "call_B", "type": "function", "function": {"name": "io_status", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_A", "content": "{\"id\":\"ds-7\",\"title\":\"Voltage\"}"},
            {"role": "tool", "tool_call_id": "call_B", "content": "connected\n\nProject: demo.ssproj"}
        ])
    );
    assert_eq!(body["tools"][0]["type"], json!("function"));
    assert_eq!(
        body["tools"][0]["function"]["name"],
        json!("project_dataset_get")
    );
    assert!(!String::from_utf8_lossy(&requests[1].body).contains("cache_control"));
}

#[tokio::test]
async fn server_error_is_retried_then_succeeds() {
    let (server, client) = serve("openai_server_error").await;
    let reply = collect(
        client
            .stream(&Request::new("test-model", 16))
            .await
            .unwrap(),
    )
    .await
    .ok();
    assert_eq!(reply.text(), "ok");
    assert_eq!(server.requests().len(), 2, "one failure, one retry");
}

#[tokio::test]
async fn server_errors_past_the_retry_budget_are_reported_with_the_attempts() {
    let mut http = fast_http();
    http.retry.max_retries = 0;
    let (server, client) = serve_with("openai_server_error", http).await;
    let error = client
        .stream(&Request::new("test-model", 16))
        .await
        .err()
        .expect("an error");
    match &error {
        ProviderError::Server {
            status: 500,
            attempts: 1,
            message,
            ..
        } => {
            assert_eq!(message, "Internal server error");
        }
        other => panic!("expected Server, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn bad_key_is_a_typed_error_and_not_retried() {
    let (server, client) = serve("openai_bad_key").await;
    let error = client
        .stream(&Request::new("test-model", 16))
        .await
        .err()
        .expect("an error");
    assert!(
        matches!(error, ProviderError::BadKey { status: 401, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("check the key"), "{error}");
    assert_eq!(server.requests().len(), 1, "a 401 is never retried");
}

#[tokio::test]
async fn bad_request_carries_the_providers_message() {
    let (server, client) = serve("openai_bad_request").await;
    let error = client
        .stream(&Request::new("test-model", 16))
        .await
        .err()
        .expect("an error");
    match &error {
        ProviderError::BadRequest { message, .. } => {
            assert_eq!(message, "'messages' must contain at least one message");
        }
        other => panic!("expected BadRequest, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn body_ending_mid_tool_call_reports_the_partial_call() {
    let (_server, client) = serve("openai_cut_mid_tool").await;
    let reply = collect(client.stream(&tool_request()).await.unwrap()).await;
    assert!(reply.tool_calls().is_empty());
    match &reply.error {
        Some(
            error @ ProviderError::StreamCut {
                partial_tool_calls, ..
            },
        ) => {
            assert_eq!(partial_tool_calls.len(), 1);
            let call = &partial_tool_calls[0];
            assert_eq!(
                (call.id.as_str(), call.name.as_str()),
                ("call_C", "project_source_update")
            );
            assert_eq!(call.raw_arguments, r#"{"id": "src-1", "baudRate": 1152"#);
            let text = error.to_string();
            assert!(
                text.contains("project_source_update") && text.contains("1152"),
                "{text}"
            );
        }
        other => panic!("expected StreamCut, got {other:?}"),
    }
}

#[tokio::test]
async fn malformed_tool_arguments_name_the_raw_text() {
    let (_server, client) = serve("openai_malformed_args").await;
    let reply = collect(client.stream(&tool_request()).await.unwrap()).await;
    match reply.error {
        Some(ProviderError::MalformedToolArguments { id, name, raw, .. }) => {
            assert_eq!(
                (id.as_str(), name.as_str()),
                ("call_D", "project_dataset_add")
            );
            assert_eq!(raw, "{'title': 'Temp'}");
        }
        other => panic!("expected MalformedToolArguments, got {other:?}"),
    }
}

#[tokio::test]
async fn reply_larger_than_the_cap_ends_in_an_error() {
    let mut http = fast_http();
    http.max_reply_bytes = 2048;
    let (_server, client) = serve_with("openai_reply_cap", http).await;
    let reply = collect(
        client
            .stream(&Request::new("test-model", 16))
            .await
            .unwrap(),
    )
    .await;
    assert!(
        matches!(
            reply.error,
            Some(ProviderError::ReplyTooLarge { limit: 2048, .. })
        ),
        "{:?}",
        reply.error
    );
    assert!(
        reply.text().len() < 2048,
        "text stops near the cap, not at the end of the reply"
    );

    // The same script under the default cap streams to the end.
    let (_server, client) = serve("openai_reply_cap").await;
    let reply = collect(
        client
            .stream(&Request::new("test-model", 16))
            .await
            .unwrap(),
    )
    .await
    .ok();
    assert_eq!(reply.text().len(), 20 * 400);
}

#[tokio::test]
async fn same_request_gives_byte_identical_bodies() {
    let (server, client) = serve("openai_two_replies").await;
    collect(client.stream(&tool_request()).await.unwrap())
        .await
        .ok();
    collect(client.stream(&tool_request()).await.unwrap())
        .await
        .ok();
    let requests = server.requests();
    assert_eq!(requests[0].body, requests[1].body);
    let body = String::from_utf8(requests[0].body.clone()).unwrap();
    let order = [
        "\"type\":\"object\"",
        "\"properties\"",
        "\"required\"",
        "\"additionalProperties\"",
    ];
    let positions: Vec<usize> = order.iter().map(|k| body.find(k).unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{body}");
}

#[tokio::test]
async fn lists_models_without_a_key() {
    let server = ScriptServer::start(Script::fixture("openai_models")).await;
    let mut config = OpenAiConfig::new(format!("{}/v1/", server.url()), None);
    config.http = fast_http();
    let client = OpenAiClient::new(config).unwrap();
    let models = client.list_models().await.unwrap();
    let ids: Vec<_> = models.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["qwen2.5:7b", "smollm2:135m"]);
    let sent = &server.requests()[0];
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("GET", "/v1/models")
    );
    assert_eq!(sent.header("authorization"), None, "no key, no header");
}

#[tokio::test]
async fn nothing_listening_fails_fast_and_says_so() {
    // Bind and drop a listener to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = OpenAiConfig::new(
        format!("http://127.0.0.1:{port}/v1"),
        Some(ApiKey::new(KEY)),
    );
    config.http = fast_http();
    let error = OpenAiClient::new(config)
        .unwrap()
        .stream(&Request::new("m", 1))
        .await
        .err()
        .unwrap();
    match &error {
        // One quick retry (a server just starting), not the four a flaky network gets.
        ProviderError::NothingListening { attempts, .. } => assert_eq!(*attempts, 2),
        other => panic!("expected NothingListening, got {other:?}"),
    }
    let message = error.to_string();
    assert!(
        message.contains(&format!(
            "nothing is listening at http://127.0.0.1:{port}/v1"
        )) && message.contains("is your local server running?"),
        "{message}"
    );
    assert!(
        !error.is_transient(),
        "a turn does not retry a server that is not there"
    );
    assert!(!format!("{error} {error:?}").contains(KEY));
}

#[test]
fn client_debug_never_shows_the_key() {
    let config = OpenAiConfig::new("http://127.0.0.1:1/v1", Some(ApiKey::new(KEY)));
    let client = OpenAiClient::new(config.clone()).unwrap();
    for shown in [format!("{config:?}"), format!("{client:?}")] {
        assert!(!shown.contains("abcdef0123456789"), "{shown}");
    }
}

#[tokio::test]
async fn silence_mid_tool_call_times_out_with_the_partial_call() {
    let mut http = fast_http();
    http.read_timeout = std::time::Duration::from_millis(300);
    let (_server, client) = serve_with("openai_stall_mid_tool", http).await;
    let reply = collect(client.stream(&tool_request()).await.unwrap()).await;
    match &reply.error {
        Some(ProviderError::StreamCut {
            partial_tool_calls,
            detail,
            ..
        }) => {
            assert!(detail.contains("no data"), "{detail}");
            assert_eq!(
                partial_tool_calls[0].raw_arguments,
                r#"{"id": "src-1", "baud"#
            );
        }
        other => panic!("expected StreamCut, got {other:?}"),
    }
}

// ---- constrained calls -------------------------------------------------------------------

fn constrained(mut request: Request) -> Request {
    request.constrained_tools = true;
    request
}

/// The tool names a constrained body's schema allows, each checked to be pinned (`const`,
/// a one-name `enum`, `type: string`) in a closed object that requires name and arguments.
fn schema_names(body: &serde_json::Value) -> Vec<String> {
    let schema = &body["response_format"]["json_schema"]["schema"];
    assert_eq!(body["response_format"]["type"], "json_schema");
    let choices = schema["anyOf"].as_array().expect("anyOf of the choices");
    assert_eq!(
        choices[0],
        json!({"type": "object", "properties": {"reply": {"type": "string"}},
               "required": ["reply"], "additionalProperties": false})
    );
    choices[1..]
        .iter()
        .map(|choice| {
            assert_eq!(choice["type"], "object", "{choice}");
            assert_eq!(choice["required"], json!(["tool", "arguments"]), "{choice}");
            assert_eq!(choice["additionalProperties"], false, "{choice}");
            let keys: Vec<_> = choice["properties"].as_object().unwrap().keys().collect();
            assert_eq!(keys, ["tool", "arguments"], "the name comes first");
            let tool = &choice["properties"]["tool"];
            let name = tool["const"].as_str().expect("a const name").to_owned();
            assert_eq!(
                *tool,
                json!({"type": "string", "const": name, "enum": [name]})
            );
            name
        })
        .collect()
}

/// Every schema under `schema` closed: no value of any shape (`{}`, `true`, an object
/// without properties, an open map, an array of anything), every object with
/// `additionalProperties: false`, no reference. `at` names the place for the message.
fn assert_closed(schema: &serde_json::Value, at: &str) {
    use serde_json::Value;
    let map = match schema {
        Value::Object(map) => map,
        Value::Bool(false) => return,
        other => panic!("{at}: not a closed schema: {other}"),
    };
    assert!(!map.contains_key("$ref"), "{at}: a reference");
    let shaped = [
        "type",
        "enum",
        "const",
        "properties",
        "anyOf",
        "oneOf",
        "allOf",
        "items",
    ]
    .iter()
    .any(|k| map.contains_key(*k));
    assert!(shaped, "{at}: any value at all: {schema}");
    let types: Vec<&str> = match &map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    if types.contains(&"object") || map.contains_key("properties") {
        assert_eq!(
            map.get("additionalProperties"),
            Some(&Value::Bool(false)),
            "{at}: an open object: {schema}"
        );
        let none = serde_json::Map::new();
        let properties = map
            .get("properties")
            .map_or(&none, |p| p.as_object().unwrap());
        if let Some(Value::Array(required)) = map.get("required") {
            for name in required {
                let name = name.as_str().unwrap();
                assert!(properties.contains_key(name), "{at}: requires {name}");
            }
        }
        for (name, sub) in properties {
            assert_closed(sub, &format!("{at}.{name}"));
        }
    }
    if types.contains(&"array") {
        let items = map.get("items").expect("an array of anything");
        assert_closed(items, &format!("{at}[]"));
    }
    if types.contains(&"string") && map.get("description") == Some(&json!("a JSON object, as text"))
    {
        assert!(map["maxLength"].as_u64().is_some(), "{at}: unbounded text");
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(subs)) = map.get(key) {
            for (i, sub) in subs.iter().enumerate() {
                assert_closed(sub, &format!("{at}.{key}[{i}]"));
            }
        }
    }
}

fn tool(name: &str, parameters: serde_json::Value) -> sextant_providers::ToolDefinition {
    sextant_providers::ToolDefinition {
        name: name.into(),
        description: format!("Does {name}."),
        parameters,
    }
}

#[test]
fn the_constrained_schema_enumerates_exactly_the_offered_tools_and_closes_every_object() {
    // Parameter schemas of every shape a tool may have; each set must come out closed.
    let plain = tool(
        "plain",
        json!({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}),
    );
    let nested = tool(
        "nested",
        json!({"type": "object", "properties": {"range": {"type": "object",
            "properties": {"min": {"type": "number"}, "max": {"type": "number"}}}}}),
    );
    let free_param = tool(
        "meta_executeCommand",
        json!({"type": "object", "properties": {"name": {"type": "string"},
            "params": {"type": "object", "additionalProperties": true}},
            "required": ["name"], "additionalProperties": false}),
    );
    let deep_free = tool(
        "deep_free",
        json!({"type": "object", "properties": {"opts": {"type": "object",
            "properties": {"extra": {"type": "object"}, "any": {"description": "anything"}}}}}),
    );
    let free_items = tool(
        "free_items",
        json!({"type": "object", "properties": {"rows": {"type": "array",
            "items": {"type": "object"}}, "tags": {"type": "array"}}}),
    );
    let map = tool(
        "labels_set",
        json!({"type": "object", "properties": {"labels": {"type": "object",
            "additionalProperties": {"type": "string"}}}}),
    );
    let any_root = tool("any_root", json!({"type": "object"}));
    // What schemars makes of an empty struct with `deny_unknown_fields`.
    let no_params = tool(
        "no_params",
        json!({"type": "object", "additionalProperties": false}),
    );
    let recursive = tool(
        "tree",
        json!({"type": "object", "$defs": {"N": {"type": "object",
            "properties": {"n": {"$ref": "#/$defs/N"}}}},
            "properties": {"root": {"$ref": "#/$defs/N"}}}),
    );
    let alternatives = tool(
        "target_pick",
        json!({"type": "object", "properties": {"target": {"anyOf": [
            {"type": "object", "properties": {"id": {"type": "string"}}},
            {"type": "null"}]}}}),
    );
    let all = vec![
        plain.clone(),
        nested.clone(),
        free_param,
        deep_free,
        free_items,
        map,
        any_root,
        no_params,
        recursive,
        alternatives,
    ];
    let sets: Vec<(&str, Vec<sextant_providers::ToolDefinition>)> = vec![
        ("one tool", vec![plain.clone()]),
        ("the client tests' tools", common::tool_request().tools),
        ("two", vec![nested, plain]),
        ("every shape", all),
    ];
    for (case, tools) in sets {
        let mut request = constrained(common::tool_request());
        request.tools = tools.clone();
        let body: serde_json::Value =
            serde_json::from_slice(&sextant_providers::open_ai::request_body(&request, true))
                .unwrap();
        let offered: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
        assert_eq!(
            schema_names(&body),
            offered,
            "{case}: exactly the offered names"
        );
        let choices = body["response_format"]["json_schema"]["schema"]["anyOf"]
            .as_array()
            .unwrap();
        for choice in choices {
            assert_closed(choice, case);
        }
        assert!(body.get("tools").is_none(), "{case}: no native tools");
    }
}

#[test]
fn a_free_value_deep_in_the_parameters_is_bounded_text_read_back_in_place() {
    let tools = vec![tool(
        "deep_free",
        json!({"type": "object", "properties": {"opts": {"type": "object",
            "properties": {"extra": {"type": "object"}, "n": {"type": "integer"}}}}}),
    )];
    let mut request = constrained(common::tool_request());
    request.tools = tools;
    let body: serde_json::Value =
        serde_json::from_slice(&sextant_providers::open_ai::request_body(&request, false)).unwrap();
    let arguments =
        &body["response_format"]["json_schema"]["schema"]["anyOf"][1]["properties"]["arguments"];
    assert_eq!(
        arguments["properties"]["opts"]["properties"]["extra"],
        json!({"type": "string", "maxLength": 400, "description": "a JSON object, as text"})
    );
    assert_eq!(
        arguments["properties"]["opts"]["additionalProperties"],
        false
    );
}

#[tokio::test]
async fn a_constrained_call_cut_by_the_reply_cap_is_a_cut_reply_not_a_malformed_call() {
    let (server, client) = serve("openai_constrained_cut_at_cap").await;
    let request = constrained(tool_request());
    let reply = collect(client.stream(&request).await.unwrap()).await.ok();
    assert_eq!(reply.stop(), Some(StopReason::MaxTokens));
    assert!(reply.tool_calls().is_empty(), "{:?}", reply.events);
    assert!(
        !reply
            .events
            .iter()
            .any(|e| matches!(e, Event::ToolCallStart { .. })),
        "no call begun"
    );
    assert_eq!(reply.text(), "", "the cut JSON is not shown as text");
    // What was sent constrained the reply to exactly the offered tools.
    let body = server.requests()[0].json();
    assert_eq!(schema_names(&body), ["project_dataset_get", "io_status"]);
}

#[tokio::test]
async fn a_constrained_reply_ending_inside_its_call_is_a_cut_stream_with_the_call_so_far() {
    let (_server, client) = serve("openai_constrained_ends_mid_call").await;
    let reply = collect(client.stream(&constrained(tool_request())).await.unwrap()).await;
    assert!(reply.tool_calls().is_empty());
    match &reply.error {
        Some(ProviderError::StreamCut {
            partial_tool_calls, ..
        }) => {
            assert_eq!(partial_tool_calls.len(), 1, "{partial_tool_calls:?}");
            let call = &partial_tool_calls[0];
            assert_eq!(call.name, "project_dataset_get");
            assert_eq!(call.raw_arguments, r#"{"id": "ds"#);
        }
        other => panic!("expected StreamCut, got {other:?}"),
    }
}

#[tokio::test]
async fn a_constrained_call_of_a_tool_not_offered_is_one_typed_error() {
    let (_server, client) = serve("openai_constrained_unknown_tool").await;
    let reply = collect(client.stream(&constrained(tool_request())).await.unwrap()).await;
    assert!(
        reply.tool_calls().is_empty(),
        "never a call: {:?}",
        reply.events
    );
    assert_eq!(reply.text(), "");
    let error = reply.error.expect("an error");
    let message = error.to_string();
    match error {
        ProviderError::UnknownTool { name, offered, .. } => {
            assert_eq!(name, "project_delete");
            assert_eq!(offered, ["project_dataset_get", "io_status"]);
        }
        other => panic!("expected UnknownTool, got {other:?}"),
    }
    assert!(message.contains("does not exist"), "{message}");
    assert!(
        !message.contains('{') && !message.contains("project_delete"),
        "plain words, no raw JSON, no internal name: {message}"
    );
}
