//! Real components for device tests: pseudo-terminal pairs (socat) and a mosquitto broker.
//!
//! A missing component fails the test under CI (`CI` set, as `./dev test` sets it) and
//! prints a loud skip line naming it otherwise, so nothing is ever skipped silently, and a
//! local `./dev test` fails exactly where CI would. [`unavailable`] is the one place that
//! decides; [`require`] checks a program on PATH with it.
#![allow(dead_code)]

use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether this is a CI run (`CI` set to anything but empty), where nothing may be skipped.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// Reports that `component` is missing: panics under CI saying what to install; otherwise
/// prints a loud skip line and returns, and the caller returns from its test.
pub fn unavailable(component: &str, install: &str) {
    if in_ci() {
        panic!("required test component `{component}` is missing: {install}");
    }
    // Straight to stderr: the test harness swallows `eprintln!` of passing tests.
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPED: `{component}` is missing ({install}); this test did not run ***\n"
    );
}

/// Whether `program` can run here; panics under CI when it cannot (see [`unavailable`]).
pub fn require(program: &str, package: &str) -> bool {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !found {
        unavailable(program, &format!("apt-get install {package}"));
    }
    found
}

/// A Python that can `probe` (an import line), for a test's server or reference tool:
/// `SEXTANT_TEST_PYTHON` when set (an explicit choice that does not work is a broken setup,
/// never a skip), else the virtualenv `./dev test` makes in the target directory (found
/// from this test binary's place, `<target>/debug/deps/…`), else `python3`. When none can,
/// it is [`unavailable`]: `component` is what to name, `install` how to get it.
pub fn python_with(component: &str, probe: &str, install: &str) -> Option<PathBuf> {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    static FOUND: Mutex<BTreeMap<String, Result<PathBuf, String>>> = Mutex::new(BTreeMap::new());
    let can = |python: &Path| {
        Command::new(python)
            .args(["-c", probe])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let found = FOUND
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(probe.to_string())
        .or_insert_with(|| {
            if let Some(p) = std::env::var_os("SEXTANT_TEST_PYTHON") {
                let p = PathBuf::from(p);
                assert!(
                    can(&p),
                    "SEXTANT_TEST_PYTHON={} cannot `{probe}`: {install}",
                    p.display()
                );
                return Ok(p);
            }
            let venv = std::env::current_exe()
                .ok()
                .and_then(|exe| exe.ancestors().nth(3).map(Path::to_path_buf))
                .map(|target| target.join("test-python").join("bin").join("python"));
            venv.into_iter()
                .chain([PathBuf::from("python3")])
                .find(|p| can(p))
                .ok_or_else(|| format!("no Python with {component} was found: {install}"))
        })
        .clone();
    match found {
        Ok(p) => Some(p),
        Err(why) => {
            unavailable(component, &why);
            None
        }
    }
}

/// Reads `source`'s chunks until `want` bytes have arrived, the source ends or `timeout`
/// passes; what arrived.
pub async fn collect(
    source: &mut sextant_devices::Source,
    want: usize,
    timeout: Duration,
) -> Vec<u8> {
    let mut got = Vec::with_capacity(want);
    let _ = tokio::time::timeout(timeout, async {
        while got.len() < want {
            match source.chunks.recv().await {
                Some(c) => got.extend_from_slice(&c.data),
                None => break,
            }
        }
    })
    .await;
    got
}

/// Polls `cond` every 10 ms until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    cond()
}

/// A socat pseudo-terminal pair: `a` is the device side Sextant opens, `b` the peer.
pub struct PtyPair {
    pub a: PathBuf,
    pub b: PathBuf,
    child: Child,
}

impl PtyPair {
    pub fn start(dir: &Path) -> PtyPair {
        let a = dir.join("ttyA");
        let b = dir.join("ttyB");
        let _ = std::fs::remove_file(&a);
        let _ = std::fs::remove_file(&b);
        let child = Command::new("socat")
            .arg(format!("pty,raw,echo=0,link={}", a.display()))
            .arg(format!("pty,raw,echo=0,link={}", b.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("socat starts");
        assert!(
            wait_until(Duration::from_secs(5), || a.exists() && b.exists()),
            "socat did not create the pty links"
        );
        // socat may make the links before it puts the terminals in raw mode; a write in
        // between goes through the line discipline (`\n` becomes `\r\n`). Set raw mode
        // here too, so a test's first bytes arrive as written.
        for end in [&a, &b] {
            let _ = Command::new("stty")
                .arg("-F")
                .arg(end)
                .args(["raw", "-echo"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        PtyPair { a, b, child }
    }

    /// Simulates unplugging the device: both ends vanish.
    pub fn unplug(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = wait_until(Duration::from_secs(2), || !self.a.exists());
    }
}

impl Drop for PtyPair {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A private mosquitto broker on 127.0.0.1, stopped on drop.
pub struct Broker {
    pub port: u16,
    config: PathBuf,
    child: Option<Child>,
}

impl Broker {
    pub fn start(dir: &Path) -> Broker {
        let port = free_port();
        let config = dir.join("mosquitto.conf");
        std::fs::write(
            &config,
            format!(
                "listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n\
                 max_queued_messages 200000\nmax_inflight_messages 1000\n"
            ),
        )
        .unwrap();
        let mut broker = Broker {
            port,
            config,
            child: None,
        };
        broker.restart();
        broker
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn restart(&mut self) {
        self.stop();
        let child = Command::new("mosquitto")
            .arg("-c")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mosquitto starts");
        self.child = Some(child);
        let port = self.port;
        assert!(
            wait_until(Duration::from_secs(5), || std::net::TcpStream::connect((
                "127.0.0.1",
                port
            ))
            .is_ok()),
            "mosquitto did not start listening"
        );
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A private CA and a server certificate for `localhost`, made with openssl.
pub fn make_certs(dir: &std::path::Path) -> bool {
    if !require("openssl", "openssl") {
        return false;
    }
    let run = |args: &str| {
        let ok = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("cd {} && {args}", dir.display()))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "openssl step failed: {args}");
    };
    run("openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=sextant-test-ca");
    run("openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost");
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .unwrap();
    run("openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile ext.cnf");
    // mosquitto started as root drops to its own user, which must be able to read these.
    run("chmod 0644 ca.pem server.pem server.key && chmod 0755 .");
    true
}

/// A client certificate signed by the test CA (`client.pem`, `client.key`) and an old
/// version 1 one (`client-v1.pem`), made with openssl after [`make_certs`].
pub fn make_client_certs(dir: &std::path::Path) {
    let run = |args: &str| {
        let ok = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("cd {} && {args}", dir.display()))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "step failed: {args}");
    };
    // An EC key, the kind a small device or a cloud broker hands out.
    run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout client.key -out client.csr -subj /CN=sextant-bench");
    std::fs::write(
        dir.join("client.cnf"),
        "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n",
    )
    .unwrap();
    run("openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 -extfile client.cnf");
    // A version 1 certificate (no extensions), as an old how-to makes one.
    run("openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client-v1.pem -days 2");
    run("chmod 0644 client.pem client.key");
}

/// The repository's `fixtures/` folder.
pub fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}
