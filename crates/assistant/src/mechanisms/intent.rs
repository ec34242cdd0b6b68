//! Intent narrowing (spec 40 §2): a deterministic classifier of the person's message over a
//! shipped, auditable table of weighted phrases (`intents.json`, English and Chinese), and
//! the tool filter that shows the model only that intent's tools.
//!
//! Scoring: an intent's score is the sum of the weights of its phrases found in the message
//! (each phrase once; an English phrase at word boundaries, also with a plural `s`; a
//! Chinese phrase anywhere). Confidence is the best score capped at 1, times the best
//! score's share of the best two – one strong phrase is sure, a message that names several
//! domains is not. Deterministic: ties go to the intent first in [`Intent::ALL`].
//!
//! Triple fallback to every offered tool: confidence below [`INTENT_CONF_THRESHOLD`], fewer
//! than [`MIN_NARROWED_TOOLS`] offered tools in the subset, or none. Only what the model is
//! shown changes: the turn's tool set still resolves every tool, so a call outside the
//! subset runs through the pipeline with its own tier.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use sextant_providers::ToolDefinition;

use crate::engine::language::Language;
use crate::engine::pipeline::BoxFuture;
use crate::engine::seams::ToolFilter;
use crate::engine::tools::command_name;
use crate::mechanisms::{Mechanism, TurnInputs, TurnParts};
use crate::settings::ServiceSettings;
use std::sync::Arc;

/// Below this confidence the model sees every tool; 1.0 (or more) turns narrowing off.
pub const INTENT_CONF_THRESHOLD: f64 = 0.7;

/// A narrowed set smaller than this falls back to every tool.
pub const MIN_NARROWED_TOOLS: usize = 3;

/// The shipped table.
pub const TABLE: &str = include_str!("../../intents.json");

/// What a message is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Intent {
    DashboardLayout,
    Parser,
    Transform,
    DeviceConnection,
    Recording,
    Mqtt,
    CanModbus,
    ProjectFiles,
    AssistantMemory,
    Unknown,
}

impl Intent {
    /// Every known intent, in tie-break order.
    pub const ALL: [Intent; 9] = [
        Intent::DashboardLayout,
        Intent::Parser,
        Intent::Transform,
        Intent::DeviceConnection,
        Intent::Recording,
        Intent::Mqtt,
        Intent::CanModbus,
        Intent::ProjectFiles,
        Intent::AssistantMemory,
    ];

    /// The table's name (`dashboard_layout`, …; `unknown`).
    pub fn name(self) -> &'static str {
        match self {
            Intent::DashboardLayout => "dashboard_layout",
            Intent::Parser => "parser",
            Intent::Transform => "transform",
            Intent::DeviceConnection => "device_connection",
            Intent::Recording => "recording",
            Intent::Mqtt => "mqtt",
            Intent::CanModbus => "can_modbus",
            Intent::ProjectFiles => "project_files",
            Intent::AssistantMemory => "assistant_memory",
            Intent::Unknown => "unknown",
        }
    }

    pub fn from_name(name: &str) -> Option<Intent> {
        Intent::ALL
            .into_iter()
            .chain([Intent::Unknown])
            .find(|i| i.name() == name)
    }
}

/// A message's intent and how sure the table is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Classified {
    pub intent: Intent,
    /// 0 to 1.
    pub confidence: f64,
}

struct Entry {
    intent: Intent,
    label_en: String,
    label_zh: String,
    /// Lower-cased phrase and its weight.
    phrases: Vec<(String, f64)>,
    /// Command names.
    tools: BTreeSet<String>,
}

/// The classifier's table, parsed and checked.
pub struct Intents {
    entries: Vec<Entry>,
    /// Command names every narrowed turn keeps.
    always: BTreeSet<String>,
    threshold: f64,
}

#[derive(Deserialize)]
struct TableFile {
    schema: u32,
    #[serde(default)]
    always: Vec<String>,
    intents: BTreeMap<String, TableIntent>,
}

#[derive(Deserialize)]
struct TableIntent {
    label: BTreeMap<String, String>,
    phrases: BTreeMap<String, f64>,
    tools: Vec<String>,
}

impl Intents {
    /// Parses a table; every problem is named.
    pub fn parse(text: &str) -> Result<Intents, String> {
        let file: TableFile =
            serde_json::from_str(text).map_err(|e| format!("the intent table: {e}"))?;
        if file.schema != 1 {
            return Err(format!(
                "the intent table has schema {}; this Sextant reads 1",
                file.schema
            ));
        }
        let mut entries = Vec::new();
        for (name, t) in file.intents {
            let intent = Intent::from_name(&name)
                .filter(|i| *i != Intent::Unknown)
                .ok_or_else(|| {
                    format!("the intent table names `{name}`, which is not an intent")
                })?;
            let mut phrases = Vec::new();
            for (phrase, weight) in t.phrases {
                let p = phrase.trim().to_lowercase();
                if p.is_empty() {
                    return Err(format!("an empty phrase for `{name}`"));
                }
                if !(weight > 0.0 && weight <= 1.0) {
                    return Err(format!(
                        "`{name}`: the phrase `{phrase}` weighs {weight}; a weight is in (0, 1]"
                    ));
                }
                phrases.push((p, weight));
            }
            if t.tools.is_empty() {
                return Err(format!("`{name}` lists no tools"));
            }
            let label = |lang: &str| {
                t.label
                    .get(lang)
                    .cloned()
                    .ok_or_else(|| format!("`{name}` has no `{lang}` label"))
            };
            entries.push(Entry {
                intent,
                label_en: label("en")?,
                label_zh: label("zh")?,
                phrases,
                tools: t.tools.into_iter().collect(),
            });
        }
        entries.sort_by_key(|e| e.intent);
        Ok(Intents {
            entries,
            always: file.always.into_iter().collect(),
            threshold: INTENT_CONF_THRESHOLD,
        })
    }

    /// The shipped table.
    pub fn shipped() -> Intents {
        Intents::parse(TABLE).expect("the shipped intent table is valid (a test checks it)")
    }

    /// The same table with another confidence threshold (1.0 or more: never narrow).
    pub fn with_threshold(mut self, threshold: f64) -> Intents {
        self.threshold = threshold;
        self
    }

    /// How a note names `intent` to the model.
    pub fn label(&self, intent: Intent, language: Language) -> &str {
        match (self.entries.iter().find(|e| e.intent == intent), language) {
            (Some(e), Language::En) => &e.label_en,
            (Some(e), Language::Zh) => &e.label_zh,
            (None, Language::En) => "something else",
            (None, Language::Zh) => "其他话题",
        }
    }

    /// The command names the table shows for `intent`, its own and the `always` ones
    /// (empty for `Unknown`).
    pub fn tools(&self, intent: Intent) -> BTreeSet<String> {
        match self.entries.iter().find(|e| e.intent == intent) {
            Some(e) => e.tools.union(&self.always).cloned().collect(),
            None => BTreeSet::new(),
        }
    }

    /// Every command name the table shows for some intent.
    pub fn all_tools(&self) -> BTreeSet<String> {
        self.entries
            .iter()
            .flat_map(|e| e.tools.iter().cloned())
            .chain(self.always.iter().cloned())
            .collect()
    }

    /// Classifies one message.
    pub fn classify(&self, message: &str) -> Classified {
        let text = message.to_lowercase();
        let mut scores: Vec<(Intent, f64)> = self
            .entries
            .iter()
            .map(|e| {
                let score = e
                    .phrases
                    .iter()
                    .filter(|(p, _)| found(&text, p))
                    .map(|(_, w)| w)
                    .sum::<f64>();
                (e.intent, score)
            })
            .collect();
        // Best first; a stable sort keeps the table's order among equals.
        scores.sort_by(|a, b| b.1.total_cmp(&a.1));
        let best = scores.first().copied().unwrap_or((Intent::Unknown, 0.0));
        let second = scores.get(1).map_or(0.0, |s| s.1);
        if best.1 <= 0.0 {
            return Classified {
                intent: Intent::Unknown,
                confidence: 0.0,
            };
        }
        Classified {
            intent: best.0,
            confidence: best.1.min(1.0) * best.1 / (best.1 + second),
        }
    }

    /// A message's topic: its intent when known with confidence at the threshold or above.
    pub fn topic(&self, message: &str) -> Option<Intent> {
        let c = self.classify(message);
        self.sure(c).then_some(c.intent)
    }

    /// Known, and at the threshold or above; a threshold of 1.0 or more is "never".
    fn sure(&self, c: Classified) -> bool {
        c.intent != Intent::Unknown && self.threshold < 1.0 && c.confidence >= self.threshold
    }

    /// The tool filter for a turn whose message is `message`.
    pub fn narrowing(&self, message: &str) -> Narrowing {
        let c = self.classify(message);
        let keep = if self.sure(c) {
            self.tools(c.intent)
        } else {
            BTreeSet::new()
        };
        Narrowing {
            classified: c,
            keep,
        }
    }
}

/// `phrase` in `text` (both lower-cased): at word boundaries for ASCII edges, with an
/// optional plural `s`.
fn found(text: &str, phrase: &str) -> bool {
    crate::mechanisms::skills::matches_at_boundary(text, phrase)
        || (phrase.ends_with(|c: char| c.is_ascii_alphabetic())
            && crate::mechanisms::skills::matches_at_boundary(text, &format!("{phrase}s")))
}

/// [tools] The turn's narrowing: the subset of the offered tools for the message's
/// intent, or every offered tool when the triple fallback applies.
#[derive(Debug, Clone)]
pub struct Narrowing {
    pub classified: Classified,
    /// Command names; empty when the message is unknown or unsure.
    keep: BTreeSet<String>,
}

impl Narrowing {
    /// The tools the model is shown, from the ones offered.
    pub fn narrowed(&self, tools: Vec<ToolDefinition>) -> Vec<ToolDefinition> {
        if self.keep.is_empty() {
            return tools;
        }
        let subset: Vec<ToolDefinition> = tools
            .iter()
            .filter(|t| self.keep.contains(&command_name(&t.name)))
            .cloned()
            .collect();
        if subset.len() < MIN_NARROWED_TOOLS {
            return tools;
        }
        subset
    }
}

impl ToolFilter for Narrowing {
    fn filter(&self, tools: Vec<ToolDefinition>) -> Vec<ToolDefinition> {
        self.narrowed(tools)
    }
}

/// The row in the mechanism table. Spec 40 §2: the model is shown only the tools of the
/// message's intent.
pub(crate) struct IntentNarrowing;

impl Mechanism for IntentNarrowing {
    fn setting(&self) -> Option<&'static str> {
        Some("intentNarrowing")
    }

    fn on(&self, settings: &ServiceSettings) -> bool {
        settings.mechanisms.intent_narrowing
    }

    fn assemble<'a>(
        &'a self,
        cx: &'a TurnInputs<'a>,
        turn: &'a mut TurnParts,
    ) -> BoxFuture<'a, ()> {
        let intents = Intents::shipped();
        turn.seams
            .tools
            .push(Arc::new(intents.narrowing(cx.message)));
        Box::pin(async {})
    }
}
