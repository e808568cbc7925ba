//! A node stopping, as its live sockets see it. HTTP connections are drained
//! by the accept loop; a WebSocket has left HTTP behind, so it is told here:
//! each socket holds a [`Ticket`] (a receiver of the node's stop signal),
//! [`Closing::begin`] makes every ticket's [`Ticket::stopping`] resolve (the
//! socket then sends a close frame, code 1001 "going away", and ends), and
//! [`Closing::drained`] waits until every ticket is dropped, so the process
//! exits after the close frames left.

use std::time::Duration;
use tokio::sync::watch;

/// WebSocket close code: the server is going away (RFC 6455, 7.4.1).
pub const CLOSE_GOING_AWAY: u16 = 1001;
/// How long a stopping node waits for its WebSockets to send their close frames and end.
pub const SOCKET_CLOSE_GRACE_MS: u64 = 2_000;

/// The node's stop signal for live sockets; its receivers are the open sockets' tickets.
pub struct Closing {
    stop: watch::Sender<bool>,
}

impl Default for Closing {
    fn default() -> Closing {
        Closing { stop: watch::channel(false).0 }
    }
}

/// One live socket's part in a stop: it resolves [`Ticket::stopping`] once the node stops.
pub struct Ticket {
    stop: watch::Receiver<bool>,
}

impl Closing {
    /// A ticket for a socket that is about to start.
    pub fn ticket(&self) -> Ticket {
        Ticket { stop: self.stop.subscribe() }
    }

    /// Tells every socket the node is stopping (and every socket opened after).
    pub fn begin(&self) {
        self.stop.send_replace(true);
    }

    /// Sockets holding a ticket now.
    pub fn open(&self) -> usize {
        self.stop.receiver_count()
    }

    /// Waits until every socket has ended, or `within` passed; true if they all ended.
    pub async fn drained(&self, within: Duration) -> bool {
        tokio::time::timeout(within, self.stop.closed()).await.is_ok()
    }
}

impl Ticket {
    /// Resolves once the node stops; never, if the node's state is gone without stopping.
    pub async fn stopping(&mut self) {
        if self.stop.wait_for(|stopping| *stopping).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tickets_learn_of_the_stop_and_the_drain_waits_for_them() {
        let closing = Closing::default();
        let mut early = closing.ticket();
        assert_eq!(closing.open(), 1);
        let waiting = tokio::time::timeout(Duration::from_millis(50), early.stopping()).await;
        assert!(waiting.is_err(), "nothing stops before begin");
        assert!(!closing.drained(Duration::from_millis(30)).await, "a socket still holds its ticket");
        closing.begin();
        early.stopping().await;
        let mut late = closing.ticket();
        late.stopping().await;
        drop((early, late));
        assert!(closing.drained(Duration::from_millis(500)).await);
        assert_eq!(closing.open(), 0);
    }
}
