//! Subscription filters (NIP-01): parsed strictly, matched exactly.
//!
//! Decisions where NIP-01 leaves room, each tested:
//! - an empty list (`"ids": []`) matches nothing: it is a set no event is in;
//! - `ids`, `authors`, `#e` and `#p` take exact 64-character lowercase hex only
//!   (prefix matching left NIP-01);
//! - a key that is not a NIP-01 filter field refuses the `REQ` with
//!   `CLOSED "unsupported: …"` rather than being ignored, since ignoring it
//!   would answer a question the client did not ask;
//! - `limit` is clamped to [`QUERY_LIMIT_MAX`]; without one, [`QUERY_LIMIT_DEFAULT`] apply.

use serde_json::{Map, Value};

use crate::event::{Event, EventId, Hex32, PublicKey};
use crate::limits::{FILTER_VALUES_MAX, QUERY_LIMIT_DEFAULT, QUERY_LIMIT_MAX};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub ids: Option<Vec<EventId>>,
    pub authors: Option<Vec<PublicKey>>,
    pub kinds: Option<Vec<u16>>,
    /// `#x` filters: the tag letter and the values any of which must be a first value.
    pub tags: Vec<(char, Vec<String>)>,
    pub since: Option<u64>,
    pub until: Option<u64>,
    /// As asked; see [`Filter::limit`].
    pub limit: Option<u64>,
}

impl Filter {
    /// How many stored events this filter may answer with.
    pub fn limit(&self) -> usize {
        match self.limit {
            None => QUERY_LIMIT_DEFAULT,
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX).min(QUERY_LIMIT_MAX),
        }
    }

    /// Parses one filter object; the error is the `CLOSED` reason.
    pub fn parse(value: &Value) -> Result<Filter, String> {
        let object = value.as_object().ok_or("invalid: a filter must be a JSON object")?;
        let mut filter = Filter::default();
        for (key, value) in object {
            match key.as_str() {
                "ids" => filter.ids = Some(hex_list(key, value)?),
                "authors" => filter.authors = Some(hex_list(key, value)?),
                "kinds" => filter.kinds = Some(kind_list(value)?),
                "since" => filter.since = Some(number(key, value)?),
                "until" => filter.until = Some(number(key, value)?),
                "limit" => filter.limit = Some(number(key, value)?),
                _ => filter.tags.push(tag_filter(key, value)?),
            }
        }
        Ok(filter)
    }

    pub fn matches(&self, event: &Event) -> bool {
        fn within<T: PartialEq>(list: &Option<Vec<T>>, value: &T) -> bool {
            list.as_ref().is_none_or(|list| list.contains(value))
        }
        within(&self.ids, &event.id)
            && within(&self.authors, &event.pubkey)
            && within(&self.kinds, &event.kind)
            && self.since.is_none_or(|since| event.created_at >= since)
            && self.until.is_none_or(|until| event.created_at <= until)
            && self.tags.iter().all(|(letter, values)| {
                let mut buffer = [0u8; 4];
                let name: &str = letter.encode_utf8(&mut buffer);
                let matched = event.tag_values(name).any(|value| values.iter().any(|wanted| wanted == value));
                matched
            })
    }

    /// A filter no event can match (an empty list, or `since` after `until`).
    pub fn is_empty_set(&self) -> bool {
        self.ids.as_ref().is_some_and(Vec::is_empty)
            || self.authors.as_ref().is_some_and(Vec::is_empty)
            || self.kinds.as_ref().is_some_and(Vec::is_empty)
            || self.tags.iter().any(|(_, values)| values.is_empty())
            || matches!((self.since, self.until), (Some(since), Some(until)) if since > until)
    }

    /// The filter as JSON (what a client would send), for the CLI and tests.
    pub fn to_value(&self) -> Value {
        let mut object = Map::new();
        let hex = |list: &Vec<Hex32>| Value::from(list.iter().map(|h| h.to_hex()).collect::<Vec<_>>());
        if let Some(ids) = &self.ids {
            object.insert("ids".into(), hex(ids));
        }
        if let Some(authors) = &self.authors {
            object.insert("authors".into(), hex(authors));
        }
        if let Some(kinds) = &self.kinds {
            object.insert("kinds".into(), Value::from(kinds.clone()));
        }
        for (letter, values) in &self.tags {
            object.insert(format!("#{letter}"), Value::from(values.clone()));
        }
        for (key, value) in [("since", self.since), ("until", self.until), ("limit", self.limit)] {
            if let Some(value) = value {
                object.insert(key.into(), Value::from(value));
            }
        }
        Value::Object(object)
    }
}

fn list<'a>(key: &str, value: &'a Value) -> Result<&'a Vec<Value>, String> {
    let list = value.as_array().ok_or_else(|| format!("invalid: \"{key}\" must be a list"))?;
    if list.len() > FILTER_VALUES_MAX {
        return Err(format!("invalid: \"{key}\" has more than {FILTER_VALUES_MAX} values"));
    }
    Ok(list)
}

fn hex_list(key: &str, value: &Value) -> Result<Vec<Hex32>, String> {
    list(key, value)?
        .iter()
        .map(|item| {
            item.as_str()
                .and_then(Hex32::parse)
                .ok_or_else(|| format!("invalid: \"{key}\" takes 64-character lowercase hex values"))
        })
        .collect()
}

fn kind_list(value: &Value) -> Result<Vec<u16>, String> {
    list("kinds", value)?
        .iter()
        .map(|item| {
            item.as_u64()
                .and_then(|n| u16::try_from(n).ok())
                .ok_or_else(|| "invalid: \"kinds\" takes integers from 0 to 65535".to_string())
        })
        .collect()
}

fn number(key: &str, value: &Value) -> Result<u64, String> {
    value.as_u64().ok_or_else(|| format!("invalid: \"{key}\" must be a non-negative integer"))
}

fn tag_filter(key: &str, value: &Value) -> Result<(char, Vec<String>), String> {
    let mut chars = key.chars();
    let letter = match (chars.next(), chars.next(), chars.next()) {
        (Some('#'), Some(letter), None) if letter.is_ascii_alphabetic() => letter,
        _ => return Err(format!("unsupported: filter contains unknown element \"{key}\"")),
    };
    let values = list(key, value)?;
    let values: Vec<String> = values
        .iter()
        .map(|item| item.as_str().map(str::to_string).ok_or_else(|| format!("invalid: \"{key}\" takes strings")))
        .collect::<Result<_, _>>()?;
    if matches!(letter, 'e' | 'p') && values.iter().any(|v| Hex32::parse(v).is_none()) {
        return Err(format!("invalid: \"{key}\" takes 64-character lowercase hex values"));
    }
    Ok((letter, values))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{tag, Signer};
    use serde_json::json;

    fn parse(value: Value) -> Result<Filter, String> {
        Filter::parse(&value)
    }

    #[test]
    fn fields_and_together_lists_or_within() {
        let signer = Signer::generate(&bazaar_types::SeededEntropy::new(7));
        let event =
            signer.sign(100, 5905, vec![tag(&["t", "jobs"]), tag(&["t", "audio"]), tag(&["p", &"a".repeat(64)])], "");
        let author = signer.public_key().to_hex();
        let check = |filter: Value, expected: bool| {
            assert_eq!(parse(filter.clone()).unwrap().matches(&event), expected, "{filter}");
        };
        check(json!({}), true);
        check(json!({"kinds": [1, 5905]}), true);
        check(json!({"kinds": [1]}), false);
        check(json!({"authors": [author], "kinds": [5905]}), true);
        check(json!({"#t": ["audio"]}), true);
        check(json!({"#t": ["video"]}), false);
        check(json!({"#t": ["audio"], "#p": ["a".repeat(64)]}), true);
        check(json!({"#t": ["audio"], "#p": ["b".repeat(64)]}), false);
        check(json!({"since": 100, "until": 100}), true);
        check(json!({"since": 101}), false);
        check(json!({"until": 99}), false);
        check(json!({"ids": []}), false);
    }

    #[test]
    fn only_the_first_value_of_a_tag_is_indexed() {
        let event =
            Signer::generate(&bazaar_types::SeededEntropy::new(7)).sign(1, 1, vec![tag(&["t", "first", "second"])], "");
        assert!(parse(json!({"#t": ["first"]})).unwrap().matches(&event));
        assert!(!parse(json!({"#t": ["second"]})).unwrap().matches(&event));
    }

    #[test]
    fn refusals_name_their_prefix() {
        for (filter, prefix) in [
            (json!({"ids": ["abc"]}), "invalid:"),
            (json!({"authors": ["A".repeat(64)]}), "invalid:"),
            (json!({"kinds": [70000]}), "invalid:"),
            (json!({"since": -1}), "invalid:"),
            (json!({"#e": ["not-hex"]}), "invalid:"),
            (json!({"search": "x"}), "unsupported:"),
            (json!({"#tt": ["x"]}), "unsupported:"),
            (json!([]), "invalid:"),
        ] {
            let reason = parse(filter.clone()).unwrap_err();
            assert!(reason.starts_with(prefix), "{filter} → {reason}");
        }
    }

    #[test]
    fn limits_clamp_and_default() {
        assert_eq!(parse(json!({})).unwrap().limit(), QUERY_LIMIT_DEFAULT);
        assert_eq!(parse(json!({"limit": 0})).unwrap().limit(), 0);
        assert_eq!(parse(json!({"limit": 1_000_000_000u64})).unwrap().limit(), QUERY_LIMIT_MAX);
    }

    #[test]
    fn to_value_round_trips() {
        let filter =
            parse(json!({"ids": ["c".repeat(64)], "kinds": [7000], "#e": ["d".repeat(64)], "since": 5, "limit": 3}))
                .unwrap();
        assert_eq!(Filter::parse(&filter.to_value()).unwrap(), filter);
    }
}
