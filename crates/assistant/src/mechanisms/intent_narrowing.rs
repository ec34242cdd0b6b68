//! Spec 40 §2: the model is shown only the tools of the message's intent.

use std::sync::Arc;

use super::{Mechanism, TurnInputs, TurnParts};
use crate::intent::Intents;
use crate::pipeline::BoxFuture;
use crate::settings::ServiceSettings;

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
