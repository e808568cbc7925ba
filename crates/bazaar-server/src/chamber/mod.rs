//! The live chamber: what a person opens in a browser to watch the registry
//! work — built only on public API routes. `stream` is its live feed
//! (`GET /v1/stream`); the pages are static HTML shipped inside the binary,
//! their scripts inline (no framework, nothing loaded from elsewhere) and
//! allowed to call only this registry.

pub mod attacks;
pub mod history;
pub mod runs;
pub mod stream;

use crate::state::AppState;
use axum::response::Response;
use std::sync::{Arc, LazyLock};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The live page: the flow of the latest paid call and the ledger as it grows.
pub const CHAMBER_HTML: &str = include_str!("chamber.html");
/// What Bazaar does not claim.
pub const CLAIMS_HTML: &str = include_str!("claims.html");
/// Try to break it: the attack catalogue as buttons.
pub const BREAK_HTML: &str = include_str!("break.html");
/// The maker's phone: her shares in her language, her receipt photographed and sent as proof.
pub const MAKER_HTML: &str = include_str!("maker.html");
/// The market story, section by section from the stream, with the run buttons.
pub const STORY_HTML: &str = include_str!("story.html");
/// The owners' page: agents, budgets and stake, approvals, disputes.
pub const OWNER_HTML: &str = include_str!("owner.html");
/// How it is built: the deployment drawn, and the latest paid call traced to reputation.
pub const ARCHITECTURE_HTML: &str = include_str!("architecture.html");
/// Discover: a month of orders repriced per call, in the browser.
pub const REPRICE_HTML: &str = include_str!("reprice.html");
/// Adoption, phase by phase: Discover, Pilot, Production, Federation, each with its proof.
pub const ADOPTION_HTML: &str = include_str!("adoption.html");
/// Rooms and DMs: channels with attention badges, the member rail, sealed or plaintext headers.
pub const ROOMS_HTML: &str = include_str!("rooms.html");
/// The unmodified @hpke packages bundled into one script (`scripts/vendor-hpke`; `--check` in the test command).
pub const HPKE_JS: &str = include_str!("vendor/hpke.js");
/// The rooms page's sealing vault: the seed wrapped by a passphrase or a passkey's PRF, sealing and opening.
pub const VAULT_JS: &str = include_str!("vault.js");
/// The ledger explorer: the event chain verified in the browser, balances, histories, CSV.
pub const LEDGER_HTML: &str = include_str!("ledger.html");

/// The chamber's navigation, one list for every page (each page marks itself current).
pub const NAV: &[(&str, &str)] = &[
    ("/", "Home"),
    ("/chamber", "Live"),
    ("/chamber/story", "Market story"),
    ("/chamber/break", "Try to break it"),
    ("/chamber/ledger", "Ledger"),
    ("/chamber/maker", "Maker's phone"),
    ("/chamber/owner", "Owners"),
    ("/chamber/adoption", "Adoption"),
    ("/chamber/reprice", "Reprice"),
    ("/chamber/architecture", "How it is built"),
    ("/chamber/claims", "What this does not claim"),
    ("/passport/verify", "Check a passport"),
    ("/chamber/rooms", "Rooms"),
    ("/relay", "Job board"),
    ("/compromises", "Compromise ledger"),
    ("/account", "Sign in"),
];

/// What every chamber page's style starts with: the palette (light and dark), focus rings, the navigation.
pub const BASE_CSS: &str = ":root { color-scheme: light dark; --fg: #1b1b1b; --bg: #fbfbf8; --muted: #5b5b5b; --line: #d8d8d0; \
--accent: #0b5cad; --ok: #1d6b2f; --bad: #a11d1d; --warn: #8a5a00; --amber: #8a5300; --card: #ffffff; }
@media (prefers-color-scheme: dark) { :root { --fg: #ececec; --bg: #151515; --muted: #b0b0b0; --line: #3a3a3a; \
--accent: #7db8ff; --ok: #7fd08e; --bad: #ff8f8f; --warn: #f0c060; --amber: #ffc46b; --card: #1f1f1f; } }
* { box-sizing: border-box; }
[hidden] { display: none !important; }
a { color: var(--accent); }
a:focus-visible, button:focus-visible, input:focus-visible, textarea:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
nav ul { display: flex; flex-wrap: wrap; gap: .25rem 1rem; list-style: none; padding: 0; }
.muted { color: var(--muted); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
button, input, textarea { font: inherit; }
button { cursor: pointer; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
.controls { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; }";

/// The helpers every page's script starts with (`el`, `units`, `api`, `readStream`), inserted at `/* chamber-script */`.
pub const CHAMBER_JS: &str = include_str!("chamber.js");

/// `page` with its `<!--chamber-nav-->` replaced by [`NAV`] (`current` marked), its `<!--chamber-style-->` by
/// [`BASE_CSS`] and its `/* chamber-script */` by [`CHAMBER_JS`].
pub(crate) fn with_nav(page: &str, current: &str) -> String {
    let items: String = NAV
        .iter()
        .map(|(path, label)| {
            let mark = if *path == current { " aria-current=\"page\"" } else { "" };
            format!("<li><a href=\"{path}\"{mark}>{label}</a></li>")
        })
        .collect();
    page.replace("<!--chamber-style-->", BASE_CSS)
        .replace("/* chamber-script */", CHAMBER_JS)
        .replace("<!--chamber-nav-->", &format!("<nav aria-label=\"Chamber\"><ul>{items}</ul></nav>"))
}

static CHAMBER_PAGE: LazyLock<String> = LazyLock::new(|| with_nav(CHAMBER_HTML, "/chamber"));
static BREAK_PAGE: LazyLock<String> = LazyLock::new(|| with_nav(BREAK_HTML, "/chamber/break"));
static LEDGER_PAGE: LazyLock<String> = LazyLock::new(|| with_nav(LEDGER_HTML, "/chamber/ledger"));
static MAKER_PAGE: LazyLock<String> = LazyLock::new(|| with_nav(MAKER_HTML, "/chamber/maker"));
static STORY_PAGE: LazyLock<String> = LazyLock::new(|| with_nav(STORY_HTML, "/chamber/story"));
static OWNER_PAGE: LazyLock<String> = LazyLock::new(|| with_nav(OWNER_HTML, "/chamber/owner"));
static ARCHITECTURE_PAGE: LazyLock<String> = LazyLock::new(|| with_nav(ARCHITECTURE_HTML, "/chamber/architecture"));
static REPRICE_PAGE: LazyLock<String> = LazyLock::new(|| with_nav(REPRICE_HTML, "/chamber/reprice"));
static ADOPTION_PAGE: LazyLock<String> = LazyLock::new(|| with_nav(ADOPTION_HTML, "/chamber/adoption"));
static ROOMS_PAGE: LazyLock<String> = LazyLock::new(|| {
    with_nav(ROOMS_HTML, "/chamber/rooms")
        .replace("/* chamber-hpke */", HPKE_JS)
        .replace("/* chamber-vault */", VAULT_JS)
});
static CLAIMS_PAGE: LazyLock<String> = LazyLock::new(|| with_nav(CLAIMS_HTML, "/chamber/claims"));

/// The chamber's routes, each with its OpenAPI entry.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    stream::routes()
        .merge(history::routes())
        .merge(attacks::routes())
        .merge(runs::routes())
        .routes(routes!(chamber))
        .routes(routes!(claims))
        .routes(routes!(breaking))
        .routes(routes!(ledger))
        .routes(routes!(maker))
        .routes(routes!(story))
        .routes(routes!(owner))
        .routes(routes!(architecture))
        .routes(routes!(reprice_page))
        .routes(routes!(adoption))
        .routes(routes!(rooms))
}

/// The live chamber (HTML): the latest paid call step by step and the event ledger as it grows, from `/v1/stream`.
#[utoipa::path(get, path = "/chamber", responses((status = 200, description = "The live chamber (HTML)", body = String, content_type = "text/html")))]
async fn chamber() -> Response {
    crate::page::html_static(&CHAMBER_PAGE)
}

/// What Bazaar does not claim (HTML).
#[utoipa::path(get, path = "/chamber/claims", responses((status = 200, description = "What this does not claim (HTML)", body = String, content_type = "text/html")))]
async fn claims() -> Response {
    crate::page::html_static(&CLAIMS_PAGE)
}

/// Try to break it (HTML): every attack as a button, run through the public API, its refusal and "nothing kept".
#[utoipa::path(get, path = "/chamber/break", responses((status = 200, description = "Try to break it (HTML)", body = String, content_type = "text/html")))]
async fn breaking() -> Response {
    crate::page::html_static(&BREAK_PAGE)
}

/// The ledger explorer (HTML): the hash-chained event ledger paged and verified in the browser, balances, an account's history, CSV.
#[utoipa::path(get, path = "/chamber/ledger", responses((status = 200, description = "The ledger explorer (HTML)", body = String, content_type = "text/html")))]
async fn ledger() -> Response {
    crate::page::html_static(&LEDGER_PAGE)
}

/// The maker's phone (HTML): signed in with her passkey, her agent's shares in her language, the courier
/// receipt photographed and sent as proof on the agent's behalf, her payment as it lands.
#[utoipa::path(get, path = "/chamber/maker", responses((status = 200, description = "The maker's phone (HTML)", body = String, content_type = "text/html")))]
async fn maker() -> Response {
    crate::page::html_static(&MAKER_PAGE)
}

/// The market story (HTML): the request, the makers' limits, unmet searches, offers with their verdicts, the
/// allocation, the order and its one authorization, payments and the makers' phones — from the live stream —
/// with "run the story" and "run an AI buyer agent" for the operator.
#[utoipa::path(get, path = "/chamber/story", responses((status = 200, description = "The market story (HTML)", body = String, content_type = "text/html")))]
async fn story() -> Response {
    crate::page::html_static(&STORY_PAGE)
}

/// The owners' page (HTML): signed in with a passkey or the owner's credential, each agent's balance, budget
/// ceilings and spending, and stake; the orders waiting for the owner's approval (approve here); the disputes its
/// agents are in, with their timelines.
#[utoipa::path(get, path = "/chamber/owner", responses((status = 200, description = "The owners' page (HTML)", body = String, content_type = "text/html")))]
async fn owner() -> Response {
    crate::page::html_static(&OWNER_PAGE)
}

/// How it is built (HTML): the deployment drawn, and the latest paid call traced step by step to the reputation
/// it earned, each step linked to the event it wrote.
#[utoipa::path(get, path = "/chamber/architecture", responses((status = 200, description = "How it is built (HTML)", body = String, content_type = "text/html")))]
async fn architecture() -> Response {
    crate::page::html_static(&ARCHITECTURE_PAGE)
}

/// Discover (HTML): a month of real orders (CSV) turned into a per-call price list, an escrow threshold and
/// margins under this registry's fee — the same answer as `bazaar reprice`.
#[utoipa::path(get, path = "/chamber/reprice", responses((status = 200, description = "Reprice, don't replatform (HTML)", body = String, content_type = "text/html")))]
async fn reprice_page() -> Response {
    crate::page::html_static(&REPRICE_PAGE)
}

/// Adoption, phase by phase (HTML): Discover (reprice), Pilot (terms and the hundred-calls proof, runnable),
/// Production (every dispute in the period and the phases it went through, from the ledger), Federation.
#[utoipa::path(get, path = "/chamber/adoption", responses((status = 200, description = "Adoption, phase by phase (HTML)", body = String, content_type = "text/html")))]
async fn adoption() -> Response {
    crate::page::html_static(&ADOPTION_PAGE)
}

/// Rooms and DMs (HTML): the member's channels with attention badges derived from unread and waking counts,
/// the member rail (who listens, and how), each channel's header saying sealed or plaintext, plaintext posts, and
/// sealed messages read and written in the browser through its sealing vault (the key never leaves the browser).
#[utoipa::path(get, path = "/chamber/rooms", responses((status = 200, description = "Rooms and DMs (HTML)", body = String, content_type = "text/html")))]
async fn rooms() -> Response {
    crate::page::html_static(&ROOMS_PAGE)
}
