//! What a call may do only with a person's yes to that very call, whatever its tier and
//! whoever allowed edits: run a program, write a file outside the user's folders, or start
//! sends to a device that no one clicked.
//!
//! Tiers are per command; these risks depend on the arguments and the project, so they
//! are judged per call here, by two tables ([`PROGRAMS`], [`WRITES`]) that every door goes through
//! ([`crate::Runtime::execute_as`]) and that the assistant reads before it asks
//! ([`crate::RuntimeHandle::assess`]):
//!
//! - **Programs.** Adding a process source or changing what one runs (program, arguments,
//!   working folder) needs a yes; so does `io.connect` of a project with a process source
//!   whose exact command line the person has not allowed for this project file before.
//!   Allowed command lines are remembered per project file in the user's data folder
//!   ([`TrustStore`]), never in the project, so a shared project cannot carry its own
//!   permission.
//! - **Sends nobody clicked.** An action that sends on connect, or whose timer runs while
//!   connected, writes to the device as soon as `io.connect` runs; an enabled MQTT
//!   publisher sends every frame to its broker. Such a connect is
//!   DeviceGated whatever `io.connect`'s own tier ([`Gate::raised_tier`]): a caller without
//!   device control is refused, the assistant asks the person every time, a headless door
//!   needs `--allow-device-control`. In the app, the person's click on Connect is enough
//!   once they have said yes to exactly these sends for this project file (remembered like
//!   programs); a changed payload, interval or destination asks again.
//! - **Files: one write policy for every command that writes where its caller says**
//!   (`project.save` to a path, `csvExport.enable`, `mcapExport.enable`, `sessions.exportCsv`,
//!   `sessions.setDatabase`; [`WRITES`] lists them with what each may replace):
//!   - Sextant's own files – its settings, the program permissions, keys, chats, memory,
//!     the archive, the sessions database, models: everything in its data folder
//!     ([`Safeguards::with_own_folders`]) – are never a target, whoever asks and whatever
//!     they were allowed. Otherwise a command could forge the very permissions this module
//!     reads.
//!   - Without asking, a command writes only inside the user's folders: the open project's
//!     folder and the folders the app was given ([`Safeguards::new`]). Hidden files and
//!     folders (`.bashrc`, `.config/…`) inside them are not user files and always ask.
//!   - It replaces an existing file only when that file is one Sextant wrote in the same
//!     format (a project over a project, a CSV export over a CSV export, a sessions
//!     database over one); anything else asks, and a headless caller is refused.
//!   - A symbolic link at the target is never followed: a dangling one asks here, and the
//!     writers open with `O_NOFOLLOW` ([`sextant_fsutil::create_file`]), so a link made
//!     between this check and the write fails instead of writing elsewhere.
//!
//! A door that can ask a person turns [`ErrorCode::NeedsConfirmation`] into a dialog and
//! repeats the call approved. A headless door (API, MCP, CLI) cannot ask: it is refused,
//! unless the person who started it consented up front (`--allow-process-sources`; a
//! command line's own paths).

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};
use sextant_commands::{
    quoted, CommandError, ErrorCode, Outgoing, Policy, Question, Tier, WrittenFormat,
};
use sextant_telemetry::project::{
    Action, Connection, LineEnding, MqttPublisher, PostgresSink, Source, FORMAT_MARKER,
};

use crate::runtime::Consent;

/// The user's folders, Sextant's own folders and the remembered program permissions,
/// shared by every door.
#[derive(Clone, Default)]
pub struct Safeguards {
    folders: Arc<Vec<PathBuf>>,
    own: Arc<Vec<PathBuf>>,
    trust: TrustStore,
}

impl Safeguards {
    /// `folders`: where files may be written without asking (besides the project's own
    /// folder); `trust`: the program permissions.
    pub fn new(folders: Vec<PathBuf>, trust: TrustStore) -> Safeguards {
        Safeguards {
            folders: Arc::new(folders),
            own: Arc::default(),
            trust,
        }
    }

    /// Sextant's own folders (its data folder): no command writes anything inside them,
    /// whoever asks – they hold the settings, keys, chats and the permissions themselves.
    pub fn with_own_folders(self, own: Vec<PathBuf>) -> Safeguards {
        Safeguards {
            own: Arc::new(own),
            ..self
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
        if let Some((_, param, format)) = WRITES.iter().find(|(name, ..)| *name == command) {
            return write_gate(self, view, params.get(*param)?, *format);
        }
        let gate = PROGRAMS.iter().find(|(name, _)| *name == command)?.1;
        gate(self, view, params)
    }
}

/// What the safeguards look at: the project's file and sources.
pub(crate) struct View<'a> {
    pub project_file: Option<&'a Path>,
    pub sources: &'a [Source],
    pub actions: &'a [Action],
    pub publisher: Option<&'a MqttPublisher>,
    pub postgres: Option<&'a PostgresSink>,
}

/// A call that needs a person's yes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Gate {
    /// It adds or changes a source to run these programs.
    RunsPrograms { command_lines: Vec<String> },
    /// It writes this file, outside the user's folders.
    WritesOutside { path: PathBuf },
    /// It replaces this file, which Sextant did not write in the format the command
    /// writes (a Serial Studio project under a project save, say).
    ReplacesForeign { path: PathBuf, format: Format },
    /// It writes into Sextant's own folder (settings, permissions, chats…): never allowed.
    OwnFile { path: PathBuf },
    /// It connects the project: it starts these programs (`programs`, the ones not allowed
    /// for this project file yet) and its actions start these sends by themselves
    /// (`sends`, all of them; `sends_remembered`: the person allowed exactly these for this
    /// project file before).
    Connects {
        programs: Vec<String>,
        sends: Vec<SelfSend>,
        sends_remembered: bool,
    },
}

/// What leaves for a device or the outside world without a click once the project
/// connects: an action's send on connect or timer, or the MQTT publisher's frames.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SelfSend {
    /// What it sends and when, for the question.
    pub outgoing: Outgoing,
    /// What a permission is remembered by: everything that decides what reaches the wire
    /// and when, so any change asks again.
    pub key: String,
}

impl Gate {
    /// What to ask the person, as data a door words in the person's language; `None` for
    /// what no yes allows.
    pub(crate) fn question(&self) -> Option<Question> {
        Some(match self {
            Gate::RunsPrograms { command_lines } => Question::SetsPrograms {
                command_lines: command_lines.clone(),
            },
            Gate::WritesOutside { path } => Question::WritesOutside {
                path: path.display().to_string(),
            },
            Gate::ReplacesForeign { path, format } => Question::ReplacesForeign {
                path: path.display().to_string(),
                format: format.file_format(),
            },
            Gate::OwnFile { .. } => return None,
            Gate::Connects {
                programs, sends, ..
            } => Question::Connects {
                programs: programs.clone(),
                sends: sends.iter().map(|s| s.outgoing.clone()).collect(),
            },
        })
    }

    /// What to ask the person, in English words that say what will happen.
    pub(crate) fn prompt(&self) -> String {
        match self.question() {
            Some(q) => q.english(),
            None => self.refusal(),
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
            Gate::ReplacesForeign { path, format } => format!(
                "refused: {} exists and is not {}; write to a new file, e.g. beside it as {}",
                path.display(),
                format.described(),
                format.example_name()
            ),
            Gate::OwnFile { path } => format!(
                "refused: {} is in Sextant's own folder (its settings, permissions and chats), \
                 where no command may write; choose a file in your own folders",
                path.display()
            ),
            Gate::Connects {
                programs, sends, ..
            } => {
                let mut parts = Vec::new();
                if !programs.is_empty() {
                    parts.push(format!(
                        "this would run {} on this computer; programs run only after a person \
                         says yes in the app, or when the server was started with \
                         --allow-process-sources",
                        quoted(programs)
                    ));
                }
                if !sends.is_empty() {
                    parts.push(format!(
                        "connecting this project sends without a click ({}); \
                         that runs only after a person says yes in the app, or when the server \
                         was started with --allow-device-control",
                        described(sends)
                    ));
                }
                format!("refused: {}", parts.join("; and "))
            }
        }
    }

    /// The tier this call has whatever its command's: a connect that starts sends to a
    /// device is DeviceGated, like a send.
    pub(crate) fn raised_tier(&self) -> Option<Tier> {
        match self {
            Gate::Connects { sends, .. } if !sends.is_empty() => Some(Tier::DeviceGated),
            _ => None,
        }
    }

    /// The tier a door that asks before it calls treats this call as: DeviceGated when it
    /// touches a device (asked every time, and only with "allow device control"), else
    /// AlwaysConfirm (asked every time).
    pub(crate) fn asking_tier(&self) -> Tier {
        self.raised_tier().unwrap_or(Tier::AlwaysConfirm)
    }

    /// Whether the call may run with the consent the caller has: a person's yes to this
    /// very call, or the caller's own settings (a headless server's flags) – and, for sends
    /// a person already allowed for this project file, the click in the app.
    pub(crate) fn allows(&self, policy: &Policy, consent: Consent) -> bool {
        if self.never() {
            return false;
        }
        if consent == Consent::Person {
            return true;
        }
        match self {
            Gate::RunsPrograms { .. } => policy.allow_process_sources,
            Gate::WritesOutside { .. } => policy.paths_from_person,
            // Typing a path is not knowing what is in the file there.
            Gate::ReplacesForeign { .. } => false,
            Gate::OwnFile { .. } => false,
            Gate::Connects {
                programs,
                sends,
                sends_remembered,
            } => {
                let programs_ok = programs.is_empty() || policy.allow_process_sources;
                let headless_consent = policy.non_interactive && policy.allow_device_control;
                let sends_ok = sends.is_empty()
                    || headless_consent
                    || (consent == Consent::Door && *sends_remembered);
                programs_ok && sends_ok
            }
        }
    }

    /// What a person's yes to this call is remembered as, for this project file: the
    /// command lines it started and the sends it allowed.
    pub(crate) fn remembered_by_yes(&self) -> Vec<String> {
        match self {
            Gate::RunsPrograms { command_lines, .. } => command_lines.clone(),
            Gate::Connects {
                programs, sends, ..
            } => programs
                .iter()
                .cloned()
                .chain(sends.iter().map(|s| s.key.clone()))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Whether nobody's yes can allow it.
    pub(crate) fn never(&self) -> bool {
        matches!(self, Gate::OwnFile { .. })
    }

    /// The error a door gets when the call needs a person's yes first.
    pub(crate) fn error(&self, policy: &Policy) -> CommandError {
        match self.question() {
            Some(question) if !policy.non_interactive => CommandError::needs_confirmation(question),
            _ => CommandError::new(ErrorCode::NotAllowed, self.refusal()),
        }
    }
}

fn described(sends: &[SelfSend]) -> String {
    sends
        .iter()
        .map(|s| s.outgoing.english())
        .collect::<Vec<_>>()
        .join("; ")
}

type GateFn = fn(&Safeguards, &View<'_>, &Json) -> Option<Gate>;

/// Every command whose arguments can run a program. With [`WRITES`], a command not listed
/// has neither power.
const PROGRAMS: &[(&str, GateFn)] = &[
    ("project.source.add", source_add),
    ("project.source.update", source_update),
    ("io.connect", connect),
];

/// Every command that writes a file where its caller says, the parameter naming the file,
/// and the one format it may replace without asking.
pub const WRITES: &[(&str, &str, Format)] = &[
    ("project.save", "path", Format::Project),
    ("csvExport.enable", "path", Format::CsvExport),
    ("mcapExport.enable", "path", Format::SessionExport),
    ("sessions.exportCsv", "path", Format::CsvExport),
    ("sessions.export", "path", Format::SessionExport),
    ("sessions.setDatabase", "path", Format::SessionsDatabase),
];

/// The kinds of file Sextant writes for a person, each recognised by its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A Sextant project (its `format` marker).
    Project,
    /// A CSV export of parsed frames (`elapsed_s,…` header).
    CsvExport,
    /// A recorded-sessions database (SQLite with the sessions tables).
    SessionsDatabase,
    /// A session exported for other tools: MCAP or Parquet (their magic bytes).
    SessionExport,
}

impl Format {
    fn file_format(self) -> WrittenFormat {
        match self {
            Format::Project => WrittenFormat::Project,
            Format::CsvExport => WrittenFormat::CsvExport,
            Format::SessionsDatabase => WrittenFormat::SessionsDatabase,
            Format::SessionExport => WrittenFormat::SessionExport,
        }
    }

    fn described(self) -> &'static str {
        self.file_format().english()
    }

    fn example_name(self) -> &'static str {
        match self {
            Format::Project => "NAME.sextant.json",
            Format::CsvExport => "NAME.csv",
            Format::SessionsDatabase => "NAME.sqlite",
            Format::SessionExport => "NAME.mcap",
        }
    }

    /// Whether `path` holds a file of this format. Small reads of regular files only: a
    /// named pipe or a device here must not block the owner task.
    pub fn recognises(self, path: &Path) -> bool {
        // Projects and the headers read here are small; anything huge is not one of ours.
        const LARGEST: u64 = 64 << 20;
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return false;
        };
        if !meta.is_file() {
            return false;
        }
        match self {
            Format::Project => {
                meta.len() <= LARGEST
                    && std::fs::read(path)
                        .ok()
                        .and_then(|bytes| serde_json::from_slice::<Json>(&bytes).ok())
                        .is_some_and(|v| {
                            v.get("format").and_then(Json::as_str) == Some(FORMAT_MARKER)
                        })
            }
            Format::CsvExport => head(path, 16)
                .is_some_and(|h| h.starts_with(sextant_telemetry::csv::TIME_COLUMN.as_bytes())),
            Format::SessionsDatabase => sextant_sessions::is_sessions_database(path),
            Format::SessionExport => head(path, 8).is_some_and(|h| {
                [
                    sextant_export::Format::Mcap,
                    sextant_export::Format::Parquet,
                ]
                .iter()
                .any(|f| f.recognises(&h))
            }),
        }
    }
}

/// The first `n` bytes of a file (fewer if it is shorter).
fn head(path: &Path, n: usize) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::with_capacity(n);
    std::fs::File::open(path)
        .ok()?
        .take(n as u64)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(bytes)
}

/// The one write policy, for every command in [`WRITES`]: Sextant's own folders never,
/// outside the user's folders only with a yes, over an existing file only when it is one
/// Sextant wrote in the command's format, and never through a dangling symbolic link.
fn write_gate(s: &Safeguards, view: &View<'_>, path: &Json, format: Format) -> Option<Gate> {
    let path = PathBuf::from(path.as_str()?);
    if s.own.iter().any(|own| within(&path, own)) {
        return Some(Gate::OwnFile { path });
    }
    let project_folder = view
        .project_file
        .and_then(Path::parent)
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf);
    let mut folders = s.folders.iter().cloned().chain(project_folder);
    if !folders.any(|f| inside(&path, &f)) {
        return Some(Gate::WritesOutside { path });
    }
    // An existing target (a symbolic link counts, dangling or not) must be ours.
    let exists = std::fs::symlink_metadata(&path).is_ok();
    (exists && !format.recognises(&path)).then_some(Gate::ReplacesForeign { path, format })
}

fn source_add(_: &Safeguards, _: &View<'_>, params: &Json) -> Option<Gate> {
    // Parsed leniently: a value that is not a valid connection fails in the handler.
    let connection: Connection =
        serde_json::from_value(params.get("source")?.get("connection")?.clone()).ok()?;
    let line = command_line(&connection)?;
    Some(Gate::RunsPrograms {
        command_lines: vec![line],
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
    let sends = self_sends(view);
    let sends_remembered = sends
        .iter()
        .all(|s| safeguards.trust.allows(view.project_file, &s.key));
    (!untrusted.is_empty() || !sends.is_empty()).then_some(Gate::Connects {
        programs: untrusted,
        sends,
        sends_remembered,
    })
}

/// The actions that send to a device by themselves once the project connects. A replay or
/// the simulator is no device: nothing is sent to them (see `commands::io::connect_project`).
fn self_sends(view: &View<'_>) -> Vec<SelfSend> {
    view.actions
        .iter()
        .filter(|a| a.sends_by_itself())
        .filter_map(|a| {
            let source = match a.source.as_deref() {
                None => view.sources.first()?,
                Some(id) => view.sources.iter().find(|s| s.id == id)?,
            };
            if matches!(
                source.connection,
                Connection::Replay { .. } | Connection::Simulator(_)
            ) {
                return None;
            }
            Some(self_send(a, source))
        })
        .chain(view.publisher.filter(|p| p.enabled).map(publishes))
        .chain(view.postgres.filter(|p| p.enabled).map(writes_to_postgres))
        .collect()
}

/// The MQTT publisher: every frame leaves the computer for a broker from the connection on.
fn publishes(p: &MqttPublisher) -> SelfSend {
    let scheme = if p.tls { "mqtts" } else { "mqtt" };
    let key = json!({
        "publisher": {"host": p.host, "port": p.port, "tls": p.tls, "topic": p.topic,
                      "format": p.format, "username": p.username},
    });
    SelfSend {
        outgoing: Outgoing::Publisher {
            url: format!("{scheme}://{}:{}", clipped(&p.host, 64), p.port),
            topic: clipped(&p.topic, 64),
            rate_hz: p.rate_hz,
        },
        key: format!("\u{0}sends {key}"),
    }
}

/// The PostgreSQL sink: every value leaves the computer for a database from the connection on.
fn writes_to_postgres(p: &PostgresSink) -> SelfSend {
    let scheme = if p.tls {
        "postgresql+tls"
    } else {
        "postgresql"
    };
    let key = json!({
        "postgres": {"host": p.host, "port": p.port, "tls": p.tls, "database": p.database,
                     "user": p.user, "table": p.table},
    });
    SelfSend {
        outgoing: Outgoing::Postgres {
            url: format!(
                "{scheme}://{}@{}:{}/{}",
                clipped(&p.user, 32),
                clipped(&p.host, 64),
                p.port,
                clipped(&p.database, 32)
            ),
            table: clipped(&p.table, 64),
        },
        key: format!("\u{0}sends {key}"),
    }
}

fn self_send(action: &Action, source: &Source) -> SelfSend {
    let every = action
        .timer_ms
        .filter(|_| action.polls_while_connected())
        .map(|ms| ms.max(Action::MIN_TIMER_MS));
    let payload = if action.hex {
        clipped(action.payload.trim(), 48)
    } else {
        clipped(&action.payload.escape_debug().to_string(), 48)
    };
    let line_ending = match action.line_ending {
        LineEnding::None => "none",
        LineEnding::Lf => "lf",
        LineEnding::Cr => "cr",
        LineEnding::CrLf => "crLf",
    };
    let key = json!({
        "source": source.id,
        "connection": source.connection,
        "payload": action.payload,
        "hex": action.hex,
        "lineEnding": action.line_ending,
        "onConnect": action.on_connect,
        "everyMs": every,
    });
    SelfSend {
        outgoing: Outgoing::Action {
            title: clipped(action.title.trim(), 48),
            payload,
            hex: action.hex,
            line_ending: line_ending.into(),
            on_connect: action.on_connect,
            every_ms: every,
            to: clipped(source.title.trim(), 48),
        },
        // Starts with a NUL, which no command line does (a program's name is never empty
        // and would be quoted): a send's permission can never pass for a program's.
        key: format!("\u{0}sends {key}"),
    }
}

fn clipped(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
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

/// Whether `path` is `folder` or anything under it, symbolic links and `..` resolved.
fn within(path: &Path, folder: &Path) -> bool {
    match (resolve(path), folder.canonicalize()) {
        (Some(path), Ok(folder)) => path.starts_with(folder),
        (Some(path), Err(_)) => path.starts_with(folder),
        // Unresolvable: the other rules refuse it as outside the user's folders.
        (None, _) => false,
    }
}

/// `path` made absolute with every existing part canonical; `None` when the part that does
/// not exist yet climbs with `..` (it could land anywhere once created) or is a dangling
/// symbolic link (it writes wherever the link points once followed).
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
        ) || std::fs::symlink_metadata(existing).is_ok()
        {
            // `..`, or a link canonicalize could not follow: a dangling symbolic link.
            return None;
        }
        missing.push(name.to_os_string());
        existing = existing.parent()?;
    }
}

/// Program command lines a person allowed, per project file, kept in the user's data
/// folder (`trusted-programs.json`), never in the project. An unsaved project's permissions
/// last until the app stops.
///
/// The file is bound to this install: it carries an HMAC-SHA256 of its contents under a
/// key only this install has (`install.key` beside it, readable by the owner only), and it
/// refuses unknown keys. A file anyone else wrote – another program, an older version, a
/// document shaped like it – is moved aside and nothing is allowed by it.
#[derive(Clone, Default)]
pub struct TrustStore {
    inner: Arc<Mutex<TrustInner>>,
}

#[derive(Default)]
struct TrustInner {
    file: Option<PathBuf>,
    key: Vec<u8>,
    allowed: BTreeSet<(String, String)>,
}

/// The file as stored: the permissions and their seal.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    schema: u32,
    programs: Vec<TrustedProgram>,
    /// HMAC-SHA256 (hex) of `schema` and `programs` as JSON, under the install key.
    mac: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustedProgram {
    project: String,
    command: String,
}

/// The file name of the program permissions in the user's data folder.
pub const TRUST_FILE: &str = "trusted-programs.json";
/// The file name of the install's own key, beside [`TRUST_FILE`].
pub const INSTALL_KEY_FILE: &str = "install.key";
/// The version of [`TRUST_FILE`] this build writes; 1 had no seal and is refused.
const TRUST_SCHEMA: u32 = 2;

impl TrustStore {
    /// Permissions that last until the app stops.
    pub fn in_memory() -> TrustStore {
        TrustStore::default()
    }

    /// The permissions kept in `path` (created on the first yes), sealed with the install
    /// key beside it (created on first use). A damaged or foreign file is moved aside
    /// (`….json.refused`) and the store starts empty: nothing is allowed by accident.
    pub fn open(path: PathBuf) -> TrustStore {
        let key = match path.parent().map(install_key) {
            Some(Ok(key)) => key,
            Some(Err(e)) => {
                // Without a key nothing can be sealed or trusted: permissions last until the
                // app stops, and nothing on disk is believed.
                tracing::warn!("could not read or create the install key: {e}");
                return TrustStore::in_memory();
            }
            None => return TrustStore::in_memory(),
        };
        let mut allowed = BTreeSet::new();
        match std::fs::read(&path) {
            Ok(bytes) => match unseal(&key, &bytes) {
                Some(programs) => {
                    allowed.extend(programs.into_iter().map(|p| (p.project, p.command)))
                }
                None => {
                    let aside = path.with_extension("json.refused");
                    tracing::warn!(
                        "{} is damaged or was not written by this install; moved to {} and \
                         starting with no program allowed",
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
                key,
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
        let programs: Vec<TrustedProgram> = inner
            .allowed
            .iter()
            .filter(|(p, _)| !p.is_empty())
            .map(|(project, command)| TrustedProgram {
                project: project.clone(),
                command: command.clone(),
            })
            .collect();
        let mac = seal(&inner.key, &programs);
        let bytes = serde_json::to_vec_pretty(&TrustFile {
            schema: TRUST_SCHEMA,
            programs,
            mac,
        })
        .map_err(|e| e.to_string())?;
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        sextant_fsutil::write_atomic(&file, &bytes).map_err(|e| e.to_string())
    }
}

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The seal of a list of permissions: HMAC-SHA256 of the list as JSON, in hex.
fn seal(key: &[u8], programs: &[TrustedProgram]) -> String {
    use hmac::Mac;
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(&TRUST_SCHEMA.to_le_bytes());
    mac.update(&serde_json::to_vec(programs).unwrap_or_default());
    hex(&mac.finalize().into_bytes())
}

/// The permissions in a file, if this install sealed them (compared in constant time).
fn unseal(key: &[u8], bytes: &[u8]) -> Option<Vec<TrustedProgram>> {
    use hmac::Mac;
    let file: TrustFile = serde_json::from_slice(bytes).ok()?;
    if file.schema != TRUST_SCHEMA {
        return None;
    }
    let given = unhex(&file.mac)?;
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(&TRUST_SCHEMA.to_le_bytes());
    mac.update(&serde_json::to_vec(&file.programs).ok()?);
    mac.verify_slice(&given).ok()?;
    Some(file.programs)
}

/// This install's key, in `dir/install.key` (owner-only), made on first use.
fn install_key(dir: &Path) -> std::io::Result<Vec<u8>> {
    let path = dir.join(INSTALL_KEY_FILE);
    let read = |path: &Path| -> std::io::Result<Option<Vec<u8>>> {
        match std::fs::read_to_string(path) {
            Ok(text) => unhex(text.trim()).filter(|k| k.len() == 32).map(Some).ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{} is damaged; remove it (the program permissions are then asked again)", path.display()),
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    };
    if let Some(key) = read(&path)? {
        return Ok(key);
    }
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|e| std::io::Error::other(e.to_string()))?;
    std::fs::create_dir_all(dir)?;
    let options = sextant_fsutil::Options {
        private: true,
        no_replace: true,
    };
    match sextant_fsutil::write_atomic_with(&path, hex(&key).as_bytes(), options) {
        Ok(()) => Ok(key.to_vec()),
        // Another process made it first: theirs is the key.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            read(&path)?.ok_or_else(|| std::io::Error::other("the install key vanished"))
        }
        Err(e) => Err(e),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// A project file as the permissions name it: canonical when it exists, so two spellings
/// of one file share them; empty for an unsaved project.
pub(crate) fn project_key(project_file: Option<&Path>) -> String {
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
            actions: &[],
            publisher: None,
            postgres: None,
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
    fn only_actions_that_send_without_a_click_to_a_device_gate_a_connect() {
        let sources: Vec<Source> = serde_json::from_value(json!([
            {"id": "dev", "connection": {"type": "tcp", "host": "127.0.0.1", "port": 9}},
            {"id": "sim", "connection": {"type": "simulator"}},
            {"id": "rec", "connection": {"type": "replay", "path": "capture.bin"}},
        ]))
        .unwrap();
        // (action, whether connecting sends it by itself)
        let cases = [
            (json!({"payload": "X", "onConnect": true}), true),
            (json!({"payload": "X", "timerMs": 100}), true),
            (
                json!({"payload": "X", "timerMs": 100, "timer": "whileConnected"}),
                true,
            ),
            (
                json!({"payload": "X", "timerMs": 100, "timer": "startOnClick"}),
                false,
            ),
            (
                json!({"payload": "X", "timerMs": 100, "timer": "toggleOnClick"}),
                false,
            ),
            (
                json!({"payload": "X", "timerMs": 100, "timer": "repeat"}),
                false,
            ),
            (json!({"payload": "X", "timer": "whileConnected"}), false),
            (json!({"payload": "X"}), false),
            (
                json!({"payload": "X", "onConnect": true, "source": "dev"}),
                true,
            ),
            (
                json!({"payload": "X", "onConnect": true, "source": "sim"}),
                false,
            ),
            (
                json!({"payload": "X", "timerMs": 100, "source": "rec"}),
                false,
            ),
            // An action naming no source that exists sends nowhere.
            (
                json!({"payload": "X", "onConnect": true, "source": "gone"}),
                false,
            ),
        ];
        for (action, sends) in &cases {
            let actions = vec![serde_json::from_value::<Action>(action.clone()).unwrap()];
            let view = View {
                project_file: None,
                sources: &sources,
                actions: &actions,
                publisher: None,
                postgres: None,
            };
            let gate = Safeguards::default().assess(&view, "io.connect", &json!({}));
            assert_eq!(
                gate.as_ref().and_then(Gate::raised_tier),
                sends.then_some(Tier::DeviceGated),
                "{action}"
            );
        }
        // The MQTT publisher sends every frame out once enabled, whatever the actions.
        for (enabled, sends) in [(true, true), (false, false)] {
            let publisher = MqttPublisher {
                enabled,
                host: "broker.example".into(),
                ..MqttPublisher::default()
            };
            let view = View {
                project_file: None,
                sources: &sources,
                actions: &[],
                publisher: Some(&publisher),
                postgres: None,
            };
            let gate = Safeguards::default().assess(&view, "io.connect", &json!({}));
            assert_eq!(gate.is_some(), sends, "publisher enabled: {enabled}");
            if let Some(gate) = gate {
                assert!(gate.prompt().contains("mqtt://broker.example:1883"));
                assert_eq!(gate.raised_tier(), Some(Tier::DeviceGated));
            }
        }
        // So does the PostgreSQL sink, naming the server, the database and the table.
        for (enabled, sends) in [(true, true), (false, false)] {
            let postgres = PostgresSink {
                enabled,
                host: "db.example".into(),
                table: "lab.samples".into(),
                ..PostgresSink::default()
            };
            let view = View {
                project_file: None,
                sources: &sources,
                actions: &[],
                publisher: None,
                postgres: Some(&postgres),
            };
            let gate = Safeguards::default().assess(&view, "io.connect", &json!({}));
            assert_eq!(gate.is_some(), sends, "postgres enabled: {enabled}");
            if let Some(gate) = gate {
                let prompt = gate.prompt();
                assert!(
                    prompt.contains("postgresql://postgres@db.example:5432/postgres"),
                    "{prompt}"
                );
                assert!(prompt.contains("“lab.samples”"), "{prompt}");
                assert_eq!(gate.raised_tier(), Some(Tier::DeviceGated));
            }
        }
    }

    #[test]
    fn a_yes_to_sends_is_remembered_for_exactly_those_sends_and_allows_no_program() {
        let s = Safeguards::default();
        let sources: Vec<Source> = serde_json::from_value(json!([
            {"id": "dev", "connection": {"type": "tcp", "host": "127.0.0.1", "port": 9}},
        ]))
        .unwrap();
        let wake: Action =
            serde_json::from_value(json!({"title": "Wake", "payload": "W", "onConnect": true}))
                .unwrap();
        let gate_for = |actions: &[Action]| {
            let view = View {
                project_file: None,
                sources: &sources,
                actions,
                publisher: None,
                postgres: None,
            };
            s.assess(&view, "io.connect", &json!({})).unwrap()
        };
        let first = gate_for(std::slice::from_ref(&wake));
        let Gate::Connects {
            sends_remembered, ..
        } = &first
        else {
            panic!("{first:?}");
        };
        assert!(!sends_remembered);
        // A click in the app is not enough the first time; a headless flag is.
        assert!(!first.allows(&crate::UI_POLICY, Consent::Door));
        let headless = Policy {
            non_interactive: true,
            allow_device_control: true,
            ..Policy::default()
        };
        assert!(first.allows(&headless, Consent::None));
        s.trust().allow(None, &first.remembered_by_yes()).unwrap();
        let again = gate_for(std::slice::from_ref(&wake));
        assert!(again.allows(&crate::UI_POLICY, Consent::Door));
        assert!(
            !again.allows(&crate::UI_POLICY, Consent::None),
            "remembered for the person's click, not for a caller nobody asked"
        );
        for change in [
            json!({"payload": "ERASE"}),
            json!({"hex": true, "payload": "FF"}),
            json!({"lineEnding": "crLf"}),
            json!({"timerMs": 10}),
        ] {
            let mut changed = serde_json::to_value(&wake).unwrap();
            changed
                .as_object_mut()
                .unwrap()
                .extend(change.as_object().unwrap().clone());
            let changed: Action = serde_json::from_value(changed).unwrap();
            let gate = gate_for(&[changed]);
            assert!(!gate.allows(&crate::UI_POLICY, Consent::Door), "{change}");
        }
        // The remembered send cannot pass for a program's command line.
        // No program's command line can be a remembered send, not even a program named
        // after one.
        for key in first.remembered_by_yes() {
            assert_ne!(command_line(&process(&key, &[])).unwrap(), key);
            assert_ne!(command_line(&process("sh", &[&key])).unwrap(), key);
        }
    }

    /// Every command that takes a file `path` says here whether it writes it – then the one
    /// write policy judges it ([`WRITES`]) – or only reads it. A new command with a path
    /// fails this test until it is put in one of the two tables, so none writes unjudged.
    #[test]
    fn every_command_that_takes_a_path_writes_under_the_policy_or_only_reads() {
        const READS: &[&str] = &["csvPlayer.open", "project.import", "project.open"];
        let registry = crate::commands::registry();
        let mut with_path: Vec<&str> = registry
            .specs()
            .filter(|s| s.params_schema["properties"].get("path").is_some())
            .map(|s| s.name.as_str())
            .collect();
        with_path.sort();
        let mut known: Vec<&str> = WRITES
            .iter()
            .map(|(name, ..)| *name)
            .chain(READS.iter().copied())
            .collect();
        known.sort();
        assert_eq!(with_path, known);
        assert!(WRITES.iter().all(|(_, param, _)| *param == "path"));
    }

    #[test]
    fn saving_over_a_file_sextant_did_not_write_is_gated() {
        let dir = tempfile::tempdir().unwrap();
        let s = Safeguards::new(vec![dir.path().to_path_buf()], TrustStore::in_memory());
        let view = View {
            project_file: None,
            sources: &[],
            actions: &[],
            publisher: None,
            postgres: None,
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
                Some(Gate::ReplacesForeign {
                    path: imported,
                    format: Format::Project,
                }),
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
        assert!(file.with_extension("json.refused").exists());
    }

    #[test]
    fn a_trust_file_this_install_did_not_seal_allows_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(TRUST_FILE);
        let project = dir.path().join("rig.json");
        std::fs::write(&project, "{}").unwrap();
        TrustStore::open(file.clone())
            .allow(Some(&project), &["python3 rig.py".into()])
            .unwrap();
        let sealed = std::fs::read_to_string(&file).unwrap();
        let key = project_key(Some(&project));
        let forged_line = sealed.replace("python3 rig.py", "/bin/sh -c id");
        let unsealed = format!(
            r#"{{"schema":1,"programs":[{{"project":{key:?},"command":"/bin/sh -c id"}}]}}"#
        );
        let extra_key = sealed.replacen('{', r#"{"note": "x","#, 1);
        let other_dir = tempfile::tempdir().unwrap();
        TrustStore::open(other_dir.path().join(TRUST_FILE))
            .allow(Some(&project), &["/bin/sh -c id".into()])
            .unwrap();
        let other_install = std::fs::read_to_string(other_dir.path().join(TRUST_FILE)).unwrap();
        let cases = [
            ("a line changed by hand", forged_line),
            ("the unsealed format of older versions", unsealed),
            ("an unknown key", extra_key),
            ("another install's file", other_install),
        ];
        for (what, text) in cases {
            std::fs::write(&file, text).unwrap();
            let store = TrustStore::open(file.clone());
            assert!(!store.allows(Some(&project), "/bin/sh -c id"), "{what}");
            assert!(!store.allows(Some(&project), "python3 rig.py"), "{what}");
            assert!(!file.exists(), "{what}: moved aside");
        }
        std::fs::write(&file, sealed).unwrap();
        assert!(TrustStore::open(file).allows(Some(&project), "python3 rig.py"));
    }
}
