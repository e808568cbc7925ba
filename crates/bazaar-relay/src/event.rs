//! A Nostr event (NIP-01): its wire form, its canonical id, and its BIP-340
//! signature. The id is always recomputed from the parsed values, never from
//! the bytes a client sent: `serde_json` writes exactly the escapes NIP-01
//! lists (and `\u00xx` for the other controls), which are the bytes
//! `JSON.stringify` gives nostr-tools.

use std::fmt;
use std::sync::LazyLock;

use bazaar_types::Entropy;
use secp256k1::{schnorr, Keypair, Secp256k1, XOnlyPublicKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::limits::{CONTENT_BYTES_MAX, EVENT_TAGS_MAX, TAG_VALUES_MAX};

static SECP: LazyLock<Secp256k1<secp256k1::All>> = LazyLock::new(Secp256k1::new);

/// 32 bytes shown as 64 lowercase hex characters: an event id or an x-only public key.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hex32(pub [u8; 32]);

/// An event's id: the sha256 of its canonical serialisation.
pub type EventId = Hex32;
/// An author's x-only secp256k1 public key.
pub type PublicKey = Hex32;

impl Hex32 {
    /// Exactly 64 lowercase hex characters (NIP-01 forbids uppercase and prefixes).
    pub fn parse(text: &str) -> Option<Hex32> {
        if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return None;
        }
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(text, &mut bytes).ok()?;
        Some(Hex32(bytes))
    }

    pub fn to_hex(self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for Hex32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for Hex32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", &hex::encode(self.0)[..16])
    }
}

impl Serialize for Hex32 {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Hex32 {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Hex32::parse(&text).ok_or_else(|| serde::de::Error::custom("expected 64 lowercase hex characters"))
    }
}

/// A signed event, its fields checked for shape (not yet for id or signature: see [`Event::verify`]).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub id: EventId,
    pub pubkey: PublicKey,
    pub created_at: u64,
    pub kind: u16,
    pub tags: Vec<Vec<String>>,
    pub content: String,
    #[serde(with = "sig_hex")]
    pub sig: [u8; 64],
}

/// The event as the registry's API carries it (`bazaar_wire::nostr::SignedEvent`): the same members, as written.
impl From<&Event> for bazaar_wire::nostr::SignedEvent {
    fn from(event: &Event) -> Self {
        bazaar_wire::nostr::SignedEvent {
            id: event.id.to_hex(),
            pubkey: event.pubkey.to_hex(),
            created_at: event.created_at,
            kind: event.kind,
            tags: event.tags.clone(),
            content: event.content.clone(),
            sig: hex::encode(event.sig),
        }
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Event({:?} kind {} by {:?} at {})", self.id, self.kind, self.pubkey, self.created_at)
    }
}

mod sig_hex {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(sig: &[u8; 64], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&hex::encode(sig))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<[u8; 64], D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        let lower = text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        let mut sig = [0u8; 64];
        if text.len() != 128 || !lower || hex::decode_to_slice(&*text, &mut sig).is_err() {
            return Err(serde::de::Error::custom("sig must be 128 lowercase hex characters"));
        }
        Ok(sig)
    }
}

/// Why an event is not admissible on its own terms; each renders as an `invalid:` reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("invalid: event is not well-formed JSON of the NIP-01 shape ({0})")]
    Shape(String),
    #[error("invalid: event id does not match its canonical serialisation")]
    Id,
    #[error("invalid: signature does not verify against the event id and pubkey")]
    Signature,
    #[error("invalid: pubkey is not a point on secp256k1")]
    PublicKey,
    #[error("invalid: content is longer than {CONTENT_BYTES_MAX} bytes")]
    ContentTooLong,
    #[error("invalid: more than {EVENT_TAGS_MAX} tags")]
    TooManyTags,
    #[error("invalid: a tag is empty or has more than {TAG_VALUES_MAX} values")]
    TagShape,
}

impl Event {
    /// Parses the JSON object of an `EVENT` message, checking shape and size limits only.
    pub fn parse(json: &str) -> Result<Event, Invalid> {
        let event: Event = serde_json::from_str(json).map_err(|e| Invalid::Shape(e.to_string()))?;
        event.check_size()?;
        Ok(event)
    }

    fn check_size(&self) -> Result<(), Invalid> {
        if self.content.len() > CONTENT_BYTES_MAX {
            return Err(Invalid::ContentTooLong);
        }
        if self.tags.len() > EVENT_TAGS_MAX {
            return Err(Invalid::TooManyTags);
        }
        if self.tags.iter().any(|tag| tag.is_empty() || tag.len() > TAG_VALUES_MAX) {
            return Err(Invalid::TagShape);
        }
        Ok(())
    }

    /// `sha256` of `[0, pubkey, created_at, kind, tags, content]` serialised with no whitespace.
    pub fn canonical_id(
        pubkey: &PublicKey,
        created_at: u64,
        kind: u16,
        tags: &[Vec<String>],
        content: &str,
    ) -> EventId {
        let bytes = serde_json::to_vec(&(0u8, pubkey, created_at, kind, tags, content))
            .expect("a tuple of strings and numbers serialises");
        Hex32(Sha256::digest(bytes).into())
    }

    /// The id matches the fields, and the signature is the author's over that id.
    pub fn verify(&self) -> Result<(), Invalid> {
        if Event::canonical_id(&self.pubkey, self.created_at, self.kind, &self.tags, &self.content) != self.id {
            return Err(Invalid::Id);
        }
        let key = XOnlyPublicKey::from_byte_array(&self.pubkey.0).map_err(|_| Invalid::PublicKey)?;
        let sig = schnorr::Signature::from_byte_array(self.sig);
        SECP.verify_schnorr(&sig, &self.id.0, &key).map_err(|_| Invalid::Signature)
    }

    /// The event as one line of JSON, the form it is stored and sent in.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an event serialises")
    }

    /// The first value of every tag named `name` (NIP-01 indexes only the first value).
    pub fn tag_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.tags.iter().filter(move |tag| tag[0] == name).filter_map(|tag| tag.get(1).map(String::as_str))
    }

    /// The first value of the first tag named `name`.
    pub fn tag<'a>(&'a self, name: &str) -> Option<&'a str> {
        self.tags.iter().filter(|tag| tag[0] == name).find_map(|tag| tag.get(1).map(String::as_str))
    }

    /// Whether any tag is exactly `[name]` (e.g. NIP-70's `["-"]`).
    pub fn has_flag(&self, name: &str) -> bool {
        self.tags.iter().any(|tag| tag.len() == 1 && tag[0] == name)
    }

    /// NIP-40: the `expiration` tag's instant, if it has a readable one.
    pub fn expires_at(&self) -> Option<u64> {
        self.tag("expiration").and_then(|value| value.parse().ok())
    }

    /// The `d` tag's value for an addressable event (empty when absent).
    pub fn d_tag(&self) -> &str {
        self.tag("d").unwrap_or("")
    }
}

/// An event with its JSON, serialised once: what the store writes and what
/// live subscribers are sent are the same bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    pub event: Event,
    pub json: String,
}

impl Encoded {
    pub fn of(event: Event) -> Encoded {
        let json = event.to_json();
        Encoded { event, json }
    }

    /// Each event encoded (for callers holding plain events: tests, tools).
    pub fn all(events: &[Event]) -> Vec<Encoded> {
        events.iter().cloned().map(Encoded::of).collect()
    }
}

/// A secret key that signs events: for workers, validators, the CLI and tests.
pub struct Signer {
    keypair: Keypair,
}

impl Signer {
    /// A fresh key from `entropy` (the OS source in production, a seed in tests).
    pub fn generate(entropy: &dyn Entropy) -> Signer {
        loop {
            let mut bytes = [0u8; 32];
            entropy.fill(&mut bytes);
            // A value outside the curve order (odds ~2^-128) is drawn again.
            if let Ok(keypair) = Keypair::from_seckey_slice(&*SECP, &bytes) {
                return Signer { keypair };
            }
        }
    }

    /// From 32 secret bytes (hex), as nostr-tools and the CLI keep them.
    pub fn from_secret_hex(hex_secret: &str) -> Option<Signer> {
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(hex_secret.trim(), &mut bytes).ok()?;
        Keypair::from_seckey_slice(&*SECP, &bytes).ok().map(|keypair| Signer { keypair })
    }

    pub fn secret_hex(&self) -> String {
        hex::encode(self.keypair.secret_bytes())
    }

    pub fn public_key(&self) -> PublicKey {
        Hex32(self.keypair.x_only_public_key().0.serialize())
    }

    /// Signs a new event now (`created_at` given by the caller, who holds the clock).
    pub fn sign(&self, created_at: u64, kind: u16, tags: Vec<Vec<String>>, content: impl Into<String>) -> Event {
        let content = content.into();
        let pubkey = self.public_key();
        let id = Event::canonical_id(&pubkey, created_at, kind, &tags, &content);
        // Deterministic nonce (BIP-340 allows omitting aux randomness): no ambient RNG.
        let sig = SECP.sign_schnorr_no_aux_rand(&id.0, &self.keypair);
        Event { id, pubkey, created_at, kind, tags, content, sig: sig.to_byte_array() }
    }
}

/// Builds a tag from string slices: `tag(&["e", id])`.
pub fn tag(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| (*v).to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer(seed: u64) -> Signer {
        Signer::generate(&bazaar_types::SeededEntropy::new(seed))
    }

    /// The API's form of an event writes exactly the members the relay's does, and reads back as the event.
    #[test]
    fn an_event_as_the_api_carries_it_is_the_same_json() {
        let event = signer(3).sign(1_700_000_000, 1, vec![tag(&["e", "abc"]), tag(&["t", "x"])], "hello\n🧵");
        let carried = bazaar_wire::nostr::SignedEvent::from(&event);
        let written: serde_json::Value = serde_json::from_str(&event.to_json()).unwrap();
        assert_eq!(serde_json::to_value(&carried).unwrap(), written);
        let back = Event::parse(&serde_json::to_string(&carried).unwrap()).unwrap();
        assert_eq!(back, event);
        back.verify().unwrap();
    }

    /// The id is the sha256 of exactly the bytes `JSON.stringify` writes:
    /// NIP-01's short escapes, `\u00xx` for other controls, `/`, U+2028 and
    /// astral characters verbatim. (The relay interop test signs such
    /// contents with nostr-tools and the relay accepts them.)
    #[test]
    fn canonical_ids_hash_json_stringify_bytes() {
        let pubkey = Hex32::parse("79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798").unwrap();
        let content = "q\"b\\n\nr\rt\tb\u{8}f\u{c} \u{0}\u{1f}\u{7f} / \u{2028} 🧵";
        let tags = [tag(&["t", "x"])];
        let written = serde_json::to_string(&(0u8, &pubkey, 1_700_000_000u64, 1u16, &tags, content)).unwrap();
        let expected = format!(
            "[0,\"{pubkey}\",1700000000,1,[[\"t\",\"x\"]],\"q\\\"b\\\\n\\nr\\rt\\tb\\bf\\f \\u0000\\u001f\u{7f} / \u{2028} 🧵\"]"
        );
        assert_eq!(written, expected);
        let id = Event::canonical_id(&pubkey, 1_700_000_000, 1, &tags, content);
        assert_eq!(id.0, <[u8; 32]>::from(Sha256::digest(expected.as_bytes())));
    }

    #[test]
    fn a_signed_event_verifies_and_any_change_breaks_it() {
        let author = signer(1);
        let event = author.sign(1_700_000_000, 1, vec![tag(&["t", "bazaar"])], "hello");
        event.verify().unwrap();
        let reparsed = Event::parse(&event.to_json()).unwrap();
        assert_eq!(reparsed, event);
        let mut altered = event.clone();
        altered.content.push('!');
        assert_eq!(altered.verify(), Err(Invalid::Id));
        let mut forged = event.clone();
        forged.sig[0] ^= 1;
        assert_eq!(forged.verify(), Err(Invalid::Signature));
        let other = signer(2).sign(1_700_000_000, 1, vec![tag(&["t", "bazaar"])], "hello");
        let mut stolen = other.clone();
        stolen.sig = event.sig;
        assert_eq!(stolen.verify(), Err(Invalid::Signature));
    }

    #[test]
    fn shapes_nip01_forbids_are_refused() {
        let good = signer(1).sign(1, 1, vec![], "x");
        let json = good.to_json();
        let upper = json.replace(&good.pubkey.to_hex(), &good.pubkey.to_hex().to_uppercase());
        assert!(matches!(Event::parse(&upper), Err(Invalid::Shape(_))));
        let short_id = json.replace(&good.id.to_hex(), &good.id.to_hex()[..63]);
        assert!(matches!(Event::parse(&short_id), Err(Invalid::Shape(_))));
        let float_time = json.replace("\"created_at\":1", "\"created_at\":1.5");
        assert!(matches!(Event::parse(&float_time), Err(Invalid::Shape(_))));
        let big_kind = json.replace("\"kind\":1", "\"kind\":70000");
        assert!(matches!(Event::parse(&big_kind), Err(Invalid::Shape(_))));
        let empty_tag = json.replace("\"tags\":[]", "\"tags\":[[]]");
        assert_eq!(Event::parse(&empty_tag), Err(Invalid::TagShape));
    }

    /// BIP-340's published vectors (bitcoin/bips test-vectors.csv, index 0 and 5).
    #[test]
    fn bip340_vectors() {
        let key = XOnlyPublicKey::from_byte_array(
            &<[u8; 32]>::try_from(
                hex::decode("F9308A019258C31049344F85F89D5229B531C845836F99B08601F113BCE036F9").unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
        let msg = [0u8; 32];
        let sig = schnorr::Signature::from_byte_array(
            <[u8; 64]>::try_from(hex::decode("E907831F80848D1069A5371B402410364BDF1C5F8307B0084C55F1CE2DCA821525F66A4A85EA8B71E482A74F382D2CE5EBEEE8FDB2172F477DF4900D310536C0").unwrap()).unwrap(),
        );
        SECP.verify_schnorr(&sig, &msg, &key).unwrap();
        // Vector 5: a public key not on the curve.
        let off_curve = hex::decode("EEFDEA4CDB677750A420FEE807EACF21EB9898AE79B9768766E4FAA04A2D4A34").unwrap();
        assert!(XOnlyPublicKey::from_byte_array(&<[u8; 32]>::try_from(off_curve).unwrap()).is_err());
    }
}
