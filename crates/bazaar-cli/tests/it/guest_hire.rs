//! Guest hires on both stores: the specialist's signed terms are locked at
//! agreement and survive a changed announcement; "accept and pay" needs the
//! hired specialist's verified result to the exact task and pays once; the
//! guest conversation is a DM that grants no room access. And an escrowed
//! hire whose bad result is disputed through the four phases is refunded.

use crate::common;

use bazaar_cli::wire_json;
use common::{available, event_json, refused};

fn code_of<T: std::fmt::Debug>(result: Result<T, SdkError>) -> String {
    refused(result).0
}

use bazaar_relay::jobs::JOB_RESULT;
use bazaar_relay::Signer;
use bazaar_sdk::{Body, Client, SdkError};
use bazaar_server::OsEntropy;
use bazaar_stage::{enroll_pair, enroll_pair_with_key, member_id, LocalRegistry};
use bazaar_types::limits::{DISPUTE_APPEAL_S, DISPUTE_EVIDENCE_S};
use ed25519_dalek::SigningKey;
use serde_json::json;

const PRICE: u64 = 1_000;
const FEE: u64 = PRICE / 100;

struct Cast {
    hirer: Client,
    specialist: Client,
    specialist_id: String,
    specialist_key: SigningKey,
    specialist_owner: Client,
    specialist_owner_id: String,
    /// The specialist's Nostr key, bound to its DID by `enrollment`.
    nostr: Signer,
    enrollment: bazaar_sdk::wire::nostr::SignedEvent,
}

async fn cast(local: &LocalRegistry, case: &str) -> Cast {
    let operator = local.operator();
    let (owner, hirer) = enroll_pair(&operator, &format!("{case}-owner"), &format!("{case}-hirer")).await.unwrap();
    let (mint, fund) = (format!("{case}-mint"), format!("{case}-fund"));
    let funding = common::Funding { mint: (10_000, &mint), fund: (5_000, &fund), budget: [2_000, 5_000, 5_000] };
    common::fund_agent(&operator, &owner, &format!("{case}-hirer"), funding).await;
    let specialist_key = bazaar_sdk::generate_key();
    let (specialist_owner, specialist) =
        enroll_pair_with_key(&operator, &format!("{case}-sp-owner"), &format!("{case}-specialist"), &specialist_key)
            .await
            .unwrap();
    let nostr = Signer::generate(&OsEntropy);
    let enrollment =
        event_json(&bazaar_agents::labor::identity::enroll(&nostr, &specialist_key, bazaar_sdk::clock::unix_now()));
    Cast {
        hirer,
        specialist_id: member_id(&specialist).await.unwrap(),
        specialist,
        specialist_key,
        specialist_owner_id: member_id(&specialist_owner).await.unwrap(),
        specialist_owner,
        nostr,
        enrollment,
    }
}

impl Cast {
    fn offer(&self, task: &str, pay_to: &str, price: u64) -> String {
        let statement = bazaar_sdk::hire_offer_statement(&self.specialist_id, task, pay_to, price);
        bazaar_core::crypto::sign(&self.specialist_key, statement.as_bytes())
    }

    fn result(&self, by: &Signer, task: &str) -> bazaar_sdk::wire::nostr::SignedEvent {
        event_json(&by.sign(bazaar_sdk::clock::unix_now(), JOB_RESULT, vec![vec!["e".into(), task.into()]], "done"))
    }
}

fn task(n: u8) -> String {
    format!("{:064x}", u64::from(n) + 0xbeef)
}

async fn locked_terms_and_a_verified_acceptance(local: &LocalRegistry, with_plane: bool) {
    let c = cast(local, "guest").await;
    let t = task(1);
    let signature = c.offer(&t, &c.specialist_owner_id, PRICE);
    let agreed = c.hirer.agree_hire(&c.specialist_id, &t, PRICE, &c.specialist_owner_id, &signature, false).await;
    let hire = wire_json(&agreed.unwrap().body);
    let id = hire["id"].as_str().unwrap().to_string();
    assert_eq!((hire["state"].as_str(), hire["price_minor"].as_u64()), (Some("agreed"), Some(PRICE)));
    // The guest conversation is their DM (where the registry runs a conversation
    // plane): the specialist is in no room it was not in before.
    if with_plane {
        let conversation = hire["conversation"].as_str().expect("a guest conversation").to_string();
        let channels = c
            .specialist
            .call::<serde_json::Value>(reqwest::Method::GET, "/v1/channels", None, None)
            .await
            .unwrap()
            .body;
        let listed: Vec<&str> = channels.as_array().unwrap().iter().filter_map(|m| m["channel"].as_str()).collect();
        assert_eq!(listed, [conversation.as_str()], "{channels}");
        let dm = c
            .hirer
            .call::<serde_json::Value>(
                reqwest::Method::POST,
                "/v1/dms",
                Some(Body::json(json!({"with": c.specialist_id}))),
                None,
            )
            .await;
        assert_eq!(dm.unwrap().body["id"].as_str(), Some(conversation.as_str()), "the same persistent DM");
    }

    // Terms the specialist did not sign are refused; so is a later announcement for the same task.
    let t2 = task(2);
    let forged = c.hirer.agree_hire(&c.specialist_id, &t2, PRICE - 1, &c.specialist_owner_id, &signature, false);
    assert_eq!(code_of(forged.await), "offer_signature_invalid");
    let dearer = c.offer(&t, &c.specialist_id, 2 * PRICE);
    let (code_again, body) =
        match c.hirer.agree_hire(&c.specialist_id, &t, 2 * PRICE, &c.specialist_id, &dearer, false).await {
            Err(SdkError::Problem { code, body, .. }) => (code, body),
            other => panic!("{other:?}"),
        };
    assert_eq!(code_again, "hire_exists");
    let locked = (&body["facts"]["price_minor"], &body["facts"]["pay_to"]);
    assert_eq!(locked, (&json!(PRICE), &json!(c.specialist_owner_id)), "the locked terms, attached");

    // Accepting needs the hired specialist's own result to this task.
    let impostor = Signer::generate(&OsEntropy);
    assert_eq!(
        code_of(c.hirer.accept_hire(&id, &c.result(&impostor, &t), &c.enrollment).await),
        "response_not_verified"
    );
    let elsewhere = c.result(&c.nostr, &task(3));
    assert_eq!(code_of(c.hirer.accept_hire(&id, &elsewhere, &c.enrollment).await), "response_not_verified");
    assert_eq!(available(&c.specialist_owner).await, 0);
    let before = available(&c.hirer).await;
    let good = c.result(&c.nostr, &t);
    let paid = wire_json(&c.hirer.accept_hire(&id, &good, &c.enrollment).await.unwrap().body);
    assert_eq!((paid["gross_minor"].as_u64(), paid["net_minor"].as_u64()), (Some(PRICE), Some(PRICE - FEE)));
    assert_eq!(available(&c.specialist_owner).await, PRICE - FEE, "the locked price to the locked pay-to");
    assert_eq!(available(&c.hirer).await, before - PRICE);
    let record = wire_json(&c.specialist.hire(&id).await.unwrap());
    assert_eq!(record["acceptance"]["result_event"], good.id.as_str());
    assert!(record.get("grade").is_none() && record["acceptance"].get("quality").is_none(), "acceptance, not a grade");
    let another = event_json(&c.nostr.sign(
        bazaar_sdk::clock::unix_now(),
        JOB_RESULT,
        vec![vec!["e".into(), t.clone()]],
        "again",
    ));
    assert_eq!(code_of(c.hirer.accept_hire(&id, &another, &c.enrollment).await), "hire_paid", "it pays once");
    let retried = c.hirer.accept_hire(&id, &good, &c.enrollment).await.unwrap();
    assert!(retried.replayed, "the same acceptance replays");
    assert_eq!(available(&c.specialist_owner).await, PRICE - FEE, "paid once");
}

async fn an_escrowed_hire_disputed_through_four_phases_refunds(local: &LocalRegistry) {
    let c = cast(local, "escrowed").await;
    let t = task(4);
    let signature = c.offer(&t, &c.specialist_id, PRICE);
    let not_specialist = c.offer(&t, &c.specialist_owner_id, PRICE);
    let to_owner = c.hirer.agree_hire(&c.specialist_id, &t, PRICE, &c.specialist_owner_id, &not_specialist, true);
    assert_eq!(code_of(to_owner.await), "pay_to_invalid", "an escrowed hire pays the specialist itself");
    let before = available(&c.hirer).await;
    let hire = wire_json(
        &c.hirer.agree_hire(&c.specialist_id, &t, PRICE, &c.specialist_id, &signature, true).await.unwrap().body,
    );
    let contract = hire["contract"].as_str().expect("an escrowed contract").to_string();
    assert_eq!(available(&c.hirer).await, before - PRICE, "held at agreement");
    let held = wire_json(&c.specialist.contract(&contract).await.unwrap());
    assert_eq!((held["arbiter"].as_str(), held["total"].as_u64()), (Some("did:bazaar:dispute-desk"), Some(PRICE)));
    c.specialist.contract_act(&contract, "accept").await.unwrap();
    c.specialist.deliver(&contract, 0, b"a bad result").await.unwrap();

    let subject = bazaar_sdk::wire::dispute::DisputeSubject::Milestone { contract: contract.to_string(), index: 0 };
    let filed = c.hirer.file_dispute(subject, "not_as_described", PRICE, "the delivered script is wrong").await;
    let dispute = filed.unwrap().body.id;
    let id = hire["id"].as_str().unwrap();
    let good = c.result(&c.nostr, &t);
    assert_eq!(code_of(c.hirer.accept_hire(id, &good, &c.enrollment).await), "milestone_disputed", "nothing moves");
    c.specialist.add_evidence(&dispute, &c.specialist_key, b"my delivery log", None).await.unwrap();
    local.clock.advance_s(DISPUTE_EVIDENCE_S + 60);
    bazaar_server::sweep_once(&local.state).await.unwrap();
    let desk = Client::new(&local.url, local.desk_credential.clone());
    desk.rule(&dispute, "refund_full", PRICE, 0, "the script delivered is not the one agreed").await.unwrap();
    local.clock.advance_s(DISPUTE_APPEAL_S + 60);
    bazaar_server::sweep_once(&local.state).await.unwrap();
    let record = wire_json(&c.hirer.dispute(&dispute).await.unwrap());
    let phases: Vec<&str> = record["timeline"].as_array().unwrap().iter().filter_map(|s| s["phase"].as_str()).collect();
    assert_eq!(phases, ["filed", "evidence", "ruling", "appealable", "executed"], "{record}");
    assert_eq!(available(&c.hirer).await, before, "refunded in full");
    assert_eq!(available(&c.specialist).await, 0);
}

async fn all(local: &LocalRegistry, with_plane: bool) {
    assert_eq!(
        bazaar_sdk::hire_offer_statement("did:key:z", &task(9), "did:key:y", 5),
        bazaar_core::hire::offer_statement(
            &bazaar_types::MemberId("did:key:z".into()),
            &task(9),
            &bazaar_types::MemberId("did:key:y".into()),
            bazaar_types::Amount(5)
        ),
        "the SDK signs the statement the registry checks"
    );
    locked_terms_and_a_verified_acceptance(local, with_plane).await;
    an_escrowed_hire_disputed_through_four_phases_refunds(local).await;
    assert_eq!(common::assert_store_audit_passes(local).await.balance_sum_minor, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_hires_on_sqlite() {
    let dir = common::fresh_dir("bazaar-guest-hire");
    let (local, _) = common::embedded_with_operator(&dir, "op").await;
    all(&local, true).await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_hires_on_postgres() {
    let database = common::ThrowawayDatabase::create(&format!("bazaar_guest_hire_{}", std::process::id())).await;
    let local = database.registry().await;
    all(&local, false).await;
    drop(local);
    database.drop().await;
}
