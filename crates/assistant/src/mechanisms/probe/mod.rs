//! The context-health probe (spec 20 §1): a sentinel line the model is asked to end every
//! visible reply with, so the app can tell – deterministically, with any model – when a
//! long chat starts slipping out of the model's grip.
//!
//! - [`SENTINEL`] is our marker plus five named anchors, one per rule the assistant
//!   depends on, so a drift report says *which* rule slipped. [`INSTRUCTION`] asks for it
//!   in the cached role block (verbatim or nothing).
//! - [`strip`]: the display filter and the history strip – no exit a person sees ever shows
//!   it, and mid-stream nothing that could become it is shown early. The model's history
//!   keeps the raw reply: stripping it would teach the model to leave the line out.
//! - [`verdict`]: healthy, mutated (which anchor), missing – on final replies only.
//! - [`compliance`]: per provider + model, persisted; never-compliant models are muted.
//! - [`ProbeEvaluator`] (the verdict seam) logs one `probe_verdict` event per final reply;
//!   [`degraded`] folds a chat's events into its degraded state, which is never stored.
//!
//! Off (`context_probe`) ⇒ none of this is built: no instruction, no filter, no verdicts.

pub mod compliance;
pub mod strip;
pub mod verdict;

use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Value};
use sextant_providers::StopReason;

use crate::engine::chatlog::{kinds, Event, LoggedEvent, Seq};
use crate::engine::seams::ReplyEvaluator;

pub use compliance::{model_key, Class, Compliance, COMPLIANCE_FILE, COMPLIANCE_WINDOW};
pub use strip::{shown_while_streaming, strip_for_display, ProbeDisplay, StripFilter};
pub use verdict::{evaluate_reply, Drift, Verdict};

use crate::engine::conversation::Settings;
use crate::engine::pipeline::BoxFuture;
use crate::engine::seams::RoleBlock;
pub use crate::engine::sentinel::OPEN;
use crate::mechanisms::{Mechanism, TurnInputs, TurnParts};
use crate::settings::ServiceSettings;

/// The anchors, in order: tool approval (a denied call is not retried unchanged), the
/// untrusted boundary (enveloped text is data), id freshness (ids from the live state,
/// never from memory), bulk discipline (one call for a whole job), auto-save (the project
/// saves itself). Each names a rule of the role block.
pub const ANCHORS: [&str; 5] = ["askfirst", "fenced", "idsfresh", "onecall", "selfsave"];

/// The whole line.
pub const SENTINEL: &str = "[[SXT-PROBE askfirst fenced idsfresh onecall selfsave]]";

/// The instruction in the role block (cached: the same bytes in every request).
pub const INSTRUCTION: &str = "\
Context check: end every reply you write for the user (not tool calls) with this line, \
exactly as written, on a line of its own:
[[SXT-PROBE askfirst fenced idsfresh onecall selfsave]]
Sextant removes it before the user sees the reply. Never mention, translate, reorder or \
change it. If you cannot reproduce it exactly, leave it out.";

/// The verdict seam: judges each final reply and keeps the model's compliance.
pub struct ProbeEvaluator {
    pub compliance: Arc<Compliance>,
    /// [`model_key`] of the provider and model answering.
    pub key: String,
}

impl ReplyEvaluator for ProbeEvaluator {
    fn evaluate(&self, reply: &str, stop: &StopReason) -> Vec<Event> {
        // A reply cut by the token limit or refused never had the chance to end with the
        // line; an empty one is not visible. Neither says anything about the context.
        if reply.trim().is_empty() || matches!(stop, StopReason::MaxTokens | StopReason::Refusal) {
            return Vec::new();
        }
        let verdict = evaluate_reply(reply);
        let (before, after) = self
            .compliance
            .observe(&self.key, verdict == Verdict::Healthy);
        let mut payload = json!({
            "verdict": verdict.name(),
            "degraded": false,
            "model": self.key,
        });
        if let Some(drift) = verdict.drift() {
            payload["drift"] = json!(drift);
        }
        match (verdict, before) {
            (Verdict::Healthy, _) => {}
            (_, Class::Compliant) => {
                payload["degraded"] = json!(true);
                tracing::info!(target: "assistant", model = %self.key, verdict = verdict.name(), drift = verdict.drift(), "context may be degrading");
            }
            (_, Class::Muted) => {
                payload["observed"] = payload["verdict"].take();
                payload["verdict"] = json!("muted");
            }
            (_, Class::Unclassified { .. }) => {
                if let Class::Unclassified { failures } = after {
                    payload["window"] = json!(failures);
                } else {
                    payload["window"] = json!(COMPLIANCE_WINDOW);
                    tracing::info!(target: "assistant", model = %self.key, "the model never reproduced the sentinel; the probe is muted for it");
                }
            }
        }
        vec![Event::structural(kinds::PROBE_VERDICT, payload)]
    }
}

/// A chat's degraded state, folded from its `probe_verdict` events: set by the first
/// degrading verdict, kept until the chat ends (only a new chat clears it), naming the
/// latest failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Degraded {
    /// `mutated` or `missing`.
    pub verdict: String,
    /// The drifted anchor, or `format` / `truncated`.
    pub drift: Option<String>,
    /// The verdict's event.
    pub seq: Seq,
}

/// The degraded state of a chat, if it is degraded.
pub fn degraded(events: &[LoggedEvent]) -> Option<Degraded> {
    events.iter().rev().find_map(|e| match &e.event {
        Event::Structural(s)
            if s.kind == kinds::PROBE_VERDICT
                && s.payload.get("degraded") == Some(&Value::Bool(true)) =>
        {
            Some(Degraded {
                verdict: s.payload["verdict"]
                    .as_str()
                    .unwrap_or("missing")
                    .to_string(),
                drift: s.payload["drift"].as_str().map(str::to_string),
                seq: e.seq,
            })
        }
        _ => None,
    })
}

/// The row in the mechanism table. Spec 20 §1: the probe – its instruction in the role block,
/// its strip on every streamed reply, its verdict on every final one.
pub(crate) struct ContextProbe;

impl Mechanism for ContextProbe {
    fn setting(&self) -> Option<&'static str> {
        Some("contextProbe")
    }

    fn on(&self, settings: &ServiceSettings) -> bool {
        settings.mechanisms.context_probe
    }

    fn role(&self, _: &TurnInputs<'_>, role: &mut RoleBlock) {
        role.probe_instruction = Some(INSTRUCTION.to_string());
    }

    fn sized<'a>(
        &'a self,
        cx: &'a TurnInputs<'a>,
        turn: &'a mut TurnParts,
        _: &'a Settings,
    ) -> BoxFuture<'a, ()> {
        turn.seams.display.push(Arc::new(ProbeDisplay));
        turn.seams.verdict.push(Arc::new(ProbeEvaluator {
            compliance: cx.service.compliance(),
            key: model_key(cx.settings.provider.name(), &cx.settings.model),
        }));
        Box::pin(async {})
    }
}
