//! Tests only: the assistant (`sextant-assistant`) driven through the real workspace
//! runtime (`sextant-runtime`) – the conversation loop, the tool pipeline, the live-state
//! context, the chat service and its door.
//!
//! They live in a crate of their own because the assistant depends on the `CommandDoor`
//! trait only; as its own dev-dependency the runtime would still put every device driver
//! into the assistant's dependency tree.
