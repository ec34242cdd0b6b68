//! The archive: every chat's events in one full-text index, searched across chats or within
//! one (spec 30, A2).
//!
//! - **Index.** Each event's searchable text ([`searchable_text`]) is tokenised by the
//!   retrieval engine's tokenizer (`sextant_retrieval::text`) and written to `archive_fts`
//!   in the append's own transaction; a chat's rows leave in its delete's (a trigger). So
//!   the index is never behind the log and never holds a deleted chat.
//! - **Queries** match every word ([`text::all_words_query`]): a code or path word matches
//!   itself or all its parts, a CJK run each of its 2-grams. Ranked by BM25, ties by age.
//! - **Surfaces** are what [`fold`](super::fold) gives each event *now*. They are kept in
//!   `archive_docs.surface`, valid while the chat's log ends at `chats.labelled_seq` (the
//!   log is append-only, so a chat's labels change only when it grows): a search first
//!   folds again the chats that grew since, in its own transaction, then filters in SQL.
//!   The append does not label (it would fold the whole chat on every event);
//!   `meta.labels_version` relabels everything when a build's fold labels differently.
//! - **Ranking** reads every match's BM25 from FTS5 and orders them here, then looks up
//!   the best candidates' rows until a page passes the filter: FTS5's own `ORDER BY rank`
//!   and a join of every match both cost twice as much on a common word.
//! - **Visibility** is a filter in SQL: a project-scoped search cannot see another
//!   project's chats.
//! - **Cursors** are opaque and signed (HMAC-SHA256 with the install's key): they bind the
//!   normalised request and the result set the first page ranked (`archive_result_sets`:
//!   every match's rowid in rank order, kept an hour), and carry the position the next page
//!   starts at. Appends anywhere – the model's own tool result, another chat streaming –
//!   never invalidate a cursor, and the next page never repeats or skips a hit: its order
//!   was fixed when the search began (BM25 ranks themselves shift as the index grows). A
//!   row deleted since is skipped; an edited cursor is refused as forged.

use std::collections::{BTreeSet, HashMap, HashSet};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sextant_retrieval::text;
use sha2::{Digest, Sha256};

use crate::engine::chatlog::event::{Event, LoggedEvent, Seq};
use crate::engine::chatlog::fold::{fold, Surface};
use crate::engine::chatlog::{ChatId, ChatLog, ChatLogError};

/// Most of an event's text the index reads: a pasted megabyte log is found by its first
/// quarter megabyte.
pub const MAX_INDEXED_BYTES: usize = 256 * 1024;
/// Hits per page unless asked otherwise, and the most a page may hold.
pub const DEFAULT_PAGE: usize = 20;
pub const MAX_PAGE: usize = 100;
/// The most bytes of text a snippet shows around its first match.
const SNIPPET_BEFORE: usize = 60;
const SNIPPET_AFTER: usize = 180;

type HmacSha256 = Hmac<Sha256>;

/// The text of an event that search reads and snippets show.
pub fn searchable_text(event: &Event) -> String {
    let mut text = match event {
        Event::User { text } => text.clone(),
        Event::Assistant { text } => crate::engine::sentinel::strip_for_display(text).to_string(),
        Event::ToolCall { name, args, .. } => {
            let mut out = name.clone();
            string_leaves(args, &mut out);
            out
        }
        Event::ToolResult { content, .. } => content.clone(),
        Event::Compaction { summary, .. } => summary.clone(),
        Event::Citation { sources, .. } => {
            let mut out = String::from("cited");
            string_leaves(sources, &mut out);
            out
        }
        Event::Structural(s) => {
            let mut out = s.kind.replace('_', " ");
            string_leaves(&s.payload, &mut out);
            out
        }
    };
    if text.len() > MAX_INDEXED_BYTES {
        let mut end = MAX_INDEXED_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Appends every string (and number) inside `value`, a line each.
fn string_leaves(value: &Value, out: &mut String) {
    match value {
        Value::String(s) => {
            out.push('\n');
            out.push_str(s);
        }
        Value::Number(n) => {
            out.push('\n');
            out.push_str(&n.to_string());
        }
        Value::Array(items) => items.iter().for_each(|v| string_leaves(v, out)),
        Value::Object(map) => map.values().for_each(|v| string_leaves(v, out)),
        Value::Bool(_) | Value::Null => {}
    }
}

/// Indexes one event; runs inside the append's transaction.
pub(crate) fn index_event(
    tx: &Connection,
    chat: ChatId,
    seq: Seq,
    unix_ms: i64,
    event: &Event,
) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO archive_docs (chat, seq, unix_ms, kind) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![chat, seq as i64, unix_ms, event.kind()])?;
    let rowid = tx.last_insert_rowid();
    let terms = text::index_terms(&searchable_text(event)).join(" ");
    tx.prepare_cached("INSERT INTO archive_fts (rowid, terms) VALUES (?1, ?2)")?
        .execute(params![rowid, terms])?;
    bump_generation(tx)
}

pub(crate) fn bump_generation(tx: &Connection) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'archive_generation'",
    )?
    .execute([])?;
    Ok(())
}

/// Indexes every event already logged (the migration that creates the archive). An event
/// whose payload no longer parses is skipped: the chat still opens as it did.
pub(crate) fn index_all(tx: &Connection) -> rusqlite::Result<()> {
    let rows: Vec<(ChatId, i64, i64, String, String)> = {
        let mut stmt =
            tx.prepare("SELECT chat, seq, unix_ms, kind, payload FROM events ORDER BY chat, seq")?;
        let rows = stmt.query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?;
        rows.collect::<Result<_, _>>()?
    };
    for (chat, seq, unix_ms, kind, payload) in rows {
        let event = serde_json::from_str(&payload)
            .ok()
            .and_then(|p| Event::from_parts(&kind, p).ok());
        match event {
            Some(event) => index_event(tx, chat, seq as Seq, unix_ms, &event)?,
            None => tracing::warn!(chat, seq, "an unreadable event was left out of the archive"),
        }
    }
    Ok(())
}

/// 32 bytes from the OS's randomness, hex.
pub(crate) fn new_install_key() -> String {
    let mut key = [0u8; 32];
    if let Err(e) = getrandom::fill(&mut key) {
        // No randomness at all is a broken machine; the key still differs per install.
        tracing::error!("the OS gave no randomness for the install key: {e}");
        let fallback = format!(
            "{:?}{:?}",
            std::time::SystemTime::now(),
            std::collections::hash_map::RandomState::new()
        );
        key.copy_from_slice(&Sha256::digest(fallback.as_bytes()));
    }
    key.iter().map(|b| format!("{b:02x}")).collect()
}

// ---- requests and results ------------------------------------------------------------------

/// Which chats a search may see.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "scope", rename_all = "camelCase")]
pub enum Visibility {
    /// Every chat (the person's own view of all of them).
    #[default]
    All,
    /// Only chats started in `project` (a project file's path; `null`: chats started with no
    /// saved project).
    Project { project: Option<String> },
}

/// What narrows a search. Every field is optional; empty means no narrowing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct SearchFilter {
    /// Surfaces to include; all three when absent.
    pub surfaces: Option<BTreeSet<Surface>>,
    /// Event kinds to include (`user_message`, `tool_result`, `checkpoint_created`, …).
    pub kinds: Option<BTreeSet<String>>,
    /// Which chats; every chat when absent.
    pub visibility: Visibility,
    /// Events at or after this time (Unix ms).
    pub since_unix_ms: Option<i64>,
    /// Events at or before this time (Unix ms).
    pub until_unix_ms: Option<i64>,
}

/// One search: the query, its filter, and the cursor of the page before (none: the first).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct SearchRequest {
    pub query: String,
    pub filter: SearchFilter,
    pub cursor: Option<String>,
    /// Hits per page (default 20, at most 100).
    pub limit: Option<usize>,
}

/// A piece of a snippet: text, and whether it is what matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SnippetPart {
    pub text: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hit: bool,
}

/// One hit, with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    pub chat: ChatId,
    pub chat_title: String,
    pub project: Option<String>,
    pub seq: Seq,
    pub unix_ms: i64,
    /// The event's stored kind.
    pub kind: String,
    /// Who it is from: `user`, `assistant`, `tool` (a result) or `app` (Sextant's own
    /// records).
    pub role: &'static str,
    /// What the model sees of it now.
    pub surface: Surface,
    pub snippet: Vec<SnippetPart>,
}

/// A page of hits.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchPage {
    pub hits: Vec<SearchHit>,
    /// The next page's cursor; `None` on the last page.
    pub next_cursor: Option<String>,
    /// The index generation the page was read at.
    pub generation: u64,
}

/// Who an event is from, for a hit.
pub fn role_of(kind: &str) -> &'static str {
    match kind {
        "user_message" => "user",
        "assistant_message" | "tool_call" => "assistant",
        "tool_result" => "tool",
        _ => "app",
    }
}

// ---- cursors -------------------------------------------------------------------------------

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct CursorBody {
    /// The normalised request's hash.
    r: String,
    /// The result set the first page ranked (`archive_result_sets.id`).
    set: i64,
    /// Where in it the next page starts.
    pos: u64,
}

/// Matches as (BM25 rank, rowid), best first.
type Ranked = Vec<(f64, i64)>;

/// Most matches a result set keeps (a page is at most 100 hits: 500 pages).
const MAX_RESULT_SET: usize = 50_000;
/// How long a result set is kept for its next pages.
const RESULT_SET_TTL_MS: i64 = 60 * 60 * 1000;
/// How many result sets are kept at once (the newest): each holds up to 800 KB, and any
/// client may search as fast as its door allows, so the hour alone does not bound them.
pub const MAX_RESULT_SETS: usize = 64;

/// The request as a cursor binds it: the query normalised (NFKC, lower case, spaces
/// collapsed), the scope, the filter (sets already sorted) and the page size.
fn request_hash(chat: Option<ChatId>, request: &SearchRequest, limit: usize) -> String {
    let query = text::normalize(&request.query)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let normal = json!({
        "chat": chat,
        "query": query,
        "filter": request.filter,
        "limit": limit,
    });
    let digest = Sha256::digest(normal.to_string().as_bytes());
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

fn sign(key: &[u8], body: &[u8]) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(b"sextant-archive-cursor-v1\0");
    mac.update(body);
    mac
}

fn encode_cursor(key: &[u8], body: &CursorBody) -> String {
    let json = serde_json::to_vec(body).expect("a cursor serializes");
    let tag = sign(key, &json).finalize().into_bytes();
    format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(&json),
        URL_SAFE_NO_PAD.encode(tag)
    )
}

fn decode_cursor(key: &[u8], cursor: &str) -> Result<CursorBody, ChatLogError> {
    let forged = || {
        ChatLogError::Invalid(
            "this search cursor is damaged or was not issued by this Sextant; search again without a cursor"
                .into(),
        )
    };
    let (body, tag) = cursor.split_once('.').ok_or_else(forged)?;
    let body = URL_SAFE_NO_PAD.decode(body).map_err(|_| forged())?;
    let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| forged())?;
    // Constant time: a caller cannot find a valid tag byte by byte.
    sign(key, &body).verify_slice(&tag).map_err(|_| forged())?;
    serde_json::from_slice(&body).map_err(|_| forged())
}

// ---- search --------------------------------------------------------------------------------

/// The fold's labelling the kept labels came from: bump it when the fold labels any event
/// differently, and every chat is labelled again on the next search.
const LABELS_VERSION: &str = "1";

/// Relabels every chat when the kept labels are from another fold (or none yet).
pub(crate) fn check_labels_version(conn: &Connection) -> rusqlite::Result<()> {
    let kept: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'labels_version'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if kept.as_deref() != Some(LABELS_VERSION) {
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE;
             UPDATE chats SET labelled_seq = 0;
             INSERT OR REPLACE INTO meta (key, value) VALUES ('labels_version', '{LABELS_VERSION}');
             COMMIT;"
        ))?;
    }
    Ok(())
}

fn surface_name(surface: Surface) -> &'static str {
    match surface {
        Surface::Current => "current",
        Surface::Shadowed => "shadowed",
        Surface::LogOnly => "log_only",
    }
}

fn surface_from(name: Option<&str>) -> Surface {
    match name {
        Some("current") => Surface::Current,
        Some("shadowed") => Surface::Shadowed,
        // Unlabelled (a chat whose log cannot be folded): the model does not see it.
        _ => Surface::LogOnly,
    }
}

/// The chats whose log grew since they were labelled.
fn stale_chats(conn: &Connection) -> rusqlite::Result<Vec<(ChatId, i64)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, len FROM (SELECT c.id, c.labelled_seq,
                (SELECT coalesce(max(seq), 0) FROM events e WHERE e.chat = c.id) AS len
             FROM chats c) WHERE len != labelled_seq",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// Folds each stale chat and writes the labels that changed, inside the caller's write
/// transaction.
fn relabel(
    tx: &Connection,
    stale: &[(ChatId, i64)],
    path: &std::path::Path,
) -> Result<(), ChatLogError> {
    let sql = |e| ChatLogError::from_sql(e, path);
    for &(chat, len) in stale {
        match load_events(tx, chat, path) {
            Ok(events) => {
                let labels = fold(&events).surface;
                let mut update = tx
                    .prepare_cached(
                        "UPDATE archive_docs SET surface = ?3
                         WHERE chat = ?1 AND seq = ?2 AND surface IS NOT ?3",
                    )
                    .map_err(sql)?;
                for (seq, surface) in labels {
                    update
                        .execute(params![chat, seq as i64, surface_name(surface)])
                        .map_err(sql)?;
                }
            }
            // A damaged log stays out of the model's view, and out of the way of every
            // other chat's search; opening it reports the damage.
            Err(e @ ChatLogError::Corrupt { .. }) => {
                tracing::warn!(chat, "the archive cannot label a damaged chat: {e}");
            }
            Err(e) => return Err(e),
        }
        tx.prepare_cached("UPDATE chats SET labelled_seq = ?2 WHERE id = ?1")
            .map_err(sql)?
            .execute(params![chat, len])
            .map_err(sql)?;
    }
    Ok(())
}

/// A candidate row of the index.
struct Row {
    chat: ChatId,
    seq: Seq,
    unix_ms: i64,
    kind: String,
    surface: Surface,
}

/// The request's page size, once it and the time range are checked.
fn checked_limit(request: &SearchRequest) -> Result<usize, ChatLogError> {
    let limit = request.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ChatLogError::Invalid(format!(
            "a search page holds 1 to {MAX_PAGE} hits, not {limit}"
        )));
    }
    if let (Some(a), Some(b)) = (request.filter.since_unix_ms, request.filter.until_unix_ms) {
        if a > b {
            return Err(ChatLogError::Invalid(format!(
                "the time range is empty: `sinceUnixMs` {a} is after `untilUnixMs` {b}"
            )));
        }
    }
    Ok(limit)
}

/// The ranked matches a page continues, and where: the cursor's result set and position,
/// once the cursor is checked to be of this search (`hash`).
fn resume(
    tx: &Connection,
    key: &[u8],
    cursor: &str,
    hash: &str,
    path: &std::path::Path,
) -> Result<(i64, Ranked, usize), ChatLogError> {
    let body = decode_cursor(key, cursor)?;
    if body.r != hash {
        return Err(ChatLogError::Invalid(
            "this cursor belongs to another search (its query, filter or page size differ); send the same search with it, or search again without a cursor".into(),
        ));
    }
    let blob: Option<Vec<u8>> = tx
        .query_row(
            "SELECT ranked FROM archive_result_sets WHERE id = ?1 AND request = ?2",
            params![body.set, hash],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| ChatLogError::from_sql(e, path))?;
    let blob = blob.ok_or_else(|| {
        ChatLogError::Invalid(
            "this search is no longer kept (it is more than an hour old, or many searches came after it); search again without a cursor".into(),
        )
    })?;
    let ranked = blob
        .chunks_exact(16)
        .map(|c| {
            let score = f64::from_le_bytes(c[..8].try_into().expect("8 bytes"));
            let rowid = i64::from_le_bytes(c[8..].try_into().expect("8 bytes"));
            (score, rowid)
        })
        .collect();
    Ok((body.set, ranked, body.pos as usize))
}

/// Keeps a first page's ranked matches for its next pages; drops sets past their hour.
fn keep_result_set(
    tx: &Connection,
    hash: &str,
    ranked: &[(f64, i64)],
    now_ms: i64,
) -> rusqlite::Result<i64> {
    tx.execute(
        "DELETE FROM archive_result_sets WHERE made_unix_ms < ?1",
        [now_ms - RESULT_SET_TTL_MS],
    )?;
    let mut blob = Vec::with_capacity(ranked.len().min(MAX_RESULT_SET) * 16);
    for (score, rowid) in ranked.iter().take(MAX_RESULT_SET) {
        blob.extend_from_slice(&score.to_le_bytes());
        blob.extend_from_slice(&rowid.to_le_bytes());
    }
    tx.execute(
        "INSERT INTO archive_result_sets (made_unix_ms, request, ranked) VALUES (?1, ?2, ?3)",
        params![now_ms, hash, blob],
    )?;
    let id = tx.last_insert_rowid();
    tx.execute(
        "DELETE FROM archive_result_sets WHERE id <= ?1",
        [id - MAX_RESULT_SETS as i64],
    )?;
    Ok(id)
}

/// The index rows of one chat (`None`: every chat's rows may match).
fn chat_rowids(
    tx: &Connection,
    chat: Option<ChatId>,
    path: &std::path::Path,
) -> Result<Option<HashSet<i64>>, ChatLogError> {
    let sql = |e| ChatLogError::from_sql(e, path);
    // One chat's search keeps only its rows (a range of the (chat, seq) index), so a
    // common word's matches in other chats cost no lookups.
    let Some(chat) = chat else {
        return Ok(None);
    };
    let rows = tx
        .prepare_cached("SELECT rowid FROM archive_docs WHERE chat = ?1")
        .map_err(sql)?
        .query_map([chat], |r| r.get(0))
        .map_err(sql)?
        .collect::<Result<_, _>>()
        .map_err(sql)?;
    Ok(Some(rows))
}

/// Every (BM25 rank, rowid) the full-text query matches in the scope, best first (BM25 is
/// negative), ties by age.
fn ranked_matches(
    tx: &Connection,
    fts: &str,
    scope: Option<&HashSet<i64>>,
    path: &std::path::Path,
) -> Result<Vec<(f64, i64)>, ChatLogError> {
    let sql = |e| ChatLogError::from_sql(e, path);
    let mut stmt = tx
        .prepare_cached(
            "SELECT bm25(archive_fts), rowid FROM archive_fts WHERE archive_fts MATCH ?1",
        )
        .map_err(sql)?;
    let rows = stmt
        .query_map([fts], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(sql)?;
    let mut ranked = Vec::new();
    for row in rows {
        let (score, rowid): (f64, i64) = row.map_err(sql)?;
        if scope.is_none_or(|s| s.contains(&rowid)) {
            ranked.push((score, rowid));
        }
    }
    ranked.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    Ok(ranked)
}

/// The first `limit + 1` rows the filter keeps among `ranked[from..]` (one more than a
/// page: it tells whether a next page exists), in order, and the position after the page's
/// last row (where the next page starts). A row deleted since it was ranked is skipped.
fn kept_rows(
    tx: &Connection,
    ranked: &[(f64, i64)],
    from: usize,
    limit: usize,
    filter: &SearchFilter,
    path: &std::path::Path,
) -> Result<(Vec<Row>, usize), ChatLogError> {
    let sql = |e| ChatLogError::from_sql(e, path);
    let mut found: Vec<Row> = Vec::new();
    let mut next = ranked.len();
    let mut lookup = tx
        .prepare_cached(
            "SELECT d.chat, d.seq, d.unix_ms, d.kind, d.surface, c.project
             FROM archive_docs d JOIN chats c ON c.id = d.chat WHERE d.rowid = ?1",
        )
        .map_err(sql)?;
    for (at, &(_, rowid)) in ranked.iter().enumerate().skip(from) {
        let row = lookup
            .query_row([rowid], |r| {
                Ok((
                    Row {
                        chat: r.get(0)?,
                        seq: r.get::<_, i64>(1)? as Seq,
                        unix_ms: r.get(2)?,
                        kind: r.get(3)?,
                        surface: surface_from(r.get::<_, Option<String>>(4)?.as_deref()),
                    },
                    r.get::<_, Option<String>>(5)?,
                ))
            })
            .optional()
            .map_err(sql)?;
        let Some((row, row_project)) = row else {
            continue;
        };
        if filter_keeps(filter, &row, row_project.as_deref()) {
            found.push(row);
            if found.len() == limit {
                next = at + 1;
            }
            if found.len() > limit {
                break;
            }
        }
    }
    Ok((found, next))
}

/// Whether the filter keeps a candidate row of a chat started in `row_project`.
fn filter_keeps(filter: &SearchFilter, row: &Row, row_project: Option<&str>) -> bool {
    let project = match &filter.visibility {
        Visibility::All => None,
        Visibility::Project { project } => Some(project.as_deref()),
    };
    project.is_none_or(|p| p == row_project)
        && filter.since_unix_ms.is_none_or(|t| row.unix_ms >= t)
        && filter.until_unix_ms.is_none_or(|t| row.unix_ms <= t)
        && filter.kinds.as_ref().is_none_or(|k| k.contains(&row.kind))
        && filter
            .surfaces
            .as_ref()
            .is_none_or(|s| s.contains(&row.surface))
}

/// The page's hits: each kept row with its chat's title and project and a snippet of its
/// event around the query's words (`marks`).
fn hits_of(
    tx: &Connection,
    found: Vec<Row>,
    marks: &HashSet<String>,
    path: &std::path::Path,
) -> Result<Vec<SearchHit>, ChatLogError> {
    let sql = |e| ChatLogError::from_sql(e, path);
    let mut titles: HashMap<ChatId, (String, Option<String>)> = HashMap::new();
    let mut hits = Vec::with_capacity(found.len());
    for row in found {
        if let std::collections::hash_map::Entry::Vacant(slot) = titles.entry(row.chat) {
            let t = tx
                .query_row(
                    "SELECT title, project FROM chats WHERE id = ?1",
                    [row.chat],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(sql)?;
            slot.insert(t);
        }
        let (title, project) = titles[&row.chat].clone();
        let event = read_event(tx, row.chat, row.seq, path)?;
        hits.push(SearchHit {
            chat: row.chat,
            chat_title: title,
            project,
            seq: row.seq,
            unix_ms: row.unix_ms,
            role: role_of(&row.kind),
            kind: row.kind,
            surface: row.surface,
            snippet: snippet(&searchable_text(&event), marks),
        });
    }
    Ok(hits)
}

impl ChatLog {
    /// Searches every chat the filter's visibility allows.
    pub fn search_sessions(&mut self, request: &SearchRequest) -> Result<SearchPage, ChatLogError> {
        self.search(None, request)
    }

    /// Searches one chat (its visibility filter still applies).
    pub fn search_events(
        &mut self,
        chat: ChatId,
        request: &SearchRequest,
    ) -> Result<SearchPage, ChatLogError> {
        self.chat(chat)?;
        self.search(Some(chat), request)
    }

    /// The archive's generation now: it changes with every append and delete.
    pub fn archive_generation(&self) -> Result<u64, ChatLogError> {
        generation(&self.conn).map_err(|e| self.sql(e))
    }

    fn search(
        &mut self,
        chat: Option<ChatId>,
        request: &SearchRequest,
    ) -> Result<SearchPage, ChatLogError> {
        let limit = checked_limit(request)?;
        let key = self.install_key()?;
        let hash = request_hash(chat, request, limit);
        let path = self.path.clone();
        let sql = |e| ChatLogError::from_sql(e, &path);
        // One transaction: the labels, the generation, the ranks and the rows are of one
        // state. A write one when a chat grew since it was labelled (known before taking
        // the lock, so a search of an unchanged archive never waits for an appender).
        let write = !stale_chats(&self.conn).map_err(sql)?.is_empty();
        let tx = self
            .conn
            .transaction_with_behavior(if write {
                TransactionBehavior::Immediate
            } else {
                TransactionBehavior::Deferred
            })
            .map_err(sql)?;
        let stale = stale_chats(&tx).map_err(sql)?;
        relabel(&tx, &stale, &path)?;
        let now = generation(&tx).map_err(sql)?;
        let Some((fts, marks)) = text::all_words_query(&request.query) else {
            tx.commit().map_err(sql)?;
            return Ok(SearchPage {
                hits: Vec::new(),
                next_cursor: None,
                generation: now,
            });
        };
        let marks: HashSet<String> = marks.into_iter().collect();
        // The first page ranks every match once; the next pages go on in that order.
        let (set, ranked, from) = match request.cursor.as_deref() {
            Some(cursor) => {
                let (set, ranked, from) = resume(&tx, &key, cursor, &hash, &path)?;
                (Some(set), ranked, from)
            }
            None => {
                let scope = chat_rowids(&tx, chat, &path)?;
                (None, ranked_matches(&tx, &fts, scope.as_ref(), &path)?, 0)
            }
        };
        let (mut found, next) = kept_rows(&tx, &ranked, from, limit, &request.filter, &path)?;
        let more = found.len() > limit;
        found.truncate(limit);
        let hits = hits_of(&tx, found, &marks, &path)?;
        tx.commit().map_err(sql)?;
        let next_cursor = if more {
            let set = match set {
                Some(set) => set,
                // Kept in a write transaction of its own: the search itself only read.
                None => {
                    let tx = self
                        .conn
                        .transaction_with_behavior(TransactionBehavior::Immediate)
                        .map_err(sql)?;
                    let set = keep_result_set(&tx, &hash, &ranked, super::store::now_ms())
                        .map_err(sql)?;
                    tx.commit().map_err(sql)?;
                    set
                }
            };
            Some(encode_cursor(
                &key,
                &CursorBody {
                    r: hash.clone(),
                    set,
                    pos: next as u64,
                },
            ))
        } else {
            None
        };
        Ok(SearchPage {
            hits,
            next_cursor,
            generation: now,
        })
    }

    /// The install's key (made with the archive); cursors are signed with it.
    pub(crate) fn install_key(&self) -> Result<Vec<u8>, ChatLogError> {
        let hex: Option<String> = self
            .conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'install_key'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        let hex = hex
            .filter(|h| h.len() == 64)
            .ok_or_else(|| ChatLogError::Damaged {
                path: self.path.display().to_string(),
                detail: "the install key is missing".into(),
            })?;
        (0..32)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16))
            .collect::<Result<_, _>>()
            .map_err(|_| ChatLogError::Damaged {
                path: self.path.display().to_string(),
                detail: "the install key is not hex".into(),
            })
    }
}

fn generation(conn: &Connection) -> rusqlite::Result<u64> {
    conn.query_row(
        "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'archive_generation'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|g| g.max(0) as u64)
}

/// A chat's log, in order, read on `conn`.
pub(crate) fn load_events(
    conn: &Connection,
    chat: ChatId,
    path: &std::path::Path,
) -> Result<Vec<LoggedEvent>, ChatLogError> {
    load_events_after(conn, chat, 0, path)
}

/// The chat's events after `after`, in order, read on `conn`.
pub(crate) fn load_events_after(
    conn: &Connection,
    chat: ChatId,
    after: Seq,
    path: &std::path::Path,
) -> Result<Vec<LoggedEvent>, ChatLogError> {
    let rows = (|| -> rusqlite::Result<Vec<(i64, i64, String, String)>> {
        let mut stmt = conn.prepare_cached(
            "SELECT seq, unix_ms, kind, payload FROM events WHERE chat = ?1 AND seq > ?2 \
             ORDER BY seq",
        )?;
        let rows = stmt.query_map(params![chat, after as i64], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })?;
        rows.collect()
    })()
    .map_err(|e| ChatLogError::from_sql(e, path))?;
    rows.into_iter()
        .map(|(seq, unix_ms, kind, payload)| {
            Ok(LoggedEvent {
                seq: seq as Seq,
                unix_ms,
                event: parse_event(chat, seq as Seq, &kind, &payload)?,
            })
        })
        .collect()
}

fn parse_event(chat: ChatId, seq: Seq, kind: &str, payload: &str) -> Result<Event, ChatLogError> {
    let corrupt = |detail: String| ChatLogError::Corrupt { chat, seq, detail };
    let payload =
        serde_json::from_str(payload).map_err(|e| corrupt(format!("payload is not JSON: {e}")))?;
    Event::from_parts(kind, payload).map_err(corrupt)
}

fn read_event(
    conn: &Connection,
    chat: ChatId,
    seq: Seq,
    path: &std::path::Path,
) -> Result<Event, ChatLogError> {
    let (kind, payload): (String, String) = conn
        .prepare_cached("SELECT kind, payload FROM events WHERE chat = ?1 AND seq = ?2")
        .map_err(|e| ChatLogError::from_sql(e, path))?
        .query_row(params![chat, seq as i64], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(|e| ChatLogError::from_sql(e, path))?;
    parse_event(chat, seq, &kind, &payload)
}

/// The text around the first match, the matched words marked. Words are the tokenizer's
/// spans, so what is marked is exactly what matched; a CJK 2-gram marks both characters.
pub fn snippet(text: &str, marks: &HashSet<String>) -> Vec<SnippetPart> {
    let spans = text::spans(text);
    let mut marked = vec![false; spans.len()];
    for (i, span) in spans.iter().enumerate() {
        marked[i] |= span.terms.iter().any(|t| marks.contains(t));
        let cjk = span.terms[0].chars().count() == 1 && span.terms[0].chars().all(text::is_cjk);
        if cjk && i + 1 < spans.len() && span.terms.get(1).is_some_and(|b| marks.contains(b)) {
            marked[i + 1] = true;
        }
    }
    let centre = marked
        .iter()
        .position(|m| *m)
        .map_or(0, |i| spans[i].range.start);
    // Start at a word, not inside one.
    let from = centre.saturating_sub(SNIPPET_BEFORE);
    let start = if from == 0 {
        0
    } else {
        spans
            .iter()
            .map(|s| s.range.start)
            .find(|&s| s >= from)
            .unwrap_or(centre)
            .min(centre)
    };
    let mut end = (centre + SNIPPET_AFTER).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    let mut parts: Vec<SnippetPart> = Vec::new();
    let mut push = |s: &str, hit: bool| {
        if s.is_empty() {
            return;
        }
        // Line breaks read as spaces in a one-line snippet.
        let s = s.replace(['\n', '\r', '\t'], " ");
        match parts.last_mut() {
            Some(p) if p.hit == hit => p.text.push_str(&s),
            _ => parts.push(SnippetPart { text: s, hit }),
        }
    };
    if start > 0 {
        push("…", false);
    }
    let mut at = start;
    let mut last_hit = false;
    for (span, m) in spans.iter().zip(&marked) {
        if span.range.end <= start || span.range.start >= end {
            continue;
        }
        if !m {
            last_hit = false;
            continue;
        }
        // Matched words with only spaces between read as one mark ("pack voltage").
        let gap = &text[at..span.range.start];
        let joins = last_hit && !gap.is_empty() && gap.chars().all(|c| c == ' ');
        push(gap, joins);
        last_hit = true;
        push(&text[span.range.clone()], true);
        at = span.range.end;
    }
    push(&text[at.min(end)..end], false);
    if end < text.len() {
        push("…", false);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `MAX_RESULT_SET` (50 000): a first page's ranked matches are kept for the next pages
    /// up to the cap, best first, and the pages read back exactly that many. Through the
    /// store's own functions: 50 001 real matching events would take minutes to append.
    #[test]
    fn a_result_set_is_cut_at_max_result_set() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = ChatLog::open(dir.path().join("chats.sqlite")).unwrap();
        let key = log.install_key().unwrap();
        let path = log.path.clone();
        let tx = log.conn.transaction().unwrap();
        let kept = |n: usize| -> Ranked {
            // Best (most negative) first, as `ranked_matches` orders them.
            let ranked: Ranked = (0..n as i64).map(|i| (i as f64 - 1e6, i + 1)).collect();
            let set =
                keep_result_set(&tx, "request", &ranked, super::super::store::now_ms()).unwrap();
            let body = CursorBody {
                r: "request".into(),
                set,
                pos: 0,
            };
            let cursor = encode_cursor(&key, &body);
            let (_, read, from) = resume(&tx, &key, &cursor, "request", &path).unwrap();
            assert_eq!(from, 0);
            let expected = &ranked[..n.min(MAX_RESULT_SET)];
            assert_eq!(read.as_slice(), expected, "a set of {n}");
            read
        };
        assert_eq!(MAX_RESULT_SET, 50_000);
        assert_eq!(kept(MAX_RESULT_SET + 1).len(), MAX_RESULT_SET);
        assert_eq!(kept(3 * MAX_RESULT_SET).len(), MAX_RESULT_SET);
        // Under the cap, every match is kept.
        assert_eq!(kept(MAX_RESULT_SET - 1).len(), MAX_RESULT_SET - 1);
    }
}
