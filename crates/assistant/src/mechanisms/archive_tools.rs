//! Spec 30 A2–A3: the model can search this project's chats and cite them, seen from the
//! project open now (the model's visibility).

use std::sync::Arc;

use super::{Mechanism, TurnInputs, TurnParts};
use crate::archive_tools::{self, ArchiveDoor};
use crate::pipeline::BoxFuture;
use crate::settings::ServiceSettings;

pub(crate) struct ArchiveTools;

impl Mechanism for ArchiveTools {
    fn setting(&self) -> Option<&'static str> {
        Some("archiveTools")
    }

    fn on(&self, settings: &ServiceSettings) -> bool {
        settings.mechanisms.archive_tools
    }

    fn assemble<'a>(
        &'a self,
        cx: &'a TurnInputs<'a>,
        turn: &'a mut TurnParts,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let project = cx.service.open_project().await;
            turn.commands = Arc::new(ArchiveDoor::new(
                turn.commands.clone(),
                cx.service.log_handle(),
                cx.chat,
                project,
            ));
            turn.offered
                .extend([archive_tools::SEARCH, archive_tools::CITE]);
        })
    }
}
