//! The assistant's mechanisms, each one module here holding its behaviour and its row in
//! one table, in the manner of ripgrep's `FLAGS`: a row is a unit struct that says which
//! setting turns the mechanism on and what it adds to a turn at each stage; `ChatService`
//! builds a turn by walking [`TABLE`] stage by stage and knows no mechanism by name. The
//! engine ([`crate::engine`]) knows none either: a mechanism reaches a turn only through
//! the seams its row fills. [`retrieval`] is not a mechanism but the embedder the memory
//! and the skills share; the core rows are in `core`.
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
//! row or a row no setting, and write the docs' list of mechanisms from the table.

pub mod archive_tools;
pub mod compaction;
pub mod compress;
mod core;
pub mod focus;
pub mod handoff;
pub mod intent;
pub mod memory;
pub mod probe;
pub mod retrieval;
pub mod skills;
pub mod verify;

use std::sync::Arc;

use std::sync::Mutex;

use crate::engine::chatlog::{ChatId, ChatLog, LoggedEvent};
use crate::engine::conversation::{Prompt, Settings};
use crate::engine::pipeline::{BoxFuture, Pipeline};
use crate::engine::seams::{InboundRouter, PromptContributor, RoleBlock, Seams};
use crate::mechanisms::memory::Memory;
use crate::mechanisms::probe::Compliance;
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
    &focus::FocusPrompt,
    &core::DocsBlockPart,
    &core::LiveStatePart,
    &memory::MemoryMechanism,
    &intent::IntentNarrowing,
    &focus::TopicMarker,
    &compaction::TopicCompactionRow,
    &handoff::HandoffSeeding,
    &core::SkillLoader,
    &archive_tools::ArchiveToolsRow,
    &core::ToolsNotice,
    &skills::SkillRouting,
    &probe::ContextProbe,
    &compress::ToolResultCompression,
    &verify::AutoVerifyRow,
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

    /// The docs' list of mechanisms, from the table (its order) and the settings type (each
    /// setting's default and doc comment).
    fn docs_list() -> String {
        let schema = schemars::schema_for!(Mechanisms).to_value();
        let defaults = serde_json::to_value(Mechanisms::default()).unwrap();
        let mut text =
            String::from("| setting | on by default | what it adds to a turn |\n|---|---|---|\n");
        for key in TABLE.iter().filter_map(|m| m.setting()) {
            let doc = schema["properties"][key]["description"]
                .as_str()
                .unwrap_or_else(|| panic!("`{key}` has no doc comment in the settings type"));
            let doc = doc.split_whitespace().collect::<Vec<_>>().join(" ");
            let on = if defaults[key] == true { "yes" } else { "no" };
            text.push_str(&format!("| `{key}` | {on} | {doc} |\n"));
        }
        text
    }

    #[test]
    fn the_docs_list_of_mechanisms_is_written_from_the_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/ui-protocol.md");
        let doc = std::fs::read_to_string(path).expect("docs/ui-protocol.md");
        let (begin, end) = ("<!-- mechanisms:begin -->\n", "<!-- mechanisms:end -->");
        let start = doc.find(begin).expect("the begin marker") + begin.len();
        let stop = doc.find(end).expect("the end marker");
        let written = format!("{}{}{}", &doc[..start], docs_list(), &doc[stop..]);
        if std::env::var_os("SEXTANT_BLESS").is_some() {
            std::fs::write(path, &written).unwrap();
            return;
        }
        assert!(
            doc == written,
            "docs/ui-protocol.md's list of mechanisms is stale; rewrite it with \
             `SEXTANT_BLESS=1 cargo test -p sextant-assistant --lib mechanisms`"
        );
    }
}
