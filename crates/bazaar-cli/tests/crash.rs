//! Crash safety: a real `bazaar serve` process is killed with SIGKILL several
//! times under load and restarted on the same data. Every acknowledged
//! settlement must survive, no order may be charged twice, and `bazaar audit`
//! must pass — on SQLite and on PostgreSQL.

use bazaar_sdk::{generate_key, Client};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// SIGKILLs per run.
const KILLS: usize = 3;
/// Concurrent buyers driving paid calls.
const WORKERS: usize = 8;
/// How long load runs before each kill.
const LOAD_BEFORE_KILL_MS: u64 = 400;
/// A worker gives up on one order after this long (the server is restarted well before).
const ORDER_DEADLINE_S: u64 = 60;
const PRICE: u64 = 100;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn start(store_args: &[String], port: u16) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["serve", "--port", &port.to_string(), "--operator-credential", "crash-operator"])
        .args(store_args)
        .env("BAZAAR_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start bazaar serve");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next().expect("server prints a line").unwrap();
    assert!(line.starts_with("listening on"), "{line}");
    std::thread::spawn(move || for _ in lines {});
    child
}

/// One order, retried with the same keys until acknowledged.
async fn pay_until_acknowledged(buyer: &Client, merchant: &Client, order: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(ORDER_DEADLINE_S);
    loop {
        assert!(Instant::now() < deadline, "order {order} never completed");
        let attempt = async {
            let token = buyer.issue_token("crash-shop", PRICE, order, "https://shop/crash").await?;
            let token = token.body["token"].as_str().unwrap_or_default().to_string();
            merchant.settle(&token, PRICE, order, None).await
        };
        match attempt.await {
            Ok(answer) => return answer.body["settlement_id"].as_str().unwrap().to_string(),
            Err(error) if error.status().is_none_or(|s| s >= 500 || s == 409) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(error) => panic!("order {order} refused: {error}"),
        }
    }
}

async fn crash_run(store_args: Vec<String>) {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut server = start(&store_args, port);
    let operator = Client::new(&url, Some("crash-operator".into()));
    let owner = operator.create_owner(&generate_key(), "crash-owner").await.unwrap();
    let owner = operator.with_credential(owner["credential"].as_str().unwrap());
    let mut agents = Vec::new();
    for handle in ["crash-buyer", "crash-shop"] {
        let invite = owner.issue_invite().await.unwrap();
        let agent = owner.redeem_invite(&invite, &generate_key(), handle).await.unwrap();
        agents.push(owner.with_credential(agent["credential"].as_str().unwrap()));
    }
    let (buyer, merchant) = (agents[0].clone(), agents[1].clone());
    let owner_id = owner.me().await.unwrap()["member"]["id"].as_str().unwrap().to_string();
    operator.mint(&owner_id, 10_000_000, "crash-mint").await.unwrap();
    owner.fund("crash-buyer", 10_000_000, "crash-fund").await.unwrap();
    owner.set_budget("crash-buyer", 10_000, 10_000_000, 10_000_000).await.unwrap();

    let acknowledged: Arc<Mutex<HashMap<String, String>>> = Default::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (buyer, merchant, acknowledged, stop) =
                (buyer.clone(), merchant.clone(), acknowledged.clone(), stop.clone());
            tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    n += 1;
                    let order = format!("w{w}-{n}");
                    let settlement = pay_until_acknowledged(&buyer, &merchant, &order).await;
                    acknowledged.lock().unwrap().insert(order, settlement);
                }
            })
        })
        .collect();
    for kill in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(LOAD_BEFORE_KILL_MS)).await;
        server.kill().expect("SIGKILL");
        server.wait().unwrap();
        eprintln!("kill {}: {} acknowledged so far", kill + 1, acknowledged.lock().unwrap().len());
        server = start(&store_args, port);
    }
    tokio::time::sleep(Duration::from_millis(LOAD_BEFORE_KILL_MS)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for worker in workers {
        worker.await.unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() >= KILLS, "load ran: {}", acknowledged.len());

    // Every acknowledged settlement survived, with the id the client was given.
    for (order, settlement) in &acknowledged {
        let token = buyer.issue_token("crash-shop", PRICE, order, "https://shop/crash").await.unwrap();
        let verified = merchant.verify(token.body["token"].as_str().unwrap()).await.unwrap();
        assert_eq!(verified["state"], "settled", "{order}");
        assert_eq!(verified["settlement"]["settlement_id"].as_str(), Some(settlement.as_str()), "{order}");
    }
    // No order was charged twice: the buyer paid exactly once per settled order.
    let events = operator.events(0, 500).await.unwrap();
    let mut settled = 0u64;
    let mut after = 0;
    let mut page = events;
    loop {
        let list = page["events"].as_array().unwrap().clone();
        if list.is_empty() {
            break;
        }
        settled += list.iter().filter(|e| e["kind"] == "settlement.posted").count() as u64;
        after = list.last().unwrap()["seq"].as_u64().unwrap();
        page = operator.events(after, 500).await.unwrap();
    }
    assert!(after > 0);
    assert!(settled >= acknowledged.len() as u64);
    let me = buyer.me().await.unwrap();
    assert_eq!(
        me["balance_minor"].as_i64().unwrap(),
        10_000_000 - (settled * PRICE) as i64,
        "one debit per settled order"
    );
    server.kill().unwrap();
    server.wait().unwrap();
    let audit = Command::new(env!("CARGO_BIN_EXE_bazaar")).arg("audit").args(&store_args).output().unwrap();
    assert!(audit.status.success(), "audit failed: {}", String::from_utf8_lossy(&audit.stdout));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_load_loses_nothing_on_sqlite() {
    let dir = std::env::temp_dir().join(format!("bazaar-crash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    crash_run(vec!["--data-dir".into(), dir.display().to_string()]).await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_load_loses_nothing_on_postgres() {
    let admin_url = std::env::var("BAZAAR_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let (client, connection) = tokio_postgres::connect(&admin_url, tokio_postgres::NoTls)
        .await
        .expect("PostgreSQL must be running for this test");
    tokio::spawn(connection);
    let name = format!("bazaar_crash_{}", std::process::id());
    client.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).await.unwrap();
    client.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    let url = bazaar_store_postgres::testing::with_database(&admin_url, &name);
    crash_run(vec![
        "--database-url".into(),
        url,
        "--data-dir".into(),
        std::env::temp_dir().join(&name).display().to_string(),
    ])
    .await;
    client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.ok();
}
