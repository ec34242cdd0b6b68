//! Spec 20 §1: the probe – its instruction in the role block, its strip on every streamed
//! reply, its verdict on every final one.

use std::sync::Arc;

use super::{Mechanism, TurnInputs, TurnParts};
use crate::conversation::Settings;
use crate::pipeline::BoxFuture;
use crate::probe;
use crate::seams::RoleBlock;
use crate::settings::ServiceSettings;

pub(crate) struct ContextProbe;

impl Mechanism for ContextProbe {
    fn setting(&self) -> Option<&'static str> {
        Some("contextProbe")
    }

    fn on(&self, settings: &ServiceSettings) -> bool {
        settings.mechanisms.context_probe
    }

    fn role(&self, _: &TurnInputs<'_>, role: &mut RoleBlock) {
        role.probe_instruction = Some(probe::INSTRUCTION.to_string());
    }

    fn sized<'a>(
        &'a self,
        cx: &'a TurnInputs<'a>,
        turn: &'a mut TurnParts,
        _: &'a Settings,
    ) -> BoxFuture<'a, ()> {
        turn.seams.display.push(Arc::new(probe::ProbeDisplay));
        turn.seams.verdict.push(Arc::new(probe::ProbeEvaluator {
            compliance: cx.service.compliance(),
            key: probe::model_key(cx.settings.provider.name(), &cx.settings.model),
        }));
        Box::pin(async {})
    }
}
