//! The command surface end to end: a dashboard built purely through commands, dry runs
//! proven read-only, checkpoints, undo/redo, tier policy, auto-save.

use std::path::Path;

use base64::Engine as _;
use serde_json::{json, Value};
use sextant_commands::{ErrorCode, Policy};
use sextant_runtime::{Caller, Runtime, Workspace};
use sextant_telemetry::project::Project;

/// The policy of a user who approved everything they were asked, writing files where
/// they typed (these tests' temporary folders).
fn edits() -> Policy {
    Policy {
        auto_approve_edits: true,
        paths_from_person: true,
        ..Policy::default()
    }
}

fn call(rt: &mut Runtime, name: &str, params: Value) -> Value {
    rt.execute(Caller::Assistant, name, params.clone(), edits(), false)
        .unwrap_or_else(|e| panic!("{name} {params}: {e:?}"))
}

fn project_bytes(rt: &Runtime) -> String {
    rt.workspace.project().to_json_string()
}

/// Builds the dashboard the assistant would: a serial source with CSV, a group, a gauge
/// with a transform, a virtual dataset.
fn build(rt: &mut Runtime) {
    let src = call(
        rt,
        "project.source.add",
        json!({"source": {"title": "Rover", "connection": {"type": "serial", "port": "/dev/ttyUSB0", "baud": 115200},
                          "parser": {"kind": "delimited", "separator": ","}}}),
    );
    assert_eq!(src["id"], "src-1");
    let grp = call(
        rt,
        "project.group.add",
        json!({"title": "Battery", "widget": "multiPlot"}),
    );
    let grp = grp["id"].as_str().unwrap().to_string();
    let v = call(
        rt,
        "project.dataset.add",
        json!({"group": grp, "dataset": {"title": "Voltage", "units": "V", "index": 1, "widget": "gauge", "min": 0, "max": 5}}),
    );
    let v = v["id"].as_str().unwrap().to_string();
    let i = call(
        rt,
        "project.dataset.add",
        json!({"group": grp, "dataset": {"title": "Current", "units": "A", "index": 2}}),
    );
    let i = i["id"].as_str().unwrap().to_string();
    call(
        rt,
        "project.transform.set",
        json!({"dataset": i, "transform": {"language": "expression", "code": "value / 1000"}}),
    );
    call(
        rt,
        "project.dataset.add",
        json!({"group": grp, "dataset": {"title": "Power", "units": "W", "virtual": true, "index": 0,
               "transform": {"language": "javascript",
                             "code": format!("function transform(x) {{ return datasetGetFinal('{v}') * datasetGetFinal('{i}'); }}")}}}),
    );
    call(
        rt,
        "project.dataset.update",
        json!({"id": v, "changes": {"alarms": [{"min": 4.5, "max": 5, "severity": "critical"}]}}),
    );
    let out = call(
        rt,
        "project.group.add",
        json!({"title": "Rover controls", "widget": "output"}),
    );
    call(
        rt,
        "project.group.update",
        json!({"id": out["id"], "changes": {"controls": [{"id": "ctl-speed", "title": "Speed", "kind": "slider",
               "min": 0, "max": 10, "transmit": "function transmit(v) { return 'SPD ' + v + '\\n'; }"}]}}),
    );
}

#[test]
fn a_dashboard_built_through_commands_saves_reloads_and_parses() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rover.sextant.json");
    let mut rt = Runtime::new(Workspace::new(Project::default()));
    build(&mut rt);
    call(&mut rt, "project.save", json!({"path": path}));
    assert!(!rt.workspace.is_dirty());

    let mut fresh = Runtime::new(Workspace::new(Project::default()));
    call(&mut fresh, "project.open", json!({"path": path}));
    assert_eq!(fresh.workspace.project(), rt.workspace.project());
    let out = call(
        &mut fresh,
        "project.dryRun.endToEnd",
        json!({"data": "4.2,1500\n3.9,500\n"}),
    );
    assert_eq!(
        out["columns"],
        json!(["Battery/Voltage", "Battery/Current", "Battery/Power"])
    );
    assert_eq!(
        out["rows"],
        json!([[4.2, 1.5, 6.300000000000001], [3.9, 0.5, 1.95]])
    );
    assert_eq!(out["frames"], 2);
}

#[test]
fn every_safe_command_leaves_the_project_byte_identical() {
    let mut rt = Runtime::new(Workspace::new(Project::default()));
    build(&mut rt);
    // A sessions database holding one session, for sessions.list and sessions.get to read.
    let sessions_dir = tempfile::tempdir().unwrap();
    let db = sessions_dir.path().join("sessions.db");
    let writer = sextant_sessions::SessionWriter::start(
        &db,
        sextant_sessions::NewSession {
            title: "bench".into(),
            project: rt.workspace.project().clone(),
            tags: vec!["bench".into()],
        },
        Default::default(),
    )
    .unwrap();
    // 64 frames of one dataset, for the data.* commands to read.
    let feed = writer.feed();
    feed.columns(&[sextant_telemetry::pipeline::DatasetInfo {
        id: "ds-1".into(),
        title: "Voltage".into(),
        group: "Battery".into(),
        units: "V".into(),
        source: Some(0),
        slot: Some(0),
    }]);
    for i in 0..64u64 {
        let values = [sextant_telemetry::Value::Number((i % 8) as f64)];
        assert!(feed.frame(&sextant_telemetry::pipeline::FrameEvent {
            source: 0,
            timestamp: sextant_telemetry::Timestamp {
                elapsed_ns: i * 10_000_000,
                unix_ns: 0,
            },
            values: &values,
        }));
    }
    let session = writer.close().unwrap().id;
    rt.workspace.set_sessions_db(Some(db));
    let before = project_bytes(&rt);
    let output_group = rt
        .workspace
        .project()
        .groups
        .iter()
        .find(|g| !g.controls.is_empty())
        .expect("build adds an output group")
        .id
        .clone();
    let calls: Vec<(&str, Value)> = vec![
        ("project.get", json!({})),
        ("project.validate", json!({})),
        ("project.history", json!({})),
        ("project.file", json!({})),
        ("project.source.list", json!({})),
        ("project.dataset.get", json!({"id": "ds-1"})),
        ("project.workspace.list", json!({})),
        ("project.frameParser.get", json!({})),
        (
            "project.frameParser.dryCompile",
            json!({"code": "function parse(f) { return [1]; }"}),
        ),
        ("project.frameParser.dryCompile", json!({})),
        (
            "project.frameParser.dryRun",
            json!({"frames": ["1,2", "garbage"]}),
        ),
        (
            "project.frameParser.dryRun",
            json!({"frames": ["1,2"], "code": "function parse(f) { return f.split(','); }"}),
        ),
        (
            "project.transform.dryRun",
            json!({"dataset": "ds-2", "values": [1000, "x"]}),
        ),
        (
            "project.transform.dryRun",
            json!({"transform": {"language": "lua", "code": "function transform(v) return v * 2 end"}, "values": [2]}),
        ),
        ("project.dryRun.endToEnd", json!({"data": "1,2\n"})),
        (
            "project.dryRun.endToEnd",
            json!({"data": "31 2C 32 0A", "hex": true}),
        ),
        ("assistant.listCheckpoints", json!({})),
        ("io.status", json!({})),
        ("io.listSerialPorts", json!({})),
        ("replay.getState", json!({})),
        ("csvExport.status", json!({})),
        ("mcapExport.status", json!({})),
        ("dashboard.tail", json!({"count": 5})),
        ("io.recentBytes", json!({})),
        ("dashboard.getView", json!({})),
        (
            "dashboard.setView",
            json!({"timeRangeS": 30, "points": 500}),
        ),
        ("dashboard.latestFrame", json!({})),
        ("sessions.list", json!({})),
        ("sessions.list", json!({"tag": "bench"})),
        ("sessions.get", json!({"id": session})),
        ("sessions.csv", json!({"id": session})),
        (
            "sessions.download",
            json!({"id": session, "format": "mcap"}),
        ),
        (
            "sessions.download",
            json!({"id": session, "format": "parquet"}),
        ),
        ("dashboard.image", json!({"group": output_group})),
        ("data.summary", json!({"window": {"session": session}})),
        (
            "data.find",
            json!({"window": {"session": session, "fromS": 0.1}, "dataset": "Battery/Voltage", "condition": {"kind": "above", "level": 5}}),
        ),
        (
            "data.spectrum",
            json!({"window": {"session": session}, "dataset": "ds-1", "segment": 16}),
        ),
        (
            "data.compare",
            json!({"a": {"session": session, "toS": 0.3}, "b": {"session": session, "fromS": 0.3}}),
        ),
        (
            "data.series",
            json!({"window": {"session": session}, "datasets": ["Voltage"], "points": 20}),
        ),
        (
            "project.control.preview",
            json!({"group": output_group, "control": "ctl-speed", "value": 7}),
        ),
        ("meta.listCommands", json!({"prefix": "project.dataset"})),
        (
            "meta.describeCommand",
            json!({"name": "project.dataset.add"}),
        ),
    ];
    let mut covered = std::collections::HashSet::new();
    for (name, params) in calls {
        let result = call(&mut rt, name, params);
        assert_eq!(project_bytes(&rt), before, "{name} changed the project");
        assert!(
            !result.is_null() || name == "project.get",
            "{name} returned nothing"
        );
        covered.insert(name);
    }
    // Commands that fail in this state must fail without touching the project either.
    let outcome = rt.execute(
        Caller::Assistant,
        "replay.setState",
        json!({"paused": true}),
        edits(),
        false,
    );
    assert!(outcome.is_err(), "nothing is replaying here");
    assert_eq!(
        project_bytes(&rt),
        before,
        "replay.setState changed the project"
    );
    covered.insert("replay.setState");
    // Every Safe command except checkpoint-taking is covered above (a new one must be added).
    for spec in rt.specs() {
        if spec.tier == sextant_commands::Tier::Safe && spec.name != "assistant.checkpoint" {
            assert!(
                covered.contains(spec.name.as_str()),
                "Safe command {} is not proven read-only",
                spec.name
            );
        }
    }
    assert!(!rt.workspace.is_dirty() || rt.workspace.revision() > 0);
}

#[test]
fn a_broken_parser_is_caught_by_dry_compile_and_the_checkpoint_restores_it() {
    let mut rt = Runtime::new(Workspace::new(Project::default()));
    build(&mut rt);
    let good = "function parse(frame) {\n  return frame.split(',');\n}\n";
    call(
        &mut rt,
        "project.frameParser.setCode",
        json!({"code": good, "language": "javascript"}),
    );
    let broken = "function parse(frame) {\n  let x = ;\n  return [x];\n}\n";
    call(
        &mut rt,
        "project.frameParser.setCode",
        json!({"code": broken}),
    );
    let check = call(&mut rt, "project.frameParser.dryCompile", json!({}));
    assert_eq!(check["ok"], false);
    assert_eq!(check["line"], 2, "{check}");
    let checkpoints = call(&mut rt, "assistant.listCheckpoints", json!({}));
    let last = checkpoints.as_array().unwrap().last().unwrap();
    assert_eq!(last["label"], "before project.frameParser.setCode");
    // Restoring is AlwaysConfirm: refused without a person's approval, even with auto-approve.
    let refused = rt
        .execute(
            Caller::Assistant,
            "assistant.restore",
            json!({"id": last["id"]}),
            edits(),
            false,
        )
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::NotAllowed);
    rt.execute(
        Caller::Ui,
        "assistant.restore",
        json!({"id": last["id"]}),
        edits(),
        true,
    )
    .unwrap();
    let parser = call(&mut rt, "project.frameParser.get", json!({}));
    assert_eq!(parser["parser"]["code"], good);
    assert_eq!(
        call(&mut rt, "project.frameParser.dryCompile", json!({}))["ok"],
        true
    );
}

#[test]
fn tiers_gate_every_call() {
    let mut rt = Runtime::new(Workspace::new(Project::default()));
    build(&mut rt);
    let headless = Policy {
        non_interactive: true,
        ..Policy::default()
    };
    let e = rt
        .execute(
            Caller::Cli,
            "project.group.add",
            json!({"title": "x"}),
            headless,
            false,
        )
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotAllowed);
    let ask = rt
        .execute(
            Caller::Assistant,
            "project.group.add",
            json!({"title": "x"}),
            Policy::default(),
            false,
        )
        .unwrap_err();
    assert!(ask.message.contains("approval"), "{ask:?}");
    rt.execute(
        Caller::Ui,
        "project.group.add",
        json!({"title": "x"}),
        Policy::default(),
        true,
    )
    .unwrap();
    let device = rt
        .execute(
            Caller::Api,
            "console.send",
            json!({"data": "x"}),
            edits(),
            true,
        )
        .unwrap_err();
    assert!(
        device.message.contains("allow device control"),
        "{device:?}"
    );
    let allowed = Policy {
        allow_device_control: true,
        ..edits()
    };
    let not_connected = rt
        .execute(
            Caller::Api,
            "console.send",
            json!({"data": "x"}),
            allowed,
            true,
        )
        .unwrap_err();
    assert!(
        not_connected.message.contains("not connected"),
        "{not_connected:?}"
    );
}

#[test]
fn edits_are_undoable_validated_and_precise_about_bad_input() {
    let mut rt = Runtime::new(Workspace::new(Project::default()));
    build(&mut rt);
    let before = project_bytes(&rt);
    let e = rt
        .execute(
            Caller::Ui,
            "project.dataset.update",
            json!({"id": "ds-1", "changes": {"min": "low"}}),
            edits(),
            false,
        )
        .unwrap_err();
    assert_eq!(e.path.as_deref(), Some("changes.min"), "{e:?}");
    let e = rt
        .execute(
            Caller::Ui,
            "project.dataset.update",
            json!({"id": "ds-1", "changes": {"min": 9, "max": 1}}),
            edits(),
            false,
        )
        .unwrap_err();
    assert!(
        e.message.contains("greater than max"),
        "validation rejects the edit whole: {e:?}"
    );
    let e = rt
        .execute(
            Caller::Ui,
            "project.source.remove",
            json!({"id": "src-1"}),
            edits(),
            false,
        )
        .unwrap_err();
    assert!(e.message.contains("still used"), "{e:?}");
    assert_eq!(project_bytes(&rt), before, "failed edits change nothing");

    call(
        &mut rt,
        "project.dataset.update",
        json!({"id": "ds-1", "changes": {"title": "Pack voltage"}}),
    );
    call(&mut rt, "project.dataset.remove", json!({"id": "ds-3"}));
    call(&mut rt, "project.undo", json!({}));
    call(&mut rt, "project.undo", json!({}));
    assert_eq!(project_bytes(&rt), before);
    call(&mut rt, "project.redo", json!({}));
    assert_eq!(
        rt.workspace.project().groups[0].datasets[0].title,
        "Pack voltage"
    );
}

#[tokio::test]
async fn flush_writes_pending_edits_now_and_nothing_without_edits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.sextant.json");
    let mut rt = Runtime::new(Workspace::new(Project::default()));
    call(&mut rt, "project.save", json!({"path": path}));
    // An hour of debounce: only a flush can write the edit before the process exits.
    let handle = rt.spawn(Some(std::time::Duration::from_secs(3600)));
    let before = std::fs::metadata(&path).unwrap().modified().unwrap();
    handle.flush().await.unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        before,
        "nothing to write, nothing written"
    );
    handle
        .call(
            Caller::Ui,
            "project.group.add",
            json!({"title": "Kept at exit"}),
            edits(),
        )
        .await
        .unwrap();
    assert!(!std::fs::read_to_string(&path)
        .unwrap()
        .contains("Kept at exit"));
    handle.flush().await.unwrap();
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .contains("Kept at exit"));

    // A project without a file has nothing to flush to, and that is fine.
    let handle = Runtime::new(Workspace::new(Project::default())).spawn(None);
    handle
        .call(
            Caller::Ui,
            "project.group.add",
            json!({"title": "x"}),
            edits(),
        )
        .await
        .unwrap();
    handle.flush().await.unwrap();
}

#[tokio::test]
async fn auto_save_is_debounced_and_not_starved_by_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.sextant.json");
    let mut rt = Runtime::new(Workspace::new(Project::default()));
    call(&mut rt, "project.save", json!({"path": path}));
    let handle = rt.spawn(Some(std::time::Duration::from_millis(300)));
    let mut events = handle.subscribe();
    handle
        .call(
            Caller::Ui,
            "project.group.add",
            json!({"title": "Saved later"}),
            edits(),
        )
        .await
        .unwrap();
    // Reads keep coming; the save must still happen ~300 ms after the edit.
    for _ in 0..10 {
        handle
            .call(Caller::Ui, "io.status", json!({}), edits())
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(60)).await;
    }
    let saved = std::fs::read_to_string(&path).unwrap();
    assert!(saved.contains("Saved later"), "auto-save did not run");
    let mut kinds = Vec::new();
    while let Ok(e) = events.try_recv() {
        kinds.push(
            serde_json::to_value(&e).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    assert!(
        kinds.contains(&"projectChanged".to_string())
            && kinds.contains(&"projectSaved".to_string()),
        "{kinds:?}"
    );
}

#[test]
fn the_command_reference_is_current() {
    let rt = Runtime::new(Workspace::new(Project::default()));
    let generated = sextant_commands::markdown_reference(rt.specs());
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/commands.md");
    if std::env::var_os("SEXTANT_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "docs/commands.md is stale; regenerate it with `SEXTANT_BLESS=1 cargo test -p sextant-runtime --test commands`"
    );
    assert!(
        rt.specs().count() >= 35,
        "the reference lists every command"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_shows_live_values_and_exports_csv_and_mcap_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("live.csv");
    let mcap = dir.path().join("live.mcap");
    let project: Project = serde_json::from_value(json!({
        "format": "sextant-project", "schemaVersion": 1,
        "sources": [{"id": "sim", "connection": {"type": "simulator", "frameRateHz": 200,
                     "channels": [{"name": "a", "waveform": "saw", "frequencyHz": 1, "amplitude": 1}]},
                     "parser": {"kind": "delimited"}}],
        "groups": [{"id": "g", "title": "G", "datasets": [{"id": "a", "title": "A", "index": 1}]}]
    }))
    .unwrap();
    let handle = Runtime::new(Workspace::new(project)).spawn(None);
    let run = |name: &'static str, params: Value| {
        let h = handle.clone();
        async move { h.call(Caller::Ui, name, params, edits()).await.unwrap() }
    };
    run("csvExport.enable", json!({"path": csv})).await;
    run("mcapExport.enable", json!({"path": mcap})).await;
    run("io.connect", json!({})).await;
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let status = run("io.status", json!({})).await;
    assert_eq!(status["sources"][0]["status"], "connected", "{status}");
    assert!(
        status["sources"][0]["frames"].as_u64().unwrap() > 50,
        "{status}"
    );
    let frame = run("dashboard.latestFrame", json!({})).await;
    let a = frame["values"]["a"].as_f64().unwrap();
    assert!((-1.0..=1.0).contains(&a), "{frame}");
    let tail = run("dashboard.tail", json!({"count": 5})).await;
    let frames = tail["frames"].as_array().unwrap();
    assert_eq!(frames.len(), 5, "{tail}");
    assert!(frames
        .windows(2)
        .all(|w| w[0]["elapsedS"].as_f64() <= w[1]["elapsedS"].as_f64()));
    // Pausing freezes what the dashboard reads, not the ingestion behind it.
    run("dashboard.setView", json!({"paused": true})).await;
    let frozen = run("dashboard.latestFrame", json!({})).await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(run("dashboard.latestFrame", json!({})).await, frozen);
    let status = run("io.status", json!({})).await;
    let frames_now = status["sources"][0]["frames"].as_u64().unwrap();
    run("dashboard.setView", json!({"paused": false})).await;
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_ne!(run("dashboard.latestFrame", json!({})).await, frozen);
    assert!(frames_now > 0);
    run("io.disconnect", json!({})).await;
    let written = (0..50).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        std::fs::read_to_string(&csv)
            .map(|t| t.lines().count() > 50)
            .unwrap_or(false)
    });
    assert!(written, "the CSV export was not written");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with("elapsed_s,G/A\n"));
    // The MCAP recording of the same run: one message on the group's topic per CSV row,
    // with the same values, and the counts a person is shown.
    let status = run("mcapExport.status", json!({})).await;
    assert_eq!(status["enabled"], true, "{status}");
    assert_eq!(status["dropped"], 0, "{status}");
    assert!(status.get("problem").is_none(), "{status}");
    let bytes = std::fs::read(&mcap).expect("the MCAP recording is in place");
    let mut values = Vec::new();
    let mut raw = 0;
    for message in mcap::MessageStream::new(&bytes).unwrap() {
        let message = message.unwrap();
        match message.channel.topic.as_str() {
            "/G" => {
                let body: Value = serde_json::from_slice(&message.data).unwrap();
                values.push(body["A"].as_f64().unwrap());
            }
            "/sim/raw" => raw += 1,
            other => panic!("a topic of no group or source: {other}"),
        }
    }
    let rows: Vec<f64> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(values.len(), rows.len());
    assert!(values
        .iter()
        .zip(&rows)
        .all(|(m, c)| (m - c).abs() <= 1e-12 * c.abs().max(1.0)));
    assert_eq!(status["frames"], rows.len() as u64, "{status}");
    assert_eq!(status["chunks"], raw, "{status}");
    assert!(raw > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_run_is_recorded_tagged_exported_replayed_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let project: Project = serde_json::from_value(json!({
        "format": "sextant-project", "schemaVersion": 1,
        "sources": [{"id": "sim", "connection": {"type": "simulator", "frameRateHz": 500,
                     "channels": [{"name": "a", "waveform": "saw", "frequencyHz": 1, "amplitude": 1}]},
                     "parser": {"kind": "delimited"}}],
        "groups": [{"id": "g", "title": "G", "datasets": [{"id": "a", "title": "A", "index": 1}]}]
    }))
    .unwrap();
    let mut rt = Runtime::new(Workspace::new(project));
    let fails = |rt: &mut Runtime, name: &str, params: Value| {
        rt.execute(Caller::Ui, name, params, edits(), true)
            .unwrap_err()
    };

    // Without a database: an empty list, and recording says what to do.
    let empty = call(&mut rt, "sessions.list", json!({}));
    assert_eq!(empty, json!({"sessions": []}));
    let e = fails(&mut rt, "sessions.startRecording", json!({}));
    assert!(e.message.contains("sessions.setDatabase"), "{e:?}");
    call(&mut rt, "sessions.setDatabase", json!({"path": db}));
    let e = fails(&mut rt, "sessions.startRecording", json!({}));
    assert!(e.message.contains("io.connect"), "{e:?}");

    call(&mut rt, "io.connect", json!({}));
    let id = call(
        &mut rt,
        "sessions.startRecording",
        json!({"title": "bench", "tags": ["todo"]}),
    )["id"]
        .as_i64()
        .unwrap();
    let e = fails(&mut rt, "sessions.startRecording", json!({}));
    assert!(e.message.contains("already recording"), "{e:?}");
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let listing = call(&mut rt, "sessions.list", json!({}));
    assert_eq!(listing["recording"]["id"], id, "{listing}");
    let stopped = call(&mut rt, "sessions.stopRecording", json!({}));
    assert_eq!(stopped["stopped"], true);
    let frames = stopped["session"]["frames"].as_u64().unwrap();
    assert!(frames > 50, "{stopped}");
    assert_eq!(stopped["session"]["droppedFrames"], 0);

    // A second recording is closed by io.disconnect (when the pipeline ends).
    let second = call(&mut rt, "sessions.startRecording", json!({}))["id"]
        .as_i64()
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    call(&mut rt, "io.disconnect", json!({}));
    let mut closed = false;
    for _ in 0..100 {
        let listing = call(&mut rt, "sessions.list", json!({}));
        let s = &listing["sessions"][1];
        assert_eq!(s["id"], second);
        if s.get("endedUnixMs").is_some() {
            assert_eq!(s["title"], format!("Session {second}"));
            closed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(closed, "disconnecting did not close the recording");

    let tags = call(
        &mut rt,
        "sessions.tag",
        json!({"id": id, "add": ["bench", "field"], "remove": ["todo"]}),
    );
    assert_eq!(tags["tags"], json!(["bench", "field"]));
    let e = fails(&mut rt, "sessions.tag", json!({"id": id, "add": [""]}));
    assert_eq!(e.path.as_deref(), Some("add[0]"), "{e:?}");
    call(
        &mut rt,
        "sessions.rename",
        json!({"id": id, "title": "Bench run"}),
    );
    let tagged = call(&mut rt, "sessions.list", json!({"tag": "field"}));
    assert_eq!(tagged["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(tagged["sessions"][0]["title"], "Bench run");
    let detail = call(&mut rt, "sessions.get", json!({"id": id}));
    assert_eq!(detail["columns"], json!(["G/A"]));
    assert_eq!(detail["frames"], frames);
    assert_eq!(detail["project"]["sources"][0]["id"], "sim");

    let csv = dir.path().join("bench.csv");
    let exported = call(
        &mut rt,
        "sessions.exportCsv",
        json!({"id": id, "path": csv}),
    );
    assert_eq!(exported["rows"], frames);
    // The person reads where it went: the full path.
    assert!(
        Path::new(exported["path"].as_str().unwrap()).is_absolute(),
        "{exported}"
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    // A page downloads the same CSV, named after the session.
    let download = call(&mut rt, "sessions.csv", json!({"id": id}));
    assert_eq!(download["csv"].as_str().unwrap(), text);
    assert_eq!(download["rows"], frames);
    assert_eq!(download["name"], "Bench run.csv");
    assert!(text.starts_with("elapsed_s,G/A\n"), "{}", &text[..40]);
    assert_eq!(text.lines().count() as u64, frames + 1);
    // A page downloads every format a session exports to, byte for byte the file the
    // desktop app writes (whose readers are tested in the export crate).
    for (format, file) in [
        ("csv", csv.clone()),
        ("mcap", dir.path().join("bench.mcap")),
        ("parquet", dir.path().join("bench.parquet")),
    ] {
        if format != "csv" {
            let written = call(
                &mut rt,
                "sessions.export",
                json!({"id": id, "format": format, "path": file}),
            );
            assert_eq!(written["frames"], frames, "{written}");
        }
        let download = call(
            &mut rt,
            "sessions.download",
            json!({"id": id, "format": format}),
        );
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(download["base64"].as_str().unwrap())
            .unwrap();
        assert_eq!(bytes, std::fs::read(&file).unwrap(), "{format}");
        assert_eq!(download["size"], bytes.len() as u64, "{format}");
        assert_eq!(download["frames"], frames, "{format}");
        assert_eq!(download["name"], format!("Bench run.{format}"));
        assert_eq!(download["format"], format);
    }

    // Replay at full speed: the last frame on the dashboard is the session's last row.
    let before = project_bytes(&rt);
    let replay = call(&mut rt, "sessions.replay", json!({"id": id, "speed": 0}));
    assert_eq!(replay["projectReplaced"], false);
    assert_eq!(project_bytes(&rt), before);
    // A second replay takes the place of the first.
    call(&mut rt, "sessions.replay", json!({"id": id, "speed": 0}));
    let progress = wait_for_replay_end(&mut rt).await;
    let r = &progress["replays"][0];
    assert_eq!(r["speed"], 0.0);
    assert!(r["durationS"].as_f64().unwrap() > 0.0, "{progress}");
    assert_eq!(
        r["positionS"], r["durationS"],
        "held at the end: {progress}"
    );
    assert_eq!(r["paused"], true, "{progress}");
    assert_eq!(
        call(&mut rt, "io.status", json!({}))["sources"][0]["status"],
        "connected",
        "a replay held at its end is still there to seek in"
    );
    assert_eq!(
        call(&mut rt, "io.status", json!({}))["replayEnded"],
        true,
        "and a person reads that it ended, not that a device is connected"
    );
    // The export counts from its first row, and so does the replay.
    assert!(
        text.lines().nth(1).unwrap().starts_with("0.000000,"),
        "{}",
        &text[..60]
    );
    let last_row = text.lines().last().unwrap();
    let (elapsed, value) = last_row.split_once(',').unwrap();
    // The replay is held at its end once it sent its last chunk; the pipeline thread may
    // still be parsing it, so wait for the dashboard to catch up (up to 15 s: on a loaded
    // 2-core CI machine the pipeline thread can wait long for a core).
    wait_until("every frame reached the display", || {
        rt.workspace.scope().frames() == frames
    })
    .await;
    let tail = call(&mut rt, "dashboard.tail", json!({"count": 1000}));
    let tail = tail["frames"].as_array().unwrap();
    assert_eq!(
        tail.len() as u64,
        frames,
        "the tail holds the whole short session"
    );
    // One time base: the replay counts from the session's first frame, as its CSV does.
    let origin = tail[0]["elapsedS"].as_f64().unwrap();
    assert_eq!(origin, 0.0, "the replay's first frame: {}", tail[0]);
    let frame = call(&mut rt, "dashboard.latestFrame", json!({}));
    assert_eq!(
        format!("{:.6}", frame["elapsedS"].as_f64().unwrap() - origin),
        elapsed
    );
    assert_eq!(frame["values"]["a"].as_f64().unwrap().to_string(), value);

    // Play after the end starts again from the beginning; a seek goes on from there.
    call(&mut rt, "replay.setState", json!({"paused": false}));
    wait_until("the replay played again", || {
        rt.workspace.scope().frames() == 2 * frames
    })
    .await;
    wait_for_replay_end(&mut rt).await;
    let half = frames / 2;
    call(
        &mut rt,
        "replay.setState",
        json!({"seekS": 0.3, "paused": false}),
    );
    wait_for_replay_end(&mut rt).await;
    // The pipeline thread may still be parsing what the replay sent: wait until it is done.
    let mut seen = 0;
    while rt.workspace.scope().frames() != seen {
        seen = rt.workspace.scope().frames();
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    let after_seek = seen - 2 * frames;
    assert!(
        after_seek > 0 && after_seek < frames && after_seek.abs_diff(half) < frames / 4,
        "a seek to 0.3 s of 0.6 s plays about half: {after_seek} of {frames}"
    );
    call(&mut rt, "io.disconnect", json!({}));

    // Deleting always asks, even with edits auto-approved.
    let refused = rt
        .execute(
            Caller::Assistant,
            "sessions.delete",
            json!({"id": id}),
            edits(),
            false,
        )
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::NotAllowed);
    rt.execute(
        Caller::Ui,
        "sessions.delete",
        json!({"id": id, "vacuum": true}),
        edits(),
        true,
    )
    .unwrap();
    let gone = fails(&mut rt, "sessions.get", json!({"id": id}));
    assert_eq!(gone.code, ErrorCode::NotFound);
    let left = call(&mut rt, "sessions.list", json!({}));
    assert_eq!(left["sessions"].as_array().unwrap().len(), 1);
}

/// Waits until `cond` holds (a replay runs on other threads), up to 15 s on a loaded machine.
async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..1500 {
        if cond() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("timed out: {what}");
}

/// Waits for every replay to be held at its end; its `replay.getState`.
async fn wait_for_replay_end(rt: &mut Runtime) -> Value {
    for _ in 0..1500 {
        let state = call(rt, "replay.getState", json!({}));
        if state["replays"]
            .as_array()
            .is_some_and(|r| !r.is_empty() && r.iter().all(|r| r["atEnd"] == true))
        {
            return state;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the replay did not reach its end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_csv_player_replays_an_export_through_the_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("export.csv");
    let mut text = String::from("elapsed_s,Power/Voltage,Power/Current,Gear/Name\n");
    for i in 0..50 {
        text.push_str(&format!(
            "{:.6},{},{},{}\n",
            i as f64 * 0.01,
            3.0 + i as f64 / 100.0,
            i,
            ["P", "R", "N", "D"][i % 4]
        ));
    }
    std::fs::write(&csv, &text).unwrap();
    let handle = Runtime::new(Workspace::new(Project::default())).spawn(None);
    let call = |name: &'static str, params: Value| {
        let h = handle.clone();
        async move { h.call(Caller::Ui, name, params, edits()).await }
    };
    let e = call("replay.setState", json!({"paused": true}))
        .await
        .unwrap_err();
    assert!(e.message.contains("nothing is replaying"));
    // Not an export of the open project: playing it would replace that, so it asks.
    let e = call("csvPlayer.open", json!({"path": csv, "speed": 0}))
        .await
        .unwrap_err();
    assert_eq!(e.path.as_deref(), Some("replaceProject"), "{e:?}");
    assert!(
        e.message.contains("`Power/Voltage`") || e.message.contains("no column"),
        "{e:?}"
    );
    let opened = call(
        "csvPlayer.open",
        json!({"path": csv, "speed": 0, "replaceProject": true}),
    )
    .await
    .unwrap();
    assert_eq!(opened["datasets"], 3);
    assert_eq!(opened["intoOpenProject"], false);
    let mut done = false;
    for _ in 0..500 {
        let s = call("replay.getState", json!({})).await.unwrap();
        if s["replays"][0]["atEnd"] == true {
            done = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(done, "the CSV played to its end");
    // The end is where the player sent its last row; the pipeline may still be parsing it.
    let mut tail = call("dashboard.tail", json!({"count": 1000}))
        .await
        .unwrap();
    for _ in 0..200 {
        if tail["frames"].as_array().unwrap().len() == 50 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        tail = call("dashboard.tail", json!({"count": 1000}))
            .await
            .unwrap();
    }
    let frames = tail["frames"].as_array().unwrap();
    assert_eq!(frames.len(), 50);
    assert_eq!(frames[49]["values"], json!([3.49, 49.0, "R"]));
    assert_eq!(frames[10]["elapsedS"], 0.1);
    let project = call("project.get", json!({})).await.unwrap();
    assert_eq!(project["groups"][0]["title"], "Power");
    assert_eq!(project["groups"][1]["datasets"][0]["title"], "Name");
    // Stopping brings back the project the replay took the place of.
    call("io.disconnect", json!({})).await.unwrap();
    let project = call("project.get", json!({})).await.unwrap();
    assert_eq!(project["groups"], json!([]), "{project}");
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "time,x\n1,2\n").unwrap();
    let e = call("csvPlayer.open", json!({"path": bad}))
        .await
        .unwrap_err();
    assert!(e.message.contains("elapsed_s"), "{e:?}");
}

/// Journey 6: a CSV exported from the open project plays into it (its widgets, units and
/// transforms stay; values are not transformed twice), in place of the live sources, which
/// connect again when the replay stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_takes_the_live_sources_place_and_gives_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let project: Project = serde_json::from_value(json!({
        "format": "sextant-project", "schemaVersion": 1,
        "sources": [{"id": "sim", "connection": {"type": "simulator", "frameRateHz": 200,
                     "channels": [{"name": "a", "waveform": "saw", "frequencyHz": 1, "amplitude": 1},
                                  {"name": "b", "waveform": "saw", "frequencyHz": 1, "amplitude": 1}]},
                     "parser": {"kind": "delimited"}}],
        "groups": [{"id": "g", "title": "Power", "widget": "multiPlot", "datasets": [
            {"id": "v", "title": "Voltage", "units": "mV", "index": 1, "widget": "gauge",
             "transform": {"language": "expression", "code": "value * 1000"}},
            {"id": "i", "title": "Current", "units": "A", "index": 2}]}]
    }))
    .unwrap();
    let csv = dir.path().join("bench.csv");
    let mut text = String::from("elapsed_s,Power/Voltage,Power/Current,Other/Ignored\n");
    for i in 0..20 {
        text.push_str(&format!("{:.6},{},{},x\n", i as f64 * 0.01, 3000 + i, i));
    }
    std::fs::write(&csv, &text).unwrap();
    let handle = Runtime::new(Workspace::new(project)).spawn(None);
    let call = |name: &'static str, params: Value| {
        let h = handle.clone();
        async move { h.call(Caller::Ui, name, params, edits()).await }
    };
    let before = call("project.get", json!({})).await.unwrap();
    call("io.connect", json!({})).await.unwrap();

    // Not while recording: the recording would end unseen.
    call(
        "sessions.setDatabase",
        json!({"path": dir.path().join("s.db")}),
    )
    .await
    .unwrap();
    call("sessions.startRecording", json!({})).await.unwrap();
    let e = call("csvPlayer.open", json!({"path": csv, "speed": 0}))
        .await
        .unwrap_err();
    assert!(e.message.contains("sessions.stopRecording"), "{e:?}");
    call("sessions.stopRecording", json!({})).await.unwrap();

    let opened = call("csvPlayer.open", json!({"path": csv, "speed": 0}))
        .await
        .unwrap();
    assert_eq!(opened["intoOpenProject"], true, "{opened}");
    assert_eq!(
        call("project.get", json!({})).await.unwrap(),
        before,
        "the open project is untouched"
    );
    let mut last = Value::Null;
    for _ in 0..1500 {
        let tail = call("dashboard.tail", json!({"count": 1})).await.unwrap();
        last = tail["frames"][0]["values"].clone();
        if last == json!([3019.0, 19.0]) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        last,
        json!([3019.0, 19.0]),
        "the file's final values, not transformed again"
    );

    let stopped = call("io.disconnect", json!({})).await.unwrap();
    assert!(
        stopped["detail"]
            .as_str()
            .unwrap()
            .contains("connected again"),
        "{stopped}"
    );
    let status = call("io.status", json!({})).await.unwrap();
    assert_eq!(status["sources"][0]["id"], "sim", "{status}");
    assert!(call("replay.getState", json!({})).await.unwrap()["replays"]
        .as_array()
        .unwrap()
        .is_empty());
    // The live device's values flow again (a saw between 0 and 1, times 1000).
    let mut live = Value::Null;
    for _ in 0..1500 {
        let tail = call("dashboard.tail", json!({"count": 1})).await.unwrap();
        live = tail["frames"][0]["values"][0].clone();
        if live.as_f64().is_some_and(|v| v <= 1000.0) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        live.as_f64().is_some_and(|v| v <= 1000.0),
        "live values after the replay: {live}"
    );
    call("io.disconnect", json!({})).await.unwrap();
}

#[test]
fn a_dropped_file_opens_from_its_text_and_titles_and_actions_change_in_place() {
    let mut rt = Runtime::new(Workspace::new(Project::default()));
    build(&mut rt);
    let text = project_bytes(&rt);
    call(&mut rt, "project.new", json!({}));
    call(
        &mut rt,
        "project.openContent",
        json!({"name": "rover.json", "content": text}),
    );
    assert_eq!(project_bytes(&rt), text, "the same project, byte for byte");
    assert!(rt.workspace.path().is_none(), "no file until saved");

    // A Serial Studio file is imported on the way in.
    let ss = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/serial-studio/js-csv.ssproj"
    ))
    .unwrap();
    let r = call(
        &mut rt,
        "project.openContent",
        json!({"name": "js-csv.ssproj", "content": ss}),
    );
    assert!(
        r["detail"].as_str().unwrap_or("").contains("Serial Studio"),
        "{r}"
    );
    assert!(!rt.workspace.project().groups.is_empty());

    // Garbage is refused and the open project stays.
    let before = project_bytes(&rt);
    let e = rt
        .execute(
            Caller::Ui,
            "project.openContent",
            json!({"name": "notes.txt", "content": "{ not json"}),
            edits(),
            false,
        )
        .unwrap_err();
    assert!(e.message.contains("notes.txt"), "{e:?}");
    assert_eq!(project_bytes(&rt), before);

    call(&mut rt, "project.setTitle", json!({"title": "Rover 2"}));
    assert_eq!(rt.workspace.project().title, "Rover 2");
    call(&mut rt, "project.undo", json!({}));
    assert_ne!(
        rt.workspace.project().title,
        "Rover 2",
        "renaming is undoable"
    );

    call(&mut rt, "project.new", json!({}));
    build(&mut rt);
    let a = call(
        &mut rt,
        "project.action.add",
        json!({"action": {"title": "Reset", "payload": "RST"}}),
    );
    let id = a["id"].as_str().unwrap().to_string();
    call(
        &mut rt,
        "project.action.update",
        json!({"id": id, "changes": {"payload": "RESET", "lineEnding": "crLf"}}),
    );
    let action = &rt.workspace.project().actions[0];
    assert_eq!(
        (action.id.as_str(), action.payload.as_str()),
        (id.as_str(), "RESET")
    );
    let e = rt
        .execute(
            Caller::Ui,
            "project.action.update",
            json!({"id": id, "changes": {"id": "other"}}),
            edits(),
            false,
        )
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidParams);
}

#[test]
fn a_view_change_is_all_or_nothing_and_announced() {
    let mut rt = Runtime::new(Workspace::new(Project::default()));
    rt.workspace.take_events();
    let before = call(&mut rt, "dashboard.getView", json!({}));
    let e = rt
        .execute(
            Caller::Api,
            "dashboard.setView",
            json!({"timeRangeS": 30, "points": 3}),
            edits(),
            false,
        )
        .unwrap_err();
    assert_eq!(e.path.as_deref(), Some("points"));
    assert_eq!(
        call(&mut rt, "dashboard.getView", json!({})),
        before,
        "nothing applied"
    );
    assert!(rt.workspace.take_events().is_empty());

    let view = call(&mut rt, "dashboard.setView", json!({"timeRangeS": 30}));
    assert_eq!(view["timeRangeS"], 30.0);
    let events = serde_json::to_value(rt.workspace.take_events()).unwrap();
    assert_eq!(events, json!([{"event": "viewChanged", "view": view}]));
    // The same view again is no news.
    call(&mut rt, "dashboard.setView", json!({"timeRangeS": 30}));
    assert!(rt.workspace.take_events().is_empty());
}

/// Journey 2: what Quick plot found becomes part of the project in one step, under the ids
/// the live data already has, so the dashboard shows it at once and after a reconnect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_plot_channels_are_kept_in_the_project() {
    let project: Project = serde_json::from_value(json!({
        "format": "sextant-project", "schemaVersion": 1,
        "sources": [{"id": "sim", "title": "Bench", "connection": {"type": "simulator", "frameRateHz": 100,
                     "channels": [{"name": "a", "waveform": "saw", "frequencyHz": 1, "amplitude": 1},
                                  {"name": "b", "waveform": "sine", "frequencyHz": 1, "amplitude": 1}]},
                     "parser": {"kind": "quickPlot"}}]
    }))
    .unwrap();
    let handle = Runtime::new(Workspace::new(project)).spawn(None);
    let call = |name: &'static str, params: Value| {
        let h = handle.clone();
        async move { h.call(Caller::Ui, name, params, edits()).await }
    };
    let e = call("project.quickPlot.keep", json!({})).await.unwrap_err();
    assert!(e.message.contains("no channels yet"), "{e:?}");
    call("io.connect", json!({})).await.unwrap();
    let mut width = 0;
    for _ in 0..1500 {
        let tail = call("dashboard.tail", json!({"count": 1})).await.unwrap();
        width = tail["frames"][0]["values"].as_array().map_or(0, Vec::len);
        if width == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(width, 2, "quick plot found both channels");
    let kept = call("project.quickPlot.keep", json!({})).await.unwrap();
    assert_eq!(kept["groups"].as_array().unwrap().len(), 1, "{kept}");
    let p = call("project.get", json!({})).await.unwrap();
    let g = &p["groups"][0];
    assert_eq!(
        (g["title"].as_str(), g["widget"].as_str()),
        (Some("Bench"), Some("multiPlot"))
    );
    let ds: Vec<(String, u64)> = g["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["id"].as_str().unwrap().to_string(),
                d["index"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ds,
        [("auto-1-1".to_string(), 1), ("auto-1-2".to_string(), 2)]
    );
    assert_eq!(
        call("project.validate", json!({})).await.unwrap()["valid"],
        true
    );
    let again = call("project.quickPlot.keep", json!({})).await.unwrap_err();
    assert!(again.message.contains("already"), "{again:?}");

    // After a reconnect the project's datasets are fed under the same ids.
    call("io.disconnect", json!({})).await.unwrap();
    call("io.connect", json!({})).await.unwrap();
    let mut frame = Value::Null;
    for _ in 0..1500 {
        frame = call("dashboard.latestFrame", json!({})).await.unwrap();
        if frame["values"]["auto-1-2"].is_number() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(frame["values"]["auto-1-2"].is_number(), "{frame}");
    call("io.disconnect", json!({})).await.unwrap();
}
