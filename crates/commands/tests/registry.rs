//! The registry on a toy context: validation before handlers, schemas from types, errors.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sextant_commands::{
    markdown_reference, CommandError, Deferred, ErrorCode, Outcome, Registry, Then, Tier,
};

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

/// `counter.slowAdd`: the sum is worked out away from the counter, then applied to it;
/// `counter.slowGet`: answered away from it. Both check their parameters first.
fn deferred_registry() -> Registry<Counter> {
    let mut r = registry();
    r.register_deferred(
        "counter.slowAdd",
        Tier::Confirm,
        "Adds, working the amount out elsewhere.",
        |_: &mut Counter, p: AddParams| {
            if p.amount == 13 {
                return Err(CommandError::failed("13 is unlucky"));
            }
            Ok(Deferred::off_then(
                move || match p.amount {
                    666 => Err(CommandError::failed("the work failed")),
                    amount => Ok(amount * 2),
                },
                |c: &mut Counter, doubled: i64| {
                    c.value += doubled;
                    Ok(Total { total: c.value })
                },
            ))
        },
    );
    r.register_deferred(
        "counter.slowGet",
        Tier::Safe,
        "The total, read elsewhere.",
        |c: &mut Counter, _: Nothing| {
            let value = c.value;
            Ok(if value == 0 {
                Deferred::now(Total { total: 0 })
            } else {
                Deferred::off(move || Ok(Total { total: value }))
            })
        },
    );
    r
}

#[test]
fn a_deferred_command_runs_whole_through_call() {
    let r = deferred_registry();
    let mut c = Counter::default();
    assert_eq!(
        r.call(&mut c, "counter.slowGet", json!({})).unwrap(),
        json!({"total": 0})
    );
    assert_eq!(
        r.call(&mut c, "counter.slowAdd", json!({"amount": 4}))
            .unwrap(),
        json!({"total": 8})
    );
    assert_eq!(
        r.call(&mut c, "counter.slowGet", json!({})).unwrap(),
        json!({"total": 8})
    );
    let e = r
        .call(&mut c, "counter.slowAdd", json!({"amount": "four"}))
        .unwrap_err();
    assert_eq!(e.path.as_deref(), Some("amount"));
    let e = r
        .call(&mut c, "counter.slowAdd", json!({"amount": 666}))
        .unwrap_err();
    assert_eq!(e.message, "the work failed");
    assert_eq!(c.value, 8, "a failed job applies nothing");
    // Its spec is a plain command's: schemas from the same types.
    let spec = r.get("counter.slowAdd").unwrap();
    assert_eq!(
        spec.params_schema,
        r.get("counter.add").unwrap().params_schema
    );
    assert_eq!(
        spec.result_schema,
        r.get("counter.add").unwrap().result_schema
    );
}

#[test]
fn start_hands_the_work_over_and_the_change_comes_back() {
    let r = deferred_registry();
    let mut c = Counter::default();
    // A plain command is done at once.
    assert!(matches!(
        r.start(&mut c, "counter.add", json!({"amount": 1})),
        Ok(Outcome::Now(v)) if v == json!({"total": 1})
    ));
    // The handler refuses on the spot; nothing is handed over.
    let e = r
        .start(&mut c, "counter.slowAdd", json!({"amount": 13}))
        .err()
        .unwrap();
    assert_eq!(e.message, "13 is unlucky");
    let Ok(Outcome::Later(job)) = r.start(&mut c, "counter.slowAdd", json!({"amount": 5})) else {
        panic!("slowAdd hands its work over");
    };
    // The job runs on another thread, without the counter; the counter is untouched.
    let then = std::thread::spawn(job).join().unwrap().unwrap();
    assert_eq!(c.value, 1);
    let Then::Apply(apply) = then else {
        panic!("slowAdd changes the counter");
    };
    assert_eq!(apply(&mut c).unwrap(), json!({"total": 11}));
    let Ok(Outcome::Later(job)) = r.start(&mut c, "counter.slowGet", json!({})) else {
        panic!("slowGet hands its work over");
    };
    assert!(matches!(job(), Ok(Then::Reply(v)) if v == json!({"total": 11})));
}
