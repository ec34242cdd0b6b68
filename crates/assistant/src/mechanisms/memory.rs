//! Spec 20 §2: memory – its index in every request, its propose command among the tools,
//! and the app's own proposals from the person's phrasing (when the app has a store).

use std::sync::Arc;

use super::{Mechanism, TurnInputs, TurnParts};
use crate::memory::{MemoryBlock, PhraseProposer, ProposeDoor, PROPOSE};
use crate::pipeline::BoxFuture;
use crate::settings::ServiceSettings;

pub(crate) struct MemoryMechanism;

impl Mechanism for MemoryMechanism {
    fn setting(&self) -> Option<&'static str> {
        Some("memory")
    }

    fn on(&self, settings: &ServiceSettings) -> bool {
        settings.mechanisms.memory
    }

    fn assemble<'a>(
        &'a self,
        cx: &'a TurnInputs<'a>,
        turn: &'a mut TurnParts,
    ) -> BoxFuture<'a, ()> {
        if let Some(memory) = cx.service.memory_store() {
            let runtime = cx.service.runtime();
            turn.contributors.push(Arc::new(MemoryBlock {
                memory,
                commands: runtime.clone(),
                message: cx.message.to_string(),
                chat: cx.chat,
            }));
            turn.commands = Arc::new(ProposeDoor::new(runtime.clone()));
            turn.offered.push(PROPOSE);
            turn.seams.inbound.push(Arc::new(PhraseProposer::shipped()));
        }
        Box::pin(async {})
    }
}
