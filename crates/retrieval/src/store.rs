//! One corpus in SQLite: a table of rows (id, scope, kind, content, importance, the vector
//! and its profile), an FTS5 index of the rows' terms (`text::index_terms`, pre-tokenised so
//! CJK 2-grams, code and path pieces are words to FTS5), and three searches over them –
//! full-text, vector, hybrid.
//!
//! The index works on a connection the caller owns, so a caller can keep it inside its own
//! transactions (the chat archive indexes an event in the transaction that appends it).
//!
//! Invariants:
//! - **Scope is enforced in SQL.** Full-text hits are joined on `scope = ?`; vector hits
//!   come from a cache filled by `WHERE scope = ?` and are re-read by rowid *and* scope
//!   before they are returned (`authoritative_revalidation`). A row of another scope is
//!   never returned, however similar.
//! - **Order is stable**: equal scores order by id.
//! - **A failed embedder loses nothing**: the row is stored and full-text indexed with no
//!   vector (`vector_cold`); [`Index::refresh_vectors`] fills it in later.
//!
//! Why pre-tokenised FTS5 and not the `trigram` tokenizer: most Chinese words are two
//! characters, which `trigram` cannot match, and `trigram` loses word-level BM25 for
//! English. The terms go space-separated into a `unicode61` column with `_` as a token
//! character, and the query goes through the same tokenizer, so "压缩架构", "架构",
//! `tableGet`, `table get` and `crates/x/y.rs` all find their row. Why brute-force vectors:
//! corpora are per user (thousands of rows, 100 k at most); a scan of the scope's cached
//! vectors takes about 1 ms at 10 k rows and needs no native vector extension.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use crate::breaker::Breaker;
use crate::diagnostics::{Collector, Degradation, Outcome, Purpose, Stage};
use crate::embed::{cosine, EmbedError, Embedder, Synonyms};
use crate::text;

/// How many candidates each track brings to the fusion.
pub const CANDIDATES: usize = 50;

/// A keyword in more than this share of the rows is too common to match on (see
/// `match_keywords`)…
pub const COMMON_SHARE: f64 = 0.1;
/// …in a corpus large enough for shares to mean something.
pub const MIN_COMMON: usize = 50;

/// The vector track's per-query floor is at least the similarity of the scope's median
/// row to the query – the typical unrelated row (see `floor_for`)…
pub const BACKGROUND_SHARE: f64 = 0.5;
/// …in a scope of at least this many rows.
pub const BACKGROUND_MIN_ROWS: usize = 20;

/// The constants a ranking depends on, in one place, so an evaluation can fit them on a
/// fixture's calibration queries ([`crate::eval::fit`]) and report figures on queries no
/// constant saw. The defaults are the embedder's profile and the constants above.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tuning {
    /// The vector track's noise floor (the profile's `min_similarity`).
    pub min_similarity: f32,
    /// Where a clear semantic match starts (the profile's `strong_similarity`).
    pub strong_similarity: f32,
    /// The semantic signal's share of the hybrid score (the profile's `semantic_weight`).
    pub semantic_weight: f32,
    /// The profile's `concept_credit`.
    pub concept_credit: f64,
    /// [`BACKGROUND_SHARE`].
    pub background_share: f64,
}

impl Tuning {
    /// What an index over `embedder` ranks with unless told otherwise.
    pub fn shipped(embedder: &dyn Embedder) -> Tuning {
        let p = embedder.profile();
        Tuning {
            min_similarity: p.min_similarity,
            strong_similarity: p.strong_similarity,
            semantic_weight: p.semantic_weight,
            concept_credit: p.concept_credit as f64,
            background_share: BACKGROUND_SHARE,
        }
    }
}

/// The hybrid score: the two signals on one absolute scale, mixed by the embedder's
/// `semantic_weight`. `lexical` is the share of the query's information (keywords weighted
/// by IDF; a thesaurus synonym counts the profile's `concept_credit`) found in the row; `semantic` is
/// the vector similarity from the floor (0) to the embedder's clear-match similarity (1).

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the retrieval store: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error(
        "`{0}` is not a corpus name (lower-case letters, digits and `_`, starting with a letter)"
    )]
    BadName(String),
    #[error("a row needs a non-empty id and scope")]
    BadRow,
    #[error("the id `{0}` belongs to a row of another scope; ids are unique across the corpus")]
    IdInOtherScope(String),
}

/// A row to store.
#[derive(Debug, Clone)]
pub struct Doc<'a> {
    pub id: &'a str,
    pub scope: &'a str,
    pub kind: &'a str,
    pub content: &'a str,
    pub importance: f32,
}

/// A stored row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: String,
    pub scope: String,
    pub kind: String,
    pub content: String,
    pub importance: f32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Track {
    Fts,
    Vector,
    Hybrid,
}

impl Track {
    pub const ALL: [Track; 3] = [Track::Hybrid, Track::Fts, Track::Vector];

    pub fn name(self) -> &'static str {
        match self {
            Track::Fts => "fts",
            Track::Vector => "vector",
            Track::Hybrid => "hybrid",
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    One(&'a str),
    /// Every scope: only for a caller that asked for all.
    Any,
}

#[derive(Debug, Clone)]
pub struct Query<'a> {
    pub scope: Scope<'a>,
    pub text: &'a str,
    pub track: Track,
    pub limit: usize,
    pub purpose: Purpose,
}

/// One result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub id: String,
    pub score: f64,
    /// Its rank in the full-text candidates (1-based), if it was one.
    pub fts_rank: Option<usize>,
    /// Its vector similarity, if it was a vector candidate.
    pub similarity: Option<f32>,
}

/// What the search keeps of one scope, as last read, and the revision it was read at:
/// the vectors, and every row's terms and thesaurus groups (so the hybrid score needs no
/// re-tokenising per query). Any write to the corpus invalidates it; the next search of
/// the scope reads it again.
struct CachedScope {
    revision: i64,
    rowids: Vec<i64>,
    /// `rowids.len() × dimensions` floats.
    vectors: Vec<f32>,
    lexical: HashMap<i64, RowLexicon>,
    /// Some rows have no vector of the current profile yet.
    cold: bool,
}

/// A row's index terms and the thesaurus groups it mentions.
struct RowLexicon {
    terms: HashSet<String>,
    groups: Vec<usize>,
}

/// A corpus: its tables' name, the embedder its vectors come from, and what it keeps in
/// memory (the vectors of recently searched scopes).
pub struct Index {
    name: String,
    embedder: Arc<dyn Embedder>,
    cache: Mutex<HashMap<String, Arc<CachedScope>>>,
    breaker: Breaker,
    diagnostics: Arc<Collector>,
    /// The thesaurus the hybrid score and candidates use (`None`: literal words only).
    synonyms: Option<&'static Synonyms>,
    /// Document frequencies looked up at a revision (valid until the corpus changes).
    df_cache: Mutex<(i64, HashMap<String, i64>)>,
    /// The ranking's constants (the shipped ones, unless an evaluation is fitting them).
    tuning: Mutex<Tuning>,
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Bytes of one stored vector element: vectors are kept as IEEE half floats, little-endian.
/// Unit vectors' elements lie in −1..1, where a half float keeps three significant digits –
/// far finer than any similarity threshold here – at half the size (a memory of a hundred
/// facts with 384-dimension vectors must fit its file cap).
const VECTOR_ELEMENT_BYTES: usize = 2;

fn vector_bytes(v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|x| half::f16::from_f32(*x).to_le_bytes())
        .collect()
}

fn vector_from(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(VECTOR_ELEMENT_BYTES)
        .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
        .collect()
}

impl Index {
    pub fn new(
        name: &str,
        embedder: Arc<dyn Embedder>,
        diagnostics: Arc<Collector>,
    ) -> Result<Index, StoreError> {
        if !valid_name(name) {
            return Err(StoreError::BadName(name.into()));
        }
        let breaker = Breaker::new(&embedder.profile().id);
        let tuning = Mutex::new(Tuning::shipped(embedder.as_ref()));
        Ok(Index {
            tuning,
            name: name.into(),
            embedder,
            cache: Mutex::new(HashMap::new()),
            breaker,
            diagnostics,
            synonyms: Some(Synonyms::v1()),
            df_cache: Mutex::new((-1, HashMap::new())),
        })
    }

    /// Without the thesaurus: literal words only (the ablation).
    pub fn without_synonyms(mut self) -> Index {
        self.synonyms = None;
        self
    }

    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.embedder
    }

    /// The constants searches rank with from now on (an evaluation fitting them); nothing
    /// cached depends on them.
    pub fn set_tuning(&self, tuning: Tuning) {
        *self.tuning.lock().unwrap_or_else(|e| e.into_inner()) = tuning;
    }

    pub fn tuning(&self) -> Tuning {
        *self.tuning.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }

    pub fn diagnostics(&self) -> &Arc<Collector> {
        &self.diagnostics
    }

    /// Creates the corpus's tables if they are missing. Idempotent.
    pub fn create(&self, conn: &Connection) -> Result<(), StoreError> {
        let n = &self.name;
        conn.execute_batch(&format!(
            "CREATE TABLE IF NOT EXISTS {n} (
                rowid INTEGER PRIMARY KEY,
                id TEXT NOT NULL UNIQUE,
                scope TEXT NOT NULL,
                kind TEXT NOT NULL,
                content TEXT NOT NULL,
                importance REAL NOT NULL DEFAULT 0,
                profile TEXT,
                vector BLOB
            );
            CREATE INDEX IF NOT EXISTS {n}_by_scope ON {n}(scope);
            -- Pre-tokenised terms (text::index_terms); `_` joins a code or path token.
            CREATE VIRTUAL TABLE IF NOT EXISTS {n}_fts USING fts5(
                terms, content='', contentless_delete=1,
                tokenize = \"unicode61 remove_diacritics 0 categories 'L* N* Co M*' tokenchars '_'\"
            );
            CREATE VIRTUAL TABLE IF NOT EXISTS {n}_vocab USING fts5vocab({n}_fts, 'row');
            CREATE TABLE IF NOT EXISTS {n}_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
            INSERT OR IGNORE INTO {n}_meta VALUES ('revision', 0);
            INSERT OR IGNORE INTO {n}_meta VALUES ('rows', (SELECT count(*) FROM {n}));
            CREATE TRIGGER IF NOT EXISTS {n}_rows_ins AFTER INSERT ON {n}
                BEGIN UPDATE {n}_meta SET value = value + 1 WHERE key = 'rows'; END;
            CREATE TRIGGER IF NOT EXISTS {n}_rows_del AFTER DELETE ON {n}
                BEGIN UPDATE {n}_meta SET value = value - 1 WHERE key = 'rows'; END;
            CREATE TRIGGER IF NOT EXISTS {n}_rev_ins AFTER INSERT ON {n}
                BEGIN UPDATE {n}_meta SET value = value + 1 WHERE key = 'revision'; END;
            CREATE TRIGGER IF NOT EXISTS {n}_rev_del AFTER DELETE ON {n}
                BEGIN UPDATE {n}_meta SET value = value + 1 WHERE key = 'revision'; END;
            CREATE TRIGGER IF NOT EXISTS {n}_rev_upd AFTER UPDATE ON {n}
                BEGIN UPDATE {n}_meta SET value = value + 1 WHERE key = 'revision'; END;"
        ))?;
        Ok(())
    }

    fn revision(&self, conn: &Connection) -> Result<i64, StoreError> {
        Ok(conn.query_row(
            &format!(
                "SELECT value FROM {}_meta WHERE key = 'revision'",
                self.name
            ),
            [],
            |r| r.get(0),
        )?)
    }

    /// Stores (or replaces) rows, embedding them in one batch. Atomic: all or none.
    pub fn put(&self, conn: &Connection, docs: &[Doc<'_>]) -> Result<(), StoreError> {
        if docs.iter().any(|d| d.id.is_empty() || d.scope.is_empty()) {
            return Err(StoreError::BadRow);
        }
        let texts: Vec<&str> = docs.iter().map(|d| d.content).collect();
        let vectors = match self.embedder.embed(&texts) {
            Ok(v) if v.len() == docs.len() => Some(v),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(
                    "embedding {} rows failed, stored without vectors: {e}",
                    docs.len()
                );
                None
            }
        };
        let profile = &self.embedder.profile().id;
        let n = &self.name;
        savepoint(conn, |conn| {
            let mut old =
                conn.prepare_cached(&format!("SELECT rowid, scope FROM {n} WHERE id = ?1"))?;
            let mut delete_fts =
                conn.prepare_cached(&format!("DELETE FROM {n}_fts WHERE rowid = ?1"))?;
            let mut delete = conn.prepare_cached(&format!("DELETE FROM {n} WHERE rowid = ?1"))?;
            let mut insert = conn.prepare_cached(&format!(
                "INSERT INTO {n} (id, scope, kind, content, importance, profile, vector)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
            ))?;
            let mut insert_fts = conn.prepare_cached(&format!(
                "INSERT INTO {n}_fts (rowid, terms) VALUES (?1, ?2)"
            ))?;
            for (i, doc) in docs.iter().enumerate() {
                let existing = old
                    .query_row([doc.id], |r| {
                        Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
                    })
                    .optional()?;
                if let Some((rowid, scope)) = existing {
                    // Ids are unique across the corpus: a row is replaced only by its own scope.
                    if scope != doc.scope {
                        return Err(StoreError::IdInOtherScope(doc.id.to_string()));
                    }
                    delete_fts.execute([rowid])?;
                    delete.execute([rowid])?;
                }
                let dims = self.embedder.profile().dimensions;
                let vector = vectors
                    .as_ref()
                    .map(|v| &v[i])
                    .filter(|v| v.len() == dims && v.iter().all(|x| x.is_finite()))
                    .map(|v| vector_bytes(v));
                insert.execute(params![
                    doc.id,
                    doc.scope,
                    doc.kind,
                    doc.content,
                    if doc.importance.is_finite() {
                        doc.importance as f64
                    } else {
                        0.0
                    },
                    vector.as_ref().map(|_| profile.as_str()),
                    vector
                ])?;
                let rowid = conn.last_insert_rowid();
                insert_fts.execute(params![rowid, text::index_terms(doc.content).join(" ")])?;
            }
            Ok(())
        })
    }

    /// Removes rows by id (unknown ids are ignored). Atomic.
    pub fn remove(&self, conn: &Connection, ids: &[&str]) -> Result<usize, StoreError> {
        let n = &self.name;
        savepoint(conn, |conn| {
            let mut find = conn.prepare_cached(&format!("SELECT rowid FROM {n} WHERE id = ?1"))?;
            let mut removed = 0;
            for id in ids {
                if let Some(rowid) = find.query_row([id], |r| r.get::<_, i64>(0)).optional()? {
                    conn.execute(&format!("DELETE FROM {n}_fts WHERE rowid = ?1"), [rowid])?;
                    conn.execute(&format!("DELETE FROM {n} WHERE rowid = ?1"), [rowid])?;
                    removed += 1;
                }
            }
            Ok(removed)
        })
    }

    /// Removes every row of a scope. Atomic.
    pub fn remove_scope(&self, conn: &Connection, scope: &str) -> Result<usize, StoreError> {
        let n = &self.name;
        savepoint(conn, |conn| {
            conn.execute(
                &format!(
                    "DELETE FROM {n}_fts WHERE rowid IN (SELECT rowid FROM {n} WHERE scope = ?1)"
                ),
                [scope],
            )?;
            Ok(conn.execute(&format!("DELETE FROM {n} WHERE scope = ?1"), [scope])?)
        })
    }

    pub fn get(&self, conn: &Connection, id: &str) -> Result<Option<Row>, StoreError> {
        Ok(conn
            .query_row(
                &format!(
                    "SELECT id, scope, kind, content, importance FROM {} WHERE id = ?1",
                    self.name
                ),
                [id],
                |r| {
                    Ok(Row {
                        id: r.get(0)?,
                        scope: r.get(1)?,
                        kind: r.get(2)?,
                        content: r.get(3)?,
                        importance: r.get::<_, f64>(4)? as f32,
                    })
                },
            )
            .optional()?)
    }

    /// How many rows the corpus has (kept by triggers: no table scan).
    pub fn count(&self, conn: &Connection) -> Result<u64, StoreError> {
        Ok(conn.query_row(
            &format!("SELECT value FROM {}_meta WHERE key = 'rows'", self.name),
            [],
            |r| r.get(0),
        )?)
    }

    /// Embeds the rows that have no vector, or one of another profile (after the embedder
    /// changed), in batches. Returns how many it embedded.
    pub fn refresh_vectors(&self, conn: &Connection) -> Result<usize, StoreError> {
        let n = &self.name;
        let profile = self.embedder.profile().id.clone();
        let mut done = 0;
        loop {
            let batch: Vec<(i64, String)> = conn
                .prepare(&format!(
                    "SELECT rowid, content FROM {n} WHERE profile IS NULL OR profile != ?1 LIMIT 64"
                ))?
                .query_map([&profile], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            if batch.is_empty() {
                return Ok(done);
            }
            let texts: Vec<&str> = batch.iter().map(|(_, c)| c.as_str()).collect();
            let dims = self.embedder.profile().dimensions;
            let vectors = match self.embedder.embed(&texts) {
                Ok(v)
                    if v.len() == batch.len()
                        && v.iter()
                            .all(|x| x.len() == dims && x.iter().all(|f| f.is_finite())) =>
                {
                    v
                }
                Ok(_) => {
                    tracing::warn!("re-embedding stopped: the embedder answered with the wrong number or size of vectors");
                    return Ok(done);
                }
                Err(e) => {
                    tracing::warn!("re-embedding stopped: {e}");
                    return Ok(done);
                }
            };
            savepoint(conn, |conn| {
                let mut update = conn.prepare_cached(&format!(
                    "UPDATE {n} SET profile = ?1, vector = ?2 WHERE rowid = ?3"
                ))?;
                for ((rowid, _), v) in batch.iter().zip(&vectors) {
                    update.execute(params![profile, vector_bytes(v), rowid])?;
                }
                Ok(())
            })?;
            done += batch.len();
        }
    }

    /// Searches. Never returns a row outside `query.scope`; at most `query.limit` hits, best
    /// first, equal scores by id.
    pub fn search(&self, conn: &Connection, query: &Query<'_>) -> Result<Vec<Hit>, StoreError> {
        let scope_key = match query.scope {
            Scope::One(s) => s,
            Scope::Any => "",
        };
        let mut exec = self.diagnostics.begin(scope_key, query.purpose);
        // The keyword stage: extracting the keywords and the full-text search by them.
        let started = Instant::now();
        let keywords = text::keywords(query.text);
        if keywords.is_empty() {
            exec.stage(Stage::Keyword, started.elapsed());
            exec.finish(Outcome::EmptyQuery);
            return Ok(Vec::new());
        }
        let result = self.search_with(conn, query, &keywords, started, &mut exec);
        exec.finish(if result.is_ok() {
            Outcome::Completed
        } else {
            Outcome::Failed
        });
        result
    }

    fn search_with(
        &self,
        conn: &Connection,
        query: &Query<'_>,
        keywords: &[String],
        keyword_started: Instant,
        exec: &mut crate::diagnostics::Execution,
    ) -> Result<Vec<Hit>, StoreError> {
        let want_fts = query.track != Track::Vector;
        let want_vector = query.track != Track::Fts;
        let fts = if want_fts {
            match self.fts_candidates(conn, query.scope, keywords) {
                Ok(c) => c,
                Err(e) => {
                    exec.degrade(Degradation::FtsUnavailable);
                    if query.track == Track::Fts {
                        return Err(e);
                    }
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        exec.stage(Stage::Keyword, keyword_started.elapsed());
        if fts.len() >= CANDIDATES {
            exec.degrade(Degradation::CandidateBudgetExhausted);
        }
        let (vector, revision, floor) = if want_vector {
            self.vector_candidates(conn, query, exec)?
        } else {
            (Vec::new(), None, 1.0)
        };
        let started = Instant::now();
        let mut hits: Vec<Hit> = match query.track {
            Track::Fts => fts
                .iter()
                .enumerate()
                .map(|(i, (rowid, bm25))| Hit {
                    id: rowid.to_string(),
                    score: *bm25,
                    fts_rank: Some(i + 1),
                    similarity: None,
                })
                .collect(),
            Track::Vector => vector
                .iter()
                .map(|(rowid, sim)| Hit {
                    id: rowid.to_string(),
                    score: *sim as f64,
                    fts_rank: None,
                    similarity: Some(*sim),
                })
                .collect(),
            Track::Hybrid => {
                let related = self.synonym_candidates(conn, query.scope, query.text, keywords)?;
                let cached = self.scope_vectors(conn, query.scope, exec)?;
                self.fuse(
                    conn, query.text, keywords, &fts, &related, &vector, floor, &cached,
                )?
            }
        };
        exec.stage(Stage::Assembly, started.elapsed());
        // Rowids → ids, re-read with the scope: the authoritative check. Best first, only
        // as far as the answer needs: `limit` rows, and every row tied with the last.
        let started = Instant::now();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        let mut checked = Vec::with_capacity(query.limit + 4);
        for mut hit in hits {
            if checked.len() >= query.limit
                && checked.last().is_some_and(|l: &Hit| l.score > hit.score)
            {
                break;
            }
            let rowid = hit.id.parse::<i64>().unwrap_or(-1);
            if let Some(id) = self.id_in_scope(conn, rowid, query.scope)? {
                hit.id = id;
                checked.push(hit);
            }
        }
        let mut hits = checked;
        if let Some(read_at) = revision {
            if self.revision(conn)? != read_at {
                exec.degrade(Degradation::RevisionChanged);
            }
        }
        exec.stage(Stage::AuthoritativeRevalidation, started.elapsed());
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
        hits.truncate(query.limit);
        Ok(hits)
    }

    /// The keywords worth matching on. BM25 scores every row a keyword matches, so a
    /// keyword in most rows costs the most and says the least: those in more than
    /// [`COMMON_SHARE`] of the rows are left out of the match (unless nothing else is left:
    /// then the rarest two stay), and a CJK character alone is left out when its 2-grams
    /// are there. The hybrid score still weighs every keyword.
    fn match_keywords(
        &self,
        conn: &Connection,
        keywords: &[String],
    ) -> Result<Vec<String>, StoreError> {
        let total = self.count(conn)? as f64;
        let df = self.document_frequencies(conn, keywords)?;
        let cjk_char = |k: &String| k.chars().count() == 1 && k.chars().all(text::is_cjk);
        let has_bigram = keywords
            .iter()
            .any(|k| k.chars().count() == 2 && k.chars().all(text::is_cjk));
        let mut useful: Vec<(&String, i64)> = keywords
            .iter()
            .filter(|k| !(has_bigram && cjk_char(k)))
            .map(|k| (k, df.get(k).copied().unwrap_or(0)))
            .filter(|(_, n)| *n > 0)
            .collect();
        useful.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(b.0)));
        let limit = (total * COMMON_SHARE).max(MIN_COMMON as f64) as i64;
        let rare: Vec<String> = useful
            .iter()
            .filter(|(_, n)| *n <= limit)
            .map(|(k, _)| (*k).clone())
            .collect();
        Ok(if rare.is_empty() {
            useful.iter().take(2).map(|(k, _)| (*k).clone()).collect()
        } else {
            rare
        })
    }

    /// How many rows each keyword is in (remembered until the corpus changes).
    fn document_frequencies(
        &self,
        conn: &Connection,
        keywords: &[String],
    ) -> Result<HashMap<String, i64>, StoreError> {
        let revision = self.revision(conn)?;
        let mut out = HashMap::new();
        let mut missing = Vec::new();
        let usable = conn.is_autocommit();
        if let Some(mut cache) = self.df_cache.lock().ok().filter(|_| usable) {
            if cache.0 != revision || cache.1.len() > 10_000 {
                *cache = (revision, HashMap::new());
            }
            for k in keywords {
                match cache.1.get(k) {
                    Some(n) => {
                        out.insert(k.clone(), *n);
                    }
                    None => missing.push(k),
                }
            }
        } else {
            missing.extend(keywords);
        }
        if missing.is_empty() {
            return Ok(out);
        }
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT doc FROM {}_vocab WHERE term = ?1",
            self.name
        ))?;
        let mut found = Vec::new();
        for k in missing {
            let docs: i64 = stmt.query_row([k], |r| r.get(0)).optional()?.unwrap_or(0);
            found.push((k.clone(), docs));
        }
        if let Ok(mut cache) = self.df_cache.lock().map_err(|_| ()).and_then(|c| {
            if conn.is_autocommit() {
                Ok(c)
            } else {
                Err(())
            }
        }) {
            if cache.0 == revision {
                cache.1.extend(found.iter().cloned());
            }
        }
        out.extend(found);
        Ok(out)
    }

    /// Full-text candidates: (rowid, BM25 score, larger is better), best first.
    fn fts_candidates(
        &self,
        conn: &Connection,
        scope: Scope<'_>,
        keywords: &[String],
    ) -> Result<Vec<(i64, f64)>, StoreError> {
        let keywords = self.match_keywords(conn, keywords)?;
        match text::fts_query(&keywords) {
            Some(fts_query) => self.match_fts(conn, scope, &fts_query, CANDIDATES),
            None => Ok(Vec::new()),
        }
    }

    /// Rows of `scope` matching an FTS5 query: (rowid, BM25 score), best first.
    fn match_fts(
        &self,
        conn: &Connection,
        scope: Scope<'_>,
        fts_query: &str,
        limit: usize,
    ) -> Result<Vec<(i64, f64)>, StoreError> {
        let n = &self.name;
        let (filter, scope_value) = match scope {
            Scope::One(s) => ("AND d.scope = ?2", s),
            Scope::Any => ("AND ?2 = ?2", ""),
        };
        let sql = format!(
            "SELECT f.rowid, -bm25({n}_fts) AS score FROM {n}_fts f JOIN {n} d ON d.rowid = f.rowid
             WHERE {n}_fts MATCH ?1 {filter} ORDER BY score DESC, d.id LIMIT {limit}"
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![fts_query, scope_value], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Vector candidates above the embedder's floor: (rowid, similarity), best first, and
    /// the revision the vectors were read at.
    #[allow(clippy::type_complexity)]
    fn vector_candidates(
        &self,
        conn: &Connection,
        query: &Query<'_>,
        exec: &mut crate::diagnostics::Execution,
    ) -> Result<(Vec<(i64, f32)>, Option<i64>, f32), StoreError> {
        if !self.embedder.profile().reads_cjk && text::mostly_cjk(query.text) {
            // The model does not read the query's script: its similarities would be noise.
            return Ok((Vec::new(), None, 1.0));
        }
        if !self.breaker.allow() {
            exec.degrade(Degradation::EmbeddingCircuitOpen);
            return Ok((Vec::new(), None, 1.0));
        }
        let started = Instant::now();
        let embedded = self.embedder.embed(&[query.text]);
        exec.stage(Stage::QueryEmbedding, started.elapsed());
        let q = match embedded {
            Ok(mut v) if v.len() == 1 => {
                self.breaker.success();
                v.remove(0)
            }
            Ok(_) => {
                self.breaker.failure();
                exec.degrade(Degradation::EmbeddingError);
                return Ok((Vec::new(), None, 1.0));
            }
            Err(e) => {
                self.breaker.failure();
                exec.degrade(match e {
                    EmbedError::Timeout => Degradation::EmbeddingTimeout,
                    _ => Degradation::EmbeddingError,
                });
                return Ok((Vec::new(), None, 1.0));
            }
        };
        let started = Instant::now();
        let cached = self.scope_vectors(conn, query.scope, exec)?;
        let dims = self.embedder.profile().dimensions;
        let mut scored: Vec<(i64, f32)> = cached
            .rowids
            .iter()
            .zip(cached.vectors.chunks_exact(dims.max(1)))
            .map(|(rowid, v)| (*rowid, cosine(&q, v)))
            .collect();
        let floor = self.floor_for(&scored);
        scored.retain(|(_, s)| *s >= floor);
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(CANDIDATES);
        exec.stage(Stage::Vector, started.elapsed());
        Ok((scored, Some(cached.revision), floor))
    }

    /// The similarity a row must reach to count for this query: the embedder's own noise
    /// floor, or – in a scope of [`BACKGROUND_MIN_ROWS`] or more – the query's similarity to
    /// the scope's median row, when that is higher. For a query the embedder finds every
    /// row alike for, only the rows that stand out from that background count.
    fn floor_for(&self, scored: &[(i64, f32)]) -> f32 {
        let tuning = self.tuning();
        let floor = tuning.min_similarity;
        if scored.len() < BACKGROUND_MIN_ROWS {
            return floor;
        }
        let mut sims: Vec<f32> = scored.iter().map(|s| s.1).collect();
        let at = ((sims.len() as f64 * tuning.background_share) as usize).min(sims.len() - 1);
        let (_, background, _) = sims.select_nth_unstable_by(at, f32::total_cmp);
        floor.max(*background)
    }

    /// The vectors of a scope, from memory when nothing changed since they were read.
    fn scope_vectors(
        &self,
        conn: &Connection,
        scope: Scope<'_>,
        exec: &mut crate::diagnostics::Execution,
    ) -> Result<Arc<CachedScope>, StoreError> {
        let revision = self.revision(conn)?;
        let key = match scope {
            Scope::One(s) => format!("1:{s}"),
            Scope::Any => "*".to_string(),
        };
        let cached = if conn.is_autocommit() {
            self.cache.lock().ok().and_then(|c| c.get(&key).cloned())
        } else {
            None
        };
        if let Some(hit) = cached {
            if hit.revision == revision {
                if hit.cold {
                    exec.degrade(Degradation::VectorCold);
                }
                return Ok(hit);
            }
        }
        let n = &self.name;
        let profile = &self.embedder.profile().id;
        let dims = self.embedder.profile().dimensions;
        let (filter, scope_value) = match scope {
            Scope::One(s) => ("scope = ?2", s),
            Scope::Any => ("?2 = ?2", ""),
        };
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT rowid, vector, profile = ?1, content FROM {n} WHERE {filter} ORDER BY rowid"
        ))?;
        let mut rowids = Vec::new();
        let mut vectors = Vec::new();
        let mut lexical = HashMap::new();
        let mut cold = false;
        let mut rows = stmt.query(params![profile, scope_value])?;
        while let Some(r) = rows.next()? {
            let current: Option<bool> = r.get(2)?;
            let bytes: Option<Vec<u8>> = r.get(1)?;
            let content: String = r.get(3)?;
            lexical.insert(r.get::<_, i64>(0)?, self.row_lexicon(&content));
            match (current, bytes) {
                (Some(true), Some(bytes)) if bytes.len() == dims * VECTOR_ELEMENT_BYTES => {
                    rowids.push(r.get(0)?);
                    vectors.extend(vector_from(&bytes));
                }
                _ => cold = true,
            }
        }
        if cold {
            exec.degrade(Degradation::VectorCold);
        }
        let fresh = Arc::new(CachedScope {
            revision,
            rowids,
            vectors,
            lexical,
            cold,
        });
        // Inside a transaction the revision may be rolled back and reused for other data:
        // nothing read there is remembered.
        if !conn.is_autocommit() {
            return Ok(fresh);
        }
        if let Ok(mut cache) = self.cache.lock() {
            // Bounded: a process searching many scopes keeps the most recent few.
            if cache.len() >= 64 && !cache.contains_key(&key) {
                cache.clear();
            }
            cache.insert(key, fresh.clone());
        }
        Ok(fresh)
    }

    /// Rows that have a synonym of a query word but not the word (the thesaurus's
    /// candidates for the hybrid track), best first.
    fn synonym_candidates(
        &self,
        conn: &Connection,
        scope: Scope<'_>,
        text: &str,
        keywords: &[String],
    ) -> Result<Vec<(i64, f64)>, StoreError> {
        let Some(synonyms) = self.synonyms else {
            return Ok(Vec::new());
        };
        let mut related: Vec<String> = Vec::new();
        for group in synonyms.groups_of_text(text) {
            for word in synonyms.members(group) {
                // A CJK entry is matched by its 2-grams, as the index holds it.
                let terms = text::keywords(word);
                let term = if terms.len() == 1 {
                    format!("\"{}\"", terms[0])
                } else {
                    let grams: Vec<String> = terms
                        .iter()
                        .filter(|t| t.chars().count() == 2)
                        .map(|t| format!("\"{t}\""))
                        .collect();
                    if grams.is_empty() {
                        continue;
                    }
                    format!("({})", grams.join(" AND "))
                };
                if !keywords.contains(&word.to_string()) && !related.contains(&term) {
                    related.push(term);
                }
            }
        }
        // As for the query's own words: a synonym in most rows says little and costs most.
        let limit = (self.count(conn)? as f64 * COMMON_SHARE).max(MIN_COMMON as f64) as i64;
        let plain: Vec<String> = related
            .iter()
            .filter(|t| !t.starts_with('('))
            .map(|t| t.trim_matches('"').to_string())
            .collect();
        let df = self.document_frequencies(conn, &plain)?;
        related.retain(|t| {
            t.starts_with('(')
                || df
                    .get(t.trim_matches('"'))
                    .is_some_and(|n| *n > 0 && *n <= limit)
        });
        if related.is_empty() {
            return Ok(Vec::new());
        }
        self.match_fts(conn, scope, &related.join(" OR "), CANDIDATES / 2)
    }

    /// The hybrid ranking over the candidates of every track.
    #[allow(clippy::too_many_arguments)]
    fn fuse(
        &self,
        conn: &Connection,
        text: &str,
        keywords: &[String],
        fts: &[(i64, f64)],
        related: &[(i64, f64)],
        vector: &[(i64, f32)],
        floor: f32,
        cached: &CachedScope,
    ) -> Result<Vec<Hit>, StoreError> {
        let mut candidates: Vec<i64> = Vec::new();
        let mut seen: HashSet<i64> = HashSet::new();
        for rowid in fts
            .iter()
            .map(|c| c.0)
            .chain(related.iter().map(|c| c.0))
            .chain(vector.iter().map(|c| c.0))
        {
            if seen.insert(rowid) {
                candidates.push(rowid);
            }
        }
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let idf = self.idf(conn, keywords)?;
        let total_idf: f64 = keywords.iter().filter_map(|k| idf.get(k)).sum();
        // Each keyword's thesaurus group, as the query uses it.
        let query_groups: Vec<usize> = self
            .synonyms
            .map(|s| s.groups_of_text(text))
            .unwrap_or_default();
        let keyword_group: HashMap<&String, usize> = match self.synonyms {
            Some(syn) => keywords
                .iter()
                .filter_map(|k| syn.group_of_fragment(k, &query_groups).map(|g| (k, g)))
                .collect(),
            None => HashMap::new(),
        };
        let missing: Vec<i64> = candidates
            .iter()
            .copied()
            .filter(|r| !cached.lexical.contains_key(r))
            .collect();
        let read = self.terms_of(conn, &missing)?;
        let fts_rank: HashMap<i64, usize> =
            fts.iter().enumerate().map(|(i, c)| (c.0, i + 1)).collect();
        let similarity: HashMap<i64, f32> = vector.iter().copied().collect();
        let floor = floor as f64;
        // Embedders differ in how high their similarities run (MiniLM's clear matches sit
        // near 0.5, the lexicon's near 1): each profile says where a clear match is.
        let tuning = self.tuning();
        let strong = (tuning.strong_similarity as f64).max(floor + 1e-6);
        let semantic_weight = tuning.semantic_weight as f64;
        let hits = candidates
            .into_iter()
            .map(|rowid| {
                let (row_terms, row_groups) =
                    match cached.lexical.get(&rowid).or_else(|| read.get(&rowid)) {
                        Some(l) => (Some(&l.terms), l.groups.as_slice()),
                        None => (None, &[][..]),
                    };
                let lexical = if total_idf > 0.0 {
                    keywords
                        .iter()
                        .filter_map(|k| idf.get(k).map(|w| (k, w)))
                        .map(|(k, w)| {
                            if row_terms.is_some_and(|t| t.contains(k)) {
                                *w
                            } else if keyword_group.get(k).is_some_and(|g| row_groups.contains(g)) {
                                tuning.concept_credit * w
                            } else {
                                0.0
                            }
                        })
                        .sum::<f64>()
                        / total_idf
                } else {
                    0.0
                };
                // Squared: a row with half the query's words is weak evidence, one with all of
                // them strong.
                let lexical = lexical * lexical;
                let sim = similarity.get(&rowid).copied();
                let semantic = sim.map_or(0.0, |s| {
                    ((s as f64 - floor) / (strong - floor)).clamp(0.0, 1.0)
                });
                Hit {
                    id: rowid.to_string(),
                    score: (1.0 - semantic_weight) * lexical + semantic_weight * semantic,
                    fts_rank: fts_rank.get(&rowid).copied(),
                    similarity: sim,
                }
            })
            .collect();
        Ok(hits)
    }

    /// Each keyword's inverse document frequency in the corpus (BM25's form: rare words
    /// weigh more; a word in every row still weighs a little).
    fn idf(
        &self,
        conn: &Connection,
        keywords: &[String],
    ) -> Result<HashMap<String, f64>, StoreError> {
        let total = self.count(conn)? as f64;
        Ok(self
            .document_frequencies(conn, keywords)?
            .into_iter()
            .map(|(k, docs)| {
                (
                    k,
                    (1.0 + (total - docs as f64 + 0.5) / (docs as f64 + 0.5)).ln(),
                )
            })
            .collect())
    }

    fn row_lexicon(&self, content: &str) -> RowLexicon {
        RowLexicon {
            terms: text::index_terms(content).into_iter().collect(),
            groups: self
                .synonyms
                .map(|s| s.groups_of_text(content))
                .unwrap_or_default(),
        }
    }

    /// The lexicon of rows the cache does not hold (written since it was read).
    fn terms_of(
        &self,
        conn: &Connection,
        rowids: &[i64],
    ) -> Result<HashMap<i64, RowLexicon>, StoreError> {
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT content FROM {} WHERE rowid = ?1",
            self.name
        ))?;
        let mut out = HashMap::new();
        for rowid in rowids {
            if let Some(content) = stmt
                .query_row([rowid], |r| r.get::<_, String>(0))
                .optional()?
            {
                out.insert(*rowid, self.row_lexicon(&content));
            }
        }
        Ok(out)
    }

    fn id_in_scope(
        &self,
        conn: &Connection,
        rowid: i64,
        scope: Scope<'_>,
    ) -> Result<Option<String>, StoreError> {
        let n = &self.name;
        Ok(match scope {
            Scope::One(s) => conn
                .prepare_cached(&format!(
                    "SELECT id FROM {n} WHERE rowid = ?1 AND scope = ?2"
                ))?
                .query_row(params![rowid, s], |r| r.get(0))
                .optional()?,
            Scope::Any => conn
                .prepare_cached(&format!("SELECT id FROM {n} WHERE rowid = ?1"))?
                .query_row([rowid], |r| r.get(0))
                .optional()?,
        })
    }
}

/// Runs `f` inside a savepoint: released on success, rolled back on error. Works inside or
/// outside the caller's transaction.
fn savepoint<T>(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    conn.execute_batch("SAVEPOINT retrieval")?;
    match f(conn) {
        Ok(v) => match conn.execute_batch("RELEASE retrieval") {
            Ok(()) => Ok(v),
            // Outside a transaction the release is the commit: when it fails (the database
            // busy), SQLite keeps the transaction open, and every later write would nest in
            // it and never be committed. Undo it now instead.
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK TO retrieval; RELEASE retrieval");
                Err(e.into())
            }
        },
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK TO retrieval; RELEASE retrieval");
            Err(e)
        }
    }
}
