//! The MCP server: Sextant's command registry as Model Context Protocol tools, so external
//! agents can drive Sextant the way a person or a script would.
//!
//! ```text
//! → {"jsonrpc":"2.0","id":1,"method":"tools/call",
//!    "params":{"name":"project_group_add","arguments":{"title":"Battery"}}}
//! ← {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"id\":\"grp-1\"}"}],
//!    "structuredContent":{"id":"grp-1"},"isError":false}}
//! ```
//!
//! Every registry command is a tool whose name is the command name with dots replaced by
//! underscores (`project.dataset.add` → `project_dataset_add`; the dotted name is accepted
//! too), whose input schema is the command's parameter schema, and whose description ends
//! with its tier. The list is built from the running registry, not declared here, so a new
//! command is a new tool without touching this crate. Two resources are served:
//! `sextant://project` (the project JSON) and `sextant://frame/latest` (the latest value of
//! every dataset).
//!
//! Safety mirrors the API server: MCP callers have edits auto-approved (every edit is
//! checkpointed and undoable), DeviceGated commands run only with the user's one-time
//! consent ([`McpOptions::allow_device_control`]), and AlwaysConfirm and Blocked commands
//! never run. A refused or failed command is a tool result with `isError: true` carrying
//! the command error's code, message and parameter path. Every message is held to the
//! same limits as the API server (size, JSON depth, rate), and bad input gets a JSON-RPC
//! error while the session stays usable.
//!
//! Transports: [`serve_stdio`] for an agent that launches `sextant mcp`, [`serve`] for any
//! byte stream, and [`McpTcpServer`] for newline-delimited MCP on a loopback TCP port.

mod server;
mod tcp;
mod tools;
mod transport;

pub use server::{McpService, FRAME_URI, PROJECT_URI};
pub use tcp::McpTcpServer;
pub use tools::{command_name_of, tool_name};

use std::time::Duration;

use rmcp::service::{ServerInitializeError, ServiceExt};
use sextant_commands::CommandDoor;
use tokio::io::{AsyncRead, AsyncWrite};

/// Per-session limits: the same as every door's.
pub use sextant_guard::Limits;
use sextant_guard::{DoorKind, Guard, GuardError};

#[derive(Debug, Clone, Default)]
pub struct McpOptions {
    /// The user's one-time consent for MCP clients to run DeviceGated commands.
    pub allow_device_control: bool,
    /// The user's one-time consent for MCP clients to add, change and start process
    /// sources (programs) without a person being asked each time.
    pub allow_process_sources: bool,
    pub limits: Limits,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The door's guard refused to listen there (MCP over TCP listens on loopback only).
    #[error(transparent)]
    Listen(#[from] GuardError),
    #[error("the MCP session did not start: {0}")]
    Initialize(#[source] Box<ServerInitializeError>),
    #[error("the MCP session ended abnormally: {0}")]
    Session(#[source] tokio::task::JoinError),
}

/// Serves one MCP session over a byte stream until the client hangs up.
pub async fn serve<R, W>(
    runtime: impl CommandDoor + 'static,
    options: McpOptions,
    read: R,
    write: W,
) -> Result<(), ServeError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let guard = Guard::stdio(DoorKind::McpStdio, options.limits);
    serve_service(
        McpService::new(std::sync::Arc::new(runtime), options),
        guard,
        read,
        write,
    )
    .await
}

/// Serves one MCP session on standard input and output. Nothing else may write to stdout
/// while it runs: logs belong on stderr.
pub async fn serve_stdio(
    runtime: impl CommandDoor + 'static,
    options: McpOptions,
) -> Result<(), ServeError> {
    serve(runtime, options, tokio::io::stdin(), tokio::io::stdout()).await
}

pub(crate) async fn serve_service<R, W>(
    service: McpService,
    guard: std::sync::Arc<Guard>,
    read: R,
    write: W,
) -> Result<(), ServeError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (transport, writer) = transport::guarded(read, write, guard);
    let result = match service.serve(transport).await {
        Ok(running) => running
            .waiting()
            .await
            .map(|_| ())
            .map_err(ServeError::Session),
        // A client that leaves before initializing is not an error of ours.
        Err(ServerInitializeError::ConnectionClosed(_)) => Ok(()),
        Err(e) => Err(ServeError::Initialize(Box::new(e))),
    };
    // Replies already queued still reach the client; a writer stuck on a peer that stopped
    // reading must not keep the session alive forever.
    let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
    result
}
