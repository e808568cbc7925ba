//! Crash safety: a real `bazaar serve` process is killed with SIGKILL several
//! times under load and restarted on the same data. Every acknowledged
//! settlement must survive, no order may be charged twice, and `bazaar audit`
//! must pass — on SQLite and on PostgreSQL.
// reason: an end-to-end test reads as one story of requests and the checks after each.
#![allow(clippy::too_many_lines)]

use crate::common;

use bazaar_cli::wire_json;
use bazaar_sdk::{generate_key, Client};
use std::collections::HashMap;
use std::process::Child;
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

fn start(store_args: &[String], port: u16) -> Child {
    let mut args: Vec<String> =
        ["--port", &port.to_string(), "--operator-credential", "crash-operator"].map(String::from).to_vec();
    args.extend_from_slice(store_args);
    common::spawn_serve(&args)
}

/// `serve` arguments for a store on `database`, with a data directory (for the registry's key) named after it.
fn postgres_store_args(database: &common::ThrowawayDatabase) -> Vec<String> {
    let data_dir = std::env::temp_dir().join(&database.name).display().to_string();
    vec!["--database-url".into(), database.url.clone(), "--data-dir".into(), data_dir]
}

/// Kills the server one last time and audits the store it leaves.
fn kill_and_audit(mut server: Child, store_args: &[String]) {
    server.kill().unwrap();
    server.wait().unwrap();
    common::assert_cli_audit_passes(store_args);
}

/// One order, retried with the same keys until acknowledged.
async fn pay_until_acknowledged(buyer: &Client, merchant: &Client, order: &str) -> String {
    let settled = common::retry(&format!("order {order}"), || async {
        let token = buyer.issue_token("crash-shop", PRICE, order, "https://shop/crash").await?;
        merchant.settle(token.body.token.as_str(), PRICE, order, None).await
    })
    .await;
    settled.body.settlement.settlement_id.clone()
}

async fn crash_run(store_args: Vec<String>) {
    let port = common::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut server = start(&store_args, port);
    let operator = Client::new(&url, Some("crash-operator".into()));
    let owner = operator.create_owner(&generate_key(), "crash-owner").await.unwrap();
    let owner = operator.with_credential(owner.credential.as_str());
    let mut agents = Vec::new();
    for handle in ["crash-buyer", "crash-shop"] {
        let invite = owner.issue_invite().await.unwrap();
        let agent = owner.redeem_invite(&invite, &generate_key(), handle).await.unwrap();
        agents.push(owner.with_credential(agent.credential.as_str()));
    }
    let (buyer, merchant) = (agents[0].clone(), agents[1].clone());
    let funding = common::Funding {
        mint: (10_000_000, "crash-mint"),
        fund: (10_000_000, "crash-fund"),
        budget: [10_000, 10_000_000, 10_000_000],
    };
    common::fund_agent(&operator, &owner, "crash-buyer", funding).await;

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
        let verified = wire_json(&merchant.verify(token.body.token.as_str()).await.unwrap());
        assert_eq!(verified["state"], "settled", "{order}");
        assert_eq!(verified["settlement"]["settlement_id"].as_str(), Some(settlement.as_str()), "{order}");
    }
    // No order was charged twice: the buyer paid exactly once per settled order.
    let events = bazaar_cli::wire_json(&operator.events(0, 500).await.unwrap());
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
        page = bazaar_cli::wire_json(&operator.events(after, 500).await.unwrap());
    }
    assert!(after > 0);
    assert!(settled >= acknowledged.len() as u64);
    let me = wire_json(&buyer.me().await.unwrap());
    assert_eq!(
        me["balance_minor"].as_i64().unwrap_or(0),
        10_000_000 - (settled * PRICE) as i64,
        "one debit per settled order"
    );
    kill_and_audit(server, &store_args);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_load_loses_nothing_on_sqlite() {
    let dir = common::fresh_dir("bazaar-crash");
    crash_run(vec!["--data-dir".into(), dir.display().to_string()]).await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_load_loses_nothing_on_postgres() {
    let database = common::ThrowawayDatabase::create(&format!("bazaar_crash_{}", std::process::id())).await;
    crash_run(postgres_store_args(&database)).await;
    database.drop().await;
}

/// Contracts (each with `MILESTONES` milestones) released while the server is killed.
const CONTRACTS: usize = 8;
const MILESTONES: usize = 8;
const MILESTONE_PRICE: u64 = 1_000;
/// Paid calls disputed with a silent respondent, so the sweeper executes them.
const DISPUTES: usize = 4;

/// Milestone releases and dispute executions run while the server is killed;
/// after restarts, each release and each execution happened exactly once.
async fn escrow_crash_run(store_args: Vec<String>) {
    let mut args = store_args.clone();
    args.extend(["--answer-window-s", "1"].map(String::from));
    let port = common::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut server = start(&args, port);
    let operator = Client::new(&url, Some("crash-operator".into()));
    let (buyer_key, seller_key) = (generate_key(), generate_key());
    let mut parties = Vec::new();
    for (owner_handle, handle, key) in
        [("esc-owner-b", "esc-buyer", &buyer_key), ("esc-owner-s", "esc-seller", &seller_key)]
    {
        let owner = operator.create_owner(&generate_key(), owner_handle).await.unwrap();
        let owner = operator.with_credential(owner.credential.as_str());
        let invite = owner.issue_invite().await.unwrap();
        let agent = owner.redeem_invite(&invite, key, handle).await.unwrap();
        parties.push((owner.clone(), owner.with_credential(agent.credential.as_str())));
    }
    let ((buyer_owner, buyer), (seller_owner, seller)) = (parties[0].clone(), parties[1].clone());
    let owner_id = buyer_owner.me().await.unwrap().member.id;
    operator.mint(&owner_id, 1_000_000, "esc-mint").await.unwrap();
    // The seller holds enough that every default ruling refunds in full.
    let seller_owner_id = seller_owner.me().await.unwrap().member.id;
    operator.mint(&seller_owner_id, 10_000, "esc-mint-s").await.unwrap();
    seller_owner.fund("esc-seller", 10_000, "esc-fund-s").await.unwrap();
    buyer_owner.fund("esc-buyer", 1_000_000, "esc-fund").await.unwrap();
    buyer_owner.set_budget("esc-buyer", 100_000, 1_000_000, 1_000_000).await.unwrap();
    let due = bazaar_sdk::clock::now_ms() + 86_400_000;
    let specs: Vec<(u64, &str, i64)> = (0..MILESTONES).map(|_| (MILESTONE_PRICE, "part", due)).collect();
    let mut contracts = Vec::new();
    for c in 0..CONTRACTS {
        let created =
            buyer.create_contract("esc-seller", None, &specs, "terms", None, &format!("esc-{c}")).await.unwrap();
        let id = created.body.id.clone();
        seller.contract_act(&id, "accept").await.unwrap();
        for m in 0..MILESTONES as u32 {
            seller.deliver(&id, m, b"done").await.unwrap();
        }
        contracts.push(id);
    }
    // Paid calls, disputed; the seller stays silent so the sweeper executes default rulings.
    for d in 0..DISPUTES {
        let order = format!("esc-call-{d}");
        let token = buyer.issue_token("esc-seller", PRICE, &order, "https://shop/esc").await.unwrap();
        seller.settle(token.body.token.as_str(), PRICE, &order, None).await.unwrap();
        let subject = bazaar_sdk::wire::dispute::DisputeSubject::Call {
            merchant: "esc-seller".to_string(),
            order_id: order.to_string(),
        };
        buyer.file_dispute(subject, "not_delivered", PRICE, "").await.unwrap();
    }

    let releases: Vec<_> = contracts
        .iter()
        .flat_map(|id| (0..MILESTONES as u32).map(move |m| (id.clone(), m)))
        .map(|(id, m)| {
            let buyer = buyer.clone();
            tokio::spawn(async move {
                let answer = common::retry("release", || buyer.release(&id, m, None)).await;
                answer.body.transfers
            })
        })
        .collect();
    for kill in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(50 + 400 * kill as u64)).await;
        server.kill().expect("SIGKILL");
        server.wait().unwrap();
        let done = releases.iter().filter(|r| r.is_finished()).count();
        eprintln!("kill {}: {done} of {} releases acknowledged", kill + 1, releases.len());
        server = start(&args, port);
    }
    let mut receipts = Vec::new();
    for release in releases {
        receipts.push(release.await.unwrap());
    }
    // A second ask for every release answers the same transfers.
    for ((id, m), first) in contracts.iter().flat_map(|id| (0..MILESTONES as u32).map(move |m| (id, m))).zip(&receipts)
    {
        let again = common::retry("release again", || buyer.release(id, m, None)).await;
        assert_eq!(&again.body.transfers, first, "{id}/{m} released differently");
    }
    // Every dispute executes once (the sweeper, across the restarts).
    let deadline = Instant::now() + Duration::from_secs(ORDER_DEADLINE_S);
    while common::count_events(&operator, "dispute.executed").await < DISPUTES {
        assert!(Instant::now() < deadline, "disputes never executed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(common::count_events(&operator, "milestone.released").await, CONTRACTS * MILESTONES, "one release each");
    assert_eq!(common::count_events(&operator, "dispute.executed").await, DISPUTES, "one execution each");
    let me = common::retry("me", || buyer.me()).await;
    let spent = (CONTRACTS * MILESTONES) as i64 * MILESTONE_PRICE as i64;
    assert_eq!(me.balance_minor.unwrap_or(0), 1_000_000 - spent, "released once, calls refunded once");
    kill_and_audit(server, &store_args);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_releases_and_executions_runs_nothing_twice_on_sqlite() {
    let dir = common::fresh_dir("bazaar-crash-escrow");
    escrow_crash_run(vec!["--data-dir".into(), dir.display().to_string()]).await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_releases_and_executions_runs_nothing_twice_on_postgres() {
    let database = common::ThrowawayDatabase::create(&format!("bazaar_crash_escrow_{}", std::process::id())).await;
    escrow_crash_run(postgres_store_args(&database)).await;
    database.drop().await;
}
