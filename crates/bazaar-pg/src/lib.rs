//! One way for every PostgreSQL engine to reach its database: a URL read
//! once into a [`Database`] (the driver's settings plus the TLS connector its
//! `sslmode` asks for), and [`Database::connect`], which opens one
//! connection and hands back the client and the future that drives it, for
//! the caller to spawn on its own runtime.
//!
//! `sslmode` follows libpq, with one difference: **absent means `disable`**
//! (libpq's default is `prefer`), so a URL that says nothing keeps the plain
//! connection it always had. `prefer` tries TLS without verification and
//! falls back to plain; `require` insists on TLS without verifying the
//! certificate, unless `sslrootcert` is given, when it verifies the chain
//! (libpq's rule); `verify-ca` verifies the chain, `verify-full` the chain and
//! the host name — against the `sslrootcert` PEM file, or the webpki (Mozilla)
//! roots when there is none. TLS is rustls on the ring provider.
//!
//! ## Map
//!
//! (What this crate holds, file by file; `ARCHITECTURE.md` keeps the one-line summary.)
//!
//! how every PostgreSQL engine (ledger, conversation, relay)
//! reaches its database: `Database::from_url` reads libpq's `sslmode`
//! (absent = `disable`) and `sslrootcert` out of the URL into a
//! `tokio_postgres::Config` plus a rustls connector (ring), and `connect`
//! returns the client and its boxed, logging connection future for the caller
//! to spawn on its own runtime; `migrations` is the one runner every PostgreSQL plane's schema goes
//! through (`Migrations::run`: its files in order, once each, under its advisory lock).

pub mod migrations;
mod tls;
mod url;

pub use migrations::Migrations;

pub use tls::ROOT_CERT_BYTES_MAX;
pub use url::{parse_url, ParsedUrl, SslMode, Verification};

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use tokio_postgres::Client;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The future that drives one connection until it ends (and logs how it
/// ended). Spawn it on the runtime that uses the client.
pub type Connection = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Why a database could not be set up or reached.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The URL could not be read (an unknown `sslmode`, a parameter the driver refuses, …).
    #[error("database URL: {0}")]
    Url(String),
    /// The `sslrootcert` file could not be used.
    #[error("sslrootcert {}: {reason}", path.display())]
    RootCert { path: PathBuf, reason: String },
    /// rustls could not be configured.
    #[error("TLS setup: {0}")]
    Tls(String),
    /// The server could not be reached, refused TLS or its certificate, or
    /// refused the session.
    #[error("PostgreSQL connection (sslmode={}): {}", ssl_mode.name(), chain(error))]
    Connect { ssl_mode: SslMode, error: tokio_postgres::Error },
}

impl Error {
    /// The driver's error, when the failure came from the server or the network.
    pub fn postgres(&self) -> Option<&tokio_postgres::Error> {
        match self {
            Error::Connect { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// `error` and every error under it, `: `-joined (the driver's own text
/// names only the outermost, "error performing TLS handshake").
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// A database to connect to: the driver's settings and the TLS its URL asks for.
#[derive(Clone)]
pub struct Database {
    config: tokio_postgres::Config,
    ssl_mode: SslMode,
    /// `None` for `disable`: the driver then never offers TLS.
    tls: Option<MakeRustlsConnect>,
}

impl Database {
    /// Reads `url` and loads what its TLS settings name (the `sslrootcert` file).
    pub fn from_url(url: &str) -> Result<Database, Error> {
        Database::new(parse_url(url)?)
    }

    /// The connector for a URL already read.
    pub fn new(parsed: ParsedUrl) -> Result<Database, Error> {
        let tls = match parsed.ssl_mode {
            SslMode::Disable => None,
            _ => Some(tls::connector(parsed.verification(), parsed.root_cert.as_deref())?),
        };
        Ok(Database { config: parsed.config, ssl_mode: parsed.ssl_mode, tls })
    }

    /// The driver's settings (host, user, timeouts, …).
    pub fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// The driver's settings, to change before connecting (say, `application_name`).
    pub fn config_mut(&mut self) -> &mut tokio_postgres::Config {
        &mut self.config
    }

    pub fn ssl_mode(&self) -> SslMode {
        self.ssl_mode
    }

    /// Opens one connection. The returned [`Connection`] must be spawned (or
    /// polled) for the client to make progress.
    pub async fn connect(&self) -> Result<(Client, Connection), Error> {
        let refused = |error| Error::Connect { ssl_mode: self.ssl_mode, error };
        let name = self.config.get_application_name().unwrap_or("").to_string();
        match &self.tls {
            None => {
                let (client, connection) = self.config.connect(tokio_postgres::NoTls).await.map_err(refused)?;
                Ok((client, drive(connection, name)))
            }
            Some(tls) => {
                let (client, connection) = self.config.connect(tls.clone()).await.map_err(refused)?;
                Ok((client, drive(connection, name)))
            }
        }
    }
}

/// `connection` boxed, logging its end under `application_name`.
fn drive<F>(connection: F, application_name: String) -> Connection
where
    F: Future<Output = Result<(), tokio_postgres::Error>> + Send + 'static,
{
    Box::pin(async move {
        match connection.await {
            Ok(()) => tracing::debug!(application_name, "PostgreSQL connection closed"),
            Err(error) => tracing::warn!(application_name, error = %chain(&error), "PostgreSQL connection ended"),
        }
    })
}
