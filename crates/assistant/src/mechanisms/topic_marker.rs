//! Spec 40 §5: a soft note when the person just switched topics.

use std::sync::Arc;

use super::{Mechanism, TurnInputs, TurnParts};
use crate::focus::TopicNote;
use crate::intent::Intents;
use crate::pipeline::BoxFuture;
use crate::settings::ServiceSettings;

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
