//! A project opened from a Serial Studio file keeps its import report where the editor can
//! read it (`project.file`), so a project opened at start-up (`--project X.ssproj`) shows its
//! report too; any other project in its place clears it.

use serde_json::{json, Value};
use sextant_commands::Policy;
use sextant_runtime::{Caller, Runtime, Workspace};
use sextant_telemetry::project::Project;

fn call(rt: &mut Runtime, name: &str, params: Value) -> Value {
    let policy = Policy {
        auto_approve_edits: true,
        paths_from_person: true,
        ..Policy::default()
    };
    rt.execute(Caller::Cli, name, params.clone(), policy, true)
        .unwrap_or_else(|e| panic!("{name} {params}: {e:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serial_studio_file_opened_keeps_its_report_until_another_project_replaces_it() {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/serial-studio-shapes/vibration-rig.ssproj");
    let mut rt = Runtime::new(Workspace::new(Project::default()));
    assert_eq!(
        call(&mut rt, "project.file", json!({})),
        json!({"path": null})
    );

    let opened = call(&mut rt, "project.open", json!({"path": file}));
    let file_info = call(&mut rt, "project.file", json!({}));
    assert_eq!(
        file_info["path"],
        Value::Null,
        "an imported file is not ours to overwrite"
    );
    assert_eq!(file_info["importedFrom"], json!(file.display().to_string()));
    assert_eq!(file_info["report"], opened["report"]);
    assert!(
        !file_info["report"].as_array().unwrap().is_empty(),
        "{file_info}"
    );

    call(&mut rt, "project.new", json!({}));
    assert_eq!(
        call(&mut rt, "project.file", json!({})),
        json!({"path": null})
    );
}
