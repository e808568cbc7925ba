//! `bazaar backup`: an online, consistent copy of an embedded registry's data
//! directory while `bazaar serve` keeps writing to it. Each SQLite file is
//! copied with SQLite's online backup API from one read snapshot (held across
//! every step, so writers never restart the copy and the copy is one commit's
//! state); the credential files are copied beside them; `manifest.json` (each
//! file's bytes and sha256) is written last, so a directory without it is not
//! a backup. The registry's signing keys are rows of `bazaar.db`'s `meta`
//! table and travel with it. PostgreSQL is `pg_dump`'s job: the command says
//! how and exits 2.

use anyhow::{bail, Context, Result};
use bazaar_cli::{runtime, StoreArgs};
use clap::Subcommand;
use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};
use serde::Serialize;
use serde_json::json;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Subcommand)]
pub enum Command {
    /// Copy an embedded registry's data directory while it serves (SQLite's online backup), with a manifest.
    /// PostgreSQL: prints the pg_dump command and exits 2.
    Backup {
        #[command(flatten)]
        store: StoreArgs,
        /// The directory to write the backup into: created if absent, refused unless empty.
        #[arg(long)]
        to: PathBuf,
    },
}

/// The data directory's SQLite files (the ledger's, which must exist, first) and the secrets `bazaar serve`
/// writes beside them: one list, the one `bazaar serve` holds to mode 0600.
use bazaar_stage::data_dir::{DATABASES, SECRETS};
/// Written last: its presence is what makes a directory a complete backup.
const MANIFEST_FILE: &str = "manifest.json";
const MANIFEST_FORMAT: &str = "bazaar-backup-v1";
/// Pages (4 KiB each) copied per backup step; progress is reported between steps.
const PAGES_PER_STEP: i32 = 1024;
/// How often a long copy reports its pages remaining on stderr.
const PROGRESS_EVERY_MS: u64 = 1_000;
/// How long a step may keep answering busy or locked before the backup fails.
const BUSY_FOR_MS_MAX: u64 = 5_000;
/// Before the source's snapshot begins, how long to wait on a lock (as the store's own connections do).
const SOURCE_BUSY_TIMEOUT_MS: u64 = 5_000;

#[derive(Serialize)]
struct Manifest {
    format: &'static str,
    created_at_ms: i64,
    data_dir: String,
    /// The ledger's last event in the copy (`chain_head.seq` in its snapshot).
    ledger_event_seq: i64,
    files: Vec<Entry>,
}

#[derive(Serialize)]
struct Entry {
    file: String,
    bytes: u64,
    sha256: String,
}

pub async fn run(command: Command, json_output: bool) -> Result<i32> {
    let Command::Backup { store, to } = command;
    if let Some(url) = &store.database_url {
        return Ok(postgres_refusal(url, &store.data_dir, json_output));
    }
    let data_dir = store.data_dir.clone();
    let manifest = tokio::task::spawn_blocking(move || back_up(&data_dir, &to, json_output)).await??;
    if json_output {
        println!("{}", serde_json::to_string(&manifest)?);
    } else {
        for entry in &manifest.files {
            println!("{:<20} {:>12} bytes  sha256 {}", entry.file, entry.bytes, entry.sha256);
        }
        println!("backup complete: ledger at event {} ({MANIFEST_FILE} written)", manifest.ledger_event_seq);
    }
    Ok(0)
}

/// What to do instead on PostgreSQL: the `pg_dump` command (the URL only when it carries no password).
fn postgres_refusal(url: &str, data_dir: &Path, json_output: bool) -> i32 {
    let (target, unsaid) = if carries_password(url) {
        (
            "\"$BAZAAR_DATABASE_URL\"".to_string(),
            "with BAZAAR_DATABASE_URL set to your URL (it carries a password, so it is not repeated here), ",
        )
    } else {
        (format!("'{url}'"), "")
    };
    let command = format!("pg_dump --format=custom --file=bazaar.pgdump --dbname={target}");
    let secrets = SECRETS.map(|s| data_dir.join(s).display().to_string()).join(" and ");
    let message = format!(
        "bazaar backup copies the embedded store's files; PostgreSQL is backed up with pg_dump (a consistent \
         snapshot while nodes keep serving):\n  {command}\n{unsaid}and copy {secrets} beside the dump (mode 0600). \
         Restore and details: docs/operators.md, \"Backup and restore\"."
    );
    if json_output {
        println!("{}", json!({"error": message, "pg_dump": command}));
    } else {
        eprintln!("{message}");
    }
    2
}

/// Whether a PostgreSQL URL (or key=value string) names a password, which must not be echoed.
fn carries_password(url: &str) -> bool {
    if url.contains("password=") {
        return true;
    }
    let Some((_, rest)) = url.split_once("://") else { return false };
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    authority.rsplit_once('@').is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

/// Copies everything into `out`, or — on any failure — removes what it wrote and says why.
fn back_up(data_dir: &Path, out: &Path, json_output: bool) -> Result<Manifest> {
    let ledger = data_dir.join(runtime::SQLITE_FILE);
    if !ledger.is_file() {
        bail!("no {} in {}: nothing to back up (is --data-dir right?)", runtime::SQLITE_FILE, data_dir.display());
    }
    let created = prepare_output(out)?;
    let mut written = Vec::new();
    let result = copy_all(data_dir, out, json_output, &mut written);
    if result.is_err() {
        for file in &written {
            std::fs::remove_file(file).ok();
        }
        if created {
            std::fs::remove_dir(out).ok();
        }
    }
    result
}

/// Creates `out` (0700) if absent and refuses one that holds anything; `true` if it was created.
fn prepare_output(out: &Path) -> Result<bool> {
    match std::fs::read_dir(out) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                bail!("{} is not empty: a backup never overwrites; choose a new directory", out.display());
            }
            Ok(false)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(out)
                .with_context(|| format!("creating {}", out.display()))?;
            Ok(true)
        }
        Err(error) => Err(error).with_context(|| format!("reading {}", out.display())),
    }
}

fn copy_all(data_dir: &Path, out: &Path, json_output: bool, written: &mut Vec<PathBuf>) -> Result<Manifest> {
    let mut files = Vec::new();
    let mut ledger_event_seq = 0;
    for name in DATABASES {
        let source = data_dir.join(name);
        if !source.is_file() {
            note(json_output, &format!("{name}: absent in {}, skipped", data_dir.display()));
            continue;
        }
        let seq = copy_database(&source, &out.join(name), json_output, written)
            .with_context(|| format!("backing up {}", source.display()))?;
        if name == runtime::SQLITE_FILE {
            ledger_event_seq = seq.unwrap_or_default();
        }
        files.push(entry(out, name)?);
    }
    for name in SECRETS {
        let source = data_dir.join(name);
        if !source.is_file() {
            note(
                json_output,
                &format!("{name}: absent in {}; keep that credential with the backup yourself", data_dir.display()),
            );
            continue;
        }
        let bytes = std::fs::read(&source).with_context(|| format!("reading {}", source.display()))?;
        write_private(&out.join(name), &bytes, written)?;
        files.push(entry(out, name)?);
    }
    let manifest = Manifest {
        format: MANIFEST_FORMAT,
        created_at_ms: bazaar_sdk::clock::now_ms(),
        data_dir: data_dir.display().to_string(),
        ledger_event_seq,
        files,
    };
    write_private(&out.join(MANIFEST_FILE), &serde_json::to_vec_pretty(&manifest)?, written)?;
    sync_dir(out)?;
    Ok(manifest)
}

/// A line on stderr for the operator (not with `--json`, whose stdout is the manifest).
fn note(json_output: bool, line: &str) {
    if !json_output {
        eprintln!("backup: {line}");
    }
}

/// Copies the database `source` to `target` from one read snapshot, checks the copy, and returns the
/// ledger's head seq in it (when it is the ledger). The copy is written as `.<name>.partial` and renamed
/// into place only once it is complete and checked.
fn copy_database(source: &Path, target: &Path, json_output: bool, written: &mut Vec<PathBuf>) -> Result<Option<i64>> {
    let name = target.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
    let partial = target.with_file_name(format!(".{name}.partial"));
    write_private(&partial, b"", written)?;
    let from = Connection::open_with_flags(source, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    from.busy_timeout(Duration::from_millis(SOURCE_BUSY_TIMEOUT_MS))?;
    // The snapshot: a read transaction held across every step, so the copy is one commit's state and a
    // writer in another process (WAL) neither waits on it nor restarts it.
    from.execute_batch("BEGIN DEFERRED")?;
    let seq = snapshot_seq(&from)?;
    let mut to = Connection::open(&partial)?;
    step_to_completion(&Backup::new(&from, &mut to)?, &name, json_output)?;
    from.execute_batch("COMMIT")?;
    let check: String = to.query_row("PRAGMA quick_check", [], |row| row.get(0))?;
    if check != "ok" {
        bail!("the copy of {name} fails SQLite's quick_check: {check}");
    }
    to.close().map_err(|(_, error)| error)?;
    std::fs::File::open(&partial)?.sync_all()?;
    std::fs::rename(&partial, target).with_context(|| format!("renaming {} into place", partial.display()))?;
    written.push(target.to_path_buf());
    Ok(seq)
}

/// Starts the snapshot with its first read: the ledger's head seq, or (another plane's file) its schema.
fn snapshot_seq(from: &Connection) -> Result<Option<i64>> {
    let ledger: bool = from.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'chain_head'",
        [],
        |row| row.get(0),
    )?;
    if !ledger {
        return Ok(None);
    }
    Ok(Some(from.query_row("SELECT seq FROM chain_head WHERE id = 1", [], |row| row.get(0))?))
}

/// Runs the backup a step at a time, reporting pages remaining on stderr at most every second.
fn step_to_completion(backup: &Backup<'_, '_>, name: &str, json_output: bool) -> Result<()> {
    let mut last_report = Instant::now();
    let mut busy_since: Option<Instant> = None;
    loop {
        match backup.step(PAGES_PER_STEP)? {
            StepResult::Done => return Ok(()),
            StepResult::More => busy_since = None,
            _ => {
                let since = *busy_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= Duration::from_millis(BUSY_FOR_MS_MAX) {
                    bail!("{name} stayed locked for {BUSY_FOR_MS_MAX} ms");
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        if last_report.elapsed() >= Duration::from_millis(PROGRESS_EVERY_MS) {
            let progress = backup.progress();
            note(json_output, &format!("{name}: {} of {} pages remaining", progress.remaining, progress.pagecount));
            last_report = Instant::now();
        }
    }
}

/// Writes `bytes` to a new file readable by its owner only (0600), synced; refuses an existing file.
fn write_private(path: &Path, bytes: &[u8], written: &mut Vec<PathBuf>) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    written.push(path.to_path_buf());
    file.write_all(bytes).with_context(|| format!("writing {}", path.display()))?;
    file.sync_all().with_context(|| format!("syncing {}", path.display()))?;
    Ok(())
}

/// The manifest's line for `out/name`: its size and sha256, read back from the copy.
fn entry(out: &Path, name: &str) -> Result<Entry> {
    use sha2::Digest;
    let path = out.join(name);
    let mut file = std::fs::File::open(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut hasher = sha2::Sha256::new();
    let bytes = std::io::copy(&mut file, &mut hasher)?;
    Ok(Entry { file: name.to_string(), bytes, sha256: hex::encode(hasher.finalize()) })
}

/// Makes the renames and new files durable in the directory itself.
fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)?.sync_all().with_context(|| format!("syncing {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::carries_password;

    #[test]
    fn a_password_in_the_url_is_never_echoed() {
        for (url, secret) in [
            ("postgres://postgres@127.0.0.1:5432/postgres", false),
            ("postgres://bazaar:hunter2@db.internal/bazaar", true),
            ("postgres://db.internal/bazaar?user=bazaar", false),
            ("postgres://db.internal/bazaar?password=hunter2", true),
            ("host=db user=bazaar password=hunter2", true),
            ("host=db user=bazaar", false),
        ] {
            assert_eq!(carries_password(url), secret, "{url}");
        }
    }
}
