//! The encrypted-file backend: `secrets.json` holds
//! `{ "version": 1, "keyCheck": "…", "entries": { name: base64(nonce || ciphertext) } }`,
//! each value encrypted with XChaCha20-Poly1305 under the 32 random bytes of
//! `secrets.key`, with the entry's name as associated data so a ciphertext cannot be moved
//! to another name. `keyCheck` is an empty message sealed the same way under a name of its
//! own: it tells a wrong key apart from a damaged entry, and stops a write that would mix
//! two keys in one file.
//!
//! Every read-modify-write holds one process-wide lock, and every write replaces the file
//! atomically (`sextant_fsutil`: a temporary file in the same directory, fsync, rename,
//! fsync the directory), so a crash leaves
//! either the old file or the new one. Two *processes* writing at the same moment can
//! still lose one of the two updates (last writer wins); Sextant runs one app per user.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use chacha20poly1305::aead::{Aead, Generate, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use zeroize::Zeroizing;

use crate::SecretError;

const SECRETS_FILE: &str = "secrets.json";
const KEY_FILE: &str = "secrets.key";
const VERSION: u64 = 1;
const KEY_LEN: usize = 32;
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;
/// Prefixed to the entry name in the associated data, so these ciphertexts mean nothing
/// to any other use of the same key.
const AAD_CONTEXT: &[u8] = b"sextant-secrets v1\0";
/// The associated data of `keyCheck`; no entry's can be equal (it has no NUL).
const KEY_CHECK_AAD: &[u8] = b"sextant-secrets v1 key check";

/// One lock for every file store in the process: secrets are rare and small, and two
/// stores opened on the same directory must not interleave their read-modify-writes.
static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    // The files are replaced atomically, so a panic while holding the lock leaves
    // nothing half-written.
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The directory of `secrets.json` and `secrets.key`; holds no key or secret itself.
#[derive(Clone, Debug)]
pub(crate) struct FileStore {
    dir: PathBuf,
}

/// The contents of `secrets.json`.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Document {
    version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key_check: Option<String>,
    entries: BTreeMap<String, String>,
}

type Result<T> = std::result::Result<T, SecretError>;

impl FileStore {
    /// Creates `dir` when missing and checks that what is there can be read with the key
    /// that is there.
    pub(crate) fn open(dir: &Path) -> Result<FileStore> {
        create_dir(dir)?;
        let store = FileStore::unchecked(dir);
        let _guard = lock();
        let document = store.read_document()?;
        if document.entries.is_empty() {
            return Ok(store);
        }
        match store.read_key()? {
            None => Err(store.key_missing(&document)),
            Some(key) if key_matches(&key, &document) == Some(false) => {
                Err(store.wrong_key(&document))
            }
            Some(_) => Ok(store),
        }
    }

    /// A store whose directory may not be usable; every operation reports why.
    pub(crate) fn unchecked(dir: &Path) -> FileStore {
        FileStore {
            dir: dir.to_path_buf(),
        }
    }

    pub(crate) fn get(&self, name: &str) -> Result<Option<String>> {
        let _guard = lock();
        let document = self.read_document()?;
        let Some(sealed) = document.entries.get(name) else {
            return Ok(None);
        };
        let key = self
            .read_key()?
            .ok_or_else(|| self.key_missing(&document))?;
        match open(&key, &entry_aad(name), sealed) {
            Ok(plaintext) => String::from_utf8(plaintext).map(Some).map_err(|e| {
                drop(Zeroizing::new(e.into_bytes()));
                self.undecryptable(name, "it is not text")
            }),
            Err(_) if key_matches(&key, &document) == Some(false) => Err(self.wrong_key(&document)),
            Err(reason) => Err(self.undecryptable(name, reason)),
        }
    }

    pub(crate) fn set(&self, name: &str, secret: &str) -> Result<()> {
        let _guard = lock();
        let mut document = self.read_document()?;
        let others = document.entries.keys().any(|n| n != name);
        let key = match self.read_key()? {
            // Writing with another key than the others were written with would leave a
            // file that no single key opens. (`name`'s own entry is being replaced.)
            Some(key) if others && key_matches(&key, &document) == Some(false) => {
                return Err(self.wrong_key(&document))
            }
            Some(key) => key,
            None if document.entries.is_empty() => self.create_key()?,
            None => return Err(self.key_missing(&document)),
        };
        let sealed = seal(&key, &entry_aad(name), secret.as_bytes())?;
        document.version = VERSION;
        document.key_check = Some(seal(&key, KEY_CHECK_AAD, b"")?);
        document.entries.insert(name.to_string(), sealed);
        self.write_document(&document)
    }

    pub(crate) fn delete(&self, name: &str) -> Result<()> {
        let _guard = lock();
        let mut document = self.read_document()?;
        if document.entries.remove(name).is_none() {
            return Ok(());
        }
        self.write_document(&document)
    }

    fn secrets_path(&self) -> PathBuf {
        self.dir.join(SECRETS_FILE)
    }

    fn key_path(&self) -> PathBuf {
        self.dir.join(KEY_FILE)
    }

    /// `secrets.json`, or an empty document when there is none yet.
    fn read_document(&self) -> Result<Document> {
        let path = self.secrets_path();
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Document {
                    version: VERSION,
                    key_check: None,
                    entries: BTreeMap::new(),
                })
            }
            Err(e) => return Err(io_error("read", &path, e)),
        };
        let corrupt = |reason: String| SecretError::CorruptFile {
            path: path.clone(),
            reason,
        };
        // Parse loosely first, so a newer version is told apart from damage.
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
        match value.get("version") {
            Some(Value::Number(n)) if n.as_u64() == Some(VERSION) => {}
            Some(Value::Number(n)) if n.as_u64().is_some_and(|v| v > VERSION) => {
                return Err(SecretError::UnsupportedVersion {
                    path,
                    version: n.to_string(),
                })
            }
            Some(_) => return Err(corrupt("`version` is not 1".into())),
            None => return Err(corrupt("it has no `version`".into())),
        }
        // The values in the file are ciphertexts, so serde's message can quote them.
        serde_json::from_value(value).map_err(|e| corrupt(e.to_string()))
    }

    fn write_document(&self, document: &Document) -> Result<()> {
        let path = self.secrets_path();
        let mut bytes = serde_json::to_vec_pretty(document).expect("plain data serializes");
        bytes.push(b'\n');
        write_atomically(&path, &bytes, Replace::Yes)?;
        Ok(())
    }

    /// The key, or `None` when there is no key file.
    fn read_key(&self) -> Result<Option<Zeroizing<Vec<u8>>>> {
        let path = self.key_path();
        let bytes = match fs::read(&path) {
            Ok(bytes) => Zeroizing::new(bytes),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error("read", &path, e)),
        };
        if bytes.len() != KEY_LEN {
            return Err(SecretError::CorruptKey {
                path,
                reason: format!("{} bytes instead of {KEY_LEN}", bytes.len()),
            });
        }
        warn_if_shared(&path);
        Ok(Some(bytes))
    }

    /// Makes the key file: 32 random bytes, mode 0600, written atomically. Should another
    /// process have made one meanwhile, that one is used.
    fn create_key(&self) -> Result<Zeroizing<Vec<u8>>> {
        let path = self.key_path();
        let key = Key::try_generate().map_err(|e| SecretError::Random {
            reason: e.to_string(),
        })?;
        let key = Zeroizing::new(key.to_vec());
        match write_atomically(&path, &key, Replace::No) {
            Ok(()) => {
                tracing::info!("created the secrets key `{}`", path.display());
                Ok(key)
            }
            Err(SecretError::Io { source, .. })
                if source.kind() == io::ErrorKind::AlreadyExists =>
            {
                self.read_key()?
                    .ok_or_else(|| io_error("read", &path, io::ErrorKind::NotFound.into()))
            }
            Err(e) => Err(e),
        }
    }

    fn undecryptable(&self, name: &str, reason: &'static str) -> SecretError {
        SecretError::Undecryptable {
            name: name.to_string(),
            path: self.secrets_path(),
            reason,
        }
    }

    fn wrong_key(&self, document: &Document) -> SecretError {
        SecretError::WrongKey {
            secrets: self.secrets_path(),
            key: self.key_path(),
            count: document.entries.len(),
        }
    }

    fn key_missing(&self, document: &Document) -> SecretError {
        SecretError::KeyMissing {
            secrets: self.secrets_path(),
            key: self.key_path(),
            count: document.entries.len(),
        }
    }
}

/// Whether `key` opens the document's `keyCheck`; `None` when it has none.
fn key_matches(key: &[u8], document: &Document) -> Option<bool> {
    let check = document.key_check.as_deref()?;
    Some(open(key, KEY_CHECK_AAD, check).is_ok())
}

/// `base64(nonce || ciphertext || tag)` of `plaintext`, under a fresh random nonce.
fn seal(key: &[u8], aad: &[u8], plaintext: &[u8]) -> Result<String> {
    let nonce = XNonce::try_generate().map_err(|e| SecretError::Random {
        reason: e.to_string(),
    })?;
    let ciphertext = cipher(key)
        .encrypt(
            &nonce,
            Payload {
                msg: plaintext,
                aad,
            },
        )
        // Only for messages of hundreds of gigabytes.
        .expect("a secret is far below XChaCha20-Poly1305's size limit");
    let mut sealed = Vec::with_capacity(NONCE_LEN + ciphertext.len());
    sealed.extend_from_slice(&nonce);
    sealed.extend_from_slice(&ciphertext);
    Ok(BASE64.encode(sealed))
}

/// The plaintext of what [`seal`] made, or why there is none.
fn open(key: &[u8], aad: &[u8], sealed: &str) -> std::result::Result<Vec<u8>, &'static str> {
    let bytes = BASE64
        .decode(sealed)
        .map_err(|_| "its value is not base64")?;
    if bytes.len() < NONCE_LEN + TAG_LEN {
        return Err("its value is too short");
    }
    let (nonce, ciphertext) = bytes.split_at(NONCE_LEN);
    let nonce = XNonce::try_from(nonce).expect("split at the nonce length");
    cipher(key)
        .decrypt(
            &nonce,
            Payload {
                msg: ciphertext,
                aad,
            },
        )
        .map_err(|_| "it was changed or moved from another name")
}

fn cipher(key: &[u8]) -> XChaCha20Poly1305 {
    let key = Key::try_from(key).expect("keys are checked to be 32 bytes when read");
    XChaCha20Poly1305::new(&key)
}

fn entry_aad(name: &str) -> Vec<u8> {
    [AAD_CONTEXT, name.as_bytes()].concat()
}

enum Replace {
    Yes,
    No,
}

/// Writes `bytes` over `path` with [`sextant_fsutil::write_atomic_with`] (a temporary file
/// in the same directory, mode 0600 on Unix from the start, flushed, renamed, then the
/// directory flushed) – or, with `Replace::No`, fails with `AlreadyExists` when `path`
/// exists.
fn write_atomically(path: &Path, bytes: &[u8], replace: Replace) -> Result<()> {
    let options = sextant_fsutil::Options {
        private: true,
        no_replace: matches!(replace, Replace::No),
    };
    sextant_fsutil::write_atomic_with(path, bytes, options).map_err(|e| io_error("write", path, e))
}

fn create_dir(dir: &Path) -> Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .map_err(|e| io_error("create the directory", dir, e))
}

/// A key file others can read was not made by this crate; say so, but use it.
fn warn_if_shared(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = fs::metadata(path) {
            if meta.permissions().mode() & 0o077 != 0 {
                tracing::warn!(
                    "the secrets key `{}` can be read by other users: run `chmod 600` on it",
                    path.display()
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

fn io_error(op: &'static str, path: &Path, source: io::Error) -> SecretError {
    SecretError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}
