//! How adapters store an event's body and hashes compactly (docs/design/stored-shapes.md).
//!
//! An event's hash covers its body's JSON text (`kernel::chain::event_hash`), so a
//! stored body must give back exactly that document. A stored body is a format byte
//! then the payload:
//! - [`PLAIN`]: the JSON text as it is (what migrated rows hold on PostgreSQL);
//! - [`ZSTD_DICT_1`]: the JSON text compressed with zstd against the raw-content
//!   dictionary `event-bodies-1.dict`, whose bytes never change (a test pins its
//!   SHA-256): a new dictionary gets a new format byte, and every stored format stays
//!   readable.
//!
//! A paid call's two bodies are ≈ 990 B of JSON; packed they are ≈ 390 B. The audit
//! recomputes every event's hash from the body read back, so a body that did not
//! round-trip would show up there as a broken chain.

use std::cell::RefCell;
use std::sync::LazyLock;
use zstd::dict::{DecoderDictionary, EncoderDictionary};

/// The body is the JSON text itself.
pub const PLAIN: u8 = 0;
/// The body is zstd against [`DICTIONARY_1`], with the frame's content size.
pub const ZSTD_DICT_1: u8 = 1;
/// The raw-content dictionary behind [`ZSTD_DICT_1`]: representative bodies of the
/// common kinds, the most frequent (a settlement, a token) last. Never edit it.
pub const DICTIONARY_1: &[u8] = include_bytes!("event-bodies-1.dict");
/// zstd's level for new bodies: level 1 packs these small documents within a few
/// bytes of level 19 at a fraction of the time.
const LEVEL: i32 = 1;
/// A body larger than this is refused on read rather than allocated (a stored body
/// is bounded by the request limits far below this).
pub const BODY_BYTES_MAX: usize = 16 << 20;

static ENCODER: LazyLock<EncoderDictionary<'static>> = LazyLock::new(|| EncoderDictionary::copy(DICTIONARY_1, LEVEL));
static DECODER: LazyLock<DecoderDictionary<'static>> = LazyLock::new(|| DecoderDictionary::copy(DICTIONARY_1));

thread_local! {
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// Why a stored body could not be read back.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PackedError {
    #[error("empty stored body")]
    Empty,
    #[error("unknown stored body format {0}")]
    UnknownFormat(u8),
    #[error("stored body does not decompress: {0}")]
    Corrupt(String),
    #[error("stored body is not JSON: {0}")]
    NotJson(String),
}

/// The stored form of an event body's JSON text ([`ZSTD_DICT_1`]).
pub fn pack_body(json: &str) -> Vec<u8> {
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let compressor = slot.get_or_insert_with(|| {
            let mut c = zstd::bulk::Compressor::with_prepared_dictionary(&ENCODER).expect("a zstd context");
            c.include_checksum(false).expect("a zstd parameter");
            c.include_dictid(false).expect("a zstd parameter");
            c.include_contentsize(true).expect("a zstd parameter");
            c
        });
        let mut out = Vec::with_capacity(1 + zstd::zstd_safe::compress_bound(json.len()));
        out.push(ZSTD_DICT_1);
        let packed = compressor.compress(json.as_bytes()).expect("zstd compresses any input into a bounded buffer");
        out.extend_from_slice(&packed);
        out
    })
}

/// The JSON text a stored body holds, whichever format it was written in.
pub fn unpack_text(stored: &[u8]) -> Result<String, PackedError> {
    let (&format, payload) = stored.split_first().ok_or(PackedError::Empty)?;
    let bytes = match format {
        PLAIN => payload.to_vec(),
        ZSTD_DICT_1 => {
            let size = match zstd::zstd_safe::get_frame_content_size(payload) {
                Ok(Some(size)) if size as usize <= BODY_BYTES_MAX => size as usize,
                Ok(Some(size)) => return Err(PackedError::Corrupt(format!("{size} bytes is over the limit"))),
                _ => return Err(PackedError::Corrupt("no content size".into())),
            };
            DECOMPRESSOR.with(|cell| {
                let mut slot = cell.borrow_mut();
                let d = match slot.as_mut() {
                    Some(d) => d,
                    None => slot.insert(
                        zstd::bulk::Decompressor::with_prepared_dictionary(&DECODER)
                            .map_err(|e| PackedError::Corrupt(e.to_string()))?,
                    ),
                };
                d.decompress(payload, size).map_err(|e| PackedError::Corrupt(e.to_string()))
            })?
        }
        other => return Err(PackedError::UnknownFormat(other)),
    };
    String::from_utf8(bytes).map_err(|e| PackedError::NotJson(e.to_string()))
}

/// The JSON document a stored body holds.
pub fn unpack_body(stored: &[u8]) -> Result<serde_json::Value, PackedError> {
    serde_json::from_str(&unpack_text(stored)?).map_err(|e| PackedError::NotJson(e.to_string()))
}

/// A hash as stored: its 32 bytes, not 64 hex characters. `None` when `hex` is not a
/// SHA-256 in lower-case hex (the chain never makes one).
pub fn hash_bytes(hex: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex, &mut out).ok()?;
    (hex.bytes().all(|b| !b.is_ascii_uppercase())).then_some(out)
}

/// A stored hash as the chain spells it (lower-case hex).
pub fn hash_hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    #[test]
    fn the_first_dictionary_never_changes() {
        // Bodies already stored decode only against these exact bytes: a new dictionary is a new format byte.
        assert_eq!(
            hex::encode(Sha256::digest(DICTIONARY_1)),
            "11cdfe9725ebdef00b2b040877e04a15aec8fe9e3248c51c2130b7caa8cef752"
        );
    }

    #[test]
    fn bodies_round_trip_and_shrink() {
        let settled = r#"{"amount_minor":100,"authored_handle":"merchant-03","buyer":"did:key:z6MkeYpPtxn5k2xK3A5VyXmZho6q9s57Bqqq5FgNgC4Qf8H4","event_seq":20829,"fee_minor":1,"jti":"tok_01a24f663e44B6j6kPqjt3qGRObKuKbl4KP1","link":"lnk_20829","merchant":"did:key:z6MkgGrL6TgL6Z1Y4jU4KXRpvzi1rafJGsQ6u4HYue5MiuG7","net_minor":99,"order_id":"bench-me-7627","released_minor":0,"settled_at_ms":1796628430420,"settlement_id":"stl_tok_01a24f663e44B6j6kPqjt3qGRObKuKbl4KP1","transfers":["tr_tok_01a24f663e44B6j6kPqjt3qGRObKuKbl4KP1_pay","tr_tok_01a24f663e44B6j6kPqjt3qGRObKuKbl4KP1_fee"],"version":1}"#;
        for text in [settled, "{}", "{\"ünïcode\":\"✓\"}", &"x".repeat(100_000)] {
            let packed = pack_body(text);
            assert_eq!(packed[0], ZSTD_DICT_1);
            assert_eq!(unpack_text(&packed).unwrap(), text);
        }
        let packed = pack_body(settled);
        assert!(packed.len() * 2 < settled.len(), "{} of {} bytes", packed.len(), settled.len());
        let mut plain = vec![PLAIN];
        plain.extend_from_slice(settled.as_bytes());
        assert_eq!(unpack_body(&plain).unwrap(), unpack_body(&packed).unwrap());
    }

    #[test]
    fn damaged_bodies_are_refused_not_guessed() {
        assert_eq!(unpack_text(&[]), Err(PackedError::Empty));
        assert_eq!(unpack_text(&[7, 1, 2]), Err(PackedError::UnknownFormat(7)));
        let mut packed = pack_body(r#"{"a":"some text that is long enough to compress a little"}"#);
        let last = packed.len() - 1;
        packed.truncate(last);
        assert!(matches!(unpack_text(&packed), Err(PackedError::Corrupt(_))));
        assert!(matches!(unpack_body(&[PLAIN, b'{']), Err(PackedError::NotJson(_))));
    }

    #[test]
    fn hashes_are_stored_as_their_bytes() {
        let hex = "11cdfe9725ebdef00b2b040877e04a15aec8fe9e3248c51c2130b7caa8cef752";
        assert_eq!(hash_hex(&hash_bytes(hex).unwrap()), hex);
        assert_eq!(hash_bytes(&hex.to_uppercase()), None, "the chain spells hashes in lower case");
        assert_eq!(hash_bytes("same-hash"), None);
        assert_eq!(hash_bytes(&hex[..62]), None);
    }
}
