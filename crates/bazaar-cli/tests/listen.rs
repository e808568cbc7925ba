//! Where `bazaar serve` listens: `--listen` with `--tls-cert`/`--tls-key`
//! serves HTTPS that a client trusting the certificate reaches (and a plain
//! HTTP request does not); a non-loopback address without TLS is served with
//! a warning; a key that does not match the certificate fails the start.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

mod common;

/// Starts `bazaar serve <args>`; returns the process, its first stdout line and its stderr reader.
fn serve(args: &[String]) -> (Child, String, BufReader<std::process::ChildStderr>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .arg("serve")
        .args(args)
        .env("BAZAAR_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().map(|l| l.unwrap()).unwrap_or_default();
    std::thread::spawn(move || for _ in lines {});
    let stderr = BufReader::new(child.stderr.take().unwrap());
    (child, first, stderr)
}

fn data_dir(name: &str) -> String {
    common::fresh_dir(name).display().to_string()
}

#[tokio::test]
async fn https_with_a_certificate_and_a_warning_for_plain_http_on_a_public_address() {
    let dir = common::fresh_dir("bazaar-listen-tls");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).unwrap();
    let port = common::free_port();
    let args: Vec<String> = [
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--tls-cert",
        &cert_path.display().to_string(),
        "--tls-key",
        &key_path.display().to_string(),
        "--data-dir",
        &dir.join("data").display().to_string(),
    ]
    .map(String::from)
    .to_vec();
    let (mut server, first, _stderr) = serve(&args);
    assert_eq!(first, format!("listening on https://127.0.0.1:{port}"));
    let trusted = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.cert.pem().as_bytes()).unwrap())
        .build()
        .unwrap();
    let card = trusted.get(format!("https://localhost:{port}/.well-known/bazaar")).send().await.unwrap();
    assert_eq!(card.status(), 200);
    let card: serde_json::Value = card.json().await.unwrap();
    assert!(card["did"].as_str().unwrap().starts_with("did:key:"));
    // Plain HTTP on the TLS port gets no answer; a client without the certificate refuses the server.
    assert!(reqwest::get(format!("http://127.0.0.1:{port}/.well-known/bazaar")).await.is_err());
    assert!(reqwest::get(format!("https://localhost:{port}/.well-known/bazaar")).await.is_err());
    server.kill().unwrap();
    server.wait().unwrap();

    // A key that is not the certificate's: the start fails and says so.
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(&key_path, other.key_pair.serialize_pem()).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_bazaar")).arg("serve").args(&args).output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("does not match --tls-cert"), "{stderr}");

    // Plain HTTP on every address: served, with a warning on stderr.
    let port = common::free_port();
    let args: Vec<String> = ["--listen", &format!("0.0.0.0:{port}"), "--data-dir", &data_dir("bazaar-listen-plain")]
        .map(String::from)
        .to_vec();
    let (mut server, first, mut stderr) = serve(&args);
    assert_eq!(first, format!("listening on http://0.0.0.0:{port}"));
    let warned = (0..50).find_map(|_| {
        let mut line = String::new();
        stderr.read_line(&mut line).ok()?;
        line.starts_with("warning:").then_some(line)
    });
    assert!(warned.is_some_and(|l| l.contains("plain HTTP")), "a warning about plain HTTP on a public address");
    let card = reqwest::get(format!("http://127.0.0.1:{port}/.well-known/bazaar")).await.unwrap();
    assert_eq!(card.status(), 200);
    server.kill().unwrap();
    server.wait().unwrap();
    std::fs::remove_dir_all(&dir).ok();
}
