//! The consented memory (spec 20 §2): facts a person chose to keep – a preference, a
//! correction, an external reference, or a fact of one project – stored in the user's data
//! folder (never in a project file), searchable through the retrieval engine, and carried
//! into requests as a compact index.
//!
//! Every write here is a person's: this crate has no "the model said so" path (the model's
//! `propose` only queues a chip in the UI). Every write is redacted first
//! (`sextant-redact`); a text that is only secrets is refused.
//!
//! Caps, each an error that says what to do, never a silent cut:
//! [`MAX_TEXT_CHARS`] per fact; [`MAX_FACTS`] facts, the least recently used evicted (and
//! named) to make room; [`MAX_FILE_BYTES`] for the store file.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use sextant_retrieval::diagnostics::{Collector, Purpose};
use sextant_retrieval::store::StoreError;
use sextant_retrieval::{Doc, Embedder, Index, Query, Scope, Track};

pub const MAX_TEXT_CHARS: usize = 400;
pub const MAX_FACTS: usize = 100;
pub const MAX_FILE_BYTES: u64 = 256 * 1024;
/// The most a request's memory index may take.
pub const MAX_INDEX_BYTES: usize = 4096;

/// What kind of fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Category {
    /// How the person likes things ("I prefer hex in the terminal").
    Preference,
    /// Something the assistant got wrong and must not again.
    Correction,
    /// A pointer to something outside (a datasheet, a wiki page).
    Reference,
    /// A fact of one project (its baud rate, its parser); only seen with that project open.
    Project,
}

impl Category {
    pub const ALL: [Category; 4] = [
        Category::Preference,
        Category::Correction,
        Category::Reference,
        Category::Project,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Category::Preference => "preference",
            Category::Correction => "correction",
            Category::Reference => "reference",
            Category::Project => "project",
        }
    }

    fn parse(s: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.name() == s)
    }
}

/// One fact.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Fact {
    pub id: i64,
    pub category: Category,
    pub text: String,
    /// The project file it belongs to (project facts only).
    pub project: Option<String>,
    pub created_unix_ms: i64,
    pub last_used_unix_ms: i64,
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Written {
    pub fact: Fact,
    /// The fact removed to make room (the least recently used), if one was.
    pub evicted: Option<Fact>,
    /// The kinds of secret taken out of the text.
    pub redacted: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("a fact is at most {MAX_TEXT_CHARS} characters; this one has {0} – shorten it or split it in two")]
    TooLong(usize),
    #[error("the fact is empty")]
    Empty,
    #[error(transparent)]
    Redacted(#[from] sextant_redact::RedactError),
    #[error("a project fact needs its project; other facts belong to no project")]
    ProjectMismatch,
    #[error("no fact {0}")]
    NotFound(i64),
    #[error(
        "the memory file would grow past {} KiB; delete facts you no longer need first",
        MAX_FILE_BYTES / 1024
    )]
    FileFull,
    #[error("the memory store: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("the memory store: {0}")]
    Store(#[from] StoreError),
}

/// The memory, in one SQLite file.
pub struct MemoryStore {
    conn: Connection,
    index: Index,
    path: PathBuf,
}

const GLOBAL_SCOPE: &str = "global";

fn scope_of(project: Option<&str>) -> String {
    match project {
        Some(p) => format!("project:{p}"),
        None => GLOBAL_SCOPE.to_string(),
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl MemoryStore {
    /// Opens (or creates) the store at `path`, embedding with `embedder` (rows of another
    /// embedder's vectors are re-embedded).
    pub fn open(
        path: &Path,
        embedder: Arc<dyn Embedder>,
        diagnostics: Arc<Collector>,
    ) -> Result<MemoryStore, MemoryError> {
        let conn = Connection::open(path)?;
        // Small pages: a store of a hundred short facts wastes most of 4 KiB pages; and a
        // deleted fact gives its space back, so the file cap counts what is kept.
        conn.execute_batch("PRAGMA page_size = 1024; PRAGMA auto_vacuum = FULL;")?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE IF NOT EXISTS facts (
                id INTEGER PRIMARY KEY,
                category TEXT NOT NULL,
                text TEXT NOT NULL,
                project TEXT,
                created_ms INTEGER NOT NULL,
                last_used_ms INTEGER NOT NULL
             );",
        )?;
        let index = Index::new("memory", embedder, diagnostics)?;
        index.create(&conn)?;
        index.refresh_vectors(&conn)?;
        Ok(MemoryStore {
            conn,
            index,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    /// Adds a fact (the person said yes). Redacted first; at [`MAX_FACTS`] the least
    /// recently used fact makes room and is named in the result.
    pub fn add(
        &mut self,
        category: Category,
        text: &str,
        project: Option<&str>,
    ) -> Result<Written, MemoryError> {
        let (text, redacted) = checked_text(text)?;
        if (category == Category::Project) != project.is_some() {
            return Err(MemoryError::ProjectMismatch);
        }
        let now = now_ms();
        let tx = self.conn.transaction()?;
        let count: i64 = tx.query_row("SELECT count(*) FROM facts", [], |r| r.get(0))?;
        let evicted = if count as usize >= MAX_FACTS {
            let lru = tx
                .query_row(
                    "SELECT id, category, text, project, created_ms, last_used_ms FROM facts
                     ORDER BY last_used_ms, id LIMIT 1",
                    [],
                    fact_from_row,
                )
                .optional()?;
            if let Some(f) = &lru {
                tx.execute("DELETE FROM facts WHERE id = ?1", [f.id])?;
                self.index.remove(&tx, &[&f.id.to_string()])?;
            }
            lru
        } else {
            None
        };
        tx.execute(
            "INSERT INTO facts (category, text, project, created_ms, last_used_ms) VALUES (?1, ?2, ?3, ?4, ?4)",
            params![category.name(), text, project, now],
        )?;
        let id = tx.last_insert_rowid();
        let scope = scope_of(project);
        let id_text = id.to_string();
        self.index.put(
            &tx,
            &[Doc {
                id: &id_text,
                scope: &scope,
                kind: category.name(),
                content: &text,
                importance: 0.5,
            }],
        )?;
        check_size(&tx)?;
        tx.commit()?;
        let fact = self.get(id)?.ok_or(MemoryError::NotFound(id))?;
        Ok(Written {
            fact,
            evicted,
            redacted,
        })
    }

    /// Replaces a fact's text (redacted, capped).
    pub fn edit(&mut self, id: i64, text: &str) -> Result<Written, MemoryError> {
        let old = self.get(id)?.ok_or(MemoryError::NotFound(id))?;
        let (text, redacted) = checked_text(text)?;
        let tx = self.conn.transaction()?;
        tx.execute(
            "UPDATE facts SET text = ?1, last_used_ms = ?2 WHERE id = ?3",
            params![text, now_ms(), id],
        )?;
        let scope = scope_of(old.project.as_deref());
        let id_text = id.to_string();
        self.index.put(
            &tx,
            &[Doc {
                id: &id_text,
                scope: &scope,
                kind: old.category.name(),
                content: &text,
                importance: 0.5,
            }],
        )?;
        check_size(&tx)?;
        tx.commit()?;
        let fact = self.get(id)?.ok_or(MemoryError::NotFound(id))?;
        Ok(Written {
            fact,
            evicted: None,
            redacted,
        })
    }

    /// Deletes a fact; `false` when there was none.
    pub fn delete(&mut self, id: i64) -> Result<bool, MemoryError> {
        let tx = self.conn.transaction()?;
        let n = tx.execute("DELETE FROM facts WHERE id = ?1", [id])?;
        self.index.remove(&tx, &[&id.to_string()])?;
        tx.commit()?;
        Ok(n > 0)
    }

    /// Deletes every fact; how many there were.
    pub fn clear(&mut self) -> Result<usize, MemoryError> {
        let tx = self.conn.transaction()?;
        let ids: Vec<String> = tx
            .prepare("SELECT id FROM facts")?
            .query_map([], |r| r.get::<_, i64>(0))?
            .map(|r| r.map(|id| id.to_string()))
            .collect::<Result<_, _>>()?;
        let n = tx.execute("DELETE FROM facts", [])?;
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        self.index.remove(&tx, &refs)?;
        tx.commit()?;
        Ok(n)
    }

    pub fn get(&self, id: i64) -> Result<Option<Fact>, MemoryError> {
        Ok(self
            .conn
            .query_row(
                "SELECT id, category, text, project, created_ms, last_used_ms FROM facts WHERE id = ?1",
                [id],
                fact_from_row,
            )
            .optional()?)
    }

    /// Facts, newest first; of one category if given.
    pub fn list(&self, category: Option<Category>) -> Result<Vec<Fact>, MemoryError> {
        let mut stmt = self.conn.prepare(
            "SELECT id, category, text, project, created_ms, last_used_ms FROM facts
             WHERE ?1 IS NULL OR category = ?1 ORDER BY created_ms DESC, id DESC",
        )?;
        let rows = stmt.query_map([category.map(Category::name)], fact_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The facts that match `query`, best first: install-wide facts and, with a project
    /// open, that project's facts – never another project's.
    pub fn search(
        &self,
        query: &str,
        project: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Fact>, MemoryError> {
        let mut scored: Vec<(f64, i64)> = Vec::new();
        let scopes: Vec<String> = std::iter::once(GLOBAL_SCOPE.to_string())
            .chain(project.map(|p| scope_of(Some(p))))
            .collect();
        for scope in &scopes {
            let hits = self.index.search(
                &self.conn,
                &Query {
                    scope: Scope::One(scope),
                    text: query,
                    track: Track::Hybrid,
                    limit,
                    purpose: Purpose::Recall,
                },
            )?;
            scored.extend(
                hits.into_iter()
                    .filter_map(|h| h.id.parse().ok().map(|id| (h.score, id))),
            );
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut out = Vec::new();
        for (_, id) in scored.into_iter().take(limit) {
            if let Some(f) = self.get(id)? {
                out.push(f);
            }
        }
        Ok(out)
    }

    /// Marks facts as used now (they went into a request).
    pub fn touch(&mut self, ids: &[i64]) -> Result<(), MemoryError> {
        let now = now_ms();
        let tx = self.conn.transaction()?;
        for id in ids {
            tx.execute(
                "UPDATE facts SET last_used_ms = ?1 WHERE id = ?2",
                params![now, id],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// The compact index for one request: the facts that match `message` first, then the
    /// most recently used, one line each (`- [category] text`), at most
    /// [`MAX_INDEX_BYTES`]; the facts it holds are touched. `None` when there are none.
    pub fn request_index(
        &mut self,
        message: &str,
        project: Option<&str>,
    ) -> Result<Option<(String, Vec<i64>)>, MemoryError> {
        let mut ids: Vec<i64> = self
            .search(message, project, MAX_FACTS)?
            .into_iter()
            .map(|f| f.id)
            .collect();
        let mut recent = self.conn.prepare(
            "SELECT id FROM facts WHERE project IS NULL OR project = ?1 ORDER BY last_used_ms DESC, id DESC",
        )?;
        let by_recency: Vec<i64> = recent
            .query_map([project], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        drop(recent);
        for id in by_recency {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        let mut text = String::new();
        let mut used = Vec::new();
        for id in ids {
            let Some(f) = self.get(id)? else { continue };
            let line = format!("- [{}] {}\n", f.category.name(), f.text.replace('\n', " "));
            if text.len() + line.len() > MAX_INDEX_BYTES {
                continue;
            }
            text.push_str(&line);
            used.push(id);
        }
        if used.is_empty() {
            return Ok(None);
        }
        self.touch(&used)?;
        Ok(Some((text, used)))
    }
}

/// The text as it would be kept: trimmed, capped, redacted (and refused when only secrets).
fn checked_text(text: &str) -> Result<(String, Vec<String>), MemoryError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(MemoryError::Empty);
    }
    let chars = text.chars().count();
    if chars > MAX_TEXT_CHARS {
        return Err(MemoryError::TooLong(chars));
    }
    let r = sextant_redact::redact_for_keeping(text)?;
    Ok((r.text, r.kinds.into_iter().map(String::from).collect()))
}

/// Refuses a transaction that would grow the file past the cap.
fn check_size(conn: &Connection) -> Result<(), MemoryError> {
    let pages: u64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let page_size: u64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    if pages * page_size > MAX_FILE_BYTES {
        return Err(MemoryError::FileFull);
    }
    Ok(())
}

fn fact_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Fact> {
    let category: String = r.get(1)?;
    Ok(Fact {
        id: r.get(0)?,
        category: Category::parse(&category).unwrap_or(Category::Reference),
        text: r.get(2)?,
        project: r.get(3)?,
        created_unix_ms: r.get(4)?,
        last_used_unix_ms: r.get(5)?,
    })
}
