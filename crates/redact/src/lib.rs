//! The redactor: every text the assistant keeps (a memory fact) or copies out of a chat (a
//! handoff digest, a citation) passes through [`redact`] first, so a secret a person pasted
//! once is not carried into every later request.
//!
//! Table-driven ([`RULES`]): each rule names a kind and a pattern; what it matches becomes
//! `[REDACTED:kind]`. For `key=value` pairs and `Bearer` headers only the value goes, so the
//! text still says what was there. Rules are written for the shapes providers document
//! (fixed prefixes, lengths, alphabets) so look-alikes a hardware person writes all day –
//! hex checksums, CAN ids, UUIDs, commit hashes – survive; `tests/redact.rs` holds both.

use std::sync::OnceLock;

use regex::Regex;

/// One kind of secret and how to find it.
pub struct Rule {
    pub kind: &'static str,
    pattern: &'static str,
    /// The capture group that is the secret (0: the whole match).
    group: usize,
}

/// The rules, most specific first (an Anthropic key also looks like an OpenAI one).
pub const RULES: &[Rule] = &[
    Rule {
        kind: "private_key",
        pattern: r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?s:.*?)(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\z)",
        group: 0,
    },
    Rule {
        kind: "anthropic_key",
        pattern: r"\bsk-ant-[A-Za-z0-9_-]{20,}",
        group: 0,
    },
    Rule {
        kind: "openai_key",
        pattern: r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        group: 0,
    },
    Rule {
        kind: "google_key",
        pattern: r"\bAIza[0-9A-Za-z_-]{35}\b",
        group: 0,
    },
    Rule {
        kind: "github_token",
        pattern: r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        group: 0,
    },
    Rule {
        kind: "slack_token",
        pattern: r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
        group: 0,
    },
    Rule {
        kind: "aws_key_id",
        pattern: r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        group: 0,
    },
    Rule {
        kind: "jwt",
        pattern: r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        group: 0,
    },
    Rule {
        kind: "bearer",
        pattern: r"(?i)\bbearer\s+([A-Za-z0-9._~+/=-]{12,})",
        group: 1,
    },
    Rule {
        kind: "credential",
        pattern: r#"(?i)\b(?:password|passwd|pwd|passphrase|token|secret|api[_-]?key|access[_-]?token|client[_-]?secret)\s*[=:]\s*["']?([^\s"'&;,\[][^\s"'&;,]*)"#,
        group: 1,
    },
];

fn compiled() -> &'static [(&'static Rule, Regex)] {
    static RULES_RE: OnceLock<Vec<(&'static Rule, Regex)>> = OnceLock::new();
    RULES_RE.get_or_init(|| {
        RULES
            .iter()
            .map(|r| {
                (
                    r,
                    Regex::new(r.pattern).expect("the shipped redaction rules compile"),
                )
            })
            .collect()
    })
}

/// A text with its secrets replaced, and the kinds that were found (each once, in rule
/// order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted {
    pub text: String,
    pub kinds: Vec<&'static str>,
}

/// Replaces every secret in `text` with `[REDACTED:kind]`.
pub fn redact(text: &str) -> Redacted {
    let mut out = text.to_string();
    let mut kinds = Vec::new();
    for (rule, re) in compiled() {
        if !re.is_match(&out) {
            continue;
        }
        let marker = format!("[REDACTED:{}]", rule.kind);
        let replaced = re
            .replace_all(&out, |caps: &regex::Captures| {
                let whole = caps.get(0).expect("a match has group 0");
                match caps.get(rule.group) {
                    Some(secret) if rule.group != 0 => {
                        let (start, end) =
                            (secret.start() - whole.start(), secret.end() - whole.start());
                        let w = whole.as_str();
                        format!("{}{}{}", &w[..start], marker, &w[end..])
                    }
                    _ => marker.clone(),
                }
            })
            .into_owned();
        if replaced != out {
            kinds.push(rule.kind);
            out = replaced;
        }
    }
    Redacted { text: out, kinds }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RedactError {
    #[error(
        "nothing is left of this text once its secrets ({}) are removed, so it is not kept; \
         say it without the secret (keys belong in the assistant's settings, which keep them \
         in the system keyring)",
        kinds.join(", ")
    )]
    NothingLeft { kinds: Vec<&'static str> },
}

/// [`redact`], refusing a text that is only secrets (nothing but markers, space and
/// punctuation left).
pub fn redact_for_keeping(text: &str) -> Result<Redacted, RedactError> {
    let r = redact(text);
    let mut rest = r.text.clone();
    for kind in &r.kinds {
        rest = rest.replace(&format!("[REDACTED:{kind}]"), "");
    }
    if !r.kinds.is_empty() && !rest.chars().any(char::is_alphanumeric) {
        return Err(RedactError::NothingLeft { kinds: r.kinds });
    }
    Ok(r)
}
