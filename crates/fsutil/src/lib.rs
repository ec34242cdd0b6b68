//! Writing files safely, the one implementation every crate uses: atomic replacement
//! ([`write_atomic`]: project saves, the assistant's settings, the secrets file and its key)
//! and creating a file to stream into ([`create_file`]: captures; [`StreamedFile`]: a live
//! CSV export, which replaces its target only once complete).
//!
//! A failed write is told to a person as a [`WriteProblem`]: the disk is full, the folder
//! refused, or the system's own words – the one classification recordings, exports and
//! saves share, so the UI words each kind once, in every language.
//!
//! Neither follows a symbolic link at the target: a rename replaces the link itself, and
//! [`create_file`] opens with `O_NOFOLLOW`, so a link planted in a user's folder (say, a
//! dangling one pointing at a file elsewhere) cannot send the bytes out of that folder.
//! Which paths a command may write at all is decided before, by the runtime's one write
//! policy (`sextant_runtime::safeguards`).
//!
//! The bytes go to a temporary file in the target's own directory, which is flushed to
//! disk and renamed over the target; then the directory is flushed, so the rename itself
//! survives a crash. A rename within one directory is atomic on POSIX and on NTFS, so a
//! reader (or a crash) sees the old bytes or the new ones, never a torn file. On failure
//! the temporary file is removed and the old file is left as it was.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// How [`write_atomic_with`] creates the file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Readable by the owner only (mode 0600 on Unix) from the moment the bytes are on
    /// disk; otherwise the mode a newly created file gets (0666 less the umask).
    pub private: bool,
    /// Fail with [`io::ErrorKind::AlreadyExists`] instead of replacing an existing file.
    pub no_replace: bool,
}

/// Replaces `path` with `bytes` atomically (creating it when it does not exist).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, bytes, Options::default())
}

/// [`write_atomic`] with [`Options`].
pub fn write_atomic_with(path: &Path, bytes: &[u8], options: Options) -> io::Result<()> {
    write_with_hook(path, bytes, options, |_| Ok(()))
}

/// The writer, with a hook that runs once the temporary file holds the bytes and before it
/// is renamed (the tests fail there on purpose).
fn write_with_hook(
    path: &Path,
    bytes: &[u8],
    options: Options,
    before_rename: impl FnOnce(&Path) -> io::Result<()>,
) -> io::Result<()> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{}` has no file name", path.display()),
        )
    })?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(name);
    prefix.push(".");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = if options.private { 0o600 } else { 0o666 };
        builder.permissions(fs::Permissions::from_mode(mode));
    }
    // Dropping `temp` on any early return below deletes the temporary file.
    let mut temp = builder.tempfile_in(&dir)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    before_rename(temp.path())?;
    let persisted = if options.no_replace {
        temp.persist_noclobber(path)
    } else {
        temp.persist(path)
    };
    // A failed persist hands the temporary file back; dropping it deletes it.
    persisted.map_err(|e| e.error)?;
    sync_dir(&dir)
}

/// Creates (or truncates) the regular file at `path` for writing, never following a
/// symbolic link at `path` and never blocking on a named pipe or a device there: anything
/// but a regular file is refused with [`io::ErrorKind::InvalidInput`].
pub fn create_file(path: &Path) -> io::Result<fs::File> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NONBLOCK: opening a FIFO for writing would otherwise wait for a reader.
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|e| {
        #[cfg(unix)]
        if e.raw_os_error() == Some(libc::ELOOP) {
            return io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "`{}` is a symbolic link; Sextant does not write through links – choose the file itself",
                    path.display()
                ),
            );
        }
        e
    })?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "`{}` is not a regular file (a named pipe or a device?); choose a file",
                path.display()
            ),
        ));
    }
    #[cfg(unix)]
    {
        // Back to blocking writes, as any file; truncate only once it is known regular.
        let fd = std::os::unix::io::AsRawFd::as_raw_fd(&file);
        // SAFETY: `fd` is open for the life of `file`; F_GETFL/F_SETFL take no pointers.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
            }
        }
    }
    file.set_len(0)?;
    Ok(file)
}

/// A file written in a stream (a live export) that replaces `path` only when it is complete:
/// the rows go to `<path>.partial` beside it, and [`StreamedFile::finish`] flushes that to
/// disk and renames it over `path`. An export that fails (a full disk) or is cut off (the
/// process killed) leaves the file that was at `path` as it was, and what it had written in
/// the `.partial` file – nothing complete is ever truncated by a run that did not complete.
#[derive(Debug)]
pub struct StreamedFile {
    file: fs::File,
    partial: PathBuf,
    path: PathBuf,
}

impl StreamedFile {
    /// Starts writing toward `path` (the `.partial` file is created as [`create_file`]
    /// creates, never through a link; a stale one from an earlier run is replaced).
    pub fn create(path: &Path) -> io::Result<StreamedFile> {
        let partial = Self::partial_path(path)?;
        let file = create_file(&partial)?;
        Ok(StreamedFile {
            file,
            partial,
            path: path.to_path_buf(),
        })
    }

    /// Where the rows are while the stream runs: `<path>.partial`.
    pub fn partial_path(path: &Path) -> io::Result<PathBuf> {
        let name = path.file_name().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{}` has no file name", path.display()),
            )
        })?;
        let mut partial = name.to_os_string();
        partial.push(".partial");
        Ok(path.with_file_name(partial))
    }

    /// The file to write into.
    pub fn file(&mut self) -> &mut fs::File {
        &mut self.file
    }

    /// Flushes the bytes to disk and puts them at the target, atomically.
    pub fn finish(self) -> io::Result<()> {
        self.file.sync_all()?;
        drop(self.file);
        fs::rename(&self.partial, &self.path)?;
        let dir = match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        sync_dir(&dir)
    }

    /// [`StreamedFile::finish`] through a rewrite: `rewrite` reads the complete stream and
    /// writes what goes to the target (a CSV given the header it outgrew). The result goes
    /// through a temporary file renamed over the target, so a failure (a full disk) leaves
    /// the old target and the `.partial` file as they were.
    pub fn finish_rewritten(
        self,
        rewrite: impl FnOnce(fs::File, &mut dyn Write) -> io::Result<()>,
    ) -> io::Result<()> {
        self.file.sync_all()?;
        drop(self.file);
        let input = fs::File::open(&self.partial)?;
        let dir = match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut builder = tempfile::Builder::new();
        builder.prefix(".sextant-rewrite.").suffix(".tmp");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(fs::Permissions::from_mode(0o666));
        }
        let mut temp = builder.tempfile_in(&dir)?;
        {
            let mut out = io::BufWriter::new(temp.as_file_mut());
            rewrite(input, &mut out)?;
            out.flush()?;
        }
        temp.as_file().sync_all()?;
        temp.persist(&self.path).map_err(|e| e.error)?;
        fs::remove_file(&self.partial)?;
        sync_dir(&dir)
    }
}

impl Write for StreamedFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Why a write failed, as a person acts on it.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct WriteProblem {
    pub kind: WriteProblemKind,
    /// The system's own words, for a report; the UI words the kind.
    pub detail: String,
}

/// The kinds of [`WriteProblem`] a person does something different about.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum WriteProblemKind {
    /// No space left (or the quota is used up): free some space.
    DiskFull,
    /// The folder or the file refuses writes (permissions, a read-only disk).
    Denied,
    /// Anything else: the detail says what.
    Other,
}

impl WriteProblem {
    /// Classifies an I/O error.
    pub fn from_io(e: &io::Error) -> WriteProblem {
        #[cfg(unix)]
        let quota = e.raw_os_error() == Some(libc::EDQUOT);
        #[cfg(not(unix))]
        let quota = false;
        let kind = match e.kind() {
            io::ErrorKind::StorageFull => WriteProblemKind::DiskFull,
            _ if quota => WriteProblemKind::DiskFull,
            io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => {
                WriteProblemKind::Denied
            }
            _ => WriteProblemKind::Other,
        };
        WriteProblem {
            kind,
            detail: e.to_string(),
        }
    }
}

impl std::fmt::Display for WriteProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            WriteProblemKind::DiskFull => write!(f, "the disk is full ({})", self.detail),
            WriteProblemKind::Denied => write!(f, "writing is not allowed there ({})", self.detail),
            WriteProblemKind::Other => f.write_str(&self.detail),
        }
    }
}

/// Flushes a directory's entries (a rename in it) to disk.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

/// Windows has no handle to flush a directory through; NTFS journals the rename.
#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn create_file_never_follows_a_link_nor_waits_on_a_pipe() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere.txt");
        let link = dir.path().join("export.csv");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        let err = create_file(&link).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(
            !elsewhere.exists(),
            "nothing written through the dangling link"
        );
        let fifo = dir.path().join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // No reader: a blocking open would hang here forever.
        assert!(create_file(&fifo).is_err());
        let plain = dir.path().join("plain.csv");
        fs::write(&plain, b"old contents").unwrap();
        let mut f = create_file(&plain).unwrap();
        f.write_all(b"new").unwrap();
        drop(f);
        assert_eq!(fs::read(&plain).unwrap(), b"new");
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_failure_before_the_rename_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("project.json");
        fs::write(&path, b"old").unwrap();
        let mut seen = None;
        let err = write_with_hook(&path, b"new", Options::default(), |temp| {
            // The temporary file sits beside the target and already holds the new bytes.
            assert_eq!(temp.parent(), Some(dir.path()));
            assert_eq!(fs::read(temp).unwrap(), b"new");
            seen = Some(temp.to_path_buf());
            Err(io::Error::other("disk full"))
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "disk full");
        assert!(!seen.unwrap().exists(), "the temporary file is removed");
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert_eq!(entries(dir.path()), ["project.json"]);
    }
}
