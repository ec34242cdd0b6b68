//! The registry on a toy context: validation before handlers, schemas from types, errors.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sextant_commands::{markdown_reference, CommandError, ErrorCode, Registry, Tier};

#[derive(Default)]
struct Counter {
    value: i64,
    calls: u32,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct AddParams {
    /// How much to add.
    amount: i64,
    #[serde(default)]
    note: Option<Note>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Note {
    tags: Vec<String>,
}

#[derive(Serialize, JsonSchema)]
struct Total {
    total: i64,
}

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

fn registry() -> Registry<Counter> {
    let mut r = Registry::new();
    r.register(
        "counter.add",
        Tier::Confirm,
        "Adds to the counter.",
        |c: &mut Counter, p: AddParams| {
            c.calls += 1;
            if p.amount == 13 {
                return Err(CommandError::failed("13 is unlucky"));
            }
            // Each tag counts one extra, so the nested parameter is really used.
            c.value += p.amount + p.note.map_or(0, |n| n.tags.len() as i64);
            Ok(Total { total: c.value })
        },
    )
    .dry_run("counter.preview")
    .example("add five", json!({"amount": 5}));
    r.register(
        "counter.preview",
        Tier::Safe,
        "What add would give.",
        |c: &mut Counter, p: AddParams| {
            Ok(Total {
                total: c.value + p.amount,
            })
        },
    );
    r.register(
        "counter.get",
        Tier::Safe,
        "The current total.",
        |c: &mut Counter, _: Nothing| Ok(Total { total: c.value }),
    );
    r
}

#[test]
fn invalid_params_fail_with_a_path_before_the_handler_runs() {
    let r = registry();
    let mut c = Counter::default();
    let e = r
        .call(&mut c, "counter.add", json!({"amount": "five"}))
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidParams);
    assert_eq!(e.path.as_deref(), Some("amount"));
    let e = r
        .call(
            &mut c,
            "counter.add",
            json!({"amount": 1, "note": {"tags": [1]}}),
        )
        .unwrap_err();
    assert_eq!(e.path.as_deref(), Some("note.tags[0]"), "{e:?}");
    let e = r
        .call(&mut c, "counter.add", json!({"amount": 1, "amuont": 2}))
        .unwrap_err();
    assert!(
        e.message.contains("amuont"),
        "unknown fields are typos: {e:?}"
    );
    let e = r.call(&mut c, "counter.add", json!({})).unwrap_err();
    assert!(e.message.contains("amount"), "{e:?}");
    assert_eq!(c.calls, 0, "no handler ran for invalid parameters");
    assert_eq!(
        r.call(&mut c, "counter.add", json!({"amount": 5})).unwrap(),
        json!({"total": 5})
    );
    assert_eq!(
        r.call(&mut c, "counter.get", json!(null)).unwrap(),
        json!({"total": 5})
    );
}

#[test]
fn handler_errors_and_unknown_commands_are_clear() {
    let r = registry();
    let mut c = Counter::default();
    let e = r
        .call(&mut c, "counter.add", json!({"amount": 13}))
        .unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (ErrorCode::Failed, "13 is unlucky")
    );
    let e = r.call(&mut c, "counter.mul", json!({})).unwrap_err();
    assert_eq!(e.code, ErrorCode::UnknownCommand);
    assert!(
        e.message.contains("counter.add"),
        "suggests same-namespace commands: {e}"
    );
}

#[test]
fn schemas_come_from_the_types_and_specs_are_complete() {
    let r = registry();
    let add = r.get("counter.add").unwrap();
    assert_eq!(add.tier, Tier::Confirm);
    assert_eq!(add.dry_run.as_deref(), Some("counter.preview"));
    assert_eq!(
        add.params_schema["properties"]["amount"]["description"],
        "How much to add."
    );
    assert!(add.params_schema["required"]
        .as_array()
        .unwrap()
        .contains(&json!("amount")));
    assert_eq!(add.examples.len(), 1);
    r.check_consistency().unwrap();
    let md = markdown_reference(r.specs());
    assert!(md.contains("## `counter.add`") && md.contains("Dry run: [`counter.preview`]"));
    assert_eq!(md, markdown_reference(r.specs()), "deterministic");
}

#[test]
fn a_dry_run_partner_must_exist_and_be_safe() {
    let mut r = registry();
    r.register(
        "counter.reset",
        Tier::AlwaysConfirm,
        "Resets.",
        |c: &mut Counter, _: Nothing| {
            c.value = 0;
            Ok(Total { total: 0 })
        },
    )
    .dry_run("counter.add");
    assert!(r.check_consistency().unwrap_err().contains("must be Safe"));
}

#[test]
#[should_panic(expected = "registered twice")]
fn duplicate_names_are_a_startup_bug() {
    let mut r = registry();
    r.register(
        "counter.get",
        Tier::Safe,
        "again",
        |c: &mut Counter, _: Nothing| Ok(Total { total: c.value }),
    );
}
