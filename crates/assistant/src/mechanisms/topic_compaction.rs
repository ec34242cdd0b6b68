//! Spec 40 §3: over budget, the older history is summarized keeping its topics (instead of
//! the oldest messages being dropped).

use std::sync::Arc;

use super::{Mechanism, TurnInputs, TurnParts};
use crate::pipeline::BoxFuture;
use crate::settings::ServiceSettings;

pub(crate) struct TopicCompaction;

impl Mechanism for TopicCompaction {
    fn setting(&self) -> Option<&'static str> {
        Some("topicCompaction")
    }

    fn on(&self, settings: &ServiceSettings) -> bool {
        settings.mechanisms.topic_compaction
    }

    fn assemble<'a>(&'a self, _: &'a TurnInputs<'a>, turn: &'a mut TurnParts) -> BoxFuture<'a, ()> {
        turn.seams.compaction = Some(Arc::new(crate::compaction::TopicCompaction));
        Box::pin(async {})
    }
}
