//! The owner task never waits on a caller: while one client opens a named pipe nobody
//! writes to and dry-runs a parser that spins on the most frames a dry run takes, another
//! client's `io.status` answers as it does when nothing else is running.
//!
//! Timings are only ever compared with each other (the same calls, idle and loaded), never
//! with a number of seconds; [`HANG`] only turns a stalled owner into a failure instead of
//! a test that never ends.
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sextant_commands::{ErrorCode, Policy};
use sextant_runtime::{Caller, Runtime, RuntimeHandle, Workspace};
use sextant_telemetry::dryrun::MAX_PREVIEW_FRAMES;
use sextant_telemetry::project::Project;

/// `io.status` calls in each measurement (at least; the loaded one goes on while the load
/// runs).
const CALLS: usize = 200;

/// How much slower, on average, `io.status` may answer while another client's worst
/// commands run than when the runtime is idle. Generous: the spinning parser competes for
/// the CPU; what must never happen is `io.status` waiting for those commands to finish.
const BOUND: f64 = 50.0;

/// A call that has not answered after this long is waiting on something it must not.
const HANG: Duration = Duration::from_secs(30);

/// Script time a frame of the spinning parser aims at: a share of the 250 ms a preview's
/// call may take, with room for a machine six times slower than when it was calibrated (at
/// 80 ms a loaded CI run timed the first frame out; the dry run still spins through its
/// whole 2 s budget either way).
const SPIN_PER_FRAME: Duration = Duration::from_millis(40);

fn policy() -> Policy {
    Policy {
        auto_approve_edits: true,
        paths_from_person: true,
        ..Policy::default()
    }
}

/// A runtime whose project has one source, as the dry runs need.
fn runtime() -> RuntimeHandle {
    let mut rt = Runtime::new(Workspace::new(Project::default()));
    rt.execute(
        Caller::Cli,
        "project.source.add",
        json!({"source": {"title": "Bench", "connection": {"type": "serial", "port": "/dev/ttyUSB0", "baud": 115200}}}),
        policy(),
        false,
    )
    .unwrap();
    rt.spawn(None)
}

async fn call(
    h: &RuntimeHandle,
    command: &str,
    params: Value,
) -> Result<Value, sextant_commands::CommandError> {
    match tokio::time::timeout(HANG, h.call(Caller::Api, command, params, policy())).await {
        Ok(result) => result,
        Err(_) => {
            panic!("{command} did not answer in {HANG:?}: the owner task is waiting on a caller")
        }
    }
}

/// How long one `io.status` takes to answer.
async fn status(h: &RuntimeHandle) -> Duration {
    let started = Instant::now();
    call(h, "io.status", json!({})).await.unwrap();
    started.elapsed()
}

/// The mean time of `io.status` over at least [`CALLS`] calls, and on while `busy`; and
/// how many calls that was.
async fn mean_status(h: &RuntimeHandle, busy: impl Fn() -> bool) -> (Duration, u32) {
    let (mut total, mut calls) = (Duration::ZERO, 0u32);
    while (calls as usize) < CALLS || busy() {
        total += status(h).await;
        calls += 1;
    }
    (total / calls, calls)
}

/// A Lua parser that counts to `n` on every frame.
fn spinning_lua(n: u64) -> String {
    format!("function parse(f) local x = 0 for i = 1, {n} do x = x + i end return {{f}} end")
}

fn dry_run(frames: usize, code: &str) -> Value {
    json!({"frames": vec!["1"; frames], "code": code, "language": "lua"})
}

/// How far the spinning parser counts for a frame to take about [`SPIN_PER_FRAME`] here.
async fn calibrate(h: &RuntimeHandle) -> u64 {
    let mut n: u64 = 200_000;
    loop {
        let started = Instant::now();
        let out = call(
            h,
            "project.frameParser.dryRun",
            dry_run(5, &spinning_lua(n)),
        )
        .await
        .unwrap();
        let per_frame = started.elapsed() / 5;
        if out
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f.get("rows").is_some())
        {
            let scale = SPIN_PER_FRAME.as_secs_f64() / per_frame.as_secs_f64().max(1e-6);
            return ((n as f64 * scale) as u64).max(1);
        }
        // Even this count ran out of time on this machine: count less.
        assert!(
            n > 1_000,
            "the spinning parser fails however little it counts: {out}"
        );
        n /= 8;
    }
}

fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only reads it.
    let made = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
    assert_eq!(made, 0, "mkfifo {}", path.display());
}

/// Ends a wait on the named pipe, should anything still wait on it when the test ends (a
/// runtime that opens it blocking): a writer that comes and goes gives its reader an end.
struct Unblock(PathBuf);

impl Drop for Unblock {
    fn drop(&mut self) {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clients_fifo_open_and_spinning_dry_run_do_not_stall_io_status() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("nobody-writes.sextant.json");
    mkfifo(&fifo);
    let _unblock = Unblock(fifo.clone());

    let first = runtime();
    let second = first.clone();
    let count = calibrate(&first).await;

    let (idle_before, _) = mean_status(&second, || false).await;

    // The first client's worst: a named pipe to open, and the most frames a dry run takes
    // through a parser that spins on each.
    let open = tokio::spawn({
        let (first, fifo) = (first.clone(), fifo.clone());
        async move { call(&first, "project.open", json!({"path": fifo})).await }
    });
    let dry = tokio::spawn({
        let first = first.clone();
        let params = dry_run(MAX_PREVIEW_FRAMES, &spinning_lua(count));
        async move {
            let started = Instant::now();
            let out = call(&first, "project.frameParser.dryRun", params).await;
            (out, started.elapsed())
        }
    });
    let (loaded, loaded_calls) =
        mean_status(&second, || !open.is_finished() || !dry.is_finished()).await;
    let opened = open.await.unwrap();
    let (ran, dry_took) = dry.await.unwrap();

    let (idle_after, _) = mean_status(&second, || false).await;
    // The slower of the two idle measurements: a machine busy with something else for a
    // moment makes the bound more generous, never less.
    let idle = idle_before.max(idle_after);
    let ratio = loaded.as_secs_f64() / idle.as_secs_f64();
    println!(
        "io.status idle: {idle_before:?} before, {idle_after:?} after (mean of {CALLS}); \
         while loaded: {loaded:?} (mean of {loaded_calls}); {ratio:.1}x; the dry run took \
         {dry_took:?} at {count} steps a frame"
    );
    assert!(
        ratio < BOUND,
        "io.status answered {ratio:.1} times slower while another client's commands ran \
         ({loaded:?} against {idle:?} idle): it waited for them"
    );

    // The named pipe is refused at once, saying what to do.
    let e = opened.unwrap_err();
    assert_eq!(e.code, ErrorCode::Failed, "{e:?}");
    assert!(
        e.message
            .contains("is a named pipe, not a regular file; choose a project file"),
        "{e}"
    );

    // The dry run ran until its budget was spent, kept what it made, and says so for the
    // rest.
    let frames = ran.unwrap();
    let frames = frames.as_array().unwrap();
    assert_eq!(frames.len(), MAX_PREVIEW_FRAMES);
    assert_eq!(frames[0]["rows"], json!([["1"]]), "{}", frames[0]);
    let last = frames.last().unwrap();
    assert!(
        last["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("not run: this dry run used up its 2 s of script time")),
        "{last}"
    );

    // The owner is still the one that changes the project: a real file opens, through the
    // same job, and the project is its.
    let file = dir.path().join("real.sextant.json");
    let project = Project {
        title: "Opened off the owner".into(),
        ..Project::default()
    };
    std::fs::write(&file, project.to_json_string()).unwrap();
    let opened = call(&first, "project.open", json!({"path": file}))
        .await
        .unwrap();
    assert_eq!(opened["file"], json!(file));
    let now = call(&second, "project.get", json!({})).await.unwrap();
    assert_eq!(now["title"], "Opened off the owner");
    let history = call(&second, "project.history", json!({})).await.unwrap();
    assert_eq!(
        history["undo"].as_array().unwrap().last().unwrap(),
        &json!(format!("open {}", file.display()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_reading_a_callers_path_refuses_a_named_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    mkfifo(&fifo);
    let _unblock = Unblock(fifo.clone());
    let h = runtime();
    for (command, params, says) in [
        (
            "project.open",
            json!({"path": fifo}),
            "choose a project file",
        ),
        (
            "project.import",
            json!({"path": fifo}),
            "choose a project file",
        ),
        (
            "csvPlayer.open",
            json!({"path": fifo, "replaceProject": true}),
            "choose a CSV file",
        ),
        (
            "sessions.setDatabase",
            json!({"path": fifo}),
            "choose a sessions database file",
        ),
    ] {
        let e = call(&h, command, params).await.unwrap_err();
        assert!(
            e.message.contains("is a named pipe, not a regular file") && e.message.contains(says),
            "{command}: {e}"
        );
    }
    // Nothing changed: the project is the one it was.
    let history = call(&h, "project.history", json!({})).await.unwrap();
    assert_eq!(history["undo"].as_array().unwrap().len(), 1, "{history}");
}

#[tokio::test]
async fn dry_runs_over_the_frame_cap_are_refused_naming_it() {
    let h = runtime();
    let over = MAX_PREVIEW_FRAMES + 1;
    let cap = format!("at most {MAX_PREVIEW_FRAMES} ");
    let e = call(
        &h,
        "project.frameParser.dryRun",
        json!({"frames": vec!["1,2"; over]}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        (e.code, e.path.as_deref()),
        (ErrorCode::InvalidParams, Some("frames"))
    );
    assert!(e.message.contains(&cap), "{e}");
    let e = call(
        &h,
        "project.transform.dryRun",
        json!({"transform": {"language": "expression", "code": "value"}, "values": vec![1; over]}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        (e.code, e.path.as_deref()),
        (ErrorCode::InvalidParams, Some("values"))
    );
    assert!(e.message.contains(&cap), "{e}");
    let e = call(
        &h,
        "project.dryRun.endToEnd",
        json!({"data": "1\n".repeat(over)}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        (e.code, e.path.as_deref()),
        (ErrorCode::InvalidParams, Some("data"))
    );
    assert!(e.message.contains(&cap), "{e}");
    // At the cap, they run.
    let out = call(
        &h,
        "project.dryRun.endToEnd",
        json!({"data": "1\n".repeat(MAX_PREVIEW_FRAMES)}),
    )
    .await
    .unwrap();
    assert_eq!(out["frames"], MAX_PREVIEW_FRAMES);
}

/// Deferred jobs past [`MAX_JOBS`] running and [`MAX_WAITING_JOBS`] waiting are refused at
/// once, saying why, instead of queueing without end (a door that spawns a task per
/// request, as MCP does, could otherwise pile them up); every other call is answered; and
/// once they are done the count is back to nothing waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_past_the_waiting_cap_are_refused_at_once_and_the_rest_run() {
    use sextant_runtime::{MAX_JOBS, MAX_WAITING_JOBS};
    let h = runtime();
    const OVER: usize = 6;
    // Each spins until the script's time runs out: half a second of work, while the
    // whole batch is handed in within milliseconds.
    let slow = dry_run(1, "function parse(f) while true do end end");
    let calls: Vec<_> = (0..MAX_JOBS + MAX_WAITING_JOBS + OVER)
        .map(|_| {
            let (h, params) = (h.clone(), slow.clone());
            tokio::spawn(async move { call(&h, "project.frameParser.dryRun", params).await })
        })
        .collect();
    let mut refused = Vec::new();
    for c in calls {
        if let Err(e) = c.await.unwrap() {
            refused.push(e.message);
        }
    }
    assert!(
        !refused.is_empty() && refused.len() <= OVER,
        "{} refused of {}: {refused:?}",
        refused.len(),
        MAX_JOBS + MAX_WAITING_JOBS + OVER
    );
    for message in &refused {
        assert!(message.starts_with("Sextant is busy"), "{message}");
        assert!(message.contains(&MAX_WAITING_JOBS.to_string()), "{message}");
    }
    // Nothing is left counted: as many quick jobs as may wait all run.
    let quick = dry_run(1, "function parse(f) return {f} end");
    let calls: Vec<_> = (0..MAX_JOBS + MAX_WAITING_JOBS)
        .map(|_| {
            let (h, params) = (h.clone(), quick.clone());
            tokio::spawn(async move { call(&h, "project.frameParser.dryRun", params).await })
        })
        .collect();
    for c in calls {
        c.await.unwrap().expect("a job within the cap runs");
    }
}
