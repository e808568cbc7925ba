//! The authorization matrix: every HTTP operation in `/openapi.json` (and the
//! served routes it leaves out, `UNDESCRIBED_ROUTES`) × every kind of caller,
//! with the outcome the design expects, in `tests/authz_matrix.txt` (one row
//! per operation; its header says what each column and each outcome means).
//!
//! One test builds a world with real resources (a settled paid call and its
//! dispute waiting for the desk's ruling, contracts, tokens, rooms and a
//! message, a webhook, a listing, a request for quote, a service
//! authorization, a bounty, scoped credentials, a passkey session, a peer
//! registry), sends every cell through the full router in-process and fails —
//! printing every mismatch at once, as a table — when an operation has no
//! row, a row names an operation that no longer exists, the document's
//! security disagrees with the anonymous column, or any cell's outcome is not
//! the expected one. A cell marked `!` is the design's answer where the
//! server does not give it yet (a finding named in the row's note): the test
//! fails when the server starts giving it, so the mark is dropped then.
//!
//! `cargo test -p bazaar-server --test it authz:: -- --nocapture` prints the count
//! of cells and the wall time.

use crate::common;

use axum::body::Body;
use axum::http::{Method, Request};
use bazaar_core::crypto::sha256_hex;
use bazaar_types::MemberId;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

const MATRIX: &str = include_str!("../authz_matrix.txt");
/// How long a cell may take to answer (its status and headers).
const ANSWER_WAIT: Duration = Duration::from_secs(10);
/// How long an error body is read.
const BODY_WAIT: Duration = Duration::from_millis(500);
/// The task the owner authorizes the agent to pay for (a job's event id), and another for the cells.
const TASK: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
/// The task the agent hires the merchant for.
const TASK_HIRE: &str = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
const TASK_CELL: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
/// The columns, in the matrix's order.
const CALLERS: [&str; 14] = [
    "anon", "agent", "other", "owner", "sessn", "arbtr", "peer", "oper", "membr", "nonmb", "workr", "valdr", "nopay",
    "notlk",
];

/// One expected outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// Authorization passed: 2xx, or a domain refusal other than 401/403/404.
    Ok,
    Unauthenticated,
    Forbidden,
    /// Refused as not found: the thing is not the caller's to see.
    Hidden,
    NotApplicable,
}

impl Outcome {
    fn parse(cell: &str) -> Option<Outcome> {
        Some(match cell {
            "ok" => Outcome::Ok,
            "401" => Outcome::Unauthenticated,
            "403" => Outcome::Forbidden,
            "404" => Outcome::Hidden,
            "n/a" => Outcome::NotApplicable,
            _ => return None,
        })
    }

    fn observed(status: u16) -> Option<Outcome> {
        match status {
            401 => Some(Outcome::Unauthenticated),
            403 => Some(Outcome::Forbidden),
            404 => Some(Outcome::Hidden),
            500.. => None,
            _ => Some(Outcome::Ok),
        }
    }

    /// Whether an observed outcome meets this expectation (`ok` is met by any
    /// answer that is not a refusal of the caller: a harmless body's 404 too).
    fn met_by(self, observed: Outcome) -> bool {
        self == observed || (self == Outcome::Ok && observed == Outcome::Hidden)
    }
}

/// One row of the matrix.
struct Row {
    line: usize,
    method: String,
    path: String,
    /// Per caller: the expected outcome, and whether it is a known finding (`!`).
    cells: Vec<(Outcome, bool)>,
}

fn parse_matrix(text: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let table = line.split_once(" -- ").map_or(line, |(table, _note)| table);
        let words: Vec<&str> = table.split_whitespace().collect();
        assert_eq!(
            words.len(),
            2 + CALLERS.len(),
            "authz_matrix.txt:{}: {} cells, not {}",
            n + 1,
            words.len() - 2,
            CALLERS.len()
        );
        let cells = words[2..]
            .iter()
            .map(|cell| {
                let (cell, finding) = cell.strip_suffix('!').map_or((*cell, false), |c| (c, true));
                let outcome =
                    Outcome::parse(cell).unwrap_or_else(|| panic!("authz_matrix.txt:{}: cell {cell:?}", n + 1));
                (outcome, finding)
            })
            .collect();
        rows.push(Row { line: n + 1, method: words[0].into(), path: words[1].into(), cells });
    }
    rows
}

/// A member of the world: its DID, credential and key.
#[derive(Clone)]
struct Who {
    id: String,
    credential: String,
    key: ed25519_dalek::SigningKey,
}

impl From<common::Person> for Who {
    fn from(p: common::Person) -> Who {
        Who { id: p.id, credential: p.credential, key: p.key }
    }
}

/// Everything the cells name.
struct World {
    registry: common::Registry,
    peer: common::Registry,
    app: axum::Router,
    origin: String,
    session: String,
    /// The bearer credential of each caller that has one.
    bearer: BTreeMap<&'static str, String>,
    agent: Who,
    owner: Who,
    merchant: Who,
    member: Who,
    /// The path parameters and bodies' ids, by name.
    ids: BTreeMap<&'static str, String>,
    /// The validator's signed job (its bounty's).
    job: Value,
    /// The agent's order for a lease at the worker, for its own task identity.
    lease_order: Value,
}

async fn call(
    r: &common::Registry,
    who: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
    key: Option<&str>,
) -> Value {
    let mut request = r.http.request(method.clone(), format!("{}{path}", r.url)).bearer_auth(who);
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let answer: Value = response.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "setting up: {method} {path}: {status} {answer}");
    answer
}

impl World {
    /// The registry (with a relay attached and a recognised peer) and the peer.
    async fn registries() -> (common::Registry, common::Registry) {
        let registry = common::registry().await;
        *registry.state.public_url.write().unwrap() = Some(registry.url.clone());
        let events = bazaar_relay::sqlite::SqliteEventStore::open(&registry.dir().join("relay.db")).unwrap();
        let ws = format!("{}/relay", registry.url.replace("http://", "ws://"));
        let relay =
            bazaar_relay::Relay::start(Arc::new(events), registry.clock.clone(), bazaar_relay::RelayConfig::public(ws))
                .unwrap();
        assert!(registry.state.attach_relay(Arc::new(relay)));
        let peer = common::registry().await;
        registry.operator.add_peer(&peer.url, peer.state.registry.as_str(), 5_000, (100, 1_000, 10_000)).await.unwrap();
        registry.state.set_public_stream(true);
        (registry, peer)
    }

    /// Mints into `owner`'s account and funds each of `agents` with generous ceilings.
    async fn fund(r: &common::Registry, owner: &common::Person, agents: &[&Who]) {
        let mint = json!({"owner": owner.id, "amount_minor": 1_000_000});
        call(r, "operator-secret", Method::POST, "/v1/mint", Some(mint), Some(&format!("mint-{}", owner.id))).await;
        for agent in agents {
            let (path, key) = (format!("/v1/agents/{}/fund", agent.id), format!("fund-{}", agent.id));
            call(r, &owner.credential, Method::POST, &path, Some(json!({"amount_minor": 100_000})), Some(&key)).await;
            let budget =
                json!({"per_call_max_minor": 100_000, "per_day_max_minor": 1_000_000, "total_max_minor": 1_000_000});
            let path = format!("/v1/agents/{}/budget", agent.id);
            call(r, &owner.credential, Method::PUT, &path, Some(budget), None).await;
        }
    }

    /// The dispute desk's credential: the operator (its owner) reissues one.
    async fn desk_credential(r: &common::Registry) -> String {
        let path = format!("/v1/agents/{}/credentials/reissue", bazaar_server::DESK_ID);
        let reissued = call(r, "operator-secret", Method::POST, &path, None, None).await;
        r.operator.with_credential(reissued["credential"].as_str().unwrap()).rotate_credential().await.unwrap()
    }

    async fn new() -> World {
        let (registry, peer) = World::registries().await;
        let origin = registry.url.replace("127.0.0.1", "localhost");
        let r = &registry;
        let op = "operator-secret";

        // The cast: O1 owns the agent and the validator, O2 the other agent and
        // the room member, O3 the merchant, the non-member and the worker.
        let owner: Who = common::person(r, "authz-owner").await.into();
        let owner2 = common::person(r, "authz-owner-2").await;
        let owner3 = common::person(r, "authz-owner-3").await;
        let agent: Who = common::agent_of(r, &owner_person(&owner), "authz-agent").await.into();
        let validator: Who = common::agent_of(r, &owner_person(&owner), "authz-validator").await.into();
        let other: Who = common::agent_of(r, &owner2, "authz-other").await.into();
        let member: Who = common::agent_of(r, &owner2, "authz-member").await.into();
        let merchant: Who = common::agent_of(r, &owner3, "authz-merchant").await.into();
        let nonmember: Who = common::agent_of(r, &owner3, "authz-nonmember").await.into();
        let worker: Who = common::agent_of(r, &owner3, "authz-worker").await.into();
        World::fund(r, &owner_person(&owner), &[&agent, &validator]).await;
        World::fund(r, &owner3, &[&merchant]).await;
        let owner_client = r.operator.with_credential(&owner.credential);
        let nopay = owner_client.issue_scoped_credential(&agent.id, &["jobs", "read", "talk"]).await.unwrap();
        let notalk = owner_client.issue_scoped_credential(&agent.id, &["jobs", "pay", "read"]).await.unwrap();
        let spare = owner_client.issue_scoped_credential(&agent.id, &["read"]).await.unwrap();
        let desk_credential = World::desk_credential(r).await;
        let session = "bzs_authz-session".to_string();

        let mut world = World {
            app: bazaar_server::contract::checked(bazaar_server::router(registry.state.clone())),
            origin,
            session,
            bearer: BTreeMap::new(),
            agent: agent.clone(),
            owner: owner.clone(),
            merchant: merchant.clone(),
            member: member.clone(),
            ids: BTreeMap::new(),
            job: Value::Null,
            lease_order: Value::Null,
            peer,
            registry,
        };
        for (name, credential) in [
            ("agent", agent.credential.clone()),
            ("other", other.credential.clone()),
            ("owner", owner.credential.clone()),
            ("arbtr", desk_credential),
            ("oper", op.to_string()),
            ("membr", member.credential.clone()),
            ("nonmb", nonmember.credential.clone()),
            ("workr", worker.credential.clone()),
            ("valdr", validator.credential.clone()),
            ("nopay", nopay),
            ("notlk", notalk),
        ] {
            world.bearer.insert(name, credential);
        }
        world.ids.insert("agent", agent.id.clone());
        world.ids.insert("merchant", merchant.id.clone());
        world.ids.insert("member", member.id.clone());
        world.ids.insert("owner", owner.id.clone());
        world.ids.insert("worker", worker.id.clone());
        world.ids.insert("validator", validator.id.clone());
        world.ids.insert("spare_credential", sha256_hex(spare.as_bytes())[..16].to_string());
        let spare_agent = common::agent_of(&world.registry, &owner_person(&owner), "authz-spare-agent").await;
        world.ids.insert("spare_agent", spare_agent.id);
        world.disputed_call().await;
        world.contracts_and_rooms().await;
        world.market_and_rewards().await;
        world.hire_and_lease().await;
        // The owner's passkey session, opened as the sign-in's finish opens it
        // (the ceremony itself runs in a browser: bazaar-cli/tests/it/passkey_browser.rs),
        // once the world's clock has moved.
        let (hash, member_id) = (sha256_hex(world.session.as_bytes()), MemberId(owner.id.clone()));
        world.registry.state.plane().unwrap().call(move |s| s.open_session(hash, &member_id, None)).await.unwrap();
        world
    }

    /// A settled paid call from the agent to the merchant, disputed by the
    /// agent, waiting for the desk's ruling; and the agent's tokens. The
    /// resources the cells' paths name are the agent's (or its owner's)
    /// unless the row's note says otherwise.
    async fn disputed_call(&mut self) {
        let r = &self.registry;
        let (a, m) = (&self.agent, &self.merchant);
        let ids = &mut self.ids;
        // A settled paid call from the agent to the merchant, disputed by the
        // agent; the merchant answers; the evidence window closes and the
        // desk is assigned to rule.
        let token = json!({"merchant": m.id, "max_amount_minor": 500, "order_id": "authz-paid", "resource": "https://shop.example/authz"});
        let issued = call(r, &a.credential, Method::POST, "/v1/tokens", Some(token), None).await;
        let settle = json!({"token": issued["token"], "amount_minor": 300, "order_id": "authz-paid"});
        call(r, &m.credential, Method::POST, "/v1/settlements", Some(settle), None).await;
        let buyer = r.operator.with_credential(&a.credential);
        let subject = bazaar_sdk::wire::dispute::DisputeSubject::Call {
            merchant: m.id.to_string(),
            order_id: "authz-paid".to_string(),
        };
        let filed = buyer.file_dispute(subject, "not_delivered", 100, "never came").await.unwrap().body;
        let dispute = filed.id.clone();
        r.operator.with_credential(&m.credential).add_evidence(&dispute, &m.key, b"it came", None).await.unwrap();
        r.clock.advance_s(bazaar_core::dispute::Windows::standard().evidence_s + 1);
        bazaar_server::sweep_once(&r.state).await.unwrap();
        let read = call(r, "operator-secret", Method::GET, &format!("/v1/disputes/{dispute}"), None, None).await;
        assert_eq!(read["arbiter"], bazaar_server::DESK_ID, "the desk rules: {read}");
        ids.insert("dispute", dispute);
        // An unsettled token to void, and one the agent (as merchant) settles.
        let token = json!({"merchant": m.id, "max_amount_minor": 100, "order_id": "authz-void", "resource": "https://shop.example/authz"});
        let issued = call(r, &a.credential, Method::POST, "/v1/tokens", Some(token), None).await;
        ids.insert("void_jti", issued["jti"].as_str().unwrap().into());
        let token = json!({"merchant": a.id, "max_amount_minor": 100, "order_id": "authz-sold", "resource": "https://shop.example/authz"});
        let issued = call(r, &m.credential, Method::POST, "/v1/tokens", Some(token), None).await;
        ids.insert("sold_token", issued["token"].as_str().unwrap().into());
    }

    /// Contracts: the agent buys from the merchant (one), sells to it (two);
    /// rooms of the agent's.
    async fn contracts_and_rooms(&mut self) {
        let r = &self.registry;
        let (a, m) = (&self.agent, &self.merchant);
        let ids = &mut self.ids;
        let seller = r.operator.with_credential(&a.credential);
        let day = r.state.now().ms() + 86_400_000;
        let bought = seller
            .create_contract(&m.id, None, &[(100, "one", day), (100, "two", day)], "t", None, "authz-c1")
            .await
            .unwrap();
        ids.insert("contract", bought.body.id.clone());
        let merchant = r.operator.with_credential(&m.credential);
        let sold = merchant.create_contract(&a.id, None, &[(100, "one", day)], "t", None, "authz-c2").await.unwrap();
        ids.insert("sold_contract", sold.body.id.clone());
        // Rooms: a private one the agent owns with the member in it and one
        // message of the agent's; a public one; a scratch one for leaving
        // and removing.
        let private = r.room(&person(a), "authz private", true).await;
        let scratch = r.room(&person(a), "authz scratch", true).await;
        let leaving = r.room(&person(a), "authz leaving", true).await;
        let worker = ids["worker"].clone();
        let memberships = [
            (&private, &self.member.id),
            (&scratch, &self.member.id),
            (&scratch, &worker),
            (&leaving, &self.member.id),
        ];
        for (room, member) in memberships {
            call(
                r,
                &a.credential,
                Method::POST,
                &format!("/v1/channels/{room}/members"),
                Some(json!({"member": member})),
                None,
            )
            .await;
        }
        let message = r.say(&person(a), &private, "hello").await;
        ids.insert("seq", message["seq"].to_string());
        ids.insert("room", private);
        ids.insert("scratch", scratch);
        ids.insert("leaving", leaving);
        ids.insert("public_room", r.room(&person(a), "authz public", false).await);
    }

    /// The agent's webhook, the market's documents, an authorization, a bounty.
    async fn market_and_rewards(&mut self) {
        let r = &self.registry;
        let (a, m) = (&self.agent, &self.merchant);
        let ids = &mut self.ids;
        // A webhook of the agent's.
        let hook = call(
            r,
            &a.credential,
            Method::POST,
            "/v1/webhooks",
            Some(json!({"url": "https://hooks.example/authz"})),
            None,
        )
        .await;
        ids.insert("webhook", hook["id"].as_str().unwrap().into());
        // The merchant's listing, and the agent's request for quote.
        let listing = json!({"sku": "authz-mug", "title": "Authz mug", "list_price_minor": 100, "floor_minor": 50,
            "capacity_per_day": 5, "capacity_max": 5, "language": "en"});
        let listed = call(r, &m.credential, Method::PUT, "/v1/listings", Some(listing), None).await;
        ids.insert("listing", listed["id"].as_str().unwrap().into());
        let rfq = json!({"item": "mug", "quantity": 1, "max_unit_price_minor": 200, "deadline_ms": r.state.now().ms() + 86_400_000});
        let opened = call(r, &a.credential, Method::POST, "/v1/rfqs", Some(rfq), Some("authz-rfq")).await;
        ids.insert("rfq", opened["id"].as_str().unwrap().into());
        // An order waiting for the owner's approval; another, approved and
        // proved by the merchant, whose receipt image is a blob.
        let policy = json!({"approval_above_minor": 0});
        let path = format!("/v1/agents/{}/order-policy", a.id);
        call(r, &self.owner.credential, Method::PUT, &path, Some(policy), None).await;
        let order = waiting_order(r, a, m, &ids["listing"], "authz-order").await;
        ids.insert("order", order);
        let shipped = waiting_order(r, a, m, &ids["listing"], "authz-shipped").await;
        call(r, &self.owner.credential, Method::POST, &format!("/v1/orders/{shipped}/approve"), None, None).await;
        let proof = r
            .http
            .post(format!("{}/v1/orders/{shipped}/shares/0/proof?tracking=AUTHZ2", r.url))
            .bearer_auth(&m.credential)
            .header("content-type", "image/png")
            .body(RECEIPT_PNG.to_vec());
        let proved = proof.send().await.unwrap();
        assert!(proved.status().is_success(), "setting up the proof: {}", proved.text().await.unwrap());
        ids.insert("blob", sha256_hex(RECEIPT_PNG));
        // The owner's authorization for the agent to pay the merchant.
        let owner = r.operator.with_credential(&self.owner.credential);
        let sva = owner.authorize_service(&a.id, TASK, &m.id, &m.id, 10).await.unwrap().body;
        ids.insert("authorization", sva.id.clone());
        // The agent's account, for its transfers.
        ids.insert("account", bazaar_types::AccountId::of_member(&MemberId(a.id.clone())).0);
        // A token the merchant buys from the agent with, paid through x402.
        let token = json!({"merchant": a.id, "max_amount_minor": 100, "order_id": "authz-x402", "resource": "https://shop.example/authz"});
        let issued = call(r, &m.credential, Method::POST, "/v1/tokens", Some(token), None).await;
        ids.insert("x402_token", issued["token"].as_str().unwrap().into());
        // The validator's bounty on a job naming the worker.
        let signer = bazaar_relay::Signer::generate(&bazaar_types::SeededEntropy::new(7));
        let worker_key = bazaar_relay::Signer::generate(&bazaar_types::SeededEntropy::new(8)).public_key();
        let mut tags = bazaar_relay::jobs::request_tags("coordination/v1", false, &[worker_key], "brief");
        tags.push(vec!["reward".into(), "10".into(), ids["validator"].clone()]);
        let job = signer.sign((r.state.now().ms() / 1000) as u64, bazaar_relay::jobs::JOB_REQUEST, tags, "");
        let job: Value = serde_json::from_str(&job.to_json()).unwrap();
        let validator = self.bearer["valdr"].clone();
        let funded =
            call(r, &validator, Method::POST, "/v1/bounties", Some(json!({"job": job, "amount_minor": 10})), None)
                .await;
        ids.insert("bounty", funded["id"].as_str().unwrap().into());
        self.job = job;
    }

    /// The agent's guest hire of the merchant (the merchant's signed offer,
    /// paid to itself) and the agent's lease at the worker's queue for its own
    /// task identity (an enrollment both keys signed).
    async fn hire_and_lease(&mut self) {
        let r = &self.registry;
        let (a, m) = (&self.agent, &self.merchant);
        let price = bazaar_types::Amount(10);
        let statement =
            bazaar_core::hire::offer_statement(&MemberId(m.id.clone()), TASK_HIRE, &MemberId(m.id.clone()), price);
        let offer = json!({"specialist": m.id, "task": TASK_HIRE, "price_minor": price.0, "pay_to": m.id,
            "offer_signature": bazaar_core::crypto::sign(&m.key, statement.as_bytes())});
        let hired = call(r, &a.credential, Method::POST, "/v1/hires", Some(offer), Some("authz-hire")).await;
        self.ids.insert("hire", hired["id"].as_str().unwrap().into());
        let identity = bazaar_relay::Signer::generate(&bazaar_types::SeededEntropy::new(9));
        let at = (r.state.now().ms() / 1000) as u64;
        let binding = bazaar_relay::labor::enrollment::binding_statement(&identity.public_key(), &a.id, at);
        let signature = bazaar_core::crypto::sign(&a.key, binding.as_bytes());
        let enrollment = bazaar_relay::labor::enrollment::enrollment_event(&identity, &a.id, at, &signature);
        let lease = json!({"worker": self.ids["worker"], "pay_to": self.ids["worker"], "price_minor": 10,
            "period_s": 3_600, "identity": serde_json::from_str::<Value>(&enrollment.to_json()).unwrap()});
        let bought = call(r, &a.credential, Method::POST, "/v1/leases", Some(lease.clone()), Some("authz-lease")).await;
        self.ids.insert("lease", bought["id"].as_str().unwrap().into());
        self.lease_order = lease;
    }

    /// The request a cell sends: its URI and JSON body (from the row's
    /// override, else an example of the operation's schema).
    fn request(&self, row: &Row, document: &Value) -> (String, Option<Value>) {
        let id = |name: &str| self.ids.get(name).cloned().unwrap_or_else(|| format!("unknown-{name}"));
        let path = row.path.as_str();
        let resource = match path.split('/').nth(2).unwrap_or_default() {
            "contracts" if path.contains("/accept") || path.contains("/decline") || path.contains("/deliver") => {
                id("sold_contract")
            }
            "contracts" => id("contract"),
            "disputes" => id("dispute"),
            "webhooks" => id("webhook"),
            "listings" => id("listing"),
            "rfqs" => id("rfq"),
            "orders" => id("order"),
            "service-authorizations" => id("authorization"),
            "bounties" => id("bounty"),
            "hires" => id("hire"),
            "leases" => id("lease"),
            _ => "authz-none".to_string(),
        };
        let channel = match path {
            p if p.ends_with("/join") => id("public_room"),
            p if p.ends_with("/leave") => id("leaving"),
            p if p.contains("/members") => id("scratch"),
            _ => id("room"),
        };
        let mut uri = String::new();
        for part in path.split('/').skip(1) {
            uri.push('/');
            uri.push_str(&match part {
                "{id}" if path.starts_with("/v1/agents") => id("spare_credential"),
                "{agent}" if path.ends_with("/reissue") => id("spare_agent"),
                "{id}" => resource.clone(),
                "{member}" if path.starts_with("/v1/channels") => id("worker"),
                "{agent}" | "{member}" => id("agent"),
                "{channel}" => channel.clone(),
                "{seq}" => id("seq"),
                "{index}" => "0".into(),
                "{jti}" => id("void_jti"),
                "{share}" => "0".into(),
                "{sha256}" => id("blob"),
                "{account}" => id("account"),
                "{name}" => "authz-none".into(),
                part if part.starts_with('{') => "authz-none".into(),
                part => part.into(),
            });
        }
        let body = self.body(row, document, &id);
        if path.ends_with("/proof") {
            uri.push_str("?tracking=AUTHZ1");
        }
        (uri, body)
    }

    fn body(&self, row: &Row, document: &Value, id: &dyn Fn(&str) -> String) -> Option<Value> {
        let fixed = match (row.method.as_str(), row.path.as_str()) {
            ("POST", "/v1/settlements") => {
                json!({"token": id("sold_token"), "amount_minor": 50, "order_id": "authz-sold"})
            }
            ("POST", "/v1/tokens/batch") => json!({"items": [{"merchant": id("merchant"), "max_amount_minor": 1,
                "order_id": "authz-batch", "resource": "https://shop.example/authz"}]}),
            ("POST", "/v1/settlements/batch") => json!({"items": [{"token": id("sold_token"), "amount_minor": 50,
                "order_id": "authz-sold"}]}),
            ("POST", "/v1/tokens") => {
                json!({"merchant": id("merchant"), "max_amount_minor": 1, "order_id": "authz-cell", "resource": "https://shop.example/authz"})
            }
            ("POST", "/v1/disputes/{id}/ruling") => {
                json!({"decision": "refund_partial", "refund_minor": 0, "slash_minor": 0, "reasons": "harmless: invalid"})
            }
            ("PUT", "/v1/members/{member}/handle") => json!({"handle": "authz-agent"}),
            ("PUT", "/v1/channels/{channel}/members/{member}/role") => json!({"role": "member"}),
            ("POST", "/v1/channels/{channel}/members") => json!({"member": id("member")}),
            ("POST", "/v1/channels/{channel}/messages") => json!({"body": "a cell"}),
            ("POST", "/v1/service-authorizations/{id}/pay") => {
                json!({"task": TASK, "specialist": id("merchant"), "pay_to": id("merchant"), "amount_minor": 10})
            }
            ("POST", "/v1/contracts/{id}/milestones/{index}/deliver") => json!({"evidence_sha256": "00".repeat(32)}),
            ("POST", "/v1/disputes") => {
                json!({"subject": {"type": "call", "merchant": id("merchant"), "order_id": "authz-paid"},
                "reason": "not_delivered", "claimed_minor": 1, "note": "a cell"})
            }
            ("POST", "/v1/disputes/{id}/evidence") => json!({"sha256": "00".repeat(32), "signature": "x"}),
            ("POST", "/v1/passports") => json!({"subject": id("agent")}),
            ("POST", "/v1/service-authorizations") => {
                json!({"agent": id("agent"), "task": TASK_CELL, "specialist": id("merchant"),
                "pay_to": id("merchant"), "amount_minor": 1})
            }
            ("POST", "/v1/dms") => json!({"with": id("merchant")}),
            ("POST", "/v1/owners") => {
                let key = bazaar_sdk::generate_key();
                json!({"public_key": hex(key.verifying_key().as_bytes()), "handle": "authz-cell-owner"})
            }
            ("POST", "/v1/mint") => json!({"owner": self.owner.id, "amount_minor": 1}),
            ("PUT", "/v1/listings") => {
                json!({"sku": "authz-cell", "title": "Authz cell", "list_price_minor": 100, "floor_minor": 50,
                "capacity_per_day": 5, "capacity_max": 5, "language": "en"})
            }
            ("POST", "/v1/orders") => json!({"rfq": id("rfq")}),
            ("PATCH", "/v1/channels/{channel}/messages/{seq}") => json!({"body": "edited"}),
            ("POST", "/v1/bounties") => json!({"job": self.job, "amount_minor": 10}),
            ("POST", "/v1/leases") => self.lease_order.clone(),
            ("POST", "/v1/federation/guests") => self.guest_join(),
            ("POST", "/x402/verify") | ("POST", "/x402/settle") => self.x402_payment(id("x402_token"), id("agent")),
            ("POST", "/v1/federation/settle") => json!({"token": "apt_x.y", "amount_minor": 1, "order_id": "authz"}),
            ("POST", "/v1/federation/net") => json!({
                "statement": {"id": "authz", "payer": "did:key:zA", "payee": "did:key:zB", "amount_minor": 1,
                    "proposed_at_ms": 0, "reference": ""},
                "signature": {"registry": "did:key:zA", "key": "did:key:zA", "sig": "x"},
            }),
            ("POST", "/mcp") => json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            _ => {
                let operation = &document["paths"][&row.path][row.method.to_lowercase()];
                let schema = &operation["requestBody"]["content"]["application/json"]["schema"];
                if schema.is_null() {
                    return None;
                }
                let text =
                    common::schema_example(document, schema, 0).to_string().replace("{merchant_id}", &id("merchant"));
                serde_json::from_str(&text).unwrap()
            }
        };
        Some(fixed)
    }

    /// A genuine guest join: an agent key of the peer registry's, signed now.
    fn guest_join(&self) -> Value {
        use base64::Engine;
        use ed25519_dalek::Signer;
        let key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
        let did = bazaar_core::crypto::did_key(&key.verifying_key());
        let audience = self.registry.state.registry.as_str();
        let (home, at) = (self.peer.state.registry.as_str(), self.registry.state.now().ms());
        let message = format!("bazaar-guest-v1\n{audience}\n{did}\n{home}\n{at}");
        let signature =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.sign(message.as_bytes()).to_bytes());
        json!({"did": did, "home": home, "presented_at_ms": at, "signature": signature})
    }

    /// A genuine x402 payment of `token` to `pay_to`.
    fn x402_payment(&self, token: String, pay_to: String) -> Value {
        let network = bazaar_server::x402::network(&self.registry.state);
        let requirements = json!({"scheme": "apt", "network": network, "amount": "50", "asset": "BNU",
            "payTo": pay_to, "maxTimeoutSeconds": 900});
        let payload = json!({"x402Version": 2, "resource": {"url": "https://shop.example/authz"},
            "accepted": requirements, "payload": {"token": token}});
        json!({"x402Version": 2, "paymentPayload": payload, "paymentRequirements": requirements})
    }

    /// Sends one cell: its status and problem code.
    async fn send(
        &self,
        caller: &str,
        row: &Row,
        uri: &str,
        body: &Option<Value>,
        cell: usize,
    ) -> (u16, String, Value) {
        let mut request = Request::builder().method(row.method.as_str()).uri(uri);
        let mut bytes = body.as_ref().map(|b| serde_json::to_vec(b).unwrap()).unwrap_or_default();
        if body.is_some() {
            request = request.header("content-type", "application/json");
        }
        // A shipment's proof is the courier receipt's image: a PNG's first bytes.
        if row.path.ends_with("/proof") {
            bytes = RECEIPT_PNG.to_vec();
            request = request.header("content-type", "image/png");
        }
        request = request.header("idempotency-key", format!("authz-{}-{cell}", row.line));
        if row.path == "/relay" {
            request = request.header("accept", "application/nostr+json");
        }
        match caller {
            "anon" => {}
            "sessn" => {
                request =
                    request.header("cookie", format!("bazaar_session={}", self.session)).header("origin", &self.origin)
            }
            "peer" => {
                let key = self.peer.state.signing_key();
                let registry = self.peer.state.registry.as_str();
                let ts = self.registry.state.now().ms();
                let message = bazaar_core::federation::s2s_message(registry, row.method.as_str(), uri, ts, &bytes);
                let key_did = bazaar_core::crypto::did_key(&key.verifying_key());
                let signature = bazaar_core::crypto::sign(&key, &message);
                request = request.header(
                    "bazaar-registry-signature",
                    format!("registry={registry},key={key_did},ts={ts},sig={signature}"),
                );
            }
            named => request = request.header("authorization", format!("Bearer {}", self.bearer[named])),
        }
        let request = request.body(Body::from(bytes)).unwrap();
        let response = tokio::time::timeout(ANSWER_WAIT, self.app.clone().oneshot(request))
            .await
            .unwrap_or_else(|_| panic!("{} {uri} as {caller}: no answer within {ANSWER_WAIT:?}", row.method))
            .unwrap();
        let status = response.status().as_u16();
        // A 2xx body may be a stream that never ends: read only the ones a cell needs.
        let in_band = row.path.ends_with("/batch") || row.path.starts_with("/x402/");
        if response.status().is_success() && row.path != bazaar_server::auth::ROTATE_PATH && !in_band {
            return (status, String::new(), Value::Null);
        }
        let read = tokio::time::timeout(BODY_WAIT, axum::body::to_bytes(response.into_body(), 1 << 20)).await;
        let answer: Value =
            read.ok().and_then(|b| b.ok()).and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        if status == 200 && in_band {
            return in_band_refusal(&answer).unwrap_or((status, String::new(), answer));
        }
        (status, answer["code"].as_str().unwrap_or_default().to_string(), answer)
    }

    /// After a cell that replaced a caller's credential: the caller goes on with the new one.
    fn heal(&mut self, caller: &str, row: &Row, answer: &Value) {
        if row.path == bazaar_server::auth::ROTATE_PATH {
            if let Some(credential) = answer["credential"].as_str() {
                self.bearer.insert(leak(caller), credential.to_string());
            }
        }
    }
}

/// What a 200 says inside: a batch's single item answers as its own call
/// would; x402 refuses in its body (`success`/`isValid` false with a reason).
fn in_band_refusal(answer: &Value) -> Option<(u16, String, Value)> {
    let item = answer["results"].get(0);
    if let Some(item) = item {
        let status = item["status"].as_u64()? as u16;
        return Some((status, item["body"]["code"].as_str().unwrap_or_default().to_string(), answer.clone()));
    }
    let reason = answer["errorReason"].as_str().or_else(|| answer["invalidReason"].as_str())?;
    let status = if ["wrong_merchant", "credential_cannot_spend"].contains(&reason) { 403 } else { 422 };
    let message = answer["errorMessage"].as_str().or_else(|| answer["invalidMessage"].as_str()).unwrap_or_default();
    Some((status, format!("{reason}: {message}"), answer.clone()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn leak(name: &str) -> &'static str {
    CALLERS.iter().find(|c| **c == name).copied().unwrap()
}

/// A courier receipt's image, as far as the registry reads it: a PNG's first bytes.
const RECEIPT_PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

/// The agent's request for the merchant's mug, offered, closed and ordered
/// (under a policy that asks the owner): the order's id.
async fn waiting_order(r: &common::Registry, a: &Who, m: &Who, listing: &str, key: &str) -> String {
    let deadline = r.state.now().ms() + 86_400_000;
    let rfq = json!({"item": "mug", "quantity": 1, "max_unit_price_minor": 200, "deadline_ms": deadline});
    let opened = call(r, &a.credential, Method::POST, "/v1/rfqs", Some(rfq), Some(&format!("{key}-rfq"))).await;
    let rfq = opened["id"].as_str().unwrap().to_string();
    let offer = json!({"listing": listing, "unit_price_minor": 100, "quantity": 1});
    call(r, &m.credential, Method::POST, &format!("/v1/rfqs/{rfq}/offers"), Some(offer), None).await;
    call(r, &a.credential, Method::POST, &format!("/v1/rfqs/{rfq}/close"), None, None).await;
    let ordered = call(r, &a.credential, Method::POST, "/v1/orders", Some(json!({"rfq": rfq})), Some(key)).await;
    ordered["id"].as_str().unwrap().to_string()
}

fn owner_person(who: &Who) -> common::Person {
    person(who)
}

fn person(who: &Who) -> common::Person {
    common::Person { credential: who.credential.clone(), id: who.id.clone(), key: who.key.clone() }
}

/// Every operation the document describes, and whether it requires a caller
/// (`Some(true)`), takes one optionally (`Some(false)`) or is public (`None`).
fn described_operations(document: &Value) -> BTreeMap<(String, String), Option<bool>> {
    let mut operations = BTreeMap::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            if !["get", "post", "put", "delete", "patch"].contains(&method.as_str()) {
                continue;
            }
            let security = operation["security"].as_array().filter(|s| !s.is_empty());
            let required = security.map(|s| !s.iter().any(|entry| entry.as_object().is_some_and(|o| o.is_empty())));
            operations.insert((method.to_uppercase(), path.clone()), required);
        }
    }
    operations
}

/// Whether the rows and the operations are the same set, and the document's
/// security agrees with the anonymous column: what is wrong, if anything.
fn coverage_problems(rows: &[Row], document: &Value) -> Vec<String> {
    let described = described_operations(document);
    let undescribed: BTreeSet<&str> = bazaar_server::router::UNDESCRIBED_ROUTES.iter().map(|(p, _)| *p).collect();
    let mut problems = Vec::new();

    // The rows and the operations are the same set.
    let mut seen = BTreeSet::new();
    for row in rows {
        let key = (row.method.clone(), row.path.clone());
        if !seen.insert(key.clone()) {
            problems.push(format!("line {}: {} {} has two rows", row.line, row.method, row.path));
        }
        if !described.contains_key(&key) && !undescribed.contains(row.path.as_str()) {
            problems.push(format!(
                "line {}: {} {} is no operation of the API (nor an undescribed route)",
                row.line, row.method, row.path
            ));
        }
    }
    for (method, path) in described.keys() {
        if !seen.contains(&(method.clone(), path.clone())) {
            problems.push(format!("{method} {path}: no row in tests/authz_matrix.txt"));
        }
    }
    for path in &undescribed {
        if !rows.iter().any(|row| row.path == *path) {
            problems.push(format!("{path} (an undescribed route): no row in tests/authz_matrix.txt"));
        }
    }
    // The document's security agrees with the anonymous column.
    for row in rows {
        let Some(required) = described.get(&(row.method.clone(), row.path.clone())) else { continue };
        let anonymous = row.cells[0].0;
        match required {
            Some(true) if anonymous != Outcome::Unauthenticated => problems.push(format!(
                "line {}: {} {} declares required security but the matrix lets an anonymous caller through",
                row.line, row.method, row.path
            )),
            None | Some(false) if anonymous == Outcome::Unauthenticated => problems.push(format!(
                "line {}: {} {} declares no required security but the matrix expects 401 for an anonymous caller",
                row.line, row.method, row.path
            )),
            _ => {}
        }
    }
    problems
}

/// Sends every cell: how many were checked, how many are known findings,
/// and each mismatch as a table line. `AUTHZ_TRACE=1` prints every answer.
async fn check_cells(world: &mut World, rows: &[Row], document: &Value) -> (usize, usize, Vec<String>) {
    let trace = std::env::var_os("AUTHZ_TRACE").is_some();
    let (mut checked, mut mismatches, mut known) = (0usize, Vec::new(), 0usize);
    for row in rows {
        let (uri, body) = world.request(row, document);
        for (n, caller) in CALLERS.iter().enumerate() {
            let (expected, finding) = row.cells[n];
            if expected == Outcome::NotApplicable {
                continue;
            }
            let (status, code, answer) = world.send(caller, row, &uri, &body, n).await;
            checked += 1;
            let observed = Outcome::observed(status);
            if trace {
                println!("{:<7}{:<58}{caller:<7}{status} {code}", row.method, row.path);
            }
            let met = observed.is_some_and(|o| expected.met_by(o));
            if finding {
                known += 1;
            }
            // A 5xx is a mismatch whatever the cell says.
            if met == finding || observed.is_none() {
                let cell = row_cell(expected, finding);
                let why = if finding { "marked a finding, but the server now gives the design's answer" } else { "" };
                mismatches.push(format!("{:<7}{:<58}{caller:<7}{cell:<6}{status} {code} {why}", row.method, row.path));
            }
            if status < 300 {
                world.heal(caller, row, &answer);
            }
        }
    }
    (checked, known, mismatches)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_answers_every_caller_as_the_matrix_says() {
    let started = std::time::Instant::now();
    let rows = parse_matrix(MATRIX);
    let document = serde_json::to_value(bazaar_server::router::api_description()).unwrap();
    let mut problems = coverage_problems(&rows, &document);
    let mut world = World::new().await;
    let built = started.elapsed();
    let (checked, known, mismatches) = check_cells(&mut world, &rows, &document).await;
    let elapsed = started.elapsed();
    println!("authz matrix: {} rows, {checked} cells checked ({known} known findings) in {elapsed:.1?} (world built in {built:.1?})", rows.len());
    if !mismatches.is_empty() {
        problems.push(format!(
            "{} cells differ from the matrix:\n{:<7}{:<58}{:<7}{:<6}observed\n{}",
            mismatches.len(),
            "method",
            "path",
            "caller",
            "want",
            mismatches.join("\n")
        ));
    }
    assert!(problems.is_empty(), "the authorization matrix does not hold:\n{}", problems.join("\n"));
}

fn row_cell(expected: Outcome, finding: bool) -> String {
    let cell = match expected {
        Outcome::Ok => "ok",
        Outcome::Unauthenticated => "401",
        Outcome::Forbidden => "403",
        Outcome::Hidden => "404",
        Outcome::NotApplicable => "n/a",
    };
    format!("{cell}{}", if finding { "!" } else { "" })
}
