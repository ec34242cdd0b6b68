//! [`ChatLog`]: one connection to the chat database – chats and their append-only logs.
//!
//! Writes run in IMMEDIATE transactions, so two handles (two threads, two windows)
//! appending to the same chat get consecutive, distinct sequence numbers; reads run in WAL
//! snapshots and never see half an append.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::Serialize;

use crate::engine::chatlog::archive;
use crate::engine::chatlog::event::{Event, LoggedEvent, Seq};
use crate::engine::chatlog::fold::{Fold, Folded, Message};
use crate::engine::chatlog::{schema, ChatId, ChatLogError};
use crate::engine::context::Envelope;

/// One chat in a list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatSummary {
    pub id: ChatId,
    pub title: String,
    pub created_unix_ms: i64,
    /// The project file the chat was started in (`None`: no saved project).
    pub project: Option<String>,
    /// The last event's time (the creation time for an empty chat).
    pub updated_unix_ms: i64,
    pub events: u64,
}

/// A connection to a chat database.
pub struct ChatLog {
    pub(super) conn: Connection,
    pub(super) path: PathBuf,
    /// Appends skip the archive's index (the benchmark's "index off" figure only).
    unindexed: bool,
    /// What this handle has read of its recent chats' logs.
    kept: Mutex<KeptLogs>,
}

/// The kept logs, most recently used first, and the database's count of deleted chats
/// when they were read.
#[derive(Default)]
struct KeptLogs {
    chats: Vec<Kept>,
    deleted: i64,
}

/// How many chats' logs a handle keeps read and folded (the ones a person has open).
const KEPT_CHATS: usize = 8;

/// One chat's log as this handle last read it, and its fold. A log only grows (the
/// database refuses to change or remove an event of a chat that exists), so a later read
/// fetches only the events after the last one kept, whoever appended them, and the fold
/// takes just those: a request of a 10 000-event chat neither reads nor folds it all again.
/// A chat deleted on any connection (its id may be reused) drops every kept log.
struct Kept {
    chat: ChatId,
    /// The last kept event's seq.
    last: Seq,
    events: Arc<Vec<LoggedEvent>>,
    /// The fold of `events[..folded]`, unfinished, with the chat's envelope.
    fold: Option<(Fold, usize)>,
}

impl Kept {
    fn empty(chat: ChatId) -> Kept {
        Kept {
            chat,
            last: 0,
            events: Arc::new(Vec::new()),
            fold: None,
        }
    }
}

pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

const SUMMARY: &str = "SELECT c.id, c.title, c.created_unix_ms, c.project, \
     coalesce((SELECT max(unix_ms) FROM events e WHERE e.chat = c.id), c.created_unix_ms), \
     (SELECT count(*) FROM events e WHERE e.chat = c.id) FROM chats c";

fn summary(r: &rusqlite::Row<'_>) -> rusqlite::Result<ChatSummary> {
    Ok(ChatSummary {
        id: r.get(0)?,
        title: r.get(1)?,
        created_unix_ms: r.get(2)?,
        project: r.get(3)?,
        updated_unix_ms: r.get(4)?,
        events: r.get::<_, i64>(5)?.max(0) as u64,
    })
}

impl ChatLog {
    /// Opens the database at `path`, creating it if missing and migrating an older one.
    pub fn open(path: impl AsRef<Path>) -> Result<ChatLog, ChatLogError> {
        let path = path.as_ref().to_path_buf();
        let conn = schema::open(&path)?;
        Ok(ChatLog {
            conn,
            path,
            unindexed: false,
            kept: Mutex::default(),
        })
    }

    /// For the archive benchmark only: appends on this handle skip the archive's index, so
    /// what they append is never found. Measures what the index adds to an append.
    #[doc(hidden)]
    pub fn bench_skip_archive_index(&mut self) {
        self.unindexed = true;
    }

    /// For the archive benchmark only: marks every chat's kept surface labels stale, so
    /// the next search folds every chat again (its "cold" figure: a first search after a
    /// build that labels differently).
    #[doc(hidden)]
    pub fn bench_forget_surfaces(&mut self) {
        self.conn
            .execute("UPDATE chats SET labelled_seq = 0", [])
            .expect("the benchmark's database is writable");
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn sql(&self, e: rusqlite::Error) -> ChatLogError {
        ChatLogError::from_sql(e, &self.path)
    }

    /// A chat with no project.
    pub fn create_chat(&mut self, title: &str) -> Result<ChatId, ChatLogError> {
        self.create_chat_in(title, None)
    }

    /// A chat started in `project` (a project file's path): the archive's project-scoped
    /// searches see it only from that project.
    pub fn create_chat_in(
        &mut self,
        title: &str,
        project: Option<&str>,
    ) -> Result<ChatId, ChatLogError> {
        self.conn
            .execute(
                "INSERT INTO chats (title, created_unix_ms, project) VALUES (?1, ?2, ?3)",
                params![title, now_ms(), project],
            )
            .map_err(|e| self.sql(e))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// The envelope a chat's history is folded with. Its nonce is derived from the install's
    /// key and the chat, so it is the same for every request of the chat (the provider's
    /// prompt cache holds) and unknowable to whoever wrote what it wraps.
    pub fn envelope(&self, chat: ChatId) -> Result<Envelope, ChatLogError> {
        self.envelope_of(chat, self.created(chat)?)
    }

    /// The chat's creation time: what, with its id, names it for its whole life.
    fn created(&self, chat: ChatId) -> Result<i64, ChatLogError> {
        self.conn
            .prepare_cached("SELECT created_unix_ms FROM chats WHERE id = ?1")
            .and_then(|mut s| s.query_row([chat], |r| r.get(0)).optional())
            .map_err(|e| self.sql(e))?
            .ok_or(ChatLogError::NoChat(chat))
    }

    fn envelope_of(&self, chat: ChatId, created: i64) -> Result<Envelope, ChatLogError> {
        use hmac::Mac;
        let key = self.install_key()?;
        let mut mac = <hmac::Hmac<sha2::Sha256>>::new_from_slice(&key)
            .expect("HMAC takes a key of any length");
        mac.update(format!("sextant-envelope-v1\0{chat}\0{created}").as_bytes());
        let nonce: String = mac.finalize().into_bytes()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(Envelope::with_nonce(&nonce).expect("16 hex digits make a nonce"))
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

    /// `NoChat` unless the chat exists: [`ChatLog::chat`] without counting its events.
    pub fn check_exists(&self, id: ChatId) -> Result<(), ChatLogError> {
        self.created(id).map(|_| ())
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
        let seq = if self.unindexed {
            append_row(&tx, chat, event).map(|(seq, _)| seq)
        } else {
            append_in(&tx, chat, event)
        }
        .map_err(sql)?;
        tx.commit().map_err(sql)?;
        Ok(seq)
    }

    /// A chat's log, in order. Only the events appended since this handle last read the
    /// chat are read from the database.
    pub fn events(&self, chat: ChatId) -> Result<Arc<Vec<LoggedEvent>>, ChatLogError> {
        let mut kept = self.kept_lock();
        let entry = self.refreshed(&mut kept, chat)?;
        Ok(entry.events.clone())
    }

    fn kept_lock(&self) -> std::sync::MutexGuard<'_, KeptLogs> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The chat's kept log brought up to date, moved to the front of `kept`.
    fn refreshed<'k>(
        &self,
        kept: &'k mut KeptLogs,
        chat: ChatId,
    ) -> Result<&'k mut Kept, ChatLogError> {
        // One read snapshot for the chat, the deletion count and the new events: a chat
        // deleted and its id reused between two of them cannot mix two chats' logs.
        let snapshot = self.conn.unchecked_transaction().map_err(|e| self.sql(e))?;
        self.created(chat)?;
        let deleted: i64 = self
            .conn
            .prepare_cached("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'chats_deleted'")
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .map_err(|e| self.sql(e))?;
        if deleted != kept.deleted {
            kept.chats.clear();
            kept.deleted = deleted;
        }
        let mut entry = match kept.chats.iter().position(|k| k.chat == chat) {
            Some(i) => kept.chats.remove(i),
            None => Kept::empty(chat),
        };
        let new = archive::load_events_after(&self.conn, chat, entry.last, &self.path)?;
        // Only read: ending it either way changes nothing.
        drop(snapshot);
        if let Some(last) = new.last() {
            entry.last = last.seq;
            Arc::make_mut(&mut entry.events).extend(new);
        }
        kept.chats.insert(0, entry);
        kept.chats.truncate(KEPT_CHATS);
        Ok(&mut kept.chats[0])
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
    /// Folds only the events appended since the last fold of the chat on this handle.
    pub fn fold(&self, chat: ChatId) -> Result<Folded, ChatLogError> {
        self.with_fold(chat, Fold::snapshot)
    }

    /// The model's history of the chat: [`ChatLog::fold`]'s `history` alone, for a request.
    pub fn history(&self, chat: ChatId) -> Result<Vec<Message>, ChatLogError> {
        self.with_fold(chat, Fold::history)
    }

    /// `f` of the chat's fold, brought up to date with the events appended since it was
    /// last used.
    fn with_fold<T>(&self, chat: ChatId, f: impl FnOnce(&Fold) -> T) -> Result<T, ChatLogError> {
        let created = self.created(chat)?;
        let envelope = self.envelope_of(chat, created)?;
        let mut kept = self.kept_lock();
        let entry = self.refreshed(&mut kept, chat)?;
        let (mut fold, folded) = match entry.fold.take() {
            Some((fold, n)) if fold.envelope() == &envelope && n <= entry.events.len() => (fold, n),
            _ => (Fold::with_envelope(envelope), 0),
        };
        for event in &entry.events[folded..] {
            fold.apply(event);
        }
        let out = f(&fold);
        entry.fold = Some((fold, entry.events.len()));
        Ok(out)
    }
}

/// Appends `event` to `chat` inside the caller's write transaction (the chat exists): the
/// next seq, the row, and the archive's index of it.
pub(super) fn append_in(tx: &Connection, chat: ChatId, event: &Event) -> rusqlite::Result<Seq> {
    let (seq, unix_ms) = append_row(tx, chat, event)?;
    // The archive in the same transaction: never behind the log.
    archive::index_event(tx, chat, seq, unix_ms, event)?;
    Ok(seq)
}

/// The event's row alone: its seq and time.
fn append_row(tx: &Connection, chat: ChatId, event: &Event) -> rusqlite::Result<(Seq, i64)> {
    let seq: i64 = tx
        .prepare_cached("SELECT coalesce(max(seq), 0) + 1 FROM events WHERE chat = ?1")?
        .query_row([chat], |r| r.get(0))?;
    let unix_ms = now_ms();
    tx.prepare_cached(
        "INSERT INTO events (chat, seq, unix_ms, kind, payload) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        chat,
        seq,
        unix_ms,
        event.kind(),
        event.payload().to_string()
    ])?;
    Ok((seq as Seq, unix_ms))
}
