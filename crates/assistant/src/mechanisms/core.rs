//! The core parts of a turn that sit in the mechanism table only for their place in the
//! request's order: the docs block and the live state (their own settings, not
//! mechanisms), the skill loader (`meta.loadSkill`, always offered) and the notice that a
//! local server drops native tools.

use std::sync::Arc;

use super::{Mechanism, TurnInputs, TurnParts};
use crate::engine::context::DOCS_TEXT;
use crate::engine::conversation::Settings;
use crate::engine::pipeline::BoxFuture;
use crate::engine::seams::{DocsBlock, LiveStateBlock};
use crate::mechanisms::skills::{self, SkillDoor};
use crate::settings::ServiceSettings;

/// Spec 20: the docs block in the system prompt.
pub(crate) struct DocsBlockPart;

impl Mechanism for DocsBlockPart {
    fn setting(&self) -> Option<&'static str> {
        None
    }

    fn on(&self, settings: &ServiceSettings) -> bool {
        settings.docs_block
    }

    fn assemble<'a>(&'a self, _: &'a TurnInputs<'a>, turn: &'a mut TurnParts) -> BoxFuture<'a, ()> {
        turn.contributors
            .push(Arc::new(DocsBlock(DOCS_TEXT.to_string())));
        Box::pin(async {})
    }
}

/// Spec 20: the live state block (project summary, connection status) in every turn.
pub(crate) struct LiveStatePart;

impl Mechanism for LiveStatePart {
    fn setting(&self) -> Option<&'static str> {
        None
    }

    fn on(&self, settings: &ServiceSettings) -> bool {
        settings.live_state
    }

    fn assemble<'a>(
        &'a self,
        cx: &'a TurnInputs<'a>,
        turn: &'a mut TurnParts,
    ) -> BoxFuture<'a, ()> {
        turn.contributors.push(Arc::new(LiveStateBlock {
            commands: cx.service.runtime().clone(),
            chat: cx.chat,
        }));
        Box::pin(async {})
    }
}

/// `meta.loadSkill` is always among the discovery tools (routing, a mechanism, loads one
/// for the model when the message names its domain).
pub(crate) struct SkillLoader;

impl Mechanism for SkillLoader {
    fn setting(&self) -> Option<&'static str> {
        None
    }

    fn on(&self, _: &ServiceSettings) -> bool {
        true
    }

    fn assemble<'a>(&'a self, _: &'a TurnInputs<'a>, turn: &'a mut TurnParts) -> BoxFuture<'a, ()> {
        turn.commands = Arc::new(SkillDoor::new(turn.commands.clone()));
        turn.offered.push(skills::LOAD_SKILL);
        Box::pin(async {})
    }
}

/// Tools sent natively to a server whose template drops them never reach the model: the
/// chat says so (once) instead of the model pretending it did something.
pub(crate) struct ToolsNotice;

impl Mechanism for ToolsNotice {
    fn setting(&self) -> Option<&'static str> {
        None
    }

    fn on(&self, _: &ServiceSettings) -> bool {
        true
    }

    fn sized<'a>(
        &'a self,
        cx: &'a TurnInputs<'a>,
        turn: &'a mut TurnParts,
        request: &'a Settings,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if !request.constrained_tools && cx.fresh {
                if let Some(notice) = cx.service.tools_notice(cx.settings, cx.events).await {
                    turn.seams.inbound.push(notice);
                }
            }
        })
    }
}
