//! The engine: one turn and what it stands on – the conversation loop ([`conversation`]),
//! the chat log and its archive ([`chatlog`]), the context budget ([`context`]), the seams a
//! mechanism plugs into ([`seams`]), the tool pipeline ([`pipeline`]) and the model's tools
//! ([`tools`]), and the small shared leaves (the model's capabilities, the UI's language, the
//! probe's sentinel text, the skills' texts, command overlays, runaway detection).
//!
//! Invariant: nothing here names a mechanism or imports from [`crate::mechanisms`]; a
//! mechanism reaches a turn only through the seams.

pub mod chatlog;
pub mod context;
pub mod conversation;
pub mod language;
pub mod model;
pub mod overlay;
pub mod pipeline;
pub mod runaway;
pub mod seams;
pub mod sentinel;
pub mod skill_texts;
pub mod tools;
