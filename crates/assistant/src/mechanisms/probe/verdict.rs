//! Reading a final reply's sentinel: healthy, mutated (which anchor drifted), or missing.

use super::strip::{form, Form};
use super::{ANCHORS, OPEN, SENTINEL};

/// How the sentinel of a final reply came back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The reply ends with the sentinel, verbatim.
    Healthy,
    /// The marker is there, its content is not.
    Mutated(Drift),
    /// No marker at all.
    Missing,
}

/// What changed in a mutated sentinel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drift {
    /// The first anchor that is missing or changed.
    Anchor(&'static str),
    /// Every anchor is there but the line is not verbatim (spacing, extra words, case, not
    /// at the end of the reply, broken across lines).
    Format,
    /// The reply ends inside the sentinel.
    Truncated,
}

impl Verdict {
    /// The name stored in `probe_verdict` events.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Healthy => "healthy",
            Verdict::Mutated(_) => "mutated",
            Verdict::Missing => "missing",
        }
    }

    /// The drifted segment: an anchor, `format` or `truncated`.
    pub fn drift(self) -> Option<&'static str> {
        match self {
            Verdict::Mutated(Drift::Anchor(a)) => Some(a),
            Verdict::Mutated(Drift::Format) => Some("format"),
            Verdict::Mutated(Drift::Truncated) => Some("truncated"),
            _ => None,
        }
    }
}

/// The verdict on a final reply's raw text (as the model wrote it, before any strip).
pub fn evaluate_reply(text: &str) -> Verdict {
    let Some(at) = text.rfind(OPEN) else {
        // The marker's name in another case or without its brackets is a mangled sentinel.
        let name = &OPEN[2..];
        return if text.to_lowercase().contains(&name.to_lowercase()) {
            Verdict::Mutated(Drift::Format)
        } else {
            Verdict::Missing
        };
    };
    let rest = &text[at..];
    match form(rest) {
        Form::Unclosed => Verdict::Mutated(Drift::Truncated),
        Form::BrokenLine | Form::Closed { blank_after: false } => Verdict::Mutated(Drift::Format),
        Form::Closed { blank_after: true } => {
            let close = rest.find("]]").expect("a closed form has `]]`");
            let words: Vec<&str> = rest[OPEN.len()..close].split_whitespace().collect();
            if let Some(drifted) = ANCHORS
                .iter()
                .enumerate()
                .find(|(i, want)| words.get(*i) != Some(want))
                .map(|(_, a)| *a)
            {
                return Verdict::Mutated(Drift::Anchor(drifted));
            }
            if words.len() != ANCHORS.len() || &rest[..close + 2] != SENTINEL {
                return Verdict::Mutated(Drift::Format);
            }
            Verdict::Healthy
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        let cases: [(&str, Verdict); 9] = [
            (
                "Done.\n[[SXT-PROBE askfirst fenced idsfresh onecall selfsave]]",
                Verdict::Healthy,
            ),
            (
                "Done. [[SXT-PROBE askfirst fenced idsfresh onecall selfsave]]  \r\n",
                Verdict::Healthy,
            ),
            ("Done.", Verdict::Missing),
            (
                "Done.\n[[SXT-PROBE askfirst fenced idsstale onecall selfsave]]",
                Verdict::Mutated(Drift::Anchor("idsfresh")),
            ),
            (
                "Done.\n[[SXT-PROBE askfirst fenced onecall selfsave]]",
                Verdict::Mutated(Drift::Anchor("idsfresh")),
            ),
            (
                "Done.\n[[SXT-PROBE askfirst  fenced idsfresh onecall selfsave]]",
                Verdict::Mutated(Drift::Format),
            ),
            (
                "Done.\n[[SXT-PROBE askfirst fenced",
                Verdict::Mutated(Drift::Truncated),
            ),
            (
                "Done.\n[[sxt-probe askfirst fenced idsfresh onecall selfsave]]",
                Verdict::Mutated(Drift::Format),
            ),
            (
                "[[SXT-PROBE askfirst fenced idsfresh onecall selfsave]] is the line I end with.",
                Verdict::Mutated(Drift::Format),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(evaluate_reply(text), want, "{text:?}");
        }
    }
}
