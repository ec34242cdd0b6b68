//! The assistant's mechanisms as one table, in the manner of ripgrep's `FLAGS`: each row is
//! a unit struct in a module of its own that says which setting turns it on and what it
//! adds to a turn at each stage; `ChatService` builds a turn by walking
//! [`TABLE`] stage by stage and knows no mechanism by name.
//!
//! Stages, each walked in table order (the order is the request's byte order, so rows are
//! listed where their blocks, doors and seams go):
//! 1. [`Mechanism::role`] – the cached role block's parts;
//! 2. [`Mechanism::assemble`] – system blocks, the model's doors and tools, seams that need
//!    only the message and the log;
//! 3. [`Mechanism::sized`] – seams sized by what the model can do;
//! 4. [`Mechanism::history`] – history transforms that need the finished prompt's size;
//! 5. [`Mechanism::pipeline`] – wrappers of the tool pipeline.
//!
//! Off means absent: a row whose setting is off is never asked (zero bytes in the request).
//! A few rows are core parts with no mechanism setting (the docs and live-state blocks, the
//! skill loader, the tools notice); they sit in the table only for their place in the order.
//! Adding a mechanism = a field in [`crate::settings::Mechanisms`], a module here, one line
//! in [`TABLE`], and its two strings in the panel; the tests below fail if a setting has no
//! row or a row no setting.

mod archive_tools;
mod auto_verify;
mod context_probe;
mod core;
mod focus_prompt;
mod handoff_seeding;
mod intent_narrowing;
mod memory;
mod skill_routing;
mod tool_result_compression;
mod topic_compaction;
mod topic_marker;

use std::sync::Arc;

use std::sync::Mutex;

use crate::chatlog::{ChatId, ChatLog, LoggedEvent};
use crate::conversation::{Prompt, Settings};
use crate::memory::Memory;
use crate::pipeline::{BoxFuture, Pipeline};
use crate::probe::Compliance;
use crate::seams::{InboundRouter, PromptContributor, RoleBlock, Seams};
use crate::settings::ServiceSettings;
use crate::Commands;

/// What the service lends a turn's mechanisms (implemented by
/// [`crate::service::ChatService`]); a trait so this table does not depend on the service.
pub(crate) trait TurnServices: Sync {
    /// The workspace's commands.
    fn runtime(&self) -> &Commands;
    /// The consented memory, when the app has one.
    fn memory_store(&self) -> Option<Arc<Memory>>;
    /// Which models reproduce the probe's sentinel.
    fn compliance(&self) -> Arc<Compliance>;
    /// The chat log, shared.
    fn log_handle(&self) -> Arc<Mutex<ChatLog>>;
    /// The open project's file, as the archive names projects.
    fn open_project(&self) -> BoxFuture<'_, Option<String>>;
    /// The notice that a local server drops native tools, unless the chat has it already.
    fn tools_notice<'a>(
        &'a self,
        settings: &'a ServiceSettings,
        events: &'a [LoggedEvent],
    ) -> BoxFuture<'a, Option<Arc<dyn InboundRouter>>>;
}

/// What a turn is built from: the service (its log, memory, compliance, runtime), the chat,
/// the settings and the person's message.
pub(crate) struct TurnInputs<'a> {
    pub service: &'a dyn TurnServices,
    pub chat: ChatId,
    pub settings: &'a ServiceSettings,
    pub message: &'a str,
    /// The message is new (not in the log yet); false for a retry.
    pub fresh: bool,
    pub events: &'a [LoggedEvent],
}

/// One turn's parts while they are put together: the system array's contributors, the
/// seams, the model's commands (the runtime under the mechanisms' overlays) and the tools
/// offered from them.
pub(crate) struct TurnParts {
    pub contributors: Vec<Arc<dyn PromptContributor>>,
    pub seams: Seams,
    pub commands: Commands,
    pub offered: Vec<&'static str>,
}

/// One row of the table. Every stage has a default that adds nothing.
pub(crate) trait Mechanism: Sync {
    /// The `Mechanisms` setting that turns this row on (its key as the settings file and
    /// the panel spell it); `None` for a core part. The tests hold it to [`Mechanism::on`].
    #[allow(dead_code)] // read by the tests: the table and the settings cannot drift
    fn setting(&self) -> Option<&'static str>;

    /// Whether this turn builds the row at all.
    fn on(&self, settings: &ServiceSettings) -> bool;

    fn role(&self, _cx: &TurnInputs<'_>, _role: &mut RoleBlock) {}

    fn assemble<'a>(
        &'a self,
        _cx: &'a TurnInputs<'a>,
        _turn: &'a mut TurnParts,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    fn sized<'a>(
        &'a self,
        _cx: &'a TurnInputs<'a>,
        _turn: &'a mut TurnParts,
        _request: &'a Settings,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    fn history(&self, _seams: &mut Seams, _commands: &Commands, _prompt: &Prompt) {}

    fn pipeline(&self, pipeline: Pipeline, _commands: &Commands) -> Pipeline {
        pipeline
    }
}

/// Every row, in the request's order (see the module docs).
pub(crate) const TABLE: &[&dyn Mechanism] = &[
    &focus_prompt::FocusPrompt,
    &core::DocsBlockPart,
    &core::LiveStatePart,
    &memory::MemoryMechanism,
    &intent_narrowing::IntentNarrowing,
    &topic_marker::TopicMarker,
    &topic_compaction::TopicCompaction,
    &handoff_seeding::HandoffSeeding,
    &core::SkillLoader,
    &archive_tools::ArchiveTools,
    &core::ToolsNotice,
    &skill_routing::SkillRouting,
    &context_probe::ContextProbe,
    &tool_result_compression::ToolResultCompression,
    &auto_verify::AutoVerify,
];

/// The rows this turn builds.
pub(crate) fn on(settings: &ServiceSettings) -> impl Iterator<Item = &'static dyn Mechanism> + '_ {
    TABLE.iter().copied().filter(move |m| m.on(settings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{Mechanisms, ProviderKind};

    fn keys(m: &Mechanisms) -> Vec<String> {
        let mut keys: Vec<String> = serde_json::to_value(m)
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    }

    #[test]
    fn every_setting_has_exactly_one_row_and_every_row_a_setting_or_none() {
        let mut rows: Vec<String> = TABLE
            .iter()
            .filter_map(|m| m.setting())
            .map(str::to_string)
            .collect();
        rows.sort();
        let before = rows.len();
        rows.dedup();
        assert_eq!(rows.len(), before, "a setting with two rows");
        assert_eq!(rows, keys(&Mechanisms::default()));
    }

    #[test]
    fn a_setting_turned_off_turns_off_its_row_and_no_other() {
        let all = ServiceSettings::new(ProviderKind::Anthropic, "http://x", "m");
        for key in keys(&Mechanisms::default()) {
            let mut value = serde_json::to_value(Mechanisms::default()).unwrap();
            value[&key] = serde_json::Value::Bool(false);
            let mut off = all.clone();
            off.mechanisms = serde_json::from_value(value).unwrap();
            for row in TABLE {
                let expected = row.on(&all) && row.setting() != Some(key.as_str());
                assert_eq!(row.on(&off), expected, "{key} off, row {:?}", row.setting());
            }
        }
    }
}
