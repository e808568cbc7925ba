//! The scratch registry an attack runs in when no registry is named: a chamber
//! press, or `bazaar attack` without `--registry`. Each is an embedded registry
//! in a directory of its own, with dispute windows short enough for the attacks
//! that outwait a phase and webhooks to loopback allowed, so every attack in the
//! catalogue runs and none is skipped. It runs on a runtime of its own on a
//! thread of its own: when the run is over the runtime is shut down (every task
//! the registry started — server, sweeper, relay, webhook sender — stops with it)
//! and the directory is removed, so nothing an attack touched is kept anywhere.

use super::Verdict;
use anyhow::{anyhow, Context, Result};
use bazaar_core::apply::Config;
use bazaar_core::dispute::Windows;
use bazaar_stage::{embedded_registry_with, LocalRegistry};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Seconds of each dispute phase in a scratch registry: short enough for the attacks that outwait one.
pub const SCRATCH_WINDOW_S: u64 = 2;
/// Worker threads of a scratch registry's own runtime.
const SCRATCH_WORKERS: usize = 2;
/// How long a scratch registry's tasks get to stop once its run is over.
const SCRATCH_SHUTDOWN_MS: u64 = 1_000;
/// The prefix of a scratch registry's directory under the system's temp dir (then the process id and a count).
pub const SCRATCH_DIR_PREFIX: &str = "bazaar-attack-scratch";

/// Scratch registries this process has started, for their directories' names.
static STARTED: AtomicU64 = AtomicU64::new(0);

/// Runs the named attacks (or all) in a fresh scratch registry and removes it; `deadline` bounds the
/// run (a chamber press). The registry's tasks have stopped and its directory is gone when this returns.
pub async fn run(
    names: Vec<String>,
    say: impl Fn(String) + Send + 'static,
    deadline: Option<Duration>,
) -> Result<Vec<Verdict>> {
    let (done, verdicts) = tokio::sync::oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("bazaar-scratch".into())
        .spawn(move || {
            let _ = done.send(run_blocking(&names, &say, deadline));
        })
        .context("starting the scratch registry's thread")?;
    let verdicts = verdicts.await.context("the scratch registry's thread ended without a verdict")?;
    // The thread has shut its runtime down and removed the directory; wait for it to end too.
    tokio::task::spawn_blocking(move || thread.join())
        .await?
        .map_err(|_| anyhow!("the scratch registry's thread panicked"))?;
    verdicts
}

fn run_blocking(names: &[String], say: &dyn Fn(String), deadline: Option<Duration>) -> Result<Vec<Verdict>> {
    let dir = std::env::temp_dir().join(format!(
        "{SCRATCH_DIR_PREFIX}-{}-{}",
        std::process::id(),
        STARTED.fetch_add(1, Ordering::Relaxed)
    ));
    create_private_dir(&dir)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(SCRATCH_WORKERS)
        .thread_name("bazaar-scratch-worker")
        .enable_all()
        .build()
        .context("starting the scratch registry's runtime");
    let ran = runtime.as_ref().map_err(|e| anyhow!("{e:#}")).and_then(|runtime| {
        runtime.block_on(async {
            let local = start(&dir).await?;
            let run = super::run(&local.url, &local.operator_credential, names, say);
            match deadline {
                None => run.await,
                Some(deadline) => tokio::time::timeout(deadline, run)
                    .await
                    .map_err(|_| anyhow!("the attack did not finish within {} s", deadline.as_secs()))?,
            }
        })
    });
    if let Ok(runtime) = runtime {
        runtime.shutdown_timeout(Duration::from_millis(SCRATCH_SHUTDOWN_MS));
    }
    let removed = std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()));
    let verdicts = ran?;
    removed?;
    Ok(verdicts)
}

/// The scratch registry's directory, readable by this user alone (it holds the registry's keys while it runs).
fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(dir).with_context(|| format!("creating {}", dir.display()))
}

/// A registry in `dir` with short dispute windows, webhooks to loopback allowed and its webhook sender running.
async fn start(dir: &Path) -> Result<LocalRegistry> {
    let windows = Windows {
        answer_s: SCRATCH_WINDOW_S,
        evidence_s: SCRATCH_WINDOW_S,
        appeal_s: SCRATCH_WINDOW_S,
        ..Windows::standard()
    };
    let config = Config { windows, ..Config::standard() };
    let local = embedded_registry_with(dir, None, config).await?;
    local.state.plane().map_err(|problem| anyhow!("{}", problem.detail))?.allow_private_webhooks(true);
    bazaar_server::conversation::webhooks::spawn_sender(local.state.clone());
    Ok(local)
}

/// Where this process's scratch registries live while they run (for a test to see none is left).
pub fn scratch_dirs_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("{SCRATCH_DIR_PREFIX}-{pid}-");
    let entries = std::fs::read_dir(std::env::temp_dir()).into_iter().flatten().flatten();
    entries
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&prefix)))
        .collect()
}
