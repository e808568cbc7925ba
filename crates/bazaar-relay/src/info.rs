//! NIP-11: the relay information document, built from the same constants the
//! relay enforces, so what is advertised is what is enforced.

use serde_json::{json, Value};

use crate::limits::{
    CONTENT_BYTES_MAX, CREATED_AT_FUTURE_S_MAX, EVENT_TAGS_MAX, MESSAGE_BYTES_MAX, QUERY_LIMIT_DEFAULT,
    QUERY_LIMIT_MAX, RETENTION_S, SUBSCRIPTIONS_MAX, SUBSCRIPTION_ID_CHARS_MAX,
};
use crate::relay::{Access, RelayConfig};

/// The NIPs this relay implements.
pub const SUPPORTED_NIPS: &[u16] = &[1, 9, 11, 40, 42, 70, 90];

pub fn document(config: &RelayConfig, software_version: &str) -> Value {
    let private = matches!(config.access, Access::Private { .. });
    json!({
        "name": config.name,
        "description": config.description,
        "supported_nips": SUPPORTED_NIPS,
        "software": "https://github.com/bazaar/bazaar",
        "version": software_version,
        "limitation": {
            "max_message_length": MESSAGE_BYTES_MAX,
            "max_subscriptions": SUBSCRIPTIONS_MAX,
            "max_limit": QUERY_LIMIT_MAX,
            "default_limit": QUERY_LIMIT_DEFAULT,
            "max_subid_length": SUBSCRIPTION_ID_CHARS_MAX,
            "max_event_tags": EVENT_TAGS_MAX,
            "max_content_length": CONTENT_BYTES_MAX,
            "min_pow_difficulty": 0,
            "auth_required": private,
            "payment_required": false,
            "restricted_writes": private,
            "created_at_lower_limit": RETENTION_S,
            "created_at_upper_limit": CREATED_AT_FUTURE_S_MAX,
        },
        "retention": [{ "time": RETENTION_S }],
    })
}
