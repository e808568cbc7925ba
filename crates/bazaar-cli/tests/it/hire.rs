//! Service payments: the owner's exact authorization, the one payment it
//! allows from the hiring agent's own budget (never the owner's account),
//! gross/fee/net apart, sponsorship recorded as such — on both stores. And
//! the hiring agent's journal against a proxy that forwards the payment and
//! drops the answer after the registry committed: the attempt is uncertain,
//! never retried, a recovery record that still blocks after a restart, and
//! the registry paid exactly once.

use crate::common;

use bazaar_cli::wire_json;
use common::{available, refused};

use bazaar_agents::labor::payments::{Attempt, AttemptState, Journal, Order, PayOutcome, PAYMENTS_FILE};
use bazaar_sdk::{Client, SdkError};
use bazaar_stage::{enroll_pair, member_id, LocalRegistry};
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const FEE: u64 = 10; // 1 % of 1,000

fn task(n: u8) -> String {
    format!("{:064x}", u64::from(n) + 0xfeed)
}

struct Cast {
    owner: Client,
    owner_id: String,
    agent: Client,
    agent_id: String,
    specialist_id: String,
    specialist_owner: Client,
    specialist_owner_id: String,
}

async fn cast(local: &LocalRegistry, case: &str) -> Cast {
    let operator = local.operator();
    let (owner, agent) = enroll_pair(&operator, &format!("{case}-owner"), &format!("{case}-hirer")).await.unwrap();
    let (mint, fund) = (format!("{case}-mint"), format!("{case}-fund"));
    let funding = common::Funding { mint: (20_000, &mint), fund: (5_000, &fund), budget: [2_000, 5_000, 5_000] };
    common::fund_agent(&operator, &owner, &format!("{case}-hirer"), funding).await;
    let (specialist_owner, specialist) =
        enroll_pair(&operator, &format!("{case}-sp-owner"), &format!("{case}-specialist")).await.unwrap();
    Cast {
        owner_id: member_id(&owner).await.unwrap(),
        owner,
        agent_id: member_id(&agent).await.unwrap(),
        agent,
        specialist_id: member_id(&specialist).await.unwrap(),
        specialist_owner_id: member_id(&specialist_owner).await.unwrap(),
        specialist_owner,
    }
}

impl Cast {
    async fn authorize(&self, task: &str, amount: u64) -> Value {
        let (agent, specialist, pay_to) = (&self.agent_id, &self.specialist_id, &self.specialist_owner_id);
        wire_json(&self.owner.authorize_service(agent, task, specialist, pay_to, amount).await.unwrap().body)
    }

    async fn pay(&self, client: &Client, id: &str, task: &str, amount: u64, key: &str) -> Result<Value, SdkError> {
        let (specialist, pay_to) = (&self.specialist_id, &self.specialist_owner_id);
        client.pay_service(id, task, specialist, pay_to, amount, key).await.map(|a| wire_json(&a.body))
    }
}

async fn exact_authorization_pays_once_from_the_agent(local: &LocalRegistry) {
    let c = cast(local, "svc").await;
    let t = task(1);
    let authorized = c.authorize(&t, 1_000).await;
    let id = authorized["id"].as_str().unwrap().to_string();
    assert_eq!(authorized["state"], "authorized");
    let again = c.owner.authorize_service(&c.agent_id, &t, &c.specialist_id, &c.specialist_owner_id, 5).await;
    assert_eq!(refused(again).0, "authorization_exists", "one authorization per agent and task");
    let to_self = c.owner.authorize_service(&c.agent_id, &task(2), &c.specialist_id, &c.owner_id, 5).await;
    assert_eq!(refused(to_self).0, "pay_to_invalid", "pay-to must be the specialist owner's");
    let by_agent = c.agent.authorize_service(&c.agent_id, &task(3), &c.specialist_id, &c.specialist_owner_id, 5).await;
    assert_eq!(refused(by_agent).0, "not_owner", "an agent never authorizes itself");

    let (owner_before, agent_before) = (available(&c.owner).await, available(&c.agent).await);
    // The owner's account never pays; a payment off the exact terms moves nothing.
    assert_eq!(refused(c.pay(&c.owner, &id, &t, 1_000, "k-owner").await).0, "not_permitted");
    assert_eq!(refused(c.pay(&c.agent, &id, &t, 999, "k-less").await).0, "authorization_mismatch");
    let other_pay_to = c.agent.pay_service(&id, &t, &c.specialist_id, &c.owner_id, 1_000, "k-else").await;
    assert_eq!(refused(other_pay_to).0, "authorization_mismatch");
    assert_eq!((available(&c.owner).await, available(&c.agent).await), (owner_before, agent_before));

    // A job run's credential cannot spend, even against an exact authorization.
    let job_run = c.owner.issue_scoped_credential("svc-hirer", &["jobs", "read", "talk"]).await.unwrap();
    let (code, _) = refused(c.pay(&c.agent.with_credential(job_run), &id, &t, 1_000, "k-run").await);
    assert_eq!(code, "credential_cannot_spend");
    let paid = c.pay(&c.agent, &id, &t, 1_000, "k-1").await.unwrap();
    let figures = (&paid["gross_minor"], &paid["fee_minor"], &paid["net_minor"]);
    assert_eq!(figures, (&Value::from(1_000), &Value::from(FEE), &Value::from(1_000 - FEE)));
    assert_eq!(available(&c.agent).await, agent_before - 1_000, "from the hiring agent's own account");
    assert_eq!(available(&c.owner).await, owner_before, "never the owner's");
    assert_eq!(available(&c.specialist_owner).await, 1_000 - FEE);
    let (code, body) = refused(c.pay(&c.agent, &id, &t, 1_000, "k-2").await);
    assert_eq!((code.as_str(), &body["facts"]["transfers"]), ("authorization_used", &paid["transfers"]));
    assert_eq!(available(&c.specialist_owner).await, 1_000 - FEE, "paid once");
    let record = wire_json(&c.specialist_owner.service_authorization(&id).await.unwrap());
    assert_eq!((record["state"].as_str(), &record["payment"]["net_minor"]), (Some("paid"), &paid["net_minor"]));

    // Sponsorship is recorded as sponsorship and nothing can be paid against it.
    let sponsored = c.authorize(&task(4), 0).await;
    assert_eq!(sponsored["state"], "sponsored");
    let id4 = sponsored["id"].as_str().unwrap();
    for (amount, key) in [(0, "k-4"), (1, "k-5")] {
        assert_eq!(refused(c.pay(&c.agent, id4, &task(4), amount, key).await).0, "service_sponsored");
    }
    // A revoked authorization pays nothing; budgets still bind.
    let id5 = c.authorize(&task(5), 1_000).await["id"].as_str().unwrap().to_string();
    c.owner.revoke_service(&id5).await.unwrap();
    assert_eq!(refused(c.pay(&c.agent, &id5, &task(5), 1_000, "k-6").await).0, "authorization_revoked");
    let id6 = c.authorize(&task(6), 3_000).await["id"].as_str().unwrap().to_string();
    assert_eq!(refused(c.pay(&c.agent, &id6, &task(6), 3_000, "k-7").await).0, "budget_per_call_exceeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_payments_on_sqlite() {
    let dir = common::fresh_dir("bazaar-hire");
    let (local, _) = common::embedded_with_operator(&dir, "op").await;
    exact_authorization_pays_once_from_the_agent(&local).await;
    assert_eq!(common::assert_store_audit_passes(&local).await.balance_sum_minor, 0);
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_payments_on_postgres() {
    let database = common::ThrowawayDatabase::create(&format!("bazaar_hire_{}", std::process::id())).await;
    let local = database.registry().await;
    exact_authorization_pays_once_from_the_agent(&local).await;
    assert_eq!(common::assert_store_audit_passes(&local).await.balance_sum_minor, 0);
    drop(local);
    database.drop().await;
}

/// A proxy to `upstream` that forwards each request whole, waits for the
/// registry's first answer byte (the registry answers only after it
/// committed), then closes the connection without passing the answer on.
async fn dropping_proxy(upstream: String, forwarded: Arc<AtomicUsize>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let upstream = upstream.trim_start_matches("http://").to_string();
    tokio::spawn(async move {
        loop {
            let (mut client, _) = listener.accept().await.unwrap();
            let (upstream, forwarded) = (upstream.clone(), forwarded.clone());
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 8192];
                let (head_end, length) = loop {
                    let n = client.read(&mut buffer).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buffer[..n]);
                    if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
                        let length = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
                            .unwrap_or(0usize);
                        break (end + 4, length);
                    }
                };
                while request.len() < head_end + length {
                    let n = client.read(&mut buffer).await.unwrap();
                    request.extend_from_slice(&buffer[..n]);
                }
                let mut server = tokio::net::TcpStream::connect(&upstream).await.unwrap();
                server.write_all(&request).await.unwrap();
                forwarded.fetch_add(1, Ordering::SeqCst);
                let _ = server.read(&mut buffer).await;
                drop(client);
            });
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ambiguous_payment_is_never_retried_and_blocks_until_the_owner_resolves_it() {
    let dir = common::fresh_dir("bazaar-hire-journal");
    let (local, _) = common::embedded_with_operator(&dir, "op").await;
    let c = cast(&local, "amb").await;
    let t = task(7);
    let id = c.authorize(&t, 1_000).await["id"].as_str().unwrap().to_string();
    let forwarded = Arc::new(AtomicUsize::new(0));
    let proxy = dropping_proxy(local.url.clone(), forwarded.clone()).await;
    let through_proxy = Client::new(&proxy, c.agent.credential().map(str::to_string));
    let order = Order {
        authorization: &id,
        task: &t,
        specialist: &c.specialist_id,
        pay_to: &c.specialist_owner_id,
        amount_minor: 1_000,
    };
    let state_dir = dir.join("hirer-state");
    let mut journal = Journal::open(&state_dir).unwrap();
    let PayOutcome::Uncertain(attempt) = journal.pay(&through_proxy, &order).await.unwrap() else {
        panic!("the answer was lost: uncertain")
    };
    assert_eq!(forwarded.load(Ordering::SeqCst), 1, "sent once");
    let truth = wire_json(&c.owner.service_authorization(&id).await.unwrap());
    assert_eq!(truth["state"], "paid", "the registry committed before the answer was lost");
    assert_eq!(journal.recovery().len(), 1, "a recovery record");
    // Never retried: not by a second ask, not after a restart.
    assert!(matches!(journal.pay(&through_proxy, &order).await.unwrap(), PayOutcome::Blocked(_)));
    drop(journal);
    let mut journal = Journal::open(&state_dir).unwrap();
    assert_eq!(journal.recovery()[0].id, attempt.id);
    assert!(matches!(journal.pay(&c.agent, &order).await.unwrap(), PayOutcome::Blocked(_)));
    assert_eq!(forwarded.load(Ordering::SeqCst), 1);
    assert_eq!(available(&c.specialist_owner).await, 1_000 - FEE, "paid exactly once");

    // The owner reads the ledger and resolves it as paid; the task is never paid again.
    let resolved = journal.resolve(&t, true, Some(truth["payment"].clone()), "registry says paid").unwrap();
    assert_eq!(resolved.state, AttemptState::ResolvedPaid);
    assert!(matches!(journal.pay(&c.agent, &order).await.unwrap(), PayOutcome::AlreadyPaid(_)));

    // A refusal moved nothing and blocks nothing; an attempt saved when the process stopped is uncertain.
    let t8 = task(8);
    let id8 = c.authorize(&t8, 3_000).await["id"].as_str().unwrap().to_string();
    let order8 = Order { authorization: &id8, task: &t8, amount_minor: 3_000, ..order.clone() };
    let PayOutcome::Refused { code, .. } = journal.pay(&c.agent, &order8).await.unwrap() else { panic!("refused") };
    assert_eq!(code, "budget_per_call_exceeded");
    c.owner.set_budget(&c.agent_id, 3_000, 5_000, 5_000).await.unwrap();
    assert!(matches!(journal.pay(&c.agent, &order8).await.unwrap(), PayOutcome::Paid(_)), "a new attempt may follow");
    drop(journal);
    let path = state_dir.join(PAYMENTS_FILE);
    let mut saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut stopped: Attempt = serde_json::from_value(saved["attempts"][0].clone()).unwrap();
    stopped.task = task(9);
    stopped.state = AttemptState::Saved;
    saved["attempts"].as_array_mut().unwrap().push(serde_json::to_value(&stopped).unwrap());
    std::fs::write(&path, saved.to_string()).unwrap();
    let journal = Journal::open(&state_dir).unwrap();
    let recovery = journal.recovery();
    assert_eq!(
        (recovery.len(), recovery[0].state, recovery[0].task.as_str()),
        (1, AttemptState::Uncertain, stopped.task.as_str())
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Runs `bazaar --json <args>` and returns its exit code and JSON answer.
fn bazaar(args: &[&str], credential: &str) -> (i32, Value) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .arg("--json")
        .args(args)
        .env("BAZAAR_CREDENTIAL", credential)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
    (output.status.code().unwrap(), serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The commands: the owner authorizes, the agent pays (then finds it paid),
/// and a recovery record is resolved only as the registry's record says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hire_commands_pay_once_and_resolve_only_what_the_ledger_shows() {
    let dir = common::fresh_dir("bazaar-hire-cli");
    let (local, _) = common::embedded_with_operator(&dir, "op").await;
    let c = cast(&local, "cli").await;
    let (owner, agent) = (c.owner.credential().unwrap().to_string(), c.agent.credential().unwrap().to_string());
    let state = dir.join("state");
    let state = state.to_str().unwrap();
    let t = task(10);
    let registry = ["--registry", local.url.as_str()];
    let authorize = [&["hire", "authorize"][..], &registry, &["--agent", "cli-hirer", "--task", &t]].concat();
    let more = ["--specialist", "cli-specialist", "--pay-to", "cli-sp-owner", "--amount", "1000"];
    let (code, authorized) = bazaar(&[&authorize[..], &more].concat(), &owner);
    assert_eq!(code, 0, "{authorized}");
    let id = authorized["id"].as_str().unwrap();
    let pay = [&["hire", "pay"][..], &registry, &["--state-dir", state, id]].concat();
    let (code, paid) = bazaar(&pay, &agent);
    assert_eq!((code, paid["outcome"].as_str()), (0, Some("paid")), "{paid}");
    let (code, again) = bazaar(&pay, &agent);
    assert_eq!((code, again["outcome"].as_str()), (0, Some("already_paid")), "{again}");
    assert_eq!(available(&c.specialist_owner).await, 1_000 - FEE);

    // An attempt found saved (the process stopped mid-payment) for an authorization that never paid.
    let t11 = task(11);
    let id11 = c.authorize(&t11, 500).await["id"].as_str().unwrap().to_string();
    let path = dir.join("state").join(PAYMENTS_FILE);
    let mut saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut stopped: Attempt = serde_json::from_value(saved["attempts"][0].clone()).unwrap();
    (stopped.task, stopped.authorization, stopped.state) = (t11.clone(), id11.clone(), AttemptState::Saved);
    saved["attempts"].as_array_mut().unwrap().push(serde_json::to_value(&stopped).unwrap());
    std::fs::write(&path, saved.to_string()).unwrap();
    let pay11 = [&["hire", "pay"][..], &registry, &["--state-dir", state, &id11]].concat();
    let (code, blocked) = bazaar(&pay11, &agent);
    assert_eq!((code, blocked["outcome"].as_str()), (3, Some("blocked")), "{blocked}");
    let resolve = [&["hire", "payments", "--state-dir", state, "resolve"][..], &registry, &["--task", &t11]].concat();
    let (code, wrong) = bazaar(&[&resolve[..], &["--paid"]].concat(), &owner);
    assert_eq!(code, 2, "the registry's record says unpaid: {wrong}");
    let (code, resolved) = bazaar(&[&resolve[..], &["--not-paid", "--note", "ledger shows nothing"]].concat(), &owner);
    assert_eq!((code, resolved["state"].as_str()), (0, Some("resolved_not_paid")), "{resolved}");
    let (code, paid) = bazaar(&pay11, &agent);
    assert_eq!(
        (code, paid["outcome"].as_str()),
        (0, Some("paid")),
        "after resolution a new attempt may follow: {paid}"
    );

    // The owner's view: ledger figures from the registry, the meter and the journal from this machine, each in its asset.
    let config = bazaar_agents::labor::worker::AllowanceConfig { asset: "USD".into(), daily: 5_000_000 };
    bazaar_agents::labor::worker::Meter::open(&dir.join("state"), &config).unwrap();
    let view = [&["spending"][..], &registry, &["--agent", "cli-hirer", "--state-dir", state]].concat();
    let (code, seen) = bazaar(&view, &owner);
    assert_eq!(code, 0, "{seen}");
    assert_eq!(seen["asset"], "ledger units (minor)");
    let authorizations = seen["service_authorizations"]["records"].as_array().unwrap();
    assert_eq!(authorizations.iter().filter(|a| a["state"] == "paid").count(), 2, "{seen}");
    assert_eq!(seen["balance"]["available_minor"], 5_000 - 1_500);
    let here = &seen["on_this_machine"][0];
    let meter = (here["allowance"]["asset"].as_str(), here["allowance"]["daily"].as_str());
    assert_eq!(meter, (Some("USD"), Some("5")), "{here}");
    assert!(here["allowance"]["note"].as_str().unwrap().contains("not ledger units"), "{here}");
    assert_eq!(here["payment_attempts"].as_array().unwrap().len(), 3);
    assert_eq!(here["recovery_records"], serde_json::json!([]));
    let stranger = c.specialist_owner.credential().unwrap().to_string();
    assert_eq!(bazaar(&view, &stranger).0, 2, "another owner cannot read this agent's spending");
    std::fs::remove_dir_all(&dir).ok();
}
