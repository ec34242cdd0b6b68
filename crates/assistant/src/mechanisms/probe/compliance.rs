//! Which models reproduce the sentinel: per provider + model, across chats and restarts
//! (`probe-compliance.json` in the assistant's data folder).
//!
//! A model that reproduced it once is *compliant* for good, so any later failure means its
//! context is degrading. A model that failed each of its first [`COMPLIANCE_WINDOW`]
//! visible replies is *muted* for good: it never complied, so its failures say nothing,
//! and a probe that cried wolf would teach people to ignore it (the probe verdict rule).
//! A model id never seen is unclassified; changing the model resets nothing else.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Failed visible replies after which a never-compliant model is muted.
pub const COMPLIANCE_WINDOW: u32 = 3;

/// The file's name in the assistant's data folder.
pub const COMPLIANCE_FILE: &str = "probe-compliance.json";

/// The store key of a provider and model: `provider/model` with `/` and `\` made `_`, so
/// a model id cannot reach into a path or collide with the separator.
pub fn model_key(provider: &str, model: &str) -> String {
    format!("{provider}/{model}").replace(['/', '\\'], "_")
}

/// What is known about a model before a reply is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Not yet: this many of its visible replies failed so far.
    Unclassified {
        failures: u32,
    },
    Compliant,
    Muted,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Record {
    /// `true` compliant, `false` muted, absent unclassified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    compliant: Option<bool>,
    #[serde(default, skip_serializing_if = "is_zero")]
    failures: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Debug, Serialize, Deserialize)]
struct File {
    schema: u32,
    #[serde(default)]
    models: BTreeMap<String, Record>,
}

/// The compliance of every model seen, persisted on each change.
#[derive(Debug)]
pub struct Compliance {
    path: Option<PathBuf>,
    models: Mutex<BTreeMap<String, Record>>,
}

impl Compliance {
    /// Reads `path` (a missing file is an empty store; a damaged one is moved aside, kept,
    /// and the store starts empty).
    pub fn open(path: &Path) -> Compliance {
        let models = match std::fs::read_to_string(path) {
            Ok(text) => match serde_json::from_str::<File>(&text) {
                Ok(file) => file.models,
                Err(e) => {
                    let aside = path.with_extension("json.damaged");
                    let _ = std::fs::rename(path, &aside);
                    tracing::warn!(target: "assistant", "{} is damaged ({e}); the probe starts over, the old file is kept as {}", path.display(), aside.display());
                    BTreeMap::new()
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => {
                tracing::warn!(target: "assistant", "could not read {}: {e}; the probe starts over", path.display());
                BTreeMap::new()
            }
        };
        Compliance {
            path: Some(path.to_path_buf()),
            models: Mutex::new(models),
        }
    }

    /// A store that keeps nothing on disk (tests, or an app without a data folder).
    pub fn in_memory() -> Compliance {
        Compliance {
            path: None,
            models: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn class(&self, key: &str) -> Class {
        let models = self.models.lock().unwrap_or_else(|e| e.into_inner());
        class_of(models.get(key))
    }

    /// Records one judged visible reply of `key`'s model; returns its class *before* this
    /// reply and after it.
    pub fn observe(&self, key: &str, healthy: bool) -> (Class, Class) {
        let mut models = self.models.lock().unwrap_or_else(|e| e.into_inner());
        let before = class_of(models.get(key));
        let record = models.entry(key.to_string()).or_default();
        let changed = match (before, healthy) {
            (Class::Compliant, _) | (Class::Muted, _) => false,
            (Class::Unclassified { .. }, true) => {
                *record = Record {
                    compliant: Some(true),
                    failures: 0,
                };
                true
            }
            (Class::Unclassified { failures }, false) => {
                record.failures = failures + 1;
                if record.failures >= COMPLIANCE_WINDOW {
                    record.compliant = Some(false);
                }
                true
            }
        };
        let after = class_of(Some(record));
        if changed {
            self.save(&models);
        }
        (before, after)
    }

    fn save(&self, models: &BTreeMap<String, Record>) {
        let Some(path) = &self.path else { return };
        let file = File {
            schema: 1,
            models: models.clone(),
        };
        let text = serde_json::to_string_pretty(&file).expect("plain data serializes");
        let options = sextant_fsutil::Options {
            private: true,
            ..sextant_fsutil::Options::default()
        };
        if let Err(e) = sextant_fsutil::write_atomic_with(path, text.as_bytes(), options) {
            // Kept in memory for this run; the probe still works, it forgets on restart.
            tracing::warn!(target: "assistant", "could not save {}: {e}", path.display());
        }
    }
}

fn class_of(record: Option<&Record>) -> Class {
    match record {
        Some(Record {
            compliant: Some(true),
            ..
        }) => Class::Compliant,
        Some(Record {
            compliant: Some(false),
            ..
        }) => Class::Muted,
        Some(r) => Class::Unclassified {
            failures: r.failures,
        },
        None => Class::Unclassified { failures: 0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_sanitised() {
        assert_eq!(
            model_key("openai-compatible", "org/model\\v1"),
            "openai-compatible_org_model_v1"
        );
    }

    #[test]
    fn three_failures_mute_one_success_makes_compliant_and_both_persist() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(COMPLIANCE_FILE);
        let c = Compliance::open(&path);
        for n in 0..COMPLIANCE_WINDOW {
            assert_eq!(
                c.observe("weak", false).0,
                Class::Unclassified { failures: n }
            );
        }
        assert_eq!(c.class("weak"), Class::Muted);
        assert_eq!(c.observe("weak", true).1, Class::Muted, "muted for good");
        c.observe("good", false);
        assert_eq!(c.observe("good", true).1, Class::Compliant);
        let again = Compliance::open(&path);
        assert_eq!(again.class("weak"), Class::Muted);
        assert_eq!(again.class("good"), Class::Compliant);
        assert_eq!(again.class("new"), Class::Unclassified { failures: 0 });
    }

    #[test]
    fn a_damaged_file_is_kept_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(COMPLIANCE_FILE);
        std::fs::write(&path, "{ not json").unwrap();
        let c = Compliance::open(&path);
        assert_eq!(c.class("x"), Class::Unclassified { failures: 0 });
        assert!(dir.path().join("probe-compliance.json.damaged").exists());
    }
}
