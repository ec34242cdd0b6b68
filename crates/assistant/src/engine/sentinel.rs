//! The probe's sentinel as text: the marker's opening ([`OPEN`]) and the pure functions that
//! take it off the tail of a reply – what a person sees once it is complete
//! ([`strip_for_display`]) and while it streams ([`shown_while_streaming`]). A leaf, so the
//! chat log's fold can show replies without the sentinel without depending on the probe
//! (which reads the log); the rules are in `probe::strip`.

/// The marker's opening; the sentinel is this, a space, the anchors and `]]`.
pub const OPEN: &str = "[[SXT-PROBE";

const CLOSE: &str = "]]";

/// What follows the last marker opening.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// Closed by `]]` before any line break; `blank_after`: only whitespace follows.
    Closed { blank_after: bool },
    /// A line break comes before any `]]`: not the sentinel.
    BrokenLine,
    /// Neither `]]` nor a line break yet.
    Unclosed,
}

/// `rest` starts with [`OPEN`].
pub(crate) fn form(rest: &str) -> Form {
    let body = &rest[OPEN.len()..];
    let close = body.find(CLOSE);
    let line = body.find('\n');
    match close {
        Some(close) if line.is_none_or(|n| close < n) => Form::Closed {
            blank_after: body[close + CLOSE.len()..].trim().is_empty(),
        },
        _ if line.is_some() => Form::BrokenLine,
        _ => Form::Unclosed,
    }
}

/// Where the sentinels at the tail of `text[..end]` begin: peels, from the end, trailing
/// whitespace and every marker that is closed with nothing after it or never closed (each
/// starts at the last opening left, since a marker's body holds no opening), until the
/// tail is ordinary text.
fn peel(text: &str, mut end: usize) -> usize {
    loop {
        end = text[..end].trim_end().len();
        match text[..end].rfind(OPEN) {
            Some(at)
                if matches!(
                    form(&text[at..end]),
                    Form::Closed { blank_after: true } | Form::Unclosed
                ) =>
            {
                end = at
            }
            _ => return end,
        }
    }
}

/// The text as a person sees it once the reply is complete: the sentinel (and the
/// whitespace before it) removed from the tail – a repeated one too – and trailing
/// whitespace trimmed; anything else unchanged. Safe on any text, whether or not the probe
/// is on: it only removes Sextant's own marker.
pub fn strip_for_display(text: &str) -> &str {
    &text[..peel(text, text.len())]
}

/// Where a trailing piece of `text` that is a proper prefix of [`OPEN`] starts (the
/// longest such piece), if there is one.
fn partial_opening(text: &str) -> Option<usize> {
    (1..OPEN.len().min(text.len() + 1))
        .rev()
        .find(|&k| text.ends_with(&OPEN[..k]))
        .map(|k| text.len() - k)
}

/// How much of a reply still streaming may be shown now: [`strip_for_display`] of it, less
/// a trailing piece that may still become the marker's opening. Every prefix of a text in
/// which the final strip would cut is cut here at or before that place, so what this shows
/// is a prefix of what any continuation finally shows.
pub fn shown_while_streaming(text: &str) -> &str {
    let mut end = text.trim_end().len();
    if let Some(at) = partial_opening(&text[..end]) {
        end = at;
    }
    &text[..peel(text, end)]
}
