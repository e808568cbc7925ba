//! The front page (`GET /`): a page, not a 404 — this registry's DID and card, the doors a visitor may use
//! (each a link that answers), whether the chamber is open to anonymous visitors, and the page policy of
//! every page the registry serves (no script, nothing framed).

use crate::common;

#[tokio::test]
async fn the_front_page_says_what_this_registry_is_and_links_every_door() {
    let r = common::registry().await;
    let page = r.http.get(format!("{}/", r.url)).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let headers = page.headers().clone();
    assert!(headers["content-type"].to_str().unwrap().starts_with("text/html"));
    let policy = headers["content-security-policy"].to_str().unwrap();
    assert!(policy.starts_with("default-src 'none'; script-src 'self';"), "no inline script allowed: {policy}");
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    let body = page.text().await.unwrap();
    assert!(body.contains(&r.state.registry.to_string()), "the registry's DID");
    assert!(!body.contains("__"), "every placeholder filled: {body}");
    assert!(body.contains("Members only"), "the stream is closed by default, and the page says so");
    assert!(!body.contains("Read the job board"), "no job board door where no relay runs");
    for door in [
        "/chamber",
        "/chamber/break",
        "/passport/verify",
        "/compromises",
        "/account",
        "/.well-known/bazaar",
        "/openapi.json",
        "/x402/supported",
    ] {
        assert!(body.contains(&format!("href=\"{door}\"")), "a link to {door}");
        let answered = r.http.get(format!("{}{door}", r.url)).header("accept", "text/html").send().await.unwrap();
        assert!(answered.status().is_success(), "{door} answers {}", answered.status());
    }

    r.state.set_public_stream(true);
    let body = r.http.get(format!("{}/", r.url)).send().await.unwrap().text().await.unwrap();
    assert!(body.contains("Open to anyone"), "an open chamber is said to be open");

    // Where the relay runs, the job board is a door and the relay's address is said.
    use bazaar_relay::sqlite::SqliteEventStore;
    use bazaar_relay::{Relay, RelayConfig};
    let ws = format!("{}/relay", r.url.replace("http://", "ws://"));
    let store = std::sync::Arc::new(SqliteEventStore::open(&r.dir().join("relay.db")).unwrap());
    let relay = Relay::start(store, r.clock.clone(), RelayConfig::public(ws.clone())).unwrap();
    assert!(r.state.attach_relay(std::sync::Arc::new(relay)));
    let body = r.http.get(format!("{}/", r.url)).send().await.unwrap().text().await.unwrap();
    assert!(body.contains("Read the job board") && body.contains(&ws), "the job board's door and address");
    let board = r.http.get(format!("{}/relay", r.url)).header("accept", "text/html").send().await.unwrap();
    assert!(board.status().is_success(), "/relay answers {}", board.status());
}
