//! `bazaar market` end to end, the binary against an embedded registry: two
//! makers list, a buyer's agent searches and finds them, asks for quotes (the
//! same key finds the same request), an offer below a floor is refused (the
//! bad input: exit 1, `offer_below_floor`, the numbers in `facts`) and valid
//! ones made, the allocation read; an order before closing is refused
//! `rfq_invalid` without spoiling the order after it; the order waits for the
//! owner (a second order is `rfq_ordered`, the agent's own approval
//! `approval_by_person`), the owner approves, one maker is paid on her proof
//! (once: `share_paid`), the other share is cancelled and released — the
//! printed JSON checked at each step — then the store audits clean. And prose,
//! a refusal on stderr, a usage error (exit 2), `--help`. Measured debug
//! runtime: under 1 s for both tests (0.65–1.3 s measured, about 30 runs of the binary), once
//! the binary is built.

use crate::common;

use bazaar_stage::{enroll_pair, member_id};
use serde_json::Value;
use std::process::Command;

/// A PNG's signature and a few bytes: the registry checks the type, not the picture.
const RECEIPT_PNG: &[u8] = b"\x89PNG\r\n\x1a\nnot really a courier receipt";

/// One `bazaar market` run on the registry at `url` with `credential` (none for ""):
/// its exit code and what it printed on stdout, as JSON.
struct Market {
    url: String,
}

impl Market {
    async fn run(&self, credential: &str, args: &[&str]) -> (i32, Value) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_bazaar"));
        command.args(["--json", "market"]).args(args).args(["--registry", &self.url]);
        command.env_remove("BAZAAR_CREDENTIAL").env_remove("BAZAAR_CREDENTIAL_FILE");
        if !credential.is_empty() {
            command.args(["--credential", credential]);
        }
        let output = tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        let printed = serde_json::from_str(stdout.trim()).unwrap_or_else(|_| {
            panic!("bazaar market {args:?} printed no JSON: {stdout} {}", String::from_utf8_lossy(&output.stderr))
        });
        (output.status.code().unwrap_or(-1), printed)
    }

    /// [`Market::run`] that must succeed.
    async fn ok(&self, credential: &str, args: &[&str]) -> Value {
        let (code, printed) = self.run(credential, args).await;
        assert_eq!(code, 0, "bazaar market {args:?}: {printed}");
        printed
    }

    /// [`Market::run`] that the registry must refuse with `code`: exit 1 and the problem printed.
    async fn refused(&self, credential: &str, args: &[&str], code: &str) -> Value {
        let (exit, printed) = self.run(credential, args).await;
        assert_eq!((exit, printed["code"].as_str()), (1, Some(code)), "bazaar market {args:?}: {printed}");
        assert!(printed["error"].as_str().unwrap().contains(code), "{printed}");
        assert!(!printed["detail"].as_str().unwrap().is_empty(), "a refusal says what to do: {printed}");
        printed
    }
}

fn credential(client: &bazaar_sdk::Client) -> String {
    client.credential().unwrap().to_string()
}

/// `--sku cushion-cover …` for a maker's listing at `list`, floor `floor`.
fn listing_args(list: &str, floor: &str) -> Vec<String> {
    let args = [
        "listing",
        "put",
        "--sku",
        "cushion-cover",
        "--title",
        "Hand-embroidered cushion cover",
        "--description",
        "Cotton, 45 × 45 cm.",
        "--tag",
        "cushion",
        "--tag",
        "textile",
        "--list-price",
        list,
        "--floor",
        floor,
        "--max-discount-bps",
        "2000",
        "--capacity-per-day",
        "2",
        "--capacity-max",
        "20",
        "--lead-time-days",
        "2",
        "--notice-days",
        "5",
        "--language",
        "hi",
    ];
    args.iter().map(|a| a.to_string()).collect()
}

/// Who takes part: two makers, a hotel (the owner) and its buyer agent — credentials and DIDs.
struct Cast {
    cli: Market,
    dir: std::path::PathBuf,
    amara: String,
    amara_did: String,
    lucia: String,
    lucia_did: String,
    hotel: String,
    buyer: String,
}

/// The buyer's agent is funded with this, and may spend all of it.
const BUDGET_MINOR: u64 = 50_000;

async fn cast(local: &bazaar_stage::LocalRegistry, operator: &bazaar_sdk::Client, dir: &std::path::Path) -> Cast {
    let (_, amara) = enroll_pair(operator, "amara-home", "amara").await.unwrap();
    let (_, lucia) = enroll_pair(operator, "lucia-home", "lucia").await.unwrap();
    let (hotel, buyer) = enroll_pair(operator, "hotel", "hotel-buyer").await.unwrap();
    let b = BUDGET_MINOR;
    let funding = common::Funding { mint: (100_000, "m"), fund: (b, "f"), budget: [b, b, b] };
    common::fund_agent(operator, &hotel, "hotel-buyer", funding).await;
    Cast {
        cli: Market { url: local.url.clone() },
        dir: dir.to_path_buf(),
        amara_did: member_id(&amara).await.unwrap(),
        amara: credential(&amara),
        lucia_did: member_id(&lucia).await.unwrap(),
        lucia: credential(&lucia),
        hotel: credential(&hotel),
        buyer: credential(&buyer),
    }
}

impl Cast {
    /// What `credential`'s member may spend now.
    async fn available(&self, credential: &str) -> u64 {
        common::available(&bazaar_sdk::Client::new(&self.cli.url, Some(credential.to_string()))).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storefront_order_from_listing_to_proof_and_cancellation() {
    let dir = common::fresh_dir("bazaar-market-cli");
    let (local, operator) = common::embedded_with_operator(&dir, "op-mcli").await;
    let c = cast(&local, &operator, &dir).await;
    let listings = list_and_search(&c).await;
    let rfq_id = ask_and_offer(&c, &listings).await;
    let total = allocate_and_close(&c, &rfq_id).await;
    let approved = order_and_approve(&c, &rfq_id, total).await;
    ship_one_cancel_the_other(&c, &approved).await;
    common::assert_store_audit_passes(&local).await;
    std::fs::remove_dir_all(&dir).ok();
}

/// Two makers list; anyone reads a listing; the buyer's agent searches (plural, any case) and
/// finds both. Returns Amara's listing and Lucia's.
async fn list_and_search(c: &Cast) -> (String, String) {
    let cli = &c.cli;
    let args = listing_args("3200", "2400");
    let listed = cli.ok(&c.amara, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let amara_listing = listed["id"].as_str().unwrap().to_string();
    assert!(amara_listing.starts_with("lst_"), "{listed}");
    assert_eq!((listed["seller"].as_str(), &listed["lowest_price_minor"]), (Some(c.amara_did.as_str()), &2560.into()));
    let args = listing_args("3000", "2500");
    let lucia_listing = cli.ok(&c.lucia, &args.iter().map(String::as_str).collect::<Vec<_>>()).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let shown = cli.ok("", &["listing", "show", &amara_listing]).await;
    assert_eq!((shown["id"].as_str(), shown["terms"]["floor"].as_u64()), (Some(amara_listing.as_str()), Some(2400)));
    cli.refused("", &["listing", "show", "lst_nothing"], "listing_not_found").await;

    let found = cli.ok(&c.buyer, &["search", "Embroidered", "cushion", "covers"]).await;
    let ids: Vec<&str> = found["listings"].as_array().unwrap().iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&amara_listing.as_str()) && ids.contains(&lucia_listing.as_str()), "{found}");
    let one = cli.ok(&c.buyer, &["search", "cushion", "--limit", "1"]).await;
    assert_eq!(one["listings"].as_array().unwrap().len(), 1, "{one}");
    (amara_listing, lucia_listing)
}

/// The agent asks for 10 at no more than 3000, in 30 days; both makers are invited and see the
/// request. An offer below the floor is refused (the bad input: its code and numbers, exit 1);
/// valid ones follow. Returns the request's id.
async fn ask_and_offer(c: &Cast, (amara_listing, lucia_listing): &(String, String)) -> String {
    let cli = &c.cli;
    let ask = [
        "rfq",
        "create",
        "--item",
        "embroidered cushion covers",
        "--quantity",
        "10",
        "--max-unit-price",
        "3000",
        "--deadline-days",
        "30",
        "--key",
        "ask-1",
    ];
    let rfq = cli.ok(&c.buyer, &ask).await;
    let rfq_id = rfq["id"].as_str().unwrap().to_string();
    assert_eq!((rfq["state"].as_str(), rfq["idempotency_key"].as_str()), (Some("open"), Some("ask-1")), "{rfq}");
    let invited: Vec<&str> = rfq["invited"].as_array().unwrap().iter().map(|p| p[0].as_str().unwrap()).collect();
    assert!(invited.contains(&c.amara_did.as_str()) && invited.contains(&c.lucia_did.as_str()), "{rfq}");
    let deadline = rfq["request"]["deadline"].as_i64().unwrap();
    assert_eq!(deadline % 86_400_000, 86_399_999, "--deadline-days is the end of a UTC day");
    assert_eq!(cli.ok(&c.buyer, &ask).await["id"], rfq["id"], "the same key finds the same request");
    let polled = cli.ok(&c.amara, &["rfq", "list"]).await;
    assert!(polled["rfqs"].as_array().unwrap().iter().any(|r| r["id"] == rfq_id.as_str()), "{polled}");

    let offer = |listing: &str, price: &'static str, units: &'static str| {
        ["offer", "make", &rfq_id, "--listing", listing, "--unit-price", price, "--quantity", units].map(String::from)
    };
    let below = offer(amara_listing, "2000", "6");
    let refusal = cli.refused(&c.amara, &below.each_ref().map(String::as_str), "offer_below_floor").await;
    let numbers = (refusal["status"].as_u64(), refusal["facts"]["lowest_price_minor"].as_u64());
    assert_eq!((numbers, refusal["facts"]["offer"]["unit_price"].as_u64()), ((Some(422), Some(2560)), Some(2000)));
    let made = cli.ok(&c.amara, &offer(amara_listing, "2600", "6").each_ref().map(String::as_str)).await;
    assert_eq!((made["status"].as_str(), made["attempts_left"].as_u64()), (Some("valid"), Some(1)), "{made}");
    cli.ok(&c.lucia, &offer(lucia_listing, "2700", "10").each_ref().map(String::as_str)).await;
    let offers = cli.ok(&c.buyer, &["offer", "list", &rfq_id]).await;
    let codes: Vec<Value> = offers["offers"].as_array().unwrap().iter().map(|o| o["refusal"]["code"].clone()).collect();
    assert_eq!(codes, [Value::from("offer_below_floor"), Value::Null, Value::Null], "{offers}");
    rfq_id
}

/// The allocation, cheapest first; ordering before closing is refused (which must not spoil the
/// later order: the default key is fresh); closing fixes it. Returns its total.
async fn allocate_and_close(c: &Cast, rfq_id: &str) -> u64 {
    let cli = &c.cli;
    let plan = cli.ok(&c.buyer, &["rfq", "allocation", rfq_id]).await;
    let total = 6 * 2600 + 4 * 2700;
    assert_eq!((plan["state"].as_str(), &plan["allocation"]["total"]), (Some("open"), &total.into()));
    let lines = plan["allocation"]["lines"].as_array().unwrap();
    let units: Vec<(&str, u64)> =
        lines.iter().map(|l| (l["seller"].as_str().unwrap(), l["units"].as_u64().unwrap())).collect();
    assert_eq!(units, [(c.amara_did.as_str(), 6), (c.lucia_did.as_str(), 4)]);
    cli.refused(&c.buyer, &["order", "create", rfq_id], "rfq_invalid").await;
    let closed = cli.ok(&c.buyer, &["rfq", "close", rfq_id]).await;
    assert_eq!(closed["allocation"], plan["allocation"]);
    assert_eq!(cli.ok(&c.buyer, &["rfq", "show", rfq_id]).await["state"], "closed");
    total
}

/// The owner's policy makes the order wait for a person; a second order from the request is
/// refused naming the first; the agent cannot approve; the owner does. Returns the approved order.
async fn order_and_approve(c: &Cast, rfq_id: &str, total: u64) -> Value {
    let cli = &c.cli;
    let policy = cli.ok(&c.hotel, &["policy", "set", "hotel-buyer", "--approval-above", "20000"]).await;
    assert_eq!(policy["approval_above_minor"], 20_000);
    let order = cli.ok(&c.buyer, &["order", "create", rfq_id]).await;
    let order_id = order["id"].as_str().unwrap();
    assert_eq!((order["state"].as_str(), order["total"].as_u64()), (Some("awaiting_approval"), Some(total)));
    assert_eq!(order["approval_url"].as_str(), Some(format!("/approve/{order_id}").as_str()));
    assert!(order["idempotency_key"].as_str().unwrap().starts_with("cli-"), "{order}");
    let twice = cli.refused(&c.buyer, &["order", "create", rfq_id], "rfq_ordered").await;
    assert_eq!(twice["facts"]["order"], order["id"], "a request is ordered once, whatever the key");
    cli.refused(&c.buyer, &["order", "approve", order_id], "approval_by_person").await;
    let approved = cli.ok(&c.hotel, &["order", "approve", order_id]).await;
    assert_eq!(approved["state"], "authorized", "{approved}");
    assert_eq!(c.available(&c.buyer).await, BUDGET_MINOR - total, "one authorization holds the whole order");
    approved
}

/// Amara proves her share and is paid on it, once; Lucia's share is cancelled before it ships; the
/// order as the buyer and a maker see it; the receipt image comes back as it went.
async fn ship_one_cancel_the_other(c: &Cast, approved: &Value) {
    let cli = &c.cli;
    let order_id = approved["id"].as_str().unwrap();
    let share_of = |did: &str| {
        let lines = approved["lines"].as_array().unwrap();
        lines.iter().find(|l| l["seller"] == did).unwrap()["index"].as_u64().unwrap().to_string()
    };
    let (amara_share, lucia_share) = (share_of(&c.amara_did), share_of(&c.lucia_did));
    let receipt = c.dir.join("receipt.png");
    std::fs::write(&receipt, RECEIPT_PNG).unwrap();
    let proof =
        ["order", "proof", order_id, &amara_share, "--tracking", "TRK-1", "--receipt", receipt.to_str().unwrap()];
    let paid = cli.ok(&c.amara, &proof).await;
    assert_eq!((paid["tracking"].as_str(), paid["seller"].as_str()), (Some("TRK-1"), Some(c.amara_did.as_str())));
    // 6 × 2600 = 15 600, less the 1 % protocol fee.
    assert_eq!((&paid["payment"]["net_minor"], &paid["payment"]["fee_minor"]), (&15_444.into(), &156.into()));
    assert_eq!(c.available(&c.amara).await, 15_444);
    cli.refused(&c.amara, &proof, "share_paid").await;
    let cancelled = cli.ok(&c.buyer, &["order", "cancel", order_id, &lucia_share]).await;
    let released = (cancelled["released_minor"].as_u64(), cancelled["order_state"].as_str());
    assert_eq!(released, (Some(10_800), Some("completed")), "{cancelled}");
    assert_eq!(c.available(&c.buyer).await, BUDGET_MINOR - 15_600);

    let shown = cli.ok(&c.buyer, &["order", "show", order_id]).await;
    let states: Vec<&str> = shown["lines"].as_array().unwrap().iter().map(|l| l["state"].as_str().unwrap()).collect();
    assert_eq!((shown["state"].as_str(), states), (Some("completed"), vec!["paid", "cancelled"]), "{shown}");
    assert_eq!(shown["paid_net"], 15_444);
    let listed = cli.ok(&c.lucia, &["order", "list"]).await;
    assert!(listed["orders"].as_array().unwrap().iter().any(|o| o["id"] == order_id), "{listed}");
    let out = c.dir.join("saved.png");
    let sha = paid["receipt_sha256"].as_str().unwrap();
    let saved = cli.ok(&c.buyer, &["order", "receipt", sha, "--out", out.to_str().unwrap()]).await;
    let image = (saved["content_type"].as_str(), std::fs::read(&out).unwrap());
    assert_eq!(image, (Some("image/png"), RECEIPT_PNG.to_vec()));
}

/// Without `--json` the answers are prose and a refusal is a sentence on stderr; a flag the command
/// needs is clap's usage error (exit 2) before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prose_refusals_and_usage_errors() {
    let dir = common::fresh_dir("bazaar-market-cli-prose");
    let (local, _) = common::embedded_with_operator(&dir, "op-mcli-prose").await;
    let run = |args: Vec<&'static str>| {
        let url = local.url.clone();
        tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_bazaar"))
                .arg("market")
                .args(args.iter().map(|a| a.replace("URL", &url)))
                .env_remove("BAZAAR_CREDENTIAL")
                .output()
                .unwrap()
        })
    };
    let shown = run(vec!["listing", "show", "lst_nothing", "--registry", "URL"]).await.unwrap();
    let stderr = String::from_utf8_lossy(&shown.stderr);
    assert_eq!(shown.status.code(), Some(1));
    assert!(stderr.starts_with("refused (404 listing_not_found): "), "{stderr}");
    let usage =
        run(vec!["rfq", "create", "--item", "x", "--quantity", "1", "--max-unit-price", "1", "--registry", "URL"])
            .await
            .unwrap();
    assert_eq!(usage.status.code(), Some(2), "no deadline");
    assert!(String::from_utf8_lossy(&usage.stderr).contains("--deadline-days"));
    let help = run(vec!["--help"]).await.unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for family in ["listing", "search", "unmet", "rfq", "offer", "order", "policy"] {
        assert!(help.contains(family), "{family} missing from `bazaar market --help`: {help}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
