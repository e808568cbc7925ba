//! The one migration runner (`bazaar_pg::Migrations`) on the suite's PostgreSQL: several nodes starting
//! together apply each file once, a second start applies nothing, a file that fails leaves nothing of the
//! run behind, and each plane's table and lock keep planes apart.

use bazaar_pg::{Database, Migrations};
use bazaar_postgres_testing::ThrowawayDatabase;

const FILES: &[(&str, &str)] = &[
    ("0001_a", "CREATE TABLE a (n INTEGER PRIMARY KEY); INSERT INTO a VALUES (1);"),
    ("0002_b", "CREATE TABLE b (n INTEGER PRIMARY KEY); INSERT INTO a VALUES (2);"),
];

const PLAN: Migrations = Migrations { table: "test_migrations", lock_key: 0x6261_7a61_6172_00f0, files: FILES };

async fn client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = Database::from_url(url).unwrap().connect().await.unwrap();
    tokio::spawn(connection);
    client
}

async fn names(url: &str, table: &str) -> Vec<String> {
    let rows = client(url).await.query(&format!("SELECT name FROM {table} ORDER BY name"), &[]).await.unwrap();
    rows.iter().map(|r| r.get(0)).collect()
}

/// Runs `test` on a runtime of its own, outside which the throwaway database is made and dropped (its
/// helpers block).
fn on_fresh_schema<F: std::future::Future<Output = ()>>(test: impl FnOnce(String) -> F) {
    let database = ThrowawayDatabase::create("bazaar_pg_migrations");
    let url = database.fresh_schema();
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap().block_on(test(url));
}

#[test]
fn nodes_starting_together_apply_each_file_once_and_a_restart_applies_nothing() {
    on_fresh_schema(|url| async move {
        let starts: Vec<_> = (0..4)
            .map(|_| {
                let url = url.clone();
                tokio::spawn(async move { PLAN.run(&mut client(&url).await).await.unwrap() })
            })
            .collect();
        let mut applied = Vec::new();
        for start in starts {
            applied.extend(start.await.unwrap());
        }
        applied.sort_unstable();
        assert_eq!(applied, vec!["0001_a", "0002_b"], "each file applied by exactly one node");
        assert_eq!(names(&url, "test_migrations").await, vec!["0001_a", "0002_b"]);
        let rows = client(&url).await.query("SELECT n FROM a ORDER BY n", &[]).await.unwrap();
        assert_eq!(rows.iter().map(|r| r.get::<_, i32>(0)).collect::<Vec<_>>(), vec![1, 2]);
        assert!(PLAN.run(&mut client(&url).await).await.unwrap().is_empty());
    });
}

#[test]
fn a_failing_file_leaves_nothing_of_the_run_and_planes_keep_their_own_tables() {
    on_fresh_schema(|url| async move {
        const BROKEN: &[(&str, &str)] = &[("0001_a", FILES[0].1), ("0002_broken", "CREATE TABLE c (n NOT A TYPE);")];
        let broken = Migrations { files: BROKEN, ..PLAN };
        assert!(broken.run(&mut client(&url).await).await.is_err());
        let probe = client(&url).await;
        let left = probe.query_opt("SELECT 1 FROM pg_tables WHERE tablename IN ('a', 'test_migrations')", &[]);
        assert!(left.await.unwrap().is_none(), "a failed run left tables behind");
        // The fixed plan applies whole; another plane's plan, with its own table and lock, is not confused by it.
        assert_eq!(PLAN.run(&mut client(&url).await).await.unwrap(), vec!["0001_a", "0002_b"]);
        let other = Migrations {
            table: "other_migrations",
            lock_key: 0x6261_7a61_6172_00f1,
            files: &[("0001_a", "CREATE TABLE other (n INTEGER)")],
        };
        assert_eq!(other.run(&mut client(&url).await).await.unwrap(), vec!["0001_a"]);
        assert_eq!(names(&url, "other_migrations").await, vec!["0001_a"]);
    });
}
