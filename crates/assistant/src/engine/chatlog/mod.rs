//! Chats as append-only event logs (spec 30, A1).
//!
//! [`ChatLog`] stores each chat's events in SQLite ([`schema`]); events are never updated
//! or deleted, only whole chats are. [`fold`] derives the model's history, the UI's
//! projection and the surface labels from a log with one state machine; none of them is
//! stored. [`archive`] indexes every event for search (spec 30, A2) in the append's own
//! transaction; [`cite`] brings other chats in as frozen snapshots (A3).

pub mod archive;
pub mod cite;
mod event;
mod fold;
pub mod schema;
mod store;

pub use archive::{
    SearchFilter, SearchHit, SearchPage, SearchRequest, SnippetPart, Visibility, MAX_RESULT_SETS,
};
pub use cite::{CitedBy, HitRef, MAX_CITED_CHATS, MAX_SNAPSHOT_BYTES};
pub use event::{kinds, Event, LoggedEvent, Seq, Structural};
pub use fold::{
    fold, Block, Fold, Folded, Message, Role, Surface, ToolStatus, UiItem, CITATION_SOURCE,
    CITATION_WARNING, COMPACTION_SOURCE, INTERRUPTED,
};
pub use store::{ChatLog, ChatSummary};

use std::path::Path;

/// A chat's id.
pub type ChatId = i64;

#[derive(Debug, thiserror::Error)]
pub enum ChatLogError {
    #[error("could not open the chat database {path}: {source}; check that the folder exists and is writable")]
    Open {
        path: String,
        source: rusqlite::Error,
    },
    #[error("the chat database {path} is damaged or not a database ({detail}); move it aside and Sextant will start a new one")]
    Damaged { path: String, detail: String },
    #[error("the chat database {path} was written by a newer Sextant (schema version {found}; this one reads up to {supported}); update Sextant or choose another file")]
    TooNew {
        path: String,
        found: i64,
        supported: i64,
    },
    #[error("{path} is not a Sextant chat database (it has other tables and no schema version); choose another file")]
    Foreign { path: String },
    #[error("no chat {0}; list the chats to see which exist")]
    NoChat(ChatId),
    #[error("event {seq} of chat {chat} is damaged ({detail}); the database file is corrupt")]
    Corrupt {
        chat: ChatId,
        seq: Seq,
        detail: String,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("chat database error on {path}: {source}; if it persists, check free disk space and file permissions")]
    Sql {
        path: String,
        source: rusqlite::Error,
    },
}

impl ChatLogError {
    /// Names a damaged file as such; other SQLite errors keep their cause.
    pub(crate) fn from_sql(e: rusqlite::Error, path: &Path) -> ChatLogError {
        use rusqlite::ErrorCode::{CannotOpen, DatabaseCorrupt, NotADatabase};
        let path = path.display().to_string();
        match e.sqlite_error_code() {
            Some(NotADatabase | DatabaseCorrupt) => ChatLogError::Damaged {
                path,
                detail: e.to_string(),
            },
            Some(CannotOpen) => ChatLogError::Open { path, source: e },
            _ => ChatLogError::Sql { path, source: e },
        }
    }
}
