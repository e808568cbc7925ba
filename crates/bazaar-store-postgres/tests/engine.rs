//! The writer's engine on its own: the database's second layer of
//! exactly-once refuses what the core should never send, as a constraint,
//! and a refused batch leaves nothing behind; and the shared documents case.

use bazaar_core::chain::GENESIS_HASH;
use bazaar_core::command::Keys;
use bazaar_core::model::{Event, Hold, HoldState, Settlement, TokenRecord, Transfer, TransferKind};
use bazaar_core::state::Changes;
use bazaar_postgres_testing::{admin_url, with_database};
use bazaar_store::conformance::{blobs, documents, test_config, EPOCH};
use bazaar_store::{Engine, Store, StoreError};
use bazaar_store_postgres::{PgEngine, PostgresStore};
use bazaar_types::{AccountId, Amount, HoldId, ManualClock, MemberId, OrderId, Timestamp, TokenId, TransferId};
use std::sync::Arc;
use tokio_postgres::NoTls;

async fn admin(sql: &str) {
    let url = admin_url();
    let (client, connection) = tokio_postgres::connect(&url, NoTls)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL must be reachable at {url}: {e}"));
    tokio::spawn(connection);
    client.batch_execute(sql).await.unwrap();
}

/// A fresh database `name`, a store on it (on a manual clock at `EPOCH`) and the writer's engine on it; the test
/// drops both, then calls [`drop_database`].
fn fresh_store(runtime: &tokio::runtime::Runtime, name: &str) -> (PostgresStore, PgEngine) {
    let url = with_database(&admin_url(), name);
    let store = runtime.block_on(async {
        admin(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
        admin(&format!("CREATE DATABASE {name}")).await;
        let clock = Arc::new(ManualClock::new(EPOCH));
        PostgresStore::connect(&url, test_config(), clock).await.unwrap()
    });
    (store, PgEngine::connect(&url).unwrap())
}

fn drop_database(runtime: &tokio::runtime::Runtime, name: &str) {
    runtime.block_on(admin(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")));
}

fn token(jti: &str, hold: HoldId) -> TokenRecord {
    TokenRecord {
        jti: TokenId(jti.into()),
        buyer: MemberId("did:key:zA".into()),
        merchant: MemberId("did:key:zB".into()),
        max_amount: Amount(5),
        order_id: OrderId("o".into()),
        resource: "/r".into(),
        hold,
        issued_at: EPOCH,
        expires_at: EPOCH,
    }
}

fn hold(id: &str, state: HoldState) -> Hold {
    Hold {
        id: HoldId(id.into()),
        account: AccountId("acct:buyer".into()),
        amount: Amount(100),
        created_at: EPOCH,
        expires_at: Timestamp(EPOCH.0 + 60_000),
        state,
        posted_amount: Amount::ZERO,
        resolved_at: None,
    }
}

fn resolved(id: &str, state: HoldState) -> Hold {
    Hold { state, posted_amount: Amount(100), resolved_at: Some(EPOCH), ..hold(id, HoldState::Pending) }
}

fn transfer(id: &str) -> Transfer {
    Transfer {
        id: TransferId(id.into()),
        debit: AccountId("acct:a".into()),
        credit: AccountId("acct:b".into()),
        amount: Amount(5),
        kind: TransferKind::Funding,
        hold: None,
        link: "link".into(),
        authored_by: MemberId("did:key:zA".into()),
        on_behalf_of: MemberId("did:key:zA".into()),
        at: EPOCH,
    }
}

fn event(seq: u64) -> Event {
    Event {
        seq,
        prev_hash: GENESIS_HASH.into(),
        // Stored as its 32 bytes (migration 0013), so a real SHA-256's shape.
        hash: format!("{seq:064x}"),
        kind: "test".into(),
        body: serde_json::json!({"n": seq}),
        authored_by: MemberId("did:key:zA".into()),
        on_behalf_of: MemberId("did:key:zA".into()),
        at: EPOCH,
    }
}

fn settlement(id: &str, jti: &str, order: &str) -> Settlement {
    Settlement {
        id: id.into(),
        jti: TokenId(jti.into()),
        buyer: MemberId("did:key:zBuyer".into()),
        merchant: MemberId("did:key:zShop".into()),
        order_id: OrderId(order.into()),
        amount: Amount(100),
        fee: Amount(1),
        net: Amount(99),
        settled_at: EPOCH,
    }
}

/// begin, load, write, commit; a failure rolls back, as the writer does.
fn batch(engine: &mut PgEngine, changes: &Changes) -> Result<(), StoreError> {
    engine.begin()?;
    let attempt = engine.load(&Keys::default()).and_then(|_| engine.write(changes));
    match attempt {
        Ok(()) => engine.commit(),
        Err(error) => {
            engine.rollback();
            Err(error)
        }
    }
}

fn is_constraint(result: Result<(), StoreError>) -> bool {
    matches!(result, Err(StoreError::Constraint(_)))
}

#[test]
fn refused_batches_leave_nothing_behind() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let name = format!("bazaar_engine_{}", std::process::id());
    let (store, mut engine) = fresh_store(&runtime, &name);
    // The writer's session is bounded: it cannot hold the chain head forever.
    let seconds = |ms: u64| format!("{}s", ms / 1_000);
    assert_eq!(engine.session_setting("lock_timeout").unwrap(), seconds(bazaar_store_postgres::LOCK_TIMEOUT_MS));
    assert_eq!(
        engine.session_setting("idle_in_transaction_session_timeout").unwrap(),
        seconds(bazaar_store_postgres::IDLE_IN_TRANSACTION_MS)
    );
    assert_eq!(engine.session_setting("plan_cache_mode").unwrap(), "force_custom_plan");

    // A duplicate transfer id refuses the whole batch, event and head included.
    let dup = Changes {
        insert_events: vec![event(1)],
        insert_transfers: vec![transfer("t1"), transfer("t1")],
        ..Changes::default()
    };
    assert!(is_constraint(batch(&mut engine, &dup)));
    assert_eq!(runtime.block_on(store.head()).unwrap().seq, 0);
    assert!(runtime.block_on(store.events(0, 10)).unwrap().is_empty());
    assert!(runtime.block_on(store.transfers(0, 10)).unwrap().is_empty());

    // The same connection carries on after a refusal.
    let good = Changes {
        insert_events: vec![event(1), event(2)],
        insert_transfers: vec![transfer("t1"), transfer("t2")],
        insert_holds: vec![hold("h1", HoldState::Pending), hold("h2", HoldState::Voided)],
        ..Changes::default()
    };
    batch(&mut engine, &good).unwrap();
    let head = runtime.block_on(store.head()).unwrap();
    assert_eq!((head.seq, head.hash), (2, format!("{:064x}", 2)));
    let transfers = runtime.block_on(store.transfers(0, 10)).unwrap();
    let ids: Vec<_> = transfers.iter().map(|(_, t)| t.id.0.as_str()).collect();
    assert_eq!(ids, ["t1", "t2"], "positions follow the batch's order");
    assert!(transfers[0].0 < transfers[1].0);

    // A token settles once and an order is paid once, even if the core were bypassed.
    let paid = Changes { insert_settlements: vec![settlement("s1", "tok-1", "order-1")], ..Changes::default() };
    batch(&mut engine, &paid).unwrap();
    for second in [settlement("s2", "tok-1", "order-2"), settlement("s3", "tok-2", "order-1")] {
        let again = Changes { insert_settlements: vec![second], ..Changes::default() };
        assert!(is_constraint(batch(&mut engine, &again)));
    }

    // A token's hold is `hold_` and its id, which is why it is not stored: a token named otherwise is refused.
    let odd = Changes { insert_tokens: vec![token("tok-odd", HoldId("hold_elsewhere".into()))], ..Changes::default() };
    assert!(is_constraint(batch(&mut engine, &odd)));
    let derived = bazaar_core::pay::hold_id_for(&TokenId("tok-ok".into()));
    batch(&mut engine, &Changes { insert_tokens: vec![token("tok-ok", derived)], ..Changes::default() }).unwrap();

    // A hold resolves once.
    let post = Changes { resolve_holds: vec![resolved("h1", HoldState::Posted)], ..Changes::default() };
    batch(&mut engine, &post).unwrap();
    let void = Changes { resolve_holds: vec![resolved("h1", HoldState::Voided)], ..Changes::default() };
    assert!(is_constraint(batch(&mut engine, &void)));
    // A hold that is not pending cannot resolve, even without a resolution row.
    let late = Changes { resolve_holds: vec![resolved("h2", HoldState::Expired)], ..Changes::default() };
    assert!(is_constraint(batch(&mut engine, &late)));
    let holds = runtime.block_on(store.holds("", 10)).unwrap();
    let states: Vec<_> = holds.iter().map(|h| (h.id.0.as_str(), h.state)).collect();
    assert_eq!(states, [("h1", HoldState::Posted), ("h2", HoldState::Voided)]);

    // An account may not go below zero unless it is allowed to.
    let overdrawn = Changes {
        upsert_accounts: vec![bazaar_core::model::Account {
            debits_posted: 1,
            ..bazaar_core::model::Account::new(AccountId("acct:x".into()), false)
        }],
        ..Changes::default()
    };
    assert!(is_constraint(batch(&mut engine, &overdrawn)));

    drop(engine);
    drop(store);
    drop_database(&runtime, &name);
}

#[test]
fn documents_are_stored_listed_and_inserted_once() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let name = format!("bazaar_docs_{}", std::process::id());
    let (store, mut engine) = fresh_store(&runtime, &name);
    documents(&mut engine, &store, &runtime);
    blobs(&mut engine, &store, &runtime);
    drop(engine);
    drop(store);
    drop_database(&runtime, &name);
}
