//! Shape checks for values that come from outside: handles, amounts, ids.

use crate::kernel::refusal::{Code, Refusal};
use bazaar_types::limits::*;
use bazaar_types::Amount;

pub fn handle(text: &str) -> Result<(), Refusal> {
    let ok = (HANDLE_LEN_MIN..=HANDLE_LEN_MAX).contains(&text.len())
        && text.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !text.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(Refusal::new(
            Code::HandleInvalid,
            format!(
                "A handle is {HANDLE_LEN_MIN}-{HANDLE_LEN_MAX} characters of a-z, 0-9 and '-', not starting with '-'."
            ),
        ))
    }
}

/// A positive amount no larger than [`AMOUNT_MINOR_MAX`].
pub fn amount(value: u64, field: &str) -> Result<Amount, Refusal> {
    if value == 0 || value > AMOUNT_MINOR_MAX {
        return Err(Refusal::new(
            Code::AmountInvalid,
            format!("`{field}` must be between 1 and {AMOUNT_MINOR_MAX} minor units."),
        ));
    }
    Ok(Amount(value))
}

/// A budget ceiling: zero is allowed (and means "nothing may be spent").
pub fn ceiling(value: u64, field: &str) -> Result<Amount, Refusal> {
    if value > AMOUNT_MINOR_MAX {
        return Err(Refusal::new(
            Code::AmountInvalid,
            format!("`{field}` must be at most {AMOUNT_MINOR_MAX} minor units."),
        ));
    }
    Ok(Amount(value))
}

pub fn order_id(text: &str) -> Result<(), Refusal> {
    if text.is_empty() || text.len() > ORDER_ID_LEN_MAX || text.chars().any(|c| c.is_control()) {
        return Err(Refusal::new(
            Code::InvalidRequest,
            format!("`order_id` must be 1-{ORDER_ID_LEN_MAX} printable characters."),
        ));
    }
    Ok(())
}

pub fn resource(text: &str) -> Result<(), Refusal> {
    if text.is_empty() || text.len() > RESOURCE_LEN_MAX || text.chars().any(|c| c.is_control()) {
        return Err(Refusal::new(
            Code::InvalidRequest,
            format!("`resource` must be 1-{RESOURCE_LEN_MAX} printable characters."),
        ));
    }
    Ok(())
}

pub fn idempotency_key(text: &str) -> Result<(), Refusal> {
    if text.is_empty()
        || text.len() > IDEMPOTENCY_KEY_LEN_MAX
        || !text.is_ascii()
        || text.chars().any(|c| c.is_control())
    {
        return Err(Refusal::new(
            Code::IdempotencyKeyInvalid,
            format!("`Idempotency-Key` must be 1-{IDEMPOTENCY_KEY_LEN_MAX} printable ASCII characters."),
        ));
    }
    Ok(())
}

/// A Nostr event id or x-only key as relays write it: 64 lowercase hex chars.
pub fn is_hex64(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles() {
        for (text, ok) in
            [("abc", true), ("ab", false), ("a-b-1", true), ("-ab", false), ("ABC", false), ("a b", false)]
        {
            assert_eq!(handle(text).is_ok(), ok, "{text}");
        }
        assert!(handle(&"a".repeat(HANDLE_LEN_MAX)).is_ok());
        assert!(handle(&"a".repeat(HANDLE_LEN_MAX + 1)).is_err());
    }

    #[test]
    fn amounts() {
        assert!(amount(0, "x").is_err());
        assert!(amount(1, "x").is_ok());
        assert!(amount(AMOUNT_MINOR_MAX + 1, "x").is_err());
        assert!(ceiling(0, "x").is_ok());
    }
}
