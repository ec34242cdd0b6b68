//! MCP on a loopback TCP port: the sibling endpoint of the API server, one MCP session per
//! connection, newline-delimited exactly as on stdio.
//!
//! MCP over a bare socket has no way to authenticate, so unlike the API server there is no
//! token to unlock other addresses: it listens on loopback or not at all. Its listener and
//! every line come through the door's [`Guard`]: a web page's HTTP request hidden in a
//! `fetch` to this port is hung up on before anything in it runs.

use std::net::SocketAddr;

use serde_json::json;
use sextant_commands::CommandDoor;
use sextant_guard::{DoorKind, Guard, GuardError, GuardOptions};
use tokio::io::AsyncWriteExt;
use tokio::task::JoinSet;

use crate::{serve_service, McpOptions, McpService, ServeError};

pub struct McpTcpServer {
    local: SocketAddr,
    task: tokio::task::JoinHandle<()>,
    guard: std::sync::Arc<Guard>,
}

impl McpTcpServer {
    /// Starts listening. Port 0 picks a free port ([`McpTcpServer::local_addr`] tells
    /// which). Dropping the server closes the listener and every session.
    pub async fn bind(
        addr: SocketAddr,
        runtime: impl CommandDoor + 'static,
        options: McpOptions,
    ) -> Result<McpTcpServer, ServeError> {
        let limits = options.limits;
        let door = GuardOptions {
            limits,
            ..GuardOptions::default()
        };
        let (guard, listener) = Guard::listen(DoorKind::McpTcp, addr, door).await?;
        let local = listener
            .local_addr()
            .map_err(|source| GuardError::Bind { addr, source })?;
        let door = guard.clone();
        let service = McpService::new(std::sync::Arc::new(runtime), options);
        let task = tokio::spawn(async move {
            // Owning the sessions here means aborting this task ends them all.
            let mut sessions = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((mut stream, peer)) = accepted else { continue };
                        let _ = stream.set_nodelay(true);
                        let Some(slot) = door.admit() else {
                            let busy = json!({"jsonrpc": "2.0", "id": null, "error":
                                {"code": -32000, "message": "too many clients; try again later"}});
                            let _ = stream.write_all(format!("{busy}\n").as_bytes()).await;
                            continue;
                        };
                        let (service, door) = (service.clone(), door.clone());
                        sessions.spawn(async move {
                            tracing::debug!(%peer, "MCP client connected");
                            let (read, write) = stream.into_split();
                            if let Err(e) = serve_service(service, door, read, write).await {
                                tracing::debug!(%peer, "MCP session ended: {e}");
                            }
                            drop(slot);
                        });
                    }
                    Some(_) = sessions.join_next(), if !sessions.is_empty() => {}
                }
            }
        });
        Ok(McpTcpServer { local, task, guard })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Connections closed because they sent an HTTP request instead of MCP lines.
    pub fn refused_http_requests(&self) -> u64 {
        self.guard.refused_http_requests()
    }
}

impl Drop for McpTcpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
