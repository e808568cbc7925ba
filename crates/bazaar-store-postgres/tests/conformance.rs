//! Runs the shared conformance suite against the PostgreSQL adapter, one fresh
//! database per case. Fails (never skips) when PostgreSQL is unreachable.

use bazaar_core::command::Command;
use bazaar_core::refusal::Code;
use bazaar_store::conformance::{self, Fixture};
use bazaar_store::Store;
use bazaar_store_postgres::testing::{admin_url, with_database};
use bazaar_store_postgres::PostgresStore;
use bazaar_types::ManualClock;
use ed25519_dalek::SigningKey;
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
            client.batch_execute("VACUUM FULL").await.unwrap();
            let sql = "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c \
                       JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname = 'public'";
            let total = client.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) as u64;
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
