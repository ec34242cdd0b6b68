//! A private PostgreSQL server for the browser tests: prints `postgresql://…` (its port and
//! user) and the password once it accepts logins, and runs until it is stopped. The browser tests' harness
//! starts it in a process group of its own and stops the group, the server with it.
//!
//! `cargo build -p sextant-postgres --features test-server --example test_server`

use sextant_postgres::test_server::{TestServer, PASSWORD, USER};

fn main() {
    let server = TestServer::start();
    println!("postgresql://{USER}@127.0.0.1:{}/postgres", server.port);
    println!("password: {PASSWORD}");
    loop {
        std::thread::park();
    }
}
