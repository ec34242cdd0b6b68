//! Reading a file at a path a caller gave: the one way every command does it.
//!
//! A path from a caller can name anything: a named pipe nobody writes to (reading it waits
//! forever), a device (`/dev/zero` never ends), a folder, a socket, or a file far larger
//! than anything Sextant reads. [`read_user_file`] refuses anything that is not a regular
//! file before opening it (opening a device can already do something), opens without
//! waiting (`O_NONBLOCK`, so a named pipe put there meanwhile opens at once), asks the
//! opened file (not the path, which could have changed) again, and refuses a file over the
//! cap of its [`FileKind`] before reading a byte of it; the read itself stops at the cap
//! too, should the file grow meanwhile. Each refusal says what to do. A file that a library
//! opens itself (the sessions database, SQLite) is checked the same way first
//! ([`check_user_file`]).
//!
//! Commands still read on a job off the owner task ([`sextant_commands::Deferred`]): a
//! regular file on a slow or stalled network share can take its time, and nobody else's
//! command may wait for that.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use sextant_commands::CommandError;

/// What a command reads: what to call it in messages, and how large it may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileKind {
    /// The kind of file, as a person would ask for it ("a project file").
    pub noun: &'static str,
    /// The most bytes read; a larger file is refused.
    pub max_bytes: u64,
}

/// The most a project file (Sextant's or Serial Studio's) may be: projects are a few
/// kilobytes, the largest real ones a few megabytes.
pub const MAX_PROJECT_BYTES: u64 = 64 << 20;

/// The most a CSV file the CSV player reads may be: it holds the whole file in memory.
pub const MAX_CSV_BYTES: u64 = 1 << 30;

/// A Sextant project or a Serial Studio one (`project.open`, `project.import`).
pub const PROJECT_FILE: FileKind = FileKind {
    noun: "a project file",
    max_bytes: MAX_PROJECT_BYTES,
};

/// A CSV export to play (`csvPlayer.open`).
pub const CSV_FILE: FileKind = FileKind {
    noun: "a CSV file",
    max_bytes: MAX_CSV_BYTES,
};

/// The bytes of the regular file at `path`, refusing anything else and anything over
/// `kind.max_bytes`. Never waits on a named pipe or a device; errors are `failed` with a
/// message naming the path and what to do.
pub fn read_user_file(path: &Path, kind: FileKind) -> Result<Vec<u8>, CommandError> {
    let could_not =
        |e: std::io::Error| CommandError::failed(format!("could not read {}: {e}", path.display()));
    looks_regular(path, kind.noun)?;
    let file = open_without_waiting(path).map_err(could_not)?;
    let meta = regular(&file, path, kind.noun, could_not)?;
    let too_large = || {
        CommandError::failed(format!(
            "{} is larger than {}, the most {} may be; is it the right file?",
            path.display(),
            size(kind.max_bytes),
            kind.noun
        ))
    };
    if meta.len() > kind.max_bytes {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // One byte past the cap tells a file that grew after the check from one that fits.
    file.take(kind.max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(could_not)?;
    if bytes.len() as u64 > kind.max_bytes {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Refuses `path` unless it is a regular file or nothing at all (`noun`: what the caller
/// should choose instead, "a sessions database"), for a file a library opens itself.
/// Never waits on a named pipe or a device.
pub fn check_user_file(path: &Path, noun: &str) -> Result<(), CommandError> {
    let could_not =
        |e: std::io::Error| CommandError::failed(format!("could not open {}: {e}", path.display()));
    looks_regular(path, noun)?;
    match open_without_waiting(path) {
        Ok(file) => regular(&file, path, noun, could_not).map(|_| ()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(could_not(e)),
    }
}

/// Refuses `path` when it names something that is not a regular file, without opening it;
/// what cannot be looked at is left to opening it to report.
fn looks_regular(path: &Path, noun: &str) -> Result<(), CommandError> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => Err(not_regular(path, &meta.file_type(), noun)),
        _ => Ok(()),
    }
}

fn not_regular(path: &Path, what: &std::fs::FileType, noun: &str) -> CommandError {
    CommandError::failed(format!(
        "{} is {}, not a regular file; choose {noun}",
        path.display(),
        what_it_is(what),
    ))
}

/// The metadata of `file` (opened from `path`) when it is a regular file; a refusal that
/// says what it is instead, and to choose `noun`, when it is not.
fn regular(
    file: &File,
    path: &Path,
    noun: &str,
    could_not: impl Fn(std::io::Error) -> CommandError,
) -> Result<std::fs::Metadata, CommandError> {
    // Asked of the opened file: the path could name something else by now.
    let meta = file.metadata().map_err(could_not)?;
    if !meta.is_file() {
        return Err(not_regular(path, &meta.file_type(), noun));
    }
    Ok(meta)
}

/// [`read_user_file`] as text; a file that is not UTF-8 is refused with its path.
pub fn read_user_text(path: &Path, kind: FileKind) -> Result<String, CommandError> {
    String::from_utf8(read_user_file(path, kind)?).map_err(|_| {
        CommandError::failed(format!(
            "could not read {}: it is not text (UTF-8); choose {}",
            path.display(),
            kind.noun
        ))
    })
}

/// Opens for reading; a named pipe opens at once instead of waiting for a writer.
#[cfg(unix)]
fn open_without_waiting(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_without_waiting(path: &Path) -> std::io::Result<File> {
    File::open(path)
}

/// What a file that is not a regular file is, in words.
fn what_it_is(t: &std::fs::FileType) -> &'static str {
    if t.is_dir() {
        return "a folder";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a named pipe";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
    }
    "not a file"
}

/// A byte count as a person reads it (`64 MiB`).
fn size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{} {name}", bytes / unit);
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: FileKind = FileKind {
        noun: "a tiny file",
        max_bytes: 8,
    };

    #[test]
    fn a_regular_file_within_the_cap_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, "12345678").unwrap();
        assert_eq!(read_user_text(&path, TINY).unwrap(), "12345678");
    }

    #[test]
    fn a_file_over_the_cap_is_refused_naming_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.txt");
        std::fs::write(&path, "123456789").unwrap();
        let e = read_user_file(&path, TINY).unwrap_err();
        assert!(
            e.message
                .contains("larger than 8 bytes, the most a tiny file may be"),
            "{e}"
        );
        let e = read_user_file(&path, PROJECT_FILE).map(|_| ()).err();
        assert_eq!(e, None);
    }

    #[test]
    fn folders_and_missing_files_are_refused_with_their_path() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_user_file(dir.path(), PROJECT_FILE).unwrap_err();
        assert!(
            e.message
                .contains("is a folder, not a regular file; choose a project file"),
            "{e}"
        );
        let missing = dir.path().join("missing.json");
        let e = read_user_file(&missing, PROJECT_FILE).unwrap_err();
        assert!(e.message.starts_with("could not read "), "{e}");
        assert!(e.message.contains("missing.json"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn devices_are_refused_without_reading_them() {
        // /dev/zero never ends: read whole, it would fill the memory.
        let e = read_user_file(Path::new("/dev/zero"), PROJECT_FILE).unwrap_err();
        assert!(e.message.contains("is a device, not a regular file"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_named_pipe_is_refused_at_once_although_nobody_writes_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pipe.sextant.json");
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only reads it.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let e = read_user_file(&path, PROJECT_FILE).unwrap_err();
        assert!(
            e.message
                .contains("is a named pipe, not a regular file; choose a project file"),
            "{e}"
        );
    }

    #[test]
    fn a_file_a_library_opens_may_be_missing_but_not_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            check_user_file(&dir.path().join("new.db"), "a database"),
            Ok(())
        );
        let file = dir.path().join("old.db");
        std::fs::write(&file, "").unwrap();
        assert_eq!(check_user_file(&file, "a database"), Ok(()));
        let e = check_user_file(dir.path(), "a database").unwrap_err();
        assert!(
            e.message
                .contains("is a folder, not a regular file; choose a database"),
            "{e}"
        );
    }

    /// A named pipe put in a file's place between the look and the open: opening it does
    /// not wait for a writer, and the opened file is refused.
    #[cfg(unix)]
    #[test]
    fn opening_a_named_pipe_does_not_wait_and_the_opened_pipe_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pipe");
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only reads it.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let opening = path.clone();
        std::thread::spawn(move || {
            let refused = open_without_waiting(&opening)
                .map_err(|e| e.to_string())
                .and_then(|f| {
                    regular(&f, &opening, "a project file", |e| {
                        CommandError::failed(e.to_string())
                    })
                    .map(|_| ())
                    .map_err(|e| e.message)
                });
            let _ = tx.send(refused);
        });
        // Only a guard against hanging forever: the open returns at once or not at all.
        let refused = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("opening a named pipe waited for a writer");
        let e = refused.unwrap_err();
        assert!(e.contains("is a named pipe, not a regular file"), "{e}");
    }

    #[test]
    fn sizes_read_as_a_person_would_write_them() {
        assert_eq!(size(MAX_PROJECT_BYTES), "64 MiB");
        assert_eq!(size(MAX_CSV_BYTES), "1 GiB");
        assert_eq!(size(8), "8 bytes");
    }
}
