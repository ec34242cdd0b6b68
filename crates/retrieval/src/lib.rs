//! Sextant's retrieval engine, shared by everything the assistant retrieves: the consented
//! memory and the chat archive.
//!
//! - [`text`]: the one tokenizer (index terms, query keywords, embedder features).
//! - [`embed`]: the [`Embedder`] trait and `deterministic-lexicon-v1`; [`endpoint`]: an
//!   OpenAI-compatible `/v1/embeddings` embedder. The neural MiniLM embedder is its own
//!   crate (`sextant-embed-minilm`), so this one stays light.
//! - [`store`]: a corpus in SQLite – FTS5 plus a vector per row, scopes enforced in SQL –
//!   and its three searches (full-text, vector, hybrid).
//! - [`eval`]: the evaluator and its metrics; [`sqlite_gate`]: the native-SQLite smoke check.
//! - [`diagnostics`] and [`breaker`]: content-free health, and the query embedder's circuit
//!   breaker.
//!
//! Everything here is synchronous: callers run it on a blocking thread.

pub mod breaker;
pub mod diagnostics;
pub mod embed;
pub mod endpoint;
pub mod eval;
pub mod sqlite_gate;
pub mod store;
pub mod synthetic;
pub mod text;

pub use embed::{Embedder, EmbedderKind, LexiconEmbedder, Profile, RecentQueries};
pub use store::{Doc, Hit, Index, Query, Scope, Track};
