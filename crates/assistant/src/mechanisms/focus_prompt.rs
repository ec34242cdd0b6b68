//! Spec 40 §1: the focus section in the cached role block, in the UI's language.

use super::{Mechanism, TurnInputs};
use crate::focus;
use crate::seams::RoleBlock;
use crate::settings::ServiceSettings;

pub(crate) struct FocusPrompt;

impl Mechanism for FocusPrompt {
    fn setting(&self) -> Option<&'static str> {
        Some("focusPrompt")
    }

    fn on(&self, settings: &ServiceSettings) -> bool {
        settings.mechanisms.focus_prompt
    }

    fn role(&self, cx: &TurnInputs<'_>, role: &mut RoleBlock) {
        role.focus = Some(focus::focus_section(cx.settings.language));
    }
}
