//! Request rates at the edge: one GCRA bucket per credential (or passkey
//! session) and one per remote address, checked before anything else runs.
//! Past either: 429 `rate_limited` with the `Retry-After` the bucket names.
//! Loopback addresses are not limited per address: a reverse proxy on the
//! same host speaks for every client, and must limit them itself — unless it
//! is named a trusted proxy (`--trusted-proxy`), in which case the client's
//! address is read from the `X-Forwarded-For` it appends, and limited.
//!
//! The client's address ([`ClientAddress`], in the request's extensions) is
//! the connection's peer, or — when the peer is a trusted proxy — the
//! rightmost `X-Forwarded-For` entry that is not itself a trusted proxy (the
//! entries to its left were written by the client and prove nothing).

use crate::problem::Problem;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bazaar_types::limits::{HTTP_RATE_BURST_S, HTTP_RATE_PER_CREDENTIAL_PER_S, HTTP_RATE_PER_IP_PER_S};
use governor::clock::{Clock as _, QuantaInstant};
use governor::{DefaultKeyedRateLimiter, NotUntil, Quota, RateLimiter};
use sha2::Digest as _;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Every this many checks, buckets that have refilled (idle keys) are
/// forgotten, so the maps hold only recently active callers.
pub const RATE_PRUNE_EVERY: u64 = 8_192;

/// The sustained rates (each at least 1: there is no "unlimited").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimits {
    pub per_credential_per_s: NonZeroU32,
    pub per_ip_per_s: NonZeroU32,
}

impl RateLimits {
    pub const fn standard() -> RateLimits {
        RateLimits {
            per_credential_per_s: NonZeroU32::new(HTTP_RATE_PER_CREDENTIAL_PER_S).expect("a rate"),
            per_ip_per_s: NonZeroU32::new(HTTP_RATE_PER_IP_PER_S).expect("a rate"),
        }
    }
}

/// What was limited, as `/metrics` and the problem's `facts` name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limited {
    Credential,
    Ip,
}

impl Limited {
    fn name(self) -> &'static str {
        match self {
            Limited::Credential => "credential",
            Limited::Ip => "ip",
        }
    }
}

/// The buckets.
pub struct Edge {
    limits: RateLimits,
    credentials: DefaultKeyedRateLimiter<[u8; 32]>,
    addresses: DefaultKeyedRateLimiter<IpAddr>,
    checks: AtomicU64,
}

fn limiter<K: std::hash::Hash + Eq + Clone>(rate: NonZeroU32) -> DefaultKeyedRateLimiter<K> {
    let burst = rate.saturating_mul(NonZeroU32::new(HTTP_RATE_BURST_S).expect("a burst"));
    RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst))
}

impl Edge {
    pub fn new(limits: RateLimits) -> Edge {
        Edge {
            limits,
            credentials: limiter(limits.per_credential_per_s),
            addresses: limiter(limits.per_ip_per_s),
            checks: AtomicU64::new(0),
        }
    }

    pub fn limits(&self) -> RateLimits {
        self.limits
    }

    /// Takes one request from the caller's buckets, or says which is empty and for how long.
    pub fn check(&self, credential: Option<&[u8]>, address: Option<IpAddr>) -> Result<(), (Limited, Duration)> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % RATE_PRUNE_EVERY == RATE_PRUNE_EVERY - 1 {
            self.prune();
        }
        // The wait is measured on the refusing limiter's own clock (read only when refused).
        if let Some(address) = address.filter(|a| !a.is_loopback()) {
            let refused =
                |wait: NotUntil<QuantaInstant>| (Limited::Ip, wait.wait_time_from(self.addresses.clock().now()));
            self.addresses.check_key(&address).map_err(refused)?;
        }
        if let Some(credential) = credential {
            let key: [u8; 32] = sha2::Sha256::digest(credential).into();
            let refused = |wait: NotUntil<QuantaInstant>| {
                (Limited::Credential, wait.wait_time_from(self.credentials.clock().now()))
            };
            self.credentials.check_key(&key).map_err(refused)?;
        }
        Ok(())
    }

    /// Forgets the buckets that are full again (their callers went quiet).
    fn prune(&self) {
        self.credentials.retain_recent();
        self.credentials.shrink_to_fit();
        self.addresses.retain_recent();
        self.addresses.shrink_to_fit();
    }

    /// Callers with a bucket now (for `/metrics`).
    pub fn tracked(&self) -> (usize, usize) {
        (self.credentials.len(), self.addresses.len())
    }
}

/// `X-Forwarded-For` entries read at most, from the right.
pub const FORWARDED_ENTRIES_MAX: usize = 16;

/// The address a request came from, as far as this registry can tell: set by
/// [`limit`] for every request that arrived over a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientAddress(pub IpAddr);

/// The client's address: `peer`, or through trusted proxies the rightmost
/// forwarded address that is not one of them.
pub fn client_address(peer: IpAddr, trusted: &[IpAddr], headers: &axum::http::HeaderMap) -> IpAddr {
    if !trusted.contains(&peer) {
        return peer;
    }
    let entries: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .collect();
    entries
        .into_iter()
        .rev()
        .take(FORWARDED_ENTRIES_MAX)
        .map_while(|entry| entry.parse::<IpAddr>().ok())
        .find(|hop| !trusted.contains(hop))
        .unwrap_or(peer)
}

/// Middleware: the caller's credential (or session cookie) and address each take one request.
pub async fn limit(
    State(state): State<Arc<crate::AppState>>,
    mut request: axum::extract::Request,
    next: Next,
) -> Response {
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(peer)| peer.ip());
    let address = peer.map(|peer| client_address(peer, state.trusted_proxies(), request.headers()));
    if let Some(address) = address {
        request.extensions_mut().insert(ClientAddress(address));
    }
    let headers = request.headers();
    let session = crate::auth::session_cookie(headers);
    let credential = headers
        .get(axum::http::header::AUTHORIZATION)
        .map(HeaderValue::as_bytes)
        .or(session.as_deref().map(str::as_bytes));
    let Err((limited, wait)) = state.edge().check(credential, address) else {
        return next.run(request).await;
    };
    state.metrics.add("bazaar_http_rate_limited_total", format!("limit=\"{}\"", limited.name()), 1.0);
    let retry_after_s = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let limit = match limited {
        Limited::Credential => state.edge().limits().per_credential_per_s,
        Limited::Ip => state.edge().limits().per_ip_per_s,
    };
    let mut problem = Problem::new(
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
        format!("Too many requests from this {} ({limit} per second); retry after `Retry-After`.", limited.name()),
    );
    problem.facts = serde_json::json!({"limit": limited.name(), "per_s": limit, "retry_after_s": retry_after_s.max(1)});
    let mut response = problem.into_response();
    response.headers_mut().insert(axum::http::header::RETRY_AFTER, HeaderValue::from(retry_after_s.max(1)));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarded_addresses_count_only_through_a_trusted_proxy() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let mut headers = axum::http::HeaderMap::new();
        headers.insert("x-forwarded-for", "198.51.100.7, 203.0.113.5, 10.0.0.2".parse().unwrap());
        let proxies = [ip("127.0.0.1"), ip("10.0.0.2")];
        // Through the local proxy and an inner one: the hop before them is the client; what it claimed
        // to the left of that (198.51.100.7) proves nothing.
        assert_eq!(client_address(ip("127.0.0.1"), &proxies, &headers), ip("203.0.113.5"));
        // From a peer that is no trusted proxy, the header is the client's own say-so: ignored.
        assert_eq!(client_address(ip("192.0.2.1"), &proxies, &headers), ip("192.0.2.1"));
        // No trusted proxies at all (the default): the peer.
        assert_eq!(client_address(ip("127.0.0.1"), &[], &headers), ip("127.0.0.1"));
        // A trusted proxy that forwards nothing parseable: the proxy itself.
        headers.insert("x-forwarded-for", "not an address".parse().unwrap());
        assert_eq!(client_address(ip("127.0.0.1"), &proxies, &headers), ip("127.0.0.1"));
    }

    #[test]
    fn a_credential_past_its_burst_waits_and_another_does_not() {
        let rate = |n| NonZeroU32::new(n).unwrap();
        let edge = Edge::new(RateLimits { per_credential_per_s: rate(5), per_ip_per_s: rate(1_000) });
        let burst = 5 * HTTP_RATE_BURST_S;
        for _ in 0..burst {
            edge.check(Some(b"Bearer a"), None).unwrap();
        }
        let (limited, wait) = edge.check(Some(b"Bearer a"), None).unwrap_err();
        assert_eq!(limited, Limited::Credential);
        assert!(wait > Duration::ZERO && wait <= Duration::from_millis(200), "{wait:?}");
        edge.check(Some(b"Bearer b"), None).unwrap();
        edge.check(None, None).unwrap();
    }

    #[test]
    fn a_remote_address_is_limited_and_loopback_is_not() {
        let rate = |n| NonZeroU32::new(n).unwrap();
        let edge = Edge::new(RateLimits { per_credential_per_s: rate(1_000), per_ip_per_s: rate(2) });
        let remote: IpAddr = "203.0.113.7".parse().unwrap();
        for _ in 0..2 * HTTP_RATE_BURST_S {
            edge.check(None, Some(remote)).unwrap();
        }
        assert_eq!(edge.check(Some(b"any"), Some(remote)).unwrap_err().0, Limited::Ip);
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        for _ in 0..100 {
            edge.check(None, Some(loopback)).unwrap();
        }
        assert_eq!(
            edge.tracked(),
            (0, 1),
            "an address refused takes nothing from its credential; loopback has no bucket"
        );
    }
}
