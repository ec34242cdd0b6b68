//! Staying on topic (spec 40 §1 and §5): the focus section of the role block, and the soft
//! note a request carries when the person switched topics.
//!
//! The focus section is a constant of the UI language, so it sits in the cached prefix with
//! the same bytes every turn. The topic note is derived from the log every turn (the last
//! two messages of the person, classified by [`crate::mechanisms::intent`]); nothing about topics is
//! stored, so reopening a chat derives the same note. The note is a per-request system
//! block, never part of the history, so no compaction can carry it along.

use crate::engine::chatlog::{Event, LoggedEvent};
use crate::engine::context::Envelope;
use crate::engine::pipeline::BoxFuture;
use crate::engine::seams::{Placement, PromptContributor};
use crate::mechanisms::intent::{Intent, Intents};

pub use crate::engine::language::Language;
use crate::engine::seams::RoleBlock;
use crate::mechanisms::{Mechanism, TurnInputs, TurnParts};
use crate::settings::ServiceSettings;
use std::sync::Arc;

/// The focus section in English: its own heading, four rules.
pub const FOCUS_EN: &str = "\
## Focus
- Serve the core of the user's current request; everything you say and every tool you call \
should move it forward.
- When the user switches topics, the latest topic wins: drop the old one unless asked to \
come back to it.
- Conclusion first, then the explanation.
- Do not expand into context the request did not ask for.";

/// The focus section in Chinese.
pub const FOCUS_ZH: &str = "\
## 聚焦准则
- 始终围绕用户当前请求的核心；所说的每句话、调用的每个工具都应推进这一请求。
- 用户切换话题时，以最新话题为准：除非用户要求，不再延续旧话题。
- 先给结论，再作解释。
- 不要展开与请求无关的内容。";

/// The focus section for `language`.
pub fn focus_section(language: Language) -> &'static str {
    match language {
        Language::En => FOCUS_EN,
        Language::Zh => FOCUS_ZH,
    }
}

/// The two most recent topics when the person switched: `(from, to)`. The messages are
/// the person's in `events`, then `current` (the message of a turn not logged yet). Each of
/// the last two has a topic only when its intent is known with confidence at or above the
/// threshold; either without one ⇒ no switch (no false alarms).
pub fn topic_shift(
    intents: &Intents,
    events: &[LoggedEvent],
    current: Option<&str>,
) -> Option<(Intent, Intent)> {
    let logged = events.iter().rev().filter_map(|e| match &e.event {
        Event::User { text } => Some(text.as_str()),
        _ => None,
    });
    let mut users = current.into_iter().chain(logged);
    let latest = intents.topic(users.next()?)?;
    let before = intents.topic(users.next()?)?;
    (latest != before).then_some((before, latest))
}

/// The note's text.
pub fn shift_note(intents: &Intents, language: Language, from: Intent, to: Intent) -> String {
    let (from, to) = (intents.label(from, language), intents.label(to, language));
    match language {
        Language::En => format!(
            "Topic note: the user switched from {} to {}. Answer about {}; bring the earlier \
             topic back only if the user asks.",
            from, to, to
        ),
        Language::Zh => format!(
            "话题提示：用户已从{}切换到{}。请围绕{}作答；除非用户要求，不要再回到之前的话题。",
            from, to, to
        ),
    }
}

/// [prompt] The topic-shift note, after the cache breakpoint. Built only when the setting
/// is on and the log shows a switch; its text is Sextant's own (intent labels), so it needs
/// no envelope.
pub struct TopicNote(pub String);

impl TopicNote {
    /// The note for this turn, if the person just switched topics.
    pub fn for_turn(
        intents: &Intents,
        events: &[LoggedEvent],
        current: Option<&str>,
        language: Language,
    ) -> Option<TopicNote> {
        let (from, to) = topic_shift(intents, events, current)?;
        Some(TopicNote(shift_note(intents, language, from, to)))
    }
}

impl PromptContributor for TopicNote {
    fn placement(&self) -> Placement {
        Placement::PerRequest
    }

    fn block<'a>(&'a self, _: &'a Envelope) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move { Some(self.0.clone()) })
    }
}

/// The row in the mechanism table. Spec 40 §1: the focus section in the cached role block, in
/// the UI's language.
pub(crate) struct FocusPrompt;

impl Mechanism for FocusPrompt {
    fn setting(&self) -> Option<&'static str> {
        Some("focusPrompt")
    }

    fn on(&self, settings: &ServiceSettings) -> bool {
        settings.mechanisms.focus_prompt
    }

    fn role(&self, cx: &TurnInputs<'_>, role: &mut RoleBlock) {
        role.focus = Some(focus_section(cx.settings.language));
    }
}

/// The row in the mechanism table. Spec 40 §5: a soft note when the person just switched
/// topics.
pub(crate) struct TopicMarker;

impl Mechanism for TopicMarker {
    fn setting(&self) -> Option<&'static str> {
        Some("topicMarker")
    }

    fn on(&self, settings: &ServiceSettings) -> bool {
        settings.mechanisms.topic_marker
    }

    fn assemble<'a>(
        &'a self,
        cx: &'a TurnInputs<'a>,
        turn: &'a mut TurnParts,
    ) -> BoxFuture<'a, ()> {
        let intents = Intents::shipped();
        if let Some(note) = TopicNote::for_turn(
            &intents,
            cx.events,
            cx.fresh.then_some(cx.message),
            cx.settings.language,
        ) {
            turn.contributors.push(Arc::new(note));
        }
        Box::pin(async {})
    }
}
