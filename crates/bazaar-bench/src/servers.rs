//! Servers as child processes (killed when dropped, so even on error or
//! Ctrl-C), and the PostgreSQL housekeeping: databases to create and drop,
//! and the cluster statistics read around a run.

use crate::limits::{SERVER_START_TIMEOUT_S, SERVER_STOP_TIMEOUT_S};
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_postgres::{Client, NoTls};

/// A server child that printed `listening on http://…`.
pub struct Server {
    child: tokio::process::Child,
    pub pid: u32,
    pub url: String,
    pub log: PathBuf,
}

/// Starts `program args…`, waits for its `listening on` line, and returns it running.
/// Its stderr goes to `log`; it is killed if dropped.
pub async fn spawn(program: &Path, args: &[String], env: &[(&str, String)], log: PathBuf) -> Result<Server> {
    let stderr = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let mut command = tokio::process::Command::new(program);
    command.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(stderr).kill_on_drop(true);
    for name in ["BAZAAR_DATABASE_URL", "BAZAAR_DATA_DIR", "BAZAAR_OPERATOR_CREDENTIAL"] {
        command.env_remove(name);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().with_context(|| format!("starting {}", program.display()))?;
    let pid = child.id().context("the child has a pid")?;
    let mut lines = BufReader::new(child.stdout.take().context("piped stdout")?).lines();
    let waited = tokio::time::timeout(Duration::from_secs(SERVER_START_TIMEOUT_S), async {
        while let Some(line) = lines.next_line().await? {
            if let Some(url) = line.strip_prefix("listening on ") {
                return Ok(url.trim().to_string());
            }
        }
        bail!("exited before listening")
    })
    .await;
    let url = match waited {
        Ok(Ok(url)) => url,
        Ok(Err(error)) => bail!("{error}; its log ends:\n{}", tail(&log)),
        Err(_) => bail!("did not listen within {SERVER_START_TIMEOUT_S} s; its log ends:\n{}", tail(&log)),
    };
    if !url.starts_with("http://127.0.0.1:") {
        bail!("listens on {url}, not on 127.0.0.1");
    }
    // Keep draining stdout so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(Server { child, pid, url, log })
}

impl Server {
    /// SIGTERM, then SIGKILL if it has not exited in time. Returns its exit code, if any.
    pub async fn stop(&mut self) -> Result<Option<i32>> {
        if let Some(status) = self.child.try_wait()? {
            return Ok(status.code());
        }
        let _ = std::process::Command::new("kill").args(["-TERM", &self.pid.to_string()]).status();
        match tokio::time::timeout(Duration::from_secs(SERVER_STOP_TIMEOUT_S), self.child.wait()).await {
            Ok(status) => Ok(status?.code()),
            Err(_) => {
                self.child.kill().await?;
                Ok(None)
            }
        }
    }
}

/// The last lines of a log file, for error messages.
pub fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

/// `base` (e.g. `postgres://postgres@127.0.0.1:5432`) with a database name.
pub fn database_url(base: &str, database: &str) -> String {
    format!("{}/{database}", base.trim_end_matches('/'))
}

/// Opens one connection and drives it on the current runtime.
pub async fn connect(url: &str) -> Result<Client> {
    let (client, connection) =
        tokio_postgres::connect(url, NoTls).await.with_context(|| format!("connecting to {}", redact(url)))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// The URL without any password.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let user = &url[scheme + 3..at];
            let user = user.split(':').next().unwrap_or_default();
            format!("{}{user}{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_string(),
    }
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name.len() > 63
        || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    {
        bail!("database name {name:?} must be 1-63 chars of a-z, 0-9, _");
    }
    Ok(())
}

pub async fn create_database(admin: &Client, name: &str) -> Result<()> {
    check_name(name)?;
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await?;
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await.with_context(|| format!("creating {name}"))?;
    Ok(())
}

pub async fn drop_database(admin: &Client, name: &str) -> Result<()> {
    check_name(name)?;
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await?;
    Ok(())
}

/// Cluster counters read before and after a run.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct PgStats {
    /// Transactions committed in the database.
    pub xact_commit: i64,
    /// WAL fsyncs, cluster-wide (every database shares one WAL).
    pub wal_sync: i64,
    pub wal_records: i64,
}

pub async fn pg_stats(admin: &Client, database: &str) -> Option<PgStats> {
    let commits = admin.query_one("SELECT xact_commit FROM pg_stat_database WHERE datname = $1", &[&database]).await;
    let wal = admin.query_one("SELECT wal_sync, wal_records FROM pg_stat_wal", &[]).await;
    let (commits, wal) = (commits.ok()?, wal.ok()?);
    Some(PgStats { xact_commit: commits.get(0), wal_sync: wal.get(0), wal_records: wal.get(1) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_names() {
        assert_eq!(
            database_url("postgres://postgres@127.0.0.1:5432/", "x_1"),
            "postgres://postgres@127.0.0.1:5432/x_1"
        );
        assert_eq!(redact("postgres://u:secret@h:5432/db"), "postgres://u@h:5432/db");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert!(check_name("bazaar_bench_12").is_ok());
        assert!(check_name("x; DROP TABLE y").is_err());
    }
}
