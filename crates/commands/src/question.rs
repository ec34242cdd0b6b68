//! What a person is asked before a call runs, as data: the backend's message words it in
//! English for logs, headless callers and the model, and a door with a person in front of it
//! words it again in that person's language from the same fields (the UI's
//! `lib/i18n/consent.ts`), so a question is never shown half translated.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A question a call needs a person's yes to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Question {
    /// A source is added or changed to run these programs when it connects.
    SetsPrograms { command_lines: Vec<String> },
    /// A file is written outside the user's folders.
    WritesOutside { path: String },
    /// A file Sextant did not write (in the format the command writes) is replaced.
    ReplacesForeign { path: String, format: WrittenFormat },
    /// The project connects: it starts these programs (`programs`) and sends these
    /// (`sends`) without a click.
    Connects {
        programs: Vec<String>,
        sends: Vec<Outgoing>,
    },
}

/// The kinds of file Sextant writes for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum WrittenFormat {
    Project,
    CsvExport,
    SessionsDatabase,
    // A session exported as MCAP or Parquet (a doc comment here would split the schema).
    SessionExport,
}

/// Something that leaves for a device or the outside world without a click once a project
/// connects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Outgoing {
    /// An action's send on connect, or its timer while connected.
    Action {
        /// The action's title; empty when it has none.
        title: String,
        /// The payload as written (hex digits when `hex`), shortened when long.
        payload: String,
        hex: bool,
        /// What follows the payload: `none`, `lf`, `cr` or `crLf`.
        line_ending: String,
        /// Sent once each time the source connects.
        on_connect: bool,
        /// Sent this often while connected.
        every_ms: Option<u64>,
        /// The destination source's title; empty when it has none.
        to: String,
    },
    /// The MQTT publisher: every frame goes to a broker.
    Publisher {
        url: String,
        topic: String,
        rate_hz: u32,
    },
    /// The PostgreSQL sink: every value goes to a database table.
    Postgres { url: String, table: String },
}

impl Question {
    /// The question in English, as one sentence a person can answer.
    pub fn english(&self) -> String {
        match self {
            Question::SetsPrograms { command_lines } => format!(
                "this sets a source to run {} on this computer, as you, when it connects – allow it?",
                quoted(command_lines)
            ),
            Question::WritesOutside { path } => {
                format!("this writes the file {path}, outside your folders – allow it?")
            }
            Question::ReplacesForeign { path, format } => format!(
                "{path} is not {} (Sextant did not write it); this replaces it – replace it anyway?",
                format.english()
            ),
            Question::Connects { programs, sends } => {
                let mut parts = Vec::new();
                if !programs.is_empty() {
                    parts.push(format!(
                        "this project runs {} on this computer, as you",
                        quoted(programs)
                    ));
                }
                if !sends.is_empty() {
                    let lead = if parts.is_empty() {
                        "connecting this project sends without a click"
                    } else {
                        "connecting it sends without a click"
                    };
                    parts.push(format!("{lead}: {}", Outgoing::english_list(sends)));
                }
                format!("{} – allow it?", parts.join("; and "))
            }
        }
    }
}

impl WrittenFormat {
    pub fn english(self) -> &'static str {
        match self {
            WrittenFormat::Project => "a Sextant project",
            WrittenFormat::CsvExport => "a CSV export Sextant wrote",
            WrittenFormat::SessionsDatabase => "a Sextant sessions database",
            WrittenFormat::SessionExport => "an MCAP or Parquet export Sextant wrote",
        }
    }
}

impl Outgoing {
    /// What it sends and when, in English.
    pub fn english(&self) -> String {
        match self {
            Outgoing::Action {
                title,
                payload,
                hex,
                line_ending,
                on_connect,
                every_ms,
                to,
            } => {
                let title = if title.is_empty() {
                    "an action".to_string()
                } else {
                    format!("“{title}”")
                };
                let what = if *hex {
                    format!("the bytes {payload}")
                } else {
                    format!("“{payload}”")
                };
                let ending = match line_ending.as_str() {
                    "lf" => " and a new line",
                    "cr" => " and a carriage return",
                    "crLf" => " and a carriage return and new line",
                    _ => "",
                };
                let to = if to.is_empty() {
                    String::new()
                } else {
                    format!(" to {to}")
                };
                let when = match (on_connect, every_ms) {
                    (true, Some(ms)) => {
                        format!("when it connects, then every {ms} ms while connected")
                    }
                    (true, None) => "when it connects".to_string(),
                    (false, Some(ms)) => format!("every {ms} ms while connected"),
                    (false, None) => String::new(),
                };
                format!("{title} sends {what}{ending}{to} {when}")
            }
            Outgoing::Publisher {
                url,
                topic,
                rate_hz,
            } => format!(
                "every frame is published to {url} on the topic “{topic}”, {rate_hz} times a second"
            ),
            Outgoing::Postgres { url, table } => {
                format!("every value is written to the table “{table}” of the database {url}")
            }
        }
    }

    fn english_list(sends: &[Outgoing]) -> String {
        sends
            .iter()
            .map(Outgoing::english)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Command lines as a sentence names them: each in code marks, joined by "and".
pub fn quoted(lines: &[String]) -> String {
    lines
        .iter()
        .map(|l| format!("`{l}`"))
        .collect::<Vec<_>>()
        .join(" and ")
}
