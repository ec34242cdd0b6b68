//! The assistant's foundations, usable without the desktop shell.
//!
//! - [`pipeline`]: every tool call the assistant makes goes through one pipeline with fixed
//!   stations (pre-execute waterfall, guards, execute wrappers, post-execute, observers).
//!   Tools only execute; all policy – the command safety tiers included – lives at the
//!   stations.
//! - [`chatlog`]: every chat is an append-only event log in SQLite; the model's history
//!   and the UI's projection are both derived from it by one fold and never stored; its
//!   archive indexes every chat for search, and citations bring old chats in frozen.
//!   [`archive_tools`] gives the model that search and citing as two Safe tools.
//!
//! Architecture invariant: the assistant reaches the workspace only through registry
//! commands (a [`Commands`] door, which the workspace runtime implements), never by
//! touching the project itself; it does not depend on the runtime, its drivers or its
//! databases.

pub mod archive_tools;
pub mod chatlog;
pub mod compaction;
pub mod compress;
pub mod context;
pub mod conversation;
pub mod door;
pub mod focus;
pub mod handoff;
pub mod intent;
pub mod language;
pub(crate) mod mechanisms;
pub mod memory;
pub mod model;
pub mod overlay;
pub mod pipeline;
pub mod probe;
pub mod retrieval;
pub mod runaway;
pub mod seams;
pub mod sentinel;
pub mod service;
pub mod settings;
pub mod skill_texts;
pub mod skills;
pub mod tools;
pub mod verify;

/// The registry commands, as the assistant calls them.
pub type Commands = std::sync::Arc<dyn sextant_commands::CommandDoor>;
