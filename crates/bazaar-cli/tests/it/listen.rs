//! Where `bazaar serve` listens: `--listen` with `--tls-cert`/`--tls-key`
//! serves HTTPS that a client trusting the certificate reaches (and a plain
//! HTTP request does not); a non-loopback address without TLS is served with
//! a warning; a key that does not match the certificate fails the start.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use crate::common;

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

/// Reads from `stream` until the server closes it or `within` passes; true if it closed.
async fn closed_within(stream: &mut tokio::net::TcpStream, within: std::time::Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buffer = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

#[tokio::test]
async fn slow_idle_and_oversized_clients_are_cut_off_and_rates_answer_429() {
    use tokio::io::AsyncWriteExt;
    let port = common::free_port();
    let args: Vec<String> = [
        "--port",
        &port.to_string(),
        "--data-dir",
        &data_dir("bazaar-listen-abuse"),
        "--operator-credential",
        "op",
        "--header-timeout-s",
        "1",
        "--rate-per-credential",
        "3",
        "--rate-per-ip",
        "3",
        "--trusted-proxy",
        "127.0.0.1",
    ]
    .map(String::from)
    .to_vec();
    let (mut server, first, _stderr) = serve(&args);
    assert_eq!(first, format!("listening on http://127.0.0.1:{port}"));
    let address = format!("127.0.0.1:{port}");

    // A client that never finishes its headers (slowloris) is closed after the header timeout.
    let mut slow = tokio::net::TcpStream::connect(&address).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ").await.unwrap();
    assert!(closed_within(&mut slow, std::time::Duration::from_secs(4)).await, "a slow client is cut off");

    // A keep-alive connection left idle after its answer is closed too.
    let mut idle = tokio::net::TcpStream::connect(&address).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    assert!(closed_within(&mut idle, std::time::Duration::from_secs(4)).await, "an idle connection is closed");

    // Headers past HTTP_HEADER_BYTES_MAX are refused (431), not buffered.
    let padding = "a".repeat(bazaar_types::limits::HTTP_HEADER_BYTES_MAX + 1024);
    let huge = reqwest::Client::new().get(format!("http://{address}/healthz")).header("x-pad", padding).send().await;
    assert!(huge.is_err() || huge.unwrap().status() == 431, "oversized headers are refused");

    rates_answer_429_and_cors_stays_closed(&address).await;
    server.kill().unwrap();
    server.wait().unwrap();
}

/// On a server run with `--rate-per-credential 3 --rate-per-ip 3 --trusted-proxy 127.0.0.1`.
async fn rates_answer_429_and_cors_stays_closed(address: &str) {
    // One credential past its rate: 429 rate_limited with Retry-After; another credential is not held up.
    let http = reqwest::Client::new();
    let mut limited = None;
    for _ in 0..40 {
        let answer = http.get(format!("http://{address}/v1/me")).bearer_auth("op").send().await.unwrap();
        if answer.status() == 429 {
            limited = Some(answer);
            break;
        }
        assert_eq!(answer.status(), 200);
    }
    let limited = limited.expect("a credential past 3 per second is limited within 40 requests");
    let retry_after: u64 = limited.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    assert_eq!(limited.headers()["content-type"], "application/problem+json");
    let problem: serde_json::Value = limited.json().await.unwrap();
    assert_eq!(
        (problem["code"].as_str(), problem["facts"]["limit"].as_str()),
        (Some("rate_limited"), Some("credential"))
    );
    let other = http.get(format!("http://{address}/v1/me")).bearer_auth("not-a-credential").send().await.unwrap();
    assert_eq!(other.status(), 401, "another credential has its own bucket");
    let metrics = http.get(format!("http://{address}/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("bazaar_http_rate_limited_total{limit=\"credential\"}"), "{metrics}");

    // Through the trusted proxy (loopback here), a client address past its rate gets 429 too, whatever it
    // claims to the left of the proxy's entry; another client is not held up.
    let from = |client: &str| {
        http.get(format!("http://{address}/healthz"))
            .header("x-forwarded-for", format!("198.51.100.1, {client}"))
            .send()
    };
    let mut by_address = None;
    for _ in 0..40 {
        let answer = from("203.0.113.9").await.unwrap();
        if answer.status() == 429 {
            by_address = Some(answer);
            break;
        }
    }
    let by_address = by_address.expect("an address past 3 per second is limited within 40 requests");
    let problem: serde_json::Value = by_address.json().await.unwrap();
    assert_eq!((problem["code"].as_str(), problem["facts"]["limit"].as_str()), (Some("rate_limited"), Some("ip")));
    assert_eq!(from("203.0.113.10").await.unwrap().status(), 200, "another client has its own bucket");

    // CORS is closed: neither a preflight nor a request from another origin is answered with an allowance.
    let preflight = http
        .request(reqwest::Method::OPTIONS, format!("http://{address}/v1/me"))
        .header("origin", "https://elsewhere.example")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "authorization")
        .send()
        .await
        .unwrap();
    assert!(!preflight.headers().contains_key("access-control-allow-origin"), "{:?}", preflight.headers());
    let cross =
        http.get(format!("http://{address}/healthz")).header("origin", "https://elsewhere.example").send().await;
    assert!(!cross.unwrap().headers().contains_key("access-control-allow-origin"));
}
