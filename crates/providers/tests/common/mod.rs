//! Helpers shared by the client tests: fast retry settings, a request with tools, and
//! collecting a stream into its events and its error.
#![allow(dead_code)] // each test binary uses a different subset

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;
use sextant_providers::{
    Event, EventStream, HttpConfig, ProviderError, Request, RetryPolicy, StopReason, SystemBlock,
    ToolCall, ToolDefinition, Usage,
};

/// Short backoffs so retry tests are quick; `retry-after` is still honoured as sent.
pub fn fast_http() -> HttpConfig {
    HttpConfig {
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(10),
        retry: RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(100),
            max_retry_after: Duration::from_secs(5),
        },
        max_reply_bytes: 1024 * 1024,
    }
}

/// A request with a cached system block, two tools and a user message, built afresh each
/// call (fresh `json!` values), as the assistant would rebuild it every turn.
pub fn tool_request() -> Request {
    let mut request = Request::new("test-model", 1024);
    request.system = vec![
        SystemBlock::cached("You are Sextant's assistant."),
        SystemBlock::new("Project: demo.ssproj"),
    ];
    request.tools = vec![
        ToolDefinition {
            name: "project_dataset_get".into(),
            description: "Read one dataset by id.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"id": {"type": "string", "description": "Dataset id, e.g. ds-7"}},
                "required": ["id"],
                "additionalProperties": false
            }),
        },
        ToolDefinition {
            name: "io_status".into(),
            description: "Connection status of every source.".into(),
            parameters: json!({"type": "object", "properties": {}}),
        },
    ];
    request.cache_tools = true;
    request.messages = vec![sextant_providers::Message::user(
        "What is ds-7, and is the source up?",
    )];
    request
}

/// Everything a stream yields: its events and, if it ended in one, its error.
pub struct Reply {
    pub events: Vec<Event>,
    pub error: Option<ProviderError>,
}

impl Reply {
    pub fn text(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    pub fn tool_calls(&self) -> Vec<ToolCall> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::ToolCallEnd { call, .. } => Some(call.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn last_usage(&self) -> Option<Usage> {
        self.events.iter().rev().find_map(|e| match e {
            Event::Usage(u) => Some(*u),
            _ => None,
        })
    }

    pub fn stop(&self) -> Option<StopReason> {
        match self.events.last() {
            Some(Event::Stop(reason)) => Some(reason.clone()),
            _ => None,
        }
    }

    /// The reply must have ended cleanly.
    pub fn ok(self) -> Self {
        if let Some(error) = &self.error {
            panic!("stream failed: {error}\nevents: {:#?}", self.events);
        }
        self
    }
}

pub async fn collect(mut stream: EventStream) -> Reply {
    let mut events = Vec::new();
    let mut error = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => {
                assert!(error.is_none(), "an event after the error: {event:?}");
                events.push(event);
            }
            Err(e) => {
                assert!(error.is_none(), "two errors: {e}");
                error = Some(e);
            }
        }
    }
    if error.is_none() {
        assert!(
            matches!(events.last(), Some(Event::Stop(_))),
            "a stream without an error must end with Stop: {events:#?}"
        );
        let stops = events
            .iter()
            .filter(|e| matches!(e, Event::Stop(_)))
            .count();
        assert_eq!(stops, 1, "exactly one Stop");
    }
    Reply { events, error }
}
