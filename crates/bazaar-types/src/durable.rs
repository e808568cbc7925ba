//! Making a newly created file's directory entry durable.
//!
//! SQLite syncs the directory when it creates a WAL, not when it creates the
//! database file itself: until its parent directory is synced, a power cut
//! soon after first start could lose the new file and every commit
//! acknowledged in it. Every embedded store calls this once, right after it
//! created its database.

use std::path::Path;

/// Fsyncs `path`'s parent directory (the current directory for a bare name).
pub fn sync_parent_dir(path: &Path) -> std::io::Result<()> {
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    std::fs::File::open(parent)?
        .sync_all()
        .map_err(|e| std::io::Error::new(e.kind(), format!("syncing {}: {e}", parent.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syncs_a_real_directory_and_refuses_a_missing_one() {
        let dir = std::env::temp_dir().join(format!("bazaar-durable-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        sync_parent_dir(&dir.join("new.db")).unwrap();
        let missing = dir.join("gone").join("new.db");
        assert!(sync_parent_dir(&missing).is_err(), "a parent that does not exist is an error, not a silent no-op");
        std::fs::remove_dir_all(&dir).ok();
    }
}
