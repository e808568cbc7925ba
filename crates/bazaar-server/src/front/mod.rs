//! The registry's front page (`GET /`): what this registry is (its DID, address, unit, fee and escrow
//! threshold, and a link to its signed card), what a visitor may do here (watch the chamber, try to break
//! it, check a passport, read the job board and the compromise ledger, sign in) and where an integrator
//! starts. Filled in on the server with no script of its own, in the chamber's style and navigation.

use crate::state::AppState;
use axum::extract::State;
use axum::response::Response;
use std::sync::{Arc, LazyLock};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The page as shipped, with `__NAME__` placeholders where this registry's facts go and `<!--job-board-->`
/// where [`JOB_BOARD_DOOR`] goes when the relay runs here.
const FRONT_HTML: &str = include_str!("front.html");

/// The job board's door: shown only when this registry runs its relay (a link that answered 503 would be
/// a door to nowhere).
const JOB_BOARD_DOOR: &str = "<li><a href=\"/relay\">Read the job board</a><p>Jobs posted, claimed and judged \
on this registry's Nostr relay.</p></li>";

/// The template with the chamber's navigation and style in place: the page as written, whose (absent)
/// scripts the policy allows; the filled-in page can bring none.
static FRONT_PAGE: LazyLock<String> = LazyLock::new(|| crate::chamber::with_nav(FRONT_HTML, "/"));

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new().routes(routes!(front))
}

/// The front page: what this registry is and what a visitor may do here.
#[utoipa::path(get, path = "/", responses((status = 200, description = "The registry's front page (HTML)", body = String, content_type = "text/html")))]
async fn front(State(state): State<Arc<AppState>>) -> Response {
    crate::page::html_filled(&FRONT_PAGE, &page(&state))
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// `n` with a comma between each group of three digits, as the chamber writes amounts.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Basis points as a percentage with two decimals and the figure itself: `1.00 % (100 bps)`.
fn percent(bps: u64) -> String {
    format!("{}.{:02} % ({bps} bps)", bps / 100, bps % 100)
}

fn page(state: &AppState) -> String {
    let url = state.public_url.read().expect("url lock").clone().unwrap_or_else(|| "(not announced yet)".into());
    let relay = state.relay().ok().map(|relay| relay.config.url.clone());
    let door = if relay.is_some() { JOB_BOARD_DOOR } else { "" };
    let access = if state.public_stream() {
        "Open to anyone: the latest paid call, contract and dispute step by step, and the event ledger as it grows."
    } else {
        "Members only on this registry: sign in to watch the latest paid call, contract and dispute as they happen."
    };
    let facts = [
        ("__STREAM_ACCESS__", access.to_string()),
        ("__DID__", state.registry.to_string()),
        ("__URL__", url),
        ("__UNIT__", crate::NETWORK_UNIT.to_string()),
        ("__FEE__", percent(u64::from(state.config.fee_bps))),
        ("__ESCROW__", format!("{} units", grouped(state.config.escrow_threshold.0))),
        ("__RELAY__", relay.unwrap_or_else(|| "not running on this registry".into())),
    ];
    let page = FRONT_PAGE.replacen("<!--job-board-->", door, 1);
    facts.iter().fold(page, |page, (name, value)| page.replacen(name, &escape(value), 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fact_has_one_place_and_the_page_has_no_script() {
        for name in ["__STREAM_ACCESS__", "__DID__", "__URL__", "__UNIT__", "__FEE__", "__ESCROW__", "__RELAY__"] {
            assert_eq!(FRONT_HTML.matches(name).count(), 1, "{name}");
        }
        assert!(!FRONT_PAGE.contains("<script"), "the front page runs no script");
        assert!(FRONT_PAGE.contains("aria-current=\"page\""), "the navigation marks the front page");
    }

    #[test]
    fn amounts_and_fees_read_as_the_chamber_writes_them() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(10_000), "10,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!(percent(100), "1.00 % (100 bps)");
        assert_eq!(percent(5), "0.05 % (5 bps)");
    }
}
