//! The sequencer's forwarding path (docs/design/sequencer.md, invariant 6):
//! commands sent through any node of a cluster get the answers, the chain and
//! the balances one node alone gives them. Needs PostgreSQL and NATS with
//! JetStream (scripts/test starts both); fails, never skips, without them.

use bazaar_cluster::sequencer::Sequenced;
use bazaar_core::command::{Command, Op};
use bazaar_core::model::Member;
use bazaar_core::{pay, token};
use bazaar_postgres_testing::ThrowawayDatabase;
use bazaar_store::conformance::{self, Fixture};
use bazaar_store::Store;
use bazaar_store_postgres::PostgresStore;
use bazaar_types::{AccountId, ManualClock};
use ed25519_dalek::SigningKey;
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::{Arc, Mutex};

/// Nodes in each test cluster.
const NODES: usize = 3;
/// Commands in one model run.
const STEPS: usize = 160;
/// The step at which the sequencer gives its lease up mid-run.
const HANDOVER_AT: usize = STEPS / 2;

fn nats_url() -> String {
    let url = std::env::var("BAZAAR_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    assert!(
        std::net::TcpStream::connect(url.trim_start_matches("nats://")).is_ok(),
        "NATS with JetStream must be running at {url} for this test (scripts/test starts `nats-server -js`)"
    );
    url
}

/// `n` nodes on the database at `url`; the first one started leads.
async fn cluster(url: &str, n: usize, clock: Arc<ManualClock>) -> Vec<Arc<Sequenced>> {
    let nats = async_nats::connect(nats_url()).await.expect("NATS");
    let mut nodes = Vec::new();
    for i in 0..n {
        let (store, lease) =
            PostgresStore::connect_sequenced(url, conformance::test_config(), clock.clone(), &format!("node-{i}"))
                .await
                .expect("open a node");
        nodes.push(Sequenced::start(store, lease, nats.clone()).await);
    }
    assert!(nodes[0].leading() && nodes[1..].iter().all(|node| !node.leading()), "the first node leads");
    nodes
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// Every conformance case, with the store under test a node that is not the
/// sequencer: every write it makes is forwarded.
#[test]
fn a_forwarding_node_passes_the_conformance_suite() {
    let databases: Arc<Mutex<Vec<ThrowawayDatabase>>> = Arc::default();
    let leaders: Arc<Mutex<Vec<Arc<Sequenced>>>> = Arc::default();
    let served: Arc<std::sync::atomic::AtomicU64> = Arc::default();
    let (kept, leading, counted) = (databases.clone(), leaders.clone(), served.clone());
    runtime().block_on(conformance::run_all(move |_config, clock| {
        let (kept, leading, served) = (kept.clone(), leading.clone(), counted.clone());
        Box::pin(async move {
            // The last case's sequencer goes (its follower went with the case): connections are few.
            let previous: Vec<Arc<Sequenced>> = std::mem::take(&mut *leading.lock().unwrap());
            let forwarded: u64 =
                previous.iter().map(|l| l.stats.served.load(std::sync::atomic::Ordering::Relaxed)).sum();
            served.fetch_add(forwarded, std::sync::atomic::Ordering::Relaxed);
            drop(previous);
            let database = tokio::task::spawn_blocking(|| ThrowawayDatabase::create("bazaar_fwd_conf")).await.unwrap();
            let url = database.url.clone();
            // Dropped after the runtime: dropping one blocks.
            kept.lock().unwrap().push(database);
            let nodes = cluster(&url, 2, clock).await;
            leading.lock().unwrap().push(nodes[0].clone());
            let follower = nodes[1].clone();
            follower as Arc<dyn Store>
        })
    }));
    let forwarded = served.load(std::sync::atomic::Ordering::Relaxed);
    assert!(forwarded > 100, "the suite's writes went through the sequencer ({forwarded})");
    leaders.lock().unwrap().clear();
}

/// Where each command of a model run goes.
trait Route {
    fn store(&self) -> Arc<dyn Store>;
}

struct One(Arc<dyn Store>);

impl Route for One {
    fn store(&self) -> Arc<dyn Store> {
        self.0.clone()
    }
}

/// A random node per command, drawn from a generator of its own so the commands are the same as `One`'s.
struct Any(Vec<Arc<Sequenced>>, Mutex<StdRng>);

impl Route for Any {
    fn store(&self) -> Arc<dyn Store> {
        let mut rng = self.1.lock().unwrap();
        self.0[rng.gen_range(0..self.0.len())].clone()
    }
}

/// A random run of token issues and settlements (orders reused, keys reused
/// with the same and with other requests, amounts over the token's ceiling),
/// each command sent where `route` says. Returns every answer as JSON.
async fn model_run(f: &Fixture, route: &dyn Route, seed: u64, mut before: impl FnMut(usize)) -> Vec<String> {
    let (_, buyer, merchant) = f.cast(1_000_000, [500, 50_000, 1_000_000]).await;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut claims = Vec::new();
    let mut answers = Vec::new();
    for step in 0..STEPS {
        before(step);
        let store = route.store();
        let (actor, idem, op): (&Member, _, Op) = if claims.is_empty() || rng.gen_bool(0.4) {
            let order = format!("order-{}", rng.gen_range(0..12));
            let issued = f.claims(&buyer, &merchant, rng.gen_range(1..=600), &order, 900);
            let op = Op::Pay(pay::Op::IssueToken { claims: issued.clone(), token: token::encode(&issued, &f.key) });
            claims.push(issued);
            (&buyer, None, op)
        } else {
            let chosen = &claims[rng.gen_range(0..claims.len())];
            let amount = rng.gen_range(1..=chosen.max.0 + 50);
            let idem = match rng.gen_range(0..3) {
                0 => None,
                _ => f.idem(
                    &format!("{}:settle", merchant.id),
                    &format!("k{}", rng.gen_range(0..6)),
                    &format!("fp{}", rng.gen_range(0..2)),
                ),
            };
            (&merchant, idem, f.settle_op(chosen, amount))
        };
        let applied = store.submit(Command { actor: actor.clone(), idem, op }).await.expect("the store answers");
        answers.push(serde_json::to_string(&applied).unwrap());
    }
    let mut summary = Vec::new();
    for member in [&buyer, &merchant] {
        let account = f.store.account(&AccountId::of_member(&member.id)).await.unwrap().unwrap();
        summary.push(format!("{}: {} / {}", member.handle, account.balance(), account.available()));
    }
    let head = f.store.head().await.unwrap();
    summary.push(format!("head {} {}", head.seq, head.hash));
    let report = f.audit().await;
    assert!(report.ok, "{:?}", report.problems);
    answers.extend(summary);
    answers
}

/// The model test: one random command sequence through random nodes of a
/// three-node cluster (with the lease handed over half way) and through one
/// lone node; every answer, both balances and the chain head are the same.
#[test]
fn forwarded_commands_answer_as_one_node_does() {
    let lone_db = ThrowawayDatabase::create("bazaar_model_lone");
    let cluster_db = ThrowawayDatabase::create("bazaar_model_cluster");
    let runs: Vec<(u64, String, String)> =
        [1u64, 2, 3].into_iter().map(|seed| (seed, lone_db.fresh_schema(), cluster_db.fresh_schema())).collect();
    runtime().block_on(async {
        for (seed, lone_url, cluster_url) in runs {
            let key = SigningKey::from_bytes(&[42u8; 32]);
            let clock = Arc::new(ManualClock::new(conformance::EPOCH));
            let lone: Arc<dyn Store> =
                Arc::new(PostgresStore::connect(&lone_url, conformance::test_config(), clock.clone()).await.unwrap());
            let f = Fixture::new(lone.clone(), clock.clone(), key.clone()).await;
            let expected = model_run(&f, &One(lone), seed, |_| {}).await;

            let clock = Arc::new(ManualClock::new(conformance::EPOCH));
            let nodes = cluster(&cluster_url, NODES, clock.clone()).await;
            let f = Fixture::new(nodes[1].clone(), clock, key).await;
            let handover = nodes[0].clone();
            let got = model_run(&f, &Any(nodes.clone(), Mutex::new(StdRng::seed_from_u64(seed + 100))), seed, |step| {
                if step == HANDOVER_AT {
                    let handover = handover.clone();
                    tokio::spawn(async move { handover.release().await });
                }
            })
            .await;
            for (i, (got, expected)) in got.iter().zip(&expected).enumerate() {
                assert_eq!(got, expected, "seed {seed}, answer {i}");
            }
            assert_eq!(got.len(), expected.len());
            let takeovers: u64 =
                nodes.iter().map(|n| n.stats.takeovers.load(std::sync::atomic::Ordering::Relaxed)).sum();
            assert!(takeovers >= 2, "the lease changed hands during the run ({takeovers} takeovers)");
        }
    });
}

/// A TCP proxy between one NATS client and the server that can swallow what the client sends (its answers)
/// while still delivering what it is sent, and then cut the connection so the client reconnects cleanly.
struct LossyLink {
    address: std::net::SocketAddr,
    swallowing: Arc<std::sync::atomic::AtomicBool>,
    /// Each proxied connection's two copy tasks: aborted (the sockets dropped) when the link heals.
    copies: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl LossyLink {
    async fn start(upstream: String) -> LossyLink {
        use std::sync::atomic::{AtomicBool, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let swallowing = Arc::new(AtomicBool::new(false));
        let copies: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let (swallow, tasks) = (swallowing.clone(), copies.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else { continue };
                let ((mut client_in, mut client_out), (mut server_in, mut server_out)) =
                    (client.into_split(), server.into_split());
                let swallow = swallow.clone();
                let up = tokio::spawn(async move {
                    let mut buffer = vec![0u8; 64 * 1024];
                    while let Ok(n @ 1..) = client_in.read(&mut buffer).await {
                        let lost = swallow.load(Ordering::SeqCst);
                        if !lost && server_out.write_all(&buffer[..n]).await.is_err() {
                            return;
                        }
                    }
                });
                let down = tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut server_in, &mut client_out).await;
                });
                tasks.lock().unwrap().extend([up, down]);
            }
        });
        LossyLink { address, swallowing, copies }
    }

    fn url(&self) -> String {
        format!("nats://{}", self.address)
    }

    fn swallow(&self) {
        self.swallowing.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Stops swallowing and cuts the connections that lost bytes: their clients reconnect.
    fn heal(&self) {
        for copy in self.copies.lock().unwrap().drain(..) {
            copy.abort();
        }
        self.swallowing.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The sequencer applies a forwarded command but its answer is lost on the way back (its NATS link swallows
/// what it sends): a command under an idempotency key is sent again when the answer does not come, and the
/// sequencer's idempotency record answers it — it ran once. A command without a key is not sent again: its
/// caller is told it may have run (and it did, once).
#[test]
fn an_answer_lost_on_the_way_back_is_resent_under_its_key_and_runs_once() {
    use bazaar_cluster::sequencer::FORWARD_TIMEOUT;
    use bazaar_core::command::Idem;
    use bazaar_store::StoreError;
    use std::sync::atomic::Ordering;
    let database = ThrowawayDatabase::create("bazaar_lost_answer");
    let url = database.fresh_schema();
    runtime().block_on(async {
        let upstream = nats_url().trim_start_matches("nats://").to_string();
        let link = LossyLink::start(upstream).await;
        let clock = Arc::new(ManualClock::new(conformance::EPOCH));
        let open = |name: &'static str| {
            PostgresStore::connect_sequenced(&url, conformance::test_config(), clock.clone(), name)
        };
        let (store, lease) = open("node-0").await.unwrap();
        let leader = Sequenced::start(store, lease, async_nats::connect(link.url()).await.unwrap()).await;
        let (store, lease) = open("node-1").await.unwrap();
        let follower = Sequenced::start(store, lease, async_nats::connect(nats_url()).await.unwrap()).await;
        assert!(leader.leading() && !follower.leading());
        let key = SigningKey::from_bytes(&[42u8; 32]);
        let f = Fixture::new(follower.clone(), clock, key).await;
        let owner = f.owner("lost-answers").await;
        let mint =
            |amount: u64| Op::Pay(pay::Op::Mint { owner: owner.id.clone(), amount: bazaar_types::Amount(amount) });
        let balance =
            || async { f.store.account(&AccountId::of_member(&owner.id)).await.unwrap().map(|a| a.balance()) };
        let resent_before = follower.stats.resent.load(Ordering::SeqCst);

        link.swallow();
        let keyed = Command {
            actor: f.operator.clone(),
            idem: Some(Idem::sent("operator:mint".into(), "lost-1".into(), "fp-1".into())),
            op: mint(100),
        };
        let sent = std::time::Instant::now();
        let answer = tokio::spawn({
            let follower = follower.clone();
            async move { follower.submit(keyed).await }
        });
        tokio::time::sleep(FORWARD_TIMEOUT + std::time::Duration::from_millis(300)).await;
        link.heal();
        let applied = answer.await.unwrap().expect("answered once the link healed");
        eprintln!("keyed: answered after {:?}, replayed {}", sent.elapsed(), applied.replayed);
        assert!(applied.outcome.is_ok(), "{:?}", applied.outcome);
        assert!(applied.replayed, "the resend was answered by the idempotency record: the first attempt ran");
        assert!(follower.stats.resent.load(Ordering::SeqCst) > resent_before, "the follower sent it again");
        assert_eq!(balance().await, Some(100), "it ran once");

        link.swallow();
        let keyless = Command { actor: f.operator.clone(), idem: None, op: mint(10) };
        let refused = follower.submit(keyless).await;
        link.heal();
        match refused {
            Err(StoreError::Unavailable(detail)) => assert!(detail.contains("may have run"), "{detail}"),
            other => panic!("a keyless command with a lost answer: {other:?}"),
        }
        // It did run (the sequencer answers after its commit): the caller was told the truth.
        assert_eq!(balance().await, Some(110), "the keyless mint ran once");
        let report = f.audit().await;
        assert!(report.ok, "{:?}", report.problems);
    });
}
