//! Runaway replies: the cutoff for a model that repeats itself.
//!
//! Owns the one judgement "this reply is looping": the same run of characters repeated
//! back to back at the end of the reply, long enough that no real answer looks like it
//! (small models fall into "开始开始开始…" or the same image link line after line, and
//! without a cutoff run until the reply cap – which, on a local server, can be its whole
//! context). Characters, not words, so it works for text without spaces.

/// A reply's tail is looping when one unit of at most this many characters…
const MAX_UNIT: usize = 200;
/// …repeats back to back over at least this many characters…
const MIN_SPAN: usize = 240;
/// …and at least this many times.
const MIN_REPEATS: usize = 4;
/// How often (in characters of new text) the tail is checked.
const CHECK_EVERY: usize = 24;

/// The stop reason of a reply the guard cut (`turnEnded.detail`, a `reply_cut` notice).
pub const REPETITION: &str = "repetition";

/// Watches a reply's text as it streams.
#[derive(Debug, Default)]
pub struct RepetitionGuard {
    /// The reply's last characters (enough for the longest span looked at).
    tail: Vec<char>,
    since_check: usize,
}

/// What the guard saw when it tripped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repetition {
    /// The repeated unit (characters).
    pub unit: String,
    /// How many times it repeated at the end of the reply.
    pub repeats: usize,
}

impl RepetitionGuard {
    /// Feeds one delta; `Some` when the reply now ends in a loop.
    pub fn push(&mut self, delta: &str) -> Option<Repetition> {
        let keep = MAX_UNIT * MIN_REPEATS + MIN_SPAN;
        for c in delta.chars() {
            self.tail.push(c);
            self.since_check += 1;
        }
        if self.tail.len() > 2 * keep {
            self.tail.drain(..self.tail.len() - keep);
        }
        if self.since_check < CHECK_EVERY {
            return None;
        }
        self.since_check = 0;
        looping(&self.tail)
    }
}

/// The shortest unit that `text`'s end repeats enough times, if any.
fn looping(text: &[char]) -> Option<Repetition> {
    let n = text.len();
    for unit in 1..=MAX_UNIT.min(n / MIN_REPEATS) {
        // The repeated run at the end, in characters: how far back text[i] == text[i+unit].
        let mut run = unit;
        while run < n && text[n - 1 - run] == text[n - 1 - run + unit] {
            run += 1;
        }
        let repeats = run / unit;
        if run >= MIN_SPAN && repeats >= MIN_REPEATS {
            let unit_text: String = text[n - unit..].iter().collect();
            // Whitespace or one punctuation mark repeated is layout, not a loop.
            if unit_text.chars().all(|c| !c.is_alphanumeric()) {
                continue;
            }
            return Some(Repetition {
                unit: unit_text,
                repeats,
            });
        }
    }
    None
}

/// Says "still waiting for the server" while a reply is silent: first after `after`, then
/// every `after` again, with the seconds waited so far.
#[derive(Debug)]
pub struct StallWatch {
    after: std::time::Duration,
    since: tokio::time::Instant,
    next: tokio::time::Instant,
}

impl StallWatch {
    pub fn new(after: std::time::Duration) -> StallWatch {
        let now = tokio::time::Instant::now();
        StallWatch {
            after,
            since: now,
            next: now + after,
        }
    }

    /// Something arrived: the silence starts over.
    pub fn heard(&mut self) {
        let now = tokio::time::Instant::now();
        self.since = now;
        self.next = now + self.after;
    }

    /// Waits until the next notice is due; returns the seconds of silence so far.
    pub async fn due(&mut self) -> u64 {
        tokio::time::sleep_until(self.next).await;
        self.next += self.after;
        self.since.elapsed().as_secs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(text: &str, piece: usize) -> Option<Repetition> {
        let mut guard = RepetitionGuard::default();
        let chars: Vec<char> = text.chars().collect();
        for chunk in chars.chunks(piece) {
            let s: String = chunk.iter().collect();
            if let Some(r) = guard.push(&s) {
                return Some(r);
            }
        }
        None
    }

    #[test]
    fn loops_are_cut_and_answers_are_not() {
        let cases: &[(&str, String, Option<&str>)] = &[
            ("a CJK stutter", format!("好的，{}", "开始".repeat(200)), Some("开始")),
            (
                "an image link line after line",
                format!("Here:\n{}", "![plot](http://x/p.png)\n".repeat(30)),
                Some("\n![plot](http://x/p.png)"),
            ),
            (
                "a long paragraph repeated",
                "The voltage dataset is in the Power group and shows volts. ".repeat(6),
                Some("The voltage dataset is in the Power group and shows volts. "),
            ),
            ("a real answer", "The dashboard has three groups: Power, Motion and GPS. Power shows voltage and current; Motion shows the IMU's axes; GPS shows a map. ".to_string() + "Each updates at 10 Hz.", None),
            ("a table rule", format!("| a | b |\n|{}|\n| 1 | 2 |", "-".repeat(400)), None),
            ("few repeats of a long unit", "abcdefghij".repeat(3) + "end", None),
            ("a dump of one byte, long past any use", "00 ".repeat(100), Some("00 ")),
        ];
        for (what, text, want) in cases {
            for piece in [1, 7, 50] {
                let got = feed(text, piece);
                match want {
                    Some(unit) => {
                        let got = got.unwrap_or_else(|| panic!("{what}: not cut"));
                        // The unit found is a rotation of the repeated one.
                        let doubled = format!("{unit}{unit}");
                        assert!(doubled.contains(&got.unit), "{what}: {got:?}");
                    }
                    None => assert_eq!(got, None, "{what}"),
                }
            }
        }
    }
}
