//! The scripted provider server as a program, for tests in other processes (the browser
//! tests drive `sextant serve` against it).
//!
//! `script_server SCRIPT.json` serves the script on an ephemeral port of 127.0.0.1, prints
//! `http://127.0.0.1:PORT` as its first line on stdout, and runs until killed. What it
//! received is at `GET /_script/requests`.

use sextant_providers::script::{Script, ScriptServer};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: script_server SCRIPT.json");
        std::process::exit(2);
    };
    let script = Script::load(std::path::Path::new(&path));
    let server = ScriptServer::start(script).await;
    println!("{}", server.url());
    // Keep serving until the test kills us.
    std::future::pending::<()>().await;
}
