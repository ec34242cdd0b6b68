//! Spec 20 §5: each successful edit is checked by a Safe command inside the checkpoint
//! (after the edit, before its result is kept), in the same result.

use super::Mechanism;
use crate::pipeline::Pipeline;
use crate::settings::ServiceSettings;
use crate::verify;
use crate::Commands;

pub(crate) struct AutoVerify;

impl Mechanism for AutoVerify {
    fn setting(&self) -> Option<&'static str> {
        Some("autoVerify")
    }

    fn on(&self, settings: &ServiceSettings) -> bool {
        settings.mechanisms.auto_verify
    }

    fn pipeline(&self, pipeline: Pipeline, commands: &Commands) -> Pipeline {
        match verify::check_table(commands.specs()) {
            Ok(()) => pipeline.wrap(verify::AutoVerify {
                commands: commands.clone(),
            }),
            Err(e) => {
                tracing::error!(target: "assistant", "auto-verify is off: {e}");
                pipeline
            }
        }
    }
}
