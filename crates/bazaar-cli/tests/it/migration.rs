//! A ledger written by the previous build (issue 5, commit 4489f75: `bazaar
//! demo` kept on disk, WAL checkpointed) opens with this build: it migrates,
//! `bazaar audit` passes (the hash chain, every balance, and every recorded
//! passport's figures against reputation's fold over typed events), and every
//! stored document decodes through its capability's body type although none
//! carries a version.

use bazaar_core::dispute::{Dispute, Stake};
use bazaar_core::escrow::Contract;
use bazaar_core::federation::{ImportRecord, Peer};
use bazaar_core::kernel::docs::{decode, Document, VERSION_FIELD};
use bazaar_core::market::order::{Order, OrderPolicy};
use bazaar_core::market::{Listing, Rfq};
use bazaar_core::model::{DocKind, DocRow};
use std::path::{Path, PathBuf};
use std::process::Command;

const FIXTURE: &str = "tests/fixtures/ledger-issue5/bazaar.db";

fn copy_fixture(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bazaar-migration-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    std::fs::copy(fixture, dir.join(bazaar_cli::runtime::SQLITE_FILE)).unwrap();
    dir
}

fn decodes<T: Document>(row: &DocRow) {
    assert!(row.body.get(VERSION_FIELD).is_none(), "the fixture predates versions");
    decode::<T>(row).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_ledger_written_by_the_previous_build_audits_clean() {
    let dir = copy_fixture("audit");
    let output =
        Command::new(env!("CARGO_BIN_EXE_bazaar")).args(["audit", "--json", "--data-dir"]).arg(&dir).output().unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{report}\n{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["events_verified"], 120, "{report}");
    assert_eq!(report["passports_checked"], 1, "the recorded passport matches the typed fold: {report}");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn its_documents_decode_as_this_builds_types() {
    let dir = copy_fixture("docs");
    let clock = std::sync::Arc::new(bazaar_types::ManualClock::new(bazaar_types::Timestamp(0)));
    let path = dir.join(bazaar_cli::runtime::SQLITE_FILE);
    let store = bazaar_store_sqlite::SqliteStore::open(&path, bazaar_core::apply::Config::standard(), clock).unwrap();
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let migrated: i64 =
        conn.query_row("SELECT count(*) FROM schema_migrations WHERE name = '0007_blobs'", [], |r| r.get(0)).unwrap();
    assert_eq!(migrated, 1, "the blob table migration ran");
    let mut rows = conn.prepare("SELECT kind, id, body, due_at, parties FROM docs").unwrap();
    let rows: Vec<DocRow> = rows
        .query_map([], |r| {
            let kind: String = r.get(0)?;
            let body: String = r.get(2)?;
            let parties: String = r.get(4)?;
            Ok(DocRow {
                kind: DocKind::parse(&kind).unwrap(),
                id: r.get(1)?,
                body: serde_json::from_str(&body).unwrap(),
                due_at: r.get::<_, Option<i64>>(3)?.map(bazaar_types::Timestamp),
                parties: serde_json::from_str(&parties).unwrap(),
            })
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut kinds = std::collections::BTreeSet::new();
    for row in &rows {
        kinds.insert(row.kind.as_str());
        match row.kind {
            DocKind::Contract => decodes::<Contract>(row),
            DocKind::Dispute => decodes::<Dispute>(row),
            DocKind::Stake => decodes::<Stake>(row),
            DocKind::Peer => decodes::<Peer>(row),
            DocKind::Import => decodes::<ImportRecord>(row),
            DocKind::Listing => decodes::<Listing>(row),
            DocKind::Rfq => decodes::<Rfq>(row),
            DocKind::Order => decodes::<Order>(row),
            DocKind::Policy => decodes::<OrderPolicy>(row),
            // Receipt images from before the blob table stay readable documents.
            DocKind::Blob => assert!(row.body["base64"].is_string()),
            DocKind::Relay => decodes::<bazaar_core::federation::Relay>(row),
            // Kinds newer than the fixture: none of its rows can be one.
            DocKind::Bounty
            | DocKind::Reward
            | DocKind::ServiceAuthorization
            | DocKind::Hire
            | DocKind::Lease
            | DocKind::Terms
            | DocKind::Recovery
            | DocKind::Netting => {
                panic!("the fixture predates bounties")
            }
        }
    }
    let expected = ["blob", "contract", "dispute", "import", "listing", "order", "peer", "policy", "rfq", "stake"];
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), expected);
    std::fs::remove_dir_all(&dir).ok();
}
