//! Library side of the `bazaar` binary: process plumbing and the demo's chapters. The agents (the labor
//! market's runtimes, the AI buyer, the relay client) are `bazaar_agents`; the attack catalogue is
//! `bazaar_attacks`; the stage the demo and the tests share (embedded registries, enrolment, the data
//! directory's rules) is `bazaar_stage`. This crate parses arguments and calls them.
//!
//! ## Map
//!
//! (What this crate holds, file by file; `ARCHITECTURE.md` keeps the one-line summary.)
//!
//! The binary: `main.rs` parses and hands each command to its family in `cmd/` (`registry`, `demo`,
//! `members`, `payments`, `attack`, `escrow`, `reputation`, `federation`, `talk` — `dm key|send|read`,
//! sealing and opening on the client —, `jobs`, `labor` — the labor market's `worker` and `validator` —,
//! `hire`, `storefront` — `bazaar market`, the storefront, on the SDK's `storefront` calls —, `reprice`,
//! `backup`, with `common` beneath them), which runs it and prints prose or `--json`. The library:
//! `runtime` (store selection, joining a cluster, serve with graceful shutdown, audit; the wall clock is
//! `bazaar_sdk::clock`'s), `listen` (`--listen`, HTTPS on rustls with `--tls-cert`/`--tls-key`, the
//! plain-HTTP-on-a-public-address warning), `conn` (the accept loop under `serve`, plain and TLS alike:
//! connections per remote address, each place held by the socket so a WebSocket counts until it closes, the
//! header-read and idle timeout, header size, TLS handshake timeout, each request's `ConnectInfo`, draining on
//! shutdown), `passport` (offline passport checks), and `demo` (composes the chapters `restock`, `escrow` —
//! the escrowed order with a dispute, an appeal and a slash —, `federation`, `market` (the storefront),
//! `labor` and `agents`; chapters import `bazaar_stage`, never each other; `demo::runs` is the chamber's run
//! buttons — the scripted story, the pilot, the agent and, in `demo::stranger`, the federation proof with a
//! peer registry started beside the served one on its first run; fresh cast each time —, attached to a served
//! registry as `bazaar_server::live::StoryRunner`). `bazaar reprice` reads its file with
//! `bazaar_server::reprice` (re-exported as `bazaar_cli::reprice`), the same code the chamber's Discover page
//! calls.

pub mod conn;
pub mod demo;
pub mod listen;
pub mod passport;
pub use bazaar_server::reprice;
pub mod runtime;

/// Dispute phase deadlines and the stake cooldown this registry uses.
#[derive(clap::Args, Clone, Debug)]
pub struct WindowArgs {
    /// Seconds after a paid call settles (or a milestone is released) that its buyer may dispute it.
    #[arg(long, default_value_t = bazaar_types::limits::DISPUTE_CLAIM_WINDOW_S)]
    pub claim_window_s: u64,
    /// Seconds a respondent has to answer a dispute before losing by default.
    #[arg(long, default_value_t = bazaar_types::limits::DISPUTE_ANSWER_S)]
    pub answer_window_s: u64,
    /// Seconds of the evidence phase.
    #[arg(long, default_value_t = bazaar_types::limits::DISPUTE_EVIDENCE_S)]
    pub evidence_window_s: u64,
    /// Seconds an arbiter has to rule before it is replaced.
    #[arg(long, default_value_t = bazaar_types::limits::DISPUTE_RULING_S)]
    pub ruling_window_s: u64,
    /// Seconds the losing side has to appeal a first ruling.
    #[arg(long, default_value_t = bazaar_types::limits::DISPUTE_APPEAL_S)]
    pub appeal_window_s: u64,
    /// Seconds unlocked stake waits before it can be withdrawn.
    #[arg(long, default_value_t = bazaar_types::limits::STAKE_COOLDOWN_S)]
    pub stake_cooldown_s: u64,
}

impl WindowArgs {
    /// The registry's windows, each checked against `DISPUTE_WINDOW_S_MIN..=DISPUTE_WINDOW_S_MAX`.
    pub fn windows(&self) -> Result<bazaar_core::dispute::Windows, String> {
        use bazaar_types::limits::{DISPUTE_WINDOW_S_MAX, DISPUTE_WINDOW_S_MIN};
        let named = [
            ("--claim-window-s", self.claim_window_s),
            ("--answer-window-s", self.answer_window_s),
            ("--evidence-window-s", self.evidence_window_s),
            ("--ruling-window-s", self.ruling_window_s),
            ("--appeal-window-s", self.appeal_window_s),
            ("--stake-cooldown-s", self.stake_cooldown_s),
        ];
        for (flag, value) in named {
            if !(DISPUTE_WINDOW_S_MIN..=DISPUTE_WINDOW_S_MAX).contains(&value) {
                return Err(format!(
                    "{flag} {value} is outside {DISPUTE_WINDOW_S_MIN}..={DISPUTE_WINDOW_S_MAX} seconds"
                ));
            }
        }
        Ok(bazaar_core::dispute::Windows {
            claim_s: self.claim_window_s,
            answer_s: self.answer_window_s,
            evidence_s: self.evidence_window_s,
            ruling_s: self.ruling_window_s,
            appeal_s: self.appeal_window_s,
            stake_cooldown_s: self.stake_cooldown_s,
        })
    }
}

/// How `bazaar serve` runs the labor market's relay.
#[derive(clap::Args, Clone, Default)]
pub struct RelayArgs {
    /// Also serve the relay on its own port (at `/` and `/relay`), 127.0.0.1 only.
    #[arg(long)]
    pub relay_port: Option<u16>,
    /// Private mode: NIP-42 authentication before reading or writing. The
    /// default is public (anonymous read and write, never AUTH), which is what
    /// outbound-only workers need.
    #[arg(long)]
    pub relay_private: bool,
    /// In private mode, a key (64 hex) allowed to write; repeat for several. None given: any authenticated key.
    #[arg(long, requires = "relay_private")]
    pub relay_writer: Vec<String>,
}

/// Where `bazaar serve` listens, whether it speaks TLS itself, and the edge's limits.
#[derive(clap::Args, Clone)]
pub struct ListenArgs {
    /// The address to listen on, e.g. `0.0.0.0:7878` or `[::]:443`; default 127.0.0.1:<port>. A public address
    /// without `--tls-cert` is served, with a warning: put a TLS-terminating reverse proxy in front of it.
    #[arg(long, env = "BAZAAR_LISTEN")]
    pub listen: Option<std::net::SocketAddr>,
    /// PEM certificate chain: serve HTTPS (rustls) with `--tls-key`.
    #[arg(long, env = "BAZAAR_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) for `--tls-cert`.
    #[arg(long, env = "BAZAAR_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Requests per second one credential (or passkey session) may make on this node (at least 1). Past it: 429
    /// `rate_limited` with `Retry-After`.
    #[arg(long, env = "BAZAAR_RATE_PER_CREDENTIAL", default_value_t = bazaar_types::limits::HTTP_RATE_PER_CREDENTIAL_PER_S,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_per_credential: u32,
    /// Requests per second one remote (non-loopback) address may make on this node (at least 1).
    #[arg(long, env = "BAZAAR_RATE_PER_IP", default_value_t = bazaar_types::limits::HTTP_RATE_PER_IP_PER_S,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_per_ip: u32,
    /// Open connections one remote (non-loopback) address may hold on this node (at least 1).
    #[arg(long, env = "BAZAAR_CONNECTIONS_PER_IP", default_value_t = bazaar_types::limits::HTTP_CONNECTIONS_PER_IP_MAX as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub connections_per_ip: u64,
    /// Seconds a client may take to send a request's headers, and may stay idle between requests (HTTP/1.1; at
    /// least 1).
    #[arg(long, env = "BAZAAR_HEADER_TIMEOUT_S", default_value_t = bazaar_types::limits::HTTP_HEADER_READ_TIMEOUT_S,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_s: u64,
    /// A reverse proxy whose `X-Forwarded-For` names the client (repeat for each; e.g. `127.0.0.1` behind a
    /// same-host nginx). Requests through it are rate-limited per client address; none by default, and the header is
    /// never believed from anyone else.
    #[arg(long = "trusted-proxy", env = "BAZAAR_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<std::net::IpAddr>,
}

impl Default for ListenArgs {
    /// Loopback, plain HTTP, the standard limits.
    fn default() -> ListenArgs {
        use bazaar_types::limits::*;
        ListenArgs {
            listen: None,
            tls_cert: None,
            tls_key: None,
            rate_per_credential: HTTP_RATE_PER_CREDENTIAL_PER_S,
            rate_per_ip: HTTP_RATE_PER_IP_PER_S,
            connections_per_ip: HTTP_CONNECTIONS_PER_IP_MAX as u64,
            header_timeout_s: HTTP_HEADER_READ_TIMEOUT_S,
            trusted_proxies: Vec::new(),
        }
    }
}

impl ListenArgs {
    /// The edge's request rates these flags set.
    pub fn rates(&self) -> bazaar_server::edge::RateLimits {
        let rate = |n: u32| std::num::NonZeroU32::new(n.max(1)).expect("at least 1");
        bazaar_server::edge::RateLimits {
            per_credential_per_s: rate(self.rate_per_credential),
            per_ip_per_s: rate(self.rate_per_ip),
        }
    }

    /// The connection limits these flags set.
    pub fn connections(&self) -> crate::conn::ConnLimits {
        crate::conn::ConnLimits {
            per_ip_max: usize::try_from(self.connections_per_ip).unwrap_or(usize::MAX),
            header_read_timeout: std::time::Duration::from_secs(self.header_timeout_s.max(1)),
            ..crate::conn::ConnLimits::standard()
        }
    }
}

/// How a node joins a cluster: several `bazaar serve` processes on one
/// PostgreSQL (`--database-url`) and one NATS JetStream server.
#[derive(clap::Args, Clone, Default)]
pub struct ClusterArgs {
    /// NATS server with JetStream (e.g. `nats://127.0.0.1:4222`): live streams fan out across the nodes through it,
    /// and in-flight duplicates are answered 409 across them. Needs `--database-url`.
    #[arg(long, env = "BAZAAR_NATS_URL", requires = "database_url")]
    pub nats_url: Option<String>,
    /// This node's name in the cluster (leases, logs, `/metrics`); default `<hostname>-<pid>`.
    #[arg(long, env = "BAZAAR_NODE_ID")]
    pub node_id: Option<String>,
}

/// Where the embedded store lives and which database to use instead.
#[derive(clap::Args, Clone)]
pub struct StoreArgs {
    /// Data directory for the embedded SQLite store (and the operator credential file).
    #[arg(long, env = "BAZAAR_DATA_DIR", default_value = "./bazaar-data")]
    pub data_dir: std::path::PathBuf,
    /// Use PostgreSQL instead of the embedded store, e.g. postgres://postgres@127.0.0.1/bazaar
    #[arg(long, env = "BAZAAR_DATABASE_URL")]
    pub database_url: Option<String>,
}

pub use bazaar_wire::wire_json;
