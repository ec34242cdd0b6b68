//! What constrained tool calls cost in prompt bytes: the same request with the assistant's
//! offered tools sent natively (`tools`) and as a JSON schema plus a menu
//! (`response_format` and the menu at the end of the system message), for the full tool set
//! and for the set an intent narrows to.
//!
//! The body is what goes over the wire; what the model *reads* differs: a server renders
//! native tools into the prompt (when its template supports them), while the schema of
//! constrained calls only drives its sampler and the model reads the menu alone.
//!
//! The tools come from the real registry (every command the assistant is offered), the bytes
//! from the OpenAI-compatible client's own request body.
//!
//! `cargo run -p sextant-assistant-runtime-tests --example constrained_cost`

use sextant_assistant::intent::Intents;
use sextant_assistant::seams::ToolFilter;
use sextant_assistant::tools::{ToolSet, DISCOVERY, ESSENTIAL};
use sextant_providers::open_ai::request_body;
use sextant_providers::{constrained, Message, Request, SystemBlock};
use sextant_runtime::{Runtime, Workspace};
use sextant_telemetry::project::Project;

fn bytes(request: &Request) -> usize {
    request_body(request, true).len()
}

#[tokio::main]
async fn main() {
    let runtime = Runtime::new(Workspace::new(Project::default())).spawn(None);
    let offered: Vec<&str> = ESSENTIAL.iter().chain(DISCOVERY).copied().collect();
    let tools = ToolSet::with_commands(runtime.specs(), &offered).unwrap();
    let message = "Add a dataset called Battery to the Power group";
    let narrowed = Intents::shipped()
        .narrowing(message)
        .filter(tools.definitions().to_vec());
    println!("tool set | tools | body without tools (B) | tools in the body: native / constrained (B) | read by the model: native / constrained menu (B)");
    for (name, set) in [
        ("offered", tools.definitions().to_vec()),
        ("narrowed", narrowed),
    ] {
        let mut request = Request::new("SmolLM2-135M-Instruct", 512);
        request.system = vec![SystemBlock::cached("You are Sextant's assistant.")];
        request.messages = vec![Message::user(message)];
        let bare = bytes(&request);
        request.tools = set.clone();
        let native = bytes(&request);
        request.constrained_tools = true;
        let constrained = bytes(&request);
        let read_native: usize = set
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
            .sum();
        let menu = constrained::instruction(&set).len();
        println!(
            "{name} | {} | {bare} | {} / {} ({:+.0} %) | {read_native} / {menu} ({:+.0} %)",
            set.len(),
            native - bare,
            constrained - bare,
            100.0 * (constrained as f64 - native as f64) / (native - bare) as f64,
            100.0 * (menu as f64 - read_native as f64) / read_native as f64,
        );
    }
}
