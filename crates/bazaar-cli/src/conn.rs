//! The connection layer under `bazaar serve`: one accept loop for plain HTTP
//! and rustls alike, which caps the connections one remote address may hold
//! (an upgraded one, a WebSocket, counts until its socket closes),
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
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
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
    /// Whether loopback addresses are capped too (not by default: a local proxy or the
    /// benchmark holds many connections from 127.0.0.1; the tests cap it to see the cap).
    pub cap_loopback: bool,
}

impl ConnLimits {
    pub fn standard() -> ConnLimits {
        ConnLimits {
            per_ip_max: HTTP_CONNECTIONS_PER_IP_MAX,
            header_read_timeout: Duration::from_secs(HTTP_HEADER_READ_TIMEOUT_S),
            tls_handshake_timeout: Duration::from_secs(TLS_HANDSHAKE_TIMEOUT_S),
            cap_loopback: false,
        }
    }
}

/// What the loop reports: a connection closed at accept because its address
/// held too many already.
pub type OnRefused = Arc<dyn Fn(IpAddr) + Send + Sync>;

/// Open connections per remote address (loopback is not counted unless asked).
#[derive(Default)]
struct Open(Mutex<HashMap<IpAddr, usize>>);

/// One counted connection; gives its place back when dropped.
struct Slot {
    open: Arc<Open>,
    ip: Option<IpAddr>,
}

impl Open {
    fn take(self: &Arc<Open>, ip: IpAddr, limits: &ConnLimits) -> Option<Slot> {
        let max = limits.per_ip_max;
        if ip.is_loopback() && !limits.cap_loopback {
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

/// A connection's socket holding its place in the per-address count. The place is given back when the
/// socket is dropped: for a connection HTTP hands over (an upgrade to a WebSocket), that is when the
/// WebSocket ends, not when the HTTP exchange does.
struct Held<S> {
    io: S,
    _slot: Slot,
}

impl<S: AsyncRead + Unpin> AsyncRead for Held<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Held<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
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
        let Some(slot) = open.take(peer.ip(), &limits) else {
            refused(peer.ip());
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let stream = Held { io: stream, _slot: slot };
        let service = router.clone().map_request(move |mut request: axum::extract::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            request.map(axum::body::Body::new)
        });
        let service = hyper_util::service::TowerToHyperService::new(service);
        let (builder, acceptor, mut closing, done) =
            (builder.clone(), acceptor.clone(), closing_rx.clone(), done_tx.clone());
        tokio::spawn(async move {
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
        let limits = ConnLimits { per_ip_max: 3, ..ConnLimits::standard() };
        let remote: IpAddr = "203.0.113.9".parse().unwrap();
        let held: Vec<Slot> = (0..3).map(|_| open.take(remote, &limits).expect("under the cap")).collect();
        assert!(open.take(remote, &limits).is_none(), "the fourth is refused");
        assert!(open.take("198.51.100.1".parse().unwrap(), &limits).is_some(), "another address is not");
        drop(held.into_iter().next());
        assert!(open.take(remote, &limits).is_some(), "a closed connection gives its place back");
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        let many: Vec<Slot> = (0..10).map(|_| open.take(loopback, &limits).expect("loopback is not capped")).collect();
        assert_eq!(many.len(), 10);
        drop(many);
        assert!(!open.0.lock().unwrap().contains_key(&loopback));
    }

    /// A WebSocket keeps its connection's place in the per-address count until it closes: with a cap of
    /// one, a second connection from the address is closed at accept while the WebSocket is open, and
    /// served once it has closed.
    #[tokio::test]
    async fn an_upgraded_connection_counts_until_its_websocket_closes() {
        use axum::extract::ws::WebSocketUpgrade;
        use futures::{SinkExt, StreamExt};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        use tokio_tungstenite::tungstenite::Message;
        let echo = |upgrade: WebSocketUpgrade| async move {
            upgrade.on_upgrade(|mut socket| async move {
                while let Some(Ok(message)) = socket.recv().await {
                    if socket.send(message).await.is_err() {
                        break;
                    }
                }
            })
        };
        let router = axum::Router::new()
            .route("/ws", axum::routing::get(echo))
            .route("/plain", axum::routing::get(|| async { "plain" }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let refusals = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = refusals.clone();
        let refused: OnRefused = Arc::new(move |_| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        let limits = ConnLimits { per_ip_max: 1, cap_loopback: true, ..ConnLimits::standard() };
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(serve(listener, router, None, limits, refused, async move {
            stop_rx.await.ok();
        }));
        // A plain request on a connection of its own: its answer, or nothing when closed at accept.
        let plain = || async move {
            let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            let ask = "GET /plain HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
            let _ = stream.write_all(ask.as_bytes()).await;
            let mut answer = String::new();
            let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut answer)).await;
            answer
        };
        let (mut socket, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws")).await.unwrap();
        socket.send(Message::text("ping")).await.unwrap();
        let echoed = socket.next().await.unwrap().unwrap();
        assert_eq!(echoed.into_text().unwrap().as_str(), "ping", "the WebSocket is up");
        assert_eq!(plain().await, "", "closed at accept: the open WebSocket holds the address's one place");
        assert_eq!(refusals.load(std::sync::atomic::Ordering::SeqCst), 1);
        socket.close(None).await.unwrap();
        while socket.next().await.is_some() {}
        drop(socket);
        let mut served_after = String::new();
        for _ in 0..50 {
            served_after = plain().await;
            if !served_after.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(served_after.ends_with("plain"), "the place came back when the WebSocket closed: {served_after:?}");
        stop_tx.send(()).unwrap();
        served.await.unwrap().unwrap();
    }

    /// A client that opens a TLS connection and never finishes the handshake is cut off once the
    /// handshake timeout passes (not before), and one that finishes it is served.
    #[tokio::test]
    async fn a_tls_handshake_that_never_finishes_is_cut_off_at_its_timeout() {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let _ = rustls::crypto::ring::default_provider().install_default();
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let cert = CertificateDer::from(made.cert.der().to_vec());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.key_pair.serialize_der()));
        let mut config =
            rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(vec![cert.clone()], key).unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let router = axum::Router::new().route("/plain", axum::routing::get(|| async { "plain" }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let timeout = Duration::from_millis(400);
        let limits = ConnLimits { tls_handshake_timeout: timeout, ..ConnLimits::standard() };
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(serve(listener, router, Some(Arc::new(config)), limits, Arc::new(|_| {}), async {
            stop_rx.await.ok();
        }));

        let started = tokio::time::Instant::now();
        let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(10), silent.read(&mut byte)).await;
        let waited = started.elapsed();
        assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "closed, not answered: {read:?}");
        assert!(waited >= timeout, "not before the timeout: {waited:?}");
        assert!(waited < Duration::from_secs(5), "cut off near the timeout: {waited:?}");

        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert).unwrap();
        let client = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut tls = connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap();
        tls.write_all(b"GET /plain HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut answer = String::new();
        let _ = tls.read_to_string(&mut answer).await;
        assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("plain"), "{answer}");
        stop_tx.send(()).unwrap();
        served.await.unwrap().unwrap();
    }
}
