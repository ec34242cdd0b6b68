//! A device that stops taking bytes (a stalled TCP peer, hardware flow control holding a
//! serial line): one-off sends – the console and action clicks – wait for it up to a cap,
//! then fail with the reason instead of piling up a task and its bytes per send. A real TCP
//! peer that never reads fills the kernel's buffers until writes block.

use std::time::Duration;

use serde_json::{json, Value};
use sextant_commands::Policy;
use sextant_runtime::{Caller, Runtime, Workspace};
use sextant_telemetry::Project;

/// A peer that accepts and then never reads; the listener and its socket live as long as
/// the returned guard.
fn stalled_peer() -> (
    u16,
    std::thread::JoinHandle<()>,
    std::sync::mpsc::Sender<()>,
) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let peer = std::thread::spawn(move || {
        let (socket, _) = listener.accept().unwrap();
        let _ = stopped.recv();
        drop(socket);
    });
    (port, peer, stop)
}

fn person(rt: &mut Runtime, name: &str, params: Value) -> Result<Value, String> {
    let policy = Policy {
        auto_approve_edits: true,
        allow_device_control: true,
        ..Policy::default()
    };
    rt.execute(Caller::Ui, name, params, policy, true)
        .map_err(|e| e.message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_to_a_device_that_takes_nothing_stop_at_the_cap_with_the_reason() {
    let (port, peer, stop) = stalled_peer();
    let project: Project = serde_json::from_value(json!({
        "title": "Stalled",
        "sources": [{"id": "dev", "connection": {"type": "tcp", "host": "127.0.0.1", "port": port}}],
        "actions": [{"id": "a", "title": "Poke", "payload": "x"}],
    }))
    .unwrap();
    let mut rt = Runtime::new(Workspace::new(project));
    person(&mut rt, "io.connect", json!({})).unwrap();
    for _ in 0..1500 {
        let status = person(&mut rt, "io.status", json!({})).unwrap();
        if status["sources"][0]["status"] == "connected" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // 512 KiB a send: the peer's and our kernel buffers hold a few MiB, so writes block
    // after a handful and every later send waits.
    let payload = "y".repeat(512 * 1024);
    let mut refused = None;
    for n in 0..400 {
        match person(&mut rt, "console.send", json!({ "data": payload })) {
            Ok(_) => tokio::time::sleep(Duration::from_millis(2)).await,
            Err(message) => {
                refused = Some((n, message));
                break;
            }
        }
    }
    let (n, message) = refused.expect("a send is refused once the cap is reached");
    assert!(message.contains("not taking bytes"), "{message}");
    // The cap (64 waiting) plus what the kernel's buffers took before writes blocked.
    assert!((64..=64 + 40).contains(&n), "refused after {n} sends");
    // A click is a one-off send too, refused the same way.
    let click = person(&mut rt, "project.action.run", json!({ "id": "a" }));
    assert!(click.unwrap_err().contains("not taking bytes"));
    // The device takes bytes again once it reads (here: it goes away and the run ends).
    person(&mut rt, "io.disconnect", json!({})).unwrap();
    stop.send(()).unwrap();
    peer.join().unwrap();
}
