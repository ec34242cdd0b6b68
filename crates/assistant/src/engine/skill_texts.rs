//! The shipped skills as text: their bodies, titles and summaries, how a body is cut to
//! fit a model, and whether a tool result is exactly the app's own skill text
//! ([`is_app_text`]). A leaf: the chat log's fold asks it which results need no envelope,
//! and the skills mechanism (which reads the log) serves them.

use serde_json::Value;

/// A skill body's cap.
pub const MAX_SKILL_BYTES: usize = 16 * 1024;

/// The shipped skills: `(id, markdown)`. The body's first line is `# Title`, its first
/// paragraph after that the one-line summary.
pub const SKILLS: &[(&str, &str)] = &[
    (
        "tools-and-tiers",
        include_str!("../../skills/tools-and-tiers.md"),
    ),
    (
        "project-basics",
        include_str!("../../skills/project-basics.md"),
    ),
    (
        "frame-parsers",
        include_str!("../../skills/frame-parsers.md"),
    ),
    ("transforms", include_str!("../../skills/transforms.md")),
    (
        "dashboard-layout",
        include_str!("../../skills/dashboard-layout.md"),
    ),
    (
        "connecting-devices",
        include_str!("../../skills/connecting-devices.md"),
    ),
    ("mqtt", include_str!("../../skills/mqtt.md")),
    ("can-modbus", include_str!("../../skills/can-modbus.md")),
    (
        "recording-replay",
        include_str!("../../skills/recording-replay.md"),
    ),
    ("debugging", include_str!("../../skills/debugging.md")),
    (
        "serial-studio-import",
        include_str!("../../skills/serial-studio-import.md"),
    ),
    (
        "actions-and-console",
        include_str!("../../skills/actions-and-console.md"),
    ),
    (
        "data-questions",
        include_str!("../../skills/data-questions.md"),
    ),
];

/// The trigger table as shipped.
pub const TRIGGERS: &str = include_str!("../../skill-triggers.json");

/// A skill's body.
pub fn body(id: &str) -> Option<&'static str> {
    SKILLS.iter().find(|(s, _)| *s == id).map(|(_, b)| *b)
}

/// A skill's title (its `# ` line).
pub fn title(id: &str) -> Option<&'static str> {
    body(id).map(|b| {
        b.lines()
            .next()
            .unwrap_or("")
            .trim_start_matches('#')
            .trim()
    })
}

/// A skill's one-line summary (its first paragraph after the title).
pub fn summary(id: &str) -> &'static str {
    body(id)
        .and_then(|b| {
            b.lines()
                .skip(1)
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with('#'))
        })
        .unwrap_or("")
}

/// What [`budgeted`] ends a shortened body with.
const SHORTENED: &str = "\n\n(Shortened to fit this model's context.)";

/// `body` cut to at most `max` bytes at a line break, saying so.
pub fn budgeted(body: &str, max: usize) -> String {
    if body.len() <= max {
        return body.to_string();
    }
    let note = SHORTENED;
    let mut end = max.saturating_sub(note.len());
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    let end = body[..end].rfind('\n').unwrap_or(end);
    format!("{}{note}", body[..end].trim_end())
}

/// Whether `content` is a skill load's result exactly as the app makes it: `{name, title,
/// body}` of a shipped skill, the body whole or shortened by [`budgeted`]. Only such a result
/// is the app's own text, shown to the model outside the envelope; anything else a
/// `meta_loadSkill` call got back (an error, which may quote the model's words, a result
/// rewritten on the way) is data.
pub fn is_app_text(content: &str) -> bool {
    let Ok(value) = serde_json::from_str::<Value>(content) else {
        return false;
    };
    let (Some(name), Some(text)) = (value["name"].as_str(), value["body"].as_str()) else {
        return false;
    };
    let Some(full) = body(name) else {
        return false;
    };
    value.as_object().map(|o| o.len()) == Some(3)
        && value["title"].as_str() == title(name)
        && (text == full
            || text
                .strip_suffix(SHORTENED)
                .is_some_and(|kept| full.starts_with(kept)))
}
