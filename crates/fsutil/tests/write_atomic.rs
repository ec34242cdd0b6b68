//! `write_atomic` against a real directory: it writes, replaces, leaves nothing behind on
//! success, and leaves the old file as it was when it fails.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;

use sextant_fsutil::{write_atomic, write_atomic_with, Options};

/// The names in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn writes_a_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("assistant.json");
    write_atomic(&path, b"{\"provider\":\"anthropic\"}\n").unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"{\"provider\":\"anthropic\"}\n");
    assert_eq!(
        entries(dir.path()),
        ["assistant.json"],
        "no temporary file is left"
    );
}

#[test]
fn replaces_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("project.json");
    fs::write(&path, b"a much longer old version of the file").unwrap();
    write_atomic(&path, b"new").unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"new");
    write_atomic(&path, b"").unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"");
    assert_eq!(
        entries(dir.path()),
        ["project.json"],
        "no temporary file is left"
    );
}

#[test]
fn a_failed_rename_leaves_the_old_file_and_no_temporary() {
    let dir = tempfile::tempdir().unwrap();
    // The target is a directory with something in it: no file can be renamed over it.
    let path = dir.path().join("settings.json");
    fs::create_dir(&path).unwrap();
    fs::write(path.join("keep"), b"old").unwrap();
    assert!(write_atomic(&path, b"new").is_err());
    assert_eq!(fs::read(path.join("keep")).unwrap(), b"old");
    assert_eq!(
        entries(dir.path()),
        ["settings.json"],
        "the temporary file is removed"
    );
}

#[test]
fn a_missing_directory_is_an_error_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-such-dir").join("project.json");
    let err = write_atomic(&path, b"x").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(entries(dir.path()).is_empty());
}

#[test]
fn a_path_without_a_file_name_is_refused() {
    let err = write_atomic(Path::new("/"), b"x").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

#[test]
fn no_replace_refuses_an_existing_file_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secrets.key");
    let options = Options {
        private: true,
        no_replace: true,
    };
    write_atomic_with(&path, b"first", options).unwrap();
    let err = write_atomic_with(&path, b"second", options).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    assert_eq!(fs::read(&path).unwrap(), b"first");
    assert_eq!(
        entries(dir.path()),
        ["secrets.key"],
        "the temporary file is removed"
    );
}

#[cfg(unix)]
#[test]
fn private_files_are_owner_only_and_others_get_the_usual_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let private = dir.path().join("secrets.json");
    write_atomic_with(
        &private,
        b"x",
        Options {
            private: true,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(
        fs::metadata(&private).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // A plain write gets what `File::create` would give: at least owner read/write, and
    // the same bits as a file created the ordinary way here (the umask applies to both).
    let shared = dir.path().join("project.json");
    write_atomic(&shared, b"x").unwrap();
    let reference = dir.path().join("reference");
    fs::File::create(&reference).unwrap();
    assert_eq!(
        fs::metadata(&shared).unwrap().permissions().mode() & 0o777,
        fs::metadata(&reference).unwrap().permissions().mode() & 0o777
    );
}
