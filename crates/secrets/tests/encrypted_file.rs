//! The encrypted-file backend on real files: round trips, what is on disk, and that a
//! damaged or mismatched file is reported and never overwritten.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use sextant_secrets::{Backend, SecretError, SecretStore};

const SECRET: &str = "sk-ant-api03-PLAINTEXT-never-on-disk-0123456789";

#[test]
fn a_store_can_be_shared_between_threads() {
    fn shareable<T: Clone + Send + Sync + 'static>() {}
    fn error<T: std::error::Error + Send + Sync + 'static>() {}
    shareable::<SecretStore>();
    error::<SecretError>();
}

fn store(dir: &Path) -> SecretStore {
    let store = SecretStore::encrypted_file(dir).expect("the store opens");
    assert_eq!(store.backend(), Backend::EncryptedFile);
    store
}

fn entries(dir: &Path) -> serde_json::Map<String, serde_json::Value> {
    let text = fs::read_to_string(dir.join("secrets.json")).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["version"], 1, "{text}");
    value["entries"].as_object().unwrap().clone()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn round_trip_survives_reopen_and_delete() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("config").join("sextant");
    let secrets = store(&dir);
    assert!(dir.is_dir(), "the directory is created");

    // Nothing is written until something is set.
    assert_eq!(secrets.get("api-key:anthropic").unwrap(), None);
    secrets.delete("api-key:anthropic").unwrap();
    assert!(!dir.join("secrets.json").exists());
    assert!(!dir.join("secrets.key").exists());

    secrets.set("api-key:anthropic", SECRET).unwrap();
    secrets.set("mqtt:broker", "pässwörd ✓").unwrap();
    secrets.set("empty", "").unwrap();
    assert_eq!(
        secrets.get("api-key:anthropic").unwrap().as_deref(),
        Some(SECRET)
    );
    assert_eq!(
        secrets.get("mqtt:broker").unwrap().as_deref(),
        Some("pässwörd ✓")
    );
    assert_eq!(secrets.get("empty").unwrap().as_deref(), Some(""));
    assert_eq!(secrets.get("missing").unwrap(), None);

    // A new store on the same directory (as after a restart) reads the same secrets.
    let reopened = store(&dir);
    assert_eq!(
        reopened.get("api-key:anthropic").unwrap().as_deref(),
        Some(SECRET)
    );
    reopened.set("api-key:anthropic", "sk-replaced").unwrap();
    assert_eq!(
        secrets.get("api-key:anthropic").unwrap().as_deref(),
        Some("sk-replaced")
    );

    secrets.delete("api-key:anthropic").unwrap();
    assert_eq!(reopened.get("api-key:anthropic").unwrap(), None);
    secrets.delete("api-key:anthropic").unwrap(); // missing: still Ok
    assert_eq!(
        store(&dir).get("mqtt:broker").unwrap().as_deref(),
        Some("pässwörd ✓")
    );
    let names: Vec<_> = entries(&dir).keys().cloned().collect();
    assert_eq!(names, ["empty", "mqtt:broker"]);
}

#[test]
fn files_hold_no_plaintext_and_the_key_is_private() {
    let tmp = tempfile::tempdir().unwrap();
    let secrets = store(tmp.path());
    secrets.set("api-key:anthropic", SECRET).unwrap();

    let json = fs::read(tmp.path().join("secrets.json")).unwrap();
    let key = fs::read(tmp.path().join("secrets.key")).unwrap();
    assert!(!contains(&json, SECRET.as_bytes()));
    assert!(!contains(&json, b"PLAINTEXT"));
    assert!(!contains(&key, b"PLAINTEXT"));
    assert_eq!(key.len(), 32, "a raw 256-bit key");
    assert!(!contains(&json, &key), "the key is not in secrets.json");

    // base64(24-byte nonce || ciphertext || 16-byte tag), under the entry's name.
    let sealed = entries(tmp.path())["api-key:anthropic"]
        .as_str()
        .unwrap()
        .to_string();
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&sealed)
        .unwrap();
    assert_eq!(raw.len(), 24 + SECRET.len() + 16);

    // A fresh nonce for every write: the same secret never looks the same twice.
    secrets.set("api-key:anthropic", SECRET).unwrap();
    assert_ne!(entries(tmp.path())["api-key:anthropic"], sealed.as_str());

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |name: &str| {
            fs::metadata(tmp.path().join(name))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("secrets.key"), 0o600, "secrets.key");
        assert_eq!(mode("secrets.json"), 0o600, "secrets.json");
    }
    // No temporary file is left behind.
    let mut names: Vec<_> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["secrets.json", "secrets.key"]);
}

#[cfg(unix)]
#[test]
fn a_new_directory_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sextant");
    store(&dir);
    let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

#[test]
fn swapped_ciphertexts_do_not_decrypt() {
    let tmp = tempfile::tempdir().unwrap();
    let secrets = store(tmp.path());
    secrets.set("alpha", "secret-of-alpha").unwrap();
    secrets.set("beta", "secret-of-beta").unwrap();

    let path = tmp.path().join("secrets.json");
    let mut value: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    let entries = value["entries"].as_object_mut().unwrap();
    let alpha = entries["alpha"].clone();
    entries["alpha"] = entries["beta"].clone();
    entries["beta"] = alpha;
    fs::write(&path, serde_json::to_vec(&value).unwrap()).unwrap();

    for name in ["alpha", "beta"] {
        let err = secrets.get(name).unwrap_err();
        assert!(
            matches!(&err, SecretError::Undecryptable { name: n, .. } if n == name),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(message.contains(&format!("secret `{name}`")), "{message}");
        assert!(message.contains("moved from another name"), "{message}");
        assert!(message.contains("set it again"), "{message}");
        assert!(!message.contains("secret-of-"), "{message}");
    }

    // Setting one again repairs it without touching the other.
    secrets.set("alpha", "secret-of-alpha").unwrap();
    assert_eq!(
        secrets.get("alpha").unwrap().as_deref(),
        Some("secret-of-alpha")
    );
    assert!(secrets.get("beta").is_err());
}

#[test]
fn a_tampered_value_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let secrets = store(tmp.path());
    secrets.set("alpha", "secret-of-alpha").unwrap();
    let path = tmp.path().join("secrets.json");
    let text = fs::read_to_string(&path).unwrap();
    let sealed = entries(tmp.path())["alpha"].as_str().unwrap().to_string();
    // Flip one character in the middle of the ciphertext (base64 stays valid).
    let mut chars: Vec<char> = sealed.chars().collect();
    let i = chars.len() / 2;
    chars[i] = if chars[i] == 'A' { 'B' } else { 'A' };
    let tampered: String = chars.into_iter().collect();
    fs::write(&path, text.replace(&sealed, &tampered)).unwrap();
    assert!(matches!(
        secrets.get("alpha"),
        Err(SecretError::Undecryptable { .. })
    ));

    fs::write(&path, text.replace(&sealed, "not base64!")).unwrap();
    let err = secrets.get("alpha").unwrap_err();
    assert!(err.to_string().contains("not base64"), "{err}");
}

/// Runs `op` on a store whose files are damaged and checks that it fails with the
/// expected error and leaves both files byte for byte as they were.
fn fails_untouched(dir: &Path, op: impl Fn() -> Result<(), SecretError>, check: fn(&SecretError)) {
    let read = |name: &str| fs::read(dir.join(name)).ok();
    let before = (read("secrets.json"), read("secrets.key"));
    let err = op().expect_err("the operation fails");
    check(&err);
    assert_eq!((read("secrets.json"), read("secrets.key")), before);
    let mut names: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let expected: Vec<_> = ["secrets.json", "secrets.key"]
        .into_iter()
        .filter(|n| dir.join(n).exists())
        .collect();
    assert_eq!(names, expected, "no file is added");
}

#[test]
fn a_corrupt_file_is_reported_and_never_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let secrets = store(tmp.path());
    secrets.set("alpha", "secret-of-alpha").unwrap();
    let path = tmp.path().join("secrets.json");
    let mut file = fs::OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(b"\n{ garbage").unwrap();
    drop(file);

    let corrupt = |err: &SecretError| {
        assert!(matches!(err, SecretError::CorruptFile { .. }), "{err:?}");
        let message = err.to_string();
        assert!(message.contains("secrets.json"), "{message}");
        assert!(message.contains("left untouched"), "{message}");
        assert!(message.contains("move it away to start over"), "{message}");
    };
    fails_untouched(
        tmp.path(),
        || secrets.set("beta", "secret-of-beta"),
        corrupt,
    );
    fails_untouched(tmp.path(), || secrets.set("alpha", "new"), corrupt);
    fails_untouched(tmp.path(), || secrets.delete("alpha"), corrupt);
    fails_untouched(tmp.path(), || secrets.get("alpha").map(drop), corrupt);
    fails_untouched(
        tmp.path(),
        || SecretStore::encrypted_file(tmp.path()).map(drop),
        corrupt,
    );

    // Valid JSON of the wrong shape is damage too.
    for text in [
        r#"[]"#,
        r#"{"entries": {}}"#,
        r#"{"version": 1, "entries": {"a": 5}}"#,
        r#"{"version": "1", "entries": {}}"#,
    ] {
        fs::write(&path, text).unwrap();
        fails_untouched(tmp.path(), || secrets.set("beta", "x"), corrupt);
    }
}

#[test]
fn a_newer_version_is_not_overwritten() {
    let tmp = tempfile::tempdir().unwrap();
    store(tmp.path()).set("alpha", "secret-of-alpha").unwrap();
    let path = tmp.path().join("secrets.json");
    fs::write(&path, r#"{"version": 2, "entries": {}, "vault": "?"}"#).unwrap();
    let newer = |err: &SecretError| {
        assert!(
            matches!(err, SecretError::UnsupportedVersion { version, .. } if version == "2"),
            "{err:?}"
        );
        assert!(err.to_string().contains("use a newer Sextant"), "{err}");
    };
    newer(&SecretStore::encrypted_file(tmp.path()).unwrap_err());
    // A store opened before the file changed refuses too.
    fs::write(&path, r#"{"version": 1, "entries": {}}"#).unwrap();
    let secrets = store(tmp.path());
    fs::write(&path, r#"{"version": 2, "entries": {}, "vault": "?"}"#).unwrap();
    fails_untouched(tmp.path(), || secrets.set("beta", "x"), newer);
    fails_untouched(tmp.path(), || secrets.delete("alpha"), newer);
}

#[test]
fn a_wrong_key_is_reported_and_nothing_is_mixed_in() {
    let tmp = tempfile::tempdir().unwrap();
    let secrets = store(tmp.path());
    secrets.set("alpha", "secret-of-alpha").unwrap();
    secrets.set("beta", "secret-of-beta").unwrap();
    // Another installation's key, say, restored over this one.
    fs::write(tmp.path().join("secrets.key"), [7u8; 32]).unwrap();

    let wrong_key = |err: &SecretError| {
        assert!(
            matches!(err, SecretError::WrongKey { count: 2, .. }),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains("is not the key the 2 secret(s)"),
            "{message}"
        );
        assert!(
            message.contains("restore the matching key file"),
            "{message}"
        );
    };
    fails_untouched(tmp.path(), || secrets.get("alpha").map(drop), wrong_key);
    wrong_key(&SecretStore::encrypted_file(tmp.path()).unwrap_err());
    fails_untouched(
        tmp.path(),
        || secrets.set("gamma", "secret-of-gamma"),
        wrong_key,
    );
    fails_untouched(
        tmp.path(),
        || secrets.set("alpha", "secret-of-alpha"),
        wrong_key,
    );
    // Deleting needs no key.
    secrets.delete("beta").unwrap();

    // A key file of the wrong size is damage.
    fs::write(tmp.path().join("secrets.key"), b"short").unwrap();
    fails_untouched(
        tmp.path(),
        || secrets.set("gamma", "secret-of-gamma"),
        |err| {
            assert!(matches!(err, SecretError::CorruptKey { .. }), "{err:?}");
            assert!(err.to_string().contains("5 bytes instead of 32"), "{err}");
        },
    );
}

#[test]
fn a_missing_key_is_never_replaced_over_existing_secrets() {
    let tmp = tempfile::tempdir().unwrap();
    let secrets = store(tmp.path());
    secrets.set("alpha", "secret-of-alpha").unwrap();
    let key = fs::read(tmp.path().join("secrets.key")).unwrap();
    fs::remove_file(tmp.path().join("secrets.key")).unwrap();

    let missing = |err: &SecretError| {
        assert!(
            matches!(err, SecretError::KeyMissing { count: 1, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("restore the key file"), "{err}");
    };
    fails_untouched(
        tmp.path(),
        || secrets.set("beta", "secret-of-beta"),
        missing,
    );
    fails_untouched(tmp.path(), || secrets.get("alpha").map(drop), missing);
    missing(&SecretStore::encrypted_file(tmp.path()).unwrap_err());

    // Restoring the key brings everything back.
    fs::write(tmp.path().join("secrets.key"), key).unwrap();
    assert_eq!(
        secrets.get("alpha").unwrap().as_deref(),
        Some("secret-of-alpha")
    );
}

#[test]
fn invalid_names_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let secrets = store(tmp.path());
    for name in ["", "a\nb", "sextant-keyring-probe", &"x".repeat(513)] {
        let err = secrets.set(name, "value").unwrap_err();
        assert!(matches!(err, SecretError::InvalidName { .. }), "{err:?}");
        assert!(secrets.get(name).is_err());
    }
    secrets.set(&"x".repeat(512), "value").unwrap();
    assert_eq!(
        entries(tmp.path()).len(),
        1,
        "only the valid name was stored"
    );
}

#[test]
fn concurrent_writers_lose_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let shared = store(tmp.path());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            // Half share one store, half open their own on the same directory.
            let secrets = if t % 2 == 0 {
                shared.clone()
            } else {
                store(tmp.path())
            };
            std::thread::spawn(move || {
                for i in 0..10 {
                    secrets
                        .set(&format!("t{t}-{i}"), &format!("v{t}-{i}"))
                        .unwrap();
                }
                secrets.delete(&format!("t{t}-0")).unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let reopened = store(tmp.path());
    for t in 0..8 {
        assert_eq!(reopened.get(&format!("t{t}-0")).unwrap(), None);
        for i in 1..10 {
            let value = reopened.get(&format!("t{t}-{i}")).unwrap();
            assert_eq!(value, Some(format!("v{t}-{i}")));
        }
    }
    assert_eq!(entries(tmp.path()).len(), 8 * 9);
}

/// A `tracing` writer that keeps everything in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn secrets_never_show_in_debug_errors_or_logs() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    // Global, not per thread: a thread-local subscriber can miss events whose callsites
    // other tests' threads hit first. Once set, the other tests here log into it too,
    // and none of them may log a secret either.
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let tmp = tempfile::tempdir().unwrap();
    // Not `open`: this binary must never write to the real keyring of whoever runs it.
    let secrets = store(tmp.path());
    secrets.set("api-key:anthropic", SECRET).unwrap();
    assert_eq!(
        secrets.get("api-key:anthropic").unwrap().as_deref(),
        Some(SECRET)
    );
    let debug = format!("{secrets:?} {:?}", store(tmp.path()));
    assert!(!debug.contains("PLAINTEXT"), "{debug}");

    // Damage the file: the errors name the secret and the file, never the value.
    let path = tmp.path().join("secrets.json");
    let text = fs::read_to_string(&path).unwrap();
    fs::write(&path, text.replace("\"api-key:anthropic\"", "\"other\"")).unwrap();
    let mut errors = vec![secrets.get("other").unwrap_err()];
    fs::write(&path, "{").unwrap();
    errors.push(secrets.set("api-key:anthropic", SECRET).unwrap_err());
    errors.push(secrets.set("", SECRET).unwrap_err());
    for err in &errors {
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("PLAINTEXT"), "{shown}");
    }

    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("api-key:anthropic"),
        "the writes were logged: {logs}"
    );
    assert!(!logs.contains("PLAINTEXT"), "{logs}");
}
