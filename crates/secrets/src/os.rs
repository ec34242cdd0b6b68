//! The OS keyring backend: the `keyring` crate, one entry per secret under the service
//! name `sextant` (the entry's user is the secret's name).

use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keyring::credential::CredentialPersistence;
use keyring::Entry;

use crate::SecretError;

/// The keyring service every entry is stored under.
pub(crate) const SERVICE: &str = "sextant";

/// The entry [`probe`] writes, reads back and deletes; no secret can have this name.
pub(crate) const PROBE_NAME: &str = "sextant-keyring-probe";

/// How long [`probe`] waits for a keyring that does not answer. The Secret Service may
/// wait for an unlock prompt that nobody sees (a headless session), and the keyring crate
/// waits for it without limit.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Fails unless the OS keyring stores entries on disk and a probe entry can really be
/// written, read back and deleted.
pub(crate) fn probe() -> Result<(), SecretError> {
    // On a platform without a supported store the `keyring` crate falls back to a mock
    // that "works" but forgets everything.
    let persistence = keyring::default::default_credential_builder().persistence();
    if !matches!(persistence, CredentialPersistence::UntilDelete) {
        return Err(unavailable(
            "this platform has no keyring that keeps secrets on disk",
        ));
    }
    let (tx, rx) = mpsc::channel();
    // A keyring waiting for a prompt blocks its caller; the thread is left to it.
    let spawned = std::thread::Builder::new()
        .name("sextant-keyring-probe".into())
        .spawn(move || {
            let _ = tx.send(probe_now());
        });
    if let Err(e) = spawned {
        return Err(unavailable(format!("cannot start the probe thread: {e}")));
    }
    match rx.recv_timeout(PROBE_TIMEOUT) {
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(unavailable(format!(
            "no answer within {} s (a locked keyring waiting for an unlock prompt?)",
            PROBE_TIMEOUT.as_secs()
        ))),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(unavailable("the probe panicked")),
    }
}

fn probe_now() -> Result<(), SecretError> {
    let entry = Entry::new(SERVICE, PROBE_NAME).map_err(unavailable)?;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let value = format!("probe {} {nanos}", std::process::id());
    entry.set_password(&value).map_err(unavailable)?;
    let read = entry.get_password();
    let deleted = entry.delete_credential();
    match read {
        Ok(read) if read == value => {}
        Ok(_) => return Err(unavailable("the probe entry read back a different value")),
        Err(e) => return Err(unavailable(e)),
    }
    deleted.map_err(unavailable)?;
    match entry.get_password() {
        Err(keyring::Error::NoEntry) => Ok(()),
        Ok(_) => Err(unavailable(
            "the probe entry is still there after its deletion",
        )),
        Err(e) => Err(unavailable(e)),
    }
}

pub(crate) fn get(name: &str) -> Result<Option<String>, SecretError> {
    match entry(name, "read")?.get_password() {
        Ok(secret) => Ok(Some(secret)),
        Err(keyring::Error::NoEntry) => Ok(None),
        Err(e) => Err(failed("read", name, &e)),
    }
}

pub(crate) fn set(name: &str, secret: &str) -> Result<(), SecretError> {
    entry(name, "store")?
        .set_password(secret)
        .map_err(|e| failed("store", name, &e))
}

pub(crate) fn delete(name: &str) -> Result<(), SecretError> {
    match entry(name, "delete")?.delete_credential() {
        Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
        Err(e) => Err(failed("delete", name, &e)),
    }
}

fn entry(name: &str, op: &'static str) -> Result<Entry, SecretError> {
    Entry::new(SERVICE, name).map_err(|e| failed(op, name, &e))
}

fn unavailable(reason: impl ToString) -> SecretError {
    SecretError::KeyringUnavailable {
        reason: reason.to_string(),
    }
}

/// `keyring::Error`'s `Display` never shows a secret (`BadEncoding` holds the bytes, but
/// only its `Debug` shows them), so its text can go into the error.
fn failed(op: &'static str, name: &str, e: &keyring::Error) -> SecretError {
    SecretError::Keyring {
        op,
        name: name.to_string(),
        reason: e.to_string(),
    }
}
