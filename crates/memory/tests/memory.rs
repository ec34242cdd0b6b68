//! The memory store on a real SQLite file: caps, eviction, redaction, project isolation,
//! the request index, deletion and persistence.

use std::sync::Arc;

use sextant_memory::{
    Category, MemoryError, MemoryStore, MAX_FACTS, MAX_FILE_BYTES, MAX_INDEX_BYTES, MAX_TEXT_CHARS,
};
use sextant_retrieval::diagnostics::Collector;
use sextant_retrieval::LexiconEmbedder;

fn open(dir: &std::path::Path) -> MemoryStore {
    MemoryStore::open(
        &dir.join("memory.sqlite"),
        Arc::new(LexiconEmbedder::new()),
        Arc::new(Collector::new()),
    )
    .unwrap()
}

/// A fact text of exactly `n` characters about topic `i`.
fn filler(i: usize, n: usize) -> String {
    let mut s = format!("fact {i}: the bench rig number {i} logs telemetry to its own folder ");
    while s.chars().count() < n {
        s.push_str("and keeps every capture ");
    }
    s.chars().take(n).collect()
}

#[test]
fn a_fact_over_400_characters_is_refused_and_400_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = open(dir.path());
    let err = m
        .add(Category::Preference, &"é".repeat(MAX_TEXT_CHARS + 1), None)
        .unwrap_err();
    assert!(matches!(err, MemoryError::TooLong(401)), "{err}");
    assert!(err.to_string().contains("at most 400 characters"));
    assert!(m
        .add(Category::Preference, &"é".repeat(MAX_TEXT_CHARS), None)
        .is_ok());
    assert!(matches!(
        m.add(Category::Preference, "   ", None),
        Err(MemoryError::Empty)
    ));
    assert_eq!(m.list(None).unwrap().len(), 1);
}

#[test]
fn the_101st_fact_evicts_the_least_recently_used_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = open(dir.path());
    let mut ids = Vec::new();
    for i in 0..MAX_FACTS {
        ids.push(
            m.add(Category::Reference, &format!("reference number {i}"), None)
                .unwrap()
                .fact
                .id,
        );
    }
    // The first is used again, so the second is now the least recently used.
    std::thread::sleep(std::time::Duration::from_millis(5));
    m.touch(&[ids[0]]).unwrap();
    let w = m
        .add(Category::Preference, "I prefer hex in the terminal", None)
        .unwrap();
    let evicted = w.evicted.expect("a fact made room");
    assert_eq!(evicted.text, "reference number 1");
    assert_eq!(m.list(None).unwrap().len(), MAX_FACTS);
    assert!(m.get(ids[0]).unwrap().is_some());
    assert!(
        m.search("reference number 1", None, 10)
            .unwrap()
            .iter()
            .all(|f| f.id != evicted.id),
        "evicted from the index too"
    );
}

#[test]
fn secrets_are_redacted_before_they_are_kept_and_a_secret_alone_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = open(dir.path());
    let key = format!("sk-ant-api03-{}", "Qw3rTy".repeat(8));
    let w = m
        .add(
            Category::Reference,
            &format!("the lab key is {key} on the wiki"),
            None,
        )
        .unwrap();
    assert_eq!(
        w.fact.text,
        "the lab key is [REDACTED:anthropic_key] on the wiki"
    );
    assert_eq!(w.redacted, ["anthropic_key"]);
    let raw = std::fs::read(dir.path().join("memory.sqlite")).unwrap();
    assert!(
        !raw.windows(key.len()).any(|w| w == key.as_bytes()),
        "the key never reaches the file"
    );
    let err = m.add(Category::Reference, &key, None).unwrap_err();
    assert!(err.to_string().contains("nothing is left"), "{err}");
    let err = m.edit(w.fact.id, &format!(" {key} ")).unwrap_err();
    assert!(err.to_string().contains("nothing is left"), "{err}");
    // A refused edit changes nothing.
    assert_eq!(
        m.get(w.fact.id).unwrap().unwrap().text,
        "the lab key is [REDACTED:anthropic_key] on the wiki"
    );
}

#[test]
fn a_project_fact_is_never_seen_with_another_project_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = open(dir.path());
    m.add(
        Category::Project,
        "the rover GPS runs at 9600 baud",
        Some("/home/a/rover.json"),
    )
    .unwrap();
    m.add(
        Category::Preference,
        "I prefer baud rates written in full",
        None,
    )
    .unwrap();
    assert!(matches!(
        m.add(Category::Project, "no project given", None),
        Err(MemoryError::ProjectMismatch)
    ));
    let in_a = m
        .search("GPS baud", Some("/home/a/rover.json"), 10)
        .unwrap();
    assert_eq!(in_a.len(), 2);
    let in_b = m
        .search("GPS baud", Some("/home/b/drone.json"), 10)
        .unwrap();
    assert_eq!(in_b.len(), 1);
    assert!(in_b[0].project.is_none());
    let (index, _) = m
        .request_index("what baud does the GPS use?", Some("/home/b/drone.json"))
        .unwrap()
        .unwrap();
    assert!(!index.contains("rover GPS"), "{index}");
    let (index, _) = m
        .request_index("what baud does the GPS use?", None)
        .unwrap()
        .unwrap();
    assert!(
        !index.contains("rover GPS"),
        "no project open: no project facts"
    );
}

#[test]
fn the_request_index_fits_4096_bytes_and_leads_with_what_the_message_is_about() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = open(dir.path());
    // The relevant fact is the OLDEST: a ranking by recency alone would put it last.
    let relevant = m
        .add(
            Category::Preference,
            "From now on use 921600 baud for the IMU on /dev/ttyACM0",
            None,
        )
        .unwrap()
        .fact;
    let mut fillers = Vec::new();
    for i in 0..MAX_FACTS - 1 {
        fillers.push(
            m.add(Category::Reference, &filler(i, MAX_TEXT_CHARS), None)
                .unwrap()
                .fact,
        );
    }
    // Time moves on before the message, so a touch is a later clock reading, not the same.
    std::thread::sleep(std::time::Duration::from_millis(5));
    let (index, used) = m
        .request_index("which baud rate for the IMU?", None)
        .unwrap()
        .unwrap();
    assert!(index.len() <= MAX_INDEX_BYTES, "{} bytes", index.len());
    assert!(
        index.starts_with("- [preference] From now on use 921600 baud"),
        "{}",
        &index[..120]
    );
    assert_eq!(used[0], relevant.id);
    assert!(used.len() >= 8, "as many facts as fit: {}", used.len());
    assert!(
        used.len() < MAX_FACTS,
        "not every fact fits: {}",
        used.len()
    );
    // The facts it carried are touched; the ones it did not keep their time.
    let after = |id| m.get(id).unwrap().unwrap().last_used_unix_ms;
    assert!(after(relevant.id) > relevant.last_used_unix_ms);
    let left_out = fillers.iter().find(|f| !used.contains(&f.id)).unwrap();
    assert_eq!(after(left_out.id), left_out.last_used_unix_ms);
    // 100 facts of 400 characters stay under the file cap.
    let size = std::fs::metadata(dir.path().join("memory.sqlite"))
        .unwrap()
        .len();
    eprintln!("100 facts of 400 characters: {size} bytes");
    assert!(size <= MAX_FILE_BYTES, "{size} bytes");
}

#[test]
fn a_deleted_fact_is_gone_from_the_next_index_and_facts_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (keep, gone) = {
        let mut m = open(dir.path());
        let keep = m
            .add(
                Category::Correction,
                "the chamber setpoint is written times 10",
                None,
            )
            .unwrap()
            .fact;
        let gone = m
            .add(
                Category::Preference,
                "always plot the chamber temperature in red",
                None,
            )
            .unwrap()
            .fact;
        (keep, gone)
    };
    let mut m = open(dir.path());
    assert_eq!(m.list(None).unwrap().len(), 2, "facts survive a reopen");
    assert!(m.delete(gone.id).unwrap());
    assert!(!m.delete(gone.id).unwrap());
    let (index, used) = m
        .request_index("chamber temperature plot", None)
        .unwrap()
        .unwrap();
    assert_eq!(used, [keep.id]);
    assert!(!index.contains("red"));
    assert_eq!(m.clear().unwrap(), 1);
    assert!(m.request_index("chamber", None).unwrap().is_none());
    assert!(m.list(Some(Category::Correction)).unwrap().is_empty());
}

#[test]
fn a_full_store_fits_the_file_cap_with_the_neural_embedder_too() {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let model = sextant_embed_minilm::locate(None, &target)
        .expect("all-MiniLM-L6-v2 not found: run `./dev test` (it fetches the model), or set SEXTANT_EMBEDDING_MODEL_DIR");
    let embedder = Arc::new(sextant_embed_minilm::MiniLmEmbedder::load(&model).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let mut m = MemoryStore::open(
        &dir.path().join("memory.sqlite"),
        embedder,
        Arc::new(Collector::new()),
    )
    .unwrap();
    for i in 0..MAX_FACTS {
        m.add(Category::Reference, &filler(i, MAX_TEXT_CHARS), None)
            .unwrap();
    }
    let size = std::fs::metadata(dir.path().join("memory.sqlite"))
        .unwrap()
        .len();
    eprintln!("100 facts of 400 characters with MiniLM: {size} bytes");
    assert!(size <= MAX_FILE_BYTES, "{size} bytes");
    // The 101st still goes in: the evicted fact's space is reused.
    assert!(m
        .add(Category::Reference, &filler(100, MAX_TEXT_CHARS), None)
        .unwrap()
        .evicted
        .is_some());
}
