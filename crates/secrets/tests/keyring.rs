//! The keyring backend against a real Secret Service: GNOME Keyring on a private session
//! bus that this test starts, with its data in a temporary home, so no real keyring of
//! whoever runs it is ever touched.
//!
//! Needs `dbus-daemon` (package `dbus-daemon`) and `gnome-keyring-daemon` (package
//! `gnome-keyring`); without them the test fails, naming the package. libdbus reads
//! `DBUS_SESSION_BUS_ADDRESS` once per process, so this binary has a single test that sets
//! it before anything connects. The Secret Service is Linux's keyring, so this binary is
//! empty elsewhere.
#![cfg(target_os = "linux")]

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sextant_secrets::{Backend, SecretStore};

/// Fails the test, naming the package to install, when `program` is missing.
fn require(program: &str, package: &str) {
    let found = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    assert!(
        found,
        "`{program}` is missing, so the keyring test cannot run: install the `{package}` \
         package (apt-get install {package})"
    );
}

/// The daemons this test started; killed (in reverse order) when the test ends, however
/// it ends.
#[derive(Default)]
struct Daemons(Vec<(&'static str, Child)>);

impl Drop for Daemons {
    fn drop(&mut self) {
        while let Some((name, mut child)) = self.0.pop() {
            if let Err(e) = child.kill() {
                eprintln!("could not stop {name}: {e}");
            }
            let _ = child.wait();
        }
    }
}

/// Starts a bus daemon with its own configuration (no service activation, so nothing but
/// what this test starts can appear on it) and returns its address.
fn start_bus(dir: &Path, daemons: &mut Daemons) -> String {
    let config = dir.join("bus.conf");
    fs::write(
        &config,
        format!(
            r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#,
            dir.join("bus").display()
        ),
    )
    .unwrap();
    let mut child = Command::new("dbus-daemon")
        .arg("--nofork")
        .arg(format!("--config-file={}", config.display()))
        .arg("--print-address=1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // "Failed to set fd limit" and the like are noise.
        .stderr(Stdio::null())
        .spawn()
        .expect("dbus-daemon starts");
    let stdout = child.stdout.take().unwrap();
    daemons.0.push(("dbus-daemon", child));
    let mut address = String::new();
    BufReader::new(stdout).read_line(&mut address).unwrap();
    assert!(
        address.starts_with("unix:"),
        "dbus-daemon did not start: {address:?}"
    );
    address.trim().to_string()
}

/// Starts GNOME Keyring's Secret Service, unlocked with a password on stdin (which also
/// creates the `login` collection the keyring crate stores into, as the default alias).
fn start_keyring(dir: &Path, daemons: &mut Daemons) {
    let log = fs::File::create(dir.join("gnome-keyring.log")).unwrap();
    let mut child = Command::new("gnome-keyring-daemon")
        .args(["--unlock", "--components=secrets", "--foreground"])
        // No display: it must never try to show a prompt.
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("gnome-keyring-daemon starts");
    let mut stdin = child.stdin.take().unwrap();
    daemons.0.push(("gnome-keyring-daemon", child));
    stdin.write_all(b"sextant-test-login-password").unwrap();
    drop(stdin); // end of input: the daemon reads the password up to EOF
}

/// Waits until the Secret Service owns its name and its default collection exists.
fn wait_for_secret_service(dir: &Path, daemons: &mut Daemons) {
    let bus = dbus::blocking::Connection::new_session().expect("the private bus accepts us");
    let timeout = Duration::from_secs(2);
    let dbus = bus.with_proxy("org.freedesktop.DBus", "/org/freedesktop/DBus", timeout);
    let secrets = bus.with_proxy(
        "org.freedesktop.secrets",
        "/org/freedesktop/secrets",
        timeout,
    );
    let start = Instant::now();
    loop {
        let owned: Result<(bool,), _> = dbus.method_call(
            "org.freedesktop.DBus",
            "NameHasOwner",
            ("org.freedesktop.secrets",),
        );
        if owned.is_ok_and(|(owned,)| owned) {
            let alias: Result<(dbus::Path,), _> =
                secrets.method_call("org.freedesktop.Secret.Service", "ReadAlias", ("default",));
            match alias {
                Ok((path,)) if &*path != "/" => return,
                _ => {}
            }
        }
        let (_, keyring) = daemons.0.last_mut().unwrap();
        let exited = keyring.try_wait().unwrap();
        if exited.is_some() || start.elapsed() > Duration::from_secs(20) {
            let log = fs::read_to_string(dir.join("gnome-keyring.log")).unwrap_or_default();
            panic!(
                "gnome-keyring-daemon did not provide a Secret Service with a default \
                 collection (exit: {exited:?}); its output:\n{log}"
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn secrets_live_in_a_real_secret_service() {
    require("dbus-daemon", "dbus-daemon");
    require("gnome-keyring-daemon", "gnome-keyring");

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (home, data, config, runtime) = (
        dir.join("home"),
        dir.join("data"),
        dir.join("config"),
        dir.join("runtime"),
    );
    for d in [&home, &data, &config, &runtime] {
        fs::create_dir(d).unwrap();
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&runtime, fs::Permissions::from_mode(0o700)).unwrap();
    }

    let mut daemons = Daemons::default();
    let address = start_bus(dir, &mut daemons);
    // Everything below – the daemons, libdbus in this process – sees only the temporary
    // home and the private bus. Set before anything connects (libdbus reads it once).
    std::env::set_var("DBUS_SESSION_BUS_ADDRESS", &address);
    std::env::set_var("HOME", &home);
    std::env::set_var("XDG_DATA_HOME", &data);
    std::env::set_var("XDG_CONFIG_HOME", &config);
    std::env::set_var("XDG_RUNTIME_DIR", &runtime);
    start_keyring(dir, &mut daemons);
    wait_for_secret_service(dir, &mut daemons);
    assert!(
        data.join("keyrings").join("login.keyring").exists(),
        "the keyring is the test's own, in its temporary home"
    );

    let store = SecretStore::keyring().expect("the Secret Service passes the probe");
    assert_eq!(store.backend(), Backend::Keyring);
    let name = "api-key:anthropic:https://api.anthropic.com";
    assert_eq!(store.get(name).unwrap(), None);
    store.delete(name).unwrap(); // missing: Ok
    store.set(name, "sk-ant-in-the-keyring").unwrap();
    assert_eq!(
        store.get(name).unwrap().as_deref(),
        Some("sk-ant-in-the-keyring")
    );
    store.set(name, "sk-ant-replaced ✓").unwrap();
    store.set("mqtt:broker", "other").unwrap();
    assert_eq!(
        store.get(name).unwrap().as_deref(),
        Some("sk-ant-replaced ✓")
    );

    // It is a keyring entry of service `sextant`, user = the name, that other programs
    // see; and the probe left nothing behind.
    let entry = keyring::Entry::new("sextant", name).unwrap();
    assert_eq!(entry.get_password().unwrap(), "sk-ant-replaced ✓");
    let probe = keyring::Entry::new("sextant", "sextant-keyring-probe").unwrap();
    assert!(matches!(probe.get_password(), Err(keyring::Error::NoEntry)));

    // `open` picks the keyring, sees the same secrets and writes no file.
    let fallback = dir.join("fallback");
    let opened = SecretStore::open(&fallback);
    assert_eq!(opened.backend(), Backend::Keyring);
    assert_eq!(
        opened.get(name).unwrap().as_deref(),
        Some("sk-ant-replaced ✓")
    );
    opened.delete(name).unwrap();
    assert_eq!(store.get(name).unwrap(), None);
    assert!(matches!(entry.get_password(), Err(keyring::Error::NoEntry)));
    opened.delete(name).unwrap(); // already gone: Ok
    assert_eq!(store.get("mqtt:broker").unwrap().as_deref(), Some("other"));
    store.delete("mqtt:broker").unwrap();
    assert!(!fallback.exists(), "no fallback file was made");

    drop(daemons);
}
