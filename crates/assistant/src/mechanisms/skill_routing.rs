//! Spec 20 §4: a message that names a domain gets its skill, loaded by the app – at most a
//! quarter of the history budget (about 4 bytes a token).

use std::sync::Arc;

use super::{Mechanism, TurnInputs, TurnParts};
use crate::conversation::Settings;
use crate::pipeline::BoxFuture;
use crate::settings::ServiceSettings;
use crate::skills::{self, SkillRouter, Triggers};

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
            loaded: skills::loaded(cx.events),
            max_body_bytes: request.history_budget_tokens.min(skills::MAX_SKILL_BYTES),
        }));
        Box::pin(async {})
    }
}
