//! Fetching evidence, defensively. The validator fetches an artifact only
//! from an operator allowlist of exact host names, over HTTPS; a host that
//! resolves to a loopback or private address is refused unless the operator
//! allowed that host for tests (and only such a host may be plain HTTP);
//! at most [`REDIRECTS_MAX`] redirects, each re-checked against the same
//! rules; one [`DEADLINE_S`] deadline for the whole fetch; a [`BODY_BYTES_MAX`]
//! body cap. The connection goes to the address that was checked (pinned),
//! so a second DNS answer cannot swap in a private one.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bazaar_types::net::is_private_address;

/// Redirects followed at most.
pub const REDIRECTS_MAX: usize = 3;
/// One deadline for the whole fetch, redirects included, in seconds.
pub const DEADLINE_S: u64 = 15;
/// Largest artifact body read: 16 MiB.
pub const BODY_BYTES_MAX: usize = 16 * 1024 * 1024;

/// Why an artifact could not be fetched: evidence unavailable, so the
/// outcome is unassessed, never rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("{0} is not a URL the validator may fetch ({1})")]
    Url(String, String),
    #[error("host {0} is not on the validator's allowlist")]
    OffAllowlist(String),
    #[error("host {host} resolves to a private or loopback address ({address}); refused")]
    PrivateAddress { host: String, address: IpAddr },
    #[error("host {0} did not resolve")]
    Unresolved(String),
    #[error("more than {REDIRECTS_MAX} redirects")]
    TooManyRedirects,
    #[error("the body is larger than {BODY_BYTES_MAX} bytes")]
    TooLarge,
    #[error("the fetch did not finish within {DEADLINE_S} s")]
    Deadline,
    #[error("the host answered {0}")]
    Status(u16),
    #[error("transport: {0}")]
    Transport(String),
}

/// Turns a host and port into addresses: DNS in production, a fixed map in tests.
pub trait Resolve: Send + Sync {
    fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>>;
}

/// The system resolver.
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        use std::net::ToSocketAddrs;
        Ok((host, port).to_socket_addrs()?.collect())
    }
}

/// Fixed answers (`--resolve host=address`), falling back to none.
#[derive(Default)]
pub struct FixedResolver(pub BTreeMap<String, IpAddr>);

impl Resolve for FixedResolver {
    fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        Ok(self.0.get(host).map(|ip| vec![SocketAddr::new(*ip, port)]).unwrap_or_default())
    }
}

#[derive(Clone)]
pub struct FetchPolicy {
    /// Exact host names the validator fetches from.
    pub allowed_hosts: BTreeSet<String>,
    /// Hosts allowed to resolve to private addresses and to use plain HTTP (tests, closed networks).
    pub private_hosts: BTreeSet<String>,
    pub resolver: Arc<dyn Resolve>,
    pub deadline: Duration,
}

impl FetchPolicy {
    pub fn new(allowed_hosts: impl IntoIterator<Item = String>) -> FetchPolicy {
        FetchPolicy {
            allowed_hosts: allowed_hosts.into_iter().collect(),
            private_hosts: BTreeSet::new(),
            resolver: Arc::new(SystemResolver),
            deadline: Duration::from_secs(DEADLINE_S),
        }
    }
}

/// Fetches `url` under `policy`: the body's bytes, or why not.
pub async fn fetch(policy: &FetchPolicy, url: &str) -> Result<Vec<u8>, FetchError> {
    match tokio::time::timeout(policy.deadline, follow(policy, url)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(FetchError::Deadline),
    }
}

async fn follow(policy: &FetchPolicy, url: &str) -> Result<Vec<u8>, FetchError> {
    let mut url = reqwest::Url::parse(url).map_err(|e| FetchError::Url(url.into(), e.to_string()))?;
    for _ in 0..=REDIRECTS_MAX {
        let (host, address) = admit(policy, &url)?;
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .resolve(&host, address)
            .build()
            .map_err(|e| FetchError::Transport(e.to_string()))?;
        let mut response = client.get(url.clone()).send().await.map_err(|e| FetchError::Transport(e.to_string()))?;
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or(FetchError::Status(status.as_u16()))?;
            url = url.join(location).map_err(|e| FetchError::Url(location.into(), e.to_string()))?;
            continue;
        }
        if !status.is_success() {
            return Err(FetchError::Status(status.as_u16()));
        }
        if response.content_length().is_some_and(|n| n > BODY_BYTES_MAX as u64) {
            return Err(FetchError::TooLarge);
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| FetchError::Transport(e.to_string()))? {
            if body.len() + chunk.len() > BODY_BYTES_MAX {
                return Err(FetchError::TooLarge);
            }
            body.extend_from_slice(&chunk);
        }
        return Ok(body);
    }
    Err(FetchError::TooManyRedirects)
}

/// One hop's checks: scheme, allowlist, resolution, address class. The address to connect to.
fn admit(policy: &FetchPolicy, url: &reqwest::Url) -> Result<(String, SocketAddr), FetchError> {
    let host = url.host_str().ok_or_else(|| FetchError::Url(url.to_string(), "no host".into()))?.to_string();
    if !policy.allowed_hosts.contains(&host) {
        return Err(FetchError::OffAllowlist(host));
    }
    let private_allowed = policy.private_hosts.contains(&host);
    let port = url.port_or_known_default().unwrap_or(443);
    let addresses = policy.resolver.resolve(&host, port).map_err(|_| FetchError::Unresolved(host.clone()))?;
    let address = *addresses.first().ok_or_else(|| FetchError::Unresolved(host.clone()))?;
    if let Some(bad) = addresses.iter().find(|a| is_private_address(a.ip())) {
        if !private_allowed {
            return Err(FetchError::PrivateAddress { host, address: bad.ip() });
        }
    }
    match url.scheme() {
        "https" => Ok((host, address)),
        "http" if private_allowed => Ok((host, address)),
        other => Err(FetchError::Url(url.to_string(), format!("scheme {other} (HTTPS only)"))),
    }
}
