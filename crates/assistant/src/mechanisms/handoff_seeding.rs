//! Spec 20 §3: a chat started from another carries that chat's digest, frozen in its log.

use std::sync::Arc;

use super::{Mechanism, TurnInputs, TurnParts};
use crate::handoff;
use crate::pipeline::BoxFuture;
use crate::settings::ServiceSettings;

pub(crate) struct HandoffSeeding;

impl Mechanism for HandoffSeeding {
    fn setting(&self) -> Option<&'static str> {
        Some("handoffSeeding")
    }

    fn on(&self, settings: &ServiceSettings) -> bool {
        settings.mechanisms.handoff_seeding
    }

    fn assemble<'a>(
        &'a self,
        cx: &'a TurnInputs<'a>,
        turn: &'a mut TurnParts,
    ) -> BoxFuture<'a, ()> {
        if let Some(seed) = handoff::seed(cx.events) {
            turn.contributors.push(Arc::new(handoff::block(seed)));
        }
        Box::pin(async {})
    }
}
