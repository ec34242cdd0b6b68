//! [`ChatLog`]: one connection to the chat database – chats and their append-only logs.
//!
//! Writes run in IMMEDIATE transactions, so two handles (two threads, two windows)
//! appending to the same chat get consecutive, distinct sequence numbers; reads run in WAL
//! snapshots and never see half an append.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::Serialize;

use crate::chatlog::event::{Event, LoggedEvent, Seq};
use crate::chatlog::fold::{fold, Folded};
use crate::chatlog::{schema, ChatId, ChatLogError};

/// One chat in a list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatSummary {
    pub id: ChatId,
    pub title: String,
    pub created_unix_ms: i64,
    /// The last event's time (the creation time for an empty chat).
    pub updated_unix_ms: i64,
    pub events: u64,
}

/// A connection to a chat database.
pub struct ChatLog {
    conn: Connection,
    path: PathBuf,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

const SUMMARY: &str = "SELECT c.id, c.title, c.created_unix_ms, \
     coalesce((SELECT max(unix_ms) FROM events e WHERE e.chat = c.id), c.created_unix_ms), \
     (SELECT count(*) FROM events e WHERE e.chat = c.id) FROM chats c";

fn summary(r: &rusqlite::Row<'_>) -> rusqlite::Result<ChatSummary> {
    Ok(ChatSummary {
        id: r.get(0)?,
        title: r.get(1)?,
        created_unix_ms: r.get(2)?,
        updated_unix_ms: r.get(3)?,
        events: r.get::<_, i64>(4)?.max(0) as u64,
    })
}

impl ChatLog {
    /// Opens the database at `path`, creating it if missing and migrating an older one.
    pub fn open(path: impl AsRef<Path>) -> Result<ChatLog, ChatLogError> {
        let path = path.as_ref().to_path_buf();
        let conn = schema::open(&path)?;
        Ok(ChatLog { conn, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sql(&self, e: rusqlite::Error) -> ChatLogError {
        ChatLogError::from_sql(e, &self.path)
    }

    pub fn create_chat(&mut self, title: &str) -> Result<ChatId, ChatLogError> {
        self.conn
            .execute(
                "INSERT INTO chats (title, created_unix_ms) VALUES (?1, ?2)",
                params![title, now_ms()],
            )
            .map_err(|e| self.sql(e))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Every chat, newest first (the panel opens the first one).
    pub fn list_chats(&self) -> Result<Vec<ChatSummary>, ChatLogError> {
        let run = || -> rusqlite::Result<Vec<ChatSummary>> {
            let mut stmt = self
                .conn
                .prepare(&format!("{SUMMARY} ORDER BY c.id DESC"))?;
            let rows = stmt.query_map([], summary)?;
            rows.collect()
        };
        run().map_err(|e| self.sql(e))
    }

    pub fn chat(&self, id: ChatId) -> Result<ChatSummary, ChatLogError> {
        self.conn
            .query_row(&format!("{SUMMARY} WHERE c.id = ?1"), [id], summary)
            .optional()
            .map_err(|e| self.sql(e))?
            .ok_or(ChatLogError::NoChat(id))
    }

    /// Renames a chat. The title is the chat's label, not conversation, so it is a field of
    /// the chat rather than an event: the model never sees it and listing needs no log scan.
    pub fn rename_chat(&mut self, id: ChatId, title: &str) -> Result<(), ChatLogError> {
        let n = self
            .conn
            .execute(
                "UPDATE chats SET title = ?2 WHERE id = ?1",
                params![id, title],
            )
            .map_err(|e| self.sql(e))?;
        if n == 0 {
            return Err(ChatLogError::NoChat(id));
        }
        Ok(())
    }

    /// Deletes a chat and its whole log – the only way events ever leave the database.
    pub fn delete_chat(&mut self, id: ChatId) -> Result<(), ChatLogError> {
        let n = self
            .conn
            .execute("DELETE FROM chats WHERE id = ?1", [id])
            .map_err(|e| self.sql(e))?;
        if n == 0 {
            return Err(ChatLogError::NoChat(id));
        }
        Ok(())
    }

    /// Appends an event; returns its sequence number.
    pub fn append(&mut self, chat: ChatId, event: &Event) -> Result<Seq, ChatLogError> {
        event.check().map_err(ChatLogError::Invalid)?;
        let payload = event.payload().to_string();
        let path = self.path.clone();
        let sql = |e| ChatLogError::from_sql(e, &path);
        // IMMEDIATE: the write lock is taken before reading the last seq, so two handles
        // cannot both pick the same number.
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        let exists: bool = tx
            .query_row(
                "SELECT count(*) > 0 FROM chats WHERE id = ?1",
                [chat],
                |r| r.get(0),
            )
            .map_err(sql)?;
        if !exists {
            return Err(ChatLogError::NoChat(chat));
        }
        let seq: i64 = tx
            .query_row(
                "SELECT coalesce(max(seq), 0) + 1 FROM events WHERE chat = ?1",
                [chat],
                |r| r.get(0),
            )
            .map_err(sql)?;
        tx.execute(
            "INSERT INTO events (chat, seq, unix_ms, kind, payload) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![chat, seq, now_ms(), event.kind(), payload],
        )
        .map_err(sql)?;
        tx.commit().map_err(sql)?;
        Ok(seq as Seq)
    }

    /// A chat's log, in order.
    pub fn events(&self, chat: ChatId) -> Result<Vec<LoggedEvent>, ChatLogError> {
        self.chat(chat)?;
        let rows = (|| -> rusqlite::Result<Vec<(i64, i64, String, String)>> {
            let mut stmt = self.conn.prepare(
                "SELECT seq, unix_ms, kind, payload FROM events WHERE chat = ?1 ORDER BY seq",
            )?;
            let rows =
                stmt.query_map([chat], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
            rows.collect()
        })()
        .map_err(|e| self.sql(e))?;
        rows.into_iter()
            .map(|(seq, unix_ms, kind, payload)| {
                let corrupt = |detail: String| ChatLogError::Corrupt {
                    chat,
                    seq: seq as Seq,
                    detail,
                };
                let payload = serde_json::from_str(&payload)
                    .map_err(|e| corrupt(format!("payload is not JSON: {e}")))?;
                let event = Event::from_parts(&kind, payload).map_err(corrupt)?;
                Ok(LoggedEvent {
                    seq: seq as Seq,
                    unix_ms,
                    event,
                })
            })
            .collect()
    }

    /// Every tool call id the chat has used (a call id must name one call per chat: the
    /// fold pairs results to calls by it).
    pub fn tool_call_ids(
        &self,
        chat: ChatId,
    ) -> Result<std::collections::HashSet<String>, ChatLogError> {
        self.chat(chat)?;
        (|| -> rusqlite::Result<std::collections::HashSet<String>> {
            let mut stmt = self.conn.prepare(
                "SELECT json_extract(payload, '$.id') FROM events \
                 WHERE chat = ?1 AND kind = 'tool_call'",
            )?;
            let ids = stmt.query_map([chat], |r| r.get::<_, Option<String>>(0))?;
            ids.filter_map(Result::transpose).collect()
        })()
        .map_err(|e| self.sql(e))
    }

    /// The model history and UI projection of a chat, derived from its log.
    pub fn fold(&self, chat: ChatId) -> Result<Folded, ChatLogError> {
        Ok(fold(&self.events(chat)?))
    }
}
