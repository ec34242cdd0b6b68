//! JSON merge patches (RFC 7396) over one object of a project – a source, group, dataset,
//! action or workspace – re-checked against the object's type, so a bad field fails with
//! its path. Every door's `project.*.update` and the consent checks that preview such an
//! update go through [`merge_patch`]; the fuzz target `project_patch` holds it to "either a
//! clear error, or an object the project accepts and that saves and reloads".

use serde::de::DeserializeOwned;
use serde_json::{Map, Value as Json};

/// Why a patch was refused: `path` names the field (`changes.title`), `message` says what
/// is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PatchError {
    pub path: String,
    pub message: String,
}

/// Applies `changes` to `target`; `what` names the object in messages ("group").
/// `null` removes an optional field; an object merges into the field's object; anything
/// else replaces the field. An `id` is never changed.
pub fn merge_patch<T>(target: &T, changes: &Map<String, Json>, what: &str) -> Result<T, PatchError>
where
    T: serde::Serialize + DeserializeOwned,
{
    let mut value = serde_json::to_value(target).map_err(|e| PatchError {
        path: "changes".into(),
        message: format!("the {what} could not be read: {e}"),
    })?;
    for (k, v) in changes {
        if k == "id" {
            return Err(PatchError {
                path: "changes.id".into(),
                message: format!("a {what}'s id never changes"),
            });
        }
        merge(&mut value, k, v);
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = format!("changes.{}", e.path());
        PatchError {
            message: format!("invalid {what} field `{path}`: {}", e.into_inner()),
            path,
        }
    })
}

fn merge(target: &mut Json, key: &str, patch: &Json) {
    let Json::Object(obj) = target else { return };
    match patch {
        Json::Null => {
            obj.remove(key);
        }
        Json::Object(p) => {
            let entry = obj
                .entry(key.to_string())
                .or_insert_with(|| Json::Object(Map::new()));
            if !entry.is_object() {
                *entry = Json::Object(Map::new());
            }
            for (k, v) in p {
                merge(entry, k, v);
            }
        }
        other => {
            obj.insert(key.to_string(), other.clone());
        }
    }
}
