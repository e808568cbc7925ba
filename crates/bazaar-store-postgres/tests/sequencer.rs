//! The sequencer's fence, in the store (docs/design/sequencer.md, invariant 1):
//! a writer whose lease lapsed and was taken by another node has its next
//! batch refused by PostgreSQL's row, whatever its own clock believes.

use bazaar_core::command::Op;
use bazaar_core::pay;
use bazaar_postgres_testing::ThrowawayDatabase;
use bazaar_store::conformance::{self, Fixture};
use bazaar_store::{Store, StoreError};
use bazaar_store_postgres::{PostgresStore, SequencerLease, Standing};
use bazaar_types::{Amount, ManualClock};
use ed25519_dalek::SigningKey;
use std::sync::Arc;
use std::time::Duration;

/// Short enough that the test waits little for a lapse.
const TTL: Duration = Duration::from_millis(300);

/// Databases are made and dropped outside the runtime (their helpers block).
fn run<F: std::future::Future<Output = ()>>(prefix: &str, test: impl FnOnce(String) -> F) {
    let database = ThrowawayDatabase::create(prefix);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(test(database.url.clone()));
}

/// Two nodes, "a" and "b", opened on the database at `url`, sharing one manual clock.
async fn two_nodes(url: &str) -> (Arc<ManualClock>, (PostgresStore, SequencerLease), (PostgresStore, SequencerLease)) {
    let clock = Arc::new(ManualClock::new(conformance::EPOCH));
    let open =
        |node: &'static str| PostgresStore::connect_sequenced(url, conformance::test_config(), clock.clone(), node);
    let (a, b) = (open("a").await.unwrap(), open("b").await.unwrap());
    (clock, a, b)
}

#[test]
fn a_lapsed_sequencer_is_fenced_by_the_store() {
    run("bazaar_fence", lapsed);
}

async fn lapsed(url: String) {
    let (clock, (a, lease_a), (b, lease_b)) = two_nodes(&url).await;
    let (a, b): (Arc<dyn Store>, Arc<dyn Store>) = (Arc::new(a), Arc::new(b));
    assert_eq!(lease_a.cluster(), lease_b.cluster(), "one registry, one forwarding subject");

    // Before any lease, neither writer may commit.
    let key = SigningKey::from_bytes(&[42u8; 32]);
    let nobody = bazaar_core::model::Member {
        id: bazaar_types::MemberId("did:bazaar:operator".into()),
        kind: bazaar_core::model::MemberKind::Operator,
        owner: None,
        handle: "operator".into(),
        created_at: conformance::EPOCH,
    };
    let mint = bazaar_core::command::Command {
        actor: nobody,
        idem: None,
        op: Op::Pay(pay::Op::Mint { owner: bazaar_types::MemberId("did:x".into()), amount: Amount(1) }),
    };
    assert!(matches!(a.submit(mint.clone()).await, Err(StoreError::Fenced(_))));
    assert!(matches!(b.submit(mint).await, Err(StoreError::Fenced(_))));
    assert_eq!(a.head().await.unwrap().seq, 0, "no lease, no commit");

    assert_eq!(lease_a.hold(TTL).await.unwrap(), Standing::Leading { epoch: 1 });
    assert!(matches!(lease_b.hold(TTL).await.unwrap(), Standing::Following { epoch: 1, .. }));
    // A second process started by mistake with A's name is another holder: it follows, never shares epoch 1.
    let (_twin, twin) =
        PostgresStore::connect_sequenced(&url, conformance::test_config(), clock.clone(), "a").await.unwrap();
    assert!(matches!(twin.hold(TTL).await.unwrap(), Standing::Following { epoch: 1, .. }));
    assert_ne!(twin.node(), lease_a.node());
    let f = Fixture::new(a.clone(), clock.clone(), key.clone()).await;
    let (owner, _, _) = f.cast(1_000, [10, 100, 1_000]).await;
    let mint_owner = || bazaar_core::command::Command {
        actor: f.operator.clone(),
        idem: None,
        op: Op::Pay(pay::Op::Mint { owner: owner.id.clone(), amount: Amount(5) }),
    };
    assert!(a.submit(mint_owner()).await.unwrap().outcome.is_ok());
    assert!(matches!(b.submit(mint_owner()).await, Err(StoreError::Fenced(_))), "a follower's writer commits nothing");

    // A is "paused": it does not renew. Its lease lapses and B takes the ledger at epoch 2.
    tokio::time::sleep(TTL * 2).await;
    assert_eq!(lease_b.hold(TTL).await.unwrap(), Standing::Leading { epoch: 2 });
    // A still believes it holds epoch 1; the store refuses its batch before writing anything.
    assert_eq!(lease_a.epoch(), Some(1));
    let head = a.head().await.unwrap();
    assert!(matches!(a.submit(mint_owner()).await, Err(StoreError::Fenced(detail)) if detail.contains("epoch 2")));
    assert_eq!(a.head().await.unwrap(), head, "the fenced batch wrote nothing");
    assert!(b.submit(mint_owner()).await.unwrap().outcome.is_ok());
    // A's next round finds the lease lost and follows.
    assert!(matches!(lease_a.hold(TTL).await.unwrap(), Standing::Following { epoch: 2, .. }));
    assert_eq!(lease_a.epoch(), None);
    // A clean release hands over at once, at a higher epoch.
    lease_b.release().await;
    assert_eq!(lease_a.hold(TTL).await.unwrap(), Standing::Leading { epoch: 3 });
    assert!(matches!(b.submit(mint_owner()).await, Err(StoreError::Fenced(_))));
    assert!(a.submit(mint_owner()).await.unwrap().outcome.is_ok());
    let report = f.audit().await;
    assert!(report.ok, "{:?}", report.problems);
}

/// A takeover waits for the old sequencer's open batch, and that batch then
/// either committed before the new epoch or is refused: here the old
/// sequencer's session holds the chain head's lock (as a batch stopped between
/// its loads and its writes does), and the takeover completes only after it ends.
#[test]
fn a_takeover_waits_for_the_old_batch_then_fences_it() {
    run("bazaar_fence_wait", waits);
}

async fn waits(url: String) {
    let (_clock, (_a, lease_a), (_b, lease_b)) = two_nodes(&url).await;
    assert_eq!(lease_a.hold(TTL).await.unwrap(), Standing::Leading { epoch: 1 });
    // An open transaction holding the chain head's row lock, as A's batch would.
    let (mut holder, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let tx = holder.transaction().await.unwrap();
    tx.query_one("SELECT epoch FROM chain_head WHERE id = 1 FOR UPDATE", &[]).await.unwrap();
    tokio::time::sleep(TTL * 2).await;
    let takeover = tokio::spawn(async move { (lease_b.hold(TTL).await, lease_b) });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!takeover.is_finished(), "the takeover waits for the open batch");
    tx.commit().await.unwrap();
    let (standing, _lease_b) = takeover.await.unwrap();
    assert_eq!(standing.unwrap(), Standing::Leading { epoch: 2 });
    let row = holder.query_one("SELECT epoch FROM chain_head WHERE id = 1", &[]).await.unwrap();
    assert_eq!(row.get::<_, i64>(0), 2);
}

/// A sequencer that gave up on a renewal (it timed out here, so it stepped down) while the database still
/// records it as the holder retakes the lease at once, at the next epoch, instead of leaving the ledger
/// without a sequencer until the lease lapses; the other node meanwhile still follows.
#[test]
fn a_holder_that_stepped_down_retakes_its_own_lease_at_the_next_epoch() {
    run("bazaar_fence_retake", retake);
}

async fn retake(url: String) {
    let (_clock, (_a, lease_a), (_b, lease_b)) = two_nodes(&url).await;
    let long = Duration::from_secs(60);
    assert_eq!(lease_a.hold(long).await.unwrap(), Standing::Leading { epoch: 1 });
    lease_a.step_down();
    assert_eq!(lease_a.epoch(), None, "stepped down: its writer commits nothing");
    assert!(matches!(lease_b.hold(long).await.unwrap(), Standing::Following { epoch: 1, .. }), "not lapsed yet");
    assert_eq!(lease_a.hold(long).await.unwrap(), Standing::Leading { epoch: 2 });
}
