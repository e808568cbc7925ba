//! Runs the shared conformance suite against the PostgreSQL adapter, one fresh
//! database per case. Fails (never skips) when PostgreSQL is unreachable.

use bazaar_core::command::Command;
use bazaar_core::refusal::Code;
use bazaar_postgres_testing::{admin_url, with_database};
use bazaar_store::conformance::{self, Fixture};
use bazaar_store::Store;
use bazaar_store_postgres::PostgresStore;
use bazaar_types::{ManualClock, MemberId, OrderId, Timestamp, TokenId};
use ed25519_dalek::SigningKey;
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio_postgres::NoTls;

async fn admin() -> tokio_postgres::Client {
    let url = admin_url();
    let (client, connection) = tokio_postgres::connect(&url, NoTls)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL must be reachable at {url}: {e}"));
    tokio::spawn(connection);
    client
}

/// Drops this run's databases when the test ends, even by panic.
struct Cleanup(Arc<Mutex<Vec<String>>>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let names = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        // A thread of its own: this may run inside the test's runtime.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let Ok((client, connection)) = tokio_postgres::connect(&admin_url(), NoTls).await else {
                    return;
                };
                tokio::spawn(connection);
                for name in names {
                    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                    if let Err(e) = client.batch_execute(&sql).await {
                        eprintln!("could not drop {name}: {e}");
                    }
                }
            });
        })
        .join();
    }
}

/// A fresh database named for this run and `suffix`: its URL, and the guard that drops it.
async fn fresh_database(admin: &tokio_postgres::Client, suffix: &str) -> (String, Cleanup) {
    let name = format!("bazaar_conf_{}_{suffix}", std::process::id());
    let cleanup = Cleanup(Arc::new(Mutex::new(vec![name.clone()])));
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    (with_database(&admin_url(), &name), cleanup)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_passes_the_conformance_suite() {
    let admin = Arc::new(admin().await);
    let created = Arc::new(Mutex::new(Vec::new()));
    let _cleanup = Cleanup(created.clone());
    let counter = Arc::new(AtomicU64::new(0));
    bazaar_store::conformance::run_all(move |config, clock| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        let name = format!("bazaar_conf_{}_{n}", std::process::id());
        let (admin, created) = (admin.clone(), created.clone());
        Box::pin(async move {
            admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
            admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
            created.lock().unwrap().push(name.clone());
            let url = with_database(&admin_url(), &name);
            let store = PostgresStore::connect(&url, config, clock).await.unwrap();
            Arc::new(store) as Arc<dyn Store>
        })
    })
    .await;
}

/// Two nodes on one database: they migrate at the same moment, then race to
/// settle one token through two writers. The lock on `chain_head` must let
/// exactly one settle and keep one unbroken event chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_share_one_database() {
    let admin = admin().await;
    let (url, _cleanup) = fresh_database(&admin, "nodes").await;
    let key = SigningKey::from_bytes(&[42u8; 32]);
    let config = conformance::test_config();
    let clock = Arc::new(ManualClock::new(conformance::EPOCH));
    let (a, b) = tokio::join!(
        PostgresStore::connect(&url, config.clone(), clock.clone()),
        PostgresStore::connect(&url, config.clone(), clock.clone()),
    );
    let (a, b): (Arc<dyn Store>, Arc<dyn Store>) = (Arc::new(a.unwrap()), Arc::new(b.unwrap()));
    assert_eq!(a.registry_key_seed([7u8; 32]).await.unwrap(), [7u8; 32]);
    assert_eq!(b.registry_key_seed([8u8; 32]).await.unwrap(), [7u8; 32]);

    let f = Arc::new(Fixture::new(a.clone(), clock, key).await);
    let (_, buyer, merchant) = f.cast(10_000, [1_000, 5_000, 10_000]).await;
    let claims = f.token(&buyer, &merchant, 250, "race").await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..RACERS {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        let (f, merchant, claims) = (f.clone(), merchant.clone(), claims.clone());
        tasks.push(tokio::spawn(async move {
            let command = Command {
                actor: merchant.clone(),
                idem: f.idem(&format!("{}:settle", merchant.id), &format!("k{i}"), "fp"),
                op: f.settle_op(&claims, 250),
            };
            store.submit(command).await.unwrap().outcome
        }));
    }
    let mut settled = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => settled += 1,
            Err(refusal) => assert_eq!(refusal.code, Code::TokenSettled),
        }
    }
    assert_eq!(settled, 1);
    assert_eq!(a.head().await.unwrap(), b.head().await.unwrap());
    let report = bazaar_store::audit::audit(b.as_ref(), &|_| {}).await.unwrap();
    assert!(report.ok, "{:?}", report.problems);
}

/// Settle attempts raced across the two nodes.
const RACERS: usize = 32;

/// The settle-key migration over records the previous build wrote (see
/// `conformance::settle_keys_migrate`): the reopen forgets that 0010 ran, so
/// it runs again over them as an upgrade would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_migrates_settle_keys_to_name_the_token() {
    let admin = admin().await;
    let (url, _cleanup) = fresh_database(&admin, "settle_keys").await;
    let config = conformance::test_config();
    let clock = Arc::new(ManualClock::new(conformance::EPOCH));
    let store = Arc::new(PostgresStore::connect(&url, config.clone(), clock.clone()).await.unwrap()) as Arc<dyn Store>;
    let fixture = Fixture::new(store, clock.clone(), SigningKey::from_bytes(&[42u8; 32])).await;
    conformance::settle_keys_migrate(fixture, move |store| {
        Box::pin(async move {
            drop(store);
            let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
            tokio::spawn(connection);
            let forgot = client
                .execute("DELETE FROM schema_migrations WHERE name = '0010_settle_keys_name_the_token'", &[])
                .await
                .unwrap();
            assert_eq!(forgot, 1, "0010 had run on the fresh database");
            Arc::new(PostgresStore::connect(&url, config, clock).await.unwrap()) as Arc<dyn Store>
        })
    })
    .await;
}

/// How many times (200 ms apart) the footprint measure vacuums and measures, waiting for two measures to agree.
const SNAPSHOT_WAIT_TRIES: usize = 50;

/// A paid call's lasting footprint on PostgreSQL (every relation's size after `VACUUM FULL`, which is what the
/// rows take once autovacuum has let pruned and updated rows' space be reused) stays under
/// `PAID_CALL_STORED_BYTES_MAX` once the idempotency window is pruned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paid_call_leaves_a_bounded_footprint() {
    use conformance::{PAID_CALL_STORED_BYTES_GOAL, PAID_CALL_STORED_BYTES_MAX};
    let admin = admin().await;
    let (url, _cleanup) = fresh_database(&admin, "footprint").await;
    let config = conformance::test_config();
    let clock = Arc::new(ManualClock::new(conformance::EPOCH));
    let store = Arc::new(PostgresStore::connect(&url, config, clock.clone()).await.unwrap()) as Arc<dyn Store>;
    let fixture = Fixture::new(store, clock, SigningKey::from_bytes(&[42u8; 32])).await;
    let per_call = conformance::paid_call_footprint(fixture, move || {
        let url = url.clone();
        Box::pin(async move {
            let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
            tokio::spawn(connection);
            // VACUUM FULL keeps rows that a snapshot taken before they were deleted could still see, and a
            // session in another database can hold one too: another test creating its database, migrating or
            // filling it (seen in `pg_stat_activity` when this measure counted the pruned records). So vacuum
            // when no other session holds a snapshot, and until two measures agree.
            let snapshots = "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() \
                             AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)";
            let sql = "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c \
                       JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname = 'public'";
            let mut total = u64::MAX;
            for _ in 0..SNAPSHOT_WAIT_TRIES {
                if client.query_one(snapshots, &[]).await.unwrap().get::<_, i64>(0) > 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    continue;
                }
                client.batch_execute("VACUUM FULL").await.unwrap();
                let now = client.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) as u64;
                if now == total {
                    break;
                }
                total = now;
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            if total == u64::MAX {
                // Never quiet: measure anyway (the bound then fails loudly rather than the measure hanging).
                client.batch_execute("VACUUM FULL").await.unwrap();
                total = client.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) as u64;
            }
            // Where the bytes are, largest first (tables with their indexes), for the figures in BENCHMARKS.md.
            let sql = "SELECT c.relname::text, pg_total_relation_size(c.oid)::bigint FROM pg_class c \
                       JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname = 'public' \
                       ORDER BY 2 DESC LIMIT 8";
            for row in client.query(sql, &[]).await.unwrap() {
                eprintln!("  {}: {} bytes", row.get::<_, String>(0), row.get::<_, i64>(1));
            }
            total
        })
    })
    .await;
    eprintln!("postgres: {per_call:.0} bytes per paid call after the window (goal {PAID_CALL_STORED_BYTES_GOAL})");
    assert!(per_call <= PAID_CALL_STORED_BYTES_MAX, "{per_call:.0} bytes per paid call");
    assert!(per_call > 0.0, "the calls left their records");
}

/// Every ledger view as its rows read (each cell as text, event bodies unpacked), in order.
async fn ledger_rows(client: &tokio_postgres::Client, body_is_packed: bool) -> Vec<String> {
    let mut out = Vec::new();
    for (table, order) in
        [("events", "seq"), ("transfers", "pos"), ("tokens", "jti"), ("settlements", "id"), ("holds", "id")]
    {
        let body = if table == "events" && body_is_packed { ", encode(body, 'hex') AS packed" } else { "" };
        let sql = format!("SELECT to_jsonb(x)::text{body} FROM {table} x ORDER BY {order}");
        for row in client.query(&sql, &[]).await.unwrap() {
            let mut cells: serde_json::Map<String, serde_json::Value> = serde_json::from_str(row.get(0)).unwrap();
            if body_is_packed && table == "events" {
                let packed = hex::decode(row.get::<_, String>(1)).unwrap();
                cells.insert("body".into(), bazaar_store::packed::unpack_text(&packed).unwrap().into());
            }
            out.push(format!("{table}: {}", serde_json::Value::Object(cells)));
        }
    }
    out
}

/// The schema as the previous build left it: every migration before 0013, recorded as applied.
async fn schema_before_compact(client: &tokio_postgres::Client) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    client
        .batch_execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)")
        .await
        .unwrap();
    for file in files.iter().filter(|f| f.file_name().unwrap().to_str().unwrap() < "0013") {
        client.batch_execute(&std::fs::read_to_string(file).unwrap()).await.unwrap();
        let name = file.file_stem().unwrap().to_str().unwrap().to_string();
        client.execute("INSERT INTO schema_migrations VALUES ($1, 0)", &[&name]).await.unwrap();
    }
}

/// Migration 0013 over rows the 0012 schema holds: every row reads back through the old names as it was (event
/// bodies as the same JSON text, `prev_hash` from the row before), and through the store; ids that are not
/// derivable are kept; the database still refuses changes to history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_rows_read_back_as_the_rows_written_before() {
    let admin = admin().await;
    let (url, _cleanup) = fresh_database(&admin, "compact").await;
    let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    schema_before_compact(&client).await;
    // Rows as the 0012 schema stored them, chained as the core chains them.
    let (alice, shop) = ("did:key:z6MkAlice", "did:key:z6MkShop");
    let (a, s) = (MemberId(alice.into()), MemberId(shop.into()));
    let mut head = bazaar_core::chain::ChainHead::genesis();
    let one = bazaar_core::chain::append(&mut head, "token.issued", json!({"jti": "tok_1"}), &a, &a, Timestamp(5));
    let two = bazaar_core::chain::append(&mut head, "settlement.posted", json!({"a": 1}), &s, &a, Timestamp(6));
    for e in [&one, &two] {
        client
            .execute(
                "INSERT INTO events VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                &[
                    &(e.seq as i64),
                    &e.prev_hash,
                    &e.hash,
                    &e.kind,
                    &e.body.to_string(),
                    &e.authored_by.0,
                    &e.on_behalf_of.0,
                    &e.at.0,
                ],
            )
            .await
            .unwrap();
    }
    client
        .batch_execute(&format!(
            "UPDATE chain_head SET seq = 2, hash = '{h}';
             INSERT INTO transfers (id, debit, credit, amount, kind, hold, link, authored_by, on_behalf_of, at)
               VALUES ('tr_1', 'acct:{alice}', 'acct:{shop}', 99, 'payment', 'hold_tok_1', 'lnk_2', '{shop}', '{alice}', 6),
                      ('tr_2', 'acct:{alice}', 'sys:fees', 1, 'fee', NULL, 'lnk_2', '{shop}', '{alice}', 6);
             INSERT INTO tokens VALUES ('tok_1', '{alice}', '{shop}', 100, 'o-1', '/r', 'hold_tok_1', 5, 900),
                                       ('tok_2', '{alice}', '{shop}', 100, 'o-2', '/r', 'hold_tok_2', 5, 900);
             INSERT INTO settlements VALUES ('stl_tok_1', 'tok_1', '{alice}', '{shop}', 'o-1', 100, 1, 99, 6),
                                            ('s-other', 'tok_2', '{alice}', '{shop}', 'o-2', 100, 1, 99, 6);
             INSERT INTO holds VALUES ('hold_tok_1', 'acct:{alice}', 100, 5, 900, 'posted', 100, 6),
                                      ('hold_tok_2', 'acct:{alice}', 100, 5, 900, 'pending', 0, NULL);
             INSERT INTO hold_resolutions VALUES ('hold_tok_1', 'posted', 100, 6);",
            h = two.hash
        ))
        .await
        .unwrap();
    let before = ledger_rows(&client, false).await;

    let clock = Arc::new(ManualClock::new(conformance::EPOCH));
    let store = PostgresStore::connect(&url, conformance::test_config(), clock).await.unwrap();
    assert_eq!(ledger_rows(&client, true).await, before, "every row reads back as it was");
    assert_eq!(store.events(0, 10).await.unwrap(), vec![one, two], "events read back whole through the store");
    let settled = store.settlement_by_order(&s, &OrderId("o-2".into())).await.unwrap().unwrap();
    assert_eq!(settled.id, "s-other", "a settlement id that is not `stl_` and its token is kept");
    let view = store.token(&TokenId("tok_2".into())).await.unwrap().unwrap();
    assert_eq!(view.token.hold.0, "hold_tok_2");
    let derived: i64 =
        client.query_one("SELECT count(*) FROM settlement_rows WHERE id IS NOT NULL", &[]).await.unwrap().get(0);
    assert_eq!(derived, 1, "only the id that is not derived is stored");
    let gone = client.query_opt("SELECT 1 FROM pg_class WHERE relname = 'hold_resolutions'", &[]).await.unwrap();
    assert!(gone.is_none(), "hold_resolutions is folded into the holds' own guard");
    assert!(client.execute("UPDATE hold_rows SET state = 'voided' WHERE id = 'hold_tok_1'", &[]).await.is_err());
    assert!(client.execute("DELETE FROM event_rows", &[]).await.is_err(), "events are append-only");
    assert!(client.execute("TRUNCATE transfer_rows", &[]).await.is_err(), "transfers are immutable");
}

/// Ledger rows in each compact table for the plan test: enough that a walk of a table costs far more than lookups.
const PLAN_TEST_ROWS: i64 = 20_000;

/// The writer's batch load of settlements by (merchant, order) and the sweeper's expired-token query look rows up
/// by key on a ledger PostgreSQL has no statistics for yet (as a fresh or just-migrated one): through the views'
/// `names` joins, both had planned a walk of the whole table per batch or sweep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_lookups_use_their_keys_without_statistics() {
    let admin = admin().await;
    let (url, _cleanup) = fresh_database(&admin, "plans").await;
    let clock = Arc::new(ManualClock::new(conformance::EPOCH));
    let _store = PostgresStore::connect(&url, conformance::test_config(), clock).await.unwrap();
    let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(&format!(
            "INSERT INTO names (name) SELECT 'did:key:z6Mk' || i FROM generate_series(1, 100) i;
             INSERT INTO names (name) SELECT 'acct:did:key:z6Mk' || i FROM generate_series(1, 100) i;
             INSERT INTO token_rows SELECT 'tok_' || i, 100, 0, 9, 1 + i % 100, 1 + (i + 1) % 100, 'o-' || i, '/r'
               FROM generate_series(1, {PLAN_TEST_ROWS}) i;
             INSERT INTO hold_rows SELECT 'hold_tok_' || i, 100, 0, 9, 100, 10, 101 + i % 100, 'posted'
               FROM generate_series(1, {PLAN_TEST_ROWS}) i;
             INSERT INTO settlement_rows SELECT 'tok_' || i, 100, 1, 99, 10, 1 + i % 100, 1 + (i + 1) % 100, NULL, 'o-' || i
               FROM generate_series(1, {PLAN_TEST_ROWS}) i;"
        ))
        .await
        .unwrap();
    let plan = |sql: String, params: String| {
        let client = &client;
        async move {
            client.batch_execute(&format!("PREPARE q AS {sql}")).await.unwrap();
            let rows = client.query(&format!("EXPLAIN EXECUTE q({params})"), &[]).await.unwrap();
            client.batch_execute("DEALLOCATE q").await.unwrap();
            rows.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>().join("\n")
        }
    };
    let pairs = (1..=250).map(|i| format!("'did:key:z6Mk{}'", 1 + (i + 1) % 100)).collect::<Vec<_>>().join(",");
    let orders = (1..=250).map(|i| format!("'o-{i}'")).collect::<Vec<_>>().join(",");
    let load = plan(
        bazaar_store_postgres::settlements_by_order_sql(),
        format!("ARRAY[{pairs}]::text[], ARRAY[{orders}]::text[]"),
    )
    .await;
    assert!(!load.contains("Seq Scan on settlement_rows"), "the batch load walks the settlements:\n{load}");
    let sweep = plan(bazaar_store_postgres::EXPIRED_TOKENS_SQL.into(), "10::bigint, 100::bigint".into()).await;
    assert!(!sweep.contains("Seq Scan on token_rows"), "the sweep walks the tokens:\n{sweep}");
}
