//! Secrets at rest: the embedded registry's data directory is its owner's alone.
//!
//! The directory holds the registry's signing key (inside `bazaar.db`), every member's hashed
//! credentials, the conversation plane's and the relay's files, and the operator's and the dispute
//! desk's credentials. It is created [`DATA_DIR_MODE`] and every database file [`SECRET_FILE_MODE`]
//! before SQLite opens it (SQLite gives the `-wal` and `-shm` files the database file's mode).
//!
//! `bazaar serve` checks the directory before it opens anything: a directory that holds the registry's
//! files ([`registry_files`]) and is reachable by group or others, or any of those files that is, refuses
//! the start ([`check`]) unless the operator says `--allow-insecure-permissions`, which only warns. A
//! directory that holds none of them yet (say, made by `mkdir`) is tightened to [`DATA_DIR_MODE`] instead:
//! nothing of the registry's in it was exposed.

use anyhow::{bail, Context, Result};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The data directory's mode: its owner reads, writes and enters it; no one else.
pub const DATA_DIR_MODE: u32 = 0o700;
/// Every database file's and secret's mode: its owner reads and writes it; no one else.
pub const SECRET_FILE_MODE: u32 = 0o600;
/// The permission bits group and others may not hold on the directory or on a file in it.
const OTHERS_BITS: u32 = 0o077;

/// The embedded store's file inside the data directory (the ledger, with the registry's signing keys).
pub const SQLITE_FILE: &str = "bazaar.db";
/// The conversation plane's embedded file inside the data directory: apart
/// from the ledger's, so a message never waits on the money writer.
pub const CONVERSATION_FILE: &str = "conversation.db";
/// The relay's embedded file inside the data directory: apart from the
/// ledger's and the conversation plane's, so an event never waits on either writer.
pub const RELAY_FILE: &str = "relay.db";
/// The operator's credential, written (0600) into the data directory on the start that creates the registry.
pub const OPERATOR_CREDENTIAL_FILE: &str = "operator-credential";
/// The dispute desk's credential, written (0600) into the data directory on the start that creates the desk.
pub const DESK_CREDENTIAL_FILE: &str = "desk-credential";

/// The registry's SQLite files in the data directory, the ledger's (with the signing keys) first.
pub const DATABASES: [&str; 3] = [SQLITE_FILE, CONVERSATION_FILE, RELAY_FILE];
/// The credentials `bazaar serve` writes into the data directory on the start that creates each.
pub const SECRETS: [&str; 2] = [OPERATOR_CREDENTIAL_FILE, DESK_CREDENTIAL_FILE];
/// What SQLite keeps beside a database file (its write-ahead log and shared-memory index).
const JOURNAL_SUFFIXES: [&str; 3] = ["", "-wal", "-shm"];

/// Every file of the registry's that can sit in the data directory: the databases with their journals, and
/// the credentials. These, and the directory, are what [`check`] holds to [`SECRET_FILE_MODE`].
pub fn registry_files() -> Vec<String> {
    let databases = DATABASES.iter().flat_map(|db| JOURNAL_SUFFIXES.iter().map(move |suffix| format!("{db}{suffix}")));
    databases.chain(SECRETS.iter().map(|s| s.to_string())).collect()
}

/// Creates `dir` (and any missing parent) with [`DATA_DIR_MODE`] if it is absent.
pub fn create(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DATA_DIR_MODE)
        .create(dir)
        .with_context(|| format!("creating the data directory {}", dir.display()))
}

/// Creates the database file `path` empty with [`SECRET_FILE_MODE`] if it is absent, so SQLite opens a
/// private file (and gives its journal files the same mode) instead of creating one by the umask.
pub fn create_private_file(path: &Path) -> Result<()> {
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(SECRET_FILE_MODE).open(path) {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(error).with_context(|| format!("creating {}", path.display())),
    }
}

/// `dir/file` for a database file of the registry's: the directory created [`DATA_DIR_MODE`] and the file
/// [`SECRET_FILE_MODE`] when absent.
pub fn private_file(dir: &Path, file: &str) -> Result<PathBuf> {
    create(dir)?;
    let path = dir.join(file);
    create_private_file(&path)?;
    Ok(path)
}

/// The data directory or a file in it that group or others may reach, with its mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposed {
    pub path: PathBuf,
    pub mode: u32,
}

/// What `bazaar serve` found in the data directory before opening it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// Absent, or the owner's alone.
    Private,
    /// It held no file of the registry's and was reachable by others; it is now [`DATA_DIR_MODE`].
    Tightened { was: u32 },
    /// It holds the registry's files, and these (or the directory) are reachable by group or others.
    Exposed(Vec<Exposed>),
}

fn mode_of(path: &Path) -> Result<u32> {
    Ok(std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?.permissions().mode() & 0o7777)
}

/// Looks at `dir` before a registry opens it: see [`Checked`]. The directory and the registry's own files in
/// it ([`registry_files`]) are looked at; a file of someone else's there (an agent's state, a note) is theirs.
pub fn check(dir: &Path) -> Result<Checked> {
    if !dir.exists() {
        return Ok(Checked::Private);
    }
    let dir_mode = mode_of(dir)?;
    let present: Vec<PathBuf> =
        registry_files().into_iter().map(|name| dir.join(name)).filter(|path| path.is_file()).collect();
    if present.is_empty() {
        if dir_mode & OTHERS_BITS == 0 {
            return Ok(Checked::Private);
        }
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DATA_DIR_MODE))
            .with_context(|| format!("making {} private (mode {DATA_DIR_MODE:o})", dir.display()))?;
        return Ok(Checked::Tightened { was: dir_mode });
    }
    let mut exposed = Vec::new();
    if dir_mode & OTHERS_BITS != 0 {
        exposed.push(Exposed { path: dir.to_path_buf(), mode: dir_mode });
    }
    for path in present {
        let mode = mode_of(&path)?;
        if mode & OTHERS_BITS != 0 {
            exposed.push(Exposed { path, mode });
        }
    }
    Ok(if exposed.is_empty() { Checked::Private } else { Checked::Exposed(exposed) })
}

/// The refusal (or, with `allow`, the warning) for what [`check`] found exposed: what, why it matters,
/// and the commands that fix it.
pub fn explain(dir: &Path, exposed: &[Exposed]) -> String {
    let listed: Vec<String> = exposed.iter().map(|e| format!("  {} (mode {:o})", e.path.display(), e.mode)).collect();
    let fixes: Vec<String> = exposed
        .iter()
        .map(|e| {
            let mode = if e.path == dir { DATA_DIR_MODE } else { SECRET_FILE_MODE };
            format!("chmod {mode:o} '{}'", e.path.display())
        })
        .collect();
    format!(
        "the data directory {} holds the registry's signing key and credentials, and group or others can reach:\n{}\n\
         Make them private ({}), or start with --allow-insecure-permissions to run anyway.",
        dir.display(),
        listed.join("\n"),
        fixes.join("; ")
    )
}

/// `bazaar serve`'s gate: refuses an exposed data directory unless `allow`, which warns on stderr instead.
pub fn guard(dir: &Path, allow: bool) -> Result<()> {
    match check(dir)? {
        Checked::Private => Ok(()),
        Checked::Tightened { was } => {
            tracing::info!(
                dir = %dir.display(),
                was = format!("{was:o}"),
                now = format!("{DATA_DIR_MODE:o}"),
                "the data directory held no registry file yet; made it private"
            );
            Ok(())
        }
        Checked::Exposed(exposed) if allow => {
            eprintln!("WARNING (--allow-insecure-permissions): {}", explain(dir, &exposed));
            tracing::warn!(dir = %dir.display(), files = exposed.len(), "serving from a data directory others can read");
            Ok(())
        }
        Checked::Exposed(exposed) => bail!("{}", explain(dir, &exposed)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bazaar-data-dir-{name}-{}", std::process::id()));
        std::fs::remove_dir_all(&dir).ok();
        dir
    }

    #[test]
    fn a_new_directory_and_its_files_are_private() {
        let dir = scratch("new").join("nested");
        create(&dir).unwrap();
        assert_eq!(mode_of(&dir).unwrap(), DATA_DIR_MODE);
        create_private_file(&dir.join(SQLITE_FILE)).unwrap();
        assert_eq!(mode_of(&dir.join(SQLITE_FILE)).unwrap(), SECRET_FILE_MODE);
        assert_eq!(check(&dir).unwrap(), Checked::Private);
        std::fs::remove_dir_all(dir.parent().unwrap()).ok();
    }

    #[test]
    fn an_empty_open_directory_is_tightened_and_a_registry_in_one_is_refused() {
        let dir = scratch("open");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(check(&dir).unwrap(), Checked::Tightened { was: 0o755 });
        assert_eq!(mode_of(&dir).unwrap(), DATA_DIR_MODE);

        create_private_file(&dir.join(SQLITE_FILE)).unwrap();
        std::fs::set_permissions(dir.join(SQLITE_FILE), std::fs::Permissions::from_mode(0o644)).unwrap();
        let Checked::Exposed(exposed) = check(&dir).unwrap() else { panic!("a world-readable ledger passed") };
        assert_eq!(exposed, vec![Exposed { path: dir.join(SQLITE_FILE), mode: 0o644 }]);
        let refusal = guard(&dir, false).unwrap_err().to_string();
        assert!(refusal.contains("chmod 600") && refusal.contains("--allow-insecure-permissions"), "{refusal}");
        guard(&dir, true).unwrap();

        // A file of someone else's in the directory is theirs; the registry's own files are what count.
        std::fs::set_permissions(dir.join(SQLITE_FILE), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(dir.join("asker-state.json"), "{}").unwrap();
        std::fs::set_permissions(dir.join("asker-state.json"), std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(check(&dir).unwrap(), Checked::Private);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn the_registry_files_are_the_databases_with_their_journals_and_the_credentials() {
        let files = registry_files();
        for name in
            ["bazaar.db", "bazaar.db-wal", "conversation.db-shm", "relay.db", "operator-credential", "desk-credential"]
        {
            assert!(files.iter().any(|f| f == name), "{name} in {files:?}");
        }
    }
}
