//! What a call may do only with a person's yes to that very call, whatever its tier and
//! whoever allowed edits: run a program, or write a file outside the user's folders.
//!
//! Tiers are per command; these two risks depend on the arguments and the project, so they
//! are judged per call here, by one table ([`GATES`]) that every door goes through
//! ([`crate::Runtime::execute_as`]) and that the assistant reads before it asks
//! ([`crate::RuntimeHandle::assess`]):
//!
//! - **Programs.** Adding a process source or changing what one runs (program, arguments,
//!   working folder) needs a yes; so does `io.connect` of a project with a process source
//!   whose exact command line the person has not allowed for this project file before.
//!   Allowed command lines are remembered per project file in the user's data folder
//!   ([`TrustStore`]), never in the project, so a shared project cannot carry its own
//!   permission.
//! - **Files.** Commands that write where the caller says (`project.save` to a path,
//!   `csvExport.enable`, `sessions.exportCsv`, `sessions.setDatabase`) write without asking
//!   only inside the user's folders: the open project's folder and the folders the app was
//!   given ([`Safeguards::new`]). Hidden files and folders (`.bashrc`, `.config/…`) inside
//!   them are not user files and always ask. `project.save` over an existing file that is
//!   not a Sextant project (an imported Serial Studio project) always asks too.
//!
//! A door that can ask a person turns [`ErrorCode::NeedsConfirmation`] into a dialog and
//! repeats the call approved. A headless door (API, MCP, CLI) cannot ask: it is refused,
//! unless the person who started it consented up front (`--allow-process-sources`; a
//! command line's own paths).

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use sextant_commands::{CommandError, ErrorCode, Policy};
use sextant_telemetry::project::{Connection, Source, FORMAT_MARKER};

/// The user's folders and the remembered program permissions, shared by every door.
#[derive(Clone, Default)]
pub struct Safeguards {
    folders: Arc<Vec<PathBuf>>,
    trust: TrustStore,
}

impl Safeguards {
    /// `folders`: where files may be written without asking (besides the project's own
    /// folder); `trust`: the program permissions.
    pub fn new(folders: Vec<PathBuf>, trust: TrustStore) -> Safeguards {
        Safeguards {
            folders: Arc::new(folders),
            trust,
        }
    }

    pub fn folders(&self) -> &[PathBuf] {
        &self.folders
    }

    pub fn trust(&self) -> &TrustStore {
        &self.trust
    }

    /// What this call needs a person's yes for, if anything.
    pub(crate) fn assess(&self, view: &View<'_>, command: &str, params: &Json) -> Option<Gate> {
        let gate = GATES.iter().find(|(name, _)| *name == command)?.1;
        gate(self, view, params)
    }
}

/// What the safeguards look at: the project's file and sources.
pub(crate) struct View<'a> {
    pub project_file: Option<&'a Path>,
    pub sources: &'a [Source],
}

/// A call that needs a person's yes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Gate {
    /// It adds, changes (`starts: false`) or starts (`starts: true`) these programs.
    RunsPrograms {
        command_lines: Vec<String>,
        starts: bool,
    },
    /// It writes this file, outside the user's folders.
    WritesOutside { path: PathBuf },
    /// It replaces this file, which Sextant did not write (a Serial Studio project, say).
    ReplacesForeign { path: PathBuf },
}

impl Gate {
    /// What to ask the person, in words that say what will happen.
    pub(crate) fn prompt(&self) -> String {
        match self {
            Gate::RunsPrograms {
                command_lines,
                starts: true,
            } => format!(
                "this project runs {} on this computer, as you – allow it?",
                quoted(command_lines)
            ),
            Gate::RunsPrograms { command_lines, .. } => format!(
                "this sets a source to run {} on this computer, as you, when it connects – allow it?",
                quoted(command_lines)
            ),
            Gate::WritesOutside { path } => format!(
                "this writes the file {}, outside your folders – allow it?",
                path.display()
            ),
            Gate::ReplacesForeign { path } => format!(
                "{} is not a Sextant project (Sextant did not write it); saving replaces it – \
                 replace it anyway?",
                path.display()
            ),
        }
    }

    /// Why a caller that nobody can be asked for is refused, and what would allow it.
    pub(crate) fn refusal(&self) -> String {
        match self {
            Gate::RunsPrograms { command_lines, .. } => format!(
                "refused: this would run {} on this computer; programs run only after a person \
                 says yes in the app, or when the server was started with --allow-process-sources",
                quoted(command_lines)
            ),
            Gate::WritesOutside { path } => format!(
                "refused: {} is outside the folders this server may write; choose a path inside \
                 them, or start it with --allow-folder DIR",
                path.display()
            ),
            Gate::ReplacesForeign { path } => format!(
                "refused: {} exists and is not a Sextant project; save to a new file, e.g. \
                 beside it as NAME.sextant.json",
                path.display()
            ),
        }
    }

    /// Whether the caller's own settings already carry the person's consent.
    pub(crate) fn consented_by(&self, policy: &Policy) -> bool {
        match self {
            Gate::RunsPrograms { .. } => policy.allow_process_sources,
            Gate::WritesOutside { .. } => policy.paths_from_person,
            // Typing a path is not knowing what is in the file there.
            Gate::ReplacesForeign { .. } => false,
        }
    }

    /// The error a door gets when the call needs a person's yes first.
    pub(crate) fn error(&self, policy: &Policy) -> CommandError {
        if policy.non_interactive {
            CommandError::new(ErrorCode::NotAllowed, self.refusal())
        } else {
            CommandError::new(ErrorCode::NeedsConfirmation, self.prompt())
        }
    }
}

fn quoted(lines: &[String]) -> String {
    lines
        .iter()
        .map(|l| format!("`{l}`"))
        .collect::<Vec<_>>()
        .join(" and ")
}

type GateFn = fn(&Safeguards, &View<'_>, &Json) -> Option<Gate>;

/// Every command whose arguments can run a program or choose where a file is written.
/// A command not listed here has neither power.
const GATES: &[(&str, GateFn)] = &[
    ("project.source.add", source_add),
    ("project.source.update", source_update),
    ("io.connect", connect),
    ("project.save", |s, v, p| {
        writes(s, v, p.get("path")).or_else(|| replaces_foreign(p.get("path")))
    }),
    ("csvExport.enable", |s, v, p| writes(s, v, p.get("path"))),
    ("sessions.exportCsv", |s, v, p| writes(s, v, p.get("path"))),
    ("sessions.setDatabase", |s, v, p| {
        writes(s, v, p.get("path"))
    }),
];

fn source_add(_: &Safeguards, _: &View<'_>, params: &Json) -> Option<Gate> {
    // Parsed leniently: a value that is not a valid connection fails in the handler.
    let connection: Connection =
        serde_json::from_value(params.get("source")?.get("connection")?.clone()).ok()?;
    let line = command_line(&connection)?;
    Some(Gate::RunsPrograms {
        command_lines: vec![line],
        starts: false,
    })
}

fn source_update(_: &Safeguards, view: &View<'_>, params: &Json) -> Option<Gate> {
    let id = params.get("id")?.as_str()?;
    let changes = params.get("changes")?.as_object()?;
    let source = view.sources.iter().find(|s| s.id == id)?;
    let after: Source = crate::commands::merge_patch(source, changes, "source").ok()?;
    let line = command_line(&after.connection)?;
    (command_line(&source.connection).as_deref() != Some(line.as_str())).then(|| {
        Gate::RunsPrograms {
            command_lines: vec![line],
            starts: false,
        }
    })
}

fn connect(safeguards: &Safeguards, view: &View<'_>, _: &Json) -> Option<Gate> {
    let untrusted: Vec<String> = view
        .sources
        .iter()
        .filter_map(|s| command_line(&s.connection))
        .filter(|line| !safeguards.trust.allows(view.project_file, line))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    (!untrusted.is_empty()).then_some(Gate::RunsPrograms {
        command_lines: untrusted,
        starts: true,
    })
}

fn writes(safeguards: &Safeguards, view: &View<'_>, path: Option<&Json>) -> Option<Gate> {
    let path = PathBuf::from(path?.as_str()?);
    let project_folder = view
        .project_file
        .and_then(Path::parent)
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf);
    let mut folders = safeguards.folders.iter().cloned().chain(project_folder);
    (!folders.any(|f| inside(&path, &f))).then_some(Gate::WritesOutside { path })
}

/// A save over an existing file that is not a Sextant project (an imported Serial Studio
/// project, anything else): the person is asked, so an import is never overwritten by
/// accident.
fn replaces_foreign(path: Option<&Json>) -> Option<Gate> {
    let path = PathBuf::from(path?.as_str()?);
    (path.exists() && !is_sextant_project(&path)).then_some(Gate::ReplacesForeign { path })
}

/// Whether `path` holds a project Sextant wrote (its `format` marker).
fn is_sextant_project(path: &Path) -> bool {
    // Projects are small; anything huge is not one of ours.
    const LARGEST: u64 = 64 << 20;
    if std::fs::metadata(path).map_or(true, |m| !m.is_file() || m.len() > LARGEST) {
        return false;
    }
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Json>(&bytes).ok())
        .is_some_and(|v| v.get("format").and_then(Json::as_str) == Some(FORMAT_MARKER))
}

/// The exact command line a process source runs, as a person would read it; `None` for
/// every other kind of source.
pub fn command_line(connection: &Connection) -> Option<String> {
    let Connection::Process {
        program,
        args,
        working_dir,
    } = connection
    else {
        return None;
    };
    let mut line = std::iter::once(program)
        .chain(args)
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ");
    if let Some(dir) = working_dir.as_deref().filter(|d| !d.is_empty()) {
        line.push_str(&format!(" (in {})", shell_quote(dir)));
    }
    Some(line)
}

/// Quotes a word the way a POSIX shell would need it, so `sh -c 'id > f'` reads as one
/// argument and a person sees exactly what runs.
fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Whether writing `path` stays inside `folder`: symbolic links and `..` resolved, and no
/// hidden file or folder on the way (dotfiles are configuration, not a user's data).
pub fn inside(path: &Path, folder: &Path) -> bool {
    let (Some(path), Ok(folder)) = (resolve(path), folder.canonicalize()) else {
        return false;
    };
    match path.strip_prefix(&folder) {
        Ok(rest) => !rest
            .components()
            .any(|c| c.as_os_str().to_string_lossy().starts_with('.')),
        Err(_) => false,
    }
}

/// `path` made absolute with every existing part canonical; `None` when the part that does
/// not exist yet climbs with `..` (it could land anywhere once created).
fn resolve(path: &Path) -> Option<PathBuf> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(path)
    };
    let mut existing = absolute.as_path();
    let mut missing = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for part in missing.iter().rev() {
                out.push(part);
            }
            return Some(out);
        }
        let name = existing.file_name()?;
        if matches!(
            Path::new(name).components().next(),
            Some(Component::ParentDir)
        ) {
            return None;
        }
        missing.push(name.to_os_string());
        existing = existing.parent()?;
    }
}

/// Program command lines a person allowed, per project file, kept in the user's data
/// folder (`trusted-programs.json`), never in the project. An unsaved project's permissions
/// last until the app stops.
#[derive(Clone, Default)]
pub struct TrustStore {
    inner: Arc<Mutex<TrustInner>>,
}

#[derive(Default)]
struct TrustInner {
    file: Option<PathBuf>,
    allowed: BTreeSet<(String, String)>,
}

#[derive(Serialize, Deserialize)]
struct TrustFile {
    schema: u32,
    programs: Vec<TrustedProgram>,
}

#[derive(Serialize, Deserialize)]
struct TrustedProgram {
    project: String,
    command: String,
}

/// The file name of the program permissions in the user's data folder.
pub const TRUST_FILE: &str = "trusted-programs.json";

impl TrustStore {
    /// Permissions that last until the app stops.
    pub fn in_memory() -> TrustStore {
        TrustStore::default()
    }

    /// The permissions kept in `path` (created on the first yes). A damaged file is moved
    /// aside (`…json.damaged`) and the store starts empty: nothing is allowed by accident.
    pub fn open(path: PathBuf) -> TrustStore {
        let mut allowed = BTreeSet::new();
        match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<TrustFile>(&bytes) {
                Ok(f) if f.schema == 1 => {
                    allowed.extend(f.programs.into_iter().map(|p| (p.project, p.command)))
                }
                _ => {
                    let aside = path.with_extension("json.damaged");
                    tracing::warn!(
                        "{} is damaged; moved to {} and starting with no program allowed",
                        path.display(),
                        aside.display()
                    );
                    let _ = std::fs::rename(&path, aside);
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("could not read {}: {e}", path.display()),
        }
        TrustStore {
            inner: Arc::new(Mutex::new(TrustInner {
                file: Some(path),
                allowed,
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TrustInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `command_line` was allowed for the project in `project_file`.
    pub fn allows(&self, project_file: Option<&Path>, command_line: &str) -> bool {
        let key = (project_key(project_file), command_line.to_string());
        self.lock().allowed.contains(&key)
    }

    /// Remembers a person's yes to these command lines for this project file.
    pub fn allow(
        &self,
        project_file: Option<&Path>,
        command_lines: &[String],
    ) -> Result<(), String> {
        let project = project_key(project_file);
        let mut inner = self.lock();
        for line in command_lines {
            inner.allowed.insert((project.clone(), line.clone()));
        }
        let Some(file) = inner.file.clone() else {
            return Ok(());
        };
        // An unsaved project has no file to key by: its permissions stay in memory.
        let programs = inner
            .allowed
            .iter()
            .filter(|(p, _)| !p.is_empty())
            .map(|(project, command)| TrustedProgram {
                project: project.clone(),
                command: command.clone(),
            })
            .collect();
        let bytes = serde_json::to_vec_pretty(&TrustFile {
            schema: 1,
            programs,
        })
        .map_err(|e| e.to_string())?;
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        sextant_fsutil::write_atomic(&file, &bytes).map_err(|e| e.to_string())
    }
}

/// A project file as the permissions name it: canonical when it exists, so two spellings
/// of one file share them; empty for an unsaved project.
fn project_key(project_file: Option<&Path>) -> String {
    match project_file {
        None => String::new(),
        Some(p) => p
            .canonicalize()
            .unwrap_or_else(|_| p.to_path_buf())
            .to_string_lossy()
            .into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use sextant_telemetry::Project;

    fn process(program: &str, args: &[&str]) -> Connection {
        Connection::Process {
            program: program.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            working_dir: None,
        }
    }

    #[test]
    fn command_lines_read_as_a_shell_would() {
        let cases = [
            (
                process("/bin/sh", &["-c", "id > FILE"]),
                "/bin/sh -c 'id > FILE'",
            ),
            (
                process("python3", &["sensor.py", "--rate=10"]),
                "python3 sensor.py --rate=10",
            ),
            (process("echo", &["it's", ""]), r"echo 'it'\''s' ''"),
        ];
        for (connection, want) in cases {
            assert_eq!(command_line(&connection).as_deref(), Some(want));
        }
        assert_eq!(command_line(&Connection::default()), None);
    }

    #[test]
    fn writes_inside_the_folders_only() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("work");
        std::fs::create_dir_all(folder.join("sub")).unwrap();
        let outside = dir.path().join("elsewhere");
        std::fs::create_dir_all(&outside).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(&outside, folder.join("link")).unwrap();
        let cases: &[(&str, bool)] = &[
            ("work/a.csv", true),
            ("work/sub/new/b.csv", true),
            ("work/../elsewhere/c.csv", false),
            ("work/sub/../../elsewhere/c.csv", false),
            ("work/missing/../../elsewhere/c.csv", false),
            ("work/.bashrc", false),
            ("work/.config/autostart/x.desktop", false),
            ("elsewhere/d.csv", false),
            #[cfg(unix)]
            ("work/link/e.csv", false),
        ];
        for (relative, want) in cases {
            let path = dir.path().join(relative);
            assert_eq!(inside(&path, &folder), *want, "{relative}");
        }
    }

    #[test]
    fn adding_or_changing_a_program_is_gated_other_edits_are_not() {
        let s = Safeguards::default();
        let sources = vec![
            Source {
                id: "p".into(),
                connection: process("/usr/bin/logger-tool", &["--json"]),
                ..Source::default()
            },
            Source::default(),
        ];
        let view = View {
            project_file: None,
            sources: &sources,
        };
        let gated = |cmd: &str, p: Json| s.assess(&view, cmd, &p).is_some();
        let add_process = json!({"source": {"connection": {"type": "process", "program": "/bin/sh", "args": ["-c", "id"]}}});
        assert!(gated("project.source.add", add_process));
        let add_serial =
            json!({"source": {"connection": {"type": "serial", "port": "/dev/ttyUSB0"}}});
        assert!(!gated("project.source.add", add_serial));
        assert!(gated(
            "project.source.update",
            json!({"id": "p", "changes": {"connection": {"args": ["-x"]}}})
        ));
        assert!(gated(
            "project.source.update",
            json!({"id": "p", "changes": {"connection": {"workingDir": "/tmp"}}})
        ));
        assert!(gated(
            "project.source.update",
            json!({"id": "src-1", "changes": {"connection": {"type": "process", "program": "sh"}}})
        ));
        assert!(!gated(
            "project.source.update",
            json!({"id": "p", "changes": {"title": "Logger"}})
        ));
        assert!(!gated(
            "project.source.update",
            json!({"id": "src-1", "changes": {"title": "x"}})
        ));
        assert!(gated("io.connect", json!({})));
        s.trust()
            .allow(None, &["/usr/bin/logger-tool --json".into()])
            .unwrap();
        assert!(!gated("io.connect", json!({})), "allowed once, remembered");
    }

    #[test]
    fn saving_over_a_file_sextant_did_not_write_is_gated() {
        let dir = tempfile::tempdir().unwrap();
        let s = Safeguards::new(vec![dir.path().to_path_buf()], TrustStore::in_memory());
        let view = View {
            project_file: None,
            sources: &[],
        };
        let ours = dir.path().join("rig.sextant.json");
        std::fs::write(&ours, Project::default().to_json_string()).unwrap();
        let imported = dir.path().join("rig.ssproj");
        std::fs::write(&imported, r#"{"title": "Rig", "groups": []}"#).unwrap();
        let cases = [
            (ours, None),
            (dir.path().join("new.sextant.json"), None),
            (
                imported.clone(),
                Some(Gate::ReplacesForeign { path: imported }),
            ),
        ];
        for (path, want) in cases {
            let got = s.assess(&view, "project.save", &json!({ "path": path }));
            assert_eq!(got, want, "{}", path.display());
        }
    }

    #[test]
    fn permissions_persist_per_project_file_and_a_damaged_file_allows_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(TRUST_FILE);
        let project = dir.path().join("rig.json");
        std::fs::write(&project, "{}").unwrap();
        let store = TrustStore::open(file.clone());
        store
            .allow(Some(&project), &["python3 rig.py".into()])
            .unwrap();
        let again = TrustStore::open(file.clone());
        assert!(again.allows(Some(&project), "python3 rig.py"));
        assert!(!again.allows(Some(&project), "python3 rig.py --evil"));
        assert!(!again.allows(Some(&dir.path().join("other.json")), "python3 rig.py"));
        assert!(!again.allows(None, "python3 rig.py"));
        std::fs::write(&file, "{not json").unwrap();
        let damaged = TrustStore::open(file.clone());
        assert!(!damaged.allows(Some(&project), "python3 rig.py"));
        assert!(file.with_extension("json.damaged").exists());
    }
}
