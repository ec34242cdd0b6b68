//! Without a reachable Secret Service, `open` falls back to the encrypted file. Its own
//! binary: it points `DBUS_SESSION_BUS_ADDRESS` at a socket that does not exist, which
//! libdbus reads once per process. Only on Linux is the keyring found over D-Bus (elsewhere
//! the OS keyring is always there), so this binary is empty on other systems.
#![cfg(target_os = "linux")]

use sextant_secrets::{Backend, SecretError, SecretStore};

#[test]
fn open_falls_back_to_the_encrypted_file() {
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("no-bus-here");
    std::env::set_var(
        "DBUS_SESSION_BUS_ADDRESS",
        format!("unix:path={}", socket.display()),
    );
    // Nor an X11 display through which libdbus could autolaunch a bus.
    std::env::remove_var("DISPLAY");

    let err = SecretStore::keyring().expect_err("there is no keyring to use");
    assert!(
        matches!(err, SecretError::KeyringUnavailable { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("the OS keyring is not available"),
        "{err}"
    );

    let dir = tmp.path().join("config");
    let store = SecretStore::open(&dir);
    assert_eq!(store.backend(), Backend::EncryptedFile);
    assert_eq!(store.get("api-key").unwrap(), None);
    store.set("api-key", "sk-in-the-file").unwrap();
    assert_eq!(
        store.get("api-key").unwrap().as_deref(),
        Some("sk-in-the-file")
    );
    assert!(dir.join("secrets.json").exists());
    assert!(dir.join("secrets.key").exists());
    // A new store, as after a restart, reads it back.
    assert_eq!(
        SecretStore::open(&dir).get("api-key").unwrap().as_deref(),
        Some("sk-in-the-file")
    );
    store.delete("api-key").unwrap();
    assert_eq!(store.get("api-key").unwrap(), None);
    assert_eq!(
        serde_json::to_value(store.backend()).unwrap(),
        "encryptedFile"
    );
    assert_eq!(serde_json::to_value(Backend::Keyring).unwrap(), "keyring");
}
