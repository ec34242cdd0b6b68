//! Enforced auto-verify (spec 20 §5): after an edit succeeds, the app – not the model –
//! runs a read-only check of it and folds the outcome into the very result the model
//! receives, `verification: {ok, method, detail}`. A model that never checks its own work
//! still learns in the same turn that its parser does not compile.
//!
//! [`VERIFIERS`] is the static table: each apply-type command and how it is checked. Every
//! check is a Safe command; [`check_table`] enforces that against the registry when a turn
//! is built, so a check can never need a person's yes (a test runs it on the real
//! registry). [`AutoVerify`] is an execute wrapper: it runs inside the checkpoint taken
//! before the edit, after the edit itself, and only when the edit succeeded.
//!
//! Off (`auto_verify`) ⇒ the wrapper is not built: nothing runs, nothing is added.

use serde_json::{json, Map, Value};
use sextant_commands::{CommandSpec, Policy, Tier};

use crate::engine::pipeline::Pipeline;
use crate::engine::pipeline::{
    BoxFuture, CallContext, CancelToken, ExecNext, ExecReport, ExecWrapper, ToolResultValue,
};
use crate::engine::tools::command_name;
use crate::mechanisms::Mechanism;
use crate::settings::ServiceSettings;
use crate::Commands;

/// How an edit is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Compile the same code (`project.frameParser.dryCompile`).
    DryCompile,
    /// Run the same transform on the input `0.0` (`project.transform.dryRun`).
    TransformDryRun,
    /// Read the object back with `read` and compare each changed field; `list` names the
    /// array of the answer the object is in (`None`: the answer is the object).
    ReadBack {
        read: &'static str,
        list: Option<&'static str>,
    },
    /// The project still validates (`project.validate`).
    Validate,
    /// The source's newest raw bytes (`io.recentBytes`) through the whole changed pipeline
    /// (`project.dryRun.endToEnd`); the project's validation while nothing has arrived.
    RecentBytesDryRun,
}

impl Check {
    /// The Safe command the check runs.
    pub fn command(self) -> &'static str {
        match self {
            Check::DryCompile => "project.frameParser.dryCompile",
            Check::TransformDryRun => "project.transform.dryRun",
            Check::ReadBack { read, .. } => read,
            Check::Validate => "project.validate",
            Check::RecentBytesDryRun => "project.dryRun.endToEnd",
        }
    }

    /// Every command the check may run.
    pub fn commands(self) -> Vec<&'static str> {
        match self {
            Check::RecentBytesDryRun => vec![RECENT_BYTES, self.command(), "project.validate"],
            other => vec![other.command()],
        }
    }
}

/// The source's newest raw bytes.
const RECENT_BYTES: &str = "io.recentBytes";

/// Every apply-type command that is checked, and how.
pub const VERIFIERS: &[(&str, Check)] = &[
    ("project.frameParser.setCode", Check::DryCompile),
    // A built-in parser has no code to compile: the bytes the source sent last go through
    // it (framing, decoder, parser, transforms).
    ("project.frameParser.setConfig", Check::RecentBytesDryRun),
    ("project.transform.set", Check::TransformDryRun),
    (
        "project.dataset.update",
        Check::ReadBack {
            read: "project.dataset.get",
            list: None,
        },
    ),
    (
        "project.group.update",
        Check::ReadBack {
            read: "project.get",
            list: Some("groups"),
        },
    ),
    (
        "project.workspace.update",
        Check::ReadBack {
            read: "project.workspace.list",
            list: Some("workspaces"),
        },
    ),
    ("project.source.add", Check::Validate),
    ("project.source.update", Check::Validate),
    ("project.dataset.add", Check::Validate),
    ("project.group.add", Check::Validate),
];

/// The check of `command`, if it has one.
pub fn check_of(command: &str) -> Option<Check> {
    VERIFIERS
        .iter()
        .find(|(c, _)| *c == command)
        .map(|(_, check)| *check)
}

/// Refuses a table whose checks are not Safe commands of this registry, or whose applies
/// are not in it (what the table may run is exactly read-only, never device-gated).
pub fn check_table(specs: &[CommandSpec]) -> Result<(), String> {
    let tier = |name: &str| specs.iter().find(|s| s.name == name).map(|s| s.tier);
    for (apply, check) in VERIFIERS {
        if tier(apply).is_none() {
            return Err(format!(
                "the verifier table names `{apply}`, which the registry lacks"
            ));
        }
        for command in check.commands() {
            match tier(command) {
                Some(Tier::Safe) => {}
                Some(other) => {
                    return Err(format!(
                        "`{command}` checks `{apply}` but is {}, not Safe: a check must never need a person",
                        other.as_str()
                    ))
                }
                None => {
                    return Err(format!(
                        "`{command}` checks `{apply}` but the registry lacks it"
                    ))
                }
            }
        }
    }
    Ok(())
}

/// The outcome folded into a result.
#[derive(Debug, Clone, PartialEq)]
pub struct Verification {
    pub ok: bool,
    pub method: &'static str,
    pub detail: String,
}

impl Verification {
    fn to_json(&self) -> Value {
        json!({ "ok": self.ok, "method": self.method, "detail": self.detail })
    }
}

/// The execute wrapper that checks each successful edit.
pub struct AutoVerify {
    pub commands: Commands,
}

impl ExecWrapper for AutoVerify {
    fn wrap<'a>(
        &'a self,
        ctx: &'a CallContext,
        _report: &'a ExecReport,
        cancel: CancelToken,
        next: ExecNext<'a>,
    ) -> BoxFuture<'a, ToolResultValue> {
        Box::pin(async move {
            let value = next.run(cancel).await?;
            let command = command_name(ctx.name());
            let Some(check) = check_of(&command) else {
                return Ok(value);
            };
            let verification = self.verify(ctx, check, &value).await;
            tracing::info!(target: "assistant", command = %command, ok = verification.ok, method = verification.method, "auto-verify");
            Ok(fold(value, &verification))
        })
    }
}

/// `value` with `verification` in it (an object gets the field; anything else is wrapped).
pub fn fold(value: Value, verification: &Verification) -> Value {
    match value {
        Value::Object(mut map) => {
            map.insert("verification".into(), verification.to_json());
            Value::Object(map)
        }
        other => json!({ "result": other, "verification": verification.to_json() }),
    }
}

impl AutoVerify {
    async fn run(&self, ctx: &CallContext, command: &str, params: Value) -> Result<Value, String> {
        // Safe, so the policy never asks; the table is checked to hold only Safe commands.
        self.commands
            .call(ctx.caller().caller, command, params, Policy::default())
            .await
            .map_err(|e| e.message)
    }

    /// Runs `check` of the edit the call made: one method per kind of check.
    async fn verify(&self, ctx: &CallContext, check: Check, applied: &Value) -> Verification {
        match check {
            Check::DryCompile => self.verify_dry_compile(ctx).await,
            Check::TransformDryRun => self.verify_transform(ctx).await,
            Check::ReadBack { read, list } => self.verify_read_back(ctx, read, list).await,
            Check::RecentBytesDryRun => self.verify_recent_bytes(ctx, applied).await,
            Check::Validate => self.verify_validate(ctx).await,
        }
    }

    /// Compiles the code the call set.
    async fn verify_dry_compile(&self, ctx: &CallContext) -> Verification {
        let args = ctx.args();
        let method = Check::DryCompile.command();
        let params = json!({
            "source": args.get("source").cloned().unwrap_or(Value::Null),
            "code": args.get("code").cloned().unwrap_or(Value::Null),
            "language": args.get("language").cloned().unwrap_or(Value::Null),
        });
        match self.run(ctx, method, params).await {
            Ok(r) if r["ok"] == Value::Bool(true) => passed(method, "the parser compiles".into()),
            Ok(r) => failed(
                method,
                match (r["error"].as_str(), r["line"].as_u64()) {
                    (Some(e), Some(line)) => format!("does not compile: line {line}: {e}"),
                    (Some(e), None) => format!("does not compile: {e}"),
                    _ => format!("does not compile: {r}"),
                },
            ),
            Err(e) => failed(method, format!("the check could not run: {e}")),
        }
    }

    /// Runs the transform the call set on the input `0.0` (a removed one passes).
    async fn verify_transform(&self, ctx: &CallContext) -> Verification {
        let args = ctx.args();
        let method = Check::TransformDryRun.command();
        let Some(transform) = args.get("transform").filter(|t| !t.is_null()) else {
            return passed(method, "the transform was removed".into());
        };
        let params = json!({
            "dataset": args.get("dataset").cloned().unwrap_or(Value::Null),
            "transform": transform,
            "values": [0.0],
        });
        match self.run(ctx, method, params).await {
            Ok(r) => match r
                .get(0)
                .and_then(|x| x.get("error"))
                .and_then(Value::as_str)
            {
                Some(e) => failed(method, format!("on the input 0.0: {e}")),
                None => passed(method, format!("0.0 → {}", r[0]["value"])),
            },
            Err(e) => failed(method, format!("the check could not run: {e}")),
        }
    }

    /// Reads the edited object back with `read` (from its `list`) and compares the fields
    /// the call changed.
    async fn verify_read_back(
        &self,
        ctx: &CallContext,
        read: &'static str,
        list: Option<&'static str>,
    ) -> Verification {
        let args = ctx.args();
        let method = Check::ReadBack { read, list }.command();
        let Some(id) = args.get("id").and_then(Value::as_str) else {
            return failed(method, "the edit names no id to read back".into());
        };
        let object = match list {
            None => self.run(ctx, read, json!({ "id": id })).await.map(Some),
            Some(list) => self
                .run(ctx, read, json!({}))
                .await
                .map(|v| find(&v, list, id)),
        };
        let object = match object {
            Ok(object) => object,
            Err(e) => return failed(method, format!("could not read `{id}` back: {e}")),
        };
        let Some(object) = object else {
            return failed(method, format!("`{id}` is not there after the edit"));
        };
        let changes = args.get("changes").and_then(Value::as_object);
        compare(method, &object, changes)
    }

    /// Sends the source's newest raw bytes through the whole changed pipeline; validates
    /// the project instead while nothing has arrived.
    async fn verify_recent_bytes(&self, ctx: &CallContext, applied: &Value) -> Verification {
        let method = Check::RecentBytesDryRun.command();
        let source = ctx.args().get("source").cloned().unwrap_or(Value::Null);
        let recent = self
            .run(ctx, RECENT_BYTES, json!({ "source": source }))
            .await
            .unwrap_or(Value::Null);
        if recent["bytes"].as_u64().unwrap_or(0) == 0 {
            // Nothing arrived yet (not connected): all that can be checked is that
            // the project still fits together.
            let mut v = Box::pin(self.verify(ctx, Check::Validate, applied)).await;
            v.detail = format!("no data from the source yet; {}", v.detail);
            return v;
        }
        let params = json!({
            "source": source,
            "data": recent["data"],
            "hex": recent["hex"],
        });
        match self.run(ctx, method, params).await {
            Ok(r) => {
                let frames = r["frames"].as_u64().unwrap_or(0);
                let rows = r["rows"].as_array().map_or(0, Vec::len);
                let errors = r["parseErrors"].as_u64().unwrap_or(0);
                let summary = format!(
                    "the last {} bytes from the source: {frames} frames, {rows} rows, {errors} parse errors",
                    recent["bytes"]
                );
                // The oldest frame of the tail may be cut in half: one error is
                // forgiven when others parsed.
                if rows > 0 && errors <= 1 {
                    passed(method, summary)
                } else {
                    let last = r["lastError"].as_str().unwrap_or("no row came out");
                    failed(method, format!("{summary}; {last}"))
                }
            }
            Err(e) => failed(method, format!("the check could not run: {e}")),
        }
    }

    /// Validates the whole project, naming its first five problems.
    async fn verify_validate(&self, ctx: &CallContext) -> Verification {
        let method = Check::Validate.command();
        match self.run(ctx, method, json!({})).await {
            Ok(r) if r["valid"] == Value::Bool(true) => {
                passed(method, "the project validates".into())
            }
            Ok(r) => {
                let issues: Vec<String> = r["issues"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .take(5)
                    .map(|i| {
                        format!(
                            "{}: {}",
                            i["path"].as_str().unwrap_or(""),
                            i["message"].as_str().unwrap_or("")
                        )
                    })
                    .collect();
                failed(
                    method,
                    format!("the project has problems: {}", issues.join("; ")),
                )
            }
            Err(e) => failed(method, format!("the check could not run: {e}")),
        }
    }
}

/// A check that passed.
fn passed(method: &'static str, detail: String) -> Verification {
    Verification {
        ok: true,
        method,
        detail,
    }
}

/// A check that failed.
fn failed(method: &'static str, detail: String) -> Verification {
    Verification {
        ok: false,
        method,
        detail,
    }
}

/// The object with `id` in `container[list]` (or in `container` when it is the list).
fn find(container: &Value, list: &str, id: &str) -> Option<Value> {
    let items = container
        .get(list)
        .or(Some(container))
        .and_then(Value::as_array)?;
    items
        .iter()
        .find(|o| o.get("id").and_then(Value::as_str) == Some(id))
        .cloned()
}

/// Each field the edit asked for, as read back (a merge patch's `null` means removed).
fn compare(
    method: &'static str,
    object: &Value,
    changes: Option<&Map<String, Value>>,
) -> Verification {
    let mut differ = Vec::new();
    for (key, want) in changes.into_iter().flatten() {
        let have = object.get(key).unwrap_or(&Value::Null);
        let same = match (want, have) {
            (Value::Null, have) => have.is_null(),
            // A nested patch: every field it sets is there.
            (Value::Object(w), Value::Object(h)) => w.iter().all(|(k, v)| {
                h.get(k).unwrap_or(&Value::Null) == v || v.is_null() && !h.contains_key(k)
            }),
            (want, have) => want == have,
        };
        if !same {
            differ.push(format!("`{key}` reads {have} (asked {want})"));
        }
    }
    if differ.is_empty() {
        Verification {
            ok: true,
            method,
            detail: "read back as asked".into(),
        }
    } else {
        Verification {
            ok: false,
            method,
            detail: differ.join("; "),
        }
    }
}

/// The row in the mechanism table. Spec 20 §5: each successful edit is checked by a Safe
/// command inside the checkpoint (after the edit, before its result is kept), in the same
/// result.
pub(crate) struct AutoVerifyRow;

impl Mechanism for AutoVerifyRow {
    fn setting(&self) -> Option<&'static str> {
        Some("autoVerify")
    }

    fn on(&self, settings: &ServiceSettings) -> bool {
        settings.mechanisms.auto_verify
    }

    fn pipeline(&self, pipeline: Pipeline, commands: &Commands) -> Pipeline {
        match check_table(commands.specs()) {
            Ok(()) => pipeline.wrap(AutoVerify {
                commands: commands.clone(),
            }),
            Err(e) => {
                tracing::error!(target: "assistant", "auto-verify is off: {e}");
                pipeline
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_back_compares_every_field_the_edit_asked_for() {
        let object = json!({"id": "ds-1", "title": "Temp", "units": "°C", "min": 0,
                            "xAxis": {"mode": "time"}, "transform": null});
        let asked = |v: Value| v.as_object().cloned().unwrap();
        let ok = compare(
            "m",
            &object,
            Some(&asked(json!({"title": "Temp", "min": 0}))),
        );
        assert!(ok.ok, "{ok:?}");
        // A merge patch's null means "removed": absent or null reads as removed.
        assert!(
            compare(
                "m",
                &object,
                Some(&asked(json!({"transform": null, "max": null})))
            )
            .ok
        );
        // A nested patch: the fields it sets are there.
        assert!(
            compare(
                "m",
                &object,
                Some(&asked(json!({"xAxis": {"mode": "time"}})))
            )
            .ok
        );
        let bad = compare(
            "m",
            &object,
            Some(&asked(json!({"units": "K", "xAxis": {"mode": "samples"}}))),
        );
        assert!(!bad.ok);
        assert!(
            bad.detail.contains("`units` reads \"°C\" (asked \"K\")"),
            "{}",
            bad.detail
        );
        assert!(bad.detail.contains("`xAxis`"), "{}", bad.detail);
    }

    #[test]
    fn the_edited_object_is_found_in_a_list_or_under_its_key() {
        let project = json!({"groups": [{"id": "grp-1"}, {"id": "grp-2", "title": "B"}]});
        assert_eq!(find(&project, "groups", "grp-2").unwrap()["title"], "B");
        assert!(find(&project, "groups", "grp-9").is_none());
        let list = json!([{"id": "ws-1", "title": "Main"}]);
        assert_eq!(find(&list, "workspaces", "ws-1").unwrap()["title"], "Main");
    }

    #[test]
    fn the_outcome_is_folded_into_any_result() {
        let v = Verification {
            ok: false,
            method: "project.validate",
            detail: "x".into(),
        };
        assert_eq!(fold(json!({"ok": true}), &v)["verification"]["ok"], false);
        let wrapped = fold(json!("done"), &v);
        assert_eq!(wrapped["result"], "done");
        assert_eq!(wrapped["verification"]["method"], "project.validate");
    }

    #[test]
    fn every_apply_command_has_one_check() {
        let mut seen = std::collections::BTreeSet::new();
        for (apply, _) in VERIFIERS {
            assert!(seen.insert(*apply), "`{apply}` is in the table twice");
            assert!(check_of(apply).is_some());
        }
        assert!(check_of("project.get").is_none());
    }
}
