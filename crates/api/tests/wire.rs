//! The wire types the UI reads, as one JSON Schema (`ui/src/lib/wire/schema.json`) from
//! which the UI's TypeScript types are generated (`npm --prefix ui run gen:wire`): the Rust
//! types are the only definition, and a change to one that is not regenerated fails here
//! first, then in the UI's own check that its generated file matches the schema.

use schemars::generate::SchemaSettings;
use serde_json::{json, Map, Value};
use sextant_assistant::door;
use sextant_assistant::service::ServiceEvent;
use sextant_commands::{CommandError, ErrorCode, Tier};
use sextant_telemetry::Project;

/// The schema of what the doors send (serialization: every field a value always has is
/// required), with one property per wire type so every one gets a TypeScript type.
fn wire_schema() -> Value {
    let mut generator = SchemaSettings::draft07().for_serialize().into_generator();
    let mut properties = Map::new();
    properties.insert(
        "project".into(),
        generator.subschema_for::<Project>().to_value(),
    );
    properties.insert("tier".into(), generator.subschema_for::<Tier>().to_value());
    properties.insert(
        "errorCode".into(),
        generator.subschema_for::<ErrorCode>().to_value(),
    );
    properties.insert(
        "commandError".into(),
        generator.subschema_for::<CommandError>().to_value(),
    );
    // The chat door (`{"type":"chat",…}`): its requests (one per op, from the door's own
    // table), its replies and the events it pushes.
    properties.insert("chatRequest".into(), door::request_schema());
    properties.insert(
        "chatListEntry".into(),
        generator.subschema_for::<door::ChatListEntry>().to_value(),
    );
    properties.insert(
        "chatSettings".into(),
        generator.subschema_for::<door::SettingsView>().to_value(),
    );
    properties.insert(
        "modelEntry".into(),
        generator.subschema_for::<door::ModelEntry>().to_value(),
    );
    properties.insert(
        "chatHistory".into(),
        generator.subschema_for::<door::HistoryReply>().to_value(),
    );
    properties.insert(
        "chatEvent".into(),
        generator.subschema_for::<ServiceEvent>().to_value(),
    );
    // The archive (`searchSessions`, `searchEvents`, `cite`).
    properties.insert(
        "archiveSearchRequest".into(),
        generator
            .subschema_for::<sextant_assistant::chatlog::SearchRequest>()
            .to_value(),
    );
    properties.insert(
        "archiveSearchPage".into(),
        generator
            .subschema_for::<sextant_assistant::chatlog::SearchPage>()
            .to_value(),
    );
    properties.insert(
        "archiveHitRef".into(),
        generator
            .subschema_for::<sextant_assistant::chatlog::HitRef>()
            .to_value(),
    );
    properties.insert(
        "archiveCited".into(),
        generator
            .subschema_for::<sextant_assistant::chatlog::cite::Cited>()
            .to_value(),
    );
    properties.insert(
        "memoryFact".into(),
        generator.subschema_for::<sextant_memory::Fact>().to_value(),
    );
    properties.insert(
        "memoryWritten".into(),
        generator
            .subschema_for::<sextant_memory::Written>()
            .to_value(),
    );
    properties.insert(
        "retrievalHealth".into(),
        generator
            .subschema_for::<sextant_retrieval::diagnostics::Health>()
            .to_value(),
    );
    // The recorded sessions as `sessions.list` and the recorder report them.
    properties.insert(
        "session".into(),
        generator
            .subschema_for::<sextant_sessions::SessionSummary>()
            .to_value(),
    );
    properties.insert(
        "writerReport".into(),
        generator
            .subschema_for::<sextant_sessions::writer::WriterReport>()
            .to_value(),
    );
    // The live run as `io.status` reports it.
    properties.insert(
        "ioStatus".into(),
        generator
            .subschema_for::<sextant_runtime::commands::IoStatus>()
            .to_value(),
    );
    // The dashboard's view as `dashboard.getView`/`dashboard.setView` return it and the
    // `viewChanged` event carries it.
    properties.insert(
        "dashboardView".into(),
        generator
            .subschema_for::<sextant_runtime::DashboardView>()
            .to_value(),
    );
    // What a page asks the display for (`{"type":"display",…}`, the desktop's `display`).
    properties.insert(
        "displayOptions".into(),
        generator
            .subschema_for::<sextant_display::DisplayOptions>()
            .to_value(),
    );
    // Every assistant mechanism's setting, by name: the panel's toggles are typed by it,
    // so a mechanism without a toggle does not compile.
    properties.insert(
        "mechanisms".into(),
        generator
            .subschema_for::<sextant_assistant::service::Mechanisms>()
            .to_value(),
    );
    // The sources' passwords and certificates (`{"type":"credentials",…}`, the desktop's
    // `source_credentials`): what the form sends and what it gets back.
    properties.insert(
        "credentialsRequest".into(),
        generator
            .subschema_for::<sextant_runtime::credentials::CredentialsRequest>()
            .to_value(),
    );
    properties.insert(
        "credentialStatus".into(),
        generator
            .subschema_for::<sextant_runtime::credentials::CredentialStatus>()
            .to_value(),
    );
    properties.insert(
        "importReportLine".into(),
        generator
            .subschema_for::<sextant_import::SummaryItem>()
            .to_value(),
    );
    let required: Vec<&String> = properties.keys().collect();
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Wire",
        "description": "Generated from Sextant's Rust types by crates/api/tests/wire.rs; do not edit.",
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
        "definitions": generator.definitions(),
    })
}

/// In draft 7 a `$ref` ignores the keywords beside it, yet schemars writes a flattened
/// struct's own fields there (an internally tagged enum's `type` beside its settings): as
/// `allOf`, a schema reader (and the TypeScript generator) sees both.
fn refs_with_siblings_as_all_of(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for v in map.values_mut() {
                refs_with_siblings_as_all_of(v);
            }
            if map.len() > 1 && map.contains_key("$ref") {
                let reference = map.remove("$ref").expect("checked");
                let rest = std::mem::take(map);
                map.insert("allOf".into(), json!([{ "$ref": reference }, rest]));
            }
        }
        Value::Array(items) => items.iter_mut().for_each(refs_with_siblings_as_all_of),
        _ => {}
    }
}

#[test]
fn the_ui_wire_schema_is_current() {
    let mut schema = wire_schema();
    refs_with_siblings_as_all_of(&mut schema);
    let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ui/src/lib/wire/schema.json");
    if std::env::var_os("SEXTANT_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == text,
        "ui/src/lib/wire/schema.json is stale; regenerate it with \
         `SEXTANT_BLESS=1 cargo test -p sextant-api --test wire`, then the UI's types with \
         `npm --prefix ui run gen:wire`"
    );
}
