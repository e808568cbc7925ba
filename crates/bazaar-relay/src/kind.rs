//! Kind ranges (NIP-01's table, not any library's variant of it) and the
//! kinds the relay gives meaning to.

/// How the relay stores an event of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Every one is kept.
    Regular,
    /// Only the newest per (author, kind).
    Replaceable,
    /// Never stored: passed to live subscribers only.
    Ephemeral,
    /// Only the newest per (author, kind, `d` tag).
    Addressable,
}

pub fn class(kind: u16) -> Class {
    match kind {
        0 | 3 | 10_000..=19_999 => Class::Replaceable,
        20_000..=29_999 => Class::Ephemeral,
        30_000..=39_999 => Class::Addressable,
        _ => Class::Regular,
    }
}

/// NIP-09 deletion request.
pub const DELETION: u16 = 5;
/// NIP-42 authentication event (never stored, never broadcast).
pub const AUTH: u16 = 22_242;
/// NIP-32 label (the validator's verdicts).
pub const LABEL: u16 = 1_985;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nip01_table() {
        for (kind, expected) in [
            (0, Class::Replaceable),
            (1, Class::Regular),
            (2, Class::Regular),
            (3, Class::Replaceable),
            (41, Class::Regular),
            (999, Class::Regular),
            (5_905, Class::Regular),
            (7_000, Class::Regular),
            (9_999, Class::Regular),
            (10_000, Class::Replaceable),
            (19_999, Class::Replaceable),
            (20_000, Class::Ephemeral),
            (29_999, Class::Ephemeral),
            (30_000, Class::Addressable),
            (39_999, Class::Addressable),
            (40_000, Class::Regular),
            (65_535, Class::Regular),
        ] {
            assert_eq!(class(kind), expected, "kind {kind}");
        }
    }
}
