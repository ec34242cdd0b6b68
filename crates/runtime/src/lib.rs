//! The workspace owner: the single writer of the project, the running sources and
//! pipeline, and the checkpoints; and the commands that act on them.
//!
//! [`Workspace`] is plain state with methods that keep its invariants (every edit is
//! validated, undoable and announced). [`commands::registry`] registers every command on
//! it. [`Runtime`] owns a workspace on one task and executes commands one at a time, in
//! order, for every door (UI, API server, MCP, CLI, assistant), applying the caller's tier
//! policy, taking a checkpoint before every Confirm-tier edit, and saving debounced.
//!
//! Architecture invariant: nothing outside the owner task mutates the workspace; doors
//! send commands and receive results and events.
//!
//! The owner task never waits on a caller: a command that reads a file at a caller's path
//! ([`user_file`]) or runs a user's script over sample data does that work on a job off
//! the owner, and only applies its result there (see [`Runtime`]).

mod actions;
pub mod commands;
mod convert;
pub mod credentials;
pub mod images;
mod runtime;
pub mod safeguards;
/// The allocator settings each binary applies first thing in `main`.
pub use sextant_heap as heap;
pub mod session_replay;
pub mod tail;
pub mod user_file;
mod workspace;

pub use credentials::CredentialVault;
pub use runtime::{Caller, Consent, Runtime, RuntimeHandle, MAX_JOBS, MAX_WAITING_JOBS, UI_POLICY};
pub use safeguards::{Safeguards, TrustStore};
pub use workspace::{Checkpoint, DashboardView, Event, Workspace, CHECKPOINT_LIMIT, UNDO_LIMIT};
