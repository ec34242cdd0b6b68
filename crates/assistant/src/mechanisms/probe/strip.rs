//! Taking the sentinel out of what a person sees (spec 20 §1, "streaming-safe strip").
//!
//! Everything works on the *accumulated* text of a reply, never on one chunk: a chunk may
//! end in the middle of the marker. The rules:
//!
//! - Only the tail is stripped: the last occurrence of the marker's opening, when it is
//!   closed by `]]` with nothing but whitespace after it, or never closed at all (a reply
//!   cut inside the sentinel). The whitespace before it goes too, and so does a sentinel
//!   repeated right before it (still the tail).
//! - A closed marker followed by more text was quoted mid-text: kept.
//! - An unclosed marker followed by a line break is not the sentinel: kept.
//! - While streaming, a trailing piece that could still turn out to be the sentinel (a
//!   prefix of the opening, an unclosed or just-closed marker, trailing whitespace) is
//!   **held back** until the text that follows rules it in or out.
//!
//! What the held-back display shows is always a prefix of what the final strip shows, for
//! any continuation (each hold starts at or before every place the final strip could cut),
//! so a display only ever grows: the marker never flashes and nothing shown is taken back.

use crate::engine::seams::{DisplayFilter, DisplayFilters};
pub(crate) use crate::engine::sentinel::{form, Form};
pub use crate::engine::sentinel::{shown_while_streaming, strip_for_display};

/// One reply's display: feeds the accumulated text through the strip and hands out only
/// what is new.
#[derive(Debug, Default)]
pub struct StripFilter {
    text: String,
    /// Bytes of `text` already shown.
    shown: usize,
}

impl StripFilter {
    fn release(&mut self, visible: usize) -> String {
        if visible <= self.shown {
            return String::new();
        }
        let out = self.text[self.shown..visible].to_string();
        self.shown = visible;
        out
    }
}

impl DisplayFilter for StripFilter {
    fn push(&mut self, delta: &str) -> String {
        self.text.push_str(delta);
        // Only what is not shown yet can still be held: what is shown was ruled out for
        // good (nothing after it can turn it back into the sentinel), and it never ends in
        // whitespace. So the scan starts there, and a long reply costs linear time.
        let floor = self.shown;
        let visible = floor + shown_while_streaming(&self.text[floor..]).len();
        self.release(visible)
    }

    fn finish(&mut self) -> String {
        let visible = strip_for_display(&self.text).len();
        let out = self.release(visible);
        // The next piece of the reply (after a tool call) starts afresh.
        self.text.clear();
        self.shown = 0;
        out
    }
}

/// The probe's display filter factory: one [`StripFilter`] per reply.
pub struct ProbeDisplay;

impl DisplayFilters for ProbeDisplay {
    fn start(&self) -> Box<dyn DisplayFilter> {
        Box::new(StripFilter::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanisms::probe::SENTINEL;

    #[test]
    fn the_final_strip_follows_the_rules() {
        let s = SENTINEL;
        let cases = [
            (format!("Done.\n{s}"), "Done."),
            (format!("Done.\n{s}\n"), "Done."),
            (format!("Done. {s}"), "Done."),
            (format!("quote {s} and more"), "quote {s} and more"),
            (
                "a\n[[SXT-PROBE askfirst\nmore".to_string(),
                "a\n[[SXT-PROBE askfirst\nmore",
            ),
            ("cut\n[[SXT-PROBE askfirst fen".to_string(), "cut"),
            ("no marker  ".to_string(), "no marker"),
            (format!("twice\n{s}\n{s}"), "twice"),
        ];
        for (text, want) in cases {
            let want = want.replace("{s}", s);
            assert_eq!(strip_for_display(&text), want, "{text:?}");
        }
    }

    #[test]
    fn a_partial_opening_is_held_and_released_when_ruled_out() {
        let mut f = StripFilter::default();
        assert_eq!(f.push("Hi [["), "Hi");
        assert_eq!(f.push("SX"), "");
        assert_eq!(f.push("Y"), " [[SXY");
        assert_eq!(f.finish(), "");
    }
}
