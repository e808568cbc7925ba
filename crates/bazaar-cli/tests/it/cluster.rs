//! Three `bazaar serve` nodes on one PostgreSQL and one NATS JetStream
//! (the real `nats-server -js` that `scripts/test` starts): paid calls and
//! live inbox subscribers spread over the nodes, one node is SIGKILLed under
//! load, clients fail over. Every acknowledged settlement survives, no order
//! is paid twice, each subscriber resumes by its cursor on another node with
//! nothing lost or repeated, the sweeper's lease moves to a survivor and
//! runs on one node at a time, a duplicate in flight on one node is answered
//! 409 on another, and `bazaar audit` passes. A second test pauses the
//! ledger's sequencer (`SIGSTOP`) past its lease under load and resumes it:
//! another node takes over within a bound, the old one commits nothing at its
//! stale epoch, and the same checks hold (docs/design/sequencer.md).
// reason: an end-to-end test reads as one story of requests and the checks after each.
#![allow(clippy::too_many_lines)]

use crate::common;

use bazaar_cli::wire_json;
use bazaar_sdk::{generate_key, Body, Client};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NODES: usize = 3;
/// Concurrent buyers, each starting on a different node.
const WORKERS: usize = 6;
const PRICE: u64 = 100;
/// Load before and after the kill.
const LOAD_MS: u64 = 2_500;
/// Messages posted while the subscribers listen.
const MESSAGES: u64 = 60;
/// Pairs of the same settle sent to two nodes at once.
const DUPLICATE_PAIRS: usize = 30;
/// A subscriber gives up after this long (orders and posts retry for `common::RETRY_DEADLINE_S`).
const DEADLINE_S: u64 = 60;
const OPERATOR: &str = "cluster-operator";

fn nats_url() -> String {
    let url = std::env::var("BAZAAR_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let address = url.trim_start_matches("nats://");
    assert!(
        std::net::TcpStream::connect(address).is_ok(),
        "NATS with JetStream must be running at {url} for this test (scripts/test starts `nats-server -js`)"
    );
    url
}

struct Node {
    name: String,
    port: u16,
    args: Vec<String>,
    process: Option<Child>,
}

/// A node left running by a failed assertion is killed with the test.
impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut process) = self.process.take() {
            let _ = process.kill();
            let _ = process.wait();
        }
    }
}

impl Node {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

fn start(database: &common::ThrowawayDatabase, nats: &str, i: usize) -> Node {
    let name = format!("node-{i}");
    let port = common::free_port();
    let data_dir = std::env::temp_dir().join(format!("{}-{name}", database.name)).display().to_string();
    let args: Vec<String> = [
        "--port",
        &port.to_string(),
        "--operator-credential",
        OPERATOR,
        "--database-url",
        &database.url,
        "--data-dir",
        &data_dir,
        "--nats-url",
        nats,
        "--node-id",
        &name,
    ]
    .map(String::from)
    .to_vec();
    let process = Some(common::spawn_serve(&args));
    Node { name, port, args, process }
}

/// `NODES` nodes on a new database named from `prefix`. The first node creates the registry (and leads the
/// ledger); the others open the same one.
async fn cluster(prefix: &str) -> (common::ThrowawayDatabase, Vec<Node>) {
    let nats = nats_url();
    let database = common::ThrowawayDatabase::create(&format!("{prefix}_{}", std::process::id())).await;
    let nodes = (0..NODES).map(|i| start(&database, &nats, i)).collect();
    (database, nodes)
}

/// Every node's URL, starting at node `first`: a client's failover order.
fn from(nodes: &[Node], first: usize) -> Vec<String> {
    (0..nodes.len()).map(|i| nodes[(first + i) % nodes.len()].url()).collect()
}

/// A gauge or counter from a node's `/metrics` (0 if absent).
async fn metric(http: &reqwest::Client, node: &str, line: &str) -> f64 {
    let text = http.get(format!("{node}/metrics")).send().await.unwrap().text().await.unwrap();
    text.lines().find_map(|l| l.strip_prefix(line)).map_or(0.0, |v| v.trim().parse().unwrap())
}

const LEASE_HELD: &str = "bazaar_cluster_lease_held{lease=\"sweeper\"}";
const SWEEPS: &str = "bazaar_sweeps_total";

/// One order retried with the same keys (on whichever node the client is on) until acknowledged.
async fn pay_until_acknowledged(buyer: &Client, merchant: &Client, order: &str) -> String {
    let settled = common::retry(&format!("order {order}"), || async {
        let token = buyer.issue_token("cluster-shop", PRICE, order, "https://shop/cluster").await?;
        merchant.settle(token.body.token.as_str(), PRICE, order, None).await
    })
    .await;
    settled.body.settlement.settlement_id.clone()
}

/// The log positions a subscriber received, in the order received.
type Seen = Arc<Mutex<Vec<u64>>>;

/// A member's inbox over SSE that, when its node dies (or goes quiet),
/// reconnects to the next node with the last cursor it handled
/// (`Last-Event-ID`), until the poster is `finished` and it has seen every
/// position `posted`; every message's log position is recorded in the order
/// received. Returns how many times it reconnected.
async fn subscribe(
    http: reqwest::Client,
    nodes: Vec<String>,
    credential: String,
    posted: Arc<Mutex<BTreeSet<u64>>>,
    finished: Arc<AtomicBool>,
    seen: Seen,
) -> usize {
    let deadline = Instant::now() + Duration::from_secs(DEADLINE_S);
    let complete = || {
        let seen = seen.lock().unwrap();
        finished.load(Ordering::SeqCst) && posted.lock().unwrap().iter().all(|p| seen.contains(p))
    };
    let (mut at, mut reconnects) = (0, 0);
    loop {
        if complete() {
            return reconnects;
        }
        assert!(Instant::now() < deadline, "the subscriber never saw every message");
        let cursor = seen.lock().unwrap().last().copied().unwrap_or(0);
        let request = http
            .get(format!("{}/v1/inbox/sse", nodes[at % nodes.len()]))
            .bearer_auth(&credential)
            .header("last-event-id", cursor.to_string());
        if let Ok(mut response) = request.send().await {
            let mut buffer = String::new();
            loop {
                if let Some(end) = buffer.find("\n\n") {
                    let block: String = buffer.drain(..end + 2).collect();
                    let field = |name: &str| {
                        block.lines().find_map(|l| l.strip_prefix(name).map(|v| v.trim_start().to_string()))
                    };
                    if field("event:").as_deref() == Some("message") {
                        seen.lock().unwrap().push(field("id:").unwrap().parse().unwrap());
                    }
                    continue;
                }
                if complete() {
                    return reconnects;
                }
                match tokio::time::timeout(Duration::from_secs(2), response.chunk()).await {
                    Ok(Ok(Some(chunk))) => buffer.push_str(std::str::from_utf8(&chunk).unwrap()),
                    // Quiet for a while: see whether the poster is done.
                    Err(_) => continue,
                    // The node went away: resume on the next one from the cursor.
                    Ok(_) => break,
                }
            }
        }
        at += 1;
        reconnects += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_on_one_postgres_and_nats_survive_a_kill() {
    let (database, mut nodes) = cluster("bazaar_cluster").await;
    let http = reqwest::Client::new();
    let operator = Client::with_nodes(from(&nodes, 0), Some(OPERATOR.into()));
    let did: Vec<String> = futures::future::join_all(
        nodes.iter().map(|n| async { Client::new(n.url(), None).well_known().await.unwrap().did }),
    )
    .await;
    assert!(did.iter().all(|d| *d == did[0]), "one registry: {did:?}");

    let (owner_credential, agents) = cast(&operator).await;
    let owner = operator.with_credential(&owner_credential);

    // A listener in a room; her inbox is followed on every node.
    let listener = operator.create_owner(&generate_key(), "cluster-listener").await.unwrap();
    let listener_credential = listener.credential.clone();
    let room = owner
        .call::<Value>(reqwest::Method::POST, "/v1/rooms", Some(Body::json(json!({"name": "floor"}))), None)
        .await
        .unwrap();
    let room = room.body["id"].as_str().unwrap().to_string();
    let as_listener = operator.with_credential(&listener_credential);
    as_listener
        .call::<Value>(reqwest::Method::POST, &format!("/v1/channels/{room}/join"), Some(Body::json(json!({}))), None)
        .await
        .unwrap();

    // The sweeper runs on exactly one node.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let mut holders = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        if metric(&http, &node.url(), LEASE_HELD).await == 1.0 {
            holders.push(i);
        }
    }
    assert_eq!(holders.len(), 1, "one sweeper lease holder: {holders:?}");
    let doomed = holders[0];
    eprintln!("{} holds the sweeper lease and will be killed", nodes[doomed].name);

    // A relay event published on one node reaches a live subscription on another.
    let relay_url = |i: usize| format!("ws://127.0.0.1:{}/relay", nodes[i].port);
    let mut watcher = bazaar_agents::relay_client::RelayClient::connect(&relay_url(1)).await.unwrap();
    let filter = bazaar_relay::Filter { kinds: Some(vec![1]), ..Default::default() };
    watcher.subscribe("live", &[filter]).await.unwrap();
    loop {
        match watcher.next("live", Duration::from_secs(5)).await.unwrap() {
            Some(bazaar_agents::relay_client::Delivery::EndOfStored) => break,
            Some(bazaar_agents::relay_client::Delivery::Event(_)) => {}
            other => panic!("the relay subscription ended: {other:?}"),
        }
    }
    let signer = bazaar_relay::Signer::generate(&bazaar_server::OsEntropy);
    let note = signer.sign(bazaar_sdk::clock::unix_now(), 1, vec![], "lot 1 is open");
    let mut publisher = bazaar_agents::relay_client::RelayClient::connect(&relay_url(2)).await.unwrap();
    assert!(publisher.publish(&note).await.unwrap().0, "node 2 stores the note");
    match watcher.next("live", Duration::from_secs(5)).await.unwrap() {
        Some(bazaar_agents::relay_client::Delivery::Event(event)) => assert_eq!(event.id, note.id),
        other => panic!("node 1's live subscriber never got node 2's event: {other:?}"),
    }

    // The same settle sent to two nodes at once: while the first runs, the other answers 409.
    let buyer0 = Client::new(nodes[0].url(), Some(agents["cluster-buyer"].clone()));
    let (mut conflicts, mut same) = (0, 0);
    for pair in 0..DUPLICATE_PAIRS {
        let order = format!("dup-{pair}");
        let token = buyer0.issue_token("cluster-shop", PRICE, &order, "https://shop/cluster").await.unwrap();
        let token = token.body.token.clone();
        let one = Client::new(nodes[1].url(), Some(agents["cluster-shop"].clone()));
        let two = Client::new(nodes[2].url(), Some(agents["cluster-shop"].clone()));
        let (a, b) = tokio::join!(one.settle(&token, PRICE, &order, None), two.settle(&token, PRICE, &order, None));
        let mut ids = BTreeSet::new();
        for answer in [a, b] {
            match answer {
                Ok(answer) => {
                    ids.insert(answer.body.settlement.settlement_id.clone());
                }
                Err(error) => {
                    assert_eq!(error.code(), Some("idempotency_in_flight"), "{error}");
                    conflicts += 1;
                }
            }
        }
        assert_eq!(ids.len(), 1, "one settlement for {order}");
        // Once answered, the claim is released (well before it would expire): a retry replays.
        let released_by = Instant::now() + Duration::from_millis(1_000);
        loop {
            match two.settle(&token, PRICE, &order, None).await {
                Ok(answer) => {
                    assert!(answer.replayed, "{order}: a retry replays");
                    assert!(ids.contains(answer.body.settlement.settlement_id.as_str()));
                    break;
                }
                Err(error) if error.code() == Some("idempotency_in_flight") && Instant::now() < released_by => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(error) => panic!("{order}: the claim was not released: {error}"),
            }
        }
        same += 1;
    }
    eprintln!("{conflicts} of {same} cross-node duplicate pairs were answered 409 in flight");
    assert!(conflicts > 0, "a duplicate in flight on another node must be answered 409");

    // Load: buyers on every node; subscribers on every node; posts through every node.
    let urls: Vec<String> = nodes.iter().map(Node::url).collect();
    let (workers, acknowledged, stop) = payers(&urls, &agents, "w");
    let posted: Arc<Mutex<BTreeSet<u64>>> = Default::default();
    let poster = {
        let (posted, nodes) = (posted.clone(), from(&nodes, 1));
        let owner_credential = owner_credential.clone();
        let room = room.clone();
        tokio::spawn(async move {
            let owner = Client::with_nodes(nodes, Some(owner_credential));
            for i in 0..MESSAGES {
                let path = format!("/v1/channels/{room}/messages");
                let key = format!("post-{i}");
                let body = json!({"body": format!("lot {i}")});
                let message = common::retry(&format!("message {i}"), || {
                    owner.call::<Value>(reqwest::Method::POST, &path, Some(Body::json(body.clone())), Some(&key))
                })
                .await
                .body;
                posted.lock().unwrap().insert(message["position"].as_u64().unwrap());
                tokio::time::sleep(Duration::from_millis(LOAD_MS * 2 / MESSAGES)).await;
            }
        })
    };
    // Each subscriber starts on a different node; the one on the doomed node must resume elsewhere.
    let finished = Arc::new(AtomicBool::new(false));
    let subscribers: Vec<(Seen, tokio::task::JoinHandle<usize>)> = (0..NODES)
        .map(|i| {
            let seen: Seen = Default::default();
            let task = tokio::spawn(subscribe(
                http.clone(),
                from(&nodes, doomed + i),
                listener_credential.clone(),
                posted.clone(),
                finished.clone(),
                seen.clone(),
            ));
            (seen, task)
        })
        .collect();

    tokio::time::sleep(Duration::from_millis(LOAD_MS)).await;
    let before_kill = acknowledged.lock().unwrap().len();
    let mut victim = nodes[doomed].process.take().unwrap();
    victim.kill().expect("SIGKILL");
    victim.wait().unwrap();
    eprintln!("killed {} after {before_kill} acknowledged orders", nodes[doomed].name);
    tokio::time::sleep(Duration::from_millis(LOAD_MS)).await;
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.await.unwrap();
    }
    poster.await.unwrap();
    finished.store(true, Ordering::SeqCst);
    let posted = posted.lock().unwrap().clone();
    assert_eq!(posted.len() as u64, MESSAGES);
    for (i, (seen, task)) in subscribers.into_iter().enumerate() {
        let reconnects = tokio::time::timeout(Duration::from_secs(DEADLINE_S), task).await.expect("in time").unwrap();
        let seen = seen.lock().unwrap().clone();
        let mut sorted = seen.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), seen.len(), "subscriber {i}: a message repeated: {seen:?}");
        assert_eq!(sorted, seen, "subscriber {i}: out of order");
        assert!(posted.iter().all(|p| seen.contains(p)), "subscriber {i}: a message lost");
        eprintln!("subscriber {i}: {} messages, {reconnects} reconnects", seen.len());
    }
    // The survivors heard the others' commits through NATS (not only from their reconcilers).
    for i in (0..NODES).filter(|i| *i != doomed) {
        let heard = metric(&http, &nodes[i].url(), "bazaar_cluster_signals_received_total").await;
        assert!(heard > 0.0, "{} received no signal", nodes[i].name);
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() > before_kill, "load went on after the kill: {before_kill} → {}", acknowledged.len());

    let survivors: Vec<usize> = (0..NODES).filter(|i| *i != doomed).collect();
    let buyer = Client::new(nodes[survivors[0]].url(), Some(agents["cluster-buyer"].clone()));
    let merchant = Client::new(nodes[survivors[1]].url(), Some(agents["cluster-shop"].clone()));
    let settled = each_acknowledged_once(&nodes[survivors[0]], &buyer, &merchant, &acknowledged).await;
    assert!(settled >= acknowledged.len() + DUPLICATE_PAIRS);

    // The sweeper's lease moved to one survivor, and only it sweeps.
    tokio::time::sleep(Duration::from_millis(bazaar_server::cluster::SWEEPER_LEASE_TTL_MS + 1_500)).await;
    let mut sweeps = Vec::new();
    let mut holders = Vec::new();
    for i in &survivors {
        if metric(&http, &nodes[*i].url(), LEASE_HELD).await == 1.0 {
            holders.push(*i);
        }
        sweeps.push(metric(&http, &nodes[*i].url(), SWEEPS).await);
    }
    assert_eq!(holders.len(), 1, "one survivor holds the sweeper lease: {holders:?}");
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    for (k, i) in survivors.iter().enumerate() {
        let now = metric(&http, &nodes[*i].url(), SWEEPS).await;
        if *i == holders[0] {
            assert!(now >= sweeps[k] + 2.0, "the holder sweeps: {} → {now}", sweeps[k]);
        } else {
            assert_eq!(now, sweeps[k], "{} does not sweep while another holds the lease", nodes[*i].name);
        }
    }

    stop_and_audit(&mut nodes, survivors[0]);
    database.drop().await;
}

/// An owner with a funded buyer agent `cluster-buyer` and a merchant agent `cluster-shop`: the owner's
/// credential and the agents' by handle.
async fn cast(operator: &Client) -> (String, HashMap<&'static str, String>) {
    let owner = operator.create_owner(&generate_key(), "cluster-owner").await.unwrap();
    let owner_credential = owner.credential.clone();
    let owner = operator.with_credential(&owner_credential);
    let mut agents = HashMap::new();
    for handle in ["cluster-buyer", "cluster-shop"] {
        let invite = owner.issue_invite().await.unwrap();
        let agent = owner.redeem_invite(&invite, &generate_key(), handle).await.unwrap();
        agents.insert(handle, agent.credential.clone());
    }
    let funding = common::Funding {
        mint: (10_000_000, "cluster-mint"),
        fund: (10_000_000, "cluster-fund"),
        budget: [10_000, 10_000_000, 10_000_000],
    };
    common::fund_agent(operator, &owner, "cluster-buyer", funding).await;
    (owner_credential, agents)
}

/// Every acknowledged settlement survived with the id its client was given, no order was paid twice (one
/// settlement event per order) and the buyer paid once for each. Returns how many orders settled.
async fn each_acknowledged_once(
    node: &Node,
    buyer: &Client,
    merchant: &Client,
    acknowledged: &HashMap<String, String>,
) -> usize {
    for (order, settlement) in acknowledged {
        let token = buyer.issue_token("cluster-shop", PRICE, order, "https://shop/cluster").await.unwrap();
        let verified = wire_json(&merchant.verify(token.body.token.as_str()).await.unwrap());
        assert_eq!(verified["state"], "settled", "{order}");
        assert_eq!(verified["settlement"]["settlement_id"].as_str(), Some(settlement.as_str()), "{order}");
    }
    let operator = Client::new(node.url(), Some(OPERATOR.into()));
    let (mut per_order, mut after): (HashMap<String, usize>, u64) = (HashMap::new(), 0);
    loop {
        let page = wire_json(&operator.events(after, 500).await.unwrap());
        let list = page["events"].as_array().unwrap().clone();
        let Some(last) = list.last() else { break };
        for event in list.iter().filter(|e| e["kind"] == "settlement.posted") {
            let order = event["body"]["order_id"].as_str().unwrap();
            *per_order.entry(order.to_string()).or_default() += 1;
        }
        after = last["seq"].as_u64().unwrap();
    }
    let settled: usize = per_order.values().sum();
    assert!(per_order.values().all(|n| *n == 1), "an order settled twice: {per_order:?}");
    assert!(settled >= acknowledged.len());
    let me = wire_json(&buyer.me().await.unwrap());
    assert_eq!(me["balance_minor"].as_i64().unwrap_or(0), 10_000_000 - (settled as u64 * PRICE) as i64);
    settled
}

/// Stops every node still running, then `bazaar audit` (with node `by`'s store arguments) must pass.
fn stop_and_audit(nodes: &mut [Node], by: usize) {
    let store_args = nodes[by].args.clone();
    for node in nodes.iter_mut() {
        if let Some(mut process) = node.process.take() {
            let _ = std::process::Command::new("kill").args(["-CONT", &process.id().to_string()]).status();
            process.kill().unwrap();
            process.wait().unwrap();
        }
    }
    let audit_args: Vec<String> = store_args
        .windows(2)
        .filter(|w| w[0] == "--database-url" || w[0] == "--data-dir")
        .flat_map(|w| w.to_vec())
        .collect();
    common::assert_cli_audit_passes(&audit_args);
}

/// The orders each payer got acknowledged, by order id: the settlement id it was given.
type Acknowledged = Arc<Mutex<HashMap<String, String>>>;

/// `WORKERS` buyers paying one order after another (ids `<prefix><worker>-<n>`) until `stop`, worker `w`
/// starting on `urls[w]` and its merchant on the next node, each failing over round `urls`.
fn payers(
    urls: &[String],
    agents: &HashMap<&'static str, String>,
    prefix: &str,
) -> (Vec<tokio::task::JoinHandle<()>>, Acknowledged, Arc<AtomicBool>) {
    let acknowledged: Acknowledged = Default::default();
    let stop = Arc::new(AtomicBool::new(false));
    let workers = (0..WORKERS)
        .map(|w| {
            let rotate = |offset: usize| (0..urls.len()).map(|i| urls[(w + offset + i) % urls.len()].clone()).collect();
            let buyer = Client::with_nodes(rotate(0), Some(agents["cluster-buyer"].clone()));
            let merchant = Client::with_nodes(rotate(1), Some(agents["cluster-shop"].clone()));
            let (acknowledged, stop, prefix) = (acknowledged.clone(), stop.clone(), prefix.to_string());
            tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    let order = format!("{prefix}{w}-{n}");
                    let settlement = pay_until_acknowledged(&buyer, &merchant, &order).await;
                    acknowledged.lock().unwrap().insert(order, settlement);
                }
            })
        })
        .collect();
    (workers, acknowledged, stop)
}

/// Who holds the ledger's sequencer lease, and at which epoch.
async fn sequencer(database: &tokio_postgres::Client) -> (String, i64) {
    let row = database.query_one("SELECT holder, epoch FROM ledger_sequencer WHERE id = 1", &[]).await.unwrap();
    (row.get::<_, Option<String>>(0).unwrap_or_default(), row.get(1))
}

/// Sends `signal` (`STOP`, `CONT`) to `node`'s process.
fn signal(node: &Node, signal: &str) {
    let pid = node.process.as_ref().expect("running").id().to_string();
    let sent = std::process::Command::new("kill").args([&format!("-{signal}"), &pid]).status().unwrap();
    assert!(sent.success(), "kill -{signal} {pid}");
}

/// A cluster (as [`cluster`]) and a connection to its database; node 0, started first, leads at the epoch
/// returned.
async fn led_cluster(prefix: &str) -> (common::ThrowawayDatabase, Vec<Node>, tokio_postgres::Client, i64) {
    let (database, nodes) = cluster(prefix).await;
    let (sql, connection) = tokio_postgres::connect(&database.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let (first, epoch) = sequencer(&sql).await;
    assert!(first.starts_with(&format!("{}#", nodes[0].name)), "the first node to start leads: {first}");
    (database, nodes, sql, epoch)
}

/// Waits (from `since`, at most `TAKEOVER_BOUND`) until the lease's epoch passes `epoch`: the new holder, its
/// epoch, and how long it took.
async fn takeover(database: &tokio_postgres::Client, epoch: i64, since: Instant) -> (String, i64, Duration) {
    loop {
        let (holder, now) = sequencer(database).await;
        if now > epoch {
            return (holder, now, since.elapsed());
        }
        assert!(since.elapsed() < TAKEOVER_BOUND, "no takeover within {TAKEOVER_BOUND:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Stops the payers, checks every order they had acknowledged (through nodes 1 and 2) is there once, stops every
/// node and audits. Returns (acknowledged, settled).
async fn finish(
    (workers, acknowledged, stop): (Vec<tokio::task::JoinHandle<()>>, Acknowledged, Arc<AtomicBool>),
    nodes: &mut [Node],
    agents: &HashMap<&'static str, String>,
) -> (usize, usize) {
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.await.unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    let buyer = Client::new(nodes[1].url(), Some(agents["cluster-buyer"].clone()));
    let merchant = Client::new(nodes[2].url(), Some(agents["cluster-shop"].clone()));
    let settled = each_acknowledged_once(&nodes[1], &buyer, &merchant, &acknowledged).await;
    stop_and_audit(nodes, 1);
    (acknowledged.len(), settled)
}

/// Longest a takeover may take after the sequencer stops: its lease lapses (3 s), a follower's next round
/// (1 s), and any batch it had open ends when PostgreSQL ends its session (5 s); with slack for a loaded host.
const TAKEOVER_BOUND: Duration = Duration::from_secs(15);

/// The sequencer is paused (`SIGSTOP`) under load, past its lease: another node takes the ledger over at a
/// higher epoch within `TAKEOVER_BOUND` and the load goes on through it. Resumed (`SIGCONT`), the old
/// sequencer commits nothing at its stale epoch (the store fences it; it follows and forwards), every
/// acknowledged settlement is there once, no order is paid twice, and `bazaar audit` passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_sequencer_is_fenced_and_replaced() {
    let (database, mut nodes, sql, epoch) = led_cluster("bazaar_sequencer").await;
    let operator = Client::with_nodes(from(&nodes, 1), Some(OPERATOR.into()));
    let (_, agents) = cast(&operator).await;

    // Load through the two other nodes only: a stopped process still accepts connections, and a client
    // waiting on it measures the client, not the cluster.
    let urls: Vec<String> = nodes[1..].iter().map(Node::url).collect();
    let (workers, acknowledged, stop) = payers(&urls, &agents, "s");
    tokio::time::sleep(Duration::from_millis(LOAD_MS)).await;
    let before = acknowledged.lock().unwrap().len();
    assert!(before > 0, "paid calls flow through forwarding nodes");
    signal(&nodes[0], "STOP");
    let (holder, new_epoch, took) = takeover(&sql, epoch, Instant::now()).await;
    eprintln!("{holder} took the ledger over at epoch {new_epoch}, {took:?} after {} stopped", nodes[0].name);
    assert!(!holder.starts_with(&format!("{}#", nodes[0].name)), "another node leads: {holder}");
    // The load goes on through the new sequencer while the old one is still stopped. If it was stopped inside a
    // batch, it holds the chain head's lock until PostgreSQL ends its idle transaction, so the new sequencer's
    // first commit may wait up to IDLE_IN_TRANSACTION_MS from the stop, which can be after the takeover.
    let at_takeover = acknowledged.lock().unwrap().len();
    let deadline = Instant::now() + Duration::from_millis(bazaar_store_postgres::IDLE_IN_TRANSACTION_MS + LOAD_MS);
    let mut during = at_takeover;
    while during == at_takeover && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        during = acknowledged.lock().unwrap().len();
    }
    assert!(during > at_takeover, "paid calls go on after the takeover: {at_takeover} → {during}");

    // Resumed past its lease: it must not commit at its old epoch; it follows, and what it is sent works.
    signal(&nodes[0], "CONT");
    let old = Client::new(nodes[0].url(), Some(agents["cluster-buyer"].clone()));
    let shop_on_old = Client::new(nodes[0].url(), Some(agents["cluster-shop"].clone()));
    for n in 0..20 {
        let order = format!("resumed-{n}");
        let settlement = pay_until_acknowledged(&old, &shop_on_old, &order).await;
        acknowledged.lock().unwrap().insert(order, settlement);
    }
    let (holder_after, epoch_after) = sequencer(&sql).await;
    assert_eq!((holder_after.as_str(), epoch_after), (holder.as_str(), new_epoch), "the resumed node did not lead");
    let http = reqwest::Client::new();
    let mut leading = Vec::new();
    for node in &nodes {
        leading.push(metric(&http, &node.url(), "bazaar_ledger_sequencer ").await);
    }
    let new_index = nodes.iter().position(|n| holder.starts_with(&format!("{}#", n.name))).unwrap();
    for (i, gauge) in leading.iter().enumerate() {
        assert_eq!(*gauge, if i == new_index { 1.0 } else { 0.0 }, "{} says whether it leads", nodes[i].name);
    }
    let fenced = metric(&http, &nodes[0].url(), "bazaar_writer_fenced_batches_total ").await;
    let forwarded = metric(&http, &nodes[0].url(), "bazaar_ledger_forwarded_total ").await;
    eprintln!("the resumed node: {fenced} batches fenced by the store, {forwarded} commands forwarded");
    // The commands forwarded to it while it was stopped reach its writer when it resumes; the store refuses them.
    assert!(fenced >= 1.0, "the resumed sequencer's batches were refused by the store");
    assert!(forwarded >= 40.0, "the resumed node forwards its 20 paid calls ({forwarded})");
    tokio::time::sleep(Duration::from_millis(LOAD_MS)).await;
    let (acknowledged, settled) = finish((workers, acknowledged, stop), &mut nodes, &agents).await;
    eprintln!("{settled} orders settled, {acknowledged} acknowledged, takeover {took:?}");
    database.drop().await;
}

/// Longest a handover may take after the sequencer is told to stop (SIGTERM): it releases its lease once its
/// HTTP connections drain, and a follower's next round (at most `SEQUENCER_RENEW`, 1 s) takes it. A node that
/// did not release would be replaced only when its lease lapsed: at least `SEQUENCER_LEASE` − `SEQUENCER_RENEW`
/// (2 s) after its last renewal, so this bound tells the two apart.
const HANDOVER_BOUND: Duration = Duration::from_millis(1_900);

/// The sequencer stopped the way an operator stops a node (SIGTERM) under load through the others: it exits
/// cleanly and gives the ledger up, another node leads at a higher epoch well before the lease would have
/// lapsed, the load goes on, every acknowledged settlement is there once and `bazaar audit` passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequencer_stopped_with_sigterm_hands_the_ledger_over_at_once() {
    let (database, mut nodes, sql, epoch) = led_cluster("bazaar_handover").await;
    let operator = Client::with_nodes(from(&nodes, 1), Some(OPERATOR.into()));
    let (_, agents) = cast(&operator).await;
    let urls: Vec<String> = nodes[1..].iter().map(Node::url).collect();
    let (workers, acknowledged, stop) = payers(&urls, &agents, "h");
    tokio::time::sleep(Duration::from_millis(LOAD_MS)).await;
    assert!(!acknowledged.lock().unwrap().is_empty(), "paid calls flow through forwarding nodes");

    signal(&nodes[0], "TERM");
    let (holder, new_epoch, took) = takeover(&sql, epoch, Instant::now()).await;
    eprintln!("{holder} took the ledger over at epoch {new_epoch}, {took:?} after SIGTERM");
    assert!(took < HANDOVER_BOUND, "the stopped sequencer released its lease: took {took:?}");
    assert!(!holder.starts_with(&format!("{}#", nodes[0].name)), "another node leads: {holder}");
    let status = nodes[0].process.take().expect("running").wait().unwrap();
    assert!(status.success(), "the sequencer shut down cleanly: {status}");

    let at_takeover = acknowledged.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(LOAD_MS)).await;
    let (acknowledged, settled) = finish((workers, acknowledged, stop), &mut nodes, &agents).await;
    assert!(acknowledged > at_takeover, "paid calls go on after the handover");
    eprintln!("{settled} orders settled, {acknowledged} acknowledged, handover {took:?}");
    database.drop().await;
}

/// A write waits this long (`LEADER_WAIT`, 12 s) for a sequencer before it is answered `503`.
const LEADER_WAIT: Duration = Duration::from_secs(12);

/// With no node able to lead (the lease held elsewhere, as an operator fencing the cluster for maintenance would
/// hold it), a write waits `LEADER_WAIT` and is answered `503 store_unavailable`, having run nowhere; once a node
/// leads again, the same request under the same key runs once, and a resend replays it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_sequencer_a_write_waits_then_is_refused_and_runs_once_later() {
    let (database, mut nodes, sql, _) = led_cluster("bazaar_leaderless").await;
    let operator = Client::with_nodes(from(&nodes, 1), Some(OPERATOR.into()));
    let owner = operator.create_owner(&generate_key(), "leaderless-owner").await.unwrap();
    let owner_id = owner.id.clone();
    let fence = "UPDATE ledger_sequencer SET holder = 'maintenance#0', epoch = epoch + 1, \
                 expires_at = now() + interval '60 seconds' WHERE id = 1; \
                 UPDATE chain_head SET epoch = (SELECT epoch FROM ledger_sequencer WHERE id = 1)";
    sql.batch_execute(fence).await.unwrap();
    let http = reqwest::Client::new();
    let stepped_down = Instant::now();
    for node in &nodes {
        while metric(&http, &node.url(), "bazaar_ledger_sequencer ").await != 0.0 {
            assert!(stepped_down.elapsed() < TAKEOVER_BOUND, "{} still leads", node.name);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    let mint = || {
        http.post(format!("{}/v1/mint", nodes[1].url()))
            .bearer_auth(OPERATOR)
            .header("idempotency-key", "leaderless-mint")
            .json(&json!({"owner": owner_id, "amount_minor": 700}))
    };
    let sent = Instant::now();
    let refused = mint().send().await.unwrap();
    let waited = sent.elapsed();
    assert_eq!(refused.status(), 503, "no sequencer: {waited:?}");
    let problem: Value = refused.json().await.unwrap();
    assert_eq!(problem["code"], "store_unavailable", "{problem}");
    assert!(waited >= LEADER_WAIT && waited < LEADER_WAIT * 2, "it waited for a sequencer: {waited:?}");

    sql.batch_execute("UPDATE ledger_sequencer SET expires_at = now() WHERE id = 1").await.unwrap();
    let resent = Instant::now();
    let ran = loop {
        let answer = mint().send().await.unwrap();
        if answer.status() == 200 {
            break answer;
        }
        assert_eq!(answer.status(), 503, "only a wait for the sequencer is retried");
        assert!(resent.elapsed() < TAKEOVER_BOUND + LEADER_WAIT, "no node led again");
    };
    assert!(!ran.headers().contains_key("idempotent-replayed"), "the refused request had run nowhere: it runs now");
    let again = mint().send().await.unwrap();
    assert_eq!(again.status(), 200);
    assert!(again.headers().contains_key("idempotent-replayed"), "a resend replays it");
    let (holder, _) = sequencer(&sql).await;
    assert!(holder.starts_with("node-"), "a node leads again: {holder}");
    let events = wire_json(&Client::new(nodes[2].url(), Some(OPERATOR.into())).events(0, 500).await.unwrap());
    let mints = events["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "transfer.minted").count();
    assert_eq!(mints, 1, "the mint ran once");
    stop_and_audit(&mut nodes, 1);
    database.drop().await;
}
