//! Asking a local server what it runs: each kind of server answers its own endpoint in its
//! own wire format (llama.cpp `/props`, Ollama `/api/show`, vLLM's model list, LM Studio's
//! model endpoint), the others' endpoints answer 404 as those servers do, and the probe
//! reports the context the server really runs the model with.

use serde_json::{json, Value};
use sextant_providers::capabilities::{ServerContext, ServerKind, ToolSupport};
use sextant_providers::script::{Script, ScriptServer};
use sextant_providers::{OpenAiClient, OpenAiConfig};

fn not_found() -> Value {
    json!({"status": 404, "text": "Not Found"})
}

async fn probe(turns: Vec<Value>, model: &str) -> (ServerContext, ToolSupport, Vec<String>) {
    let script: Script = serde_json::from_value(json!({ "turns": turns })).unwrap();
    let server = ScriptServer::start(script).await;
    let client =
        OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.url()), None)).unwrap();
    let facts = client.probe(model).await;
    let asked = server
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    (
        facts.context.expect("the server said its context"),
        facts.tools,
        asked,
    )
}

#[tokio::test]
async fn each_kind_of_server_says_the_context_it_runs() {
    // llama-server started with `-c 2048` (its /props, trimmed to the fields read here).
    let llama = json!({"json": {
        "default_generation_settings": {"n_ctx": 2048, "params": {"n_predict": -1}},
        "total_slots": 1, "model_path": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "chat_template_caps": {"supports_tools": true, "supports_tool_calls": true}}});
    let (ctx, tools, asked) = probe(vec![llama], "SmolLM2-135M-Instruct").await;
    assert_eq!(
        (ctx.tokens, ctx.from, tools),
        (2048, ServerKind::LlamaCpp, ToolSupport::Supported)
    );
    assert_eq!(asked, ["GET /props"]);

    // Ollama with a Modelfile that sets num_ctx: that is what it runs.
    let ollama = json!({"json": {
        "modelfile": "FROM mistral\nPARAMETER num_ctx 16384",
        "parameters": "num_ctx                        16384\nstop                           \"[INST]\"",
        "details": {"family": "llama", "parameter_size": "7.2B"},
        "model_info": {"general.architecture": "llama", "llama.context_length": 32768},
        "capabilities": ["completion", "tools"]}});
    let (ctx, tools, asked) = probe(vec![not_found(), ollama], "mistral:7b").await;
    assert_eq!(
        (ctx.tokens, ctx.from, tools),
        (16384, ServerKind::Ollama, ToolSupport::Supported)
    );
    assert_eq!(asked, ["GET /props", "POST /api/show"]);

    // Ollama without num_ctx runs its default, not the 128 k the model was trained for.
    let ollama_default = json!({"json": {
        "parameters": "stop \"<|eot_id|>\"",
        "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
        "capabilities": ["completion"]}});
    let (ctx, tools, _) = probe(vec![not_found(), ollama_default], "llama3.3").await;
    assert_eq!((ctx.tokens, tools), (4096, ToolSupport::Unsupported));

    // vLLM: its model list carries max_model_len for each model it serves.
    let vllm = json!({"json": {"object": "list", "data": [
        {"id": "meta-llama/Llama-3.3-70B-Instruct", "object": "model", "created": 1760000000,
         "owned_by": "vllm", "root": "meta-llama/Llama-3.3-70B-Instruct", "parent": null,
         "max_model_len": 131072, "permission": []}]}});
    let (ctx, _, asked) = probe(
        vec![not_found(), not_found(), vllm],
        "meta-llama/Llama-3.3-70B-Instruct",
    )
    .await;
    assert_eq!((ctx.tokens, ctx.from), (131072, ServerKind::Vllm));
    assert_eq!(asked, ["GET /props", "POST /api/show", "GET /v1/models"]);

    // LM Studio: the context the model was loaded with, not the most it could take.
    let lm_list = json!({"json": {"object": "list", "data": [
        {"id": "qwen2.5-7b-instruct", "object": "model", "owned_by": "organization_owner"}]}});
    let lm_model = json!({"json": {"id": "qwen2.5-7b-instruct", "object": "model", "type": "llm",
        "publisher": "lmstudio-community", "arch": "qwen2", "state": "loaded",
        "max_context_length": 32768, "loaded_context_length": 8192}});
    let (ctx, _, asked) = probe(
        vec![not_found(), not_found(), lm_list, lm_model],
        "qwen2.5-7b-instruct",
    )
    .await;
    assert_eq!((ctx.tokens, ctx.from), (8192, ServerKind::LmStudio));
    assert_eq!(
        asked.last().unwrap(),
        "GET /api/v0/models/qwen2.5-7b-instruct"
    );
}

#[tokio::test]
async fn a_server_that_says_nothing_is_no_error() {
    let script: Script = serde_json::from_value(
        json!({"turns": [not_found(), not_found(), not_found(), not_found()]}),
    )
    .unwrap();
    let server = ScriptServer::start(script).await;
    let client =
        OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.url()), None)).unwrap();
    let facts = client.probe("anything").await;
    assert_eq!((facts.tools, facts.context), (ToolSupport::Unknown, None));
}
