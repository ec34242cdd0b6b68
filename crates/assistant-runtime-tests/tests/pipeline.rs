//! The tool pipeline's stations, their order, and the safety tiers as pipeline members.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use sextant_assistant::pipeline::{
    Approval, Approver, AskRequest, Authorization, BoxFuture, CallContext, CallerInfo, CancelToken,
    Checkpointer, DenyReason, Guard, Next, Observer, Outcome, Pipeline, PostAction, PostProcessor,
    PreDecision, PreListener, ResultStatus, Retry, RuntimeExecutor, Step, Timeout, ToolBox,
    ToolCall, ToolError, ToolResult, ToolResultValue,
};
use sextant_commands::{Policy, Tier};

// ---- doubles ----------------------------------------------------------------------------

/// The "rules bridge": asks before a recursive remove.
struct RulesBridge;
impl PreListener for RulesBridge {
    fn name(&self) -> &str {
        "rules"
    }
    fn decide(&self, ctx: &CallContext, next: Next) -> Step {
        if ctx.name() == "files.remove" && ctx.args()["recursive"] == json!(true) {
            return PreDecision::ask("recursive remove").into();
        }
        next.defer()
    }
}

/// The "allow-list plugin": allows every remove.
struct AllowList(&'static [&'static str]);
impl PreListener for AllowList {
    fn name(&self) -> &str {
        "allow-list"
    }
    fn decide(&self, ctx: &CallContext, next: Next) -> Step {
        if self.0.contains(&ctx.name()) {
            return PreDecision::Allow.into();
        }
        next.defer()
    }
}

/// Allows everything (for tests of later stations).
struct AllowAll;
impl PreListener for AllowAll {
    fn name(&self) -> &str {
        "allow-all"
    }
    fn decide(&self, _ctx: &CallContext, _next: Next) -> Step {
        PreDecision::Allow.into()
    }
}

/// Denies paths outside the project folder; counts how often it is asked.
#[derive(Default, Clone)]
struct Sandbox {
    asked: Arc<AtomicUsize>,
}
impl Guard for Sandbox {
    fn name(&self) -> &str {
        "sandbox"
    }
    fn check(&self, ctx: &CallContext, _auth: Authorization) -> Option<DenyReason> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let path = ctx.args()["path"].as_str().unwrap_or("");
        (!path.starts_with("/project/") || path.contains(".."))
            .then(|| DenyReason::new(format!("sandbox: {path} is outside the project")))
    }
}

/// Denies one tool by name.
struct DenyTool(&'static str, &'static str);
impl Guard for DenyTool {
    fn name(&self) -> &str {
        self.1
    }
    fn check(&self, ctx: &CallContext, _auth: Authorization) -> Option<DenyReason> {
        (ctx.name() == self.0).then(|| DenyReason::new(self.1))
    }
}

/// Records every prompt and answers with a fixed approval.
#[derive(Clone)]
struct Person {
    prompts: Arc<Mutex<Vec<String>>>,
    answer: Approval,
}
impl Person {
    fn answering(answer: Approval) -> Person {
        Person {
            prompts: Arc::default(),
            answer,
        }
    }
    fn prompts(&self) -> usize {
        self.prompts.lock().unwrap().len()
    }
}
impl Approver for Person {
    fn ask<'a>(&'a self, ctx: &'a CallContext, req: &'a AskRequest) -> BoxFuture<'a, Approval> {
        self.prompts
            .lock()
            .unwrap()
            .push(format!("{}: {}", ctx.name(), req.prompt));
        let a = self.answer.clone();
        Box::pin(async move { a })
    }
}

/// Records what post-execute and the observers saw.
#[derive(Default, Clone)]
struct Recorder {
    post: Arc<Mutex<Vec<ToolResult>>>,
    observed: Arc<Mutex<Vec<Outcome>>>,
}
impl PostProcessor for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn after(&self, _ctx: &CallContext, result: &ToolResult) -> PostAction {
        self.post.lock().unwrap().push(result.clone());
        PostAction::Accept
    }
}
impl Observer for Recorder {
    fn observe(&self, _ctx: &CallContext, outcome: &Outcome) {
        self.observed.lock().unwrap().push(outcome.clone());
    }
}

/// Answers post-execute with a fixed action.
struct Rewrite(PostAction);
impl PostProcessor for Rewrite {
    fn name(&self) -> &str {
        "rewrite"
    }
    fn after(&self, _ctx: &CallContext, _result: &ToolResult) -> PostAction {
        self.0.clone()
    }
}

/// A tool that counts its runs and echoes its arguments.
fn counting(runs: &Arc<AtomicUsize>) -> impl Fn(&Value) -> ToolResultValue {
    let runs = runs.clone();
    move |args: &Value| {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok(json!({ "removed": args["path"] }))
    }
}

fn call(name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: "call-1".into(),
        name: name.into(),
        args,
    }
}

fn caller() -> CallerInfo {
    CallerInfo::assistant(Policy::default())
}

fn rm_rf(path: &str) -> ToolCall {
    call("files.remove", json!({ "path": path, "recursive": true }))
}

fn files(runs: &Arc<AtomicUsize>) -> ToolBox {
    ToolBox::new().with("files.remove", Tier::Confirm, counting(runs))
}

// ---- the worked example (spec 30, Part B acceptance) ------------------------------------

#[tokio::test]
async fn listener_order_decides_whether_the_prompt_is_shown_and_swapping_flips_it() {
    let runs = Arc::new(AtomicUsize::new(0));
    let person = Person::answering(Approval::AllowedOnce);
    let rules_first = Pipeline::new(files(&runs))
        .pre(RulesBridge)
        .pre(AllowList(&["files.remove"]))
        .guard(Sandbox::default())
        .approver(person.clone());
    let out = rules_first.run(rm_rf("/project/build"), caller()).await;
    assert_eq!(
        person.prompts(),
        1,
        "rules bridge first: the prompt is shown"
    );
    assert_eq!(out.trace.decided_by.as_deref(), Some("rules"));
    assert_eq!(out.result.status, ResultStatus::Ok);

    let person = Person::answering(Approval::AllowedOnce);
    let allow_first = Pipeline::new(files(&runs))
        .pre(AllowList(&["files.remove"]))
        .pre(RulesBridge)
        .guard(Sandbox::default())
        .approver(person.clone());
    let out = allow_first.run(rm_rf("/project/build"), caller()).await;
    assert_eq!(person.prompts(), 0, "allow-list first: no prompt");
    assert_eq!(out.trace.decided_by.as_deref(), Some("allow-list"));
    assert_eq!(out.trace.authorization, Some(Authorization::Allowed));
    assert_eq!(out.result.status, ResultStatus::Ok);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn the_guard_verdict_does_not_depend_on_listener_order_and_comes_after_pre_execute() {
    for rules_first in [true, false] {
        let runs = Arc::new(AtomicUsize::new(0));
        let sandbox = Sandbox::default();
        let person = Person::answering(Approval::AllowedOnce);
        let mut p = Pipeline::new(files(&runs));
        p = if rules_first {
            p.pre(RulesBridge).pre(AllowList(&["files.remove"]))
        } else {
            p.pre(AllowList(&["files.remove"])).pre(RulesBridge)
        };
        let p = p.guard(sandbox.clone()).approver(person.clone());
        let out = p.run(rm_rf("/etc"), caller()).await;
        assert_eq!(
            out.result.status,
            ResultStatus::Denied,
            "rules_first={rules_first}"
        );
        assert!(out.result.content.starts_with("Error:"));
        assert!(out.result.content.contains("/etc is outside the project"));
        assert!(out.trace.guards_asked);
        assert_eq!(sandbox.asked.load(Ordering::SeqCst), 1);
        assert_eq!(runs.load(Ordering::SeqCst), 0, "the tool never ran");
        assert_eq!(person.prompts(), usize::from(rules_first));
    }
    // Pre-execute said no (the person declined): the guard is never asked.
    let runs = Arc::new(AtomicUsize::new(0));
    let sandbox = Sandbox::default();
    let person = Person::answering(Approval::Denied(Some("not today".into())));
    let p = Pipeline::new(files(&runs))
        .pre(RulesBridge)
        .pre(AllowList(&["files.remove"]))
        .guard(sandbox.clone())
        .approver(person);
    let out = p.run(rm_rf("/project/x"), caller()).await;
    assert_eq!(out.result.status, ResultStatus::Denied);
    assert!(out.result.content.contains("the user declined: not today"));
    assert!(!out.trace.guards_asked);
    assert_eq!(sandbox.asked.load(Ordering::SeqCst), 0);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn guards_are_all_asked_and_their_order_does_not_matter() {
    let runs = Arc::new(AtomicUsize::new(0));
    let a = Pipeline::new(files(&runs))
        .pre(AllowAll)
        .guard(DenyTool("files.remove", "guard A"))
        .guard(DenyTool("files.remove", "guard B"));
    let b = Pipeline::new(files(&runs))
        .pre(AllowAll)
        .guard(DenyTool("files.remove", "guard B"))
        .guard(DenyTool("files.remove", "guard A"));
    let ra = a.run(rm_rf("/project/x"), caller()).await;
    let rb = b.run(rm_rf("/project/x"), caller()).await;
    for r in [&ra, &rb] {
        assert_eq!(r.result.status, ResultStatus::Denied);
        assert_eq!(r.trace.denials.len(), 2, "every reason is kept");
        assert!(r.result.content.contains("guard A") && r.result.content.contains("guard B"));
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_denied_call_is_an_error_result_seen_by_post_execute_and_observers() {
    let runs = Arc::new(AtomicUsize::new(0));
    let rec = Recorder::default();
    // No approver: Ask is a denial.
    let p = Pipeline::new(files(&runs))
        .pre(RulesBridge)
        .post(rec.clone())
        .observe(rec.clone());
    let out = p.run(rm_rf("/project/x"), caller()).await;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(out.result.status, ResultStatus::Denied);
    assert!(
        out.result.content.starts_with("Error: denied:"),
        "{}",
        out.result.content
    );
    assert!(out.result.content.contains("nobody can be asked"));
    assert_eq!(out.result.id, "call-1");
    let post = rec.post.lock().unwrap();
    assert_eq!(post.len(), 1);
    assert_eq!(post[0].content, out.result.content);
    let seen = rec.observed.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0], out);
}

#[tokio::test]
async fn nobody_deciding_means_ask() {
    let runs = Arc::new(AtomicUsize::new(0));
    let p = Pipeline::new(files(&runs));
    let out = p.run(rm_rf("/project/x"), caller()).await;
    assert_eq!(out.result.status, ResultStatus::Denied);
    assert_eq!(out.trace.decided_by, None);
    let person = Person::answering(Approval::AllowedOnce);
    let p = Pipeline::new(files(&runs)).approver(person.clone());
    let out = p.run(rm_rf("/project/x"), caller()).await;
    assert_eq!(out.result.status, ResultStatus::Ok);
    assert_eq!(person.prompts(), 1);
}

#[tokio::test]
async fn a_remembered_allow_counts_only_where_the_listener_permits_it() {
    struct AskEveryTime;
    impl PreListener for AskEveryTime {
        fn name(&self) -> &str {
            "every-time"
        }
        fn decide(&self, _ctx: &CallContext, _next: Next) -> Step {
            PreDecision::ask_every_time("again").into()
        }
    }
    let runs = Arc::new(AtomicUsize::new(0));
    let person = Person::answering(Approval::RememberedAllow);
    let p = Pipeline::new(files(&runs))
        .pre(RulesBridge)
        .approver(person.clone());
    let out = p.run(rm_rf("/project/x"), caller()).await;
    assert_eq!(out.result.status, ResultStatus::Ok);
    assert_eq!(out.trace.authorization, Some(Authorization::Remembered));
    let p = Pipeline::new(files(&runs))
        .pre(AskEveryTime)
        .approver(person);
    let out = p.run(rm_rf("/project/x"), caller()).await;
    assert_eq!(out.result.status, ResultStatus::Denied);
    assert!(out.result.content.contains("fresh approval"));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_tool_receives_the_arguments_the_model_sent() {
    // Listeners only ever get `&CallContext` (no setters; see the compile_fail doctests in
    // `pipeline`): whatever they do, the tool and the observers see the original call.
    struct Snoop(Arc<Mutex<Option<Value>>>);
    impl PreListener for Snoop {
        fn name(&self) -> &str {
            "snoop"
        }
        fn decide(&self, ctx: &CallContext, next: Next) -> Step {
            let mut copy = ctx.args().clone();
            copy["path"] = json!("/"); // a copy; the call itself is untouched
            *self.0.lock().unwrap() = Some(copy);
            next.defer()
        }
    }
    let seen = Arc::new(Mutex::new(None));
    let got = Arc::new(Mutex::new(None));
    let g = got.clone();
    let tool = ToolBox::new().with("files.remove", Tier::Safe, move |args: &Value| {
        *g.lock().unwrap() = Some(args.clone());
        Ok(Value::Null)
    });
    let rec = Recorder::default();
    let p = Pipeline::new(tool)
        .pre(Snoop(seen.clone()))
        .pre(AllowAll)
        .observe(rec.clone());
    let args = json!({"path": "/project/a", "recursive": false});
    p.run(call("files.remove", args.clone()), caller()).await;
    assert_eq!(seen.lock().unwrap().as_ref().unwrap()["path"], json!("/"));
    assert_eq!(got.lock().unwrap().as_ref(), Some(&args));
}

// ---- normalization ----------------------------------------------------------------------

struct Slow;
impl sextant_assistant::pipeline::Tool for Slow {
    fn call<'a>(
        &'a self,
        _ctx: &'a CallContext,
        cancel: CancelToken,
    ) -> BoxFuture<'a, ToolResultValue> {
        Box::pin(async move {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(30)) => Ok(json!("finished")),
                _ = cancel.cancelled() => Err(ToolError::Cancelled("slow".into())),
            }
        })
    }
}

#[tokio::test]
async fn timeout_tool_error_panic_and_unknown_tool_all_become_error_results() {
    let tools = ToolBox::new()
        .with("slow", Tier::Safe, Slow)
        .with("fails", Tier::Safe, |_: &Value| {
            Err(ToolError::failed("port /dev/ttyUSB0 is busy"))
        })
        .with("panics", Tier::Safe, |_: &Value| -> ToolResultValue {
            panic!("index out of range")
        });
    let rec = Recorder::default();
    let p = Pipeline::new(tools)
        .pre(AllowAll)
        .wrap(Timeout {
            limit: Duration::from_millis(50),
        })
        .post(rec.clone())
        .observe(rec.clone());
    let cases = [
        ("slow", "timed out after 50ms"),
        ("fails", "port /dev/ttyUSB0 is busy"),
        ("panics", "crashed: index out of range"),
        ("nope", "unknown tool `nope`"),
    ];
    for (name, reason) in cases {
        let out = p.run(call(name, json!({})), caller()).await;
        assert_eq!(out.result.status, ResultStatus::Error, "{name}");
        assert!(
            out.result.content.starts_with("Error: "),
            "{name}: {}",
            out.result.content
        );
        assert!(
            out.result.content.contains(reason),
            "{name}: {}",
            out.result.content
        );
        assert_eq!(out.result.value, None);
    }
    assert_eq!(rec.post.lock().unwrap().len(), 4, "all reach post-execute");
    let observed = rec.observed.lock().unwrap();
    assert_eq!(observed.len(), 4, "and the observers");
    assert!(observed[3].trace.unknown_tool);
    assert_eq!(
        observed[3].trace.decided_by, None,
        "unknown tools skip pre-execute"
    );
}

#[tokio::test]
async fn the_timeout_cancels_the_tool_and_the_callers_signal_reaches_it() {
    let p = Pipeline::new(ToolBox::new().with("slow", Tier::Safe, Slow)).pre(AllowAll);
    let cancel = CancelToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        c.cancel();
    });
    let out = p
        .run_with_cancel(call("slow", json!({})), caller(), cancel)
        .await;
    assert_eq!(out.result.content, "Error: `slow` was cancelled");
}

#[tokio::test]
async fn retry_repeats_only_read_only_calls() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let a = attempts.clone();
    let flaky = move |_: &Value| {
        if a.fetch_add(1, Ordering::SeqCst) < 2 {
            Err(ToolError::failed("flaky"))
        } else {
            Ok(json!("ok"))
        }
    };
    let a2 = Arc::new(AtomicUsize::new(0));
    let a2c = a2.clone();
    let edit = move |_: &Value| -> ToolResultValue {
        a2c.fetch_add(1, Ordering::SeqCst);
        Err(ToolError::failed("edit failed"))
    };
    let p = Pipeline::new(ToolBox::new().with("read", Tier::Safe, flaky).with(
        "edit",
        Tier::Confirm,
        edit,
    ))
    .pre(AllowAll)
    .wrap(Retry { attempts: 3 });
    let out = p.run(call("read", json!({})), caller()).await;
    assert_eq!(out.result.content, "ok");
    assert_eq!(out.trace.exec.attempts, 3);
    let out = p.run(call("edit", json!({})), caller()).await;
    assert!(out.result.is_error());
    assert_eq!(a2.load(Ordering::SeqCst), 1, "a mutation is never retried");
}

#[tokio::test]
async fn post_execute_replaces_and_blocks() {
    let tools = || {
        ToolBox::new()
            .with("read", Tier::Safe, |_: &Value| {
                Ok(json!({"secret": "hunter2"}))
            })
            .with("fails", Tier::Safe, |_: &Value| {
                Err(ToolError::failed("nope"))
            })
    };
    let run = |action: PostAction, name: &'static str| {
        let p = Pipeline::new(tools()).pre(AllowAll).post(Rewrite(action));
        async move { p.run(call(name, json!({})), caller()).await.result }
    };
    let r = run(PostAction::Accept, "read").await;
    assert_eq!(r.content, r#"{"secret":"hunter2"}"#);
    let r = run(PostAction::ReplaceContent("[redacted]".into()), "read").await;
    assert_eq!(
        (r.content.as_str(), r.status),
        ("[redacted]", ResultStatus::Ok)
    );
    assert_eq!(r.value, Some(json!({"secret": "hunter2"})));
    let r = run(PostAction::ReplaceValue(json!({"secret": "***"})), "read").await;
    assert_eq!(r.value, Some(json!({"secret": "***"})));
    assert_eq!(r.content, r#"{"secret":"***"}"#);
    let r = run(PostAction::Block("contains a credential".into()), "read").await;
    assert_eq!(r.status, ResultStatus::Blocked);
    assert_eq!(r.value, None);
    assert_eq!(
        r.content,
        "Error: blocked by rewrite: contains a credential"
    );
    // Rewriting an error cannot make it read like a success.
    let r = run(PostAction::ReplaceContent("all good".into()), "fails").await;
    assert_eq!(r.status, ResultStatus::Error);
    assert_eq!(r.content, "Error: all good");
}

// ---- the safety tiers -------------------------------------------------------------------

#[derive(Default, Clone)]
struct FakeCheckpoints(Arc<Mutex<Vec<String>>>);
impl Checkpointer for FakeCheckpoints {
    fn checkpoint<'a>(
        &'a self,
        _ctx: &'a CallContext,
        label: String,
    ) -> BoxFuture<'a, Result<u64, String>> {
        let mut v = self.0.lock().unwrap();
        v.push(label);
        let id = v.len() as u64;
        Box::pin(async move { Ok(id) })
    }
}

struct Tiered {
    runs: Arc<AtomicUsize>,
    person: Person,
    checkpoints: FakeCheckpoints,
    pipeline: Pipeline,
}

fn tiered(allow_list_first: bool) -> Tiered {
    let runs = Arc::new(AtomicUsize::new(0));
    let tools = ToolBox::new()
        .with("project.get", Tier::Safe, counting(&runs))
        .with("project.setTitle", Tier::Confirm, counting(&runs))
        .with("console.send", Tier::DeviceGated, counting(&runs))
        .with("assistant.restore", Tier::AlwaysConfirm, counting(&runs))
        .with("system.shell", Tier::Blocked, counting(&runs));
    let person = Person::answering(Approval::AllowedOnce);
    let checkpoints = FakeCheckpoints::default();
    let mut p = Pipeline::new(tools).approver(person.clone());
    if allow_list_first {
        p = p.pre(AllowList(&[
            "console.send",
            "assistant.restore",
            "system.shell",
        ]));
    }
    let pipeline = p.with_safety_tiers(checkpoints.clone());
    Tiered {
        runs,
        person,
        checkpoints,
        pipeline,
    }
}

fn with(policy: Policy) -> CallerInfo {
    CallerInfo::assistant(policy)
}

const DEVICES_ON: Policy = Policy {
    auto_approve_edits: false,
    allow_device_control: true,
    non_interactive: false,
    allow_process_sources: false,
    paths_from_person: false,
};

#[tokio::test]
async fn safe_runs_and_confirm_asks_unless_edits_are_auto_approved_with_a_checkpoint_first() {
    let t = tiered(false);
    let out = t
        .pipeline
        .run(call("project.get", json!({})), with(Policy::default()))
        .await;
    assert_eq!(out.result.status, ResultStatus::Ok);
    assert_eq!(t.person.prompts(), 0);
    assert_eq!(out.trace.exec.checkpoint, None, "no checkpoint for a read");

    let out = t
        .pipeline
        .run(call("project.setTitle", json!({})), with(Policy::default()))
        .await;
    assert_eq!(out.result.status, ResultStatus::Ok);
    assert_eq!(t.person.prompts(), 1, "an edit asks");
    assert_eq!(out.trace.exec.checkpoint, Some(1));

    let auto = Policy {
        auto_approve_edits: true,
        ..Policy::default()
    };
    let out = t
        .pipeline
        .run(call("project.setTitle", json!({})), with(auto))
        .await;
    assert_eq!(out.result.status, ResultStatus::Ok);
    assert_eq!(t.person.prompts(), 1, "auto-approved: no prompt");
    assert_eq!(out.trace.exec.checkpoint, Some(2));
    assert_eq!(
        *t.checkpoints.0.lock().unwrap(),
        ["before project.setTitle"; 2]
    );
    assert_eq!(t.runs.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn device_gated_is_refused_with_device_control_off_and_asks_every_time_when_on() {
    for allow_list_first in [false, true] {
        let t = tiered(allow_list_first);
        let out = t
            .pipeline
            .run(call("console.send", json!({})), with(Policy::default()))
            .await;
        assert_eq!(
            out.result.status,
            ResultStatus::Denied,
            "allow_list_first={allow_list_first}"
        );
        assert!(
            out.result.content.contains("allow device control"),
            "{}",
            out.result.content
        );
        assert_eq!(t.person.prompts(), 0, "no point asking for a refused call");
        assert_eq!(t.runs.load(Ordering::SeqCst), 0);
    }
    let t = tiered(false);
    for n in 1..=2 {
        let out = t
            .pipeline
            .run(call("console.send", json!({})), with(DEVICES_ON))
            .await;
        assert_eq!(out.result.status, ResultStatus::Ok);
        assert_eq!(t.person.prompts(), n, "asks every time");
    }
    // A remembered approval is not enough for a device.
    let mut t = tiered(false);
    t.person.answer = Approval::RememberedAllow;
    let p =
        Pipeline::new(ToolBox::new().with("console.send", Tier::DeviceGated, counting(&t.runs)))
            .approver(t.person.clone())
            .with_safety_tiers(FakeCheckpoints::default());
    let out = p
        .run(call("console.send", json!({})), with(DEVICES_ON))
        .await;
    assert_eq!(out.result.status, ResultStatus::Denied);
    // An allow rule before the tier listener does not skip the question either.
    let t = tiered(true);
    let out = t
        .pipeline
        .run(call("console.send", json!({})), with(DEVICES_ON))
        .await;
    assert_eq!(out.result.status, ResultStatus::Denied);
    assert!(out.result.content.contains("needs a person to approve"));
    assert_eq!(t.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn always_confirm_asks_even_with_auto_approve() {
    let everything = Policy {
        auto_approve_edits: true,
        allow_device_control: true,
        ..Policy::default()
    };
    let t = tiered(false);
    let out = t
        .pipeline
        .run(
            call("assistant.restore", json!({"id": 1})),
            with(everything),
        )
        .await;
    assert_eq!(out.result.status, ResultStatus::Ok);
    assert_eq!(t.person.prompts(), 1);
    let t = tiered(true);
    let out = t
        .pipeline
        .run(
            call("assistant.restore", json!({"id": 1})),
            with(everything),
        )
        .await;
    assert_eq!(
        out.result.status,
        ResultStatus::Denied,
        "an allow rule cannot skip asking"
    );
    assert_eq!(t.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn blocked_never_runs() {
    let everything = Policy {
        auto_approve_edits: true,
        allow_device_control: true,
        ..Policy::default()
    };
    for allow_list_first in [false, true] {
        let t = tiered(allow_list_first);
        let out = t
            .pipeline
            .run(call("system.shell", json!({})), with(everything))
            .await;
        assert_eq!(out.result.status, ResultStatus::Denied);
        assert!(out.result.content.starts_with("Error: denied: "));
        assert_eq!(t.runs.load(Ordering::SeqCst), 0);
        assert_eq!(t.person.prompts(), 0);
    }
}

// ---- the registry as executor ----------------------------------------------------------

#[tokio::test]
async fn registry_commands_run_through_the_pipeline() {
    use sextant_runtime::{Runtime, Workspace};
    use sextant_telemetry::project::Project;
    let handle = Runtime::new(Workspace::new(Project::default())).spawn(None);
    let person = Person::answering(Approval::AllowedOnce);
    let p = Pipeline::new(RuntimeExecutor::new(handle.clone()))
        .approver(person.clone())
        .with_safety_tiers(handle.clone());
    let out = p
        .run(
            call("project_setTitle", json!({"title": "Rover"})),
            with(Policy::default()),
        )
        .await;
    assert_eq!(
        out.result.status,
        ResultStatus::Ok,
        "{}",
        out.result.content
    );
    assert_eq!(person.prompts(), 1);
    assert!(out.trace.exec.checkpoint.is_some());
    let out = p
        .run(call("project.get", json!({})), with(Policy::default()))
        .await;
    assert_eq!(out.result.value.as_ref().unwrap()["title"], json!("Rover"));
    let out = p
        .run(
            call("assistant.listCheckpoints", json!({})),
            with(Policy::default()),
        )
        .await;
    let labels: Vec<&str> = out
        .result
        .value
        .as_ref()
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["label"].as_str())
        .collect();
    assert!(labels.contains(&"before project.setTitle"), "{labels:?}");
    let out = p
        .run(
            call("project.setTitle", json!({"title": 5})),
            with(Policy::default()),
        )
        .await;
    assert!(
        out.result.content.starts_with("Error: InvalidParams"),
        "{}",
        out.result.content
    );
}
