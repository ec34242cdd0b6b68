//! The disk filling up while a run records, exports CSV and saves its project – on a real
//! filesystem that runs out of space (a small tmpfs mounted for the test).
//!
//! What a person must get: a clear reason for each write that stopped (the disk is full,
//! as a kind the UI words in every language, never only a log line), the run itself going
//! on, recording resuming by itself once space is freed, and every file that was complete
//! before – the project, an earlier export, an earlier session – still whole and readable.

#[path = "../../devices/tests/common/mod.rs"]
mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use sextant_commands::Policy;
use sextant_runtime::{Caller, Event, Runtime, RuntimeHandle, Workspace};
use sextant_sessions::SessionStore;
use sextant_telemetry::project::Project;

/// A tmpfs of `size` mounted over a fresh directory, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            common::unavailable(
                "a small tmpfs (mount -t tmpfs)",
                "run the tests as root, as CI does",
            );
            return None;
        }
        Some(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Fills the filesystem holding `dir` with one file until a write fails.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let block = vec![0x5au8; 16 * 1024];
    loop {
        if let Err(e) = f.write_all(&block) {
            assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{e}");
            break;
        }
    }
    // Whatever single blocks are left.
    while f.write_all(&[0]).is_ok() {}
    let _ = f.sync_all();
    path
}

fn edits() -> Policy {
    Policy {
        auto_approve_edits: true,
        paths_from_person: true,
        ..Policy::default()
    }
}

async fn call(h: &RuntimeHandle, name: &str, p: Value) -> Result<Value, String> {
    h.call(Caller::Ui, name, p, edits())
        .await
        .map_err(|e| e.message)
}

async fn ok(h: &RuntimeHandle, name: &str, p: Value) -> Value {
    call(h, name, p.clone())
        .await
        .unwrap_or_else(|e| panic!("{name} {p}: {e}"))
}

/// Polls `what` every 20 ms for up to 30 s until `cond` holds on it.
async fn until(h: &RuntimeHandle, name: &str, cond: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..1500 {
        let v = ok(h, name, json!({})).await;
        if cond(&v) {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "{name} never reached the state: {}",
        ok(h, name, json!({})).await
    );
}

fn project() -> Project {
    serde_json::from_value(json!({
        "format": "sextant-project", "schemaVersion": 1,
        "sources": [{"id": "sim", "connection": {"type": "simulator", "frameRateHz": 500,
            "channels": [{"name": "a", "waveform": "saw", "frequencyHz": 1, "amplitude": 1},
                         {"name": "b", "waveform": "sine", "frequencyHz": 3, "amplitude": 2}]},
            "parser": {"kind": "delimited"}}],
        "groups": [{"id": "g", "title": "G", "datasets": [
            {"id": "a", "title": "A", "index": 1}, {"id": "b", "title": "B", "index": 2}]}]
    }))
    .unwrap()
}

async fn disconnect_and_wait_for(h: &RuntimeHandle, file: &Path) {
    ok(h, "io.disconnect", json!({})).await;
    until(h, "io.status", |s| s["connected"] == false).await;
    // The export's writer ends with the pipeline, just after the disconnect.
    assert!(
        common::wait_until(Duration::from_secs(10), || file.exists()),
        "{} never appeared",
        file.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_stops_writes_with_a_clear_reason_and_loses_nothing_complete() {
    let Some(disk) = Tmpfs::mount("4m") else {
        return;
    };
    let dir = disk.path();
    let project_file = dir.join("bench.sextant.json");
    let db = dir.join("sessions.sqlite");
    let live_csv = dir.join("live.csv");
    let first_csv = dir.join("first.csv");

    let h = Runtime::new(Workspace::new(project())).spawn(Some(Duration::from_millis(50)));
    let mut events = h.subscribe();
    ok(&h, "project.save", json!({"path": project_file})).await;
    ok(&h, "sessions.setDatabase", json!({"path": db})).await;
    ok(&h, "csvExport.enable", json!({"path": live_csv})).await;

    // ---- a first run, with room to spare: a session, a live export, an export ----
    ok(&h, "io.connect", json!({})).await;
    let first = ok(&h, "sessions.startRecording", json!({"title": "first"})).await["id"]
        .as_i64()
        .unwrap();
    until(&h, "sessions.list", |l| {
        l["recording"]["frames"].as_u64() >= Some(300)
    })
    .await;
    ok(&h, "sessions.stopRecording", json!({})).await;
    disconnect_and_wait_for(&h, &live_csv).await;
    ok(
        &h,
        "sessions.exportCsv",
        json!({"id": first, "path": first_csv}),
    )
    .await;
    let project_before = std::fs::read(&project_file).unwrap();
    let live_before = std::fs::read(&live_csv).unwrap();
    let first_before = std::fs::read(&first_csv).unwrap();
    assert!(live_before.len() > 1000 && first_before.len() > 1000);

    // ---- a second run that the disk fills up under ----
    ok(&h, "io.connect", json!({})).await;
    assert_eq!(
        std::fs::read(&live_csv).unwrap(),
        live_before,
        "a new run does not truncate the last complete export"
    );
    let second = ok(&h, "sessions.startRecording", json!({"title": "second"})).await["id"]
        .as_i64()
        .unwrap();
    until(&h, "sessions.list", |l| {
        l["recording"]["frames"].as_u64() >= Some(100)
    })
    .await;
    let filler = fill(dir);

    // Recording: goes on, counts what it loses, and says why.
    let listing = until(&h, "sessions.list", |l| {
        l["recording"]["problem"]["kind"] == "diskFull"
    })
    .await;
    assert!(
        listing["recording"]["droppedFrames"].as_u64() > Some(0),
        "{listing}"
    );
    assert_eq!(ok(&h, "io.status", json!({})).await["connected"], true);

    // The live CSV export: stops writing, says why, counts what it could not write.
    let csv = until(&h, "csvExport.status", |s| {
        s["problem"]["kind"] == "diskFull"
    })
    .await;
    assert!(
        csv["problem"]["detail"].as_str().unwrap().contains("space"),
        "{csv}"
    );

    // A save the person asks for: refused with the reason; the file is as it was.
    ok(
        &h,
        "project.group.add",
        json!({"title": "Added on a full disk"}),
    )
    .await;
    let refused = call(&h, "project.save", json!({})).await.unwrap_err();
    assert!(
        refused.contains("the disk is full") && refused.contains("unchanged"),
        "{refused}"
    );
    // The automatic save after that edit: the doors are told (the UI shows it).
    let auto = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match events.recv().await {
                Ok(Event::AutoSaveFailed { problem, .. }) => return problem,
                Ok(_) => {}
                Err(e) => panic!("events ended: {e}"),
            }
        }
    })
    .await
    .expect("an automatic save failure is told to the doors");
    assert_eq!(auto.kind, sextant_fsutil::WriteProblemKind::DiskFull);
    assert_eq!(std::fs::read(&project_file).unwrap(), project_before);

    // An export of the first session over the earlier one: refused, the earlier kept.
    let refused = call(
        &h,
        "sessions.exportCsv",
        json!({"id": first, "path": first_csv}),
    )
    .await
    .unwrap_err();
    assert!(refused.contains("the disk is full"), "{refused}");
    assert_eq!(std::fs::read(&first_csv).unwrap(), first_before);

    // Space comes back: the recording saves again by itself, without a click.
    std::fs::remove_file(&filler).unwrap();
    let before = ok(&h, "sessions.list", json!({})).await["recording"]["frames"]
        .as_u64()
        .unwrap();
    let resumed = until(&h, "sessions.list", |l| {
        l["recording"]["frames"].as_u64() > Some(before + 100)
            && l["recording"].get("problem").is_none()
    })
    .await;
    let stopped = ok(&h, "sessions.stopRecording", json!({})).await;
    assert!(
        stopped["session"]["droppedFrames"].as_u64() > Some(0),
        "{stopped}"
    );
    ok(&h, "io.disconnect", json!({})).await;
    until(&h, "io.status", |s| s["connected"] == false).await;
    ok(&h, "project.save", json!({})).await;
    drop(h);

    // ---- every file that was complete is whole ----
    // The live export of the failed run never replaced the complete one; what it wrote
    // before the disk filled is beside it.
    assert!(common::wait_until(Duration::from_secs(5), || {
        live_csv.with_file_name("live.csv.partial").exists()
    }));
    assert_eq!(std::fs::read(&live_csv).unwrap(), live_before);
    assert_eq!(std::fs::read(&first_csv).unwrap(), first_before);
    let saved: Project = serde_json::from_slice(&std::fs::read(&project_file).unwrap()).unwrap();
    assert!(saved
        .groups
        .iter()
        .any(|g| g.title == "Added on a full disk"));
    let store = SessionStore::open(&db).unwrap();
    let mut again = Vec::new();
    store.export_csv(first, &mut again).unwrap();
    assert_eq!(
        again, first_before,
        "the first session reads back as exported"
    );
    let second_summary = store
        .list(None)
        .unwrap()
        .into_iter()
        .find(|s| s.id == second)
        .unwrap();
    assert!(second_summary.dropped_frames > 0 && second_summary.frames > 100);
    assert!(second_summary.ended_unix_ms.is_some());
    let integrity: String = rusqlite_integrity(&db);
    assert_eq!(integrity, "ok");
    println!(
        "disk full: recording lost {} frames and resumed ({} saved), the live export stopped after {} rows ({} dropped)",
        second_summary.dropped_frames, resumed["recording"]["frames"], csv["rows"], csv["droppedRows"]
    );
}

fn rusqlite_integrity(db: &Path) -> String {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap()
}
