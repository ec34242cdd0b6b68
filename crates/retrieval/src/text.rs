//! The one tokenizer: what the full-text index stores, what a query searches for, and the
//! features the lexicon embedder hashes all come from here, so an index and its queries can
//! never disagree about what a word is.
//!
//! Rules (spec 40 "Tokenizer for keywords", spec 50 "deterministic-lexicon-v1"):
//! - NFKC first (full-width `ＣＡＮ` is `CAN`), then lower-case.
//! - A *word* is a run of letters, digits and joiners (`_ . / \ : - + # @ $`) that are not
//!   CJK; joiners at its ends are punctuation and dropped. A word with joiners or inner
//!   capitals is code or a path: it yields itself (joiners as `_`), each joiner-separated
//!   part, and each part's camelCase pieces – `crates/x/y.rs` → `crates_x_y_rs`, `crates`,
//!   `x`, `y`, `rs`; `parseFrame` → `parseframe`, `parse`, `frame`.
//! - CJK text yields each character and each sliding 2-gram ("压缩架构" → 压 缩 架 构 压缩
//!   缩架 架构) for the index and keywords; a non-CJK character ends the window. The
//!   embedder uses 3-grams instead (see `embed`).
//! - Stop-words (English and Chinese) are dropped from keywords, never from the index.

use unicode_normalization::UnicodeNormalization;

/// Characters that join the parts of one code or path token.
const JOINERS: &[char] = &['_', '.', '/', '\\', ':', '-', '+', '#', '@', '$'];

/// English and Chinese words too common to say what a text is about.
const STOP_WORDS: &[&str] = &[
    // English
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been",
    "before", "but", "by", "can", "could", "did", "do", "does", "doing", "each", "for", "from",
    "get", "got", "had", "has", "have", "he", "her", "here", "him", "his", "how", "i", "if", "in",
    "into", "is", "it", "its", "just", "me", "my", "no", "not", "now", "of", "on", "one", "or",
    "our", "out", "she", "should", "so", "some", "than", "that", "the", "their", "them", "then",
    "there", "these", "they", "this", "those", "to", "too", "up", "us", "use", "used", "uses",
    "using", "was", "we", "were", "what", "when", "where", "which", "while", "who", "why", "will",
    "with", "would", "you", "your", "set", "again", "tell", "remind", "please", "whats", "there's",
    "it's", "i'm", "don't", "was", "says",
    // Chinese (single characters and common function words)
    "的", "了", "是", "在", "我", "你", "他", "她", "它", "们", "这", "那", "和", "与", "及", "或",
    "也", "都", "就", "还", "而", "把", "被", "让", "给", "对", "从", "到", "吗", "呢", "吧", "啊",
    "么", "什", "哪", "个", "些", "有", "没", "不", "要", "会", "能", "可", "以", "用", "请", "为",
    "着", "过", "上", "下", "中", "里", "一", "怎", "样", "如", "何", "时", "什么", "怎么", "哪个",
    "哪些", "我们", "你们", "他们", "这个", "那个", "可以", "如何", "时候", "是否", "一下", "已经",
    "现在",
];

/// Whether a character is written in a CJK script (no spaces between words).
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2EBEF) // Extensions B–F
}

/// Whether most letters of a text are CJK.
pub fn mostly_cjk(text: &str) -> bool {
    let (mut cjk, mut letters) = (0usize, 0usize);
    for c in text.chars().filter(|c| c.is_alphabetic()) {
        letters += 1;
        cjk += is_cjk(c) as usize;
    }
    letters > 0 && cjk * 2 > letters
}

/// Whether `word` is a stop-word.
pub fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.contains(&word)
}

/// NFKC and lower-case: the form every rule below sees.
pub fn normalize(text: &str) -> String {
    text.nfkc().flat_map(char::to_lowercase).collect()
}

/// A piece of text as the tokenizer splits it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// A non-CJK word: its terms (whole first, then parts and pieces; lower-case).
    Word(Vec<String>),
    /// A run of consecutive CJK characters.
    Cjk(Vec<char>),
}

/// Splits text into words and CJK runs, in order.
pub fn pieces(text: &str) -> Vec<Piece> {
    // NFKC without lower-casing yet: camelCase needs the capitals.
    let text: String = text.nfkc().collect();
    let mut out = Vec::new();
    let mut word = String::new();
    let mut cjk = Vec::new();
    for c in text.chars() {
        if is_cjk(c) {
            flush_word(&mut word, &mut out);
            cjk.push(c);
        } else if c.is_alphanumeric() || JOINERS.contains(&c) {
            flush_cjk(&mut cjk, &mut out);
            word.push(c);
        } else {
            flush_word(&mut word, &mut out);
            flush_cjk(&mut cjk, &mut out);
        }
    }
    flush_word(&mut word, &mut out);
    flush_cjk(&mut cjk, &mut out);
    out
}

fn flush_cjk(run: &mut Vec<char>, out: &mut Vec<Piece>) {
    if !run.is_empty() {
        out.push(Piece::Cjk(std::mem::take(run)));
    }
}

fn flush_word(word: &mut String, out: &mut Vec<Piece>) {
    let raw = std::mem::take(word);
    let trimmed = raw.trim_matches(JOINERS);
    if trimmed.is_empty() {
        return;
    }
    let terms = word_terms(trimmed);
    if !terms.is_empty() {
        out.push(Piece::Word(terms));
    }
}

/// The terms of one word (see the module doc), deduplicated, whole first.
fn word_terms(word: &str) -> Vec<String> {
    let parts: Vec<&str> = word.split(JOINERS).filter(|p| !p.is_empty()).collect();
    let mut terms: Vec<String> = Vec::new();
    let mut push = |t: String| {
        if !t.is_empty() && !terms.contains(&t) {
            terms.push(t);
        }
    };
    push(parts.iter().map(|p| lower(p)).collect::<Vec<_>>().join("_"));
    if parts.len() > 1 {
        for part in &parts {
            push(lower(part));
        }
    }
    for part in &parts {
        let camel = camel_pieces(part);
        if camel.len() > 1 {
            for piece in camel {
                push(lower(piece));
            }
        }
    }
    terms
}

fn lower(s: &str) -> String {
    s.chars().flat_map(char::to_lowercase).collect()
}

/// `parseFrame` → `parse`, `Frame`; `BMS_PackVoltage`'s `PackVoltage` → `Pack`, `Voltage`;
/// `HTTPServer` → `HTTP`, `Server`. Digits stay with the letters before them (`ttyUSB0`).
fn camel_pieces(part: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = part.char_indices().collect();
    let mut cuts = vec![0];
    for i in 1..chars.len() {
        let (at, c) = chars[i];
        let prev = chars[i - 1].1;
        let next = chars.get(i + 1).map(|&(_, n)| n);
        let lower_to_upper = prev.is_lowercase() && c.is_uppercase();
        let acronym_end =
            prev.is_uppercase() && c.is_uppercase() && next.is_some_and(char::is_lowercase);
        if lower_to_upper || acronym_end {
            cuts.push(at);
        }
    }
    cuts.push(part.len());
    cuts.windows(2)
        .map(|w| &part[w[0]..w[1]])
        .filter(|p| !p.is_empty())
        .collect()
}

/// Every term of a text for the full-text index: each word's terms, each CJK character and
/// 2-gram. Stop-words are kept (a phrase search may need them); the ranking discounts them.
pub fn index_terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for piece in pieces(text) {
        match piece {
            Piece::Word(terms) => out.extend(terms),
            Piece::Cjk(run) => cjk_unigrams_and_bigrams(&run, &mut out),
        }
    }
    out
}

fn cjk_unigrams_and_bigrams(run: &[char], out: &mut Vec<String>) {
    for c in run {
        out.push(c.to_string());
    }
    for pair in run.windows(2) {
        out.push(pair.iter().collect());
    }
}

/// Most keywords a query is searched by: a pasted log of a megabyte is searched by its
/// first words, not by a hundred thousand of them.
pub const MAX_KEYWORDS: usize = 64;

/// The keywords of a query: its index terms less stop-words, each once, in order of first
/// appearance, at most [`MAX_KEYWORDS`]. Empty when the query is all stop-words (callers
/// then skip full-text search).
pub fn keywords(text: &str) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<String> = Vec::new();
    for term in index_terms(text) {
        if out.len() == MAX_KEYWORDS {
            break;
        }
        if !is_stop_word(&term) && seen.insert(term.clone()) {
            out.push(term);
        }
    }
    out
}

/// An FTS5 query matching any of `keywords` (each a quoted string, so no keyword is read
/// as FTS syntax); `None` for no keywords.
pub fn fts_query(keywords: &[String]) -> Option<String> {
    if keywords.is_empty() {
        return None;
    }
    let quoted: Vec<String> = keywords
        .iter()
        .map(|k| format!("\"{}\"", k.replace('"', "\"\"")))
        .collect();
    Some(quoted.join(" OR "))
}

/// Where a term sits in the original text: a word's byte range and its terms, or one CJK
/// character's range with the character and its 2-gram with the next one. Snippets use it to
/// mark what matched without re-implementing the rules above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub range: std::ops::Range<usize>,
    pub terms: Vec<String>,
}

/// The [`Span`]s of `text`, in order. Classifies each original character by its NFKC form,
/// so offsets stay in the original text (`ＣＡＮ` is one span of three full-width letters).
pub fn spans(text: &str) -> Vec<Span> {
    #[derive(PartialEq)]
    enum Class {
        Cjk,
        Word,
        Other,
    }
    let class = |c: char| {
        let n = c.nfkc().next().unwrap_or(c);
        if is_cjk(n) {
            Class::Cjk
        } else if n.is_alphanumeric() || JOINERS.contains(&n) {
            Class::Word
        } else {
            Class::Other
        }
    };
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        match class(c) {
            Class::Other => i += 1,
            Class::Cjk => {
                let end = at + c.len_utf8();
                let n: String = c.nfkc().collect::<String>().to_lowercase();
                let mut terms = vec![n.clone()];
                if let Some(&(_, next)) = chars.get(i + 1) {
                    if class(next) == Class::Cjk {
                        terms.push(format!("{n}{}", next.nfkc().collect::<String>()));
                    }
                }
                out.push(Span {
                    range: at..end,
                    terms,
                });
                i += 1;
            }
            Class::Word => {
                let mut j = i;
                while j < chars.len() && class(chars[j].1) == Class::Word {
                    j += 1;
                }
                let end = chars.get(j).map_or(text.len(), |&(e, _)| e);
                let raw = &text[at..end];
                let word: String = raw.nfkc().collect();
                let trimmed = word.trim_matches(JOINERS);
                if !trimmed.is_empty() {
                    // The range without the joiners at the ends (they are punctuation).
                    let lead = raw.len() - raw.trim_start_matches(JOINERS).len();
                    let tail = raw.len() - raw.trim_end_matches(JOINERS).len();
                    let terms = word_terms(trimmed);
                    if !terms.is_empty() && at + lead < end - tail {
                        out.push(Span {
                            range: at + lead..end - tail,
                            terms,
                        });
                    }
                }
                i = j;
            }
        }
    }
    out
}

/// A query that matches text containing every word of `text` (stop-words aside): an FTS5
/// expression over [`index_terms`]'s vocabulary, and the terms a snippet marks. `None`
/// when nothing is left to search for.
///
/// - A plain word must be there: `"baud"`.
/// - A code or path word matches itself or all of its parts, so `crates/x/y.rs` finds
///   `crates/x/y.rs:12` and `tableGet` finds `table_get`: `("tableget" OR ("table" AND
///   "get"))`.
/// - A CJK run must have each of its 2-grams (one character: that character), so "压缩架构"
///   finds its sentence and not a text that merely uses the same characters apart.
pub fn all_words_query(text: &str) -> Option<(String, Vec<String>)> {
    let quote = |t: &str| format!("\"{}\"", t.replace('"', "\"\""));
    let mut clauses: Vec<String> = Vec::new();
    let mut marks: Vec<String> = Vec::new();
    let mut push = |clause: String, terms: &[String], clauses: &mut Vec<String>| {
        if !clauses.contains(&clause) && clauses.len() < MAX_KEYWORDS {
            clauses.push(clause);
            marks.extend(terms.iter().cloned());
        }
    };
    for piece in pieces(text) {
        match piece {
            Piece::Word(terms) => {
                let whole = &terms[0];
                if terms.len() == 1 {
                    if !is_stop_word(whole) {
                        push(quote(whole), &terms, &mut clauses);
                    }
                    continue;
                }
                let parts: Vec<String> = terms[1..].iter().map(|t| quote(t)).collect();
                push(
                    format!("({} OR ({}))", quote(whole), parts.join(" AND ")),
                    &terms,
                    &mut clauses,
                );
            }
            Piece::Cjk(run) => {
                let lower: Vec<char> = run.iter().flat_map(|c| c.to_lowercase()).collect();
                let grams: Vec<String> = if lower.len() == 1 {
                    vec![lower[0].to_string()]
                } else {
                    lower.windows(2).map(|w| w.iter().collect()).collect()
                };
                for g in grams.into_iter().filter(|g| !is_stop_word(g)) {
                    push(quote(&g), std::slice::from_ref(&g), &mut clauses);
                }
            }
        }
    }
    (!clauses.is_empty()).then(|| (clauses.join(" AND "), marks))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(text: &str) -> Vec<String> {
        index_terms(text)
    }

    #[test]
    fn cases() {
        let cases: &[(&str, &[&str])] = &[
            ("Baud RATE", &["baud", "rate"]),
            ("parseFrame", &["parseframe", "parse", "frame"]),
            (
                "decode_imu_packet",
                &["decode_imu_packet", "decode", "imu", "packet"],
            ),
            (
                "crates/x/y.rs",
                &["crates_x_y_rs", "crates", "x", "y", "rs"],
            ),
            ("Module::fn", &["module_fn", "module", "fn"]),
            (
                "/dev/ttyUSB0.",
                &["dev_ttyusb0", "dev", "ttyusb0", "tty", "usb0"],
            ),
            ("HTTPServer", &["httpserver", "http", "server"]),
            ("0x18FF50E5", &["0x18ff50e5"]),
            ("ＣＡＮ", &["can"]),
            (
                "压缩架构",
                &["压", "缩", "架", "构", "压缩", "缩架", "架构"],
            ),
            // A non-CJK character ends the 2-gram window.
            ("串口a断开", &["串", "口", "串口", "a", "断", "开", "断开"]),
            ("...", &[]),
        ];
        for (text, want) in cases {
            assert_eq!(terms(text), *want, "{text}");
        }
    }

    #[test]
    fn spans_keep_original_offsets() {
        let text = "Fix tableGet in crates/x/y.rs: 压缩架构 ＣＡＮ.";
        let spans = spans(text);
        let words: Vec<&str> = spans.iter().map(|s| &text[s.range.clone()]).collect();
        assert_eq!(
            words,
            [
                "Fix",
                "tableGet",
                "in",
                "crates/x/y.rs",
                "压",
                "缩",
                "架",
                "构",
                "ＣＡＮ"
            ]
        );
        assert_eq!(spans[1].terms, ["tableget", "table", "get"]);
        assert_eq!(spans[4].terms, ["压", "压缩"]);
        assert_eq!(spans[7].terms, ["构"]);
        assert_eq!(spans[8].terms, ["can"]);
    }

    #[test]
    fn all_words_queries() {
        let q = |t: &str| all_words_query(t).map(|(fts, _)| fts);
        assert_eq!(q("the baud rate").unwrap(), "\"baud\" AND \"rate\"");
        assert_eq!(
            q("tableGet").unwrap(),
            "(\"tableget\" OR (\"table\" AND \"get\"))"
        );
        assert_eq!(q("压缩架构").unwrap(), "\"压缩\" AND \"缩架\" AND \"架构\"");
        assert_eq!(q("压").unwrap(), "\"压\"");
        // FTS syntax in a query is just words.
        assert_eq!(
            q("NEAR(foo* \"x").unwrap(),
            "\"near\" AND \"foo\" AND \"x\""
        );
        assert!(q("what is the").is_none());
        assert!(q("...").is_none());
        let long: String = (0..10_000).map(|i| format!("w{i} ")).collect();
        assert_eq!(q(&long).unwrap().matches(" AND ").count(), MAX_KEYWORDS - 1);
    }

    #[test]
    fn keywords_drop_stop_words_and_repeats() {
        assert_eq!(
            keywords("What is the baud rate of the baud?"),
            ["baud", "rate"]
        );
        assert!(keywords("what is the").is_empty());
        assert!(fts_query(&keywords("the of and")).is_none());
        assert_eq!(fts_query(&["a\"b".to_string()]).unwrap(), "\"a\"\"b\"");
        let long: String = (0..10_000).map(|i| format!("w{i} ")).collect();
        assert_eq!(keywords(&long).len(), MAX_KEYWORDS);
    }
}
