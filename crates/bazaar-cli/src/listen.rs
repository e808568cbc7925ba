//! Where `bazaar serve` listens: the address (loopback unless told), plain
//! HTTP or HTTPS on rustls, and the warning when a public address would be
//! served in clear.

use crate::ListenArgs;
use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

/// The TLS configuration `listen` asks for, read now so a bad certificate fails the start at once.
pub fn tls(listen: &ListenArgs) -> Result<Option<Arc<rustls::ServerConfig>>> {
    match (&listen.tls_cert, &listen.tls_key) {
        (Some(cert), Some(key)) => Ok(Some(tls_config(cert, key)?)),
        _ => Ok(None),
    }
}

/// Binds `--listen` (default 127.0.0.1:`port`); returns the listener, its address and the URL scheme.
pub async fn bind(
    listen: &ListenArgs,
    port: u16,
    tls: bool,
) -> Result<(tokio::net::TcpListener, SocketAddr, &'static str)> {
    let wanted = listen.listen.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], port)));
    let listener = tokio::net::TcpListener::bind(wanted).await.with_context(|| format!("binding {wanted}"))?;
    let address = listener.local_addr()?;
    if !tls && !address.ip().is_loopback() {
        tracing::warn!(
            %address,
            "listening on a non-loopback address without TLS: credentials and tokens cross the network in clear \
             unless a TLS-terminating reverse proxy is in front (see docs/operators.md), or pass --tls-cert/--tls-key"
        );
        eprintln!("warning: {address} is not loopback and this node speaks plain HTTP; put TLS in front of it");
    }
    Ok((listener, address, if tls { "https" } else { "http" }))
}

/// Serves `router` on `listener` (HTTPS when `tls`) until `stop` resolves,
/// then drains requests in flight: the connection layer of [`crate::conn`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: crate::conn::ConnLimits,
    refused: crate::conn::OnRefused,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    crate::conn::serve(listener, router, tls, limits, refused, stop).await
}

/// The HTTPS listener's rustls configuration from PEM files (HTTP/1.1 and h2).
fn tls_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let chain = std::fs::read(cert).with_context(|| format!("reading --tls-cert {}", cert.display()))?;
    let secret = std::fs::read(key).with_context(|| format!("reading --tls-key {}", key.display()))?;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_slice_iter(&chain)
        .collect::<std::result::Result<Vec<_>, _>>()
        .with_context(|| format!("--tls-cert {}: not a PEM certificate chain", cert.display()))?;
    anyhow::ensure!(!certs.is_empty(), "--tls-cert {}: no certificate in it", cert.display());
    let private = PrivateKeyDer::from_pem_slice(&secret)
        .with_context(|| format!("--tls-key {}: no PEM private key (PKCS#8, PKCS#1 or SEC1) in it", key.display()))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, private)
        .with_context(|| format!("--tls-key {} does not match --tls-cert {}", key.display(), cert.display()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
