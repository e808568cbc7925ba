//! A worker's engine: the command it runs for each task, input on stdin,
//! answer on stdout. The engine reports its usage as lines on stderr,
//! `usage: <cumulative amount> <asset>` (e.g. `usage: 0.0031 USD`), read as
//! they arrive: the worker charges each increase to its allowance and
//! publishes it labelled *reported* — the engine's own estimate, never an
//! invoice — and can stop the engine at the allowance.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

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
    /// The last usage the engine reported (cumulative), if any.
    pub usage: Option<Usage>,
}

#[derive(Debug, Clone)]
pub struct Engine {
    /// Run with `sh -c`.
    pub command: String,
}

/// Why an engine run produced no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineFailure {
    /// It never started: nothing ran, nothing was used.
    NotStarted(String),
    /// It ran and failed (or ran out of time).
    Failed(String),
    /// The worker stopped it: the usage callback said so (the allowance is reached).
    Stopped(Option<Usage>),
}

impl Engine {
    /// Runs the engine on `input`. `on_usage` sees each usage line as it
    /// arrives and returns whether the engine may go on.
    pub async fn run(
        &self,
        input: &str,
        on_usage: &mut (dyn FnMut(&Usage) -> bool + Send),
    ) -> Result<EngineRun, EngineFailure> {
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| EngineFailure::NotStarted(format!("the engine did not start: {e}")))?;
        let (Some(mut stdin), Some(mut stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(EngineFailure::NotStarted("the engine's pipes were not opened".into()));
        };
        let input = input.to_string();
        tokio::spawn(async move {
            let _ = stdin.write_all(input.as_bytes()).await;
        });
        let reading = tokio::spawn(async move {
            let mut output = Vec::new();
            let _ = stdout.read_to_end(&mut output).await;
            output
        });
        let watched = tokio::time::timeout(Duration::from_secs(ENGINE_TIMEOUT_S), watch(stderr, on_usage)).await;
        let (usage, stopped, tail) = match watched {
            Ok(seen) => seen,
            Err(_) => return Err(EngineFailure::Failed(format!("the engine ran past {ENGINE_TIMEOUT_S} s"))),
        };
        if stopped {
            let _ = child.kill().await;
            return Err(EngineFailure::Stopped(usage));
        }
        let status = child.wait().await.map_err(|e| EngineFailure::Failed(format!("the engine failed: {e}")))?;
        let output = reading.await.unwrap_or_default();
        if !status.success() {
            return Err(EngineFailure::Failed(format!("the engine exited with {status}: {tail}")));
        }
        Ok(EngineRun { output: String::from_utf8_lossy(&output).into_owned(), usage })
    }
}

/// Reads stderr to its end (or until `on_usage` says stop): the last usage, whether stopped, and the last lines.
async fn watch(
    stderr: tokio::process::ChildStderr,
    on_usage: &mut (dyn FnMut(&Usage) -> bool + Send),
) -> (Option<Usage>, bool, String) {
    let mut lines = BufReader::new(stderr).lines();
    let (mut usage, mut tail) = (None, Vec::new());
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(reported) = parse_usage(&line) {
            let go_on = on_usage(&reported);
            usage = Some(reported);
            if !go_on {
                return (usage, true, tail.join(" / "));
            }
        } else {
            tail.push(line);
            if tail.len() > 3 {
                tail.remove(0);
            }
        }
    }
    (usage, false, tail.join(" / "))
}

fn parse_usage(line: &str) -> Option<Usage> {
    let mut words = line.strip_prefix("usage:")?.split_whitespace();
    let amount = words.next()?;
    bazaar_relay::labor::allowance::micros(amount)?;
    Some(Usage { amount: amount.to_string(), asset: words.next().unwrap_or("USD").to_string() })
}
