//! Fuzzing the HTTP edge on the stable toolchain (see `fuzz/README.md`): the
//! real API router, in-process, with hostile requests for every route in
//! `/openapi.json` (bodies, content types, query strings, methods and
//! credentials, from seeds generated from the document's own schemas), the
//! credential, session-cookie and `Idempotency-Key` headers, the x402
//! facilitator's bodies with a genuine token, and the SDK's offline token
//! check against the core's. Beyond "never panics": never a 5xx, every error
//! is `application/problem+json` with a stable snake_case `code`, only a
//! genuine credential authenticates, only a genuine token verifies.
//!
//! `cargo test -p bazaar-server --test fuzz -- --nocapture` prints executions
//! per target; `BAZAAR_FUZZ_CASES=20000` runs longer; `-- --ignored
//! write_corpus` rewrites the seeds.

mod common;
#[path = "../../../fuzz/harness.rs"]
mod harness;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, Method, Request, StatusCode};
use bazaar_types::limits::IDEMPOTENCY_KEY_LEN_MAX;
use harness::{apply_json, ensure, fuzz_from, fuzz_with, inputs, valid_seeds, write_seed, Input, JsonEdit};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::sync::Arc;
use tower::ServiceExt;

/// Generated requests per target in the bounded run (`cargo test`).
const API_REQUEST_CASES: u32 = 6_000;
const AUTH_HEADER_CASES: u32 = 1_500;
const FACILITATOR_CASES: u32 = 1_500;
const SDK_TOKEN_CASES: u32 = 5_000;
/// How long a request may take to answer (its status and headers).
const ANSWER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a body is read before it counts as a stream.
const BODY_WAIT: std::time::Duration = std::time::Duration::from_millis(200);
/// A response body is read up to this many bytes.
const RESPONSE_BYTES_MAX: usize = 4 << 20;
/// What a paid token the world mints may cost at most, in minor units.
const TOKEN_MAX_MINOR: u64 = 500;

const HTTP_TOKENS: &[&str] = &[
    "\n",
    ": ",
    "content-type: application/json",
    "content-type: text/plain",
    "authorization: Bearer ",
    "idempotency-key: ",
    "?limit=-1",
    "?after=18446744073709551616",
    "&",
    "%2e%2e/",
    "%00",
    "GET ",
    "POST ",
    "PUT ",
    "DELETE ",
    "PATCH ",
    "{buyer_id}",
    "{merchant_id}",
    "{token}",
    "{registry}",
];

/// Everything the targets call: a registry with an owner, a funded buyer
/// agent and a merchant agent, a genuine token between them, and the router.
struct World {
    runtime: tokio::runtime::Runtime,
    _registry: common::Registry,
    router: axum::Router,
    values: std::cell::RefCell<Vec<(String, String)>>,
    owners: std::cell::Cell<u32>,
    credentials: Vec<String>,
    token: String,
}

impl World {
    fn new() -> World {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let (registry, values, credentials, token) = runtime.block_on(async {
            let registry = common::registry().await;
            let events = bazaar_relay::sqlite::SqliteEventStore::open(&registry.dir().join("relay.db")).unwrap();
            let ws = format!("{}/relay", registry.url.replace("http://", "ws://"));
            let config = bazaar_relay::RelayConfig::public(ws);
            let relay = bazaar_relay::Relay::start(Arc::new(events), registry.clock.clone(), config).unwrap();
            assert!(registry.state.attach_relay(Arc::new(relay)));
            *registry.state.public_url.write().unwrap() = Some(registry.url.replace("127.0.0.1", "localhost"));
            let owner = common::person(&registry, "fuzz-owner").await;
            let buyer = common::agent_of(&registry, &owner, "fuzz-buyer").await;
            let merchant = common::agent_of(&registry, &owner, "fuzz-shop").await;
            let owner_client = registry.operator.with_credential(&owner.credential);
            registry.operator.mint(&owner.id, 100_000, "fuzz-mint").await.unwrap();
            owner_client.fund("fuzz-buyer", 100_000, "fuzz-fund").await.unwrap();
            owner_client.set_budget("fuzz-buyer", 1_000, 100_000, 100_000).await.unwrap();
            let buyer_client = registry.operator.with_credential(&buyer.credential);
            let issued = buyer_client
                .issue_token(&merchant.id, TOKEN_MAX_MINOR, "fuzz-order-1", "https://shop.example/fuzz")
                .await
                .unwrap();
            let token = issued.body.token.clone();
            let values = vec![
                ("{operator}".into(), "operator-secret".into()),
                ("{owner}".into(), owner.credential.clone()),
                ("{buyer}".into(), buyer.credential.clone()),
                ("{merchant}".into(), merchant.credential.clone()),
                ("{buyer_id}".into(), buyer.id.clone()),
                ("{merchant_id}".into(), merchant.id.clone()),
                ("{token}".into(), token.clone()),
                ("{registry}".into(), registry.state.registry.to_string()),
                ("{network}".into(), bazaar_server::x402::network(&registry.state)),
            ];
            let credentials = vec!["operator-secret".into(), owner.credential, buyer.credential, merchant.credential];
            (registry, values, credentials, token)
        });
        let router = bazaar_server::router::api_router(registry.state.clone());
        World { runtime, _registry: registry, router, values: values.into(), owners: 1.into(), credentials, token }
    }

    fn fill(&self, text: &str) -> String {
        let values = self.values.borrow();
        values.iter().fold(text.to_string(), |text, (placeholder, value)| text.replace(placeholder, value))
    }

    /// A fuzzed request may rotate or revoke the owner's credential (it is
    /// allowed to): then the seeds' `{owner}` is a new owner, so the run
    /// keeps reaching past authentication.
    fn heal(&self) {
        let me = Request::builder().uri("/v1/me").header("authorization", self.fill("Bearer {owner}"));
        let Ok((status, _, _)) = self.send(me.body(Body::empty()).expect("a request")) else { return };
        if status == StatusCode::OK {
            return;
        }
        let n = self.owners.replace(self.owners.get() + 1);
        let registry = &self._registry;
        let operator = registry.operator.clone();
        let made =
            self.runtime.block_on(operator.create_owner(&bazaar_sdk::generate_key(), &format!("fuzz-owner-{n}")));
        if let (Ok(made), Some(slot)) = (made, self.values.borrow_mut().iter_mut().find(|(p, _)| p == "{owner}")) {
            slot.1 = made.credential.clone();
        }
    }

    /// Sends one request through the router: its status, content type and body.
    /// A 2xx body still streaming after `BODY_WAIT` (an event stream) is read as empty.
    fn send(&self, request: Request<Body>) -> Result<(StatusCode, String, Vec<u8>), String> {
        let target = format!("{} {}", request.method(), request.uri());
        self.runtime.block_on(async {
            let answer = tokio::time::timeout(ANSWER_WAIT, self.router.clone().oneshot(request));
            let response = answer
                .await
                .map_err(|_| format!("{target}: no answer within {ANSWER_WAIT:?}"))?
                .map_err(|e| format!("router error: {e}"))?;
            let status = response.status();
            let content_type = response
                .headers()
                .get(axum::http::header::CONTENT_TYPE)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .unwrap_or_default();
            let read = tokio::time::timeout(BODY_WAIT, axum::body::to_bytes(response.into_body(), RESPONSE_BYTES_MAX));
            match read.await {
                Ok(body) => {
                    Ok((status, content_type, body.map_err(|e| format!("the body did not read: {e}"))?.to_vec()))
                }
                Err(_) if status.is_success() => Ok((status, content_type, Vec::new())),
                Err(_) => Err(format!("{target}: a {status} body still streaming after {BODY_WAIT:?}")),
            }
        })
    }
}

/// A request written as text: `METHOD TARGET`, header lines, a blank line, the body.
fn parse_request(text: &[u8]) -> Option<Request<Body>> {
    let split = text.windows(2).position(|w| w == b"\n\n");
    let (head, body) = match split {
        Some(at) => (&text[..at], text[at + 2..].to_vec()),
        None => (text, Vec::new()),
    };
    let head = std::str::from_utf8(head).ok()?;
    let mut lines = head.split('\n');
    let (method, target) = lines.next()?.split_once(' ')?;
    let mut request = Request::builder().method(Method::from_bytes(method.as_bytes()).ok()?).uri(target);
    for line in lines {
        let (name, value) = line.split_once(':')?;
        let name = HeaderName::from_bytes(name.trim().as_bytes()).ok()?;
        request = request.header(name, HeaderValue::from_bytes(value.trim_start().as_bytes()).ok()?);
    }
    let request = request.body(Body::from(body)).ok()?;
    request.uri().path().starts_with('/').then_some(request)
}

/// What every answer must be: below 500, and an error is problem+json with a stable code.
fn check_answer(method: &Method, status: StatusCode, content_type: &str, body: &[u8]) -> Result<(), String> {
    let text = || String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
    ensure(!status.is_server_error(), || format!("{status}: {}", text()))?;
    if !status.is_client_error() {
        return Ok(());
    }
    ensure(content_type.starts_with("application/problem+json"), || {
        format!("{status} answered as {content_type:?}, not problem+json: {}", text())
    })?;
    if method == Method::HEAD {
        return Ok(());
    }
    let problem: Value = serde_json::from_slice(body).map_err(|e| format!("{status}: the problem is not JSON: {e}"))?;
    let code = problem["code"].as_str().unwrap_or_default();
    let stable = !code.is_empty() && code.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    ensure(stable, || format!("{status}: code {:?} is not a stable snake_case code", problem["code"]))?;
    ensure(problem["status"] == status.as_u16(), || format!("{status}: the problem says status {}", problem["status"]))
}

// ---- every route --------------------------------------------------------------------------

/// One structural edit of a written request.
#[derive(Clone, Debug)]
enum RequestEdit {
    Body(Vec<JsonEdit>),
    /// Another seed's request line (its route) over this one's headers and body.
    Route(usize),
    /// Replaces (or adds) the header `HEADERS[n]` with value `VALUES[v]`.
    Header(usize, usize),
    /// Appends a hostile query string.
    Query(usize, usize),
}

const HEADERS: [&str; 5] = ["authorization", "content-type", "idempotency-key", "cookie", "accept"];
const VALUES: [&str; 16] = [
    "Bearer {operator}",
    "Bearer {owner}",
    "Bearer {buyer}",
    "Bearer {merchant}",
    "Bearer nope",
    "bearer {owner}",
    "Basic b3A6b3A=",
    "application/json",
    "application/json; charset=utf-16",
    "text/plain",
    "multipart/form-data",
    "application/problem+json",
    "bazaar_session=AAAA",
    "fuzz-key-1",
    "",
    "\u{7f}",
];
const QUERY_KEYS: [&str; 8] = ["limit", "after", "before", "q", "party", "cursor", "state", "kind"];
const QUERY_VALUES: [&str; 10] =
    ["-1", "0", "18446744073709551616", "1e3", "%00", "%ff%fe", "x'--", "[]", "{buyer_id}", "null&limit=1"];

fn request_edit() -> impl Strategy<Value = RequestEdit> {
    let json = (any::<usize>(), 0u8..6, any::<usize>(), prop_oneof![0usize..40, 1000usize..70_000])
        .prop_map(|(node, op, which, long_len)| JsonEdit { node, op, which, long_len });
    prop_oneof![
        3 => proptest::collection::vec(json, 1..4).prop_map(RequestEdit::Body),
        1 => any::<usize>().prop_map(RequestEdit::Route),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(h, v)| RequestEdit::Header(h, v)),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(k, v)| RequestEdit::Query(k, v)),
    ]
}

fn split_request(text: &[u8]) -> (Vec<u8>, Vec<u8>) {
    match text.windows(2).position(|w| w == b"\n\n") {
        Some(at) => (text[..at].to_vec(), text[at + 2..].to_vec()),
        None => (text.to_vec(), Vec::new()),
    }
}

fn edit_request(seed: &[u8], edit: &RequestEdit, corpus: &[Vec<u8>]) -> Vec<u8> {
    let (head, body) = split_request(seed);
    let head = String::from_utf8_lossy(&head).into_owned();
    let (line, headers) = head.split_once('\n').unwrap_or((&head, ""));
    let (line, headers, body) = match edit {
        RequestEdit::Body(edits) => match serde_json::from_slice::<Value>(&body) {
            Ok(doc) => (line.to_string(), headers.to_string(), serde_json::to_vec(&apply_json(&doc, edits)).unwrap()),
            Err(_) => (line.to_string(), headers.to_string(), b"{}".to_vec()),
        },
        RequestEdit::Route(other) => {
            let other = String::from_utf8_lossy(&corpus[other % corpus.len()]).into_owned();
            (other.lines().next().unwrap_or_default().to_string(), headers.to_string(), body)
        }
        RequestEdit::Header(h, v) => {
            let name = HEADERS[h % HEADERS.len()];
            let kept: Vec<&str> = headers.lines().filter(|l| !l.to_ascii_lowercase().starts_with(name)).collect();
            let headers = format!("{}\n{name}: {}", kept.join("\n"), VALUES[v % VALUES.len()]);
            (line.to_string(), headers.trim_start_matches('\n').to_string(), body)
        }
        RequestEdit::Query(k, v) => {
            let joiner = if line.contains('?') { '&' } else { '?' };
            let query =
                format!("{joiner}{}={}", QUERY_KEYS[k % QUERY_KEYS.len()], QUERY_VALUES[v % QUERY_VALUES.len()]);
            (format!("{line}{query}"), headers.to_string(), body)
        }
    };
    let mut out = if headers.is_empty() { line.into_bytes() } else { format!("{line}\n{headers}").into_bytes() };
    out.extend_from_slice(b"\n\n");
    out.extend_from_slice(&body);
    out
}

fn requests(corpus: Arc<Vec<Vec<u8>>>) -> impl Strategy<Value = Input> {
    let structured = {
        let corpus = corpus.clone();
        (any::<usize>(), proptest::collection::vec(request_edit(), 1..4)).prop_map(move |(seed, edits)| {
            let start = corpus[seed % corpus.len()].clone();
            Input(edits.iter().fold(start, |text, edit| edit_request(&text, edit, &corpus)))
        })
    };
    prop_oneof![3 => structured, 1 => inputs(corpus, HTTP_TOKENS)]
}

/// Whether `request` would rotate or revoke the operator's own credential: the
/// world cannot mint another, and every later case would stop at 401.
fn kills_operator(request: &Request<Body>) -> bool {
    let operator =
        request.headers().get_all("authorization").iter().any(|v| v.as_bytes().ends_with(b"operator-secret"));
    operator && request.uri().path().starts_with("/v1/credentials/")
}

/// Answers by status (0: the text was no HTTP request; 1: skipped, see
/// [`kills_operator`]), so a run shows how deep it went.
type Tally = std::sync::Mutex<std::collections::BTreeMap<u16, u64>>;

fn check_request(world: &World, input: &Input, tally: &Tally) -> Result<(), String> {
    let note = |status: u16| *tally.lock().unwrap().entry(status).or_default() += 1;
    let Some(request) = parse_request(world.fill(&input.text()).as_bytes()) else {
        note(0);
        return Ok(());
    };
    if kills_operator(&request) {
        note(1);
        return Ok(());
    }
    let method = request.method().clone();
    let (status, content_type, body) = world.send(request)?;
    note(status.as_u16());
    if status.is_success() {
        world.heal();
    }
    check_answer(&method, status, &content_type, &body)
}

#[test]
fn fuzz_api_request() {
    let world = World::new();
    let entries = harness::corpus("api-request");
    let seeds = Arc::new(entries.iter().map(|(_, bytes)| bytes.clone()).collect::<Vec<_>>());
    let routes = bazaar_server::router::api_description().paths.paths.len();
    assert!(seeds.len() >= routes, "{} seeds for {routes} paths: run write_corpus", seeds.len());
    let tally = Tally::default();
    fuzz_with("api-request", API_REQUEST_CASES, &entries, requests(seeds), |input| {
        check_request(&world, input, &tally)
    });
    let tally = tally.into_inner().unwrap();
    println!("fuzz api-request: answers by status (0 = not a request): {tally:?}");
    let answered_2xx: u64 = tally.range(200..300).map(|(_, n)| n).sum();
    assert!(answered_2xx > 0, "no request got past validation: the seeds are stale ({tally:?})");
}

// ---- credentials, sessions and idempotency keys ---------------------------------------------

fn check_auth_header(world: &World, input: &Input) -> Result<(), String> {
    let Ok(value) = HeaderValue::from_bytes(world.fill(&input.text()).as_bytes()) else { return Ok(()) };
    let me = |name: &str, value: HeaderValue| {
        Request::builder().uri("/v1/me").header(name, value).body(Body::empty()).expect("a request")
    };
    let (status, content_type, body) = world.send(me("authorization", value.clone()))?;
    check_answer(&Method::GET, status, &content_type, &body)?;
    let genuine = world.credentials.iter().any(|c| value.as_bytes() == format!("Bearer {c}").as_bytes());
    ensure(genuine == (status == StatusCode::OK), || format!("{value:?} answered {status}"))?;
    let cookie = HeaderValue::from_bytes(&[b"bazaar_session=", value.as_bytes()].concat()).unwrap_or(value.clone());
    let (status, content_type, body) = world.send(me("cookie", cookie))?;
    check_answer(&Method::GET, status, &content_type, &body)?;
    ensure(status == StatusCode::UNAUTHORIZED, || format!("a session cookie nobody signed in with answered {status}"))?;
    let (status, content_type, body) = world.send(
        Request::builder()
            .method(Method::POST)
            .uri("/v1/tokens")
            .header("authorization", format!("Bearer {}", world.credentials[2]))
            .header("content-type", "application/json")
            .header("idempotency-key", value.clone())
            .body(Body::from(
                json!({"merchant": "did:key:zNobody", "max_amount_minor": 1, "order_id": "o",
                "resource": "https://shop.example/"})
                .to_string(),
            ))
            .expect("a request"),
    )?;
    check_answer(&Method::POST, status, &content_type, &body)?;
    let key = value.as_bytes();
    let printable =
        !key.is_empty() && key.len() <= IDEMPOTENCY_KEY_LEN_MAX && key.iter().all(|b| (0x20..0x7f).contains(b));
    let refused = serde_json::from_slice::<Value>(&body).is_ok_and(|p| p["code"] == "idempotency_key_invalid");
    ensure(refused != printable, || format!("Idempotency-Key {value:?} answered {status}"))
}

#[test]
fn fuzz_auth_header() {
    let world = World::new();
    fuzz_from(
        "auth-header",
        AUTH_HEADER_CASES,
        |seeds| inputs(seeds, HTTP_TOKENS),
        |input| check_auth_header(&world, input),
    );
}

// ---- the x402 facilitator -------------------------------------------------------------------

fn check_facilitator(world: &World, input: &Input) -> Result<(), String> {
    let body = world.fill(&input.text());
    for path in ["/x402/verify", "/x402/settle"] {
        let request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header("authorization", format!("Bearer {}", world.credentials[3]))
            .header("content-type", "application/json")
            .body(Body::from(body.clone()))
            .expect("a request");
        let (status, content_type, answer) = world.send(request)?;
        check_answer(&Method::POST, status, &content_type, &answer)?;
        if status == StatusCode::OK {
            let answer: Value = serde_json::from_slice(&answer).map_err(|e| format!("{path}: not JSON: {e}"))?;
            let valid = answer["isValid"] == true || answer["success"] == true;
            let token =
                serde_json::from_str::<Value>(&body).ok().map(|b| b["paymentPayload"]["payload"]["token"].clone());
            let genuine = token.as_ref().and_then(Value::as_str) == Some(world.token.as_str());
            ensure(!valid || genuine, || format!("{path} accepted a token nobody minted: {answer}"))?;
        }
    }
    Ok(())
}

#[test]
fn fuzz_x402_facilitator() {
    let world = World::new();
    for seed in valid_seeds("x402-facilitator").iter() {
        let request = Request::builder()
            .method(Method::POST)
            .uri("/x402/verify")
            .header("authorization", format!("Bearer {}", world.credentials[3]))
            .header("content-type", "application/json")
            .body(Body::from(world.fill(&String::from_utf8_lossy(seed))))
            .expect("a request");
        let (status, _, answer) = world.send(request).unwrap();
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&answer));
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(answer["isValid"], true, "the seed pays: {answer}");
    }
    harness::fuzz_json("x402-facilitator", FACILITATOR_CASES, HTTP_TOKENS, |input| check_facilitator(&world, input));
}

// ---- the SDK's offline token check, against the core's -----------------------------------------

fn check_sdk_token(input: &Input) -> Result<(), String> {
    use bazaar_core::crypto::b64url;
    use ed25519_dalek::SigningKey;
    let text = input.text();
    let key = SigningKey::from_bytes(&[1; 32]).verifying_key();
    let offline = bazaar_sdk::token::verify_offline(&text, &b64url(key.as_bytes()));
    let _ = bazaar_sdk::token::claims_unverified(&text);
    let core = bazaar_core::token::decode(&text, &key);
    if let Ok(claims) = &core {
        let wire: bazaar_sdk::wire::pay::TokenClaims =
            serde_json::from_value(serde_json::to_value(claims).unwrap()).unwrap();
        let same = offline.as_ref().ok() == Some(&wire);
        ensure(same, || "the SDK refused (or read otherwise) a token the core verified".into())?;
    }
    if offline.is_ok() {
        let signed = valid_seeds("apt-token").iter().any(|seed| seed.as_slice() == text.as_bytes());
        ensure(signed, || "the SDK verified a token nobody signed".into())?;
    }
    Ok(())
}

#[test]
fn fuzz_sdk_token() {
    harness::fuzz("apt-token", SDK_TOKEN_CASES, &["apt_", "."], check_sdk_token);
}

// ---- the seeds --------------------------------------------------------------------------------

/// One seed request per operation in the API description.
fn operation_seeds() -> Vec<(String, String)> {
    let doc = serde_json::to_value(bazaar_server::router::api_description()).unwrap();
    let mut seeds = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            if !["get", "post", "put", "delete", "patch"].contains(&method.as_str()) {
                continue;
            }
            let target = path.split('/').map(|part| if part.starts_with('{') { "{merchant_id}" } else { part });
            let mut text = format!("{} {}", method.to_uppercase(), target.collect::<Vec<_>>().join("/"));
            let query: Vec<String> = operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "query")
                .map(|p| format!("{}=1", p["name"].as_str().unwrap_or_default()))
                .collect();
            if !query.is_empty() {
                text.push_str(&format!("?{}", query.join("&")));
            }
            text.push_str("\nauthorization: Bearer {owner}\nidempotency-key: fuzz-seed");
            let schema = &operation["requestBody"]["content"]["application/json"]["schema"];
            if !schema.is_null() {
                text.push_str(&format!(
                    "\ncontent-type: application/json\n\n{}",
                    common::schema_example(&doc, schema, 0)
                ));
            }
            let name = format!("seed-{method}-{}", path.trim_matches('/').replace(['/', '{', '}'], "_"));
            seeds.push((name, text));
        }
    }
    seeds
}

/// The server targets' seeds, as this build makes them (`harness::write_seed`).
#[test]
fn committed_seeds_are_what_this_build_makes() {
    for (name, text) in operation_seeds() {
        write_seed("api-request", &name, text.as_bytes());
    }
    let headers = ["Bearer {owner}", "Bearer {buyer}", "Bearer {operator}", "fuzz-key-1", "Bearer {owner}x"];
    for (i, value) in headers.iter().enumerate() {
        write_seed("auth-header", &format!("seed-{i}"), value.as_bytes());
    }
    let requirements = json!({"scheme": "apt", "network": "{network}", "amount": "250", "asset": "BNU",
        "payTo": "{merchant_id}", "maxTimeoutSeconds": 900});
    let payload = json!({"x402Version": 2, "resource": {"url": "https://shop.example/fuzz"},
        "accepted": requirements, "payload": {"token": "{token}"}});
    let body = json!({"x402Version": 2, "paymentPayload": payload, "paymentRequirements": requirements});
    write_seed("x402-facilitator", "seed-verify.json", &serde_json::to_vec_pretty(&body).unwrap());
}

// ---- federation: signed server-to-server requests -----------------------------------------------

/// Generated cases per federation target in the bounded run (`cargo test`).
const S2S_CASES: u32 = 1_500;
/// Timestamps a signature header is given in place of its own.
const HOSTILE_TS: [i64; 6] = [i64::MIN, i64::MAX, -1, 0, i64::MIN + 1, 1 << 53];
const S2S_TOKENS: &[&str] = &["registry=", "key=", "ts=", "sig=", ",", "=", " ", "-9223372036854775808"];

/// The world and a peer registry it recognises, whose key signs the requests.
struct Federation {
    world: World,
    peer: common::Registry,
}

impl Federation {
    fn new() -> Federation {
        let world = World::new();
        let peer = world.runtime.block_on(async {
            let peer = common::registry().await;
            let did = peer.state.registry.to_string();
            world._registry.operator.add_peer(&peer.url, &did, 5_000, (100, 1_000, 10_000)).await.unwrap();
            peer
        });
        Federation { world, peer }
    }

    /// The peer's genuine `Bazaar-Registry-Signature` over `body`, at time `ts`.
    fn signature(&self, body: &[u8], ts: i64) -> String {
        let key = self.peer.state.signing_key();
        let registry = self.peer.state.registry.as_str();
        let message = bazaar_core::federation::s2s_message(registry, "POST", SETTLE_PATH, ts, body);
        let key_did = bazaar_core::crypto::did_key(&key.verifying_key());
        format!("registry={registry},key={key_did},ts={ts},sig={}", bazaar_core::crypto::sign(&key, &message))
    }

    fn settle(&self, header: HeaderValue, body: &[u8]) -> Result<(StatusCode, Value), String> {
        let request = Request::builder()
            .method(Method::POST)
            .uri(SETTLE_PATH)
            .header("content-type", "application/json")
            .header("bazaar-registry-signature", header)
            .body(Body::from(body.to_vec()))
            .expect("a request");
        let (status, content_type, answer) = self.world.send(request)?;
        check_answer(&Method::POST, status, &content_type, &answer)?;
        Ok((status, serde_json::from_slice(&answer).unwrap_or_default()))
    }
}

const SETTLE_PATH: &str = bazaar_server::federation::FEDERATION_SETTLE_PATH;
/// A relayed settlement whose token is not one: refused only after the signature checked out.
const SETTLE_BODY: &str = r#"{"token":"apt_x.y","amount_minor":1,"order_id":"fuzz"}"#;

/// A signature header read the way the registry reads it: parts by name, trimmed, the last one winning.
fn header_parts(header: &str) -> Option<std::collections::BTreeMap<String, String>> {
    let mut parts = std::collections::BTreeMap::new();
    for part in header.split(',') {
        let (k, v) = part.split_once('=')?;
        parts.insert(k.trim().to_string(), v.trim().to_string());
    }
    Some(parts)
}

#[test]
fn fuzz_s2s_signature() {
    let federation = Federation::new();
    let now = federation.world._registry.state.now().ms();
    let genuine = federation.signature(SETTLE_BODY.as_bytes(), now);
    let (status, answer) = federation.settle(HeaderValue::from_str(&genuine).unwrap(), SETTLE_BODY.as_bytes()).unwrap();
    assert_eq!(answer["code"], "token_malformed", "the genuine signature is accepted ({status}): {answer}");
    let entries = harness::corpus("s2s-signature");
    let mut seeds: Vec<Vec<u8>> = entries.iter().map(|(_, bytes)| bytes.clone()).collect();
    seeds.push(genuine.clone().into_bytes());
    let retimed = {
        let genuine = genuine.clone();
        (0..HOSTILE_TS.len()).prop_map(move |i| {
            let parts: Vec<String> = genuine
                .split(',')
                .map(|p| if p.starts_with("ts=") { format!("ts={}", HOSTILE_TS[i]) } else { p.to_string() })
                .collect();
            Input(parts.join(",").into_bytes())
        })
    };
    let strategy = prop_oneof![4 => inputs(Arc::new(seeds), S2S_TOKENS), 1 => retimed];
    fuzz_with("s2s-signature", S2S_CASES, &entries, strategy, |input| {
        let Ok(header) = HeaderValue::from_bytes(federation.world.fill(&input.text()).as_bytes()) else {
            return Ok(());
        };
        let (_, answer) = federation.settle(header, SETTLE_BODY.as_bytes())?;
        let refused = ["request_signature_invalid", "peer_unknown", "request_stale"]
            .contains(&answer["code"].as_str().unwrap_or_default());
        let same = header_parts(&input.text()).is_some() && header_parts(&input.text()) == header_parts(&genuine);
        ensure(refused || same, || format!("a signature that is not the peer's was accepted: {answer}"))
    });
}

#[test]
fn fuzz_s2s_body() {
    let federation = Federation::new();
    let now = federation.world._registry.state.now().ms();
    harness::fuzz_json("s2s-body", S2S_CASES, HTTP_TOKENS, |input| {
        let body = federation.world.fill(&input.text()).into_bytes();
        let header = HeaderValue::from_str(&federation.signature(&body, now)).expect("an ASCII header");
        let (_, answer) = federation.settle(header, &body)?;
        ensure(answer["code"] != "request_signature_invalid", || format!("a genuine signature was refused: {answer}"))
    });
}

// ---- the SDK's x402 middleware: PAYMENT-SIGNATURE in, PAYMENT-REQUIRED out -------------------------

/// Generated cases of the x402 header target in the bounded run (`cargo test`).
const X402_HEADER_CASES: u32 = 1_000;
/// What the fuzzed paid route costs, in minor units.
const PAID_PRICE_MINOR: u64 = 250;
/// The paid route's resource as the middleware names it (no `Host` header: `localhost`).
const PAID_RESOURCE: &str = "http://localhost/paid";

/// What a `402` must carry: a `PAYMENT-REQUIRED` header that decodes to an x402 v2 offer.
fn check_payment_required(headers: &axum::http::HeaderMap) -> Result<(), String> {
    use base64::Engine;
    let header = headers.get("payment-required").ok_or("a 402 without PAYMENT-REQUIRED")?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(header.as_bytes()).map_err(|e| e.to_string())?;
    let required: Value = serde_json::from_slice(&bytes).map_err(|e| format!("PAYMENT-REQUIRED is not JSON: {e}"))?;
    ensure(required["x402Version"] == 2 && required["accepts"][0]["scheme"] == "apt", || {
        format!("PAYMENT-REQUIRED is not an x402 v2 apt offer: {required}")
    })
}

#[test]
fn fuzz_x402_header() {
    use base64::Engine;
    let world = World::new();
    let merchant = bazaar_sdk::Client::new(&world._registry.url, Some(world.credentials[3].clone()));
    let buyer = bazaar_sdk::Client::new(&world._registry.url, Some(world.credentials[2].clone()));
    let merchant_id = world.fill("{merchant_id}");
    let (app, token) = world.runtime.block_on(async {
        let receipts = world._registry.dir().join("receipts.db");
        let route = Arc::new(bazaar_sdk::paid::PaidRoute::new(merchant, PAID_PRICE_MINOR, &receipts).unwrap());
        let x402 = Arc::new(bazaar_sdk::paid::X402Route::new(route, "a fuzzed paid route").await.unwrap());
        let app = axum::Router::new()
            .route("/paid", axum::routing::get(|| async { "paid" }))
            .route_layer(axum::middleware::from_fn_with_state(x402, bazaar_sdk::paid::x402_paid));
        let issued = buyer.issue_token(&merchant_id, PAID_PRICE_MINOR, "fuzz-x402", PAID_RESOURCE).await.unwrap();
        (app, issued.body.token.clone())
    });
    let send = |header: Option<HeaderValue>| {
        let mut request = Request::builder().uri("/paid");
        if let Some(header) = header {
            request = request.header("payment-signature", header);
        }
        world.runtime.block_on(async {
            let answer = tokio::time::timeout(ANSWER_WAIT, app.clone().oneshot(request.body(Body::empty()).unwrap()));
            answer.await.map_err(|_| "no answer".to_string())?.map_err(|e| e.to_string())
        })
    };
    let check = |input: &Input| -> Result<(), String> {
        let payload = input.text().replace("{x402_token}", &token);
        let payload = world.fill(&payload);
        let encoded = base64::engine::general_purpose::STANDARD.encode(payload.as_bytes());
        for header in [HeaderValue::from_str(&encoded).ok(), HeaderValue::from_bytes(payload.as_bytes()).ok()] {
            let response = send(header)?;
            let status = response.status();
            ensure(!status.is_server_error() || status == StatusCode::SERVICE_UNAVAILABLE, || format!("{status}"))?;
            if status == StatusCode::PAYMENT_REQUIRED {
                check_payment_required(response.headers())?;
            }
            if status.is_success() {
                let sent: Value = serde_json::from_str(&payload).unwrap_or_default();
                let genuine = sent["payload"]["token"] == token.as_str();
                ensure(genuine, || format!("a payment without the genuine token was served: {payload}"))?;
            }
        }
        Ok(())
    };
    let bare = send(None).unwrap();
    assert_eq!(bare.status(), StatusCode::PAYMENT_REQUIRED);
    check_payment_required(bare.headers()).unwrap();
    for seed in valid_seeds("x402-header").iter() {
        let payload = world.fill(&String::from_utf8_lossy(seed).replace("{x402_token}", &token));
        let encoded = base64::engine::general_purpose::STANDARD.encode(payload.as_bytes());
        let paid = send(Some(HeaderValue::from_str(&encoded).unwrap())).unwrap();
        assert_eq!(paid.status(), StatusCode::OK, "the seed pays: {payload}");
    }
    harness::fuzz_json("x402-header", X402_HEADER_CASES, HTTP_TOKENS, check);
}
