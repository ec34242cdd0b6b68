//! A private PostgreSQL server for the browser tests: prints `postgresql://…` (its port and
//! user) and the password once it accepts logins, and runs until it is stopped (SIGTERM or
//! Ctrl-C), then removes the server's folder.
//!
//! `cargo build -p sextant-postgres --features test-server --example test_server`

use sextant_postgres::test_server::{TestServer, PASSWORD, USER};
use tokio::signal::unix::{signal, SignalKind};

fn main() {
    let server = TestServer::start();
    println!("postgresql://{USER}@127.0.0.1:{}/postgres", server.port);
    println!("password: {PASSWORD}");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime to wait for a signal on");
    runtime.block_on(async {
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM can be waited for");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    });
    // Stops the server and removes its folder.
    drop(server);
}
