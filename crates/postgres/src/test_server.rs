//! A private PostgreSQL server on 127.0.0.1 for tests and benchmarks: the distribution's
//! own `initdb` and `postgres` in a temporary directory, password login (SCRAM) for one
//! user, stopped and removed on drop.
//!
//! PostgreSQL refuses to run as root; as root the server runs as the `postgres` account the
//! distribution's package creates. A missing server is a failure that says what to install,
//! never a skipped test.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The user the server is made with, and its password.
pub const USER: &str = "sextant";
pub const PASSWORD: &str = "correct horse battery staple";

/// A running server (or one stopped by [`TestServer::stop`], to be started again).
pub struct TestServer {
    pub port: u16,
    bin: PathBuf,
    dir: tempfile::TempDir,
    child: Option<Child>,
    as_postgres: bool,
}

/// The directory holding `initdb` and `postgres`: on the PATH, else the newest under
/// Debian's `/usr/lib/postgresql/<version>/bin`.
fn bin_dir() -> PathBuf {
    if let Ok(path) = std::env::var("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("initdb").is_file() && dir.join("postgres").is_file() {
                return dir;
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).unwrap_or_else(|| {
        panic!(
            "no PostgreSQL server here (`initdb` and `postgres`): install the `postgresql` \
             package (Debian) – these tests run against a real server"
        )
    })
}

fn is_root() -> bool {
    // The owner of this process's own /proc entry is its effective user.
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}

impl TestServer {
    /// Makes a database cluster and starts its server; panics with the server's words when
    /// it cannot.
    pub fn start() -> TestServer {
        let bin = bin_dir();
        let dir = tempfile::Builder::new()
            .prefix("sextant-pg-")
            .tempdir()
            .expect("a temporary directory");
        let as_postgres = is_root();
        std::fs::write(dir.path().join("pw"), PASSWORD).expect("the password file");
        if as_postgres {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("chown runs");
            assert!(
                status.success(),
                "could not give the server's directory to the `postgres` account (is the \
                 `postgresql` package installed?)"
            );
        }
        let mut server = TestServer {
            port: free_port(),
            bin,
            dir,
            child: None,
            as_postgres,
        };
        let data = server.data();
        let pw = server.dir.path().join("pw");
        let out = server
            .command("initdb")
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                USER,
                "--auth=scram-sha-256",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ])
            .arg(format!("--pwfile={}", pw.display()))
            .output()
            .expect("initdb runs");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        server.start_again();
        server
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The directory of the server's files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=postgres", "--regid=postgres", "--init-groups"])
                .arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    /// Starts the server (again) on its port and waits until it answers.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "the server is running");
        // A new log each start, so the line waited for below is this start's.
        let log = std::fs::File::create(self.dir.path().join("server.log")).expect("a log file");
        let child = self
            .command("postgres")
            .arg("-D")
            .arg(self.data())
            .args(["-p", &self.port.to_string()])
            .arg("-k")
            .arg(self.dir.path())
            .args(["-c", "listen_addresses=127.0.0.1"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("postgres starts");
        self.child = Some(child);
        // Listening is not ready: until recovery is done, the server refuses logins with
        // "the database system is starting up". It logs when it accepts them.
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if self.log().contains("ready to accept connections") {
                return;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("the server stopped ({status}): {}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the server did not listen within a minute: {}", self.log());
    }

    /// Stops the server as an administrator's fast shutdown does: connections are cut,
    /// transactions in progress roll back.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGINT is PostgreSQL's "fast shutdown".
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if child.try_wait().ok().flatten().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A client of the server's `postgres` database, as [`USER`], for a test to look
    /// at what the sink wrote (inside a tokio runtime).
    pub async fn client(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::Config::new()
            .host("127.0.0.1")
            .port(self.port)
            .user(USER)
            .password(PASSWORD)
            .dbname("postgres")
            .connect(tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("the test's client connects: {e}"));
        tokio::spawn(connection);
        client
    }

    /// What the server wrote to its log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
