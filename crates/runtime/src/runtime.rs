//! The owner of the workspace: executes commands one at a time for every door.
//!
//! [`Runtime`] is the synchronous core (tier policy, checkpoints, events) and is what tests
//! and the CLI drive directly. [`Runtime::spawn`] moves it onto a task of its own and hands
//! out [`RuntimeHandle`]s: cheap, cloneable, usable from any task or thread. Auto-save
//! runs on that task, debounced: a save happens once edits have been quiet for the delay.
//!
//! The owner task never waits on a caller. A command whose work could take long or block –
//! reading a file at a path the caller gave, running a user's script over sample data – is
//! registered as deferred ([`sextant_commands::Deferred`]): its handler runs on the owner
//! and hands back a job, which runs on tokio's blocking pool (at most [`MAX_JOBS`] at once)
//! while the owner goes on with everyone else's commands. A job that has to change the
//! workspace with what it produced (the project a file held) comes back to the owner as a
//! change to apply, in turn with every other command, so the owner stays the single
//! writer; a Confirm-tier change takes its checkpoint then. The synchronous core runs a job
//! inline: it has no other caller to keep waiting.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::Value;
use sextant_commands::{
    Assessment, CommandError, CommandSpec, Decision, ErrorCode, Job, Outcome, Policy, Registry,
    Then, Tier,
};
use tokio::sync::{broadcast, mpsc, oneshot, Semaphore};

use crate::commands::registry;
use crate::safeguards::{Gate, Safeguards, View};
use crate::workspace::{Event, Workspace};
use sextant_telemetry::project::{Action, MqttPublisher, PostgresSink, Source};

pub use sextant_commands::Caller;

/// How many deferred jobs (file reads, dry runs) run at once; more wait their turn, off the
/// owner task, so a flood of them slows only each other.
pub const MAX_JOBS: usize = 4;

/// How many deferred jobs may wait for a turn beyond the [`MAX_JOBS`] running. A door whose
/// library spawns a task per request (MCP) could otherwise queue without end, each waiter
/// holding its closure; past this the call is refused at once, saying why.
pub const MAX_WAITING_JOBS: usize = 64;

/// How far a person has approved a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Consent {
    /// Nobody was asked.
    None,
    /// The door's own act is the approval (a click in the Sextant UI): enough for edits
    /// and device control, not for destructive steps or what the [`Safeguards`] guard.
    Door,
    /// A person said yes to this very call after seeing what it does.
    Person,
}

pub struct Runtime {
    pub workspace: Workspace,
    registry: Registry<Workspace>,
    safeguards: Safeguards,
}

impl Runtime {
    /// A runtime whose files may be written only in the project's folder and whose program
    /// permissions last until it stops; see [`Runtime::with_safeguards`].
    pub fn new(workspace: Workspace) -> Runtime {
        Runtime::with_safeguards(workspace, Safeguards::default())
    }

    /// A runtime with the user's folders and remembered program permissions.
    pub fn with_safeguards(workspace: Workspace, safeguards: Safeguards) -> Runtime {
        Runtime {
            workspace,
            registry: registry(),
            safeguards,
        }
    }

    pub fn safeguards(&self) -> &Safeguards {
        &self.safeguards
    }

    /// Keeps the sources' passwords and certificates in `vault` (none by default: a
    /// source then connects without any).
    pub fn with_credentials(mut self, vault: crate::CredentialVault) -> Runtime {
        self.workspace.credentials = vault;
        self
    }

    pub fn specs(&self) -> impl Iterator<Item = &CommandSpec> {
        self.registry.specs()
    }

    pub fn spec(&self, name: &str) -> Option<&CommandSpec> {
        self.registry.get(name)
    }

    /// Runs a command under `policy`. `approved` means a person already said yes to this
    /// exact call (the door asked); it never unlocks a denied tier.
    pub fn execute(
        &mut self,
        caller: Caller,
        name: &str,
        params: Value,
        policy: Policy,
        approved: bool,
    ) -> Result<Value, CommandError> {
        let consent = if approved {
            Consent::Person
        } else {
            Consent::None
        };
        self.execute_as(caller, name, params, policy, consent)
    }

    /// Runs a command under `policy` with the consent the door has: the tier decides
    /// whether a yes is needed at all, the [`Safeguards`] whether it must be a person's
    /// yes to this very call. A deferred command's job runs here, inline.
    pub fn execute_as(
        &mut self,
        caller: Caller,
        name: &str,
        params: Value,
        policy: Policy,
        consent: Consent,
    ) -> Result<Value, CommandError> {
        match self.begin(caller, name, params, policy, consent) {
            Begun::Done(result) => result,
            // Nobody else shares this runtime here: the job runs now, on this thread.
            Begun::Later(Pending { job, ticket }) => {
                let then = job();
                self.finish(ticket, then)
            }
        }
    }

    /// The part of [`Runtime::execute_as`] that runs on the owner before a deferred
    /// command's job: admission, then the handler.
    fn begin(
        &mut self,
        caller: Caller,
        name: &str,
        params: Value,
        policy: Policy,
        consent: Consent,
    ) -> Begun {
        let Some(tier) = self.registry.get(name).map(|s| s.tier) else {
            // The registry's own error names close matches.
            return Begun::Done(self.registry.call(&mut self.workspace, name, params));
        };
        let gate = match self.admit(caller, name, tier, &params, policy, consent) {
            Ok(gate) => gate,
            Err(e) => return Begun::Done(Err(e)),
        };
        tracing::debug!(?caller, command = name, "execute");
        let ticket = Ticket {
            command: name.to_string(),
            tier,
            gate,
            consent,
        };
        let started = self.on_owner(&ticket, |ws, registry| registry.start(ws, name, params));
        match started {
            Ok(Outcome::Now(value)) => Begun::Done(self.settle(&ticket, Ok(value))),
            Ok(Outcome::Later(job)) => Begun::Later(Pending { job, ticket }),
            Err(e) => Begun::Done(Err(e)),
        }
    }

    /// Whether this call may run: the tier policy, then the [`Safeguards`]; what it needs a
    /// person's yes for, if anything, when it may.
    fn admit(
        &self,
        caller: Caller,
        name: &str,
        tier: Tier,
        params: &Value,
        policy: Policy,
        consent: Consent,
    ) -> Result<Option<Gate>, CommandError> {
        let gate = self.assess(name, params);
        // A call that touches a device is DeviceGated whatever its command's tier (a connect
        // that starts an action's sends).
        let raised = gate.as_ref().and_then(Gate::raised_tier);
        let tier = raised.map_or(tier, |r| tier.max(r));
        let tier_approved = match consent {
            Consent::Person => true,
            Consent::Door => tier != Tier::AlwaysConfirm,
            Consent::None => false,
        };
        match policy.decide(tier) {
            Decision::Run => {}
            Decision::Ask if tier_approved => {}
            Decision::Ask => {
                return Err(CommandError::new(
                    ErrorCode::NotAllowed,
                    format!("`{name}` ({}) needs a person's approval", tier.as_str()),
                ))
            }
            Decision::Deny => {
                let why = match (&gate, raised) {
                    // Say what it would have touched, not only which rule refused it.
                    (Some(gate), Some(_)) if policy.non_interactive => gate.refusal(),
                    (Some(gate), Some(_)) => {
                        format!("{} ({})", policy.denial_reason(tier), gate.prompt())
                    }
                    _ => policy.denial_reason(tier).to_string(),
                };
                return Err(CommandError::new(ErrorCode::NotAllowed, why));
            }
        }
        if let Some(gate) = &gate {
            if !gate.allows(&policy, consent) {
                tracing::info!(
                    ?caller,
                    command = name,
                    "refused until a person says yes: {}",
                    gate.prompt()
                );
                return Err(gate.error(&policy));
            }
        }
        Ok(gate)
    }

    /// Ends a call whose job ran (`then`: what the job left to do): applies the job's
    /// change to the workspace, if it made one. Runs on the owner.
    fn finish(
        &mut self,
        ticket: Ticket,
        then: Result<Then<Workspace>, CommandError>,
    ) -> Result<Value, CommandError> {
        let result = match then {
            Ok(Then::Reply(value)) => Ok(value),
            Ok(Then::Apply(apply)) => self.on_owner(&ticket, |ws, _| apply(ws)),
            Err(e) => Err(e),
        };
        self.settle(&ticket, result)
    }

    /// Runs `step` of a call on the workspace, with a restore point before every edit, so
    /// any change can be rolled back.
    fn on_owner<T>(
        &mut self,
        ticket: &Ticket,
        step: impl FnOnce(&mut Workspace, &Registry<Workspace>) -> Result<T, CommandError>,
    ) -> Result<T, CommandError> {
        let checkpoint = (ticket.tier == Tier::Confirm).then(|| {
            self.workspace
                .checkpoint(&format!("before {}", ticket.command))
        });
        let result = step(&mut self.workspace, &self.registry);
        if let Some(id) = checkpoint {
            self.workspace.discard_checkpoint_if_unchanged(id);
        }
        result
    }

    /// What a call's outcome leaves behind besides its result.
    fn settle(
        &mut self,
        ticket: &Ticket,
        result: Result<Value, CommandError>,
    ) -> Result<Value, CommandError> {
        // The person's yes to running these programs, or to these sends, holds for this
        // project file from now on (a flag's consent is the flag's, not remembered).
        if let (Ok(_), Some(gate), Consent::Person) = (&result, &ticket.gate, ticket.consent) {
            let remembered = gate.remembered_by_yes();
            if remembered.is_empty() {
                return result;
            }
            if let Err(e) = self
                .safeguards
                .trust()
                .allow(self.workspace.path(), &remembered)
            {
                tracing::warn!("could not remember what the person allowed: {e}");
            }
        }
        result
    }

    /// What this call needs a person's yes for, if anything.
    fn assess(&self, name: &str, params: &Value) -> Option<Gate> {
        let view = View {
            project_file: self.workspace.path(),
            sources: &self.workspace.project().sources,
            actions: &self.workspace.project().actions,
            publisher: self.workspace.project().mqtt_publisher.as_ref(),
            postgres: self.workspace.project().postgres.as_ref(),
        };
        self.safeguards.assess(&view, name, params)
    }

    /// Moves the runtime onto its own task. `autosave`: save this long after the last edit
    /// (when the project has a file).
    pub fn spawn(self, autosave: Option<Duration>) -> RuntimeHandle {
        let (tx, rx) = mpsc::channel(256);
        let (events, _) = broadcast::channel(1024);
        let specs: Arc<Vec<CommandSpec>> = Arc::new(self.registry.specs().cloned().collect());
        let scope = self.workspace.scope().clone();
        let safeguards = self.safeguards.clone();
        let credentials = self.workspace.credentials.clone();
        let snapshot = Arc::new(RwLock::new(Snapshot::of(&self.workspace)));
        tokio::spawn(owner(self, rx, events.clone(), autosave, snapshot.clone()));
        RuntimeHandle {
            tx,
            events,
            specs,
            scope,
            safeguards,
            credentials,
            snapshot,
        }
    }
}

/// What the safeguards read, copied when a call changed the project or its file, so a
/// door can ask before it calls.
#[derive(Default)]
struct Snapshot {
    revision: u64,
    project_file: Option<PathBuf>,
    sources: Vec<Source>,
    actions: Vec<Action>,
    publisher: Option<MqttPublisher>,
    postgres: Option<PostgresSink>,
}

impl Snapshot {
    fn of(ws: &Workspace) -> Snapshot {
        Snapshot {
            revision: ws.revision(),
            project_file: ws.path().map(PathBuf::from),
            sources: ws.project().sources.clone(),
            actions: ws.project().actions.clone(),
            publisher: ws.project().mqtt_publisher.clone(),
            postgres: ws.project().postgres.clone(),
        }
    }

    /// Whether `ws` moved on since this copy (reads, the usual call, leave it as it is).
    fn is_current(&self, ws: &Workspace) -> bool {
        self.revision == ws.revision() && self.project_file.as_deref() == ws.path()
    }
}

/// A call admitted and started on the owner: done, or waiting for its job.
enum Begun {
    Done(Result<Value, CommandError>),
    Later(Pending),
}

/// A call whose job is to run off the owner; [`Runtime::finish`] ends it.
struct Pending {
    job: Job<Workspace>,
    ticket: Ticket,
}

/// What ending a call needs to know of it.
struct Ticket {
    command: String,
    tier: Tier,
    gate: Option<Gate>,
    consent: Consent,
}

/// A job that ran off the owner, back to be finished there.
struct JobDone {
    ticket: Ticket,
    then: Result<Then<Workspace>, CommandError>,
    reply: oneshot::Sender<Result<Value, CommandError>>,
}

enum Request {
    Call(Call),
    /// Write unsaved edits now (shutdown); the reply says whether that worked.
    Flush(oneshot::Sender<Result<(), CommandError>>),
}

struct Call {
    caller: Caller,
    command: String,
    params: Value,
    policy: Policy,
    consent: Consent,
    reply: oneshot::Sender<Result<Value, CommandError>>,
}

/// What the UI door may do: everything a person may, asking them for destructive steps.
pub const UI_POLICY: Policy = Policy {
    auto_approve_edits: true,
    allow_device_control: true,
    non_interactive: false,
    allow_process_sources: false,
    paths_from_person: false,
};

/// The runtime as the doors that call on someone's behalf see it (the assistant, MCP).
impl sextant_commands::CommandDoor for RuntimeHandle {
    fn specs(&self) -> &[CommandSpec] {
        RuntimeHandle::specs(self)
    }

    fn assess(&self, command: &str, params: &Value) -> Option<Assessment> {
        RuntimeHandle::assess(self, command, params)
    }

    fn call_as<'a>(
        &'a self,
        caller: Caller,
        command: &'a str,
        params: Value,
        policy: Policy,
        approved: bool,
    ) -> sextant_commands::BoxFuture<'a, Result<Value, CommandError>> {
        if approved {
            Box::pin(RuntimeHandle::call_approved(
                self, caller, command, params, policy,
            ))
        } else {
            Box::pin(RuntimeHandle::call(self, caller, command, params, policy))
        }
    }
}

/// A door's connection to the runtime.
#[derive(Clone)]
pub struct RuntimeHandle {
    tx: mpsc::Sender<Request>,
    events: broadcast::Sender<Event>,
    specs: Arc<Vec<CommandSpec>>,
    scope: sextant_display::Scope,
    safeguards: Safeguards,
    credentials: crate::CredentialVault,
    snapshot: Arc<RwLock<Snapshot>>,
}

impl RuntimeHandle {
    pub async fn call(
        &self,
        caller: Caller,
        command: &str,
        params: Value,
        policy: Policy,
    ) -> Result<Value, CommandError> {
        self.send(caller, command, params, policy, Consent::None)
            .await
    }

    /// A call from the Sextant UI, where a person is at the controls: their click is the
    /// approval for edits and device control; destructive (AlwaysConfirm) commands and
    /// what the safeguards guard (running a program, writing outside the user's folders)
    /// run only when `confirmed` says the UI asked the person and they said yes.
    pub async fn call_from_ui(
        &self,
        command: &str,
        params: Value,
        confirmed: bool,
    ) -> Result<Value, CommandError> {
        let consent = if confirmed {
            Consent::Person
        } else {
            Consent::Door
        };
        self.send(Caller::Ui, command, params, UI_POLICY, consent)
            .await
    }

    /// What a person must say yes to before this call may run (it runs a program, writes
    /// outside the user's folders, starts sends to a device), as the question to ask them
    /// and the tier to treat the call as; `None` when the call's tier alone decides. Read
    /// from the state after the last call, so a door can ask before it calls; the runtime
    /// checks again when the call runs.
    pub fn assess(&self, command: &str, params: &Value) -> Option<Assessment> {
        let snapshot = self.snapshot.read().unwrap_or_else(|e| e.into_inner());
        let view = View {
            project_file: snapshot.project_file.as_deref(),
            sources: &snapshot.sources,
            actions: &snapshot.actions,
            publisher: snapshot.publisher.as_ref(),
            postgres: snapshot.postgres.as_ref(),
        };
        // What nobody's yes allows (Sextant's own files) is not a question: the call is
        // simply refused when it runs.
        self.safeguards
            .assess(&view, command, params)
            .and_then(|g| {
                Some(Assessment {
                    question: g.question()?,
                    tier: g.asking_tier(),
                })
            })
    }

    /// A call a person has approved (after the door asked).
    pub async fn call_approved(
        &self,
        caller: Caller,
        command: &str,
        params: Value,
        policy: Policy,
    ) -> Result<Value, CommandError> {
        self.send(caller, command, params, policy, Consent::Person)
            .await
    }

    async fn send(
        &self,
        caller: Caller,
        command: &str,
        params: Value,
        policy: Policy,
        consent: Consent,
    ) -> Result<Value, CommandError> {
        let (reply, rx) = oneshot::channel();
        let request = Request::Call(Call {
            caller,
            command: command.to_string(),
            params,
            policy,
            consent,
            reply,
        });
        let gone = || CommandError::failed("the workspace has shut down");
        self.tx.send(request).await.map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    /// Writes the project's unsaved edits to its file now, instead of after the auto-save
    /// delay: a door calls this before the process exits, since the runtime's task is
    /// dropped with the process and its own last-chance save never runs. Nothing to do
    /// for a project without a file or without edits.
    pub async fn flush(&self) -> Result<(), CommandError> {
        let (reply, rx) = oneshot::channel();
        let gone = || CommandError::failed("the workspace has shut down");
        self.tx
            .send(Request::Flush(reply))
            .await
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// A person's door to the sources' passwords and certificates (see
    /// [`crate::credentials`]): not a registry command, so no model and no headless client
    /// reaches it. Answers which parts are saved, never a value.
    pub async fn credentials(
        &self,
        request: crate::credentials::CredentialsRequest,
    ) -> Result<crate::credentials::CredentialStatus, CommandError> {
        let project_file = self
            .snapshot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .project_file
            .clone();
        let vault = self.credentials.clone();
        tokio::task::spawn_blocking(move || vault.handle(project_file.as_deref(), request))
            .await
            .map_err(|_| CommandError::failed("the secret store stopped answering"))?
            .map_err(CommandError::from)
    }

    pub fn specs(&self) -> &[CommandSpec] {
        &self.specs
    }

    /// The live display: doors read display frames here at their own tick rate, never
    /// through the command queue (a busy owner must not stall the dashboard).
    pub fn scope(&self) -> &sextant_display::Scope {
        &self.scope
    }
}

async fn owner(
    mut rt: Runtime,
    mut rx: mpsc::Receiver<Request>,
    events: broadcast::Sender<Event>,
    autosave: Option<Duration>,
    snapshot: Arc<RwLock<Snapshot>>,
) {
    // Jobs come back here to be finished; the owner holds a sender, so this never ends.
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<JobDone>();
    let jobs = Arc::new(Semaphore::new(MAX_JOBS));
    // Jobs running or waiting for a turn.
    let queued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut seen_revision = rt.workspace.revision();
    let mut due: Option<tokio::time::Instant> = None;
    loop {
        let sleep = async {
            match due {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            req = rx.recv() => {
                match req {
                    None => break,
                    Some(Request::Call(req)) => {
                        let begun = rt.begin(req.caller, &req.command, req.params, req.policy, req.consent);
                        refresh(&snapshot, &rt.workspace);
                        match begun {
                            Begun::Done(result) => {
                                let _ = req.reply.send(result);
                            }
                            Begun::Later(pending) => {
                                run_job(pending, req.reply, jobs.clone(), queued.clone(), done_tx.clone());
                            }
                        }
                    }
                    Some(Request::Flush(reply)) => {
                        let saved = if rt.workspace.path().is_some() && rt.workspace.has_unsaved_edits() {
                            rt.workspace.save(None).map(|_| ()).map_err(|e| {
                                CommandError::failed(format!("could not save the project: {e}"))
                            })
                        } else {
                            Ok(())
                        };
                        due = None;
                        let _ = reply.send(saved);
                    }
                }
            }
            Some(done) = done_rx.recv() => {
                let result = rt.finish(done.ticket, done.then);
                refresh(&snapshot, &rt.workspace);
                let _ = done.reply.send(result);
            }
            _ = sleep => {
                due = None;
                if rt.workspace.path().is_some() && rt.workspace.has_unsaved_edits() {
                    if let Err(e) = rt.workspace.save(None) {
                        tracing::error!("auto-save failed: {e}");
                        rt.workspace.auto_save_failed();
                    }
                }
            }
        }
        if let Some(delay) = autosave {
            // Debounce: every edit (not every call: status polls must not starve the save)
            // pushes the save back.
            if rt.workspace.revision() != seen_revision && rt.workspace.path().is_some() {
                due = Some(tokio::time::Instant::now() + delay);
            }
        }
        seen_revision = rt.workspace.revision();
        for e in rt.workspace.take_events() {
            let _ = events.send(e);
        }
    }
    // Last chance: unsaved edits of a project with a file are written on shutdown.
    if autosave.is_some() && rt.workspace.path().is_some() && rt.workspace.has_unsaved_edits() {
        if let Err(e) = rt.workspace.save(None) {
            tracing::error!("final save failed: {e}");
        }
    }
}

/// Copies what the safeguards read when a call changed the project or its file.
fn refresh(snapshot: &RwLock<Snapshot>, ws: &Workspace) {
    let stale = !snapshot
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .is_current(ws);
    if stale {
        *snapshot.write().unwrap_or_else(|e| e.into_inner()) = Snapshot::of(ws);
    }
}

/// Runs a call's job on the blocking pool, never on the owner, and sends it back to the
/// owner to be finished; the caller's reply goes with it.
fn run_job(
    pending: Pending,
    reply: oneshot::Sender<Result<Value, CommandError>>,
    jobs: Arc<Semaphore>,
    queued: Arc<std::sync::atomic::AtomicUsize>,
    done: mpsc::UnboundedSender<JobDone>,
) {
    use std::sync::atomic::Ordering;
    let Pending { job, ticket } = pending;
    if queued.fetch_add(1, Ordering::SeqCst) >= MAX_JOBS + MAX_WAITING_JOBS {
        queued.fetch_sub(1, Ordering::SeqCst);
        // Refused through the owner like any finished job, so its ticket is let go of.
        let busy = Err(CommandError::failed(format!(
            "Sextant is busy: {MAX_JOBS} long commands (file reads, dry runs, exports) are \
             running and {MAX_WAITING_JOBS} more are waiting; try again when they finish"
        )));
        let _ = done.send(JobDone {
            ticket,
            then: busy,
            reply,
        });
        return;
    }
    tokio::spawn(async move {
        // Waits for its turn here, on a task of its own: the owner goes on meanwhile.
        let _turn = jobs.acquire_owned().await;
        let then = tokio::task::spawn_blocking(job).await.unwrap_or_else(|e| {
            Err(CommandError::failed(format!(
                "`{}` stopped unexpectedly: {e}",
                ticket.command
            )))
        });
        queued.fetch_sub(1, Ordering::SeqCst);
        // Only a runtime that shut down is gone; the caller's reply says so then.
        let _ = done.send(JobDone {
            ticket,
            then,
            reply,
        });
    });
}
