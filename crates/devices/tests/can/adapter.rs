//! A simulated SLCAN adapter on the far end of a pty pair. It keeps the Lawicel state a
//! real adapter keeps (closed/open), answers each command with `\r` or BEL the way one
//! does (or stays silent, like several CANable firmwares), records every command it got,
//! and sends whatever lines a test asks it to.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::wait_until;

#[derive(Debug, Clone)]
pub struct AdapterOptions {
    /// Answer commands (`\r` / BEL); `false` models firmware that never answers.
    pub answers: bool,
    /// Commands refused with BEL even when valid, e.g. `S7` for a rate it lacks.
    pub refuse: Vec<&'static str>,
}

impl Default for AdapterOptions {
    fn default() -> Self {
        AdapterOptions {
            answers: true,
            refuse: Vec::new(),
        }
    }
}

#[derive(Default)]
struct State {
    open: bool,
    commands: Vec<String>,
    /// Transmit commands accepted while open.
    sent: Vec<String>,
}

pub struct Adapter {
    state: Arc<Mutex<State>>,
    port: Arc<Mutex<File>>,
}

const BEL: &[u8] = b"\x07";
const OK: &[u8] = b"\r";

fn answer(command: &str, state: &mut State, options: &AdapterOptions) -> &'static [u8] {
    let refused = options.refuse.contains(&command);
    match command.as_bytes().first() {
        None => BEL,
        Some(b'C') if command == "C" => {
            let was_open = std::mem::replace(&mut state.open, false);
            if was_open {
                OK
            } else {
                BEL
            }
        }
        Some(b'S' | b'Y') if command.len() == 2 => {
            if state.open || refused {
                BEL
            } else {
                OK
            }
        }
        Some(b'O' | b'L') if command.len() == 1 => {
            if state.open || refused {
                BEL
            } else {
                state.open = true;
                OK
            }
        }
        Some(c @ (b't' | b'T' | b'r' | b'R' | b'd' | b'D' | b'b' | b'B')) => {
            if !state.open || refused {
                return BEL;
            }
            state.sent.push(command.to_string());
            if c.is_ascii_uppercase() {
                b"Z\r"
            } else {
                b"z\r"
            }
        }
        Some(_) => BEL,
    }
}

impl Adapter {
    /// Starts serving the peer end `path` of a pty pair.
    pub fn start(path: &Path, options: AdapterOptions) -> Adapter {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .expect("the pty peer opens");
        let mut reader = file.try_clone().expect("the pty peer can be shared");
        let port = Arc::new(Mutex::new(file));
        let state = Arc::new(Mutex::new(State::default()));
        let (thread_state, thread_port) = (state.clone(), port.clone());
        std::thread::spawn(move || {
            let mut line = Vec::new();
            let mut buf = [0u8; 1024];
            // Ends when the pty goes away (socat killed at unplug or at the end).
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                for &b in &buf[..n] {
                    if b != b'\r' {
                        line.push(b);
                        continue;
                    }
                    let command = String::from_utf8_lossy(&line).into_owned();
                    line.clear();
                    let reply = {
                        let mut st = thread_state.lock().unwrap();
                        st.commands.push(command.clone());
                        answer(&command, &mut st, &options)
                    };
                    if options.answers {
                        let _ = thread_port.lock().unwrap().write_all(reply);
                    }
                }
            }
        });
        Adapter { state, port }
    }

    /// Every command received so far, without the `\r`.
    pub fn commands(&self) -> Vec<String> {
        self.state.lock().unwrap().commands.clone()
    }

    /// Transmit commands accepted so far.
    pub fn sent(&self) -> Vec<String> {
        self.state.lock().unwrap().sent.clone()
    }

    pub fn is_open(&self) -> bool {
        self.state.lock().unwrap().open
    }

    /// Waits until the adapter has received `n` commands.
    pub fn wait_commands(&self, n: usize) -> Vec<String> {
        wait_until(Duration::from_secs(10), || self.commands().len() >= n);
        self.commands()
    }

    /// Sends raw bytes to the host, e.g. frame lines with their `\r`.
    pub fn send(&self, bytes: &[u8]) {
        let mut port = self.port.lock().unwrap();
        port.write_all(bytes).expect("write to the pty peer");
        port.flush().expect("flush the pty peer");
    }
}
