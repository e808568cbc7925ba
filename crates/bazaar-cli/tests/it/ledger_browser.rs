//! The ledger explorer in Debian's headless Chromium: `tests/browser/ledger.mjs`
//! signs in as the operator on a registry with a few paid calls, and the page
//! verifies the whole hash chain in the browser (WebCrypto SHA-256), sums the
//! balances to zero, exports CSV and shows one account's history. Served
//! through a test double that adds one to one number of one event, the same
//! page says the chain is broken at exactly that event and trusts nothing
//! after it. axe-core finds no serious or critical violation; the page fits a
//! phone. Needs what `./scripts/test` installs (chromium, tests/browser/node_modules).

use crate::common;

use bazaar_cli::wire_json;
use bazaar_stage::enroll_pair;
use serde_json::{json, Value};

const CALLS: u64 = 3;
const PRICE: u64 = 250;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_page_verifies_the_chain_in_the_browser_and_catches_a_tampered_page() {
    let dir = common::fresh_dir("bazaar-ledger-page");
    let (local, operator) = common::embedded_with_operator(&dir, "op").await;
    let (owner, buyer) = enroll_pair(&operator, "ledger-hotel", "ledger-buyer").await.unwrap();
    let (_, merchant) = enroll_pair(&operator, "ledger-mill", "ledger-shop").await.unwrap();
    let funding = common::Funding { mint: (5_000, "m"), fund: (5_000, "f"), budget: [1_000, 5_000, 5_000] };
    common::fund_agent(&operator, &owner, "ledger-buyer", funding).await;
    for n in 0..CALLS {
        let order = format!("ledger-{n}");
        let token = buyer.issue_token("ledger-shop", PRICE, &order, "https://shop/ledger").await.unwrap();
        merchant.settle(token.body.token.as_str(), PRICE, &order, None).await.unwrap();
    }
    let head = wire_json(&operator.events(0, 500).await.unwrap())["events"].as_array().unwrap().len();

    let args = vec![local.url.clone(), "op".into(), common::screenshot_dir().display().to_string()];
    let (report, exited_ok) = common::browser_driver("ledger", args).await;
    assert_eq!(report["problems"], json!([]), "{report}");
    let verdict = report["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with("Chain verified in this browser") && verdict.contains(&format!("{head} events")),
        "{verdict}"
    );
    assert!(report["rows"].as_array().unwrap().iter().all(|r| r == "verified"), "{report}");
    assert!(report["sum"].as_str().unwrap().contains("sum to 0 units (conserved)"), "{report}");
    assert_eq!(report["csv_lines"], json!(head + 1), "one CSV line per event and a header: {report}");
    assert!(report["csv_header"].as_str().unwrap().starts_with("seq,at_iso,kind"), "{report}");
    assert!(report["history"].as_str().unwrap().contains(report["account"].as_str().unwrap()), "{report}");
    assert_eq!(report["history_agrees"], true, "the transfers add up to the balance: {report}");
    assert!(report["hash"].as_str().unwrap().starts_with("#account="), "a shareable link: {report}");
    assert!(report["history_rows"].as_u64().unwrap() >= 1, "{report}");
    assert_eq!(report["axe"], json!([]), "{report}");
    assert!(report["overflow_px"].as_i64().unwrap() <= 0, "readable at phone width: {report}");

    // Through the test double: broken exactly at the altered event, nothing after it trusted.
    let bent = report["tampered_seq"].as_u64().expect("the double altered an event");
    let said = report["tampered_verdict"].as_str().unwrap();
    assert!(said.starts_with(&format!("The chain is broken at event {bent}:")), "{said}");
    assert!(said.contains("does not hash to its hash"), "{said}");
    for row in report["tampered_rows"].as_array().unwrap() {
        let (seq, check) = (row[0].as_u64().unwrap(), row[1].as_str().unwrap());
        let expected = if seq < bent {
            "verified"
        } else if seq == bent {
            "broken"
        } else {
            "after a break"
        };
        assert_eq!(check, expected, "event {seq}: {report}");
    }
    assert!(exited_ok, "{report}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Who reads what: only the operator reads every balance (paged; they sum to zero); an account's history
/// is its transfers, read by the operator or the holder's owner, not by another owner; unknown is 404.
#[tokio::test]
async fn balances_are_the_operators_and_a_history_is_its_peoples() {
    let dir = common::fresh_dir("bazaar-accounts-route");
    let (local, operator) = common::embedded_with_operator(&dir, "op").await;
    let (owner, agent) = enroll_pair(&operator, "acct-hotel", "acct-buyer").await.unwrap();
    let (stranger, _) = enroll_pair(&operator, "acct-other", "acct-other-agent").await.unwrap();
    let funding = common::Funding { mint: (900, "m"), fund: (700, "f"), budget: [1, 1, 1] };
    common::fund_agent(&operator, &owner, "acct-buyer", funding).await;
    let http = reqwest::Client::new();
    let get = |credential: Option<&str>, url: String| {
        let request = http.get(url);
        match credential {
            Some(c) => request.bearer_auth(c.to_string()),
            None => request,
        }
        .send()
    };
    let json = |answer: reqwest::Response| async move { answer.json::<Value>().await.unwrap() };

    let page = json(get(Some("op"), format!("{}/v1/accounts?limit=2", local.url)).await.unwrap()).await;
    let first = page["accounts"].as_array().unwrap();
    assert_eq!(first.len(), 2, "{page}");
    let after = page["next_after"].as_str().expect("a full page names the next");
    let rest = json(get(Some("op"), format!("{}/v1/accounts?after={after}", local.url)).await.unwrap()).await;
    assert_eq!(rest["next_after"], Value::Null, "{rest}");
    let all: Vec<&Value> = first.iter().chain(rest["accounts"].as_array().unwrap()).collect();
    let sum: i128 = all.iter().map(|a| a["balance"].as_str().unwrap().parse::<i128>().unwrap()).sum();
    assert_eq!(sum, 0, "conserved: {all:?}");
    assert!(all.iter().any(|a| a["balance"] == "700"), "the funded agent's 700 units: {all:?}");
    assert_eq!(get(None, format!("{}/v1/accounts", local.url)).await.unwrap().status(), 401);
    let member = get(owner.credential(), format!("{}/v1/accounts", local.url)).await.unwrap();
    assert_eq!(member.status(), 403);
    assert_eq!(json(member).await["code"], "not_permitted");

    let agent_id = agent.me().await.unwrap().member.id;
    let path = format!("{}/v1/accounts/acct:{agent_id}/transfers?limit=1", local.url);
    let history = json(get(owner.credential(), path.clone()).await.unwrap()).await;
    assert_eq!(history["account"]["balance"], "700", "{history}");
    let moves = history["transfers"].as_array().unwrap();
    assert_eq!(moves.len(), 1, "{history}");
    assert_eq!((moves[0]["direction"].as_str(), moves[0]["amount"].as_u64()), (Some("credit"), Some(700)), "{history}");
    let after = history["next_after"].as_i64().expect("a full page continues");
    let rest = json(get(Some("op"), format!("{path}&after={after}")).await.unwrap()).await;
    assert_eq!(rest["transfers"], json!([]), "nothing else moved it: {rest}");
    assert_eq!(rest["next_after"], Value::Null, "{rest}");
    assert_eq!(get(stranger.credential(), path).await.unwrap().status(), 403, "another owner may not read it");
    let missing = get(Some("op"), format!("{}/v1/accounts/acct:nobody/transfers", local.url)).await.unwrap();
    assert_eq!(missing.status(), 404);
    assert_eq!(json(missing).await["code"], "account_not_found");
    std::fs::remove_dir_all(&dir).ok();
}
