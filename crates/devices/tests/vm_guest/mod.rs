//! What the tests that run inside the QEMU guest share (tests/vm/run boots it).
//!
//! Those tests are `#[ignore]`d, so a plain `cargo test` lists them as ignored with the
//! reason; tests/vm/run runs them in the guest with `--ignored` and `SEXTANT_VM=1`. Run
//! with `--ignored` anywhere else, they fail rather than pass without having tested
//! anything.
#![allow(dead_code)]

use std::process::{Command, Stdio};

/// Panics unless this process runs inside the test guest.
pub fn require_guest() {
    if std::env::var_os("SEXTANT_VM").is_none() {
        panic!(
            "\n*** this test runs only inside the QEMU guest that `tests/vm/run` boots (a real \
             Linux kernel with vcan and virtual Bluetooth controllers); it did not run here ***\n"
        );
    }
}

/// Runs a command to set the guest up, panicking with its output when it fails.
pub fn sh(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "`{program} {}` failed ({}): {}{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A virtual CAN interface of the guest's kernel, deleted on drop.
pub struct Vcan {
    pub name: String,
}

impl Vcan {
    /// Creates `name` with the given MTU (16: classic CAN only; 72: CAN FD too) and brings
    /// it up.
    pub fn new(name: &str, mtu: u32) -> Vcan {
        let _ = Command::new("ip")
            .args(["link", "delete", name])
            .stderr(Stdio::null())
            .status();
        sh("ip", &["link", "add", "dev", name, "type", "vcan"]);
        let vcan = Vcan { name: name.into() };
        vcan.set_mtu(mtu);
        vcan.up();
        vcan
    }

    pub fn set_mtu(&self, mtu: u32) {
        sh("ip", &["link", "set", &self.name, "mtu", &mtu.to_string()]);
    }

    pub fn up(&self) {
        sh("ip", &["link", "set", "up", &self.name]);
    }

    pub fn down(&self) {
        sh("ip", &["link", "set", "down", &self.name]);
    }

    /// Removes the interface, as unplugging a USB adapter does.
    pub fn delete(&self) {
        sh("ip", &["link", "delete", &self.name]);
    }
}

impl Drop for Vcan {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "delete", &self.name])
            .stderr(Stdio::null())
            .status();
    }
}
