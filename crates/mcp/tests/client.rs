//! An MCP client (rmcp's) drives the server over in-process pipes and over loopback TCP:
//! the handshake, the tool list, calls under each tier, errors, and resources.

use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject, ReadResourceRequestParams};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::ServiceExt;
use serde_json::{json, Value};
use sextant_mcp::{McpOptions, McpTcpServer, ServeError, FRAME_URI, PROJECT_URI};
use sextant_runtime::{Runtime, RuntimeHandle, Workspace};
use sextant_telemetry::project::Project;
use tokio::io::{AsyncBufReadExt, BufReader};

type Client = RunningService<RoleClient, ()>;

fn runtime() -> RuntimeHandle {
    Runtime::new(Workspace::new(Project::default())).spawn(None)
}

/// A client connected to a fresh server over an in-process pipe.
async fn connect(options: McpOptions) -> (Client, RuntimeHandle) {
    let runtime = runtime();
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(server_io);
    let handle = runtime.clone();
    tokio::spawn(async move {
        sextant_mcp::serve(handle, options, read, write)
            .await
            .expect("the session ends cleanly");
    });
    let client = ().serve(client_io).await.expect("handshake");
    (client, runtime)
}

fn args(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("arguments must be an object, not {other}"),
    }
}

async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args(arguments)))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn ok(result: CallToolResult) -> Value {
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    // The text is the same JSON as the structured content.
    let from_text: Value = serde_json::from_str(&text(&result)).expect("the text is JSON");
    if let Some(structured) = &result.structured_content {
        assert_eq!(structured, &from_text);
    }
    from_text
}

fn refused(result: &CallToolResult) -> Value {
    assert_eq!(result.is_error, Some(true), "{}", text(result));
    result
        .structured_content
        .clone()
        .expect("errors carry the command error")
}

#[tokio::test]
async fn the_handshake_offers_every_command_as_a_tool() {
    let (client, runtime) = connect(McpOptions::default()).await;
    let info = client.peer_info().expect("initialized");
    assert!(info.capabilities.tools.is_some());
    assert!(info.capabilities.resources.is_some());
    assert_eq!(info.server_info.as_ref().unwrap().name, "sextant");

    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), runtime.specs().len());
    for tool in &tools {
        // The strictest rule clients apply (model APIs): [A-Za-z0-9_-]{1,64}.
        assert!(
            tool.name.len() <= 64
                && tool
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
            "{}",
            tool.name
        );
        assert_eq!(
            tool.input_schema.get("type"),
            Some(&json!("object")),
            "{}",
            tool.name
        );
    }
    let add = tools
        .iter()
        .find(|t| t.name == "project_dataset_add")
        .expect("project.dataset.add is a tool");
    let props = add.input_schema["properties"].as_object().unwrap();
    assert!(props.contains_key("group") && props.contains_key("dataset"));
    assert!(add
        .description
        .as_deref()
        .unwrap()
        .contains("Tier: Confirm"));
    assert_eq!(add.title.as_deref(), Some("project.dataset.add"));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn safe_calls_and_edits_run_and_edits_are_visible_and_undoable() {
    let (client, _) = connect(McpOptions::default()).await;
    let project = ok(call(&client, "project_get", json!({})).await);
    assert_eq!(project["groups"], json!([]));

    let group = ok(call(
        &client,
        "project_group_add",
        json!({"title": "Battery", "widget": "multiPlot"}),
    )
    .await);
    let group_id = group["id"]
        .as_str()
        .expect("the new group's id")
        .to_string();

    // The dotted command name works as well.
    let project = ok(call(&client, "project.get", json!({})).await);
    assert_eq!(project["groups"][0]["id"], group_id);
    assert_eq!(project["groups"][0]["title"], "Battery");

    let resource = client
        .read_resource(ReadResourceRequestParams::new(PROJECT_URI))
        .await
        .unwrap();
    let rmcp::model::ResourceContents::TextResourceContents {
        text, mime_type, ..
    } = &resource.contents[0]
    else {
        panic!("the project is text")
    };
    assert_eq!(mime_type.as_deref(), Some("application/json"));
    let from_resource: Value = serde_json::from_str(text).unwrap();
    assert_eq!(from_resource, project);

    ok(call(&client, "project_undo", json!({})).await);
    let project = ok(call(&client, "project_get", json!({})).await);
    assert_eq!(project["groups"], json!([]), "undo took the group back");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn tiers_apply_to_mcp_callers() {
    let (client, _) = connect(McpOptions::default()).await;
    let error = refused(&call(&client, "console_send", json!({"data": "hi"})).await);
    assert_eq!(error["code"], "notAllowed");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("allow device control"), "{message}");
    assert!(message.contains("--allow-device-control"), "{message}");

    let error = refused(&call(&client, "assistant_restore", json!({"id": 1})).await);
    assert_eq!(error["code"], "notAllowed");
    client.cancel().await.unwrap();

    // With the user's consent the policy lets it through; it then fails for want of a
    // connected device, which is a different error.
    let consenting = McpOptions {
        allow_device_control: true,
        ..McpOptions::default()
    };
    let (client, _) = connect(consenting).await;
    let tools = client.list_all_tools().await.unwrap();
    let send = tools.iter().find(|t| t.name == "console_send").unwrap();
    assert!(send.description.as_deref().unwrap().contains("allowed"));
    let error = refused(&call(&client, "console_send", json!({"data": "hi"})).await);
    assert_ne!(error["code"], "notAllowed", "{error}");
    let error = refused(&call(&client, "assistant_restore", json!({"id": 1})).await);
    assert_eq!(
        error["code"], "notAllowed",
        "consent never unlocks destructive commands"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn bad_arguments_name_their_path_and_unknown_tools_are_protocol_errors() {
    let (client, _) = connect(McpOptions::default()).await;
    let result = call(&client, "project_group_add", json!({"title": 5})).await;
    let error = refused(&result);
    assert_eq!(error["code"], "invalidParams");
    assert_eq!(error["path"], "title");
    assert!(text(&result).contains("(at `title`)"), "{}", text(&result));

    let unknown = client
        .call_tool(CallToolRequestParams::new("project_nothing"))
        .await
        .expect_err("an unknown tool is not a tool result");
    match unknown {
        ServiceError::McpError(e) => {
            assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS);
            assert!(e.message.contains("project_nothing"));
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
    // The session is still usable.
    ok(call(&client, "project_history", json!({})).await);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn resources_list_the_project_and_the_latest_frame() {
    let (client, _) = connect(McpOptions::default()).await;
    let resources = client.list_all_resources().await.unwrap();
    let mut uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    uris.sort();
    assert_eq!(uris, [FRAME_URI, PROJECT_URI]);

    let frame = client
        .read_resource(ReadResourceRequestParams::new(FRAME_URI))
        .await
        .unwrap();
    let rmcp::model::ResourceContents::TextResourceContents { text, .. } = &frame.contents[0]
    else {
        panic!("the frame is text")
    };
    let frame: Value = serde_json::from_str(text).unwrap();
    assert_eq!(frame["values"], json!({}), "nothing is connected");
    assert!(frame["elapsedS"].is_number());

    let missing = client
        .read_resource(ReadResourceRequestParams::new("sextant://nothing"))
        .await;
    assert!(missing.is_err());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn tcp_serves_loopback_only_and_caps_clients() {
    let refused = McpTcpServer::bind(
        "0.0.0.0:0".parse().unwrap(),
        runtime(),
        McpOptions::default(),
    )
    .await;
    assert!(matches!(
        refused,
        Err(ServeError::Listen(
            sextant_guard::GuardError::NotLoopback { .. }
        ))
    ));

    let mut options = McpOptions::default();
    options.limits.max_clients = 1;
    let server = McpTcpServer::bind("127.0.0.1:0".parse().unwrap(), runtime(), options)
        .await
        .unwrap();
    let stream = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();
    let client = ().serve(stream).await.expect("handshake over TCP");
    let group = ok(call(&client, "project_group_add", json!({"title": "T"})).await);
    assert!(group["id"].is_string());

    let second = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();
    let mut line = String::new();
    BufReader::new(second).read_line(&mut line).await.unwrap();
    let busy: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(busy["error"]["code"], -32000);
    assert!(busy["error"]["message"]
        .as_str()
        .unwrap()
        .contains("too many clients"));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_program_runs_only_with_the_users_flag() {
    let dir = tempfile::tempdir().unwrap();
    let source = json!({"source": {"id": "tool", "connection": {
        "type": "process", "program": "/bin/sh", "args": ["-c", "echo ran > ran; sleep 30"],
        "workingDir": dir.path()}}});
    let (client, runtime) = connect(McpOptions::default()).await;
    let error = refused(&call(&client, "project_source_add", source.clone()).await);
    assert_eq!(error["code"], "notAllowed", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("--allow-process-sources"),
        "{error}"
    );
    // Through a project brought in whole, connecting is where it stops.
    let project = Project {
        sources: vec![serde_json::from_value(source["source"].clone()).unwrap()],
        ..Project::default()
    };
    let content = project.to_json_string();
    ok(call(
        &client,
        "project_openContent",
        json!({"name": "shared.json", "content": content}),
    )
    .await);
    let error = refused(&call(&client, "io_connect", json!({})).await);
    assert_eq!(error["code"], "notAllowed", "{error}");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(!dir.path().join("ran").exists(), "the program ran");
    client.cancel().await.unwrap();
    drop(runtime);

    let (client, _) = connect(McpOptions {
        allow_process_sources: true,
        ..McpOptions::default()
    })
    .await;
    ok(call(&client, "project_source_add", source).await);
    ok(call(&client, "io_connect", json!({})).await);
    let mut ran = false;
    for _ in 0..50 {
        ran |= dir.path().join("ran").exists();
        if ran {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(ran, "the flag is the user's consent");
    ok(call(&client, "io_disconnect", json!({})).await);
    client.cancel().await.unwrap();
}
