//! `sextant mcp` end to end: raw newline-delimited JSON-RPC 2.0 over the real binary's
//! stdin and stdout, the way an agent launching it would speak.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

/// Long enough for a slow CI machine; a hang fails instead of blocking the suite.
const TIMEOUT: Duration = Duration::from_secs(60);

struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Session {
    fn start(args: &[&str]) -> Session {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sextant"))
            .arg("mcp")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the sextant binary runs");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Session {
            child,
            stdin,
            lines,
        }
    }

    fn send_raw(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, message: Value) {
        self.send_raw(&message.to_string());
    }

    /// The next line on stdout; every one of them must be a JSON-RPC message.
    fn next(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(TIMEOUT)
            .expect("the server answers in time");
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carries only JSON-RPC, got `{line}`: {e}"));
        assert_eq!(message["jsonrpc"], "2.0", "{message}");
        message
    }

    /// Sends a request and returns the response with its id (skipping notifications).
    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self.next();
            if message.get("id") == Some(&json!(id)) {
                return message;
            }
            assert!(
                message.get("id").is_none(),
                "a response to another request: {message}"
            );
        }
    }

    fn call(&mut self, id: u64, tool: &str, arguments: Value) -> Value {
        let response = self.request(
            id,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        );
        response
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{tool}: {response}"))
    }

    /// Closes stdin and waits for the server to exit on its own.
    fn finish(mut self) -> (std::process::ExitStatus, String) {
        drop(self.stdin.take());
        let (tx, rx) = mpsc::channel();
        let mut child = self.child;
        std::thread::spawn(move || {
            let status = child.wait().unwrap();
            let mut stderr = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
            }
            let _ = tx.send((status, stderr));
        });
        rx.recv_timeout(TIMEOUT)
            .expect("the server exits when its input closes")
    }
}

fn initialize(s: &mut Session) -> Value {
    let response = s.request(
        1,
        "initialize",
        json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw-json-rpc-test", "version": "0"}
        }),
    );
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    response["result"].clone()
}

fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn an_agent_drives_sextant_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("project.json");
    std::fs::write(
        &path,
        sextant_telemetry::project::Project::default().to_json_string(),
    )
    .unwrap();
    let mut s = Session::start(&["--project", path.to_str().unwrap()]);

    let init = initialize(&mut s);
    assert_eq!(init["protocolVersion"], "2025-06-18");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    assert!(init["capabilities"]["resources"].is_object(), "{init}");
    assert_eq!(init["serverInfo"]["name"], "sextant");

    let list = s.request(2, "tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().expect("a tool list");
    let add = tools
        .iter()
        .find(|t| t["name"] == "project_dataset_add")
        .expect("project.dataset.add is listed");
    assert_eq!(add["inputSchema"]["type"], "object");
    assert!(add["inputSchema"]["properties"]["group"].is_object());

    // A Safe command returns its result.
    let history = s.call(3, "project_history", json!({}));
    assert_eq!(history["isError"], false, "{history}");
    let project = s.call(4, "project_get", json!({}));
    assert_eq!(project["isError"], false);
    assert_eq!(project["structuredContent"]["groups"], json!([]));

    // A Confirm edit runs at once and the next call sees it.
    let added = s.call(5, "project_group_add", json!({"title": "Battery"}));
    assert_eq!(added["isError"], false, "{added}");
    let group_id = added["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let project = s.call(6, "project_get", json!({}));
    assert_eq!(project["structuredContent"]["groups"][0]["id"], group_id);
    assert_eq!(
        project["structuredContent"]["groups"][0]["title"],
        "Battery"
    );

    // DeviceGated needs the user's consent, which this server was not given.
    let send = s.call(7, "console_send", json!({"data": "hello"}));
    assert_eq!(send["isError"], true, "{send}");
    assert!(
        text_of(&send).contains("allow device control"),
        "{}",
        text_of(&send)
    );
    assert_eq!(send["structuredContent"]["code"], "notAllowed");

    // Invalid parameters come back with the path of the bad value.
    let bad = s.call(8, "project_group_add", json!({"title": 5}));
    assert_eq!(bad["isError"], true);
    assert_eq!(bad["structuredContent"]["code"], "invalidParams");
    assert_eq!(bad["structuredContent"]["path"], "title");
    assert!(text_of(&bad).contains("title"));

    // The project resource is the project JSON.
    let read = s.request(9, "resources/read", json!({"uri": "sextant://project"}));
    let contents = &read["result"]["contents"][0];
    assert_eq!(contents["uri"], "sextant://project");
    assert_eq!(contents["mimeType"], "application/json");
    let from_resource: Value = serde_json::from_str(contents["text"].as_str().unwrap()).unwrap();
    assert_eq!(from_resource["groups"][0]["title"], "Battery");
    let listed = s.request(10, "resources/list", json!({}));
    let uris: Vec<&str> = listed["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert!(uris.contains(&"sextant://frame/latest"), "{uris:?}");

    // Bad input gets a JSON-RPC error, and the server keeps serving.
    s.send_raw("{this is not json");
    let error = s.next();
    assert_eq!(error["error"]["code"], -32700, "{error}");
    assert!(error["id"].is_null());
    s.send_raw(r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"arguments":{}}}"#);
    let error = s.next();
    assert_eq!(error["id"], 11);
    assert_eq!(error["error"]["code"], -32602, "{error}");
    let unknown = s.request(12, "no/such/method", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let unknown_tool = s.request(13, "tools/call", json!({"name": "nope", "arguments": {}}));
    assert_eq!(unknown_tool["error"]["code"], -32602, "{unknown_tool}");
    let pong = s.request(14, "ping", json!({}));
    assert_eq!(pong["result"], json!({}), "{pong}");

    let (status, stderr) = s.finish();
    assert!(status.success(), "exit {status}; stderr:\n{stderr}");
    // The edit reached the file, even though the client left before the auto-save delay.
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(saved["groups"][0]["title"], "Battery", "{saved}");
}

#[test]
fn device_control_is_the_users_flag() {
    let mut s = Session::start(&["--allow-device-control"]);
    initialize(&mut s);
    let send = s.call(2, "console_send", json!({"data": "hello"}));
    // Allowed by policy; it fails only because no device is connected.
    assert_eq!(send["isError"], true, "{send}");
    assert_ne!(send["structuredContent"]["code"], "notAllowed", "{send}");
    let restore = s.call(3, "assistant_restore", json!({"id": 1}));
    assert_eq!(restore["structuredContent"]["code"], "notAllowed");
    let (status, _) = s.finish();
    assert!(status.success());
}

/// `sextant mcp --tcp 0`: the server picks a free port of 127.0.0.1, says which on stderr,
/// and speaks the same newline-delimited JSON-RPC over the socket as on stdio.
#[test]
fn an_agent_drives_sextant_over_tcp() {
    use std::net::{SocketAddr, TcpStream};

    let mut child = Command::new(env!("CARGO_BIN_EXE_sextant"))
        .args(["mcp", "--tcp", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the sextant binary runs");
    // Killed however the test ends.
    struct Kill(Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let stderr = child.stderr.take().unwrap();
    let _child = Kill(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let addr: SocketAddr = loop {
        let line = rx
            .recv_timeout(TIMEOUT)
            .expect("the server prints its address on stderr");
        if let Some(rest) = line.strip_prefix("MCP server on ") {
            let addr = rest.split_whitespace().next().unwrap();
            break addr.parse().unwrap_or_else(|e| panic!("`{line}`: {e}"));
        }
    };
    assert!(addr.ip().is_loopback(), "{addr}");
    assert_ne!(addr.port(), 0, "the bound port, not the requested 0");

    let stream = TcpStream::connect(addr).expect("the MCP port accepts");
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut lines = BufReader::new(stream.try_clone().unwrap()).lines();
    let mut stream = stream;
    // A request waits for its response; a notification (no id) does not.
    let mut send = |id: Option<u64>, method: &str, params: Value| -> Value {
        let mut message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        if let Some(id) = id {
            message["id"] = json!(id);
        }
        writeln!(stream, "{message}").unwrap();
        let Some(id) = id else { return Value::Null };
        loop {
            let line = lines
                .next()
                .expect("the connection stays open")
                .expect("the server answers in time");
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("the socket carries only JSON-RPC, got `{line}`: {e}"));
            assert_eq!(message["jsonrpc"], "2.0", "{message}");
            if message.get("id") == Some(&json!(id)) {
                return message;
            }
        }
    };
    let init = send(
        Some(1),
        "initialize",
        json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw-json-rpc-test", "version": "0"}
        }),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "sextant", "{init}");
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "{init}"
    );
    send(None, "notifications/initialized", json!({}));
    let list = send(Some(2), "tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().expect("a tool list");
    assert!(
        tools.iter().any(|t| t["name"] == "project_dataset_add"),
        "{list}"
    );
}
