//! The retrieval evaluator (spec 50, Layer 2): loads a fixture's corpus into a real SQLite
//! file through the production [`Index`], runs every query through the production search
//! on each track, and scores the rankings – Recall@5, MRR@10, nDCG@10 – per query, per
//! subset and per track. Any fixture of the documented shape works; nothing here knows
//! ours.
//!
//! Every query is in one part of its fixture ([`Split`]): *calibration*, the only queries
//! a constant may be fitted on ([`fit`]), or *evaluation*, which no constant saw. A
//! query's part is a hash of its id unless the fixture says otherwise, and a fixture
//! marked `heldOut` (written before any constant was touched) is evaluation throughout.
//! Reports give every figure per part, so a figure can always be traced to the queries
//! it came from.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::diagnostics::{Collector, Purpose};
use crate::embed::Embedder;
use crate::store::{Doc, Index, Query, Scope, StoreError, Track, Tuning};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fixture {
    pub version: u32,
    pub vector_profile: VectorProfile,
    pub corpus: Vec<FixtureRow>,
    pub queries: Vec<FixtureQuery>,
    /// Every query is evaluation: the fixture was written before any constant was
    /// touched and is never used to fit one.
    #[serde(default)]
    pub held_out: bool,
}

/// The part of a fixture a query belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Split {
    /// Constants may be fitted on these queries.
    Calibration,
    /// No constant saw these queries.
    Evaluation,
}

impl Split {
    pub fn name(self) -> &'static str {
        match self {
            Split::Calibration => "calibration",
            Split::Evaluation => "evaluation",
        }
    }

    /// A query's part when its fixture does not say: FNV-1a of its id, even → calibration.
    /// Nobody picks which queries a constant may see.
    pub fn by_id(id: &str) -> Split {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in id.as_bytes() {
            h ^= *b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        if h.is_multiple_of(2) {
            Split::Calibration
        } else {
            Split::Evaluation
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VectorProfile {
    pub id: String,
    pub dimensions: usize,
    pub normalized: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FixtureRow {
    pub id: String,
    pub agent_id: String,
    pub kind: String,
    pub content: String,
    #[serde(default)]
    pub importance: f32,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FixtureQuery {
    pub id: String,
    pub agent_id: String,
    pub text: String,
    #[serde(default)]
    pub subsets: Vec<String>,
    pub relevant_ids: Vec<String>,
    /// The query's part, when the fixture fixes it (else [`Split::by_id`]).
    #[serde(default)]
    pub split: Option<Split>,
}

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("could not read the fixture {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the fixture is not valid JSON of the retrieval fixture shape: {0}")]
    Parse(String),
    #[error("fixture error: {0}")]
    Fixture(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the evaluation database: {0}")]
    Io(#[from] std::io::Error),
    #[error("the evaluation database: {0}")]
    Sql(#[from] rusqlite::Error),
}

impl Fixture {
    pub fn load(path: &Path) -> Result<Fixture, EvalError> {
        let text = std::fs::read_to_string(path).map_err(|source| EvalError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Fixture::parse(&text)
    }

    pub fn parse(json: &str) -> Result<Fixture, EvalError> {
        let fixture: Fixture =
            serde_json::from_str(json).map_err(|e| EvalError::Parse(e.to_string()))?;
        fixture.validate()?;
        Ok(fixture)
    }

    /// A fixture that cannot be scored honestly is refused, naming what is wrong.
    /// The part `q` belongs to.
    pub fn split_of(&self, q: &FixtureQuery) -> Split {
        if self.held_out {
            Split::Evaluation
        } else {
            q.split.unwrap_or_else(|| Split::by_id(&q.id))
        }
    }

    pub fn validate(&self) -> Result<(), EvalError> {
        if self.version != 1 {
            return Err(EvalError::Fixture(format!(
                "version {} (this evaluator reads 1)",
                self.version
            )));
        }
        let mut ids = HashSet::new();
        let mut scope_of = std::collections::HashMap::new();
        for row in &self.corpus {
            if !ids.insert(row.id.as_str()) {
                return Err(EvalError::Fixture(format!(
                    "corpus id `{}` appears twice",
                    row.id
                )));
            }
            scope_of.insert(row.id.as_str(), row.agent_id.as_str());
        }
        let mut query_ids = HashSet::new();
        for q in &self.queries {
            if !query_ids.insert(q.id.as_str()) {
                return Err(EvalError::Fixture(format!(
                    "query id `{}` appears twice",
                    q.id
                )));
            }
            if q.relevant_ids.is_empty() {
                return Err(EvalError::Fixture(format!(
                    "query `{}` has no relevant ids: every query needs at least one",
                    q.id
                )));
            }
            for r in &q.relevant_ids {
                match scope_of.get(r.as_str()) {
                    None => return Err(EvalError::Fixture(format!("query `{}`: relevant id `{r}` is not in the corpus", q.id))),
                    Some(scope) if *scope != q.agent_id => {
                        return Err(EvalError::Fixture(format!(
                            "query `{}`: relevant id `{r}` belongs to another scope, which the query can never see",
                            q.id
                        )))
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

/// Distinct relevant ids in the first `k` ÷ relevant ids.
pub fn recall_at(k: usize, ranked: &[String], relevant: &HashSet<&str>) -> f64 {
    if relevant.is_empty() {
        return 0.0;
    }
    let found = dedup(ranked)
        .into_iter()
        .take(k)
        .filter(|id| relevant.contains(id))
        .count();
    found as f64 / relevant.len() as f64
}

/// 1 / rank of the first relevant id in the first `k` (0 if none).
pub fn mrr_at(k: usize, ranked: &[String], relevant: &HashSet<&str>) -> f64 {
    dedup(ranked)
        .into_iter()
        .take(k)
        .position(|id| relevant.contains(id))
        .map_or(0.0, |i| 1.0 / (i + 1) as f64)
}

/// nDCG with binary relevance: DCG of the ranking ÷ DCG of the ideal ranking (all relevant
/// ids first, as many as fit in `k`).
pub fn ndcg_at(k: usize, ranked: &[String], relevant: &HashSet<&str>) -> f64 {
    let gain = |i: usize| 1.0 / ((i + 2) as f64).log2();
    let dcg: f64 = dedup(ranked)
        .into_iter()
        .take(k)
        .enumerate()
        .filter(|(_, id)| relevant.contains(id))
        .map(|(i, _)| gain(i))
        .sum();
    let ideal: f64 = (0..relevant.len().min(k)).map(gain).sum();
    if ideal == 0.0 {
        0.0
    } else {
        dcg / ideal
    }
}

/// A ranking with each id at its first position only.
fn dedup(ranked: &[String]) -> Vec<&str> {
    let mut seen = HashSet::new();
    ranked
        .iter()
        .map(String::as_str)
        .filter(|id| seen.insert(*id))
        .collect()
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Scores {
    pub queries: usize,
    pub recall_at5: f64,
    pub mrr_at10: f64,
    pub ndcg_at10: f64,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrackReport {
    #[serde(flatten)]
    pub overall: Scores,
    pub by_subset: BTreeMap<String, Scores>,
    /// `calibration` and `evaluation`, each where it has queries.
    pub by_split: BTreeMap<String, Scores>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryTrack {
    /// The first ten ids, best first.
    pub ranked: Vec<String>,
    pub recall_at5: f64,
    pub mrr_at10: f64,
    pub ndcg_at10: f64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryReport {
    pub id: String,
    pub agent_id: String,
    pub split: Split,
    pub subsets: Vec<String>,
    pub relevant_ids: Vec<String>,
    pub tracks: BTreeMap<String, QueryTrack>,
    /// Ids of another scope that any track returned (must stay empty).
    pub cross_scope: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub embedder: String,
    /// The store used the thesaurus.
    pub synonyms: bool,
    pub dimensions: usize,
    pub fixture_profile: String,
    pub corpus: usize,
    pub tracks: BTreeMap<String, TrackReport>,
    pub queries: Vec<QueryReport>,
}

/// Evaluates `fixture` with `embedder` on `tracks`, in a fresh SQLite file under `dir`.
pub fn evaluate(
    fixture: &Fixture,
    embedder: Arc<dyn Embedder>,
    tracks: &[Track],
    dir: &Path,
) -> Result<Report, EvalError> {
    evaluate_with(fixture, embedder, tracks, dir, true)
}

/// As [`evaluate`], choosing whether the store uses the thesaurus (`false`: the ablation).
pub fn evaluate_with(
    fixture: &Fixture,
    embedder: Arc<dyn Embedder>,
    tracks: &[Track],
    dir: &Path,
    synonyms: bool,
) -> Result<Report, EvalError> {
    fixture.validate()?;
    std::fs::create_dir_all(dir)?;
    let db = tempfile_in(dir)?;
    let conn = rusqlite::Connection::open(&db)?;
    let index = load_corpus(&conn, fixture, embedder.clone(), synonyms)?;
    let scope_of: std::collections::HashMap<&str, &str> = fixture
        .corpus
        .iter()
        .map(|r| (r.id.as_str(), r.agent_id.as_str()))
        .collect();

    let mut per_track: BTreeMap<String, Vec<Scored>> = BTreeMap::new();
    let mut queries = Vec::new();
    for q in &fixture.queries {
        queries.push(evaluate_query(
            &conn,
            &index,
            q,
            fixture.split_of(q),
            tracks,
            &scope_of,
            &mut per_track,
        )?);
    }
    drop(conn);
    let _ = std::fs::remove_file(&db);

    Ok(Report {
        embedder: embedder.profile().id.clone(),
        synonyms,
        dimensions: embedder.profile().dimensions,
        fixture_profile: fixture.vector_profile.id.clone(),
        corpus: fixture.corpus.len(),
        tracks: track_reports(per_track),
        queries,
    })
}

/// Creates the production index in `conn` and puts the fixture's corpus in it, in one
/// transaction.
fn load_corpus(
    conn: &rusqlite::Connection,
    fixture: &Fixture,
    embedder: Arc<dyn Embedder>,
    synonyms: bool,
) -> Result<Index, EvalError> {
    let index = Index::new("eval", embedder, Arc::new(Collector::new()))?;
    let index = if synonyms {
        index
    } else {
        index.without_synonyms()
    };
    index.create(conn)?;
    let docs: Vec<Doc<'_>> = fixture
        .corpus
        .iter()
        .map(|r| Doc {
            id: &r.id,
            scope: &r.agent_id,
            kind: &r.kind,
            content: &r.content,
            importance: r.importance,
        })
        .collect();
    conn.execute_batch("BEGIN")?;
    for chunk in docs.chunks(64) {
        index.put(conn, chunk)?;
    }
    conn.execute_batch("COMMIT")?;
    Ok(index)
}

/// Runs one query on every track: its report, and each track's scores added to
/// `per_track` (with the query's subsets). `scope_of` maps a row id to its scope.
fn evaluate_query(
    conn: &rusqlite::Connection,
    index: &Index,
    q: &FixtureQuery,
    split: Split,
    tracks: &[Track],
    scope_of: &std::collections::HashMap<&str, &str>,
    per_track: &mut BTreeMap<String, Vec<Scored>>,
) -> Result<QueryReport, EvalError> {
    let relevant: HashSet<&str> = q.relevant_ids.iter().map(String::as_str).collect();
    let mut report = QueryReport {
        id: q.id.clone(),
        agent_id: q.agent_id.clone(),
        split,
        subsets: q.subsets.clone(),
        relevant_ids: q.relevant_ids.clone(),
        tracks: BTreeMap::new(),
        cross_scope: Vec::new(),
    };
    for track in tracks {
        let ranked = top_ten(conn, index, q, *track)?;
        for id in &ranked {
            if scope_of.get(id.as_str()) != Some(&q.agent_id.as_str())
                && !report.cross_scope.contains(id)
            {
                report.cross_scope.push(id.clone());
            }
        }
        let scores = Scores {
            queries: 1,
            recall_at5: recall_at(5, &ranked, &relevant),
            mrr_at10: mrr_at(10, &ranked, &relevant),
            ndcg_at10: ndcg_at(10, &ranked, &relevant),
        };
        per_track.entry(track.name().into()).or_default().push((
            split,
            q.subsets.clone(),
            scores.clone(),
        ));
        report.tracks.insert(
            track.name().into(),
            QueryTrack {
                ranked,
                recall_at5: scores.recall_at5,
                mrr_at10: scores.mrr_at10,
                ndcg_at10: scores.ndcg_at10,
            },
        );
    }
    Ok(report)
}

/// One query's scores on a track, with its part and subsets.
type Scored = (Split, Vec<String>, Scores);

/// The ids `q` finds on `track`, best first, ten at most – through the production search.
fn top_ten(
    conn: &rusqlite::Connection,
    index: &Index,
    q: &FixtureQuery,
    track: Track,
) -> Result<Vec<String>, StoreError> {
    let hits = index.search(
        conn,
        &Query {
            scope: Scope::One(&q.agent_id),
            text: &q.text,
            track,
            limit: 10,
            purpose: Purpose::Search,
        },
    )?;
    Ok(hits.into_iter().map(|h| h.id).collect())
}

/// Each track's mean scores, overall, per subset and per part.
fn track_reports(per_track: BTreeMap<String, Vec<Scored>>) -> BTreeMap<String, TrackReport> {
    per_track
        .into_iter()
        .map(|(name, rows)| {
            let overall = mean(rows.iter().map(|(_, _, s)| s));
            let mut subsets: BTreeMap<String, Vec<&Scores>> = BTreeMap::new();
            let mut splits: BTreeMap<String, Vec<&Scores>> = BTreeMap::new();
            for (split, tags, s) in &rows {
                for tag in tags {
                    subsets.entry(tag.clone()).or_default().push(s);
                }
                splits.entry(split.name().into()).or_default().push(s);
            }
            let by_subset = subsets
                .into_iter()
                .map(|(k, v)| (k, mean(v.into_iter())))
                .collect();
            let by_split = splits
                .into_iter()
                .map(|(k, v)| (k, mean(v.into_iter())))
                .collect();
            (
                name,
                TrackReport {
                    overall,
                    by_subset,
                    by_split,
                },
            )
        })
        .collect()
}

fn mean<'a>(scores: impl Iterator<Item = &'a Scores>) -> Scores {
    let mut out = Scores::default();
    for s in scores {
        out.queries += 1;
        out.recall_at5 += s.recall_at5;
        out.mrr_at10 += s.mrr_at10;
        out.ndcg_at10 += s.ndcg_at10;
    }
    if out.queries > 0 {
        let n = out.queries as f64;
        out.recall_at5 /= n;
        out.mrr_at10 /= n;
        out.ndcg_at10 /= n;
    }
    out
}

/// A database file name of this process's own in `dir`.
fn tempfile_in(dir: &Path) -> std::io::Result<std::path::PathBuf> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let path = dir.join(format!(
        "eval-{}-{}.sqlite",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&path);
    Ok(path)
}

impl Report {
    /// One table per track: overall, then each subset.
    pub fn table(&self) -> String {
        let mut out = format!(
            "embedder {} ({} dims), {} rows\n",
            self.embedder, self.dimensions, self.corpus
        );
        for (name, track) in &self.tracks {
            out.push_str(&format!(
                "\n{name}\n  {:<12} {:>7} {:>9} {:>8} {:>8}\n",
                "subset", "queries", "recall@5", "mrr@10", "ndcg@10"
            ));
            let mut line = |label: &str, s: &Scores| {
                out.push_str(&format!(
                    "  {:<12} {:>7} {:>9.3} {:>8.3} {:>8.3}\n",
                    label, s.queries, s.recall_at5, s.mrr_at10, s.ndcg_at10
                ))
            };
            line("all", &track.overall);
            for (split, s) in &track.by_split {
                line(split, s);
            }
            for (subset, s) in &track.by_subset {
                line(subset, s);
            }
        }
        out
    }
}

/// The values [`fit`] tries for each constant (one constant at a time).
#[derive(Debug, Clone)]
pub struct Grid {
    pub min_similarity: Vec<f32>,
    pub strong_similarity: Vec<f32>,
    pub semantic_weight: Vec<f32>,
    pub concept_credit: Vec<f64>,
    pub background_share: Vec<f64>,
}

impl Default for Grid {
    fn default() -> Grid {
        Grid {
            min_similarity: vec![0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35],
            strong_similarity: vec![0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
            semantic_weight: vec![0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
            concept_credit: vec![0.25, 0.5, 0.75, 1.0],
            background_share: vec![0.3, 0.4, 0.5, 0.6, 0.7],
        }
    }
}

/// What [`fit`] found: the hybrid nDCG@10 over every calibration query at the starting
/// constants and at the best ones, and each move it made.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fit {
    pub queries: usize,
    pub start: Tuning,
    pub start_score: f64,
    pub best: Tuning,
    pub best_score: f64,
    pub moves: Vec<String>,
}

/// Fits the ranking's constants on the calibration queries of `fixtures` – never on an
/// evaluation query or a held-out fixture – by coordinate ascent from `start` over `grid`,
/// maximising the hybrid track's mean nDCG@10. A move must gain more than `min_gain`, so
/// noise does not walk the constants about. The corpora are indexed once; query vectors
/// are computed once.
pub fn fit(
    fixtures: &[&Fixture],
    embedder: Arc<dyn Embedder>,
    start: Tuning,
    grid: &Grid,
    min_gain: f64,
    dir: &Path,
) -> Result<Fit, EvalError> {
    let embedder: Arc<dyn Embedder> = Arc::new(Memo::new(embedder));
    std::fs::create_dir_all(dir)?;
    let mut sets = Vec::new();
    for fixture in fixtures {
        fixture.validate()?;
        let db = tempfile_in(dir)?;
        let conn = rusqlite::Connection::open(&db)?;
        let index = load_corpus(&conn, fixture, embedder.clone(), true)?;
        let queries: Vec<&FixtureQuery> = fixture
            .queries
            .iter()
            .filter(|q| fixture.split_of(q) == Split::Calibration)
            .collect();
        sets.push((db, conn, index, queries));
    }
    let queries = sets.iter().map(|s| s.3.len()).sum::<usize>();
    if queries == 0 {
        return Err(EvalError::Fixture(
            "no calibration query to fit on (held-out fixtures are never used)".into(),
        ));
    }
    let score = |t: Tuning| -> Result<f64, EvalError> {
        let mut total = 0.0;
        for (_, conn, index, qs) in &sets {
            index.set_tuning(t);
            for q in qs {
                let ranked = top_ten(conn, index, q, Track::Hybrid)?;
                let relevant: HashSet<&str> = q.relevant_ids.iter().map(String::as_str).collect();
                total += ndcg_at(10, &ranked, &relevant);
            }
        }
        Ok(total / queries as f64)
    };
    let start_score = score(start)?;
    let (mut best, mut best_score) = (start, start_score);
    let mut moves = Vec::new();
    for _round in 0..4 {
        let mut moved = false;
        for knob in 0..5 {
            let candidates: Vec<Tuning> = match knob {
                0 => grid
                    .min_similarity
                    .iter()
                    .map(|&v| Tuning {
                        min_similarity: v,
                        ..best
                    })
                    .collect(),
                1 => grid
                    .strong_similarity
                    .iter()
                    .map(|&v| Tuning {
                        strong_similarity: v,
                        ..best
                    })
                    .collect(),
                2 => grid
                    .semantic_weight
                    .iter()
                    .map(|&v| Tuning {
                        semantic_weight: v,
                        ..best
                    })
                    .collect(),
                3 => grid
                    .concept_credit
                    .iter()
                    .map(|&v| Tuning {
                        concept_credit: v,
                        ..best
                    })
                    .collect(),
                _ => grid
                    .background_share
                    .iter()
                    .map(|&v| Tuning {
                        background_share: v,
                        ..best
                    })
                    .collect(),
            };
            for t in candidates {
                let s = score(t)?;
                if s > best_score + min_gain {
                    moves.push(format!("{best:?} → {t:?}: {best_score:.4} → {s:.4}"));
                    best = t;
                    best_score = s;
                    moved = true;
                }
            }
        }
        if !moved {
            break;
        }
    }
    for (db, conn, _, _) in sets {
        drop(conn);
        let _ = std::fs::remove_file(db);
    }
    Ok(Fit {
        queries,
        start,
        start_score,
        best,
        best_score,
        moves,
    })
}

/// [`fit`] from the constants `embedder` ships with, over the default grid, a move needing
/// 0.002 nDCG@10: what the tests run to check the shipped constants are the fitted ones.
pub fn fit_shipped(
    fixtures: &[&Fixture],
    embedder: Arc<dyn Embedder>,
    dir: &Path,
) -> Result<Fit, EvalError> {
    let start = Tuning::shipped(embedder.as_ref());
    fit(fixtures, embedder, start, &Grid::default(), 0.002, dir)
}

/// An embedder that remembers what it computed (the fit asks the same queries many times).
struct Memo {
    inner: Arc<dyn Embedder>,
    seen: std::sync::Mutex<std::collections::HashMap<String, Vec<f32>>>,
}

impl Memo {
    fn new(inner: Arc<dyn Embedder>) -> Memo {
        Memo {
            inner,
            seen: Default::default(),
        }
    }
}

impl Embedder for Memo {
    fn profile(&self) -> &crate::embed::Profile {
        self.inner.profile()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, crate::embed::EmbedError> {
        let missing: Vec<&str> = {
            let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            texts
                .iter()
                .copied()
                .filter(|t| !seen.contains_key(*t))
                .collect()
        };
        if !missing.is_empty() {
            let vectors = self.inner.embed(&missing)?;
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            for (t, v) in missing.into_iter().zip(vectors) {
                seen.insert(t.to_string(), v);
            }
        }
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        Ok(texts.iter().map(|t| seen[*t].clone()).collect())
    }
}

/// A gate over the hybrid track (`recall5=0.95,mrr10=0.85,ndcg10=0.85`).
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    pub recall5: Option<f64>,
    pub mrr10: Option<f64>,
    pub ndcg10: Option<f64>,
}

impl std::str::FromStr for Gate {
    type Err = String;
    fn from_str(s: &str) -> Result<Gate, String> {
        let mut gate = Gate {
            recall5: None,
            mrr10: None,
            ndcg10: None,
        };
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: expected key=value, e.g. recall5=0.95"))?;
            let value: f64 = value
                .trim()
                .parse()
                .map_err(|_| format!("`{part}`: `{value}` is not a number"))?;
            if !(0.0..=1.0).contains(&value) {
                return Err(format!("`{part}`: a gate is a number from 0 to 1"));
            }
            match key.trim() {
                "recall5" => gate.recall5 = Some(value),
                "mrr10" => gate.mrr10 = Some(value),
                "ndcg10" => gate.ndcg10 = Some(value),
                other => {
                    return Err(format!(
                        "unknown gate `{other}`; expected recall5, mrr10 or ndcg10"
                    ))
                }
            }
        }
        Ok(gate)
    }
}

impl Gate {
    /// The misses on `track` of `report` (empty: the gate holds).
    pub fn misses(&self, report: &Report, track: &str) -> Vec<String> {
        let Some(t) = report.tracks.get(track) else {
            return vec![format!("the report has no {track} track")];
        };
        let mut out = Vec::new();
        let mut check = |name: &str, want: Option<f64>, got: f64| {
            if let Some(want) = want {
                if got < want {
                    out.push(format!("{track} {name} {got:.3} < {want:.3}"));
                }
            }
        };
        check("recall@5", self.recall5, t.overall.recall_at5);
        check("mrr@10", self.mrr10, t.overall.mrr_at10);
        check("ndcg@10", self.ndcg10, t.overall.ndcg_at10);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn hand_computed_metrics() {
        // Relevant: a and b. Ranking: x a b y …
        let relevant: HashSet<&str> = ["a", "b"].into_iter().collect();
        let ranked = ids(&["x", "a", "b", "y"]);
        assert_eq!(recall_at(5, &ranked, &relevant), 1.0);
        assert_eq!(mrr_at(10, &ranked, &relevant), 0.5);
        // DCG = 1/log2(3) + 1/log2(4) = 0.6309 + 0.5; ideal = 1 + 0.6309.
        let ndcg = ndcg_at(10, &ranked, &relevant);
        assert!((ndcg - (1.0 / 3f64.log2() + 0.5) / (1.0 + 1.0 / 3f64.log2())).abs() < 1e-12);
        assert!(ndcg > 0.6);
    }

    #[test]
    fn a_duplicate_counts_once_at_its_first_rank() {
        let relevant: HashSet<&str> = ["a", "b"].into_iter().collect();
        let ranked = ids(&["a", "a", "a", "a", "a", "b"]);
        // Deduplicated: a b – both in the top 5, the ideal order.
        assert_eq!(recall_at(5, &ranked, &relevant), 1.0);
        assert!((ndcg_at(10, &ranked, &relevant) - 1.0).abs() < 1e-12);
        assert_eq!(recall_at(1, &ranked, &relevant), 0.5);
    }

    #[test]
    fn nothing_relevant_found_scores_zero() {
        let relevant: HashSet<&str> = ["a"].into_iter().collect();
        let ranked = ids(&["x", "y"]);
        assert_eq!(recall_at(5, &ranked, &relevant), 0.0);
        assert_eq!(mrr_at(10, &ranked, &relevant), 0.0);
        assert_eq!(ndcg_at(10, &ranked, &relevant), 0.0);
    }

    #[test]
    fn gates_parse_and_name_what_is_wrong() {
        let g: Gate = "recall5=0.95, mrr10=0.85,ndcg10=0.85".parse().unwrap();
        assert_eq!(
            g,
            Gate {
                recall5: Some(0.95),
                mrr10: Some(0.85),
                ndcg10: Some(0.85)
            }
        );
        assert!("recall=1"
            .parse::<Gate>()
            .unwrap_err()
            .contains("unknown gate"));
        assert!("recall5".parse::<Gate>().unwrap_err().contains("key=value"));
        assert!("recall5=NaN"
            .parse::<Gate>()
            .unwrap_err()
            .contains("from 0 to 1"));
        assert!("mrr10=1.5"
            .parse::<Gate>()
            .unwrap_err()
            .contains("from 0 to 1"));
    }
}
