//! The Sextant desktop app: a thin Tauri shell.
//!
//! Everything the UI does is a registry command (`call`) run by the runtime, exactly as
//! from `sextant serve`; live data reaches the UI as binary display frames over a
//! `tauri::ipc::Channel`, one per display tick, read straight from the runtime's display
//! scope (never through the command queue, so a busy runtime cannot stall the dashboard).
//! The ticks are `sextant_display::Scope::stream`, the loop `sextant serve` runs too: one
//! per page, its options through a `watch` channel, its frames through a queue of
//! `FRAMES_IN_FLIGHT` that a task drains into the page's newest `Channel`, so a busy page
//! skips ticks instead of piling frames up.
//! The assistant's chat panel talks to the same [`ChatDoor`] as `sextant serve` does
//! (`chat`, `subscribe_chat`). No business logic lives here: only startup, window plumbing
//! and the commands in `main`'s handler list – besides those above, `source_credentials`
//! (the person's door to the sources' secrets) and `first_frame_drawn` (only logs how long
//! start-up took).
//!
//! `sextant-desktop [PROJECT] [--connect]`: with no project it opens the demo device (the
//! sample project, connected), so a first run without hardware shows moving data.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sextant_assistant::door::ChatDoor;
use sextant_display::{DisplayOptions, FRAMES_IN_FLIGHT};
use sextant_runtime::{CredentialVault, Runtime, RuntimeHandle, Safeguards, TrustStore, Workspace};
use tauri::ipc::{Channel, InvokeResponseBody};
use tauri::webview::PageLoadEvent;
use tauri::{Manager, State, Webview};
use tauri_plugin_window_state::StateFlags;
use tokio::sync::{mpsc, watch};

/// mimalloc, as in every binary (see the heap crate's module doc). It serves Rust's
/// allocations only: the webview and its libraries keep the system's malloc.
#[global_allocator]
static ALLOCATOR: sextant_runtime::heap::Allocator = sextant_runtime::heap::Allocator;

/// Tasks that belong to a page: at most one per page and [`Stream`]; a new one replaces
/// (and stops) the one before, and a page that loads again stops all of its own.
struct PageTasks<T: Abort> {
    tasks: HashMap<(String, Stream), T>,
}

/// A task that can be stopped from outside.
trait Abort {
    fn abort(&self);
}

impl Abort for tauri::async_runtime::JoinHandle<()> {
    fn abort(&self) {
        tauri::async_runtime::JoinHandle::abort(self)
    }
}

impl<T: Abort> PageTasks<T> {
    fn new() -> Self {
        PageTasks {
            tasks: HashMap::new(),
        }
    }

    fn replace(&mut self, page: &str, stream: Stream, task: T) {
        if let Some(old) = self.tasks.insert((page.to_owned(), stream), task) {
            old.abort();
        }
    }

    fn page_loading(&mut self, page: &str) {
        self.tasks.retain(|(label, _), task| {
            let keep = label != page;
            if !keep {
                task.abort();
            }
            keep
        });
    }
}

/// The desktop log file's size at most (then it is rotated, one earlier file kept).
const LOG_FILE_BYTES: u128 = 1024 * 1024;

/// What a forwarder forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Stream {
    Events,
    Chat,
}

struct Shell {
    runtime: RuntimeHandle,
    next_display: AtomicU32,
    /// The display of each page, by webview label.
    displays: Mutex<HashMap<String, PageDisplay>>,
    /// The event forwarders of each page, by webview label and what they forward. Tauri
    /// keeps a page's channels open while its webview lives, so a forwarder of a page that
    /// reloaded would run (and hold its subscription) for ever: a page's are stopped when it
    /// loads again or subscribes again, so there is at most one of each per page.
    forwarders: Mutex<PageTasks<tauri::async_runtime::JoinHandle<()>>>,
    /// The assistant, opened off the start path (its keyring probe can take seconds when
    /// the keyring is slow or locked): the first chat request waits for it. An error when
    /// its folder could not be opened (logged, and returned to every chat request; the rest
    /// of the app works without it).
    chat: tokio::sync::OnceCell<Result<Arc<ChatDoor>, sextant_commands::CommandError>>,
    /// Where the assistant keeps its data.
    chat_dir: Result<PathBuf, String>,
    /// Becomes true when start-up is over: the page has drawn a device's data, or
    /// [`SHOW_WINDOW_AT_THE_LATEST`] has passed. The assistant (and its keyring probe, which
    /// D-Bus may answer by starting a keyring daemon) waits for it, so it never competes
    /// with the page for the cores while the person waits for the first picture.
    started: watch::Sender<bool>,
}

impl Shell {
    /// Runs `forwarder` as `webview`'s one forwarder of `stream`, stopping the one before.
    fn forward_for(
        &self,
        webview: &Webview,
        stream: Stream,
        forwarder: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let task = tauri::async_runtime::spawn(forwarder);
        lock(&self.forwarders).replace(webview.label(), stream, task);
    }
    /// The assistant, opening it (on a blocking thread) if no one has yet – once start-up
    /// is over.
    async fn chat(&self) -> Result<Arc<ChatDoor>, sextant_commands::CommandError> {
        // Only a dropped sender ends the wait otherwise, and the shell owns it.
        let _ = self.started.subscribe().wait_for(|started| *started).await;
        let opened = self.chat.get_or_init(|| async {
            let began = Instant::now();
            let dir = self.chat_dir.clone();
            let runtime = self.runtime.clone();
            let opened = tauri::async_runtime::spawn_blocking(move || {
                let dir = dir.map_err(|e| {
                    sextant_commands::CommandError::failed(format!("no data folder: {e}"))
                })?;
                ChatDoor::open(&dir.join("assistant"), runtime).map(Arc::new)
            })
            .await
            .unwrap_or_else(|e| {
                Err(sextant_commands::CommandError::failed(format!(
                    "the assistant could not start: {e}"
                )))
            });
            match &opened {
                Ok(_) => log::info!("the assistant opened in {} ms", began.elapsed().as_millis()),
                Err(e) => log::error!("the assistant is unavailable: {}", e.message),
            }
            opened
        });
        opened.await.clone()
    }
}

/// One request of the chat panel (`docs/ui-protocol.md`, "The assistant's chats").
#[tauri::command]
async fn chat(
    shell: State<'_, Shell>,
    request: Value,
) -> Result<Value, sextant_commands::CommandError> {
    let door = shell.chat().await?;
    door.handle(request).await
}

/// The sources' passwords and certificates (`docs/ui-protocol.md`, "Source credentials"):
/// only this window's person reaches them, never the assistant. Answers which parts are
/// saved, never a value.
#[tauri::command]
async fn source_credentials(
    shell: State<'_, Shell>,
    request: Value,
) -> Result<Value, sextant_commands::CommandError> {
    let request = serde_json::from_value(request)
        .map_err(|e| sextant_commands::CommandError::invalid("", e.to_string()))?;
    let status = shell.runtime.credentials(request).await?;
    Ok(serde_json::to_value(status).unwrap_or_default())
}

/// The window starts hidden and shows once its page has loaded. Shown before, it asks
/// WebKit to paint a page whose process is still busy loading it: without compositing
/// (no GPU), WebKit then blocks the app's main thread for up to half a second waiting for
/// a first picture (`forceUpdateIfNeeded`), and the page's own requests to the app wait
/// with it – half a second added to about half the launches measured.
fn show_window(window: &tauri::Window) {
    if !window.is_visible().unwrap_or(true) {
        let _ = window.show();
        let _ = window.set_focus();
    }
}

/// However the page fares, the window shows by then – a page that never finishes loading
/// (a broken build, a hung resource) still gets a window to say so in – and start-up counts
/// as over (`Shell::started`) even when no device's data was drawn.
const SHOW_WINDOW_AT_THE_LATEST: Duration = Duration::from_secs(3);

/// When `main` began: what start-up is measured from.
static LAUNCHED: OnceLock<Instant> = OnceLock::new();

/// The page drew its first frame with a device's data. Logged once per run, with the time
/// since the app started: start-up measured from the log, with nothing attached to the
/// window (a WebDriver session decides itself when the page starts loading).
/// `page_ms`: how long the page had been loading by then (its `performance.now()`), which
/// splits the time between the app's start and the page's own.
#[tauri::command]
fn first_frame_drawn(shell: State<'_, Shell>, page_ms: Option<f64>) {
    shell.started.send_replace(true);
    static LOGGED: AtomicBool = AtomicBool::new(false);
    if let Some(launched) = LAUNCHED.get() {
        if !LOGGED.swap(true, Ordering::Relaxed) {
            let page = page_ms
                .filter(|ms| ms.is_finite() && *ms >= 0.0)
                .map(|ms| format!(" (the page's part: {ms:.0} ms)"))
                .unwrap_or_default();
            log::info!(
                "the first frame with device data was drawn {} ms after the app started{page}",
                launched.elapsed().as_millis()
            );
        }
    }
}

/// Forwards every chat's events to `channel`.
#[tauri::command]
async fn subscribe_chat(
    shell: State<'_, Shell>,
    webview: Webview,
    channel: Channel<Value>,
) -> Result<(), sextant_commands::CommandError> {
    let events = shell.chat().await?.service().subscribe();
    // Nothing is lost from the log, but a page that missed events (maybe a prompt or a
    // turn's end) re-reads what it shows on `resync`.
    let resync = json!({"chat": -1, "type": "resync"});
    shell.forward_for(
        &webview,
        Stream::Chat,
        forward(events, channel, Some(resync)),
    );
    Ok(())
}

/// Runs a registry command for the UI. `approved`: the person confirmed a destructive step.
#[tauri::command]
async fn call(
    shell: State<'_, Shell>,
    command: String,
    params: Option<Value>,
    approved: Option<bool>,
) -> Result<Value, sextant_commands::CommandError> {
    shell
        .runtime
        .call_from_ui(
            &command,
            params.unwrap_or(json!({})),
            approved.unwrap_or(false),
        )
        .await
}

/// One page's display: one [`Scope::stream`](sextant_display::Scope::stream) (so one
/// subscriber: new options never replay the console) for as long as the page lives. The UI
/// asks for new options with a new `display` call and a new `Channel`, then stops the old
/// subscription: the call sends the options through the watch channel and points the
/// drain at the new `Channel`; only a stop of the newest subscription stops the ticks.
struct PageDisplay {
    /// The subscription `display` returned last.
    id: u32,
    options: watch::Sender<Option<DisplayOptions>>,
    /// Where the drain sends frames: the page's newest `Channel`.
    channel: Arc<Mutex<Channel<InvokeResponseBody>>>,
}

impl PageDisplay {
    /// A new loop sending into `channel`. Dropping the `PageDisplay` ends it (its options'
    /// sender goes), and so its drain (the queue's sender goes).
    fn start(
        scope: sextant_display::Scope,
        id: u32,
        channel: Channel<InvokeResponseBody>,
        options: DisplayOptions,
    ) -> PageDisplay {
        let (options_tx, options_rx) = watch::channel(Some(options));
        let (frames_tx, mut frames_rx) = mpsc::channel::<Vec<u8>>(FRAMES_IN_FLIGHT);
        let channel = Arc::new(Mutex::new(channel));
        tauri::async_runtime::spawn(scope.stream(options_rx, frames_tx));
        let target = channel.clone();
        tauri::async_runtime::spawn(async move {
            while let Some(frame) = frames_rx.recv().await {
                let channel = lock(&target).clone();
                if channel.send(InvokeResponseBody::Raw(frame)).is_err() {
                    return; // the page went away: the loop ends with the queue
                }
            }
        });
        PageDisplay {
            id,
            options: options_tx,
            channel,
        }
    }

    /// Whether its loop still runs (it ends when the page's `Channel` fails).
    fn running(&self) -> bool {
        !self.options.is_closed()
    }
}

/// Sends display frames to `channel` with `options`; returns an id for `display_stop`.
/// From a page that has a display already, this changes its options and channel.
#[tauri::command]
fn display(
    shell: State<'_, Shell>,
    webview: Webview,
    channel: Channel<InvokeResponseBody>,
    options: DisplayOptions,
) -> Result<u32, String> {
    options.validate()?;
    let id = shell.next_display.fetch_add(1, Ordering::Relaxed);
    let mut displays = lock(&shell.displays);
    match displays.get_mut(webview.label()) {
        Some(page) if page.running() => {
            *lock(&page.channel) = channel;
            page.id = id;
            page.options.send_replace(Some(options));
        }
        _ => {
            let scope = shell.runtime.scope().clone();
            let page = PageDisplay::start(scope, id, channel, options);
            displays.insert(webview.label().to_string(), page);
        }
    }
    Ok(id)
}

/// Stops the display frames of subscription `id`, keeping the page's place (a later
/// `display` goes on where it stopped); a stop of an older subscription changes nothing.
#[tauri::command]
fn display_stop(shell: State<'_, Shell>, webview: Webview, id: u32) {
    if let Some(page) = lock(&shell.displays).get(webview.label()) {
        if page.id == id {
            page.options.send_replace(None);
        }
    }
}

/// A page (re)loading in `webview` has nothing of the old page's display: end its loop, so
/// the new page's first `display` starts afresh (dataset list and console included).
fn page_loading(webview: &Webview, shell: &Shell) {
    lock(&shell.displays).remove(webview.label());
    lock(&shell.forwarders).page_loading(webview.label());
}

/// Forwards project and connection events to `channel` as JSON.
#[tauri::command]
fn subscribe_events(shell: State<'_, Shell>, webview: Webview, channel: Channel<Value>) {
    let events = shell.runtime.subscribe();
    // Project events say what changed, and the UI re-reads on the next one: a gap is fine.
    shell.forward_for(&webview, Stream::Events, forward(events, channel, None));
}

/// Sends each event to `channel` as JSON until the page goes away; after falling behind,
/// sends `on_lag` (if any) so the page knows it missed some.
async fn forward<T: Clone + serde::Serialize>(
    mut events: tokio::sync::broadcast::Receiver<T>,
    channel: Channel<Value>,
    on_lag: Option<Value>,
) {
    loop {
        let value = match events.recv().await {
            Ok(e) => match serde_json::to_value(&e) {
                Ok(value) => value,
                Err(_) => continue,
            },
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => match &on_lag {
                Some(notice) => notice.clone(),
                None => continue,
            },
            Err(_) => return,
        };
        if channel.send(value).is_err() {
            return;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

struct Args {
    project: Option<PathBuf>,
    connect: bool,
}

fn parse_args(argv: impl IntoIterator<Item = String>) -> Args {
    let mut args = Args {
        project: None,
        connect: false,
    };
    for a in argv {
        match a.as_str() {
            "--connect" => args.connect = true,
            // Anything else that names a file is the project (the OS passes one on open).
            _ if !a.starts_with('-') && args.project.is_none() => {
                args.project = Some(PathBuf::from(a))
            }
            _ => log::warn!("ignoring argument {a:?}"),
        }
    }
    args
}

/// Opens `path` (a Sextant or Serial Studio project) as the person would from the UI.
async fn open_project(runtime: &RuntimeHandle, path: &Path) {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if let Err(e) = runtime
        .call_from_ui("project.open", json!({ "path": path }), false)
        .await
    {
        log::error!("could not open {}: {}", path.display(), e.message);
    }
}

/// WebKitGTK turns a `C`/`POSIX` locale into `navigator.language = "C"`, which is not a
/// language tag: `Intl` (and so the plot library) throws and the page stays blank. Such a
/// locale means "no preference", so say English.
fn fix_unusable_locale() {
    let usable = |v: &str| !(v.is_empty() || v == "C" || v.starts_with("C.") || v == "POSIX");
    let locale = ["LC_ALL", "LC_MESSAGES", "LANG"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()));
    if !locale.as_deref().is_some_and(usable) {
        // Before any thread exists (the first line of main), so no one reads it concurrently.
        std::env::set_var("LANGUAGE", "en_US");
        std::env::set_var("LC_ALL", "en_US.UTF-8");
    }
}

/// WebKitGTK composites the page with OpenGL. Without a GPU to run it on – no DRM render
/// node: a virtual machine, a remote desktop, a machine whose driver is missing – Mesa
/// runs that OpenGL in software, and a dashboard of sixteen live plots drew 6 frames/s
/// where WebKit's own non-composited drawing managed 30 (`./dev bench-ui --webview`). So
/// without a render node, compositing is off, unless the person chose otherwise by
/// setting the variable themselves.
///
/// GTK, for its part, opens OpenGL as it opens the display, to choose the window's visual
/// for GL drawing, which nothing here does: without a GPU that loads Mesa's software
/// driver and LLVM, about a fifth of a second before the page can start loading. So
/// without a render node GTK's OpenGL is off too, under the same rule.
fn software_drawing_without_a_gpu() {
    let gpu = has_render_node(Path::new("/dev/dri"));
    for (name, value) in software_drawing(gpu, |name| std::env::var_os(name).is_some()) {
        // Before any thread exists (the start of main), so no one reads it concurrently.
        std::env::set_var(name, value);
    }
}

/// The variables to set: none with a GPU; without one, those the person has not set.
fn software_drawing(gpu: bool, is_set: impl Fn(&str) -> bool) -> Vec<(&'static str, &'static str)> {
    if gpu {
        return Vec::new();
    }
    [(NO_COMPOSITING, "1"), (GTK_GL, "disable")]
        .into_iter()
        .filter(|(name, _)| !is_set(name))
        .collect()
}

const NO_COMPOSITING: &str = "WEBKIT_DISABLE_COMPOSITING_MODE";
const GTK_GL: &str = "GDK_GL";

/// Whether `dir` (the kernel's DRM device folder) has a render node: a GPU that OpenGL
/// can run on.
fn has_render_node(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("renderD"))
    })
}

/// The folders files may be written in without asking (Documents, Downloads, Desktop; the
/// open project's folder always), Sextant's own folder (the app data folder: settings,
/// permissions, chats), which no command writes in, and the programs the person allowed,
/// kept there.
fn safeguards<R: tauri::Runtime>(paths: &tauri::path::PathResolver<R>) -> Safeguards {
    let data = paths.app_data_dir().ok();
    let folders = [
        paths.document_dir().ok(),
        paths.download_dir().ok(),
        paths.desktop_dir().ok(),
    ];
    let trust = match &data {
        Some(dir) => TrustStore::open(dir.join(sextant_runtime::safeguards::TRUST_FILE)),
        None => TrustStore::in_memory(),
    };
    Safeguards::new(folders.into_iter().flatten().collect(), trust)
        .with_own_folders(data.into_iter().collect())
}

const USAGE: &str = "\
Sextant – live telemetry from your hardware, with an assistant.

Usage: sextant-desktop [PROJECT] [--connect]

  PROJECT     a Sextant project (.json) or a Serial Studio project (.ssproj) to open
  --connect   connect its devices once it is open
  --help      this text; --version: the version

Without a display (a server, SSH), run the same UI in a browser instead:
  sextant serve --http-port 7777    and open http://127.0.0.1:7777/
";

/// Answers `--help`/`--version`, and says what to do where no window can open, instead of
/// the toolkit's panic. `None`: go on and open the window.
fn before_the_window(argv: &[String]) -> Option<i32> {
    if argv.iter().any(|a| a == "--help" || a == "-h") {
        print!("{USAGE}");
        return Some(0);
    }
    if argv.iter().any(|a| a == "--version" || a == "-V") {
        println!("sextant-desktop {}", env!("CARGO_PKG_VERSION"));
        return Some(0);
    }
    #[cfg(all(unix, not(target_os = "macos")))]
    {
        let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
        if !set("DISPLAY") && !set("WAYLAND_DISPLAY") {
            eprintln!(
                "error: no display to open Sextant's window on (neither DISPLAY nor WAYLAND_DISPLAY \
                 is set).\nRun the same UI in a browser instead: `sextant serve --http-port 7777`, \
                 then open http://127.0.0.1:7777/"
            );
            return Some(1);
        }
    }
    None
}

/// Starts the workspace (the demo, or the project asked for), the runtime, the assistant's
/// chat door, and the first connection, once the window exists.
fn start(app: &mut tauri::App, args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let demo = args.project.is_none();
    let mut workspace = if demo {
        Workspace::new(sextant_devices::simulator::demo_project())
    } else {
        Workspace::new(sextant_telemetry::Project::default())
    };
    let safeguards = safeguards(app.path());
    // Recording works from the start; the Recording screen can pick another file.
    if let Ok(dir) = app.path().app_data_dir() {
        if let Err(e) = std::fs::create_dir_all(&dir) {
            log::warn!("could not create the data folder {}: {e}", dir.display());
        }
        workspace.set_sessions_db(Some(dir.join("sessions.sqlite")));
    }
    // The runtime's tasks live on Tauri's Tokio runtime.
    let began = Instant::now();
    let runtime = tauri::async_runtime::block_on(async {
        let mut runtime = Runtime::with_safeguards(workspace, safeguards);
        // Beside the assistant's keys: one encrypted file where there is no keyring.
        if let Ok(dir) = app.path().app_data_dir() {
            runtime = runtime.with_credentials(CredentialVault::open(&dir.join("assistant")));
        }
        runtime.spawn(Some(Duration::from_secs(1)))
    });
    // Everything here runs before the window loads its page: its cost is start-up time.
    log::info!("the runtime started in {} ms", began.elapsed().as_millis());
    app.manage(Shell {
        runtime: runtime.clone(),
        chat: tokio::sync::OnceCell::new(),
        chat_dir: app.path().app_data_dir().map_err(|e| e.to_string()),
        next_display: AtomicU32::new(1),
        displays: Mutex::new(HashMap::new()),
        forwarders: Mutex::new(PageTasks::new()),
        started: watch::channel(false).0,
    });
    let handle = app.handle().clone();
    tauri::async_runtime::spawn(async move {
        tokio::time::sleep(SHOW_WINDOW_AT_THE_LATEST).await;
        if let Some(window) = handle.get_webview_window("main") {
            show_window(&window.as_ref().window());
        }
        handle.state::<Shell>().started.send_replace(true);
    });
    // The assistant opens when start-up is over (`Shell::started`), not before.
    let handle = app.handle().clone();
    tauri::async_runtime::spawn(async move {
        let _ = handle.state::<Shell>().chat().await;
    });
    let project = args.project.clone();
    let connect = demo || args.connect;
    tauri::async_runtime::spawn(async move {
        if let Some(path) = project {
            open_project(&runtime, &path).await;
        }
        if connect {
            if let Err(e) = runtime.call_from_ui("io.connect", json!({}), false).await {
                log::error!("could not connect: {}", e.message);
            }
        }
    });
    Ok(())
}

fn main() {
    LAUNCHED.get_or_init(Instant::now);
    // Before any thread starts (see the module's doc).
    sextant_runtime::heap::settle_allocator();
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if let Some(code) = before_the_window(&argv) {
        std::process::exit(code);
    }
    fix_unusable_locale();
    software_drawing_without_a_gpu();
    let args = parse_args(argv);
    tauri::Builder::default()
        // First, so a second launch hands its file to this window and exits.
        .plugin(tauri_plugin_single_instance::init(|app, argv, cwd| {
            let args = parse_args(argv.into_iter().skip(1));
            if let Some(project) = args.project {
                let path = Path::new(&cwd).join(project);
                let runtime = app.state::<Shell>().runtime.clone();
                tauri::async_runtime::spawn(async move { open_project(&runtime, &path).await });
            }
            if let Some(window) = app.get_webview_window("main") {
                let _ = window.unminimize();
                let _ = window.set_focus();
            }
        }))
        .plugin(
            tauri_plugin_log::Builder::new()
                .targets([
                    tauri_plugin_log::Target::new(tauri_plugin_log::TargetKind::LogDir {
                        file_name: None,
                    }),
                    tauri_plugin_log::Target::new(tauri_plugin_log::TargetKind::Stderr),
                ])
                .level(log::LevelFilter::Info)
                // Named here rather than left to the plugin's defaults: the log file never
                // grows past this, and one earlier file is kept.
                .max_file_size(LOG_FILE_BYTES)
                .rotation_strategy(tauri_plugin_log::RotationStrategy::KeepOne)
                .build(),
        )
        .plugin(tauri_plugin_dialog::init())
        // The window's place and size come back; whether it shows is `show_window`'s call.
        .plugin(
            tauri_plugin_window_state::Builder::default()
                .with_state_flags(StateFlags::all() - StateFlags::VISIBLE)
                .build(),
        )
        .on_page_load(|webview, payload| match payload.event() {
            PageLoadEvent::Started => {
                if let Some(shell) = webview.try_state::<Shell>() {
                    page_loading(webview, &shell);
                }
            }
            PageLoadEvent::Finished => show_window(&webview.window()),
        })
        .setup(move |app| start(app, &args))
        .invoke_handler(tauri::generate_handler![
            call,
            display,
            display_stop,
            subscribe_events,
            chat,
            subscribe_chat,
            source_credentials,
            first_frame_drawn
        ])
        .build(tauri::generate_context!())
        .unwrap_or_else(|e| {
            eprintln!("Sextant could not start: {e}");
            std::process::exit(1);
        })
        .run(|app, event| {
            // The runtime's own last-chance save dies with the process: write the edits
            // the auto-save has not written yet before the app exits.
            if let tauri::RunEvent::Exit = event {
                if let Some(shell) = app.try_state::<Shell>() {
                    let runtime = shell.runtime.clone();
                    if let Err(e) = tauri::async_runtime::block_on(runtime.flush()) {
                        log::error!("{}", e.message);
                    }
                }
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// A task that records being stopped.
    struct Flag(Arc<AtomicBool>);

    impl Abort for Flag {
        fn abort(&self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn flag() -> (Flag, Arc<AtomicBool>) {
        let stopped = Arc::new(AtomicBool::new(false));
        (Flag(stopped.clone()), stopped)
    }

    /// Compositing stays on only where a GPU can run it: a folder with a render node.
    #[test]
    fn a_render_node_is_what_says_there_is_a_gpu() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!has_render_node(&dir.path().join("missing")), "no folder");
        assert!(!has_render_node(dir.path()), "an empty folder");
        std::fs::write(dir.path().join("card0"), b"").unwrap();
        assert!(
            !has_render_node(dir.path()),
            "a display card alone renders nothing"
        );
        std::fs::write(dir.path().join("renderD128"), b"").unwrap();
        assert!(has_render_node(dir.path()));
    }

    /// Without a GPU both WebKit's compositing and GTK's OpenGL are off; with one, neither
    /// is touched; a variable the person set is theirs either way.
    #[test]
    fn without_a_gpu_drawing_is_software_unless_the_person_chose() {
        type Row = (
            bool,
            &'static [&'static str],
            &'static [(&'static str, &'static str)],
        );
        let rows: [Row; 4] = [
            (true, &[], &[]),
            (false, &[], &[(NO_COMPOSITING, "1"), (GTK_GL, "disable")]),
            (false, &[GTK_GL], &[(NO_COMPOSITING, "1")]),
            (false, &[NO_COMPOSITING, GTK_GL], &[]),
        ];
        for (gpu, set, expected) in rows {
            let got = software_drawing(gpu, |name| set.contains(&name));
            assert_eq!(got, expected, "gpu {gpu}, set {set:?}");
        }
    }

    /// A page that reloads ten times keeps one forwarder of each kind, and the ones of the
    /// pages before are stopped, not left forwarding to channels nobody reads.
    #[test]
    fn a_reloading_page_keeps_one_forwarder_of_each_kind() {
        let mut tasks = PageTasks::new();
        let mut stopped = Vec::new();
        for _ in 0..10 {
            tasks.page_loading("main");
            for stream in [Stream::Events, Stream::Chat] {
                let (task, flag) = flag();
                tasks.replace("main", stream, task);
                stopped.push(flag);
            }
        }
        let (other, other_stopped) = flag();
        tasks.replace("second", Stream::Events, other);
        assert_eq!(tasks.tasks.len(), 3);
        let running = stopped.iter().filter(|f| !f.load(Ordering::SeqCst)).count();
        assert_eq!(running, 2, "the newest page's two forwarders run, no more");
        // Subscribing again without a reload replaces too.
        let (again, _) = flag();
        tasks.replace("main", Stream::Events, again);
        assert!(stopped[18].load(Ordering::SeqCst));
        assert_eq!(tasks.tasks.len(), 3);
        // Another page's reload leaves this one's alone.
        tasks.page_loading("second");
        assert!(other_stopped.load(Ordering::SeqCst));
        assert!(!stopped[19].load(Ordering::SeqCst));
        assert_eq!(tasks.tasks.len(), 2);
    }
}
