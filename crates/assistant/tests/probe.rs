//! The context probe (spec 20 §1): the strip every person-facing exit uses, fed as a
//! stream split everywhere; the verdicts; the compliance state machine; the degraded state
//! folded from the log.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};
use sextant_assistant::chatlog::{fold, kinds, Event, LoggedEvent, UiItem};
use sextant_assistant::probe::{
    degraded, evaluate_reply, strip_for_display, Class, Compliance, ProbeEvaluator, StripFilter,
    ANCHORS, COMPLIANCE_WINDOW, INSTRUCTION, OPEN, SENTINEL,
};
use sextant_assistant::seams::{DisplayFilter, ReplyEvaluator};
use sextant_providers::StopReason;

#[derive(Deserialize)]
struct Fixture {
    schema: u32,
    sentinel: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    text: String,
    display: String,
    verdict: String,
    drift: Option<String>,
}

fn fixture() -> Fixture {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/assistant/probe-strip.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Streams `pieces` through a fresh filter; returns every cumulative display and the final one.
fn stream(pieces: &[&str]) -> (Vec<String>, String) {
    let mut filter = StripFilter::default();
    let mut shown = String::new();
    let mut seen = Vec::new();
    for p in pieces {
        shown.push_str(&filter.push(p));
        seen.push(shown.clone());
    }
    shown.push_str(&filter.finish());
    (seen, shown)
}

/// The checks every streamed case must pass: each display on the way is a prefix of the
/// final one and the final one is the expected text. So nothing shown is ever taken back,
/// and no piece of the marker is ever shown that the final text does not show: a partial
/// one is held back until it is ruled out.
fn check(name: &str, how: &str, pieces: &[&str], want: &str) {
    let (seen, shown) = stream(pieces);
    assert_eq!(shown, want, "{name} ({how}): the final display");
    for s in &seen {
        assert!(
            want.starts_with(s.as_str()),
            "{name} ({how}): {s:?} was shown but the reply ends as {want:?}"
        );
    }
}

#[test]
fn the_fixture_strips_the_same_however_the_stream_is_split() {
    let f = fixture();
    assert_eq!(f.schema, 1);
    assert_eq!(f.sentinel, SENTINEL, "the fixture's sentinel is the app's");
    assert!(f.cases.len() >= 8);
    for case in &f.cases {
        assert_eq!(
            strip_for_display(&case.text),
            case.display,
            "{}: the strip of the whole text",
            case.name
        );
        check(&case.name, "whole", &[&case.text], &case.display);
        // Deltas are strings, so a split falls on a character boundary; every one is tried.
        for (at, _) in case.text.char_indices().chain([(case.text.len(), ' ')]) {
            let (a, b) = case.text.split_at(at);
            check(
                &case.name,
                &format!("split at byte {at}"),
                &[a, b],
                &case.display,
            );
        }
        let chars: Vec<String> = case.text.chars().map(String::from).collect();
        let pieces: Vec<&str> = chars.iter().map(String::as_str).collect();
        check(
            &case.name,
            "one character at a time",
            &pieces,
            &case.display,
        );
        // Three pieces: every pair of split points on a short text.
        if case.text.chars().count() <= 80 {
            let cuts: Vec<usize> = case.text.char_indices().map(|(i, _)| i).collect();
            for &i in &cuts {
                for &j in cuts.iter().filter(|&&j| j >= i) {
                    let pieces = [&case.text[..i], &case.text[i..j], &case.text[j..]];
                    check(
                        &case.name,
                        &format!("split at {i} and {j}"),
                        &pieces,
                        &case.display,
                    );
                }
            }
        }
        let verdict = evaluate_reply(&case.text);
        assert_eq!(verdict.name(), case.verdict, "{}: the verdict", case.name);
        assert_eq!(
            verdict.drift().map(str::to_string),
            case.drift,
            "{}: the drift",
            case.name
        );
    }
}

/// A small deterministic generator (no dependency for one test).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

#[test]
fn generated_replies_never_show_anything_that_is_later_taken_back() {
    // Pieces a reply may be made of, marker-shaped ones over-represented.
    let pieces = [
        "text",
        " ",
        "\n",
        "\r\n",
        "[[",
        "[",
        "]]",
        "]",
        SENTINEL,
        "[[SXT-PROBE askfirst",
        "[[SXT-PROBE askfirst fenced idsstale onecall selfsave]]",
        "[[SXT-PR",
        "温度",
        "  ",
    ];
    let mut rng = Rng(0x5eed_cafe_f00d_1234);
    for _ in 0..3000 {
        let n = 1 + rng.next() % 7;
        let text: String = (0..n).map(|_| rng.pick(&pieces)).collect();
        let want = strip_for_display(&text).to_string();
        let chars: Vec<String> = text.chars().map(String::from).collect();
        let one_by_one: Vec<&str> = chars.iter().map(String::as_str).collect();
        let (seen, shown) = stream(&one_by_one);
        assert_eq!(shown, want, "{text:?}");
        for s in seen {
            assert!(
                want.starts_with(&s),
                "{text:?}: showed {s:?}, ends as {want:?}"
            );
        }
    }
}

#[test]
fn the_instruction_carries_the_sentinel_verbatim_and_names_every_anchor() {
    assert!(INSTRUCTION.contains(SENTINEL));
    assert_eq!(SENTINEL, format!("{OPEN} {}]]", ANCHORS.join(" ")));
    // About 20 tokens a turn is the spec's budget for the line itself.
    assert!(SENTINEL.len() < 80);
}

fn verdict_of(events: &[Event]) -> Value {
    assert_eq!(events.len(), 1, "{events:?}");
    match &events[0] {
        Event::Structural(s) => {
            assert_eq!(s.kind, kinds::PROBE_VERDICT);
            s.payload.clone()
        }
        other => panic!("{other:?}"),
    }
}

fn evaluator(compliance: &Arc<Compliance>, key: &str) -> ProbeEvaluator {
    ProbeEvaluator {
        compliance: compliance.clone(),
        key: key.to_string(),
    }
}

#[test]
fn a_known_compliant_model_degrades_at_once_and_a_never_compliant_one_is_muted() {
    let compliance = Arc::new(Compliance::in_memory());
    let good = evaluator(&compliance, "anthropic_good");
    let end = StopReason::EndTurn;
    let healthy = format!("Done.\n{SENTINEL}");
    let v = verdict_of(&good.evaluate(&healthy, &end));
    assert_eq!(v["verdict"], "healthy");
    assert_eq!(v["degraded"], false);
    let v = verdict_of(&good.evaluate(
        "Done.\n[[SXT-PROBE askfirst fenced idsstale onecall selfsave]]",
        &end,
    ));
    assert_eq!(
        (
            v["verdict"].clone(),
            v["drift"].clone(),
            v["degraded"].clone()
        ),
        (json!("mutated"), json!("idsfresh"), json!(true))
    );
    let v = verdict_of(&good.evaluate("Done.", &end));
    assert_eq!(
        (v["verdict"].clone(), v["degraded"].clone()),
        (json!("missing"), json!(true))
    );

    let weak = evaluator(&compliance, "openai-compatible_tiny");
    for n in 1..=COMPLIANCE_WINDOW {
        let v = verdict_of(&weak.evaluate("Sure!", &end));
        assert_eq!(v["verdict"], "missing");
        assert_eq!(
            v["degraded"], false,
            "an unclassified model never raises the banner"
        );
        assert_eq!(v["window"], n);
    }
    assert_eq!(compliance.class("openai-compatible_tiny"), Class::Muted);
    for _ in 0..10 {
        let v = verdict_of(&weak.evaluate("Sure!", &end));
        assert_eq!(
            (v["verdict"].clone(), v["degraded"].clone()),
            (json!("muted"), json!(false))
        );
    }
    // Even a lucky verbatim reply does not unmute it.
    assert_eq!(
        verdict_of(&weak.evaluate(&healthy, &end))["verdict"],
        "healthy"
    );
    assert_eq!(compliance.class("openai-compatible_tiny"), Class::Muted);
}

#[test]
fn replies_that_could_not_carry_the_line_are_not_judged() {
    let compliance = Arc::new(Compliance::in_memory());
    let e = evaluator(&compliance, "k");
    assert!(e
        .evaluate("cut off mid-sent", &StopReason::MaxTokens)
        .is_empty());
    assert!(e.evaluate("  \n", &StopReason::EndTurn).is_empty());
    assert!(e.evaluate("no", &StopReason::Refusal).is_empty());
    assert_eq!(compliance.class("k"), Class::Unclassified { failures: 0 });
}

fn logged(events: Vec<Event>) -> Vec<LoggedEvent> {
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| LoggedEvent {
            seq: i as u64 + 1,
            unix_ms: 0,
            event,
        })
        .collect()
}

#[test]
fn the_degraded_state_is_folded_from_the_verdicts_and_stays() {
    let verdict = |v: Value| Event::structural(kinds::PROBE_VERDICT, v);
    let log = logged(vec![
        Event::user("hi"),
        Event::assistant(format!("hello\n{SENTINEL}")),
        verdict(json!({"verdict": "healthy", "degraded": false})),
        Event::user("more"),
        Event::assistant("sure"),
        verdict(json!({"verdict": "missing", "degraded": true})),
        Event::user("and"),
        Event::assistant("ok\n[[SXT-PROBE askfirst fenced idsstale onecall selfsave]]"),
        verdict(json!({"verdict": "mutated", "drift": "idsfresh", "degraded": true})),
        Event::user("then"),
        Event::assistant(format!("fine\n{SENTINEL}")),
        verdict(json!({"verdict": "healthy", "degraded": false})),
    ]);
    let d = degraded(&log).expect("degraded");
    assert_eq!(d.verdict, "mutated");
    assert_eq!(d.drift.as_deref(), Some("idsfresh"));
    assert_eq!(
        d.seq, 9,
        "the latest failure; a healthy reply after it does not clear it"
    );
    assert_eq!(degraded(&log[..5]), None);

    // The person never sees the sentinel; the model's history keeps it.
    let folded = fold(&log);
    let shown: Vec<&str> = folded
        .ui
        .iter()
        .filter_map(|i| match i {
            UiItem::Assistant { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(shown, ["hello", "sure", "ok", "fine"]);
    let history = serde_json::to_string(&folded.history).unwrap();
    assert_eq!(history.matches(SENTINEL).count(), 2, "{history}");
}
