//! The assistant's foundations, usable without the desktop shell, in two layers and a face:
//!
//! - [`engine`]: a turn and what it stands on – the conversation loop, the chat log, the
//!   context budget, the seams a mechanism plugs into, the tool pipeline. It names no
//!   mechanism and imports nothing from [`mechanisms`].
//! - [`mechanisms`]: each assistant mechanism of the spec (memory, the context probe,
//!   handoff, skills, auto-verify, the archive's tools, focus, intent, compression,
//!   compaction) as one module holding its behaviour and its row in the mechanism table.
//! - [`service`], [`door`], [`settings`]: the chat service that builds each turn by walking
//!   the table, the chat door the UI talks to, and the settings both read.
//!
//! In the engine:
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

pub mod door;
pub mod engine;
pub mod mechanisms;
pub mod service;
pub mod settings;

// The engine's and the mechanisms' modules at the crate root too, where the other crates
// have always named them.
pub use engine::{
    chatlog, context, conversation, language, model, overlay, pipeline, runaway, seams, sentinel,
    skill_texts, tools,
};
pub use mechanisms::{
    archive_tools, compaction, compress, focus, handoff, intent, memory, probe, retrieval, skills,
    verify,
};

/// The registry commands, as the assistant calls them.
pub type Commands = std::sync::Arc<dyn sextant_commands::CommandDoor>;
