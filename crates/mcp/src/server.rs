//! The MCP handler: tools and resources on top of a [`CommandDoor`], with the door's
//! tier policy.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Value};
use sextant_commands::{Caller, CommandDoor};
use sextant_commands::{CommandError, ErrorCode, Policy, Tier};

use crate::tools::ToolTable;
use crate::McpOptions;

/// The project as JSON (`project.get`).
pub const PROJECT_URI: &str = "sextant://project";
/// The latest value of every dataset (`dashboard.latestFrame`).
pub const FRAME_URI: &str = "sextant://frame/latest";

const INSTRUCTIONS: &str = "Sextant turns bytes from hardware into values on a dashboard. \
Each tool is one of its commands (`project.dataset.add` is `project_dataset_add`); \
`meta_describeCommand` explains one in full, with examples. Edits run at once and are \
undoable (`project_undo`); commands that act on a device need the user's consent, and \
destructive ones are refused. Read `sextant://project` for the project and \
`sextant://frame/latest` for the latest values.";

/// One MCP server over the workspace; cheap to clone, one clone per session.
#[derive(Clone)]
pub struct McpService {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: Arc<dyn CommandDoor>,
    tools: ToolTable,
    policy: Policy,
}

impl McpService {
    pub fn new(runtime: Arc<dyn CommandDoor>, options: McpOptions) -> McpService {
        let tools = ToolTable::new(runtime.specs(), options.allow_device_control);
        McpService {
            inner: Arc::new(Inner {
                runtime,
                tools,
                // The API door's rules: a connected agent is its user's approval of edits,
                // nobody is there to ask, and device control is the user's explicit consent.
                policy: Policy {
                    auto_approve_edits: true,
                    allow_device_control: options.allow_device_control,
                    non_interactive: true,
                    allow_process_sources: options.allow_process_sources,
                    paths_from_person: false,
                },
            }),
        }
    }

    /// The tools this server lists.
    pub fn tools(&self) -> &[Tool] {
        self.inner.tools.tools()
    }

    /// Runs a tool; refusals and failures are error results the caller can read.
    pub async fn call(
        &self,
        name: &str,
        arguments: Option<rmcp::model::JsonObject>,
    ) -> CallToolResult {
        let Some(entry) = self.inner.tools.resolve(name) else {
            return error_result(&CommandError::new(
                ErrorCode::UnknownCommand,
                format!("unknown tool `{name}`; tools/list lists them all"),
            ));
        };
        let params = entry.params(arguments);
        let result = self
            .inner
            .runtime
            .call(Caller::Mcp, &entry.command, params, self.inner.policy)
            .await;
        match result {
            Ok(value) => {
                let text = value.to_string();
                let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
                // Structured content must be an object for older clients.
                if value.is_object() {
                    r.structured_content = Some(value);
                }
                r
            }
            Err(mut e) => {
                if e.code == ErrorCode::NotAllowed && entry.tier == Tier::DeviceGated {
                    e.message.push_str(
                        "; over MCP, the user grants it when starting the server \
                         (`sextant mcp --allow-device-control`)",
                    );
                }
                error_result(&e)
            }
        }
    }

    async fn read(&self, uri: &str) -> Result<ReadResourceResult, ErrorData> {
        let command = match uri {
            PROJECT_URI => "project.get",
            FRAME_URI => "dashboard.latestFrame",
            _ => {
                return Err(ErrorData::resource_not_found(
                    format!("no resource `{uri}`; resources/list lists them"),
                    Some(json!({ "uri": uri })),
                ))
            }
        };
        // Both are Safe reads, which every policy runs.
        let value = self
            .inner
            .runtime
            .call(Caller::Mcp, command, Value::Null, self.inner.policy)
            .await
            .map_err(|e| ErrorData::internal_error(e.message, Some(json!({ "code": e.code }))))?;
        let text = serde_json::to_string_pretty(&value)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(ReadResourceResult::new(vec![ResourceContents::text(
            text, uri,
        )
        .with_mime_type("application/json")]))
    }
}

/// A command error as a tool result: the message to read, and code/message/path to match.
fn error_result(e: &CommandError) -> CallToolResult {
    let text = match &e.path {
        Some(path) if !path.is_empty() => format!("{}: {} (at `{path}`)", code_str(e), e.message),
        _ => format!("{}: {}", code_str(e), e.message),
    };
    let mut r = CallToolResult::error(vec![ContentBlock::text(text)]);
    r.structured_content = serde_json::to_value(e).ok();
    r
}

fn code_str(e: &CommandError) -> String {
    serde_json::to_value(e.code)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{:?}", e.code))
}

fn resources() -> Vec<Resource> {
    vec![
        Resource::new(PROJECT_URI, "project")
            .with_title("Project")
            .with_description(
                "The whole project as JSON: sources, framing, parsers, groups, datasets, \
                 actions, workspaces.",
            )
            .with_mime_type("application/json"),
        Resource::new(FRAME_URI, "latest-frame")
            .with_title("Latest frame")
            .with_description(
                "The latest value of every dataset by dataset id, and the session time it \
                 arrived at (empty while nothing is connected).",
            )
            .with_mime_type("application/json"),
    ]
}

impl ServerHandler for McpService {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(
            Implementation::new("sextant", env!("CARGO_PKG_VERSION")).with_title("Sextant"),
        )
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools().to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.inner.tools.tool(name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // An unknown tool is a protocol error (the spec's -32602), not a tool result.
        if self.inner.tools.resolve(&request.name).is_none() {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{}`; tools/list lists them all", request.name),
                Some(json!({ "name": request.name })),
            ));
        }
        Ok(self.call(&request.name, request.arguments).await.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(resources()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.read(&request.uri).await.map(Into::into)
    }
}
