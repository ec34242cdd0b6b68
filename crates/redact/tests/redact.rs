//! The redactor against real-looking secrets of every kind it knows, and against the
//! look-alikes a hardware person writes all day, which must survive untouched.

use serde::Deserialize;
use sextant_redact::{redact, redact_for_keeping, RedactError, RULES};

#[derive(Deserialize)]
struct Cases {
    secrets: Vec<Secret>,
    survivors: Vec<String>,
}

#[derive(Deserialize)]
struct Secret {
    kind: String,
    text: String,
    /// The secret itself (or, for a private key, a line of it).
    secret: String,
}

fn cases() -> Cases {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/redact/cases.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn every_secret_is_replaced_by_its_kind_and_nothing_of_it_is_left() {
    let cases = cases();
    for case in &cases.secrets {
        let r = redact(&case.text);
        assert_eq!(
            r.kinds,
            [case.kind.as_str()],
            "{:?} → {:?}",
            case.text,
            r.text
        );
        assert!(
            r.text.contains(&format!("[REDACTED:{}]", case.kind)),
            "{}",
            r.text
        );
        assert!(
            !r.text.contains(&case.secret),
            "the secret survived in {:?}",
            r.text
        );
    }
    // Every rule is exercised by the fixture.
    for rule in RULES {
        assert!(
            cases.secrets.iter().any(|c| c.kind == rule.kind),
            "no fixture case for {}",
            rule.kind
        );
    }
}

#[test]
fn look_alikes_survive_untouched() {
    for text in cases().survivors {
        let r = redact(&text);
        assert_eq!(r.text, text, "{:?}", r.kinds);
        assert!(r.kinds.is_empty());
    }
}

#[test]
fn the_text_around_a_secret_is_kept_and_a_secret_alone_is_refused() {
    let r = redact_for_keeping("the broker password=hunter2hunter2 is on the wiki").unwrap();
    assert_eq!(
        r.text,
        "the broker password=[REDACTED:credential] is on the wiki"
    );
    let only = format!("sk-ant-api03-{}", "x".repeat(40));
    match redact_for_keeping(&format!("  {only} ")) {
        Err(RedactError::NothingLeft { kinds }) => assert_eq!(kinds, ["anthropic_key"]),
        other => panic!("a secret alone must be refused, got {other:?}"),
    }
    let message = redact_for_keeping(&only).unwrap_err().to_string();
    assert!(
        message.contains("nothing is left") && message.contains("keyring"),
        "{message}"
    );
    // No secret: kept as is.
    assert_eq!(
        redact_for_keeping("use 921600 baud").unwrap().text,
        "use 921600 baud"
    );
}

#[test]
fn two_rules_never_redact_the_same_secret_twice() {
    let key = format!("sk-ant-api03-{}", "a1B2".repeat(10));
    let r = redact(&format!("token={key}"));
    assert_eq!(r.text, "token=[REDACTED:anthropic_key]");
    assert_eq!(r.kinds, ["anthropic_key"]);
}
