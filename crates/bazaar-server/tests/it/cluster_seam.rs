//! The seam a cluster plugs into, seen from one node: what it publishes after its own commits, what it does
//! with another node's signals (and that it never publishes those again), how the reconciler's resync wakes
//! its streams. (A key in flight on another node is answered 409 by the ledger's sequencer:
//! `bazaar-cli/tests/it/cluster.rs`.)

use crate::common;

use bazaar_server::cluster::{Cluster, Signal};
use common::{person, registry};
use serde_json::json;
use std::sync::{Arc, Mutex};

/// A cluster that records what this node publishes.
struct Recorder {
    published: Mutex<Vec<Signal>>,
}

#[async_trait::async_trait]
impl Cluster for Recorder {
    fn node(&self) -> &str {
        "recorder"
    }
    fn publish(&self, signal: Signal) {
        self.published.lock().unwrap().push(signal);
    }
    async fn holds(&self, _name: &str, _ttl: std::time::Duration) -> bool {
        true
    }
}

#[tokio::test]
async fn a_node_publishes_its_commits_applies_others_signals_without_echo_and_resyncs() {
    let r = registry().await;
    let recorder = Arc::new(Recorder { published: Mutex::default() });
    assert!(r.state.attach_cluster(recorder.clone()));
    let (ann, ben) = (person(&r, "ann").await, person(&r, "ben").await);
    let room = r.room(&ann, "floor", false).await;
    let (status, _) = r.post(&ben, &format!("/v1/channels/{room}/join"), json!({})).await;
    assert_eq!(status, 200);
    let message = r.say(&ann, &room, "lot 1").await;
    let position = message["position"].as_u64().unwrap();
    let published = recorder.published.lock().unwrap().clone();
    assert!(
        published
            .iter()
            .any(|s| matches!(s, Signal::Memberships { members } if members.iter().any(|m| m.as_str() == ben.id))),
        "ben's join is told to the other nodes: {published:?}"
    );
    assert!(
        published.iter().any(
            |s| matches!(s, Signal::Message { channel, position: p } if channel.as_str() == room && *p == position)
        ),
        "the post is told to the other nodes: {published:?}"
    );

    // Another node's signals move this node's streams and are never published again from here.
    let plane = r.state.plane().unwrap().clone();
    let told = recorder.published.lock().unwrap().len();
    let ben_id = bazaar_types::MemberId(ben.id.clone());
    let epoch = plane.epoch(&ben_id);
    let (mut wake, _following) = plane.follow(&ben_id);
    wake.borrow_and_update();
    bazaar_server::fanout::receive(&r.state, Signal::Memberships { members: vec![ben_id.clone()] });
    assert_eq!(plane.epoch(&ben_id), epoch + 1, "ben's streams reload their stints");
    assert!(wake.has_changed().unwrap(), "ben's streams wake");
    let channel = message["channel"].clone();
    let elsewhere = serde_json::from_value(json!({"kind": "message", "channel": channel, "position": position + 1}))
        .expect("a signal as it travels");
    bazaar_server::fanout::receive(&r.state, elsewhere);
    assert_eq!(plane.head(), position + 1, "the log head follows another node's commit");
    assert_eq!(recorder.published.lock().unwrap().len(), told, "nothing received is published again");

    // The reconciler's resync: the log moved without a signal; every stream wakes and reloads.
    wake.borrow_and_update();
    plane.resync(position + 5);
    assert_eq!(plane.head(), position + 5);
    assert!(wake.has_changed().unwrap());
    assert_eq!(plane.epoch(&ben_id), epoch + 2);
}

/// The notifier's batch (one notice per paid call under load) is told to the other nodes as one signal listing
/// every notice's (channel, position), not one signal per notice; such a signal from elsewhere moves this
/// node's log head.
#[tokio::test]
async fn a_notifier_batch_is_one_signal_to_the_other_nodes() {
    use bazaar_server::conversation::notices::notify_once;
    let r = registry().await;
    let recorder = Arc::new(Recorder { published: Mutex::default() });
    assert!(r.state.attach_cluster(recorder.clone()));
    let (buyer, shop) = common::buyer_and_shop(&r, 300).await;
    let (buying, selling) =
        (r.operator.with_credential(&buyer.credential), r.operator.with_credential(&shop.credential));
    for order in ["o-1", "o-2", "o-3"] {
        let token = buying.issue_token("shop", 100, order, "https://shop/linen").await.unwrap().body;
        selling.settle(&token.token, 100, order, None).await.unwrap();
    }
    let told = recorder.published.lock().unwrap().len();
    let pass = notify_once(&r.state).await.unwrap();
    assert!(pass.notices_written >= 3, "a notice per settlement: {}", pass.notices_written);
    let published: Vec<Signal> = recorder.published.lock().unwrap()[told..].to_vec();
    let batches: Vec<&Vec<_>> = published
        .iter()
        .filter_map(|s| if let Signal::Messages { messages } = s { Some(messages) } else { None })
        .collect();
    assert_eq!(batches.len(), 1, "one signal for the batch: {published:?}");
    assert_eq!(batches[0].len(), pass.notices_written, "every notice in it");
    assert!(batches[0].windows(2).all(|w| w[0].1 < w[1].1), "in commit order: {:?}", batches[0]);
    assert!(!published.iter().any(|s| matches!(s, Signal::Message { .. })), "no signal per notice: {published:?}");

    let plane = r.state.plane().unwrap().clone();
    let (channel, last) = batches[0].last().unwrap().clone();
    let elsewhere = Signal::Messages { messages: vec![(channel.clone(), last + 1), (channel, last + 2)] };
    bazaar_server::fanout::receive(&r.state, elsewhere);
    assert_eq!(plane.head(), last + 2, "the log head follows another node's batch");
}
