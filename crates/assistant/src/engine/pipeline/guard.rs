//! Station 2, guards: the order-insensitive final say, asked only after pre-execute let
//! the call through.
//!
//! A guard can only refuse or abstain. Its return type is `Option<DenyReason>`: there is
//! no value meaning "allow", so no guard – and no ordering of guards – can turn a denial
//! into permission. Every guard is asked and every reason is kept, so the verdict does not
//! depend on their order.
//!
//! A guard that denies or abstains compiles:
//!
//! ```
//! use sextant_assistant::pipeline::{Authorization, CallContext, DenyReason, Guard};
//!
//! struct NoRoot;
//! impl Guard for NoRoot {
//!     fn name(&self) -> &str { "no-root" }
//!     fn check(&self, ctx: &CallContext, _auth: Authorization) -> Option<DenyReason> {
//!         (ctx.args()["path"] == "/").then(|| DenyReason::new("not the root folder"))
//!     }
//! }
//! ```
//!
//! A guard that tries to allow does not compile:
//!
//! ```compile_fail
//! use sextant_assistant::pipeline::{Authorization, CallContext, DenyReason, Guard, PreDecision};
//!
//! struct Permissive;
//! impl Guard for Permissive {
//!     fn name(&self) -> &str { "permissive" }
//!     fn check(&self, _ctx: &CallContext, _auth: Authorization) -> Option<DenyReason> {
//!         Some(PreDecision::Allow) // a guard has no way to say "allow"
//!     }
//! }
//! ```

use crate::engine::pipeline::context::{Authorization, CallContext, DenyReason};

/// A guard: deny with a reason, or abstain with `None`.
pub trait Guard: Send + Sync {
    fn name(&self) -> &str;

    /// `auth` says how pre-execute let the call through (a rule, or a person).
    fn check(&self, ctx: &CallContext, auth: Authorization) -> Option<DenyReason>;
}
