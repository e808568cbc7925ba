//! Restore from a backup taken under load (issue 16): a real `bazaar serve`
//! takes paid calls from concurrent workers while it is backed up — with
//! `bazaar backup` on the embedded store, with `pg_dump` on PostgreSQL. The
//! restored copy passes `bazaar audit`, holds a prefix of the source's ledger
//! (its head between the source's heads when the backup began and when it
//! ended, with commits landing in between), and served again it is the same registry: its DID and key history
//! (a rotated key included), a passport issued before the backup still
//! verifies, the operator's, the desk's and the members' credentials work, and
//! its current key signs tokens that settle.
// reason: an end-to-end test reads as one story of requests and the checks after each.
#![allow(clippy::too_many_lines)]

use crate::common;

use bazaar_cli::wire_json;
use bazaar_sdk::Client;
use bazaar_stage::enroll_pair;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const OPERATOR: &str = "backup-operator";
const WORKERS: usize = 6;
/// Settlements acknowledged before the backup starts, so it is taken under load.
const PAID_BEFORE_BACKUP: usize = 40;
const PRICE: u64 = 100;
const FUNDS: u64 = 10_000_000;

/// The members the load runs between, and what the registry was before the backup.
struct Cast {
    buyer: Client,
    shop: Client,
    /// The shop's passport, issued (and the key rotated after it) before the backup.
    passport: bazaar_sdk::wire::federation::Passport,
    card_did: Value,
    keys: Value,
}

fn serve(port: u16, store_args: &[String]) -> Child {
    let mut args: Vec<String> =
        ["--port", &port.to_string(), "--operator-credential", OPERATOR].map(String::from).to_vec();
    args.extend_from_slice(store_args);
    common::spawn_serve(&args)
}

fn stop(mut server: Child) {
    server.kill().unwrap();
    server.wait().unwrap();
}

/// One complete paid call: a token for `order`, settled by the shop.
async fn pay(buyer: &Client, shop: &Client, order: &str) {
    common::retry(order, || async {
        let token = buyer.issue_token("bk-shop", PRICE, order, "https://shop/backup").await?;
        shop.settle(token.body.token.as_str(), PRICE, order, None).await
    })
    .await;
}

/// Enrols a buyer and a shop, pays a few calls, issues the shop's passport and rotates the registry's key.
async fn set_up(url: &str) -> Cast {
    let operator = Client::new(url, Some(OPERATOR.into()));
    let (owner, buyer) = enroll_pair(&operator, "bk-owner", "bk-buyer").await.unwrap();
    let (_, shop) = enroll_pair(&operator, "bk-shop-owner", "bk-shop").await.unwrap();
    let funding =
        common::Funding { mint: (FUNDS, "bk-mint"), fund: (FUNDS, "bk-fund"), budget: [10_000, FUNDS, FUNDS] };
    common::fund_agent(&operator, &owner, "bk-buyer", funding).await;
    for n in 0..3 {
        pay(&buyer, &shop, &format!("early-{n}")).await;
    }
    let passport = shop.passport(None).await.unwrap();
    operator.rotate_key().await.unwrap();
    let keys = wire_json(&operator.key_history().await.unwrap());
    assert_eq!(keys["keys"].as_array().unwrap().len(), 2, "the backup carries a rotated key");
    let card_did = wire_json(&operator.well_known().await.unwrap())["did"].clone();
    Cast { buyer, shop, passport, card_did, keys }
}

/// Buyers paying calls until stopped; `paid` counts the acknowledged ones.
struct Load {
    stop: Arc<AtomicBool>,
    paid: tokio::sync::watch::Receiver<usize>,
    workers: Vec<tokio::task::JoinHandle<()>>,
}

fn start_load(cast: &Cast) -> Load {
    let stop = Arc::new(AtomicBool::new(false));
    let (count, paid) = tokio::sync::watch::channel(0usize);
    let count = Arc::new(count);
    let workers = (0..WORKERS)
        .map(|w| {
            let (buyer, shop, stop, count) = (cast.buyer.clone(), cast.shop.clone(), stop.clone(), count.clone());
            tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    pay(&buyer, &shop, &format!("w{w}-{n}")).await;
                    count.send_modify(|c| *c += 1);
                }
            })
        })
        .collect();
    Load { stop, paid, workers }
}

impl Load {
    async fn wait_for(&mut self, paid: usize) {
        self.paid.wait_for(|n| *n >= paid).await.unwrap();
    }

    async fn finish(self) {
        self.stop.store(true, Ordering::SeqCst);
        for worker in self.workers {
            worker.await.unwrap();
        }
    }
}

/// The ledger's head as `/healthz` reports it.
async fn head_seq(url: &str) -> u64 {
    let health: Value = reqwest::get(format!("{url}/healthz")).await.unwrap().json().await.unwrap();
    health["event_seq"].as_u64().unwrap()
}

/// Runs `program args` off the async threads.
async fn run(program: PathBuf, args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || Command::new(&program).args(&args).output().unwrap()).await.unwrap()
}

fn bazaar() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_bazaar"))
}

/// `bazaar --json audit <store>`: asserts it passed and returns its report.
async fn audit(store_args: &[String]) -> Value {
    let mut args = vec!["--json".to_string(), "audit".into()];
    args.extend_from_slice(store_args);
    let output = run(bazaar(), args).await;
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    assert!(output.status.success() && report["ok"] == true, "audit failed: {report}");
    report
}

/// The source's ledger head when its backup began and once the backup had ended.
#[derive(Debug, Clone, Copy)]
struct Taken {
    began: u64,
    ended: u64,
}

/// Serves a registry on `store_args`, sets it up, and runs `back_up` while buyers pay calls (and commits
/// land during it); then one call more, and the server stops. Returns the cast, when the backup was taken,
/// the source's audit, and what `back_up` answered.
async fn back_up_under_load<T, F, Fut>(store_args: &[String], back_up: F) -> (Cast, Taken, Value, T)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let port = common::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let server = serve(port, store_args);
    let cast = set_up(&url).await;
    let mut load = start_load(&cast);
    load.wait_for(PAID_BEFORE_BACKUP).await;
    let began = head_seq(&url).await;
    let answer = back_up().await;
    let taken = Taken { began, ended: head_seq(&url).await };
    assert!(taken.ended > taken.began, "calls were paid while the backup ran: {taken:?}");
    pay(&cast.buyer, &cast.shop, "after-backup").await;
    load.finish().await;
    stop(server);
    let source = audit(store_args).await;
    (cast, taken, source, answer)
}

/// The restored store passes the audit with its head within `taken` (so before the source's last, paid
/// after the backup); served again it is the registry backed up: same DID and key history, the passport
/// verifies, the credential files in `restored` (its data directory) and the members' credentials work,
/// balances follow its own settlements, and its current key signs tokens that settle. Stopped, it passes
/// the audit again. Returns its first audit.
async fn check_restored(restored_args: &[String], restored: &Path, cast: &Cast, taken: Taken, source: &Value) -> Value {
    let report = audit(restored_args).await;
    let (head, last) = (report["head_seq"].as_u64().unwrap(), source["head_seq"].as_u64().unwrap());
    assert!(report["events_verified"].as_u64().unwrap() > 0);
    assert!(taken.began <= head && head <= taken.ended && head < last, "copy at {head}: {taken:?}, source {last}");
    let port = common::free_port();
    let server = serve(port, restored_args);
    let url = format!("http://127.0.0.1:{port}");
    let operator = Client::new(&url, Some(read_secret(&restored.join("operator-credential"))));
    assert_eq!(wire_json(&operator.well_known().await.unwrap())["did"], cast.card_did, "the same registry DID");
    assert_eq!(wire_json(&operator.key_history().await.unwrap()), cast.keys, "the same key history");
    let verdict = wire_json(&operator.verify_passport(&cast.passport).await.unwrap());
    assert_eq!((&verdict["valid"], &verdict["local"]), (&Value::Bool(true), &Value::Bool(true)), "{verdict}");
    let desk = Client::new(&url, Some(read_secret(&restored.join("desk-credential"))));
    assert_eq!(wire_json(&desk.me().await.unwrap())["member"]["id"], bazaar_core::model::DESK_ID);
    let (buyer, shop) = (at(&cast.buyer, &url), at(&cast.shop, &url));
    let settled = common::count_events(&operator, "settlement.posted").await as u64;
    let balance = buyer.me().await.unwrap().balance_minor.unwrap_or(0);
    assert_eq!(balance, (FUNDS - settled * PRICE) as i64, "one debit per settlement the copy holds");
    pay(&buyer, &shop, "after-restore").await;
    assert_eq!(common::count_events(&operator, "settlement.posted").await as u64, settled + 1);
    stop(server);
    audit(restored_args).await;
    report
}

fn read_secret(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap().trim().to_string()
}

/// The same member's credential, against the registry at `url`.
fn at(client: &Client, url: &str) -> Client {
    Client::new(url, client.credential().map(str::to_string))
}

/// A directory only its owner may enter (mode 0700), as a data directory must be.
fn private_dir(dir: &Path) {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_taken_under_load_restores_the_same_registry_on_sqlite() {
    let dir = common::fresh_dir("bazaar-backup");
    let (data, copy, restored) = (dir.join("data"), dir.join("backup"), dir.join("restored"));
    let data_args = vec!["--data-dir".to_string(), data.display().to_string()];
    let backup_args: Vec<String> =
        ["backup", "--data-dir", &data.display().to_string(), "--to", &copy.display().to_string()]
            .map(String::from)
            .to_vec();
    let json_args = [vec!["--json".to_string()], backup_args.clone()].concat();
    let (cast, taken, source, output) = back_up_under_load(&data_args, || run(bazaar(), json_args)).await;
    assert!(output.status.success(), "backup failed: {}", String::from_utf8_lossy(&output.stderr));
    let manifest: Value = serde_json::from_slice(&output.stdout).unwrap();

    // The manifest names every file, each 0600, with its size and hash.
    let names: Vec<&str> = manifest["files"].as_array().unwrap().iter().map(|f| f["file"].as_str().unwrap()).collect();
    assert_eq!(names, ["bazaar.db", "conversation.db", "relay.db", "operator-credential", "desk-credential"]);
    for file in manifest["files"].as_array().unwrap() {
        let path = copy.join(file["file"].as_str().unwrap());
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, file["bytes"].as_u64().unwrap(), "{path:?}");
        assert_eq!(bazaar_core::crypto::sha256_hex(&bytes), file["sha256"].as_str().unwrap(), "{path:?}");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600, "{path:?}");
    }
    // A second backup into the same directory is refused.
    let again = run(bazaar(), backup_args).await;
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("is not empty"), "{again:?}");

    // Restore: the manifest's files into a fresh data directory, private as docs/operators.md restores it
    // (`install -d -m 0700`; `bazaar serve` refuses a directory others can reach).
    private_dir(&restored);
    for name in names {
        std::fs::copy(copy.join(name), restored.join(name)).unwrap();
    }
    let restored_args = vec!["--data-dir".to_string(), restored.display().to_string()];
    let report = check_restored(&restored_args, &restored, &cast, taken, &source).await;
    assert_eq!(report["head_seq"], manifest["ledger_event_seq"], "the manifest names the copy's head");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn backup_refuses_postgres_and_a_missing_store() {
    let dir = common::fresh_dir("bazaar-backup-refusals");
    let out = dir.join("out").display().to_string();
    let postgres = Command::new(bazaar())
        .args(["backup", "--database-url", "postgres://bazaar:hunter2@db.internal/bazaar", "--to", &out])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&postgres.stderr);
    assert_eq!(postgres.status.code(), Some(2));
    assert!(said.contains("pg_dump --format=custom --file=bazaar.pgdump --dbname=\"$BAZAAR_DATABASE_URL\""), "{said}");
    assert!(!said.contains("hunter2"), "the password is never echoed: {said}");
    let empty = dir.join("empty").display().to_string();
    let missing = Command::new(bazaar()).args(["backup", "--data-dir", &empty, "--to", &out]).output().unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("nothing to back up"));
    assert!(!dir.join("out").exists(), "a failed backup leaves no directory behind");
    std::fs::remove_dir_all(&dir).ok();
}

/// `pg_dump` or `pg_restore`: on the PATH, else Debian's PostgreSQL 15 binaries.
fn postgres_tool(name: &str) -> PathBuf {
    let debian = PathBuf::from(format!("/usr/lib/postgresql/15/bin/{name}"));
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file());
    on_path.or_else(|| debian.is_file().then_some(debian)).unwrap_or_else(|| panic!("{name} is not installed"))
}

async fn run_tool(name: &str, args: Vec<String>) {
    let output = run(postgres_tool(name), args).await;
    assert!(output.status.success(), "{name} failed: {}", String::from_utf8_lossy(&output.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pg_dump_taken_under_load_restores_the_same_registry_on_postgres() {
    let pid = std::process::id();
    let dir = common::fresh_dir("bazaar-backup-pg");
    let (data, restored, dump) = (dir.join("data"), dir.join("restored"), dir.join("bazaar.pgdump"));
    let source_db = common::ThrowawayDatabase::create(&format!("bazaar_backup_source_{pid}")).await;
    let store_args = |url: &str, data_dir: &Path| {
        vec!["--database-url".to_string(), url.to_string(), "--data-dir".into(), data_dir.display().to_string()]
    };
    let dump_args = ["--format=custom", &format!("--file={}", dump.display()), &format!("--dbname={}", source_db.url)];
    let pg_dump = run_tool("pg_dump", dump_args.map(String::from).to_vec());
    let (cast, taken, source, ()) = back_up_under_load(&store_args(&source_db.url, &data), || pg_dump).await;

    // Restore: the dump into a fresh database, the credential files into a fresh data directory.
    let restored_db = common::ThrowawayDatabase::create(&format!("bazaar_backup_restored_{pid}")).await;
    let dbname = format!("--dbname={}", restored_db.url);
    let restore_args = ["--exit-on-error", "--no-owner", &dbname, &dump.display().to_string()];
    run_tool("pg_restore", restore_args.map(String::from).to_vec()).await;
    private_dir(&restored);
    for name in ["operator-credential", "desk-credential"] {
        std::fs::copy(data.join(name), restored.join(name)).unwrap();
    }
    check_restored(&store_args(&restored_db.url, &restored), &restored, &cast, taken, &source).await;
    source_db.drop().await;
    restored_db.drop().await;
    std::fs::remove_dir_all(&dir).ok();
}
