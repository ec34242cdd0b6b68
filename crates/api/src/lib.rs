//! The API server: the command registry over TCP, one JSON message per line.
//!
//! It speaks Serial Studio's wire format so its users' scripts keep working:
//!
//! ```text
//! → {"type":"command","id":1,"command":"project.get","params":{}}
//! ← {"type":"response","id":1,"success":true,"result":{…}}
//! ← {"type":"response","id":2,"success":false,"error":{"code":"invalidParams","message":"…"}}
//! → {"type":"batch","id":3,"commands":[{"id":"a","command":"…","params":{}}, …]}
//! ← {"type":"batch","id":3,"results":[{"type":"response","id":"a",…}, …]}
//! ```
//!
//! `api.getCommands` lists the registry; `api.subscribe {"frames":true,"events":true,
//! "rateHz":10}` turns on pushed `{"type":"frame",…}` and `{"type":"event",…}` messages.
//!
//! Safety: it binds 127.0.0.1 unless told otherwise, and any other address needs a token
//! (the first message is then `{"type":"auth","token":"…"}`). Each client is limited in
//! message size (1 MiB), JSON nesting (64), and rate; the number of clients is capped.
//! Bad input gets an error response and the connection stays usable.
//!
//! [`WsServer`] speaks the same messages over WebSocket (one JSON message per text frame),
//! for browsers; it refuses pages from other origins, so a website cannot drive the
//! devices on the user's machine. API callers run
//! with auto-approved edits (a script is its author's approval), and DeviceGated commands
//! only with the user's one-time consent ([`ApiOptions::allow_device_control`]).
//!
//! [`WebServer`] serves the built UI over HTTP with the same messages on `/ws` as the UI
//! door (a person at the controls), plus binary display frames.

mod server;
mod web;
mod websocket;

pub use server::{ApiError, ApiOptions, ApiServer, Limits};
pub use web::WebServer;
pub use websocket::WsServer;
