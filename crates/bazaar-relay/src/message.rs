//! Client and relay messages (NIP-01, NIP-42). Parsing never fails the
//! connection: anything unreadable becomes a `NOTICE`, an event whose id can
//! be read but which is not valid becomes `OK false "invalid: …"`.

use serde_json::value::RawValue;
use serde_json::Value;

use crate::event::{Event, Invalid};
use crate::filter::Filter;
use crate::limits::{FILTERS_PER_REQ_MAX, SUBSCRIPTION_ID_CHARS_MAX};

/// What one text frame from a client asks.
#[derive(Debug)]
pub enum ClientMessage {
    /// `["EVENT", event]`: the event, or why it is invalid and its id if readable.
    Event(Result<Event, (Option<String>, Invalid)>),
    /// `["REQ", sub, filter…]`: the filters, or the `CLOSED` reason.
    Req { sub: String, filters: Result<Vec<Filter>, String> },
    /// `["COUNT", query, filter…]` (NIP-45).
    Count { query: String, filters: Result<Vec<Filter>, String> },
    /// `["CLOSE", sub]`.
    Close(String),
    /// `["AUTH", event]` (NIP-42).
    Auth(Result<Event, (Option<String>, Invalid)>),
    /// Unreadable: the `NOTICE` to answer with.
    Unreadable(String),
}

impl ClientMessage {
    pub fn parse(text: &str) -> ClientMessage {
        let parts: Vec<&RawValue> = match serde_json::from_str(text) {
            Ok(parts) => parts,
            Err(error) => {
                return ClientMessage::Unreadable(format!("could not read that message as a JSON array: {error}"))
            }
        };
        let Some(verb) = parts.first().and_then(|raw| serde_json::from_str::<&str>(raw.get()).ok()) else {
            return ClientMessage::Unreadable("a message must start with its type, e.g. \"EVENT\" or \"REQ\"".into());
        };
        match (verb, parts.len()) {
            ("EVENT", 2) => ClientMessage::Event(event(parts[1])),
            ("AUTH", 2) => ClientMessage::Auth(event(parts[1])),
            ("REQ" | "COUNT", n) if n >= 3 => {
                let Some(sub) = subscription_id(parts[1]) else {
                    return ClientMessage::Unreadable(format!(
                        "a subscription id must be a string of 1 to {SUBSCRIPTION_ID_CHARS_MAX} characters"
                    ));
                };
                let filters = filters(&parts[2..]);
                if verb == "REQ" {
                    ClientMessage::Req { sub, filters }
                } else {
                    ClientMessage::Count { query: sub, filters }
                }
            }
            ("CLOSE", 2) => match subscription_id(parts[1]) {
                Some(sub) => ClientMessage::Close(sub),
                None => ClientMessage::Unreadable("CLOSE takes the subscription id it closes".into()),
            },
            ("EVENT" | "AUTH" | "REQ" | "COUNT" | "CLOSE", _) => {
                ClientMessage::Unreadable(format!("{verb} has the wrong number of elements"))
            }
            _ => ClientMessage::Unreadable(format!("unknown message type {verb:?}")),
        }
    }
}

fn event(raw: &RawValue) -> Result<Event, (Option<String>, Invalid)> {
    Event::parse(raw.get()).map_err(|invalid| {
        let id = serde_json::from_str::<Value>(raw.get())
            .ok()
            .and_then(|value| value.get("id").and_then(Value::as_str).map(str::to_string));
        (id, invalid)
    })
}

fn subscription_id(raw: &RawValue) -> Option<String> {
    let sub: String = serde_json::from_str(raw.get()).ok()?;
    (!sub.is_empty() && sub.chars().count() <= SUBSCRIPTION_ID_CHARS_MAX).then_some(sub)
}

fn filters(raws: &[&RawValue]) -> Result<Vec<Filter>, String> {
    if raws.len() > FILTERS_PER_REQ_MAX {
        return Err(format!("invalid: at most {FILTERS_PER_REQ_MAX} filters in one request"));
    }
    raws.iter()
        .map(|raw| {
            let value: Value = serde_json::from_str(raw.get()).map_err(|e| format!("invalid: {e}"))?;
            Filter::parse(&value)
        })
        .collect()
}

/// `["OK", id, accepted, message]`.
pub fn ok(id: &str, accepted: bool, message: &str) -> String {
    serde_json::to_string(&("OK", id, accepted, message)).expect("strings serialise")
}

/// `["EVENT", sub, event]` with the event's stored JSON spliced in.
pub fn event_for(sub: &str, event_json: &str) -> String {
    let sub = serde_json::to_string(sub).expect("strings serialise");
    format!("[\"EVENT\",{sub},{event_json}]")
}

pub fn eose(sub: &str) -> String {
    serde_json::to_string(&("EOSE", sub)).expect("strings serialise")
}

pub fn closed(sub: &str, reason: &str) -> String {
    serde_json::to_string(&("CLOSED", sub, reason)).expect("strings serialise")
}

pub fn notice(text: &str) -> String {
    serde_json::to_string(&("NOTICE", text)).expect("strings serialise")
}

pub fn auth_challenge(challenge: &str) -> String {
    serde_json::to_string(&("AUTH", challenge)).expect("strings serialise")
}

pub fn count(query: &str, n: usize) -> String {
    serde_json::to_string(&("COUNT", query, serde_json::json!({ "count": n }))).expect("values serialise")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Signer;

    #[test]
    fn every_unreadable_frame_is_a_notice() {
        for text in ["", "{", "{}", "[]", "[1]", "[\"NOPE\"]", "[\"EVENT\"]", "[\"REQ\",\"\",{}]", "[\"CLOSE\"]", "nul"]
        {
            assert!(matches!(ClientMessage::parse(text), ClientMessage::Unreadable(_)), "{text}");
        }
    }

    #[test]
    fn an_invalid_event_keeps_its_readable_id() {
        let event = Signer::generate(&bazaar_types::SeededEntropy::new(7)).sign(1, 1, vec![], "x");
        let text = format!("[\"EVENT\",{}]", event.to_json().replace("\"kind\":1", "\"kind\":\"one\""));
        match ClientMessage::parse(&text) {
            ClientMessage::Event(Err((Some(id), Invalid::Shape(_)))) => assert_eq!(id, event.id.to_hex()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn req_with_a_bad_filter_is_refused_by_name() {
        match ClientMessage::parse("[\"REQ\",\"s\",{\"kinds\":[1]},{\"search\":\"x\"}]") {
            ClientMessage::Req { sub, filters: Err(reason) } => {
                assert_eq!(sub, "s");
                assert!(reason.starts_with("unsupported:"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn relay_messages_have_the_nip01_shape() {
        assert_eq!(ok("ab", false, "invalid: x"), r#"["OK","ab",false,"invalid: x"]"#);
        assert_eq!(eose("s"), r#"["EOSE","s"]"#);
        assert_eq!(closed("s", "error: x"), r#"["CLOSED","s","error: x"]"#);
        assert_eq!(event_for("s\"", "{}"), r#"["EVENT","s\"",{}]"#);
    }
}
