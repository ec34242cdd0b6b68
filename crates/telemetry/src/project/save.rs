//! Project saves: [`sextant_fsutil::write_atomic`] (temporary file in the same directory,
//! fsync, rename, fsync the directory), with the path in the error.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error(
    "could not save {path}: {}; the file on disk is unchanged",
    sextant_fsutil::WriteProblem::from_io(source)
)]
pub struct SaveError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Replaces the project file `path` with `bytes` atomically: a crash leaves the old file or
/// the new one, never a torn one.
pub fn save_atomic(path: &Path, bytes: &[u8]) -> Result<(), SaveError> {
    sextant_fsutil::write_atomic(path, bytes).map_err(|source| SaveError {
        path: path.to_path_buf(),
        source,
    })
}
