//! A worker's engine: the command it runs for each task, input on stdin,
//! answer on stdout. The engine reports its usage as a line on stderr,
//! `usage: <amount> <asset>` (e.g. `usage: 0.0031 USD`), which the worker
//! publishes labelled *reported*: an engine's own estimate, never an invoice.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

/// Longest one engine run may take, in seconds.
pub const ENGINE_TIMEOUT_S: u64 = 600;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage {
    pub amount: String,
    pub asset: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineRun {
    pub output: String,
    pub usage: Option<Usage>,
}

#[derive(Debug, Clone)]
pub struct Engine {
    /// Run with `sh -c`.
    pub command: String,
}

impl Engine {
    /// Runs the engine on `input`; `Err` carries why it failed (an explicit failure).
    pub async fn run(&self, input: &str) -> Result<EngineRun, String> {
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("the engine did not start: {e}"))?;
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        let input = input.to_string();
        let writer = tokio::spawn(async move {
            let _ = stdin.write_all(input.as_bytes()).await;
        });
        let output = tokio::time::timeout(Duration::from_secs(ENGINE_TIMEOUT_S), child.wait_with_output())
            .await
            .map_err(|_| format!("the engine ran past {ENGINE_TIMEOUT_S} s"))?
            .map_err(|e| format!("the engine failed: {e}"))?;
        let _ = writer.await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            let tail: String = stderr.lines().rev().take(3).collect::<Vec<_>>().join(" / ");
            return Err(format!("the engine exited with {}: {tail}", output.status));
        }
        let usage = stderr.lines().rev().find_map(parse_usage);
        Ok(EngineRun { output: String::from_utf8_lossy(&output.stdout).into_owned(), usage })
    }
}

fn parse_usage(line: &str) -> Option<Usage> {
    let mut words = line.strip_prefix("usage:")?.split_whitespace();
    let amount = words.next()?;
    amount.parse::<f64>().ok().filter(|n| n.is_finite() && *n >= 0.0)?;
    Some(Usage { amount: amount.to_string(), asset: words.next().unwrap_or("USD").to_string() })
}
