//! Skills (spec 20 §4): markdown bodies shipped with the app (`skills/*.md`), each telling
//! the model how to do one domain's job with Sextant's commands – and the app, not the
//! model, deciding when one is needed.
//!
//! - [`SKILLS`]: the bodies, compiled in. A test extracts every command a body names and
//!   fails if the registry lacks it, so skills cannot rot when commands change.
//! - [`SkillDoor`]: adds the Safe `meta.loadSkill {name}` to the commands the assistant
//!   works through, and lists it (with every skill) in `meta.listCommands`.
//! - [`SkillRouter`]: the inbound seam. A shipped, auditable trigger table
//!   (`skill-triggers.json`); case-insensitive; an ASCII phrase matches only at word
//!   boundaries, a CJK one as a substring; the longest phrase wins (a tie: the first skill
//!   id); one skill per message; no fuzzy matching – a miss keeps today's behaviour, a false
//!   hit costs a small model thousands of tokens. On a hit it appends, right after the
//!   person's message, the pair a compliant model would have made itself – a
//!   `meta_loadSkill` call with an app-made id and its result carrying the body – so
//!   budgeting and pair reconciliation treat it like any other call; and a `skill_loaded`
//!   event `{skill, phrase, callId, synthetic}`. A skill already loaded in the chat (folded
//!   from those events) is not loaded again.
//!
//! Off (`skill_routing`) ⇒ the router is not built: zero bytes.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::{json, Value};
use sextant_commands::{CommandError, CommandSpec, Tier};

use crate::engine::chatlog::{kinds, Event, LoggedEvent};
use crate::engine::overlay::{Extra, Handler, Overlay};
use crate::engine::seams::InboundRouter;
use crate::Commands;

/// The command that loads a skill.
pub const LOAD_SKILL: &str = "meta.loadSkill";

use crate::engine::conversation::Settings;
use crate::engine::pipeline::BoxFuture;
pub use crate::engine::skill_texts::{
    body, budgeted, is_app_text, summary, title, MAX_SKILL_BYTES, SKILLS, TRIGGERS,
};
use crate::mechanisms::{Mechanism, TurnInputs, TurnParts};
use crate::settings::ServiceSettings;
use std::sync::Arc;

/// The spec of `meta.loadSkill`.
fn load_skill_spec() -> CommandSpec {
    let names: Vec<&str> = SKILLS.iter().map(|(id, _)| *id).collect();
    CommandSpec {
        name: LOAD_SKILL.to_string(),
        description: format!(
            "Loads a skill: how to do one job with Sextant's commands, step by step. Skills: {}.",
            SKILLS
                .iter()
                .map(|(id, _)| format!("{id} ({})", summary(id).trim_end_matches('.')))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        tier: Tier::Safe,
        params_schema: Arc::new(json!({
            "type": "object",
            "properties": {"name": {"type": "string", "enum": names}},
            "required": ["name"],
            "additionalProperties": false
        })),
        result_schema: Arc::new(json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "title": {"type": "string"}, "body": {"type": "string"}},
            "required": ["name", "title", "body"]
        })),
        dry_run: None,
        examples: Vec::new(),
    }
}

fn load_skill(params: &Value) -> Result<Value, CommandError> {
    let name = params["name"].as_str().unwrap_or_default();
    // The error never repeats the name asked for: it is the model's text (perhaps copied
    // from a device or a file). The skills' ids are the app's.
    let body = body(name).ok_or_else(|| {
        CommandError::invalid(
            "name",
            format!(
                "not a skill; the skills are {}",
                SKILLS
                    .iter()
                    .map(|(id, _)| *id)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })?;
    Ok(json!({ "name": name, "title": title(name), "body": body }))
}

/// The commands with `meta.loadSkill` added (and listed by `meta.listCommands`).
pub type SkillDoor = Overlay<LoadSkill>;

/// The skills' state as [`SkillDoor`] needs it: none (the bodies are compiled in).
pub struct LoadSkill;

impl SkillDoor {
    pub fn new(inner: Commands) -> SkillDoor {
        let load: Handler<LoadSkill> = |_, params| Box::pin(async move { load_skill(&params) });
        Overlay::over(
            inner,
            LoadSkill,
            vec![Extra::listed(load_skill_spec(), load)],
        )
    }
}

// ---- routing ------------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TriggerFile {
    schema: u32,
    skills: BTreeMap<String, Vec<String>>,
}

/// The trigger table: `(phrase in lower case, skill)`.
#[derive(Debug, Clone)]
pub struct Triggers(Vec<(String, String)>);

/// A routing decision: the skill and the phrase that chose it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub skill: String,
    pub phrase: String,
}

impl Triggers {
    pub fn parse(text: &str) -> Result<Triggers, String> {
        let file: TriggerFile =
            serde_json::from_str(text).map_err(|e| format!("the skill trigger table: {e}"))?;
        if file.schema != 1 {
            return Err(format!(
                "the skill trigger table has schema {}; this Sextant reads 1",
                file.schema
            ));
        }
        let mut phrases = Vec::new();
        for (skill, list) in file.skills {
            if body(&skill).is_none() {
                return Err(format!(
                    "the trigger table names `{skill}`, which is not a skill"
                ));
            }
            for phrase in list {
                let p = phrase.trim().to_lowercase();
                if p.is_empty() {
                    return Err(format!("an empty trigger phrase for `{skill}`"));
                }
                phrases.push((p, skill.clone()));
            }
        }
        Ok(Triggers(phrases))
    }

    /// The shipped table.
    pub fn shipped() -> Triggers {
        Triggers::parse(TRIGGERS).expect("the shipped trigger table is valid (a test checks it)")
    }

    /// The skill `message` asks for, if any.
    pub fn route(&self, message: &str) -> Option<Route> {
        let text = message.to_lowercase();
        let mut best: Option<(&str, &str)> = None;
        for (phrase, skill) in &self.0 {
            if !matches_at_boundary(&text, phrase) {
                continue;
            }
            let better = match best {
                None => true,
                Some((p, s)) => {
                    let (n, m) = (phrase.chars().count(), p.chars().count());
                    n > m || (n == m && skill.as_str() < s)
                }
            };
            if better {
                best = Some((phrase, skill));
            }
        }
        best.map(|(phrase, skill)| Route {
            skill: skill.to_string(),
            phrase: phrase.to_string(),
        })
    }
}

/// `phrase` occurs in `text`; where its ends are ASCII letters or digits, the characters
/// next to it are not (so `can` is not found in `scan`), while CJK text, which has no
/// spaces, matches anywhere.
pub(crate) fn matches_at_boundary(text: &str, phrase: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let first = phrase.chars().next();
    let last = phrase.chars().last();
    text.match_indices(phrase).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + phrase.len()..].chars().next();
        let glued_before = word(first) && word(before);
        let glued_after = word(last) && word(after);
        !(glued_before || glued_after)
    })
}

/// The skills already loaded in a chat (from its `skill_loaded` events).
pub fn loaded(events: &[LoggedEvent]) -> BTreeSet<String> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::Structural(s) if s.kind == kinds::SKILL_LOADED => {
                s.payload["skill"].as_str().map(str::to_string)
            }
            _ => None,
        })
        .collect()
}

/// The inbound seam: one synthetic `meta_loadSkill` pair on a hit, once per chat.
pub struct SkillRouter {
    pub triggers: Triggers,
    /// Loaded in this chat already.
    pub loaded: BTreeSet<String>,
    /// The most of a body this model's context takes.
    pub max_body_bytes: usize,
}

impl InboundRouter for SkillRouter {
    fn route(&self, text: &str) -> Vec<Event> {
        let Some(route) = self.triggers.route(text) else {
            return Vec::new();
        };
        if self.loaded.contains(&route.skill) {
            tracing::info!(target: "assistant", skill = %route.skill, phrase = %route.phrase, "skill matched, already loaded in this chat");
            return Vec::new();
        }
        let Some(body) = body(&route.skill) else {
            return Vec::new();
        };
        tracing::info!(target: "assistant", skill = %route.skill, phrase = %route.phrase, "skill routed");
        let id = format!("sxt_skill_{}", route.skill.replace('-', "_"));
        let result = json!({
            "name": route.skill,
            "title": title(&route.skill),
            "body": budgeted(body, self.max_body_bytes),
        });
        vec![
            Event::tool_call(&id, "meta_loadSkill", json!({ "name": route.skill })),
            Event::tool_result(&id, result.to_string(), false),
            Event::structural(
                kinds::SKILL_LOADED,
                json!({
                    "skill": route.skill,
                    "title": title(&route.skill),
                    "phrase": route.phrase,
                    "callId": id,
                    "synthetic": true,
                }),
            ),
        ]
    }
}

/// The row in the mechanism table. Spec 20 §4: a message that names a domain gets its skill,
/// loaded by the app – at most a quarter of the history budget (about 4 bytes a token).
pub(crate) struct SkillRouting;

impl Mechanism for SkillRouting {
    fn setting(&self) -> Option<&'static str> {
        Some("skillRouting")
    }

    fn on(&self, settings: &ServiceSettings) -> bool {
        settings.mechanisms.skill_routing
    }

    fn sized<'a>(
        &'a self,
        cx: &'a TurnInputs<'a>,
        turn: &'a mut TurnParts,
        request: &'a Settings,
    ) -> BoxFuture<'a, ()> {
        turn.seams.inbound.push(Arc::new(SkillRouter {
            triggers: Triggers::shipped(),
            loaded: loaded(cx.events),
            max_body_bytes: request.history_budget_tokens.min(MAX_SKILL_BYTES),
        }));
        Box::pin(async {})
    }
}
