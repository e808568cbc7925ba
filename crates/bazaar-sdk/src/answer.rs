//! What a call returns: an [`Answer`], or an [`SdkError`] — a refusal as problem+json, or a transport failure.

use serde_json::Value;

/// The code a paid route answers (503) when the registry refuses the merchant's own credential: final for
/// the call (the merchant, not the buyer, must fix it; the buyer voids its token).
pub const MERCHANT_UNAUTHENTICATED: &str = "merchant_unauthenticated";

#[derive(Debug, thiserror::Error)]
pub enum SdkError {
    /// The registry (or merchant) answered with problem+json.
    #[error("{status} {code}: {detail}")]
    Problem { status: u16, code: String, detail: String, body: Value },
    #[error("transport: {0}")]
    Transport(#[from] reqwest::Error),
    /// A coalesced batch this call rode in failed in transport (retry as after a transport error).
    #[error("transport (batch): {0}")]
    Batch(String),
    /// A success whose body does not read as the call's wire type (`bazaar_wire`): a registry speaking
    /// another version of the contract. Nothing to retry.
    #[error("the answer does not read as {what}: {why}")]
    Answer { what: &'static str, why: String },
}

impl SdkError {
    /// A problem+json answer (`body`) with its HTTP `status`.
    pub(crate) fn problem(status: u16, body: Value) -> SdkError {
        SdkError::Problem {
            status,
            code: body["code"].as_str().unwrap_or("unknown").to_string(),
            detail: body["detail"].as_str().unwrap_or("").to_string(),
            body,
        }
    }

    pub fn code(&self) -> Option<&str> {
        match self {
            SdkError::Problem { code, .. } => Some(code),
            SdkError::Transport(_) | SdkError::Batch(_) | SdkError::Answer { .. } => None,
        }
    }
    /// The paid route's price, where a merchant's refusal is about the amount (`facts.price_minor`).
    pub fn price_minor(&self) -> Option<u64> {
        match self {
            SdkError::Problem { body, .. } => body["facts"]["price_minor"].as_u64(),
            SdkError::Transport(_) | SdkError::Batch(_) | SdkError::Answer { .. } => None,
        }
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            SdkError::Problem { status, .. } => Some(*status),
            SdkError::Transport(_) | SdkError::Batch(_) | SdkError::Answer { .. } => None,
        }
    }
}

/// `body` as the wire type `T`; a body that does not read as it is [`SdkError::Answer`]. Reading is lenient
/// (members the type does not know are ignored), so a newer registry that adds members still reads.
pub(crate) fn typed<T: serde::de::DeserializeOwned>(body: Value) -> Result<T, SdkError> {
    serde_json::from_value(body).map_err(|error| SdkError::Answer {
        what: std::any::type_name::<T>().rsplit("::").next().unwrap_or("its type"),
        why: error.to_string(),
    })
}

/// A request's JSON body for [`crate::Client::call`]: any `Serialize` value (a `bazaar_wire` request type,
/// or `json!` for a route without one).
#[derive(Debug, Clone)]
pub struct Body(pub(crate) Value);

impl Body {
    pub fn json(body: impl serde::Serialize) -> Body {
        Body(serde_json::to_value(body).expect("request bodies serialize to JSON"))
    }
}

/// One answer: its body (the call's wire type; JSON only where the caller of [`crate::Client::call`] asks
/// for it) and whether it was replayed from an idempotency record.
#[derive(Debug, Clone)]
pub struct Answer<T = Value> {
    pub body: T,
    pub replayed: bool,
}

impl Answer<Value> {
    /// This answer with its body read as the wire type `T` ([`typed`]).
    pub(crate) fn typed<T: serde::de::DeserializeOwned>(self) -> Result<Answer<T>, SdkError> {
        Ok(Answer { body: typed(self.body)?, replayed: self.replayed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_reads_leniently_into_its_type_or_is_an_answer_error() {
        let minted = serde_json::json!({"transfers": ["tr_1"], "link": "lnk_1", "amount_minor": 5, "owner": "did:o",
            "added_later": true});
        let read: bazaar_wire::pay::Minted = typed(minted).unwrap();
        assert_eq!((read.owner.as_str(), read.posting.amount_minor), ("did:o", 5));
        let error = typed::<bazaar_wire::pay::Minted>(serde_json::json!({"owner": 7})).unwrap_err();
        assert!(matches!(&error, SdkError::Answer { what: "Minted", .. }), "{error}");
        assert_eq!((error.code(), error.status()), (None, None));
    }
}
