//! The conversation plane over HTTP on the embedded stores: rooms, DMs and
//! membership by REST with their refusal codes; posting with mentions and
//! replies; history both ways; the poll inbox and attention; and the two live
//! transports (SSE and WebSocket) resuming from any cut point on the one
//! cursor with nothing lost, repeated or out of order, and nothing of a
//! private room reaching a non-member by any transport.

use futures::StreamExt;
use serde_json::{json, Value};
use std::time::Duration;
use tokio_tungstenite::tungstenite;

use crate::common;
use common::{agent_of, buyer_and_shop, person, registry, Person, Registry};

fn code(body: &Value) -> &str {
    body["code"].as_str().unwrap_or("")
}

#[tokio::test]
async fn rooms_dms_membership_posting_and_history_by_rest() {
    let r = registry().await;
    let (alice, bob) = (person(&r, "alice").await, person(&r, "bob").await);
    person(&r, "carol").await;
    let private = r.room(&alice, "deals", true).await;
    // Nobody joins a private room; only its owner adds, and only owners may.
    let (status, body) = r.post(&bob, &format!("/v1/channels/{private}/join"), json!({})).await;
    assert_eq!((status, code(&body)), (403, "private_room"));
    let (status, body) = r.get(&bob, &format!("/v1/channels/{private}")).await;
    assert_eq!((status, code(&body)), (403, "not_member"));
    let (status, body) = r.get(&bob, &format!("/v1/channels/{private}/messages")).await;
    assert_eq!((status, code(&body)), (403, "not_member"));
    let (status, body) = r.post(&alice, &format!("/v1/channels/{private}/members"), json!({"member": "bob"})).await;
    assert_eq!((status, body["role"].as_str()), (200, Some("member")), "{body}");
    let (status, body) = r.post(&bob, &format!("/v1/channels/{private}/members"), json!({"member": "carol"})).await;
    assert_eq!((status, code(&body)), (403, "not_owner"));
    let (status, body) =
        r.post(&alice, &format!("/v1/channels/{private}/members"), json!({"member": "nobody-here"})).await;
    assert_eq!((status, code(&body)), (404, "member_not_found"));

    // A mention is resolved to the member at send time, and wakes her.
    let first = r.say(&bob, &private, "@alice the price is 40, and @nobody-here is plain text").await;
    assert_eq!(first["mentions"], json!([alice.id]));
    assert_eq!(first["handle"], "bob");
    assert_eq!(first["seq"], 2, "seq 1 is the line saying alice added bob");
    let (_, attention) = r.get(&alice, "/v1/attention").await;
    assert_eq!(attention, json!([{"channel": private, "unread": 1, "wakes": 1}]));
    // A reply names its author and wakes him; posting marks the channel read for its author.
    let (status, reply) =
        r.post(&alice, &format!("/v1/channels/{private}/messages"), json!({"body": "agreed", "reply_to": 2})).await;
    assert_eq!(status, 201, "{reply}");
    assert_eq!(reply["reply_to"], json!({"seq": 2, "author": bob.id}));
    let (status, body) =
        r.post(&alice, &format!("/v1/channels/{private}/messages"), json!({"body": "x", "reply_to": 99})).await;
    assert_eq!((status, code(&body)), (404, "reply_not_found"));
    let (_, attention) = r.get(&alice, "/v1/attention").await;
    assert_eq!(attention, json!([]));
    let (_, attention) = r.get(&bob, "/v1/attention").await;
    assert_eq!(attention, json!([{"channel": private, "unread": 1, "wakes": 1}]));
    let (_, mine) = r.get(&bob, "/v1/channels").await;
    assert_eq!(mine[0]["channel"], private.as_str());
    assert_eq!((mine[0]["unread"].as_u64(), mine[0]["wakes"].as_u64()), (Some(1), Some(1)), "{mine}");
    let (status, _) = r.post(&bob, &format!("/v1/channels/{private}/read"), json!({"seq": 3})).await;
    assert_eq!(status, 200);
    let (_, attention) = r.get(&bob, "/v1/attention").await;
    assert_eq!(attention, json!([]));
    let (status, body) = r.post(&alice, &format!("/v1/channels/{private}/read"), json!({"seq": 9})).await;
    assert_eq!((status, code(&body)), (400, "seq_out_of_range"));
}

#[tokio::test]
async fn history_pages_both_ways_and_bad_input_carries_codes() {
    let r = registry().await;
    let (alice, bob, carol) = (person(&r, "alice").await, person(&r, "bob").await, person(&r, "carol").await);
    let private = r.room(&alice, "deals", true).await;
    r.post(&alice, &format!("/v1/channels/{private}/members"), json!({"member": "bob"})).await;
    // Seq 1 is the line saying alice added bob.
    r.say(&bob, &private, "two").await;
    // History pages both ways, oldest first.
    for n in 3..=10 {
        r.say(&alice, &private, &format!("line {n}")).await;
    }
    let seqs = |page: &Value| page.as_array().unwrap().iter().map(|m| m["seq"].as_u64().unwrap()).collect::<Vec<_>>();
    let (_, latest) = r.get(&bob, &format!("/v1/channels/{private}/messages?limit=3")).await;
    assert_eq!(seqs(&latest), vec![8, 9, 10]);
    let (_, older) = r.get(&bob, &format!("/v1/channels/{private}/messages?before=8&limit=3")).await;
    assert_eq!(seqs(&older), vec![5, 6, 7]);
    let (_, newer) = r.get(&bob, &format!("/v1/channels/{private}/messages?after=8")).await;
    assert_eq!(seqs(&newer), vec![9, 10]);
    let (status, body) = r.get(&bob, &format!("/v1/channels/{private}/messages?before=3&after=1")).await;
    assert_eq!((status, code(&body)), (400, "invalid_request"));
    let (status, body) = r.get(&bob, &format!("/v1/channels/{private}/messages?limit=0")).await;
    assert_eq!((status, code(&body)), (400, "page_invalid"));
    let (status, body) = r.get(&bob, "/v1/inbox?after=minus-one").await;
    assert_eq!((status, code(&body)), (400, "invalid_request"));

    // Bad bodies carry the plane's codes.
    let long = "x".repeat(bazaar_types::limits::MESSAGE_BODY_BYTES_MAX + 1);
    let (status, body) = r.post(&bob, &format!("/v1/channels/{private}/messages"), json!({"body": long})).await;
    assert_eq!((status, code(&body)), (400, "body_too_long"));
    let (status, body) = r.post(&bob, &format!("/v1/channels/{private}/messages"), json!({"body": "  "})).await;
    assert_eq!((status, code(&body)), (400, "body_empty"));
    let crowd: String =
        (0..=bazaar_types::limits::MESSAGE_MENTION_CANDIDATES_MAX).map(|n| format!("@h{n:03} ")).collect();
    let (status, body) = r.post(&bob, &format!("/v1/channels/{private}/messages"), json!({"body": crowd})).await;
    assert_eq!((status, code(&body)), (400, "too_many_mentions"));
    let (status, body) = r.post(&carol, &format!("/v1/channels/{private}/messages"), json!({"body": "hi"})).await;
    assert_eq!((status, code(&body)), (403, "not_member"));
    let (status, body) = r.post(&carol, "/v1/channels/ch_nope/messages", json!({"body": "hi"})).await;
    assert_eq!((status, code(&body)), (404, "channel_not_found"));
}

#[tokio::test]
async fn dms_are_one_per_pair_and_public_rooms_are_listed_joined_and_left() {
    let r = registry().await;
    let (alice, carol) = (person(&r, "alice").await, person(&r, "carol").await);
    person(&r, "bob").await;
    let private = r.room(&alice, "deals", true).await;
    r.post(&alice, &format!("/v1/channels/{private}/members"), json!({"member": "bob"})).await;
    // A DM is one channel whichever side opens it; a DM is not joined or left.
    let (status, dm) = r.post(&carol, "/v1/dms", json!({"with": "alice"})).await;
    assert_eq!(status, 200, "{dm}");
    let (_, again) = r.post(&alice, "/v1/dms", json!({"with": carol.id})).await;
    assert_eq!(dm["id"], again["id"]);
    let (status, body) = r.post(&carol, "/v1/dms", json!({"with": "carol"})).await;
    assert_eq!((status, code(&body)), (400, "dm_with_self"));
    let (status, body) = r.post(&carol, &format!("/v1/channels/{}/leave", dm["id"].as_str().unwrap()), json!({})).await;
    assert_eq!((status, code(&body)), (409, "direct_message"));

    // Public rooms are listed and joined; leaving stops delivery.
    let lobby = r.room(&alice, "lobby", false).await;
    let (_, rooms) = r.get(&carol, "/v1/rooms").await;
    assert_eq!(
        rooms.as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect::<Vec<_>>(),
        vec![lobby.as_str()]
    );
    let (status, _) = r.post(&carol, &format!("/v1/channels/{lobby}/join"), json!({})).await;
    assert_eq!(status, 200);
    let (status, body) = r.post(&carol, &format!("/v1/channels/{lobby}/join"), json!({})).await;
    assert_eq!((status, code(&body)), (409, "already_member"));
    let heard = r.say(&alice, &lobby, "welcome").await;
    r.post(&carol, &format!("/v1/channels/{lobby}/leave"), json!({})).await;
    let unheard = r.say(&alice, &lobby, "after you left").await;
    let carol_got = r.polled(&carol).await;
    assert!(carol_got.contains(&heard["position"].as_u64().unwrap()));
    assert!(!carol_got.contains(&unheard["position"].as_u64().unwrap()));
}

#[tokio::test]
async fn an_agent_speaks_for_its_owner_without_its_owners_standing() {
    let r = registry().await;
    let dana = person(&r, "dana").await;
    let helper = agent_of(&r, &dana, "dana-helper").await;
    let stranger = person(&r, "stranger").await;
    let room = r.room(&dana, "dana's desk", true).await;
    // The agent is not in its owner's room and cannot add anyone to it.
    let (status, body) = r.post(&helper, &format!("/v1/channels/{room}/members"), json!({"member": "stranger"})).await;
    assert_eq!((status, code(&body)), (403, "not_member"));
    r.post(&dana, &format!("/v1/channels/{room}/members"), json!({"member": "dana-helper"})).await;
    let (status, body) = r.post(&helper, &format!("/v1/channels/{room}/members"), json!({"member": "stranger"})).await;
    assert_eq!((status, code(&body)), (403, "not_owner"));
    let said = r.say(&helper, &room, "on it").await;
    assert_eq!(said["authored_by"], helper.id.as_str());
    assert_eq!(said["on_behalf_of"], dana.id.as_str());
    let said = r.say(&dana, &room, "thanks").await;
    assert_eq!(said["on_behalf_of"], Value::Null);
    let (_, dm) = r.post(&stranger, "/v1/dms", json!({"with": "dana-helper"})).await;
    assert_eq!(dm["kind"], "dm");
}

/// A tiny deterministic generator for cut points (no OS randomness in tests).
struct SplitMix(u64);
impl SplitMix {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn open_socket(r: &Registry, who: &Person, since: u64) -> Socket {
    open_body(r, who, &format!("since={since}")).await
}

/// An inbox WebSocket with the query `query` (`since=…&body=…`).
async fn open_body(r: &Registry, who: &Person, query: &str) -> Socket {
    use tungstenite::client::IntoClientRequest;
    let url = format!("{}/v1/inbox/ws?{query}", r.url.replace("http://", "ws://"));
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert("authorization", format!("Bearer {}", who.credential).parse().unwrap());
    tokio_tungstenite::connect_async(request).await.unwrap().0
}

/// The next message frame's cursor (skipping pings).
async fn next_frame(socket: &mut Socket) -> Value {
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(10), socket.next()).await.expect("a frame in time");
        match frame.expect("socket open").unwrap() {
            tungstenite::Message::Text(text) => return serde_json::from_str(&text).unwrap(),
            tungstenite::Message::Close(close) => panic!("closed: {close:?}"),
            _ => {}
        }
    }
}

/// SSE frames from a streaming response: (id, data) of each `message` event.
struct SseReader {
    response: reqwest::Response,
    buffer: String,
}

impl SseReader {
    async fn open(r: &Registry, who: &Person, last_event_id: Option<u64>) -> SseReader {
        let mut request = r.http.get(format!("{}/v1/inbox/sse", r.url)).bearer_auth(&who.credential);
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id.to_string());
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        SseReader { response, buffer: String::new() }
    }

    async fn next_message(&mut self) -> (u64, Value) {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let field = |name: &str| {
                    block.lines().find_map(|line| line.strip_prefix(name).map(|v| v.trim_start().to_string()))
                };
                if field("event:").as_deref() == Some("message") {
                    let id = field("id:").unwrap().parse().unwrap();
                    return (id, serde_json::from_str(&field("data:").unwrap()).unwrap());
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.response.chunk()).await.expect("in time");
            self.buffer.push_str(std::str::from_utf8(&chunk.unwrap().expect("stream open")).unwrap());
        }
    }
}

/// Both live transports, cut at many points while messages keep arriving:
/// each reconnect from the last cursor seen yields exactly the rest of what
/// polling returns, in order.
#[tokio::test]
async fn live_streams_resume_from_any_cut_with_nothing_lost_or_repeated() {
    let r = registry().await;
    let (ann, ben) = (person(&r, "ann").await, person(&r, "ben").await);
    let room = r.room(&ann, "busy", false).await;
    r.post(&ben, &format!("/v1/channels/{room}/join"), json!({})).await;
    let (_, dm) = r.post(&ann, "/v1/dms", json!({"with": "ben"})).await;
    let dm = dm["id"].as_str().unwrap().to_string();
    let elsewhere = r.room(&ann, "ben is not here", false).await;
    const TOTAL: u64 = 120;
    let mut rng = SplitMix(7);
    let (mut ws_seen, mut sse_seen): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
    // Ben's join line is the first thing delivered to him.
    let mut posted = 0;
    let mut socket = open_socket(&r, &ben, 0).await;
    ws_seen.push(next_frame(&mut socket).await["cursor"].as_u64().unwrap());
    let mut sse = SseReader::open(&r, &ben, None).await;
    sse_seen.push(sse.next_message().await.0);
    // Ben is owed his join line, the DM's birth line and every post to him.
    let owed = |posted: u64, seen: &Vec<u64>| posted + 2 - seen.len() as u64;
    while posted < TOTAL || owed(posted, &ws_seen) > 0 || owed(posted, &sse_seen) > 0 {
        // Post a few (some to a room ben is not in), then read a few from each transport.
        for _ in 0..rng.below(4) {
            if posted == TOTAL {
                break;
            }
            let channel = if posted % 3 == 0 { &dm } else { &room };
            r.say(&ann, channel, &format!("m{posted}")).await;
            r.say(&ann, &elsewhere, "not for ben").await;
            posted += 1;
        }
        for _ in 0..rng.below(5).min(owed(posted, &ws_seen)) {
            let frame = next_frame(&mut socket).await;
            assert_eq!(frame["type"], "message");
            ws_seen.push(frame["cursor"].as_u64().unwrap());
        }
        for _ in 0..rng.below(5).min(owed(posted, &sse_seen)) {
            let (id, message) = sse.next_message().await;
            assert_eq!(message["position"].as_u64(), Some(id));
            sse_seen.push(id);
        }
        // Cut each transport now and then, resuming from the last cursor it delivered.
        if rng.below(3) == 0 {
            socket.close(None).await.ok();
            socket = open_socket(&r, &ben, ws_seen.last().copied().unwrap_or(0)).await;
        }
        if rng.below(3) == 0 {
            sse = SseReader::open(&r, &ben, Some(sse_seen.last().copied().unwrap_or(0))).await;
        }
    }
    let polled = r.polled(&ben).await;
    assert_eq!(polled.len() as u64, TOTAL + 2, "the posts, ben's own join line and the DM's birth line");
    assert_eq!(ws_seen, polled, "WebSocket");
    assert_eq!(sse_seen, polled, "SSE");
}

/// The position of a DM's birth line (sealed or not), read by one of its members.
async fn birth_line(r: &Registry, reader: &Person, dm: &str) -> u64 {
    let (_, first) = r.get(reader, &format!("/v1/channels/{dm}/messages?after=0&limit=1")).await;
    assert_eq!(first[0]["kind"]["line"], "sealing", "{first}");
    first[0]["position"].as_u64().unwrap()
}

#[tokio::test]
async fn a_private_room_reaches_no_non_member_by_any_transport() {
    let r = registry().await;
    let (owner, insider, outsider) =
        (person(&r, "owner").await, person(&r, "insider").await, person(&r, "outsider").await);
    let secret = r.room(&owner, "secret", true).await;
    r.post(&owner, &format!("/v1/channels/{secret}/members"), json!({"member": "insider"})).await;
    let mut socket = open_socket(&r, &outsider, 0).await;
    let mut sse = SseReader::open(&r, &outsider, None).await;
    let mut insider_socket = open_socket(&r, &insider, 0).await;
    let hidden = r.say(&owner, &secret, "the plan").await;
    let (_, dm) = r.post(&owner, "/v1/dms", json!({"with": "outsider"})).await;
    let visible = r.say(&owner, dm["id"].as_str().unwrap(), "hello outsider").await;
    let birth = birth_line(&r, &outsider, dm["id"].as_str().unwrap()).await;
    // The outsider's first deliveries on each transport are the DM's, never the room's line.
    assert_eq!(next_frame(&mut socket).await["cursor"], birth);
    assert_eq!(next_frame(&mut socket).await["cursor"], visible["position"]);
    assert_eq!(sse.next_message().await.0, birth);
    assert_eq!(sse.next_message().await.0, visible["position"].as_u64().unwrap());
    assert_eq!(r.polled(&outsider).await, vec![birth, visible["position"].as_u64().unwrap()]);
    let added = next_frame(&mut insider_socket).await;
    assert_eq!(added["message"]["kind"]["line"], "joined", "the insider first hears it was added");
    assert_eq!(next_frame(&mut insider_socket).await["cursor"], hidden["position"]);
    // The member list shows who listens by which transport.
    let (_, view) = r.get(&owner, &format!("/v1/channels/{secret}")).await;
    let listening = |view: &Value, id: &str| {
        view["members"].as_array().unwrap().iter().find(|m| m["member"] == id).unwrap()["listening"].clone()
    };
    assert_eq!(listening(&view, &insider.id), json!(["websocket"]));
    assert_eq!(listening(&view, &owner.id), json!([]));
    insider_socket.close(None).await.ok();
    drop(insider_socket);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, view) = r.get(&owner, &format!("/v1/channels/{secret}")).await;
        if listening(&view, &insider.id) == json!([]) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "a closed socket still shows as listening");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(r.state.plane().is_ok());
}

#[tokio::test]
async fn a_member_holds_a_bounded_number_of_streams() {
    let r = registry().await;
    let eve = person(&r, "eve").await;
    let mut open = Vec::new();
    for _ in 0..bazaar_types::limits::STREAM_CONNECTIONS_PER_MEMBER_MAX {
        open.push(open_socket(&r, &eve, 0).await);
    }
    let (status, body) = r.get(&eve, "/v1/inbox/sse").await;
    assert_eq!((status, code(&body)), (429, "too_many_streams"));
    let (status, body) = r.get(&eve, "/v1/inbox/sse?since=abc").await;
    assert_eq!((status, code(&body)), (400, "invalid_request"));
    drop(open);
}

#[tokio::test]
async fn an_oversize_client_frame_closes_the_socket_with_a_reason() {
    use futures::SinkExt;
    let r = registry().await;
    let fay = person(&r, "fay").await;
    let mut socket = open_socket(&r, &fay, 0).await;
    let big = "x".repeat(bazaar_types::limits::STREAM_CLIENT_FRAME_BYTES_MAX + 1);
    socket.send(tungstenite::Message::Text(big.into())).await.unwrap();
    let close = loop {
        match tokio::time::timeout(Duration::from_secs(10), socket.next()).await.expect("in time") {
            Some(Ok(tungstenite::Message::Close(frame))) => break frame.expect("a close frame with a code"),
            Some(Ok(_)) => continue,
            other => panic!("expected a close frame, got {other:?}"),
        }
    };
    assert_eq!(u16::from(close.code), 1009);
    assert!(close.reason.contains("since=0"), "{}", close.reason);
    // The server is still serving.
    let (status, _) = r.get(&fay, "/v1/attention").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn owners_remove_and_promote_and_messages_change_by_rest() {
    let r = registry().await;
    let (alice, bob, carol) = (person(&r, "alice").await, person(&r, "bob").await, person(&r, "carol").await);
    let room = r.room(&alice, "desk", false).await;
    for who in [&bob, &carol] {
        r.post(who, &format!("/v1/channels/{room}/join"), json!({})).await;
    }
    let (status, body) = r.post(&alice, &format!("/v1/channels/{room}/leave"), json!({})).await;
    assert_eq!((status, code(&body)), (409, "last_owner"));
    let role_of_bob = format!("/v1/channels/{room}/members/bob/role");
    let (status, body) = r.call(&alice, reqwest::Method::PUT, &role_of_bob, Some(json!({"role": "owner"}))).await;
    assert_eq!((status, body["role"].as_str()), (200, Some("owner")), "{body}");
    let (status, body) = r.call(&alice, reqwest::Method::PUT, &role_of_bob, Some(json!({"role": "king"}))).await;
    assert_eq!((status, code(&body)), (400, "invalid_request"));
    let (bob_path, carol_path) =
        (format!("/v1/channels/{room}/members/bob"), format!("/v1/channels/{room}/members/carol"));
    let (status, body) = r.call(&carol, reqwest::Method::DELETE, &bob_path, None).await;
    assert_eq!((status, code(&body)), (403, "not_owner"));
    let (status, body) = r.call(&bob, reqwest::Method::DELETE, &carol_path, None).await;
    assert_eq!((status, body["left_after"].is_u64()), (200, true), "{body}");
    let (status, body) = r.post(&carol, &format!("/v1/channels/{room}/messages"), json!({"body": "still here?"})).await;
    assert_eq!((status, code(&body)), (403, "not_member"));

    // A keyed post retried is one message; the same key for another body is refused.
    let keyed = |body: &str| {
        r.http
            .post(format!("{}/v1/channels/{room}/messages", r.url))
            .bearer_auth(&alice.credential)
            .header("idempotency-key", "quote-7")
            .json(&json!({ "body": body }))
            .send()
    };
    let first: Value = keyed("quote: 40").await.unwrap().json().await.unwrap();
    let again: Value = keyed("quote: 40").await.unwrap().json().await.unwrap();
    assert_eq!(first, again);
    let conflict = keyed("quote: 45").await.unwrap();
    assert_eq!(conflict.status(), 422);
    let seq = first["seq"].as_u64().unwrap();

    // Reactions, edits and deletions are messages of their own.
    let message = format!("/v1/channels/{room}/messages/{seq}");
    let (status, reaction) = r.post(&bob, &format!("{message}/reactions"), json!({"emoji": "👍"})).await;
    assert_eq!((status, reaction["kind"].clone()), (201, json!({"type": "reaction", "to": seq, "removed": false})));
    let (status, body) = r.call(&bob, reqwest::Method::PATCH, &message, Some(json!({"body": "mine now"}))).await;
    assert_eq!((status, code(&body)), (403, "not_author"));
    let (status, edit) = r.call(&alice, reqwest::Method::PATCH, &message, Some(json!({"body": "quote: 38"}))).await;
    assert_eq!(
        (status, edit["kind"].clone(), edit["body"].as_str()),
        (201, json!({"type": "edit", "of": seq}), Some("quote: 38"))
    );
    let (status, deletion) = r.call(&bob, reqwest::Method::DELETE, &message, None).await;
    assert_eq!((status, deletion["kind"].clone()), (201, json!({"type": "deletion", "of": seq})), "an owner deletes");
    let (status, body) = r.post(&bob, &format!("{message}/reactions"), json!({"emoji": "👎"})).await;
    assert_eq!((status, code(&body)), (409, "message_deleted"));
    let (_, history) = r.get(&alice, &format!("/v1/channels/{room}/messages?after={}", seq - 1)).await;
    let kinds: Vec<&str> = history.as_array().unwrap().iter().map(|m| m["kind"]["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, vec!["text", "reaction", "edit", "deletion"]);
    assert_eq!(history[0]["body"], "quote: 40", "history keeps what was said");
}

/// A stream delivers from the node's memory while it can; it must still see
/// what reaches its member through a membership made after it connected: a
/// DM opened to it, a room it is added to, a room it creates.
#[tokio::test]
async fn a_live_stream_sees_channels_its_member_enters_after_connecting() {
    let r = registry().await;
    let (gil, hal) = (person(&r, "gil").await, person(&r, "hal").await);
    let warm = r.room(&hal, "warm-up", false).await;
    r.post(&gil, &format!("/v1/channels/{warm}/join"), json!({})).await;
    let mut socket = open_socket(&r, &gil, 0).await;
    let mut expected = vec![next_frame(&mut socket).await["cursor"].as_u64().unwrap()];
    // In memory from here: a post in a room gil is in.
    expected.push(r.say(&hal, &warm, "hello").await["position"].as_u64().unwrap());
    // A DM opened to gil after it connected.
    let (_, dm) = r.post(&hal, "/v1/dms", json!({"with": "gil"})).await;
    expected.push(birth_line(&r, &gil, dm["id"].as_str().unwrap()).await);
    expected.push(r.say(&hal, dm["id"].as_str().unwrap(), "psst").await["position"].as_u64().unwrap());
    // A private room gil is added to.
    let private = r.room(&hal, "private", true).await;
    let (_, added) = r.post(&hal, &format!("/v1/channels/{private}/members"), json!({"member": "gil"})).await;
    expected.push(added["joined_after"].as_u64().unwrap() + 1);
    expected.push(r.say(&hal, &private, "welcome").await["position"].as_u64().unwrap());
    // A room gil creates, and a post in it by someone who joins.
    let own = r.room(&gil, "gil's", false).await;
    let (_, joined) = r.post(&hal, &format!("/v1/channels/{own}/join"), json!({})).await;
    expected.push(joined["joined_after"].as_u64().unwrap() + 1);
    expected.push(r.say(&hal, &own, "nice room").await["position"].as_u64().unwrap());
    // Something gil must not see, then something it must.
    r.say(&hal, &r.room(&hal, "not gil's", false).await, "elsewhere").await;
    expected.push(r.say(&hal, &warm, "last").await["position"].as_u64().unwrap());
    let mut seen = Vec::new();
    while seen.len() < expected.len() - 1 {
        seen.push(next_frame(&mut socket).await["cursor"].as_u64().unwrap());
    }
    assert_eq!(seen, expected[1..].to_vec());
    assert_eq!(r.polled(&gil).await, expected, "the stream and the poll agree");
}

/// The compromise ledger's first entries, shown: what was said (a DM too) is
/// in the plane's database files in the clear, and a member who joins a room
/// later reads what was said before it joined.
#[tokio::test]
async fn what_was_said_is_stored_readable() {
    let r = registry().await;
    let (ivy, jon) = (person(&r, "ivy").await, person(&r, "jon").await);
    let (_, dm) = r.post(&ivy, "/v1/dms", json!({"with": "jon"})).await;
    let marker = "the-floor-is-2400-zq";
    r.say(&ivy, dm["id"].as_str().unwrap(), marker).await;
    let found = std::fs::read_dir(r.dir()).unwrap().filter_map(Result::ok).any(|file| {
        let name = file.file_name().to_string_lossy().to_string();
        name.starts_with("c.db")
            && std::fs::read(file.path()).unwrap().windows(marker.len()).any(|w| w == marker.as_bytes())
    });
    assert!(found, "the DM's text is in the database files as written");
    let lobby = r.room(&ivy, "lobby", false).await;
    r.say(&ivy, &lobby, "said before jon came").await;
    r.post(&jon, &format!("/v1/channels/{lobby}/join"), json!({})).await;
    let (_, history) = r.get(&jon, &format!("/v1/channels/{lobby}/messages")).await;
    assert!(history.as_array().unwrap().iter().any(|m| m["body"] == "said before jon came"));
}

/// A post wakes only the streams of members in its channel (and a
/// membership change wakes the member's own): a node full of idle sockets
/// costs a post in another room nothing.
#[tokio::test]
async fn a_post_wakes_only_the_streams_of_members_in_its_channel() {
    let r = registry().await;
    let (ada, bob) = (person(&r, "ada").await, person(&r, "bob").await);
    let hers = r.room(&ada, "ada's", false).await;
    let elsewhere = r.room(&bob, "bob's", false).await;
    let plane = r.state.plane().unwrap().clone();
    let ada_id = bazaar_types::MemberId(ada.id.clone());
    let (mut wake, _following) = plane.follow(&ada_id);
    plane.following(&ada_id, vec![bazaar_conversation::ChannelId(hers.clone())]);
    wake.borrow_and_update();
    r.say(&bob, &elsewhere, "not for ada").await;
    assert!(!wake.has_changed().unwrap(), "a post in a room ada is not in does not wake her stream");
    r.post(&bob, &format!("/v1/channels/{hers}/join"), json!({})).await;
    assert!(wake.has_changed().unwrap(), "bob's join line in ada's room wakes her");
    wake.borrow_and_update();
    r.say(&bob, &hers, "for ada").await;
    assert!(wake.has_changed().unwrap(), "a post in her room wakes her");
    wake.borrow_and_update();
    r.post(&bob, "/v1/dms", json!({"with": "ada"})).await;
    assert!(wake.has_changed().unwrap(), "a DM opened to her changes her memberships and wakes her");
    // And the stream itself still delivers what is hers, from any cursor.
    let mut socket = open_socket(&r, &ada, 0).await;
    let mut seen = Vec::new();
    let polled = r.polled(&ada).await;
    while seen.len() < polled.len() {
        seen.push(next_frame(&mut socket).await["cursor"].as_u64().unwrap());
    }
    assert_eq!(seen, polled);
}

/// The next frame carrying a text message whose body is `words`.
async fn frame_saying(socket: &mut Socket, words: &str) -> Value {
    loop {
        let frame = next_frame(socket).await;
        if frame["message"]["body"] == words {
            return frame;
        }
    }
}

/// Bodies: one member, two processes on one credential. Both see every
/// event; exactly one is named to answer each that addresses the member;
/// when the answering one is killed, the other answers the next event.
#[tokio::test]
async fn two_bodies_see_everything_and_exactly_one_answers_each_event() {
    let r = registry().await;
    let (ivy, jon) = (person(&r, "ivy").await, person(&r, "jon").await);
    let (_, dm) = r.post(&jon, "/v1/dms", json!({"with": "ivy"})).await;
    let dm = dm["id"].as_str().unwrap().to_string();
    let lobby = r.room(&jon, "lobby", false).await;
    r.post(&ivy, &format!("/v1/channels/{lobby}/join"), json!({})).await;
    let mut daemon = open_body(&r, &ivy, "since=0&body=daemon").await;
    let mut bench = open_body(&r, &ivy, "since=0&body=workbench").await;
    r.say(&jon, &dm, "first").await;
    let (a, b) = (frame_saying(&mut daemon, "first").await, frame_saying(&mut bench, "first").await);
    let holder = a["answer_by"].as_str().unwrap().to_string();
    assert_eq!(b["answer_by"], holder, "both bodies are told the same answerer");
    assert!(holder == "daemon" || holder == "workbench");
    // Room chatter that does not address ivy names no answerer.
    r.say(&jon, &lobby, "chatter").await;
    let (a, b) = (frame_saying(&mut daemon, "chatter").await, frame_saying(&mut bench, "chatter").await);
    assert!(a.get("answer_by").is_none() && b.get("answer_by").is_none(), "{a} {b}");
    // The answering body is killed (its connection dropped, no close frame).
    let (survivor_name, mut survivor) = if holder == "daemon" {
        drop(daemon);
        ("workbench", bench)
    } else {
        drop(bench);
        ("daemon", daemon)
    };
    let ivy_id = bazaar_types::MemberId(ivy.id.clone());
    let plane = r.state.plane().unwrap().clone();
    for _ in 0..200 {
        if plane.streams_of(&ivy_id) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(plane.streams_of(&ivy_id), 1, "the server saw the killed body go");
    let started = std::time::Instant::now();
    r.say(&jon, &dm, "@ivy second").await;
    let frame = frame_saying(&mut survivor, "@ivy second").await;
    assert_eq!(frame["answer_by"], survivor_name, "the survivor answers the next event");
    assert!(started.elapsed() < Duration::from_secs(bazaar_types::limits::BODY_LEASE_TTL_S));
    // A third body joins; the lease lapses unrenewed; the next event still has exactly one answerer.
    let mut phone = open_body(&r, &ivy, "since=0&body=phone").await;
    r.clock.advance_s(bazaar_types::limits::BODY_LEASE_TTL_S + 1);
    r.say(&jon, &dm, "third").await;
    let (a, b) = (frame_saying(&mut survivor, "third").await, frame_saying(&mut phone, "third").await);
    assert_eq!(a["answer_by"], b["answer_by"]);
    let (_, answers) = r.get(&ivy, "/v1/answers").await;
    let answered: Vec<(u64, String)> = answers
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["position"].as_u64().unwrap(), a["body"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(answered.len(), 3, "one answer per addressed event: {answers}");
    assert_eq!(answered[0].1, holder);
    assert_eq!(answered[1].1, survivor_name);
    assert_eq!(answered[2].1, a["answer_by"].as_str().unwrap());
    // A body's name is checked.
    use tungstenite::client::IntoClientRequest;
    let url = format!("{}/v1/inbox/ws?body=Bad%20Name", r.url.replace("http://", "ws://"));
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert("authorization", format!("Bearer {}", ivy.credential).parse().unwrap());
    let refused = tokio_tungstenite::connect_async(request).await.unwrap_err();
    assert!(refused.to_string().contains("400"), "{refused}");
}

/// The meter counts what each transport delivered to a member today, and
/// the same after the node adds its counts to the store.
#[tokio::test]
async fn the_meter_counts_deliveries_by_transport() {
    let r = registry().await;
    let (ivy, jon) = (person(&r, "ivy").await, person(&r, "jon").await);
    let mut socket = open_socket(&r, &ivy, 0).await;
    let mut sse = SseReader::open(&r, &ivy, None).await;
    let (_, dm) = r.post(&jon, "/v1/dms", json!({"with": "ivy"})).await;
    let dm = dm["id"].as_str().unwrap().to_string();
    r.say(&jon, &dm, "one").await;
    r.say(&jon, &dm, "two").await;
    for _ in 0..3 {
        next_frame(&mut socket).await;
        sse.next_message().await;
    }
    assert_eq!(r.polled(&ivy).await.len(), 3, "the DM's birth line and two posts");
    let expected = json!({"websocket": 3, "sse": 3, "poll": 3, "webhook": 0});
    let (status, meter) = r.get(&ivy, "/v1/meter").await;
    assert_eq!((status, &meter["delivered"]), (200, &expected), "{meter}");
    assert_eq!(meter["day"].as_str().unwrap().len(), 10);
    bazaar_server::conversation::meter::flush_once(&r.state).await.unwrap();
    let (_, flushed) = r.get(&ivy, "/v1/meter").await;
    assert_eq!(flushed["delivered"], expected, "the same once in the store");
    let day = meter["day"].as_str().unwrap().to_string();
    let (_, same_day) = r.get(&ivy, &format!("/v1/meter?day={day}")).await;
    assert_eq!(same_day["delivered"], expected);
    let (_, other_day) = r.get(&ivy, "/v1/meter?day=2020-01-01").await;
    assert_eq!(other_day["delivered"]["websocket"], 0);
    let (status, refused) = r.get(&ivy, "/v1/meter?day=yesterday").await;
    assert_eq!((status, refused["code"].as_str()), (400, Some("invalid_request")));
    let (_, jons) = r.get(&jon, "/v1/meter").await;
    assert_eq!(jons["delivered"]["websocket"], 0, "each member's own");
}

/// A rename reaches the member's channels as a line, through the notifier
/// (which reads the ledger), once; what was said before keeps its handle.
#[tokio::test]
async fn a_rename_is_a_line_in_the_members_channels() {
    use bazaar_server::conversation::notices::notify_once;
    let r = registry().await;
    let (ada, bob) = (person(&r, "ada").await, person(&r, "bob").await);
    let room = r.room(&bob, "workshop", false).await;
    r.post(&ada, &format!("/v1/channels/{room}/join"), json!({})).await;
    let before = r.say(&ada, &room, "hello from ada").await;
    let body = json!({"handle": "ada-lovelace"});
    let (status, renamed) =
        r.call(&ada, reqwest::Method::PUT, &format!("/v1/members/{}/handle", ada.id), Some(body)).await;
    assert_eq!(status, 200, "{renamed}");
    notify_once(&r.state).await.unwrap();
    notify_once(&r.state).await.unwrap();
    let (_, history) = r.get(&bob, &format!("/v1/channels/{room}/messages")).await;
    let lines: Vec<&Value> = history.as_array().unwrap().iter().filter(|m| m["kind"]["line"] == "renamed").collect();
    assert_eq!(lines.len(), 1, "once: {history}");
    assert_eq!(
        (lines[0]["kind"]["from"].as_str(), lines[0]["kind"]["to"].as_str()),
        (Some("ada"), Some("ada-lovelace"))
    );
    let earlier = history.as_array().unwrap().iter().find(|m| m["seq"] == before["seq"]).unwrap();
    assert_eq!(earlier["handle"], "ada", "a message keeps the handle it was posted under");
}

/// An owner watches the rooms its agents are in (read-only): their list and
/// their history, as the agent; nobody else may read as the agent.
#[tokio::test]
async fn an_owner_reads_the_rooms_its_agent_is_in() {
    let r = registry().await;
    let (hotel, maker) = (person(&r, "hotel").await, person(&r, "maker").await);
    let concierge = agent_of(&r, &hotel, "concierge").await;
    let (_, dm) = r.post(&maker, "/v1/dms", json!({"with": "concierge"})).await;
    let dm = dm["id"].as_str().unwrap().to_string();
    r.say(&maker, &dm, "40 per crate?").await;
    let (status, theirs) = r.get(&hotel, "/v1/channels?as=concierge").await;
    assert_eq!(status, 200, "{theirs}");
    assert_eq!(theirs[0]["channel"], dm.as_str());
    assert_eq!(theirs[0]["unread"], 1);
    let (status, history) = r.get(&hotel, &format!("/v1/channels/{dm}/messages?as=concierge")).await;
    assert_eq!(status, 200, "{history}");
    assert!(history.as_array().unwrap().iter().any(|m| m["body"] == "40 per crate?"));
    // The owner is not in the DM itself, and nobody else reads as the agent.
    assert_eq!(r.get(&hotel, &format!("/v1/channels/{dm}/messages")).await.0, 403);
    let (status, refused) = r.get(&maker, "/v1/channels?as=concierge").await;
    assert_eq!((status, refused["code"].as_str()), (403, Some("not_owner")));
    let (status, refused) = r.get(&concierge, "/v1/channels?as=hotel").await;
    assert_eq!((status, refused["code"].as_str()), (403, Some("not_owner")), "an owner is not an agent");
}

/// A consumer that stops reading is cut off with 4008 and the cursor to
/// resume from, not buffered without bound; resuming from that cursor
/// delivers the rest with nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_stops_reading_is_closed_with_its_cursor() {
    let r = registry().await;
    let (ada, bob) = (person(&r, "ada").await, person(&r, "bob").await);
    let (_, dm) = r.post(&bob, "/v1/dms", json!({"with": "ada"})).await;
    let dm = dm["id"].as_str().unwrap().to_string();
    let mut socket = open_socket(&r, &ada, 0).await;
    let big = "x".repeat(bazaar_types::limits::MESSAGE_BODY_BYTES_MAX);
    // More than the socket's write buffer and the loopback's kernel buffers
    // hold (16 MB), while ada reads nothing for longer than the send timeout.
    let total = 4_000;
    for _ in 0..total {
        r.say(&bob, &dm, &big).await;
    }
    tokio::time::sleep(Duration::from_millis(bazaar_types::limits::STREAM_SEND_TIMEOUT_MS + 1_500)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut cursors = Vec::new();
    let close = loop {
        let frame = tokio::time::timeout_at(deadline, socket.next()).await.expect("the frames, then the close");
        match frame {
            Some(Ok(tungstenite::Message::Text(text))) => {
                let frame: Value = serde_json::from_str(&text).unwrap();
                cursors.push(frame["cursor"].as_u64().unwrap());
            }
            Some(Ok(tungstenite::Message::Close(close))) => break close,
            Some(Ok(_)) => {}
            None | Some(Err(_)) => break None,
        }
    };
    assert!(cursors.len() < total + 1, "cut off before the end ({} of {} frames)", cursors.len(), total + 1);
    // The close frame, when it could still leave, names where to resume.
    if let Some(close) = close {
        assert_eq!(u16::from(close.code), 4008, "{close:?}");
        let resume: u64 = close.reason.rsplit('=').next().unwrap().parse().unwrap();
        assert!(resume <= cursors.last().copied().unwrap_or(0) + 1, "{close:?}");
    }
    // Resuming from the last cursor the client handled delivers the rest, nothing twice.
    let last = cursors.last().copied().unwrap_or(0);
    let rest: Vec<u64> = r.polled(&ada).await.into_iter().filter(|p| *p > last).collect();
    assert!(!rest.is_empty());
    let mut again = open_socket(&r, &ada, last).await;
    let mut seen = Vec::new();
    while seen.len() < rest.len() {
        seen.push(next_frame(&mut again).await["cursor"].as_u64().unwrap());
    }
    assert_eq!(seen, rest);
}

/// The notifier writes a pass's notices together and says on `/metrics` how far behind the ledger it is: more
/// paid calls than one pass reads leave it behind after the first pass (`bazaar_notifier_behind_events` > 0),
/// the second reaches the head (0), and the merchant's inbox holds one notice per paid call, in ledger order,
/// none twice. The plane's database and its page caches are on `/metrics` too.
#[tokio::test]
async fn the_notifier_drains_in_batches_and_reports_how_far_behind_it_is() {
    use bazaar_server::conversation::notices::notify_once;
    use bazaar_types::limits::NOTIFIER_BATCH;
    let r = registry().await;
    let (buyer, shop) = buyer_and_shop(&r, 1_000_000).await;
    let (buyer_client, shop_client) =
        (r.operator.with_credential(&buyer.credential), r.operator.with_credential(&shop.credential));
    let behind = || async {
        let metrics = reqwest::get(format!("{}/metrics", r.url)).await.unwrap().text().await.unwrap();
        let line = metrics.lines().find(|l| l.starts_with("bazaar_notifier_behind_events ")).map(str::to_string);
        line.and_then(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok())).expect("the gauge is served")
    };
    let mut paid = 0;
    while r.state.store.head().await.unwrap().seq < NOTIFIER_BATCH as u64 + 20 {
        let order = format!("order-{paid}");
        let token = buyer_client.issue_token("shop", 10, &order, "r").await.unwrap();
        shop_client.settle(token.body.token.as_str(), 10, &order, None).await.unwrap();
        paid += 1;
    }
    let first = notify_once(&r.state).await.unwrap();
    assert_eq!(first.events_read, NOTIFIER_BATCH, "{first:?}");
    assert!(behind().await >= 20.0, "a full pass asks how far the head is");
    let second = notify_once(&r.state).await.unwrap();
    assert!(second.events_read > 0 && second.events_read < NOTIFIER_BATCH, "{second:?}");
    assert_eq!(behind().await, 0.0, "a short pass reached the head");
    assert_eq!(first.notices_written + second.notices_written, paid, "one notice per paid call");
    assert_eq!(notify_once(&r.state).await.unwrap(), Default::default(), "nothing is told twice");
    let (mut after, mut seqs) = (0, Vec::new());
    loop {
        let (status, page) = r.get(&shop, &format!("/v1/inbox?after={after}&limit=100")).await;
        assert_eq!(status, 200, "{page}");
        let notices = page["messages"].as_array().unwrap().iter().filter(|m| m["kind"]["type"] == "notice");
        seqs.extend(notices.map(|m| {
            assert_eq!(m["kind"]["event"], "settlement.posted", "{m}");
            m["kind"]["ledger_seq"].as_u64().unwrap()
        }));
        let next = page["next_after"].as_u64().unwrap();
        if next == after {
            break;
        }
        after = next;
    }
    assert_eq!(seqs.len(), paid, "{seqs:?}");
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in ledger order, none twice: {seqs:?}");
    // The plane's own SQLite database is on /metrics beside the ledger's: three connections, their page caches.
    let metrics = reqwest::get(format!("{}/metrics", r.url)).await.unwrap().text().await.unwrap();
    let value = |series: &str| {
        let line = metrics.lines().find(|l| l.starts_with(series)).unwrap_or_else(|| panic!("{series} in {metrics}"));
        line.rsplit(' ').next().unwrap().parse::<u64>().unwrap()
    };
    assert_eq!(value("bazaar_sqlite_connections{db=\"conversation\"} "), 3);
    let cache = 3 * bazaar_types::limits::CONVERSATION_PAGE_CACHE_KIB * 1024;
    assert_eq!(value("bazaar_sqlite_cache_size_bytes{db=\"conversation\"} "), cache);
    assert_eq!(value("bazaar_sqlite_mmap_size_bytes{db=\"conversation\"} "), 0);
}
