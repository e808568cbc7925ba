//! `bazaar market`: the storefront from the command line — `listing` (put,
//! show), `search`, `unmet`, `rfq` (create, list, show, allocation, close),
//! `offer` (make, list), `order` (create, list, show, approve, decline,
//! proof, cancel, receipt) and `policy set`. (`cmd/labor.rs` is the labor
//! market: `bazaar worker` and `bazaar validator`.) Each answer prints as prose
//! or, with `--json`, as the registry's JSON on one line. A refusal prints its
//! problem code, detail and facts and exits 1; a command that could not run
//! (a bad flag, an unreachable registry, an unreadable file) exits 2.

use super::common::{facts_line, key_or_random, print, refusal_json, Remote};
use anyhow::{Context, Result};
use bazaar_sdk::storefront::QuoteRequest;
use bazaar_sdk::SdkError;
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum Command {
    /// The storefront: listings, search, requests for quote, offers, orders, the owner's order policy.
    ///
    /// Prices and amounts are in minor units. Each command takes --registry and --credential (or
    /// --credential-file; or BAZAAR_REGISTRY, BAZAAR_CREDENTIAL, BAZAAR_CREDENTIAL_FILE) after its
    /// own name. Exit status: 0 done; 1 the registry refused (its problem code, detail and facts are
    /// printed — with --json as one JSON line on stdout: error, status, code, detail, facts); 2 the
    /// command could not run (a bad flag, an unreadable file, an unreachable registry).
    #[command(subcommand)]
    Market(MarketCmd),
}

#[derive(Subcommand)]
pub enum MarketCmd {
    /// Seller's agent: list a product (`put`; the same SKU again relists it) or `show` one.
    #[command(subcommand)]
    Listing(ListingCmd),
    /// Any member: full-text search; every word must match a listing word as a prefix (plurals fold).
    Search {
        #[command(flatten)]
        remote: Remote,
        /// The words to find (quote them or not: they are joined with spaces).
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        /// At most this many listings, best first (the registry caps it at 50).
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Any member: searches that found nothing, most frequent first (demand no maker meets yet).
    Unmet {
        #[command(flatten)]
        remote: Remote,
    },
    /// Requests for quote: create (buyer's agent), list, show, allocation, close (buyer).
    #[command(subcommand)]
    Rfq(RfqCmd),
    /// Offers on a request for quote: make (an invited seller's agent), list.
    #[command(subcommand)]
    Offer(OfferCmd),
    /// Orders: create (buyer's agent), list, show, approve/decline (owner), proof (maker), cancel, receipt.
    #[command(subcommand)]
    Order(OrderCmd),
    /// Owner: when an agent's orders wait for a person's approval.
    #[command(subcommand)]
    Policy(PolicyCmd),
}

#[derive(Subcommand)]
pub enum ListingCmd {
    /// Seller's agent: list a product under its SKU, or relist it with new terms (same SKU, same id).
    Put {
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        listing: ListingArgs,
    },
    /// Anyone: one listing (`lst_…`), with the lowest price offers are checked against.
    Show {
        #[command(flatten)]
        remote: Remote,
        /// The listing's id (`lst_…`), as `bazaar market listing put` or `bazaar market search` prints it.
        id: String,
    },
}

/// A listing's fields, as `PUT /v1/listings` takes them. Prices are in minor units.
#[derive(Args)]
pub struct ListingArgs {
    /// Your own stock-keeping unit: listing it again updates the listing.
    #[arg(long)]
    sku: String,
    /// The listing's title, at most 200 characters; searches match its words.
    #[arg(long)]
    title: String,
    /// A longer description, at most 4000 characters; searches match its words too. None by default.
    #[arg(long, default_value = "")]
    description: String,
    /// A tag searches match; repeat for several.
    #[arg(long = "tag")]
    tags: Vec<String>,
    /// The list price per unit.
    #[arg(long)]
    list_price: u64,
    /// The least you accept per unit, whatever the discount.
    #[arg(long)]
    floor: u64,
    /// The most you discount from the list price, in basis points (at most 10000).
    #[arg(long, default_value_t = 0)]
    max_discount_bps: u32,
    /// Units you make a day.
    #[arg(long)]
    capacity_per_day: u64,
    /// The most units you take on at once.
    #[arg(long)]
    capacity_max: u64,
    /// Days before you can start.
    #[arg(long, default_value_t = 0)]
    lead_time_days: u32,
    /// The fewest days before a deadline you accept a request with.
    #[arg(long, default_value_t = 0)]
    notice_days: u32,
    /// BCP 47 tag (`en`, `es-MX`, `hi`…): the language you are told of orders in.
    #[arg(long)]
    language: String,
}

#[derive(Subcommand)]
pub enum RfqCmd {
    /// Buyer's agent: ask the sellers whose listings match ITEM for quotes (opens a request).
    Create {
        #[command(flatten)]
        remote: Remote,
        /// What you want, in words; sellers whose listings match it are invited.
        #[arg(long)]
        item: String,
        /// How many units you want, 1 to 1,000,000.
        #[arg(long)]
        quantity: u64,
        /// The most you pay per unit, in minor units.
        #[arg(long)]
        max_unit_price: u64,
        /// The deadline: the end (23:59:59.999 UTC) of the day this many days from today, so that
        /// running the command again that day with the same --key sends the same request.
        #[arg(long, required_unless_present = "deadline_ms", conflicts_with = "deadline_ms")]
        deadline_days: Option<u32>,
        /// The deadline, in Unix milliseconds.
        #[arg(long)]
        deadline_ms: Option<i64>,
        /// Idempotency key (a fresh one by default, printed); reuse it when retrying to find the same request.
        #[arg(long)]
        key: Option<String>,
    },
    /// Requests naming you, as buyer or invited seller (how sellers' agents find requests).
    List {
        #[command(flatten)]
        remote: Remote,
    },
    /// The buyer or an invited seller: a request, every offer (refused ones with their reason), the allocation.
    Show {
        #[command(flatten)]
        remote: Remote,
        /// The request for quote's id (`rfq_…`), as `bazaar market rfq create` prints it.
        id: String,
    },
    /// The allocation as it stands (fixed once closed): cheapest valid offer first, the unfilled remainder.
    Allocation {
        #[command(flatten)]
        remote: Remote,
        /// The request for quote's id (`rfq_…`), as `bazaar market rfq create` prints it.
        id: String,
    },
    /// The buyer: close the request; its allocation is fixed and can be ordered.
    Close {
        #[command(flatten)]
        remote: Remote,
        /// The request for quote's id (`rfq_…`), as `bazaar market rfq create` prints it.
        id: String,
    },
}

#[derive(Subcommand)]
pub enum OfferCmd {
    /// An invited seller's agent: offer units of your listing at a unit price.
    ///
    /// Code checks it against the request (cap, deadline, notice) and your listing (lowest price,
    /// capacity); a refused offer exits 1 with its code and numbers and still uses one of your three
    /// attempts. Your latest valid offer replaces an earlier one.
    Make {
        #[command(flatten)]
        remote: Remote,
        /// The request for quote (`rfq_…`).
        rfq: String,
        /// Your listing the request invited (`lst_…`).
        #[arg(long)]
        listing: String,
        /// Price per unit, in minor units.
        #[arg(long)]
        unit_price: u64,
        /// Units offered (fewer than requested is fine).
        #[arg(long)]
        quantity: u64,
    },
    /// The buyer or an invited seller: every offer on a request, refused ones with their reason.
    List {
        #[command(flatten)]
        remote: Remote,
        /// The request for quote (`rfq_…`).
        rfq: String,
    },
}

#[derive(Subcommand)]
pub enum OrderCmd {
    /// Buyer's agent: order a closed request's allocation (one authorization), or wait for the owner.
    Create {
        #[command(flatten)]
        remote: Remote,
        /// The closed request for quote (`rfq_…`).
        rfq: String,
        /// Wait for the owner's approval whatever the policy says.
        #[arg(long)]
        require_approval: bool,
        /// Idempotency key (a fresh one by default, printed); reuse it when retrying to find the same order.
        /// Any second order from one request is refused `rfq_ordered`, naming the first.
        #[arg(long)]
        key: Option<String>,
    },
    /// Orders naming you or, with --agent, one of your agents (makers read their notifications here).
    List {
        #[command(flatten)]
        remote: Remote,
        /// One of your agents (handle or DID).
        #[arg(long)]
        agent: Option<String>,
    },
    /// The buyer, its owner, a maker in it (or her owner), the operator: one order, each share's state.
    Show {
        #[command(flatten)]
        remote: Remote,
        /// The order's id (`ord_…`), as `bazaar market order create` prints it.
        id: String,
    },
    /// The buyer's owner (a person, never an agent): approve an order waiting for approval.
    Approve {
        #[command(flatten)]
        remote: Remote,
        /// The order's id (`ord_…`), as `bazaar market order create` prints it.
        id: String,
    },
    /// The buyer's owner: decline an order waiting for approval.
    Decline {
        #[command(flatten)]
        remote: Remote,
        /// The order's id (`ord_…`), as `bazaar market order create` prints it.
        id: String,
    },
    /// A share's maker (or her owner): prove shipment with the courier receipt's image; she is paid on it, once.
    Proof {
        #[command(flatten)]
        remote: Remote,
        /// The order's id (`ord_…`), as `bazaar market order create` prints it.
        id: String,
        /// The share's index in the order (0 first).
        share: u32,
        /// The courier's tracking number.
        #[arg(long)]
        tracking: String,
        /// The courier receipt's image: JPEG, PNG or WebP, at most 512 KiB.
        #[arg(long)]
        receipt: PathBuf,
        /// The image's content type; read from the file's first bytes by default.
        #[arg(long)]
        content_type: Option<String>,
    },
    /// The buyer agent or its owner: cancel a share before it ships; its hold goes back to the budget.
    Cancel {
        #[command(flatten)]
        remote: Remote,
        /// The order's id (`ord_…`), as `bazaar market order create` prints it.
        id: String,
        /// The share's index in the order (0 first).
        share: u32,
    },
    /// The buyer, its owner or the maker: save a proof's receipt image (by its SHA-256) to a file.
    Receipt {
        #[command(flatten)]
        remote: Remote,
        /// The image's SHA-256 (64 hex), the `receipt_sha256` that `bazaar market order proof` prints.
        sha256: String,
        /// The file to write the image to (overwritten if it exists).
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Subcommand)]
pub enum PolicyCmd {
    /// Owner: orders of AGENT with a total above --approval-above wait for you (0: every order).
    Set {
        #[command(flatten)]
        remote: Remote,
        /// Your agent (handle or DID).
        agent: String,
        /// In minor units.
        #[arg(long)]
        approval_above: u64,
    },
}

/// An answer and the prose it reads as without `--json`.
struct Shown {
    value: Value,
    prose: fn(&Value) -> String,
}

/// An answer (a wire type, or JSON the CLI built) with the prose that tells it.
fn shown(answer: impl serde::Serialize, prose: fn(&Value) -> String) -> Shown {
    Shown { value: bazaar_cli::wire_json(&answer), prose }
}

pub async fn run(command: Command, json_output: bool) -> Result<i32> {
    let Command::Market(action) = command;
    let answer = match action {
        MarketCmd::Listing(action) => listing(action).await,
        MarketCmd::Search { remote, query, limit } => search(&remote, &query.join(" "), limit).await,
        MarketCmd::Unmet { remote } => remote_call(&remote, |c| async move { c.unmet_searches().await }, unmet).await,
        MarketCmd::Rfq(action) => rfq(action).await,
        MarketCmd::Offer(action) => offer(action).await,
        MarketCmd::Order(action) => order(action).await,
        MarketCmd::Policy(PolicyCmd::Set { remote, agent, approval_above }) => {
            let answer = remote.client()?.set_order_policy(&agent, approval_above).await;
            answer.map(|a| shown(a.body, policy)).map_err(anyhow::Error::from)
        }
    };
    match answer {
        Ok(Shown { value, prose }) => {
            print(json_output, &value, prose);
            Ok(0)
        }
        Err(error) => match error.downcast_ref::<SdkError>() {
            Some(SdkError::Problem { status, code, detail, body }) => {
                print_refusal(json_output, *status, code, detail, body);
                Ok(1)
            }
            _ => Err(error),
        },
    }
}

/// A refusal: one JSON line on stdout with `--json`, else a sentence on stderr.
fn print_refusal(json_output: bool, status: u16, code: &str, detail: &str, body: &Value) {
    if json_output {
        println!("{}", refusal_json(format!("{status} {code}: {detail}"), status, code, detail, body));
    } else {
        eprintln!("refused ({status} {code}): {detail}");
        if let Some(line) = facts_line(body) {
            eprintln!("{line}");
        }
    }
}

/// Runs one read on `remote`'s client and pairs its answer with its prose.
async fn remote_call<F, Fut, T>(remote: &Remote, call: F, prose: fn(&Value) -> String) -> Result<Shown>
where
    F: FnOnce(bazaar_sdk::Client) -> Fut,
    Fut: std::future::Future<Output = Result<T, SdkError>>,
    T: serde::Serialize,
{
    Ok(shown(call(remote.client()?).await?, prose))
}

async fn listing(action: ListingCmd) -> Result<Shown> {
    match action {
        ListingCmd::Put { remote, listing } => {
            let body = bazaar_sdk::wire::market::ListingRequest {
                sku: listing.sku,
                title: listing.title,
                description: listing.description,
                tags: listing.tags,
                list_price_minor: listing.list_price,
                floor_minor: listing.floor,
                max_discount_bps: listing.max_discount_bps,
                capacity_per_day: listing.capacity_per_day,
                capacity_max: listing.capacity_max,
                lead_time_days: listing.lead_time_days,
                notice_days: listing.notice_days,
                language: listing.language,
            };
            Ok(shown(remote.client()?.put_listing(&body).await?, listing_prose))
        }
        ListingCmd::Show { remote, id } => Ok(shown(remote.client()?.listing(&id).await?, listing_prose)),
    }
}

async fn search(remote: &Remote, query: &str, limit: Option<usize>) -> Result<Shown> {
    let client = remote.client()?;
    let found = match limit {
        Some(limit) => client.search_at_most(query, limit).await?,
        None => client.search(query).await?,
    };
    Ok(shown(found, search_prose))
}

async fn rfq(action: RfqCmd) -> Result<Shown> {
    match action {
        RfqCmd::Create { remote, item, quantity, max_unit_price, deadline_days, deadline_ms, key } => {
            let deadline_ms = match (deadline_days, deadline_ms) {
                (_, Some(ms)) => ms,
                (Some(days), None) => end_of_day_ms(bazaar_sdk::clock::now_ms(), days),
                (None, None) => anyhow::bail!("give --deadline-days or --deadline-ms"),
            };
            let request = QuoteRequest { item: &item, quantity, max_unit_price_minor: max_unit_price, deadline_ms };
            let key = key_or_random(key);
            let mut created = bazaar_cli::wire_json(&remote.client()?.create_rfq(&request, &key).await?.body);
            // The key is the caller's, not the registry's: it rides along so a retry can reuse it.
            created["idempotency_key"] = json!(key);
            Ok(shown(created, rfq_created))
        }
        RfqCmd::List { remote } => remote_call(&remote, |c| async move { c.rfqs().await }, rfq_list).await,
        RfqCmd::Show { remote, id } => Ok(shown(remote.client()?.rfq(&id).await?, rfq_prose)),
        RfqCmd::Allocation { remote, id } => Ok(shown(remote.client()?.rfq_allocation(&id).await?, allocation)),
        RfqCmd::Close { remote, id } => Ok(shown(remote.client()?.close_rfq(&id).await?.body, allocation)),
    }
}

async fn offer(action: OfferCmd) -> Result<Shown> {
    match action {
        OfferCmd::Make { remote, rfq, listing, unit_price, quantity } => {
            let made = remote.client()?.make_offer(&rfq, &listing, unit_price, quantity).await?.body;
            Ok(shown(made, offer_made))
        }
        OfferCmd::List { remote, rfq } => {
            let found = remote.client()?.rfq(&rfq).await?;
            Ok(shown(json!({"rfq": found.id, "offers": found.offers}), offers))
        }
    }
}

async fn order(action: OrderCmd) -> Result<Shown> {
    match action {
        OrderCmd::Create { remote, rfq, require_approval, key } => {
            // A fresh key by default, never one derived from the request: a refusal under a key is
            // kept under it (an order tried before closing would stay refused). A second order from the
            // same request is refused `rfq_ordered` with the first order's id, whatever the key.
            let key = key_or_random(key);
            let mut created =
                bazaar_cli::wire_json(&remote.client()?.create_order(&rfq, require_approval, &key).await?.body);
            created["idempotency_key"] = json!(key);
            Ok(shown(created, order_created))
        }
        OrderCmd::List { remote, agent } => Ok(shown(remote.client()?.orders(agent.as_deref()).await?, order_list)),
        OrderCmd::Show { remote, id } => Ok(shown(remote.client()?.order(&id).await?, order_prose)),
        OrderCmd::Approve { remote, id } => Ok(shown(remote.client()?.approve_order(&id).await?.body, order_prose)),
        OrderCmd::Decline { remote, id } => Ok(shown(remote.client()?.decline_order(&id).await?.body, order_prose)),
        OrderCmd::Proof { remote, id, share, tracking, receipt, content_type } => {
            let image = std::fs::read(&receipt).with_context(|| format!("reading {}", receipt.display()))?;
            let content_type = content_type.unwrap_or_else(|| image_type(&image).to_string());
            let paid = remote.client()?.prove_shipment(&id, share, &tracking, &content_type, image).await?;
            Ok(shown(paid, share_paid))
        }
        OrderCmd::Cancel { remote, id, share } => {
            Ok(shown(remote.client()?.cancel_share(&id, share).await?.body, share_cancelled))
        }
        OrderCmd::Receipt { remote, sha256, out } => {
            let blob = remote.client()?.blob(&sha256).await?;
            std::fs::write(&out, &blob.bytes).with_context(|| format!("writing {}", out.display()))?;
            let saved = json!({"sha256": sha256, "content_type": blob.content_type, "bytes": blob.bytes.len(),
                "out": out.display().to_string()});
            Ok(shown(saved, |v| {
                format!(
                    "saved {} ({}, {} bytes) to {}",
                    text(&v["sha256"]),
                    text(&v["content_type"]),
                    v["bytes"],
                    text(&v["out"])
                )
            }))
        }
    }
}

/// One day in milliseconds.
const DAY_MS: i64 = 86_400_000;

/// The last millisecond (UTC) of the day `days` after the day of `now_ms`. A
/// deadline in days is a day, not a moment: a retry the same day under the
/// same idempotency key sends the same deadline (a moment would differ and be
/// refused `idempotency_conflict`).
fn end_of_day_ms(now_ms: i64, days: u32) -> i64 {
    (now_ms.div_euclid(DAY_MS) + i64::from(days) + 1) * DAY_MS - 1
}

/// The content type an image's first bytes say it is; anything else is sent as
/// `application/octet-stream` for the registry to refuse with its own code.
fn image_type(bytes: &[u8]) -> &'static str {
    match bytes {
        [0xff, 0xd8, 0xff, ..] => "image/jpeg",
        [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, ..] => "image/png",
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => "image/webp",
        _ => "application/octet-stream",
    }
}

// ---- prose ------------------------------------------------------------------------------

/// A JSON value as text: strings bare, anything else as JSON.
fn text(value: &Value) -> String {
    value.as_str().map(str::to_string).unwrap_or_else(|| value.to_string())
}

fn items(value: &Value) -> impl Iterator<Item = &Value> {
    value.as_array().into_iter().flatten()
}

fn listing_prose(l: &Value) -> String {
    let terms = &l["terms"];
    format!(
        "{} — {} (sku {}, seller {})\n  list price {}, lowest {} (floor {}, discount up to {} bps)\n  \
         capacity {} a day, at most {}; lead time {} days; needs {} days' notice; language {}",
        text(&l["id"]),
        text(&l["title"]),
        text(&l["sku"]),
        text(&l["seller"]),
        terms["list_price"],
        l["lowest_price_minor"],
        terms["floor"],
        terms["max_discount_bps"],
        terms["capacity_per_day"],
        terms["capacity_max"],
        terms["lead_time_days"],
        terms["notice_days"],
        text(&l["language"]),
    )
}

fn search_prose(found: &Value) -> String {
    let mut lines = vec![format!(
        "{} listing(s) for \"{}\"",
        found["listings"].as_array().map_or(0, Vec::len),
        text(&found["query"])
    )];
    for l in items(&found["listings"]) {
        lines.push(format!(
            "  {}  {}  list {}, lowest {}  seller {}",
            text(&l["id"]),
            text(&l["title"]),
            l["terms"]["list_price"],
            l["lowest_price_minor"],
            text(&l["seller"])
        ));
    }
    lines.join("\n")
}

fn unmet(found: &Value) -> String {
    let mut lines =
        vec![format!("{} unmet search(es), most frequent first", found["unmet"].as_array().map_or(0, Vec::len))];
    lines.extend(items(&found["unmet"]).map(|u| format!("  {:>5}×  {}", u["count"], text(&u["query"]))));
    lines.join("\n")
}

fn rfq_created(r: &Value) -> String {
    format!(
        "{}\n(to retry this safely: --key {} --deadline-ms {})",
        rfq_prose(r),
        text(&r["idempotency_key"]),
        r["request"]["deadline"]
    )
}

fn rfq_prose(r: &Value) -> String {
    let request = &r["request"];
    let mut lines = vec![format!(
        "{} ({}): {} × \"{}\" at most {} each, by {}; {} seller(s) invited",
        text(&r["id"]),
        text(&r["state"]),
        request["quantity"],
        text(&r["item"]),
        request["max_unit_price"],
        bazaar_core::vc::rfc3339_from_ms(request["deadline"].as_i64().unwrap_or_default()),
        r["invited"].as_array().map_or(0, Vec::len)
    )];
    lines.extend(items(&r["invited"]).map(|pair| format!("  invited {} for {}", text(&pair[0]), text(&pair[1]))));
    if !r["offers"].as_array().is_none_or(Vec::is_empty) {
        lines.push(offers(r));
    }
    if let Some(order) = r["order"].as_str() {
        lines.push(format!("ordered as {order}"));
    }
    lines.join("\n")
}

fn rfq_list(list: &Value) -> String {
    let mut lines = vec![format!("{} request(s) for quote naming you", list["rfqs"].as_array().map_or(0, Vec::len))];
    lines.extend(items(&list["rfqs"]).map(|r| {
        format!("  {}  {}  {} × \"{}\"", text(&r["id"]), text(&r["state"]), r["request"]["quantity"], text(&r["item"]))
    }));
    lines.join("\n")
}

fn offers(r: &Value) -> String {
    // A request names itself `id`; `offer list`'s answer names it `rfq`.
    let rfq = r["id"].as_str().or(r["rfq"].as_str()).unwrap_or_default();
    let mut lines = vec![format!("offers on {rfq}:")];
    lines.extend(items(&r["offers"]).map(|o| {
        let verdict = match o["refusal"]["code"].as_str() {
            Some(code) => format!("refused: {code}"),
            None => text(&o["status"]),
        };
        format!(
            "  {}  {} × {} by {} (attempt {}): {verdict}",
            text(&o["id"]),
            o["quantity"],
            o["unit_price"],
            text(&o["seller"]),
            o["attempt"]
        )
    }));
    lines.join("\n")
}

fn offer_made(o: &Value) -> String {
    format!(
        "offer {} ({}): {} × {} on {}; {} attempt(s) left",
        text(&o["id"]),
        text(&o["status"]),
        o["quantity"],
        o["unit_price"],
        text(&o["listing"]),
        o["attempts_left"]
    )
}

fn allocation(a: &Value) -> String {
    let plan = &a["allocation"];
    if plan.is_null() {
        return format!("{}: no valid offers yet", text(&a["rfq"]));
    }
    let state = a["state"].as_str().map(|s| format!(" ({s})")).unwrap_or_default();
    let mut lines = vec![format!(
        "{}{state}: {} filled, {} unfilled, total {}",
        text(&a["rfq"]),
        plan["filled"],
        plan["unfilled"],
        plan["total"]
    )];
    lines.extend(
        items(&plan["lines"])
            .map(|l| format!("  {} from {} (offer {})", priced(l), text(&l["seller"]), text(&l["offer_id"]))),
    );
    lines.join("\n")
}

/// An allocation's line or an order's share: `units × unit price = amount`.
fn priced(line: &Value) -> String {
    format!("{} × {} = {}", line["units"], line["unit_price"], line["amount"])
}

fn order_prose(o: &Value) -> String {
    let mut lines = vec![format!(
        "{} ({}): \"{}\" from {}; total {}, paid {} net, fees {}, released {}",
        text(&o["id"]),
        text(&o["state"]),
        text(&o["item"]),
        text(&o["rfq"]),
        o["total"],
        o["paid_net"],
        o["fees"],
        o["released"]
    )];
    if let Some(url) = o["approval_url"].as_str() {
        lines.push(format!("waits for a person: hand the owner {url} (or `bazaar market order approve`)"));
    }
    lines.extend(items(&o["lines"]).map(|l| {
        let tracking = l["proof"]["tracking"].as_str().map(|t| format!(", tracking {t}")).unwrap_or_default();
        format!("  share {}: {} to {} ({}){tracking}", l["index"], priced(l), text(&l["seller"]), text(&l["state"]))
    }));
    lines.join("\n")
}

fn order_created(o: &Value) -> String {
    format!("{}\n(to retry this safely: --key {})", order_prose(o), text(&o["idempotency_key"]))
}

fn order_list(list: &Value) -> String {
    let mut lines = vec![format!("{} order(s)", list["orders"].as_array().map_or(0, Vec::len))];
    lines.extend(items(&list["orders"]).map(|o| {
        format!("  {}  {}  total {}  \"{}\"", text(&o["id"]), text(&o["state"]), o["total"], text(&o["item"]))
    }));
    lines.join("\n")
}

fn share_paid(p: &Value) -> String {
    format!(
        "share {} of {} paid on proof (tracking {}): {} net to {}, fee {}; receipt {}; order {}",
        p["share"],
        text(&p["order"]),
        text(&p["tracking"]),
        p["payment"]["net_minor"],
        text(&p["seller"]),
        p["payment"]["fee_minor"],
        text(&p["receipt_sha256"]),
        text(&p["order_state"])
    )
}

fn share_cancelled(c: &Value) -> String {
    format!(
        "share {} of {} cancelled: {} released to the buyer's budget; order {}",
        c["share"],
        text(&c["order"]),
        c["released_minor"],
        text(&c["order_state"])
    )
}

fn policy(p: &Value) -> String {
    format!("orders of {} above {} now wait for a person's approval", text(&p["agent"]), p["approval_above_minor"])
}

#[cfg(test)]
mod tests {
    use super::{end_of_day_ms, image_type, DAY_MS};

    #[test]
    fn a_deadline_in_days_is_the_end_of_that_utc_day() {
        let noon = 20_000 * DAY_MS + DAY_MS / 2;
        assert_eq!(end_of_day_ms(noon, 0), 20_001 * DAY_MS - 1);
        assert_eq!(end_of_day_ms(noon, 30), 20_031 * DAY_MS - 1);
        assert_eq!(end_of_day_ms(noon + DAY_MS / 2 - 1, 30), end_of_day_ms(noon - DAY_MS / 2, 30), "all day the same");
        assert_eq!(end_of_day_ms(20_001 * DAY_MS, 30), 20_032 * DAY_MS - 1, "midnight starts the next day");
    }

    #[test]
    fn receipt_images_are_typed_by_their_first_bytes() {
        let check = |bytes: &[u8], expected: &str| assert_eq!(image_type(bytes), expected, "{bytes:?}");
        check(&[0xff, 0xd8, 0xff, 0xe0, 0], "image/jpeg");
        check(b"\x89PNG\r\n\x1a\n....", "image/png");
        check(b"RIFF\0\0\0\0WEBPVP8 ", "image/webp");
        check(b"RIFF\0\0\0\0WAVE", "application/octet-stream");
        check(b"%PDF-1.7", "application/octet-stream");
        check(b"", "application/octet-stream");
    }
}
