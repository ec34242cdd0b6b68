//! Every command Sextant offers, registered on one [`Registry`] over the [`Workspace`].
//!
//! Namespaces follow Serial Studio's API where it has an equivalent (`project.*`,
//! `project.dataset.*`, `project.frameParser.*`, `io.*`, `console.*`), so users of its API
//! feel at home; `assistant.*` holds checkpoints, `meta.*` the self-description.

mod controls;
mod data;
mod images;
mod io;
mod meta;
mod parser;
mod project;
mod sessions;
mod structure;
mod templates;

use std::sync::{Arc, OnceLock};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value as Json};
use sextant_commands::{CommandError, CommandSpec, Registry};

use crate::Workspace;

pub use io::{IoStatus, SourceStatus};
pub use project::MAX_OPEN_CONTENT_BYTES;
pub use sessions::MAX_DOWNLOAD_BYTES;

/// The registry with every command.
pub fn registry() -> Registry<Workspace> {
    let mut r = Registry::new();
    let specs: Arc<OnceLock<Vec<CommandSpec>>> = Arc::new(OnceLock::new());
    project::register(&mut r);
    structure::register(&mut r);
    parser::register(&mut r);
    io::register(&mut r);
    controls::register(&mut r);
    images::register(&mut r);
    data::register(&mut r);
    sessions::register(&mut r);
    templates::register(&mut r);
    meta::register(&mut r, specs.clone());
    let _ = specs.set(r.specs().cloned().collect());
    debug_assert!(r.check_consistency().is_ok(), "{:?}", r.check_consistency());
    r
}

/// Applies a JSON merge patch (RFC 7396) of `changes` to `target`, re-checking the result
/// against its type so a bad field fails with its path (`sextant_telemetry::project::merge_patch`).
pub(crate) fn merge_patch<T>(
    target: &T,
    changes: &Map<String, Json>,
    what: &str,
) -> Result<T, CommandError>
where
    T: serde::Serialize + DeserializeOwned,
{
    sextant_telemetry::project::merge_patch(target, changes, what)
        .map_err(|e| CommandError::invalid(e.path, e.message))
}
