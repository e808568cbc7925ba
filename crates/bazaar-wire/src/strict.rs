//! Strict reading: a served body fits its contract type when it reads into the
//! type and writes back as the same JSON. A member the type does not know is
//! dropped on the way and so shows up as a difference; so does a member the
//! type writes that the body lacked, and a value of another shape. (serde's
//! `deny_unknown_fields` cannot be combined with the `flatten` the receipts
//! use, so the round trip is the check.) Clients, by contrast, should read
//! leniently: a registry may add members.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// Why `body` does not fit `T`, or `None` when it reads and writes back unchanged.
pub fn misfit<T: DeserializeOwned + Serialize>(body: &Value) -> Option<String> {
    let typed: T = match T::deserialize(body) {
        Ok(typed) => typed,
        Err(error) => return Some(format!("does not read as {}: {error}", short_name::<T>())),
    };
    let written = match serde_json::to_value(&typed) {
        Ok(written) => written,
        Err(error) => return Some(format!("{} does not write back: {error}", short_name::<T>())),
    };
    difference(body, &written, "$").map(|why| format!("{} reads it differently: {why}", short_name::<T>()))
}

fn short_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    full.rsplit("::").next().unwrap_or(full)
}

/// Every place (up to [`DIFFERENCES_SHOWN_MAX`]) where `served` and `written` differ, as JSON paths and
/// what each holds there, joined by "; ".
pub fn difference(served: &Value, written: &Value, at: &str) -> Option<String> {
    let mut found = Vec::new();
    differences(served, written, at, &mut found);
    (!found.is_empty()).then(|| found.join("; "))
}

/// The most differences one misfit names.
pub const DIFFERENCES_SHOWN_MAX: usize = 12;

fn differences(served: &Value, written: &Value, at: &str, found: &mut Vec<String>) {
    if found.len() >= DIFFERENCES_SHOWN_MAX {
        return;
    }
    match (served, written) {
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().filter(|key| !b.contains_key(*key)) {
                found.push(format!("{at}.{key} is served but not in the type"));
            }
            for key in b.keys().filter(|key| !a.contains_key(*key)) {
                found.push(format!("{at}.{key} is in the type (as {}) but not served", brief(&b[key.as_str()])));
            }
            for (key, value) in a.iter().filter(|(key, _)| b.contains_key(*key)) {
                differences(value, &b[key.as_str()], &format!("{at}.{key}"), found);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(x, y, &format!("{at}[{i}]"), found);
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        _ if served == written => {}
        _ => found.push(format!("{at} is served as {} but reads back as {}", brief(served), brief(written))),
    }
}

fn brief(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(80) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

/// The contract's named types, as the API description names its schemas:
/// `check(name, body)` is `None` for a name that is not a contract type.
macro_rules! contract_types {
    ($($module:ident :: $name:ident),+ $(,)?) => {
        /// Every contract type's schema name (the type's own name, as utoipa names it).
        pub const NAMES: &[&str] = &[$(stringify!($name)),+];

        /// Checks `body` against the contract type called `name`: `None` when no type has that name,
        /// `Some(None)` when it fits, `Some(Some(why))` when it does not.
        pub fn check(name: &str, body: &serde_json::Value) -> Option<Option<String>> {
            $(if name == stringify!($name) { return Some($crate::strict::misfit::<$module::$name>(body)); })+
            None
        }
    };
}
pub(crate) use contract_types;

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Serialize, Deserialize)]
    struct Part {
        a: u64,
    }
    #[derive(Serialize, Deserialize)]
    struct Whole {
        #[serde(flatten)]
        part: Part,
        b: Option<String>,
    }

    #[test]
    fn a_body_fits_when_it_reads_and_writes_back_unchanged() {
        assert_eq!(misfit::<Whole>(&json!({"a": 1, "b": "x"})), None);
        assert_eq!(misfit::<Whole>(&json!({"a": 1, "b": null})), None);
    }

    #[test]
    fn an_unknown_member_a_missing_member_and_a_wrong_shape_do_not_fit() {
        let unknown = misfit::<Whole>(&json!({"a": 1, "b": "x", "c": 2})).unwrap();
        assert!(unknown.contains("$.c is served but not in the type"), "{unknown}");
        let missing = misfit::<Whole>(&json!({"a": 1})).unwrap();
        assert!(missing.contains("$.b is in the type"), "{missing}");
        let shape = misfit::<Whole>(&json!({"a": "1", "b": null})).unwrap();
        assert!(shape.contains("does not read as Whole"), "{shape}");
    }
}
