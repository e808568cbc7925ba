//! The connection layer under `bazaar serve`: one accept loop for plain HTTP
//! and rustls alike, which caps the connections one remote address may hold,
//! bounds how long a client may take to send its headers (a slow client's or
//! an idle keep-alive connection's timeout) and how large they may be, bounds
//! the TLS handshake, tells each request its peer's address (`ConnectInfo`,
//! read by the edge's per-IP rate), and drains connections on shutdown.

use anyhow::Result;
use axum::extract::ConnectInfo;
use bazaar_types::limits::{
    HTTP2_IDLE_TIMEOUT_S, HTTP_CONNECTIONS_PER_IP_MAX, HTTP_HEADERS_MAX, HTTP_HEADER_BYTES_MAX,
    HTTP_HEADER_READ_TIMEOUT_S, TLS_HANDSHAKE_TIMEOUT_S,
};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tower::ServiceExt as _;

/// How long a graceful shutdown waits for connections to finish their requests.
pub const SHUTDOWN_GRACE_S: u64 = 10;
/// How long the loop pauses after `accept` fails (e.g. out of file descriptors)
/// before it tries again, so it does not spin.
const ACCEPT_RETRY_MS: u64 = 50;

/// The connection limits; [`ConnLimits::standard`] is the named constants.
#[derive(Clone, Copy, Debug)]
pub struct ConnLimits {
    pub per_ip_max: usize,
    pub header_read_timeout: Duration,
    pub tls_handshake_timeout: Duration,
}

impl ConnLimits {
    pub fn standard() -> ConnLimits {
        ConnLimits {
            per_ip_max: HTTP_CONNECTIONS_PER_IP_MAX,
            header_read_timeout: Duration::from_secs(HTTP_HEADER_READ_TIMEOUT_S),
            tls_handshake_timeout: Duration::from_secs(TLS_HANDSHAKE_TIMEOUT_S),
        }
    }
}

/// What the loop reports: a connection closed at accept because its address
/// held too many already.
pub type OnRefused = Arc<dyn Fn(IpAddr) + Send + Sync>;

/// Open connections per remote address (loopback is not counted).
#[derive(Default)]
struct Open(Mutex<HashMap<IpAddr, usize>>);

/// One counted connection; gives its place back when dropped.
struct Slot {
    open: Arc<Open>,
    ip: Option<IpAddr>,
}

impl Open {
    fn take(self: &Arc<Open>, ip: IpAddr, max: usize) -> Option<Slot> {
        if ip.is_loopback() {
            return Some(Slot { open: self.clone(), ip: None });
        }
        let mut open = self.0.lock().expect("connection counts");
        let count = open.entry(ip).or_default();
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(Slot { open: self.clone(), ip: Some(ip) })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Some(ip) = self.ip else { return };
        let mut open = self.open.0.lock().expect("connection counts");
        if let Some(count) = open.get_mut(&ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&ip);
            }
        }
    }
}

fn builder(limits: &ConnLimits) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(HTTP_HEADER_BYTES_MAX)
        .max_headers(HTTP_HEADERS_MAX);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(HTTP_HEADER_BYTES_MAX as u32)
        .keep_alive_interval(Some(Duration::from_secs(HTTP2_IDLE_TIMEOUT_S)))
        .keep_alive_timeout(Duration::from_secs(HTTP_HEADER_READ_TIMEOUT_S))
        // WebSockets over HTTP/2 (RFC 8441), as axum::serve offers.
        .enable_connect_protocol();
    builder
}

/// Serves `router` on `listener` (over TLS when `tls` is given) until `stop`
/// resolves, then lets open connections finish for up to [`SHUTDOWN_GRACE_S`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: ConnLimits,
    refused: OnRefused,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let builder = Arc::new(builder(&limits));
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let open = Arc::new(Open::default());
    // Each connection holds a receiver; the sender's drop tells them to finish,
    // and the last receiver's drop tells the loop they all have.
    let (closing_tx, closing_rx) = tokio::sync::watch::channel(());
    let (done_tx, mut done_rx) = tokio::sync::watch::channel(());
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(ACCEPT_RETRY_MS)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let Some(slot) = open.take(peer.ip(), limits.per_ip_max) else {
            refused(peer.ip());
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = router.clone().map_request(move |mut request: axum::extract::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            request.map(axum::body::Body::new)
        });
        let service = hyper_util::service::TowerToHyperService::new(service);
        let (builder, acceptor, mut closing, done) =
            (builder.clone(), acceptor.clone(), closing_rx.clone(), done_tx.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let _done = done;
            match acceptor {
                None => {
                    drive(builder.serve_connection_with_upgrades(TokioIo::new(stream), service), &mut closing).await
                }
                Some(acceptor) => {
                    let handshake = tokio::time::timeout(limits.tls_handshake_timeout, acceptor.accept(stream)).await;
                    let Ok(Ok(stream)) = handshake else {
                        tracing::debug!(%peer, "TLS handshake failed or timed out");
                        return;
                    };
                    drive(builder.serve_connection_with_upgrades(TokioIo::new(stream), service), &mut closing).await
                }
            }
        });
    }
    drop(listener);
    drop(closing_tx);
    drop(done_tx);
    drop(closing_rx);
    // Every connection task holds a `done` sender clone: `changed` errs once all are gone.
    let _ = tokio::time::timeout(Duration::from_secs(SHUTDOWN_GRACE_S), done_rx.changed()).await;
    Ok(())
}

/// Runs one connection to its end, or starts its graceful shutdown when the server stops.
async fn drive<C>(connection: C, closing: &mut tokio::sync::watch::Receiver<()>)
where
    C: hyper_util::server::graceful::GracefulConnection,
    C::Error: std::fmt::Display,
{
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%error, "connection ended with an error");
            }
            return;
        }
        _ = closing.changed() => {}
    }
    connection.as_mut().graceful_shutdown();
    if let Err(error) = connection.await {
        tracing::debug!(%error, "connection ended with an error while draining");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_address_holds_at_most_its_cap_and_gets_a_place_back_when_one_closes() {
        let open = Arc::new(Open::default());
        let remote: IpAddr = "203.0.113.9".parse().unwrap();
        let held: Vec<Slot> = (0..3).map(|_| open.take(remote, 3).expect("under the cap")).collect();
        assert!(open.take(remote, 3).is_none(), "the fourth is refused");
        assert!(open.take("198.51.100.1".parse().unwrap(), 3).is_some(), "another address is not");
        drop(held.into_iter().next());
        assert!(open.take(remote, 3).is_some(), "a closed connection gives its place back");
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        let many: Vec<Slot> = (0..10).map(|_| open.take(loopback, 3).expect("loopback is not capped")).collect();
        assert_eq!(many.len(), 10);
        drop(many);
        assert!(!open.0.lock().unwrap().contains_key(&loopback));
    }
}
