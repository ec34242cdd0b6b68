//! Spec 40 §4: big tool results shown to the model compressed (the log keeps them): first
//! documentation read in earlier turns and reads made again (their older answers become
//! pointers), then what is still big is cut to its key lines. A result's share is of the
//! whole request, so this needs the finished prompt's size.

use std::sync::Arc;

use sextant_commands::Tier;

use super::Mechanism;
use crate::compress::{CompressToolResults, ReferenceReads, SupersededReads};
use crate::conversation::Prompt;
use crate::seams::Seams;
use crate::settings::ServiceSettings;
use crate::Commands;

pub(crate) struct ToolResultCompression;

impl Mechanism for ToolResultCompression {
    fn setting(&self) -> Option<&'static str> {
        Some("toolResultCompression")
    }

    fn on(&self, settings: &ServiceSettings) -> bool {
        settings.mechanisms.tool_result_compression
    }

    fn history(&self, seams: &mut Seams, commands: &Commands, prompt: &Prompt) {
        seams.history.push(Arc::new(ReferenceReads));
        seams.history.push(Arc::new(SupersededReads {
            reads: commands
                .specs()
                .iter()
                .filter(|spec| spec.tier == Tier::Safe)
                .map(|spec| spec.name.clone())
                .collect(),
        }));
        seams.history.push(Arc::new(CompressToolResults {
            prompt_bytes: prompt_bytes(prompt),
        }));
    }
}

/// The bytes of a prompt's system blocks and tool definitions.
fn prompt_bytes(prompt: &Prompt) -> usize {
    let system: usize = prompt.system.iter().map(|b| b.text.len()).sum();
    let tools: usize = prompt
        .tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
        .sum();
    system + tools
}
