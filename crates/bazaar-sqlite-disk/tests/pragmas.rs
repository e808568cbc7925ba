//! Plain SQLite on the simulated disk: with `synchronous = FULL` a power cut
//! loses no acknowledged commit; with `NORMAL` or `OFF` (in WAL mode) it does.
//! The disk is honest, so what is lost is what SQLite never synced.

use bazaar_sqlite_disk::{Aim, CutMode, Disk, Rng, Syncs};
use rusqlite::{Connection, OpenFlags};
use std::sync::OnceLock;

/// Cuts per setting.
const RUNS: u64 = 8;
/// Each cut falls on one of the first this many mutating operations.
const CUT_OPS_MAX: u64 = 400;
/// Rows a run inserts at the most, one commit each; the cut comes first.
const ROWS_MAX: i64 = 100_000;

fn disk() -> &'static Disk {
    static DISK: OnceLock<&'static Disk> = OnceLock::new();
    DISK.get_or_init(|| Disk::register("bazaar-sqlite-disk-pragmas"))
}

/// Inserts rows one commit at a time until the power goes; returns how many
/// were acknowledged and how many of those the recovered file has.
fn run(synchronous: &str, seed: u64, mode: CutMode) -> (i64, i64) {
    let mut rng = Rng::new(seed);
    let name = format!("{synchronous}-{seed}-{mode:?}");
    let volume = disk().volume(&name, Syncs::Honoured);
    let conn = Connection::open_with_flags_and_vfs(volume.path("t.db"), OpenFlags::default(), &disk().name).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = {synchronous}; CREATE TABLE t (n INTEGER PRIMARY KEY);"
    ))
    .unwrap();
    volume.flush_all();
    volume.arm(Aim::Any, 1 + rng.below(CUT_OPS_MAX), mode, Rng::new(rng.next_u64()));
    let mut acknowledged = 0;
    for n in 1..=ROWS_MAX {
        if conn.execute("INSERT INTO t VALUES (?1)", [n]).is_err() {
            break;
        }
        acknowledged = n;
    }
    let cut = volume.cut().expect("the cut came before ROWS_MAX rows");
    drop(conn);
    disk().drop_volume(&name);
    let dir = std::env::temp_dir().join(format!("bazaar-sqlite-disk-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    cut.write_image(&dir).unwrap();
    let recovered = Connection::open(dir.join("t.db")).unwrap();
    let integrity: String = recovered.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(integrity, "ok", "{name}");
    let survived: i64 =
        recovered.query_row("SELECT count(*) FROM t WHERE n <= ?1", [acknowledged], |r| r.get(0)).unwrap();
    drop(recovered);
    std::fs::remove_dir_all(&dir).ok();
    (acknowledged, survived)
}

#[test]
fn full_keeps_every_acknowledged_commit() {
    let mut checked = 0;
    for seed in 0..RUNS {
        for mode in [CutMode::Clean, CutMode::Harsh] {
            let (acknowledged, survived) = run("FULL", seed, mode);
            assert_eq!(survived, acknowledged, "seed {seed}, {mode:?}");
            checked += acknowledged;
        }
    }
    assert!(checked > 0, "no cut left an acknowledged commit to check");
}

#[test]
fn normal_and_off_lose_acknowledged_commits() {
    for synchronous in ["NORMAL", "OFF"] {
        let lost: i64 = (0..RUNS)
            .map(|seed| {
                let (acknowledged, survived) = run(synchronous, seed, CutMode::Clean);
                acknowledged - survived
            })
            .sum();
        assert!(lost > 0, "synchronous = {synchronous} lost nothing in {RUNS} cuts");
    }
}
