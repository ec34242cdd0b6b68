//! The store's behaviour on a real SQLite file: scopes, replacement, atomicity, vectors
//! that arrive late, a changed embedder, the candidate budget, and the embedder endpoint
//! over real HTTP (and its timeout).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rusqlite::Connection;
use sextant_retrieval::diagnostics::{Collector, Degradation, Purpose};
use sextant_retrieval::embed::{EmbedError, Embedder, Profile};
use sextant_retrieval::endpoint::{EndpointEmbedder, TIMEOUT};
use sextant_retrieval::store::CANDIDATES;
use sextant_retrieval::{Doc, Index, LexiconEmbedder, Query, Scope, Track};

fn open() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path().join("r.sqlite")).unwrap();
    (dir, conn)
}

fn doc<'a>(id: &'a str, scope: &'a str, content: &'a str) -> Doc<'a> {
    Doc {
        id,
        scope,
        kind: "semantic",
        content,
        importance: 0.5,
    }
}

fn search(index: &Index, conn: &Connection, scope: &str, text: &str, track: Track) -> Vec<String> {
    index
        .search(
            conn,
            &Query {
                scope: Scope::One(scope),
                text,
                track,
                limit: 10,
                purpose: Purpose::Recall,
            },
        )
        .unwrap()
        .into_iter()
        .map(|h| h.id)
        .collect()
}

fn lexicon_index() -> Index {
    Index::new(
        "facts",
        Arc::new(LexiconEmbedder::new()),
        Arc::new(Collector::new()),
    )
    .unwrap()
}

#[test]
fn a_row_of_another_scope_is_never_returned_however_similar() {
    let (_dir, conn) = open();
    let index = lexicon_index();
    index.create(&conn).unwrap();
    index
        .put(
            &conn,
            &[
                doc("a1", "alice", "The GPS on /dev/ttyUSB1 runs at 9600 baud"),
                doc("b1", "bob", "The GPS on /dev/ttyUSB1 runs at 9600 baud"),
                doc(
                    "b2",
                    "bob",
                    "The GPS on /dev/ttyUSB1 runs at 9600 baud, really",
                ),
            ],
        )
        .unwrap();
    for track in Track::ALL {
        assert_eq!(
            search(&index, &conn, "alice", "GPS ttyUSB1 baud", track),
            ["a1"],
            "{track:?}"
        );
        assert!(search(&index, &conn, "carol", "GPS ttyUSB1 baud", track).is_empty());
    }
    let any = index
        .search(
            &conn,
            &Query {
                scope: Scope::Any,
                text: "GPS baud",
                track: Track::Hybrid,
                limit: 10,
                purpose: Purpose::Search,
            },
        )
        .unwrap();
    assert_eq!(
        any.len(),
        3,
        "an all-scopes search (asked for) sees every row"
    );
}

#[test]
fn equal_scores_order_by_id_and_a_put_replaces() {
    let (_dir, conn) = open();
    let index = lexicon_index();
    index.create(&conn).unwrap();
    index
        .put(
            &conn,
            &[
                doc("m2", "s", "same words here"),
                doc("m1", "s", "same words here"),
            ],
        )
        .unwrap();
    assert_eq!(
        search(&index, &conn, "s", "same words", Track::Hybrid),
        ["m1", "m2"]
    );
    index
        .put(&conn, &[doc("m2", "s", "completely different now")])
        .unwrap();
    assert_eq!(search(&index, &conn, "s", "same words", Track::Fts), ["m1"]);
    assert_eq!(search(&index, &conn, "s", "different", Track::Fts), ["m2"]);
    assert_eq!(index.count(&conn).unwrap(), 2);
    assert_eq!(index.remove(&conn, &["m1", "nope"]).unwrap(), 1);
    // Gone from every track (the other row may still come back on a hashed feature it
    // shares by chance: that is the vector track's business, not the removal's).
    assert!(search(&index, &conn, "s", "same words", Track::Fts).is_empty());
    for track in [Track::Vector, Track::Hybrid] {
        assert!(!search(&index, &conn, "s", "same words", track).contains(&"m1".to_string()));
    }
    assert_eq!(index.remove_scope(&conn, "s").unwrap(), 1);
    assert_eq!(index.count(&conn).unwrap(), 0);
}

#[test]
fn cjk_code_and_path_terms_are_findable() {
    let (_dir, conn) = open();
    let index = lexicon_index();
    index.create(&conn).unwrap();
    index
        .put(
            &conn,
            &[
                doc("c", "s", "我们讨论了压缩架构的设计"),
                doc("t", "s", "call tableGet before the frame is parsed"),
                doc("p", "s", "the bug is in crates/x/y.rs line 40"),
                doc("n", "s", "nothing to see"),
            ],
        )
        .unwrap();
    assert_eq!(search(&index, &conn, "s", "压缩架构", Track::Fts), ["c"]);
    assert_eq!(
        search(&index, &conn, "s", "架构", Track::Fts),
        ["c"],
        "a 2-character word"
    );
    assert_eq!(search(&index, &conn, "s", "tableGet", Track::Fts)[0], "t");
    assert_eq!(search(&index, &conn, "s", "table get", Track::Fts)[0], "t");
    assert_eq!(
        search(&index, &conn, "s", "crates/x/y.rs", Track::Fts)[0],
        "p"
    );
    assert!(
        search(&index, &conn, "s", "the of and", Track::Hybrid).is_empty(),
        "all stop-words: nothing, no error"
    );
}

#[test]
fn a_put_inside_a_failed_transaction_leaves_nothing() {
    let (_dir, mut conn) = open();
    let index = lexicon_index();
    index.create(&conn).unwrap();
    {
        let tx = conn.transaction().unwrap();
        index
            .put(&tx, &[doc("x", "s", "baud rate 115200")])
            .unwrap();
        // Dropped without commit: rolled back, the FTS rows with it.
    }
    assert_eq!(index.count(&conn).unwrap(), 0);
    assert!(search(&index, &conn, "s", "baud", Track::Fts).is_empty());
    // A bad row fails the whole batch.
    assert!(index
        .put(&conn, &[doc("ok", "s", "fine"), doc("", "s", "no id")])
        .is_err());
    assert_eq!(index.count(&conn).unwrap(), 0);
}

/// An embedder that can be switched off, to stand for a model that is not there yet.
struct Flaky {
    inner: LexiconEmbedder,
    up: AtomicBool,
}

impl Embedder for Flaky {
    fn profile(&self) -> &Profile {
        self.inner.profile()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if self.up.load(Ordering::SeqCst) {
            self.inner.embed(texts)
        } else {
            Err(EmbedError::Unavailable("switched off".into()))
        }
    }
}

#[test]
fn rows_stored_while_the_embedder_is_down_are_kept_and_embedded_later() {
    let (_dir, conn) = open();
    let flaky = Arc::new(Flaky {
        inner: LexiconEmbedder::new(),
        up: AtomicBool::new(false),
    });
    let collector = Arc::new(Collector::new());
    let index = Index::new("facts", flaky.clone(), collector.clone()).unwrap();
    index.create(&conn).unwrap();
    index
        .put(&conn, &[doc("u", "s", "the uart bitrate is 57600")])
        .unwrap();
    // Full-text still finds it; the vector track degrades instead of failing.
    assert_eq!(search(&index, &conn, "s", "bitrate", Track::Hybrid), ["u"]);
    let health = collector.snapshot(None);
    assert_eq!(
        health.scopes[0].degradations[&Degradation::EmbeddingError],
        1
    );
    flaky.up.store(true, Ordering::SeqCst);
    index.breaker().success();
    assert_eq!(index.refresh_vectors(&conn).unwrap(), 1);
    // Now the concept link works: no word shared with the row.
    assert_eq!(
        search(&index, &conn, "s", "serial baud", Track::Vector),
        ["u"]
    );
}

#[test]
fn a_new_embedder_re_embeds_the_rows_of_the_old_one() {
    let (_dir, conn) = open();
    let old = Index::new(
        "facts",
        Arc::new(LexiconEmbedder::without_synonyms()),
        Arc::new(Collector::new()),
    )
    .unwrap();
    old.create(&conn).unwrap();
    old.put(&conn, &[doc("u", "s", "the uart bitrate is 57600")])
        .unwrap();
    let new = lexicon_index();
    // Vectors of another profile are never compared: cold until refreshed.
    assert!(search(&new, &conn, "s", "serial baud", Track::Vector).is_empty());
    assert_eq!(new.refresh_vectors(&conn).unwrap(), 1);
    assert_eq!(
        search(&new, &conn, "s", "serial baud", Track::Vector),
        ["u"]
    );
    assert_eq!(new.refresh_vectors(&conn).unwrap(), 0);
}

/// A one-shot HTTP server on loopback answering `reply` to each request; returns its base
/// URL and the request bodies it saw.
fn server(replies: Vec<(u16, String)>) -> (String, std::thread::JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let mut bodies = Vec::new();
        for (status, body) in replies {
            let (mut stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line == "\r\n" || line.is_empty() {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
            }
            let mut request = vec![0; length];
            reader.read_exact(&mut request).unwrap();
            bodies.push(String::from_utf8(request).unwrap());
            write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        }
        bodies
    });
    (url, handle)
}

#[test]
fn the_endpoint_embedder_speaks_the_openai_wire_format() {
    // Out of order, as some servers answer; not normalised, as some models give them.
    let reply = r#"{"object":"list","data":[{"object":"embedding","index":1,"embedding":[0,3,4]},{"object":"embedding","index":0,"embedding":[2,0,0]}],"model":"m","usage":{"prompt_tokens":4,"total_tokens":4}}"#;
    let (url, handle) = server(vec![
        (200, reply.into()),
        (200, r#"{"data":[{"index":0,"embedding":[1,2]}]}"#.into()),
        (
            400,
            r#"{"error":{"message":"model not found","type":"invalid_request_error"}}"#.into(),
        ),
    ]);
    let e = EndpointEmbedder::new(&url, "nomic-embed", 3, None);
    assert_eq!(
        e.embed(&["a", "b"]).unwrap(),
        vec![vec![1.0, 0.0, 0.0], vec![0.0, 0.6, 0.8]]
    );
    let wrong = e.embed(&["a"]).unwrap_err().to_string();
    assert!(wrong.contains("2 numbers where 3 were expected"), "{wrong}");
    let refused = e.embed(&["a"]).unwrap_err().to_string();
    assert!(refused.contains("model not found"), "{refused}");
    let bodies = handle.join().unwrap();
    let first: serde_json::Value = serde_json::from_str(&bodies[0]).unwrap();
    assert_eq!(
        first,
        serde_json::json!({"model": "nomic-embed", "input": ["a", "b"]})
    );
}

#[test]
fn a_dead_endpoint_opens_the_breaker_and_search_falls_back_to_full_text() {
    // Nothing listens on this port (bound, then closed).
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = Arc::new(EndpointEmbedder::new(
        &format!("http://127.0.0.1:{port}/v1"),
        "m",
        3,
        None,
    ));
    let (_dir, conn) = open();
    let collector = Arc::new(Collector::new());
    let index = Index::new("facts", e, collector.clone()).unwrap();
    index.create(&conn).unwrap();
    index
        .put(&conn, &[doc("u", "s", "the uart bitrate is 57600")])
        .unwrap();
    for _ in 0..5 {
        assert_eq!(search(&index, &conn, "s", "uart", Track::Hybrid), ["u"]);
    }
    let breaker = index.breaker().snapshot();
    assert_eq!(breaker.opens, 1);
    assert_eq!(
        breaker.skips, 2,
        "after 3 failures the next 2 queries skip the endpoint"
    );
    let health = collector.snapshot(None);
    let d = &health.scopes[0].degradations;
    assert_eq!(
        (
            d[&Degradation::EmbeddingError],
            d[&Degradation::EmbeddingCircuitOpen]
        ),
        (3, 2)
    );
}

#[test]
fn the_corpus_name_is_checked_before_it_reaches_sql() {
    for bad in ["", "Facts", "1x", "a;drop table x", "a b"] {
        assert!(
            Index::new(
                bad,
                Arc::new(LexiconEmbedder::new()),
                Arc::new(Collector::new())
            )
            .is_err(),
            "{bad}"
        );
    }
}

#[test]
fn a_row_is_never_replaced_from_another_scope() {
    let (_dir, conn) = open();
    let index = lexicon_index();
    index.create(&conn).unwrap();
    index
        .put(&conn, &[doc("m1", "alice", "alice's baud rate is 9600")])
        .unwrap();
    let err = index
        .put(&conn, &[doc("m1", "bob", "bob overwrites it")])
        .unwrap_err();
    assert!(err.to_string().contains("another scope"), "{err}");
    assert_eq!(
        index.get(&conn, "m1").unwrap().unwrap().content,
        "alice's baud rate is 9600"
    );
    assert_eq!(
        search(&index, &conn, "alice", "baud", Track::Hybrid),
        ["m1"]
    );
}

#[test]
fn scripts_with_combining_marks_are_searchable() {
    let (_dir, conn) = open();
    let index = lexicon_index();
    index.create(&conn).unwrap();
    index
        .put(
            &conn,
            &[
                doc("h", "s", "लॉग फ़ाइल हिंदी में है"),
                doc("t", "s", "บันทึกภาษาไทย"),
                doc("n", "s", "nothing"),
            ],
        )
        .unwrap();
    assert_eq!(search(&index, &conn, "s", "हिंदी", Track::Fts), ["h"]);
    assert_eq!(search(&index, &conn, "s", "บันทึกภาษาไทย", Track::Fts), ["t"]);
}

#[test]
fn what_a_rolled_back_transaction_saw_is_not_remembered() {
    let (_dir, mut conn) = open();
    let index = lexicon_index();
    index.create(&conn).unwrap();
    {
        let tx = conn.transaction().unwrap();
        index
            .put(&tx, &[doc("x", "s", "the uart bitrate is 57600")])
            .unwrap();
        assert_eq!(
            search(&index, &tx, "s", "serial baud", Track::Vector),
            ["x"]
        );
        // Rolled back: the revision goes back and will be reused by the next write.
    }
    index
        .put(
            &conn,
            &[doc("y", "s", "the thermal chamber reached 86 degC")],
        )
        .unwrap();
    assert!(search(&index, &conn, "s", "serial baud", Track::Vector).is_empty());
    assert_eq!(
        search(&index, &conn, "s", "thermal chamber", Track::Hybrid),
        ["y"]
    );
}

#[test]
fn rows_without_vectors_are_reported_on_every_search_until_filled() {
    let (_dir, conn) = open();
    let flaky = Arc::new(Flaky {
        inner: LexiconEmbedder::new(),
        up: AtomicBool::new(false),
    });
    let collector = Arc::new(Collector::new());
    let index = Index::new("facts", flaky.clone(), collector.clone()).unwrap();
    index.create(&conn).unwrap();
    index
        .put(&conn, &[doc("u", "s", "the uart bitrate is 57600")])
        .unwrap();
    flaky.up.store(true, Ordering::SeqCst);
    for _ in 0..3 {
        search(&index, &conn, "s", "uart", Track::Hybrid);
    }
    let health = collector.snapshot(None);
    assert_eq!(health.scopes[0].degradations[&Degradation::VectorCold], 3);
}

/// Every candidate count, summed over the scopes the collector saw.
fn budget_exhausted(collector: &Collector) -> u64 {
    collector
        .snapshot(None)
        .scopes
        .iter()
        .map(|s| s.degradations[&Degradation::CandidateBudgetExhausted])
        .sum()
}

#[test]
fn a_search_over_more_than_candidates_matching_rows_ranks_at_most_candidates() {
    let (_dir, conn) = open();
    let collector = Arc::new(Collector::new());
    let index = Index::new("facts", Arc::new(LexiconEmbedder::new()), collector.clone()).unwrap();
    index.create(&conn).unwrap();
    // Every row matches alike (same text), so ties order by id: the first CANDIDATES ids
    // are the ones a capped track brings, and nothing else may come back.
    let many = 2 * CANDIDATES + 20;
    let ids: Vec<String> = (0..many).map(|i| format!("r{i:03}")).collect();
    let few = CANDIDATES - 1;
    let few_ids: Vec<String> = (0..few).map(|i| format!("f{i:03}")).collect();
    let text = "the uart bitrate is 57600";
    let docs: Vec<Doc> = ids
        .iter()
        .map(|id| doc(id, "many", text))
        .chain(few_ids.iter().map(|id| doc(id, "few", text)))
        .collect();
    index.put(&conn, &docs).unwrap();
    let found = |scope: &str, track: Track| -> Vec<String> {
        index
            .search(
                &conn,
                &Query {
                    scope: Scope::One(scope),
                    text: "uart bitrate",
                    track,
                    limit: 10 * many,
                    purpose: Purpose::Search,
                },
            )
            .unwrap()
            .into_iter()
            .map(|h| h.id)
            .collect()
    };

    // Under the budget: every matching row is ranked, and nothing is reported.
    for track in Track::ALL {
        assert_eq!(found("few", track), few_ids, "{track:?}");
    }
    assert_eq!(budget_exhausted(&collector), 0);

    // Over it: each track brings exactly CANDIDATES, so no search returns more, and the
    // full-text track says its budget ran out.
    for track in Track::ALL {
        assert_eq!(found("many", track), ids[..CANDIDATES], "{track:?}");
    }
    let fts_searches = Track::ALL.iter().filter(|t| **t != Track::Vector).count();
    assert_eq!(budget_exhausted(&collector), fts_searches as u64);
}

#[test]
fn an_endpoint_that_accepts_and_never_answers_times_out() {
    // Accepts, reads the request, and holds the connection open without a word until the
    // client gives up (its read then ends).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let silent = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut sink = [0u8; 4096];
        while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
    });
    let e = EndpointEmbedder::new(&url, "m", 3, None);
    // Waits for the timeout on a thread, so a missing timeout fails the test instead of
    // hanging it: a deadline for an answer at all, far past TIMEOUT, not a measure of it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(e.embed(&["hello"]));
    });
    let result = rx
        .recv_timeout(TIMEOUT * 6)
        .expect("the embedder call never gave up");
    let err = result.expect_err("a silent endpoint gave vectors");
    assert!(matches!(err, EmbedError::Timeout), "{err:?}");
    assert_eq!(err.to_string(), "the embedder did not answer in time");
    silent.join().unwrap();
}
