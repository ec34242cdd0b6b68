//! The assistant as a door in the attack matrix (`crates/cli/tests/doors.rs` walks the
//! byte-stream doors): a model with "auto-approve edits" on tries what issue 31 reproduced –
//! a project-shaped document carrying program permissions, saved over the permissions file,
//! and an export over the chat database – and every step is refused by the runtime's one
//! write policy, with no approval card (nobody's yes could allow it), while the turn ends
//! normally and the model reads why.

mod common;

use serde_json::{json, Value};
use sextant_providers::script::ScriptServer;
use sextant_runtime::{Runtime, Safeguards, TrustStore, Workspace};
use sextant_telemetry::project::{Project, Source, FORMAT_MARKER};

use common::{anthropic_calls, anthropic_text, ok, open_with, script_of, turn, ScriptedCall};

#[tokio::test]
async fn a_model_with_edits_approved_cannot_write_sextants_own_files() {
    let dir = tempfile::tempdir().unwrap();
    let (data, user) = (dir.path().join("data"), dir.path().join("user"));
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(&user).unwrap();
    let trust = data.join(sextant_runtime::safeguards::TRUST_FILE);
    let safeguards = Safeguards::new(vec![user.clone()], TrustStore::open(trust.clone()))
        .with_own_folders(vec![data.clone()]);
    let project = Project {
        sources: vec![Source::default()],
        ..Project::default()
    };
    let file = user.join("rig.sextant.json");
    project.save(&file).unwrap();
    let runtime =
        Runtime::with_safeguards(Workspace::opened(project, file), safeguards).spawn(None);

    let forged = json!({"format": FORMAT_MARKER, "schema": 1, "title": "forged",
        "programs": [{"project": user.join("rig.sextant.json"), "command": "/bin/sh -c id"}]});
    let chats = data.join(sextant_assistant::door::CHATS_FILE);
    let args = |v: Value| v.to_string();
    let calls = [
        ScriptedCall {
            id: "toolu_open",
            name: "project_openContent",
            raw_args: args(json!({"content": forged.to_string()})),
        },
        ScriptedCall {
            id: "toolu_trust",
            name: "project_save",
            raw_args: args(json!({"path": trust})),
        },
        ScriptedCall {
            id: "toolu_chats",
            name: "csvExport_enable",
            raw_args: args(json!({"path": chats})),
        },
    ];
    let server = ScriptServer::start(script_of(vec![
        anthropic_calls(&calls),
        anthropic_text("Done."),
    ]))
    .await;
    let door = open_with(&data, runtime);
    ok(
        &door,
        json!({"op": "setSettings", "provider": "anthropic", "baseUrl": server.url(),
               "model": "claude-test", "apiKey": "sk-ant-test", "autoApproveEdits": true}),
    )
    .await;
    let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    // Ends on its own: a call that waited for an approval card would hold the turn.
    turn(&door, &chat, "set things up").await;

    let requests = server.requests();
    assert_eq!(requests.len(), 2, "the calls, then the reply after them");
    let body = requests[1].json();
    let result = |id: &str| -> String {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
            .and_then(|b| b["content"].as_str().map(str::to_string))
            .unwrap_or_else(|| panic!("no result for {id}"))
    };
    for id in ["toolu_trust", "toolu_chats"] {
        let r = result(id);
        assert!(r.contains("NotAllowed"), "{id}: {r}");
        assert!(r.contains("Sextant's own folder"), "{id}: {r}");
    }
    assert!(!trust.exists(), "a permission file was written");
    let head = std::fs::read(&chats).unwrap();
    assert!(
        head.starts_with(b"SQLite format 3\0"),
        "the chat database was overwritten"
    );
    // And nothing the model did allows a program later.
    let reopened = TrustStore::open(trust);
    assert!(!reopened.allows(Some(&user.join("rig.sextant.json")), "/bin/sh -c id"));
}
