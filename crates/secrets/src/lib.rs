//! Where Sextant's secrets – API keys, broker passwords – live: a small store of named
//! strings that is kept out of every project and settings file.
//!
//! Why a crate of its own: a secret must never land where project files, settings, logs
//! and backups go, and every part that needs one (the assistant's provider keys, device
//! passwords) should get the same guarantees from one place instead of each inventing its
//! own storage.
//!
//! Two backends, chosen once by [`SecretStore::open`]:
//!
//! - [`Backend::Keyring`]: the OS keyring – Secret Service (GNOME Keyring, KWallet) on
//!   Linux, the Keychain on macOS, the Credential Manager on Windows – under the service
//!   name `sextant`, one entry per secret name. It is used only when a real write, read
//!   and delete of a probe entry succeed, so a keyring that is missing, locked or broken
//!   is never trusted with a secret.
//! - [`Backend::EncryptedFile`]: where there is no usable keyring (a headless Linux box, a
//!   minimal desktop without a Secret Service), `secrets.json` in the directory the
//!   caller passes, each value encrypted with XChaCha20-Poly1305 under a random key in a
//!   separate `secrets.key` (mode 0600 on Unix).
//!
//! What the encrypted file protects against: the key never sits in project files, the
//! settings file or logs, so sharing a project, attaching a log to a bug report, backing
//! up or syncing the settings, or grepping the config directory for `sk-` does not leak
//! a secret, and `secrets.json` alone is useless. What it does **not** protect against:
//! anything running as the same user can read both files and decrypt them, and so can
//! anyone with a copy of the whole directory; it is obfuscation with integrity, not a
//! vault. The keyring is preferred because it does better (it is locked with the user's
//! login and can refuse other programs).
//!
//! Secret values never appear in `Debug` output, errors or `tracing` events; names do.
//!
//! Architecture invariant: never loses a secret silently. A `secrets.json` or
//! `secrets.key` that cannot be read is reported with an error saying what to do, and is
//! never replaced: a failed [`SecretStore::set`] leaves both files as they were.

mod file;
mod os;

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::file::FileStore;

/// Where a [`SecretStore`] keeps its secrets. Serialized as `"keyring"` or
/// `"encryptedFile"`, so a UI can tell the user how their keys are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Backend {
    /// The OS keyring (Secret Service, macOS Keychain, Windows Credential Manager).
    Keyring,
    /// `secrets.json` + `secrets.key` in a directory of the caller's choosing.
    EncryptedFile,
}

/// Named secrets in the OS keyring or, where there is none, an encrypted file.
///
/// Cheap to clone; clones share the backend. Every operation is synchronous and may block
/// on the keyring daemon or the disk, so async callers should use `spawn_blocking`.
#[derive(Clone, Debug)]
pub struct SecretStore {
    inner: Inner,
}

#[derive(Clone, Debug)]
enum Inner {
    Keyring,
    File(FileStore),
}

impl SecretStore {
    /// Uses the OS keyring (service name `sextant`) when it works – probed by a real
    /// set/get/delete of a probe entry – else an encrypted file in `fallback_dir`.
    ///
    /// Never fails: when the fallback directory cannot be used either, the store is
    /// returned anyway and every operation reports why (a warning is logged now).
    /// The probe waits at most 10 s for a keyring that does not answer (one that waits
    /// for an unlock prompt nobody sees), then falls back.
    ///
    /// The choice is made anew at every call: secrets written to one backend are not
    /// visible through the other, so a keyring that later stops working makes its
    /// secrets look missing (they are not lost; they come back with the keyring).
    pub fn open(fallback_dir: &Path) -> SecretStore {
        match SecretStore::keyring() {
            Ok(store) => {
                tracing::info!("secrets are kept in the OS keyring");
                return store;
            }
            Err(e) => tracing::info!(
                "secrets are kept in an encrypted file in `{}` ({e})",
                fallback_dir.display()
            ),
        }
        match SecretStore::encrypted_file(fallback_dir) {
            Ok(store) => store,
            Err(e) => {
                tracing::warn!("the secrets file cannot be used: {e}");
                SecretStore {
                    inner: Inner::File(FileStore::unchecked(fallback_dir)),
                }
            }
        }
    }

    /// The OS keyring only: fails unless a probe entry can really be written, read back
    /// and deleted, within 10 s, in a keyring that keeps entries on disk.
    pub fn keyring() -> Result<SecretStore, SecretError> {
        os::probe()?;
        Ok(SecretStore {
            inner: Inner::Keyring,
        })
    }

    /// The encrypted file only: `secrets.json` and `secrets.key` in `dir`, which is
    /// created (mode 0700 on Unix) when missing. Fails when the directory cannot be
    /// created or the files there cannot be read; creates no file itself – the key is
    /// made by the first [`set`](Self::set).
    pub fn encrypted_file(dir: &Path) -> Result<SecretStore, SecretError> {
        Ok(SecretStore {
            inner: Inner::File(FileStore::open(dir)?),
        })
    }

    /// Which backend this store uses.
    pub fn backend(&self) -> Backend {
        match self.inner {
            Inner::Keyring => Backend::Keyring,
            Inner::File(_) => Backend::EncryptedFile,
        }
    }

    /// The secret stored under `name`, or `None` when there is none.
    pub fn get(&self, name: &str) -> Result<Option<String>, SecretError> {
        check_name(name)?;
        match &self.inner {
            Inner::Keyring => os::get(name),
            Inner::File(file) => file.get(name),
        }
    }

    /// Stores `secret` under `name`, replacing any previous value.
    pub fn set(&self, name: &str, secret: &str) -> Result<(), SecretError> {
        check_name(name)?;
        match &self.inner {
            Inner::Keyring => os::set(name, secret),
            Inner::File(file) => file.set(name, secret),
        }?;
        tracing::debug!(name, backend = ?self.backend(), "secret stored");
        Ok(())
    }

    /// Deletes the secret stored under `name`; deleting one that does not exist is `Ok`.
    pub fn delete(&self, name: &str) -> Result<(), SecretError> {
        check_name(name)?;
        match &self.inner {
            Inner::Keyring => os::delete(name),
            Inner::File(file) => file.delete(name),
        }?;
        tracing::debug!(name, backend = ?self.backend(), "secret deleted");
        Ok(())
    }
}

/// The longest secret name, in bytes.
const MAX_NAME_LEN: usize = 512;

fn check_name(name: &str) -> Result<(), SecretError> {
    let reason = if name.is_empty() {
        "a name cannot be empty"
    } else if name.len() > MAX_NAME_LEN {
        "a name can be at most 512 bytes long"
    } else if name.chars().any(char::is_control) {
        "a name cannot contain control characters"
    } else if name == os::PROBE_NAME {
        "this name is reserved for the keyring probe"
    } else {
        return Ok(());
    };
    Err(SecretError::InvalidName {
        name: name.to_string(),
        reason,
    })
}

/// Why a secret could not be read, stored or deleted. Never contains a secret value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// The name is empty, too long, has control characters, or is reserved.
    #[error("invalid secret name {name:?}: {reason}")]
    InvalidName { name: String, reason: &'static str },
    /// The OS keyring cannot be used at all (no Secret Service, locked, no answer, …).
    #[error("the OS keyring is not available: {reason}")]
    KeyringUnavailable { reason: String },
    /// The OS keyring refused one operation.
    #[error("the OS keyring failed to {op} secret `{name}`: {reason}; check that the keyring is running and unlocked")]
    Keyring {
        op: &'static str,
        name: String,
        reason: String,
    },
    /// A file or directory of the encrypted-file backend could not be read or written.
    #[error("failed to {op} `{}`: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// `secrets.json` is not a secrets file. It was left untouched.
    #[error("`{}` is not a valid secrets file ({reason}); it was left untouched: restore it from a backup, or move it away to start over (the secrets in it are then lost)", path.display())]
    CorruptFile { path: PathBuf, reason: String },
    /// `secrets.json` was written by a newer Sextant. It was left untouched.
    #[error("`{}` has format version {version}, but this build of Sextant reads only version 1; it was left untouched: use a newer Sextant", path.display())]
    UnsupportedVersion { path: PathBuf, version: String },
    /// `secrets.key` is not a key. It was left untouched.
    #[error("key file `{}` is damaged ({reason}); it was left untouched: restore it from a backup, or move it and secrets.json away to start over (the stored secrets are then lost)", path.display())]
    CorruptKey { path: PathBuf, reason: String },
    /// `secrets.json` holds secrets but `secrets.key` is gone, so they cannot be read and
    /// no new key is made over them.
    #[error("`{}` holds {count} secret(s) but its key file `{}` is missing: restore the key file, or move secrets.json away to start over (the stored secrets are then lost)", secrets.display(), key.display())]
    KeyMissing {
        secrets: PathBuf,
        key: PathBuf,
        count: usize,
    },
    /// One entry of `secrets.json` does not decrypt with the right key: it was changed or
    /// moved from another name.
    #[error("secret `{name}` in `{}` cannot be decrypted: {reason}; set it again to replace it", path.display())]
    Undecryptable {
        name: String,
        path: PathBuf,
        reason: &'static str,
    },
    /// `secrets.key` is not the key the secrets in `secrets.json` were written with.
    /// Nothing was changed.
    #[error("key file `{}` is not the key the {count} secret(s) in `{}` were written with; nothing was changed: restore the matching key file, or move both files away to start over (the stored secrets are then lost)", key.display(), secrets.display())]
    WrongKey {
        secrets: PathBuf,
        key: PathBuf,
        count: usize,
    },
    /// The operating system's random number generator failed.
    #[error("the system random number generator failed: {reason}")]
    Random { reason: String },
}
