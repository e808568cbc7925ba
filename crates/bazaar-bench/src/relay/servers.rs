//! The relays under test as child processes, killed if dropped: `bazaar
//! serve` (through [`servers::spawn`], which waits for its `listening on`
//! line) and nostr-rs-relay, which prints nothing at `RUST_LOG=warn` and
//! takes its port only from its configuration file, so the run writes a
//! copy with a free port and waits until that port answers.

use crate::limits::{SERVER_START_TIMEOUT_S, SERVER_STOP_TIMEOUT_S};
use crate::servers;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// How often a starting peer's port is tried.
const PEER_POLL_MS: u64 = 50;
/// Where Bazaar serves its relay on the registry's port.
pub const BAZAAR_RELAY_PATH: &str = "/relay";

/// A relay child process and the WebSocket URL it answers on.
pub struct Relay {
    process: Process,
    pub pid: u32,
    pub url: String,
    pub log: PathBuf,
}

enum Process {
    Bazaar(servers::Server),
    Peer(tokio::process::Child),
}

/// `bazaar serve --port 0 --data-dir <dir>`, its relay at `ws://…/relay`.
pub async fn bazaar(program: &Path, dir: &Path, log: PathBuf) -> Result<Relay> {
    let args = ["serve", "--port", "0", "--data-dir"].map(String::from).into_iter().chain([dir.display().to_string()]);
    let env = [("BAZAAR_LOG", "warn".to_string())];
    let server = servers::spawn(program, &args.collect::<Vec<_>>(), &env, log.clone()).await?;
    let url = format!("{}{BAZAAR_RELAY_PATH}", server.url.replacen("http://", "ws://", 1));
    Ok(Relay { pid: server.pid, url, log, process: Process::Bazaar(server) })
}

/// `config` with its `[network] port` (and the `relay_url` naming it) set to `port`.
pub fn peer_config(config: &str, port: u16) -> Result<String> {
    let mut found = false;
    let lines: Vec<String> = config
        .lines()
        .map(|line| match line.trim_start() {
            text if text.starts_with("port ") || text.starts_with("port=") => {
                found = true;
                format!("port = {port}")
            }
            text if text.starts_with("relay_url") => format!("relay_url = \"ws://127.0.0.1:{port}/\""),
            _ => line.to_string(),
        })
        .collect();
    if !found {
        bail!("the peer's configuration has no `port =` line to set");
    }
    Ok(lines.join("\n") + "\n")
}

/// A port free on 127.0.0.1 a moment ago.
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// nostr-rs-relay with `config` (its port rewritten) and its database in `dir`.
pub async fn peer(program: &Path, config: &str, dir: &Path, log: PathBuf) -> Result<Relay> {
    if !program.exists() {
        bail!("no nostr-rs-relay at {} (install it: scripts/install-relay-peer)", program.display());
    }
    let port = free_port()?;
    let config_path = dir.with_extension("toml");
    std::fs::write(&config_path, peer_config(config, port)?)
        .with_context(|| format!("writing {}", config_path.display()))?;
    let stderr = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let mut command = tokio::process::Command::new(program);
    command
        .arg("--config")
        .arg(&config_path)
        .arg("--db")
        .arg(dir)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(stderr.try_clone()?)
        .stderr(stderr)
        .kill_on_drop(true);
    let mut child = command.spawn().with_context(|| format!("starting {}", program.display()))?;
    let pid = child.id().context("the child has a pid")?;
    let deadline = Instant::now() + Duration::from_secs(SERVER_START_TIMEOUT_S);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        if let Some(status) = child.try_wait()? {
            bail!("exited ({status}) before listening; its log ends:\n{}", servers::tail(&log));
        }
        if Instant::now() > deadline {
            bail!("did not listen within {SERVER_START_TIMEOUT_S} s; its log ends:\n{}", servers::tail(&log));
        }
        tokio::time::sleep(Duration::from_millis(PEER_POLL_MS)).await;
    }
    Ok(Relay { process: Process::Peer(child), pid, url: format!("ws://127.0.0.1:{port}/"), log })
}

impl Relay {
    /// SIGTERM, then SIGKILL if it has not exited in time. Returns its exit code, if any.
    pub async fn stop(&mut self) -> Result<Option<i32>> {
        let child = match &mut self.process {
            Process::Bazaar(server) => return server.stop().await,
            Process::Peer(child) => child,
        };
        if let Some(status) = child.try_wait()? {
            return Ok(status.code());
        }
        let _ = std::process::Command::new("kill").args(["-TERM", &self.pid.to_string()]).status();
        match tokio::time::timeout(Duration::from_secs(SERVER_STOP_TIMEOUT_S), child.wait()).await {
            Ok(status) => Ok(status?.code()),
            Err(_) => {
                child.kill().await?;
                Ok(None)
            }
        }
    }
}

/// Bytes of the files in `dir` whose names start with `prefix` (a database and its WAL).
pub fn store_bytes(dir: &Path, prefix: &str) -> Option<u64> {
    let entries = std::fs::read_dir(dir).ok()?;
    let sizes = entries
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(prefix))
        .filter_map(|entry| entry.metadata().ok().map(|m| m.len()));
    Some(sizes.sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peer_config_gets_the_port() {
        let config = peer_config(crate::relay::PEER_CONFIG, 7123).unwrap();
        assert!(config.contains("\nport = 7123\n"));
        assert!(config.contains("relay_url = \"ws://127.0.0.1:7123/\""));
        assert!(!config.contains("7447"));
        assert!(peer_config("[network]\naddress = \"x\"\n", 1).is_err());
    }
}
