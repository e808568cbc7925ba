//! Shared by the tests that run `bazaar serve` as a process.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Starts `bazaar serve <args>` (warn-level logs, no operator credential from
/// the environment) and returns once it announces itself on 127.0.0.1; the
/// rest of its stdout is drained in the background.
pub fn spawn_serve(args: &[String]) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .arg("serve")
        .args(args)
        .env("BAZAAR_LOG", "warn")
        .env_remove("BAZAAR_OPERATOR_CREDENTIAL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start bazaar serve");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next().expect("server prints a line").unwrap();
    assert!(line.starts_with("listening on http://127.0.0.1:"), "{line}");
    std::thread::spawn(move || for _ in lines {});
    child
}
