//! Embedders: text → a unit vector, behind one trait so the store and its callers never
//! know which one they have. `deterministic-lexicon-v1` (here) needs nothing and is the
//! fallback; a neural model (`sextant-embed-minilm`) and an OpenAI-compatible endpoint
//! (`endpoint`) implement the same trait.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::Deserialize;

use crate::text::{self, Piece};

/// What a vector means: vectors of different profiles are never compared (the store
/// re-embeds its rows when the profile changes).
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// Stored beside every vector, e.g. `deterministic-lexicon-v1`.
    pub id: String,
    pub dimensions: usize,
    /// The cosine below which a vector hit is noise for this embedder: the vector track
    /// drops it. An embedder's own number, since each spreads unrelated texts differently.
    pub min_similarity: f32,
    /// The similarity of a clear match: the hybrid score counts a vector hit from
    /// `min_similarity` (nothing) to here (full).
    pub strong_similarity: f32,
    /// How much of the hybrid score the vector signal is (the rest is lexical). An
    /// embedder whose vectors are hashed words adds less beside the words themselves than
    /// a neural one, whose vectors carry what the words do not.
    pub semantic_weight: f32,
    /// How much of a literal match a keyword found in a row only as a thesaurus synonym
    /// counts in the lexical signal.
    pub concept_credit: f32,
    /// Which kind of embedder, for the health view (a closed set, no free text).
    pub kind: EmbedderKind,
    /// It reads Chinese, Japanese and Korean text. A model trained on English alone puts all
    /// such texts close together: for a query written mostly in CJK its vectors are skipped.
    pub reads_cjk: bool,
}

/// The embedders Sextant has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum EmbedderKind {
    Lexicon,
    Minilm,
    Endpoint,
}

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The embedder cannot run at all (no model files, no endpoint).
    #[error("the embedder is unavailable: {0}")]
    Unavailable(String),
    #[error("the embedder did not answer in time")]
    Timeout,
    #[error("embedding failed: {0}")]
    Failed(String),
}

/// Text → unit vectors of [`Profile::dimensions`] floats, one per input, in order.
pub trait Embedder: Send + Sync {
    fn profile(&self) -> &Profile;
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// Remembers the vectors of the last [`RECENT_QUERIES`] single texts it embedded: a
/// question is embedded once per scope searched (the memory searches two) and again for
/// each request of a turn, and a neural embedder takes ~12 ms a time. Batches (documents
/// being indexed) and long texts pass straight through, so it never holds more than
/// [`RECENT_QUERIES`] × [`RECENT_QUERY_BYTES`] of text.
pub struct RecentQueries {
    inner: std::sync::Arc<dyn Embedder>,
    recent: std::sync::Mutex<std::collections::VecDeque<(String, Vec<f32>)>>,
}

/// Texts [`RecentQueries`] keeps the vectors of.
pub const RECENT_QUERIES: usize = 16;
/// The longest text it keeps one for, in bytes (a question, not a document).
pub const RECENT_QUERY_BYTES: usize = 4096;

impl RecentQueries {
    pub fn new(inner: std::sync::Arc<dyn Embedder>) -> RecentQueries {
        RecentQueries {
            inner,
            recent: Default::default(),
        }
    }
}

impl Embedder for RecentQueries {
    fn profile(&self) -> &Profile {
        self.inner.profile()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let [text] = texts else {
            return self.inner.embed(texts);
        };
        if text.len() > RECENT_QUERY_BYTES {
            return self.inner.embed(texts);
        }
        let lock = || self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, v)) = lock().iter().find(|(t, _)| t == text) {
            return Ok(vec![v.clone()]);
        }
        // Not held while the model runs: a slow embedding never blocks another lookup.
        let vectors = self.inner.embed(texts)?;
        if let [v] = vectors.as_slice() {
            let mut recent = lock();
            if recent.len() == RECENT_QUERIES {
                recent.pop_front();
            }
            recent.push_back((text.to_string(), v.clone()));
        }
        Ok(vectors)
    }
}

/// Cosine similarity of two unit vectors (their dot product); 0 for mismatched lengths.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Scales a vector to length 1 (a zero vector stays zero: it is similar to nothing).
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// The synonym table shipped with the lexicon embedder. Versioned: a change to it is a new
/// profile id, since every stored vector depends on it.
const SYNONYMS_V1: &str = include_str!("../data/synonyms-v1.json");

#[derive(Deserialize)]
struct SynonymFile {
    schema: u32,
    id: String,
    groups: Vec<Vec<String>>,
}

/// Word → group index, and the CJK entries (matched inside CJK runs, which have no spaces).
pub struct Synonyms {
    id: String,
    words: HashMap<String, usize>,
    cjk: Vec<(Vec<char>, usize)>,
    cjk_text: Vec<(String, usize)>,
}

impl Synonyms {
    /// The shipped table.
    pub fn v1() -> &'static Synonyms {
        static TABLE: OnceLock<Synonyms> = OnceLock::new();
        TABLE.get_or_init(|| {
            Synonyms::parse(SYNONYMS_V1).expect("the shipped synonym table is valid")
        })
    }

    pub fn parse(json: &str) -> Result<Synonyms, String> {
        let file: SynonymFile = serde_json::from_str(json).map_err(|e| e.to_string())?;
        if file.schema != 1 {
            return Err(format!(
                "synonym table schema {} (this version reads 1)",
                file.schema
            ));
        }
        let mut words = HashMap::new();
        let mut cjk = Vec::new();
        let mut cjk_text = Vec::new();
        for (group, entries) in file.groups.iter().enumerate() {
            for entry in entries {
                let entry = text::normalize(entry);
                if entry.chars().all(text::is_cjk) {
                    cjk.push((entry.chars().collect(), group));
                    cjk_text.push((entry.clone(), group));
                } else {
                    // A word in two groups belongs to the first: the table stays a function.
                    words.entry(entry).or_insert(group);
                }
            }
        }
        Ok(Synonyms {
            id: file.id,
            words,
            cjk,
            cjk_text,
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn group_of(&self, word: &str) -> Option<usize> {
        self.words.get(word).copied()
    }

    /// Every group a text mentions: its words', and the CJK entries inside its CJK runs.
    pub fn groups_of_text(&self, text: &str) -> Vec<usize> {
        let mut out = Vec::new();
        for piece in text::pieces(text) {
            let groups = match piece {
                Piece::Word(terms) => terms.iter().filter_map(|t| self.group_of(t)).collect(),
                Piece::Cjk(run) => self.groups_in(&run),
            };
            for g in groups {
                if !out.contains(&g) {
                    out.push(g);
                }
            }
        }
        out
    }

    /// The group of one keyword: a word's own, or – for a CJK fragment (a character or a
    /// 2-gram) – the group of an entry among `groups` that contains it.
    pub fn group_of_fragment(&self, keyword: &str, groups: &[usize]) -> Option<usize> {
        if let Some(g) = self.group_of(keyword) {
            return Some(g);
        }
        let fragment: Vec<char> = keyword.chars().collect();
        if fragment.is_empty() || !fragment.iter().all(|c| text::is_cjk(*c)) {
            return None;
        }
        self.cjk
            .iter()
            .filter(|(_, g)| groups.contains(g))
            .find(|(entry, _)| {
                entry
                    .windows(fragment.len())
                    .any(|w| w == fragment.as_slice())
            })
            .map(|(_, g)| *g)
    }

    /// The words and entries of a group.
    pub fn members(&self, group: usize) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .words
            .iter()
            .filter(|(_, g)| **g == group)
            .map(|(w, _)| w.as_str())
            .collect();
        out.extend(
            self.cjk_text
                .iter()
                .filter(|(_, g)| *g == group)
                .map(|(w, _)| w.as_str()),
        );
        out.sort_unstable();
        out
    }

    /// The groups whose CJK entries occur in `run`.
    pub fn groups_in(&self, run: &[char]) -> Vec<usize> {
        let mut out = Vec::new();
        for (entry, group) in &self.cjk {
            if run.windows(entry.len()).any(|w| w == entry.as_slice()) && !out.contains(group) {
                out.push(*group);
            }
        }
        out
    }
}

/// `deterministic-lexicon-v2`: NFKC + lower-case, code/path terms, English words by their
/// Snowball stem ("reconnections", "reconnecting" → "reconnect"), CJK 3-grams, synonym
/// groups, signed feature hashing into 128 dimensions, L2 normalisation. It sees only the
/// text: no ids, subsets or relevance can leak into a vector. (v1 was the same without
/// stems; vectors of another profile are embedded again by the store.)
pub struct LexiconEmbedder {
    profile: Profile,
    synonyms: Option<&'static Synonyms>,
    stems: bool,
}

impl LexiconEmbedder {
    pub const ID: &'static str = "deterministic-lexicon-v2";
    pub const DIMENSIONS: usize = 128;
    /// A synonym group counts as much as two words: it is the one signal that links texts
    /// sharing no word, and each text has only a few.
    const CONCEPT_WEIGHT: f32 = 2.0;

    pub fn new() -> LexiconEmbedder {
        LexiconEmbedder {
            profile: Self::profile_with(Self::ID),
            synonyms: Some(Synonyms::v1()),
            stems: true,
        }
    }

    /// Without the synonym table (the ablation: what the concept signal is worth).
    pub fn without_synonyms() -> LexiconEmbedder {
        LexiconEmbedder {
            profile: Self::profile_with("deterministic-lexicon-v2-nosyn"),
            synonyms: None,
            stems: true,
        }
    }

    /// Without stems (the ablation, and v1's vectors: what the stemmer is worth).
    pub fn without_stems() -> LexiconEmbedder {
        LexiconEmbedder {
            profile: Self::profile_with("deterministic-lexicon-v1"),
            synonyms: Some(Synonyms::v1()),
            stems: false,
        }
    }

    fn profile_with(id: &str) -> Profile {
        Profile {
            id: id.into(),
            dimensions: Self::DIMENSIONS,
            // Fitted on the calibration halves of the retrieval fixtures (`eval::fit`,
            // test `the_lexicon_constants_are_fitted_on_calibration_queries_only`): the
            // hashed words add nothing to the ranking beside the words themselves, so the
            // vector track only brings candidates (above the scope's median similarity),
            // and a thesaurus synonym counts as much as the word.
            min_similarity: 0.0,
            strong_similarity: 0.1,
            semantic_weight: 0.0,
            concept_credit: 1.0,
            kind: EmbedderKind::Lexicon,
            reads_cjk: true,
        }
    }

    /// The features of a text with their weights (before hashing).
    pub fn features(&self, text: &str) -> Vec<(String, f32)> {
        // feature → (weight of one occurrence, occurrences)
        let mut counts: HashMap<String, (f32, u32)> = HashMap::new();
        let mut add = |f: String, w: f32| {
            let e = counts.entry(f).or_insert((w, 0));
            e.1 += 1;
        };
        for piece in text::pieces(text) {
            match piece {
                Piece::Word(terms) => {
                    for term in terms {
                        if text::is_stop_word(&term) {
                            continue;
                        }
                        if let Some(group) = self.synonyms.and_then(|s| s.group_of(&term)) {
                            add(format!("s:{group}"), Self::CONCEPT_WEIGHT);
                        }
                        add(format!("w:{}", self.word(&term)), 1.0);
                    }
                }
                Piece::Cjk(run) => {
                    if run.len() < 3 {
                        let s: String = run.iter().collect();
                        if !text::is_stop_word(&s) {
                            add(format!("c:{s}"), 1.0);
                        }
                    } else {
                        for tri in run.windows(3) {
                            add(format!("c:{}", tri.iter().collect::<String>()), 1.0);
                        }
                    }
                    if let Some(synonyms) = self.synonyms {
                        for group in synonyms.groups_in(&run) {
                            add(format!("s:{group}"), Self::CONCEPT_WEIGHT);
                        }
                    }
                }
            }
        }
        let mut features: Vec<(String, f32)> = counts
            .into_iter()
            // Sublinear: a word said five times is not five times the topic.
            .map(|(f, (w, n))| (f, w * (1.0 + (n as f32).ln())))
            .collect();
        features.sort_by(|a, b| a.0.cmp(&b.0));
        features
    }

    /// A word as a feature: its English stem when it is a plain English word (letters
    /// only), else itself – a code or path token, a number, a unit stays exact.
    fn word<'a>(&self, term: &'a str) -> std::borrow::Cow<'a, str> {
        if !self.stems || term.len() < 4 || !term.bytes().all(|b| b.is_ascii_lowercase()) {
            return std::borrow::Cow::Borrowed(term);
        }
        english_stemmer().stem(term)
    }

    fn vector(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; Self::DIMENSIONS];
        for (feature, weight) in self.features(text) {
            let h = fnv1a(feature.as_bytes());
            let index = (h % Self::DIMENSIONS as u64) as usize;
            // The sign from another bit: colliding features cancel as often as they add.
            let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
            v[index] += sign * weight;
        }
        l2_normalize(&mut v);
        v
    }
}

/// The Snowball English stemmer (built once; it is immutable).
fn english_stemmer() -> &'static rust_stemmers::Stemmer {
    static STEMMER: std::sync::OnceLock<rust_stemmers::Stemmer> = std::sync::OnceLock::new();
    STEMMER.get_or_init(|| rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English))
}

impl Default for LexiconEmbedder {
    fn default() -> Self {
        Self::new()
    }
}

impl Embedder for LexiconEmbedder {
    fn profile(&self) -> &Profile {
        &self.profile
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| self.vector(t)).collect())
    }
}

/// 64-bit FNV-1a: stable across platforms and versions, unlike `std`'s hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lexicon embedder, counting the texts it is asked to embed.
    struct Counting(LexiconEmbedder, std::sync::atomic::AtomicUsize);

    impl Embedder for Counting {
        fn profile(&self) -> &Profile {
            self.0.profile()
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.1
                .fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
            self.0.embed(texts)
        }
    }

    #[test]
    fn a_question_asked_again_is_not_embedded_again_and_documents_pass_through() {
        let inner = std::sync::Arc::new(Counting(LexiconEmbedder::new(), Default::default()));
        let e = RecentQueries::new(inner.clone());
        let count = || inner.1.load(std::sync::atomic::Ordering::SeqCst);
        let first = e.embed(&["why does the plot stop?"]).unwrap();
        let again = e.embed(&["why does the plot stop?"]).unwrap();
        assert_eq!(first, again, "the same vector");
        assert_eq!(
            first,
            LexiconEmbedder::new()
                .embed(&["why does the plot stop?"])
                .unwrap()
        );
        assert_eq!(count(), 1, "embedded once");
        // A batch (documents being indexed) and a long text are not kept.
        e.embed(&["a", "b"]).unwrap();
        e.embed(&["a", "b"]).unwrap();
        let long = "x".repeat(RECENT_QUERY_BYTES + 1);
        e.embed(&[&long]).unwrap();
        e.embed(&[&long]).unwrap();
        assert_eq!(count(), 1 + 4 + 2);
        // It keeps the newest RECENT_QUERIES: the oldest is embedded again once they are more.
        for i in 0..RECENT_QUERIES {
            e.embed(&[&format!("question {i}")]).unwrap();
        }
        let before = count();
        e.embed(&[&format!("question {}", RECENT_QUERIES - 1)])
            .unwrap();
        assert_eq!(count(), before, "a recent one is kept");
        e.embed(&["why does the plot stop?"]).unwrap();
        assert_eq!(count(), before + 1, "the oldest was let go");
        assert_eq!(e.profile(), inner.profile());
    }

    #[test]
    fn english_inflections_share_a_feature_and_code_stays_exact() {
        // Without the thesaurus, which may know one form of a word and not another.
        let e = LexiconEmbedder::without_synonyms();
        let cosine = |a: &str, b: &str| {
            let v = e.embed(&[a, b]).unwrap();
            v[0].iter().zip(&v[1]).map(|(x, y)| x * y).sum::<f32>()
        };
        // (a, b, the same after stemming)
        let cases = [
            ("reconnections", "reconnect", true),
            ("disconnecting", "disconnected", true),
            ("sensors", "sensor", true),
            ("plotted", "plotting", true),
            ("tableGet", "tableGets", false),
            ("/dev/ttyUSB0", "/dev/ttyUSB", false),
            ("9600", "96000", false),
        ];
        for (a, b, same) in cases {
            let c = cosine(a, b);
            assert_eq!(c > 0.99, same, "{a} ~ {b}: {c}");
        }
        let v1 = LexiconEmbedder::without_stems();
        let v = v1.embed(&["disconnecting", "disconnected"]).unwrap();
        let c: f32 = v[0].iter().zip(&v[1]).map(|(x, y)| x * y).sum();
        assert!(c < 0.9, "without stems they differ: {c}");
        assert_ne!(
            LexiconEmbedder::new().profile().id,
            v1.profile().id,
            "other vectors, another profile"
        );
    }

    #[test]
    fn vectors_are_unit_and_deterministic() {
        let e = LexiconEmbedder::new();
        let v = e
            .embed(&["The rover's GPS is on /dev/ttyUSB1 at 9600 baud"])
            .unwrap();
        assert_eq!(v[0].len(), 128);
        let norm: f32 = v[0].iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-5);
        assert_eq!(
            v,
            e.embed(&["The rover's GPS is on /dev/ttyUSB1 at 9600 baud"])
                .unwrap()
        );
        assert!(e.embed(&["the of and"]).unwrap()[0]
            .iter()
            .all(|x| *x == 0.0));
    }

    #[test]
    fn synonyms_link_texts_that_share_no_word() {
        let with = LexiconEmbedder::new();
        let without = LexiconEmbedder::without_synonyms();
        let (a, b) = ("uart bitrate", "serial baud");
        let sim = |e: &LexiconEmbedder| {
            let v = e.embed(&[a, b]).unwrap();
            cosine(&v[0], &v[1])
        };
        assert!(sim(&with) > 0.5, "{}", sim(&with));
        assert!(sim(&without) < 0.3, "{}", sim(&without));
    }

    #[test]
    fn cjk_synonyms_match_inside_runs() {
        let s = Synonyms::v1();
        let run: Vec<char> = "把串口波特率改成".chars().collect();
        let groups = s.groups_in(&run);
        assert!(groups.contains(&s.group_of("baud").unwrap()), "{groups:?}");
    }
}
