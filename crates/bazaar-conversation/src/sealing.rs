//! Sealed channels, sans-IO: the envelope a sealed message travels in, the
//! bytes an author signs, and sealing and opening for clients. The registry
//! only checks shapes and signatures; it never holds a key that opens a body.
//! The wire format is `docs/sealing.md`; `tests/sealing/interop.mjs` speaks it
//! with npm `@hpke/core`.
//!
//! HPKE (RFC 9180) base mode, DHKEM(X25519, HKDF-SHA256) / HKDF-SHA256 /
//! ChaCha20-Poly1305 wraps a fresh content key per recipient; the body is
//! ChaCha20-Poly1305 under that key, once.

use base64::Engine as _;
use bazaar_types::limits::{MESSAGE_BODY_BYTES_MAX, SEALED_CHANNEL_MEMBERS_MAX};
use bazaar_types::MemberId;
use chacha20poly1305::aead::{Aead as _, KeyInit, Payload};
use chacha20poly1305::ChaCha20Poly1305;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use hpke::{Deserializable, Kem as _, OpModeR, OpModeS, Serializable};
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::model::ChannelId;
pub use crate::model::{SealedBody, SealedFor, SealingKey};

type Kem = hpke::kem::X25519HkdfSha256;
type Kdf = hpke::kdf::HkdfSha256;
type Aead = hpke::aead::ChaCha20Poly1305;

/// The envelope version this module writes and the registry accepts.
pub const SEALED_VERSION: u8 = 1;
/// HPKE `info` for wrapping a content key, and the prefix of the body's AAD.
const SEALED_INFO: &str = "bazaar/sealed/v1";
const SEALING_KEY_LABEL: &str = "bazaar/sealing-key/v1";
const MESSAGE_LABEL: &str = "bazaar/message/v1";
const NONCE_LEN: usize = 12;
const CONTENT_KEY_LEN: usize = 32;
const TAG_LEN: usize = 16;
const X25519_KEY_LEN: usize = 32;
/// The largest body ciphertext: the largest plaintext body and its tag.
pub const SEALED_CIPHERTEXT_BYTES_MAX: usize = MESSAGE_BODY_BYTES_MAX + TAG_LEN;

/// Why sealing, opening or a shape check failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    #[error("{0}")]
    Shape(String),
    #[error("this envelope has no entry for {0}")]
    NotARecipient(MemberId),
    #[error("the envelope does not open with this key (wrong key, or tampered)")]
    OpenFailed,
    #[error("the opened body is not UTF-8")]
    NotText,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn unb64(field: &str, text: &str, len: Option<usize>) -> Result<Vec<u8>, SealError> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|_| SealError::Shape(format!("{field} is not base64url without padding")))?;
    match len {
        Some(len) if bytes.len() != len => {
            Err(SealError::Shape(format!("{field} must be {len} bytes; it is {}", bytes.len())))
        }
        _ => Ok(bytes),
    }
}

/// The operating system's randomness (rand 0.8's `OsRng`) under the
/// `rand_core` traits this `hpke` release asks for.
struct SystemRandom;

impl hpke::rand_core::RngCore for SystemRandom {
    fn next_u32(&mut self) -> u32 {
        rand::rngs::OsRng.next_u32()
    }
    fn next_u64(&mut self) -> u64 {
        rand::rngs::OsRng.next_u64()
    }
    fn fill_bytes(&mut self, destination: &mut [u8]) {
        rand::rngs::OsRng.fill_bytes(destination);
    }
}

impl hpke::rand_core::CryptoRng for SystemRandom {}

/// A client's sealing key pair.
pub struct SealingSecret {
    secret: <Kem as hpke::Kem>::PrivateKey,
    public: <Kem as hpke::Kem>::PublicKey,
}

impl SealingSecret {
    /// The key pair Bazaar's clients derive from an identity seed:
    /// `DeriveKeyPair(SHA-256("bazaar/sealing-key/v1" ‖ seed))`.
    pub fn derive(identity: &SigningKey) -> SealingSecret {
        let mut hasher = Sha256::new();
        hasher.update(SEALING_KEY_LABEL.as_bytes());
        hasher.update(identity.to_bytes());
        let (secret, public) = Kem::derive_keypair(&hasher.finalize());
        SealingSecret { secret, public }
    }

    /// The public key as published (base64url).
    pub fn public_key(&self) -> String {
        b64(&self.public.to_bytes())
    }
}

/// What an identity key signs to publish a sealing key.
pub fn sealing_key_message(member: &MemberId, public_key: &str) -> Vec<u8> {
    format!("{SEALING_KEY_LABEL}\n{member}\n{public_key}").into_bytes()
}

/// A sealing key publication, signed by `identity` for `member`.
pub fn sign_sealing_key(identity: &SigningKey, member: &MemberId, public_key: &str) -> String {
    b64(&identity.sign(&sealing_key_message(member, public_key)).to_bytes())
}

/// A published key is 32 bytes of base64url.
pub fn check_public_key(public_key: &str) -> Result<(), SealError> {
    unb64("public_key", public_key, Some(X25519_KEY_LEN)).map(|_| ())
}

/// What a message's signature covers.
pub enum Content<'a> {
    Plain(&'a str),
    Sealed(&'a SealedBody),
}

/// The bytes an author signs for a message in `channel`.
pub fn signing_bytes(channel: &ChannelId, author: &MemberId, content: &Content<'_>) -> Vec<u8> {
    let mut hasher = Sha256::new();
    match content {
        Content::Plain(body) => hasher.update(body.as_bytes()),
        Content::Sealed(sealed) => {
            hasher.update(format!("{}.{}", sealed.nonce, sealed.ciphertext));
            for to in &sealed.recipients {
                hasher.update(format!("\n{}.{}.{}.{}", to.member, to.key, to.enc, to.wrapped));
            }
        }
    }
    format!("{MESSAGE_LABEL}\n{channel}\n{author}\n{}", hex::encode(hasher.finalize())).into_bytes()
}

pub fn sign_message(identity: &SigningKey, channel: &ChannelId, author: &MemberId, content: &Content<'_>) -> String {
    b64(&identity.sign(&signing_bytes(channel, author, content)).to_bytes())
}

/// Checks a base64url Ed25519 signature over `message` by `key`.
pub fn verify_signature(key: &VerifyingKey, message: &[u8], signature: &str) -> bool {
    let Ok(bytes) = unb64("signature", signature, Some(Signature::BYTE_SIZE)) else { return false };
    let Ok(array) = <[u8; Signature::BYTE_SIZE]>::try_from(bytes.as_slice()) else { return false };
    key.verify(message, &Signature::from_bytes(&array)).is_ok()
}

fn body_aad(channel: &ChannelId, author: &MemberId) -> Vec<u8> {
    format!("{SEALED_INFO}\n{channel}\n{author}").into_bytes()
}

fn wrap_aad(channel: &ChannelId, member: &MemberId) -> Vec<u8> {
    format!("{channel}\n{member}").into_bytes()
}

/// The checks the registry makes without any key: version, sizes, encodings,
/// each recipient once.
pub fn check_shape(sealed: &SealedBody) -> Result<(), SealError> {
    if sealed.v != SEALED_VERSION {
        return Err(SealError::Shape(format!("envelope version {} is not {SEALED_VERSION}", sealed.v)));
    }
    unb64("nonce", &sealed.nonce, Some(NONCE_LEN))?;
    let ciphertext = unb64("ciphertext", &sealed.ciphertext, None)?;
    if ciphertext.len() <= TAG_LEN || ciphertext.len() > SEALED_CIPHERTEXT_BYTES_MAX {
        return Err(SealError::Shape(format!(
            "ciphertext must be {} to {SEALED_CIPHERTEXT_BYTES_MAX} bytes; it is {}",
            TAG_LEN + 1,
            ciphertext.len()
        )));
    }
    if sealed.recipients.is_empty() || sealed.recipients.len() > SEALED_CHANNEL_MEMBERS_MAX {
        return Err(SealError::Shape(format!("an envelope has 1 to {SEALED_CHANNEL_MEMBERS_MAX} recipients")));
    }
    for (index, to) in sealed.recipients.iter().enumerate() {
        if sealed.recipients[..index].iter().any(|earlier| earlier.member == to.member) {
            return Err(SealError::Shape(format!("{} is a recipient twice", to.member)));
        }
        unb64("key", &to.key, Some(X25519_KEY_LEN))?;
        unb64("enc", &to.enc, Some(X25519_KEY_LEN))?;
        unb64("wrapped", &to.wrapped, Some(CONTENT_KEY_LEN + TAG_LEN))?;
    }
    Ok(())
}

/// Seals `plaintext` by `author` in `channel` for each `(member, published key)`.
pub fn seal(
    channel: &ChannelId,
    author: &MemberId,
    plaintext: &str,
    recipients: &[(MemberId, String)],
) -> Result<SealedBody, SealError> {
    let mut rng = SystemRandom;
    let mut content_key = [0u8; CONTENT_KEY_LEN];
    let mut nonce = [0u8; NONCE_LEN];
    rand::rngs::OsRng.fill_bytes(&mut content_key);
    rand::rngs::OsRng.fill_bytes(&mut nonce);
    let cipher = ChaCha20Poly1305::new((&content_key).into());
    let aad = body_aad(channel, author);
    let ciphertext = cipher
        .encrypt((&nonce).into(), Payload { msg: plaintext.as_bytes(), aad: &aad })
        .map_err(|_| SealError::Shape("the body could not be encrypted".into()))?;
    let mut sealed_for = Vec::with_capacity(recipients.len());
    for (member, key) in recipients {
        let public = <Kem as hpke::Kem>::PublicKey::from_bytes(&unb64("key", key, Some(X25519_KEY_LEN))?)
            .map_err(|_| SealError::Shape(format!("{member}'s sealing key is not an X25519 key")))?;
        let (enc, wrapped) = hpke::single_shot_seal::<Aead, Kdf, Kem, _>(
            &OpModeS::Base,
            &public,
            SEALED_INFO.as_bytes(),
            &content_key,
            &wrap_aad(channel, member),
            &mut rng,
        )
        .map_err(|_| SealError::Shape(format!("the content key could not be sealed to {member}")))?;
        sealed_for.push(SealedFor {
            member: member.clone(),
            key: key.clone(),
            enc: b64(&enc.to_bytes()),
            wrapped: b64(&wrapped),
        });
    }
    Ok(SealedBody { v: SEALED_VERSION, nonce: b64(&nonce), ciphertext: b64(&ciphertext), recipients: sealed_for })
}

/// Opens a sealed body as `member`, holding `secret`.
pub fn open(
    channel: &ChannelId,
    author: &MemberId,
    member: &MemberId,
    secret: &SealingSecret,
    sealed: &SealedBody,
) -> Result<String, SealError> {
    check_shape(sealed)?;
    let to = sealed
        .recipients
        .iter()
        .find(|to| to.member == *member)
        .ok_or_else(|| SealError::NotARecipient(member.clone()))?;
    let enc = <Kem as hpke::Kem>::EncappedKey::from_bytes(&unb64("enc", &to.enc, Some(X25519_KEY_LEN))?)
        .map_err(|_| SealError::OpenFailed)?;
    let content_key = hpke::single_shot_open::<Aead, Kdf, Kem>(
        &OpModeR::Base,
        &secret.secret,
        &enc,
        SEALED_INFO.as_bytes(),
        &unb64("wrapped", &to.wrapped, None)?,
        &wrap_aad(channel, member),
    )
    .map_err(|_| SealError::OpenFailed)?;
    let key: [u8; CONTENT_KEY_LEN] = content_key.as_slice().try_into().map_err(|_| SealError::OpenFailed)?;
    let nonce: [u8; NONCE_LEN] =
        unb64("nonce", &sealed.nonce, Some(NONCE_LEN))?.as_slice().try_into().map_err(|_| SealError::OpenFailed)?;
    let plaintext = ChaCha20Poly1305::new((&key).into())
        .decrypt(
            (&nonce).into(),
            Payload { msg: &unb64("ciphertext", &sealed.ciphertext, None)?, aad: &body_aad(channel, author) },
        )
        .map_err(|_| SealError::OpenFailed)?;
    String::from_utf8(plaintext).map_err(|_| SealError::NotText)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(n: u8) -> (SigningKey, MemberId, SealingSecret) {
        let identity = SigningKey::from_bytes(&[n; 32]);
        let sealing = SealingSecret::derive(&identity);
        (identity, MemberId::from(format!("did:key:z{n}").as_str()), sealing)
    }

    #[test]
    fn a_sealed_body_opens_for_each_recipient_and_nobody_else() {
        let channel = ChannelId("ch_00".into());
        let (alice_id, alice, alice_key) = member(1);
        let (_, bob, bob_key) = member(2);
        let (_, eve, eve_key) = member(3);
        let to = vec![(alice.clone(), alice_key.public_key()), (bob.clone(), bob_key.public_key())];
        let sealed = seal(&channel, &alice, "forty, final", &to).unwrap();
        check_shape(&sealed).unwrap();
        assert_eq!(open(&channel, &alice, &alice, &alice_key, &sealed).unwrap(), "forty, final");
        assert_eq!(open(&channel, &alice, &bob, &bob_key, &sealed).unwrap(), "forty, final");
        assert_eq!(open(&channel, &alice, &eve, &eve_key, &sealed), Err(SealError::NotARecipient(eve.clone())));
        // Eve copying Bob's entry does not help her: the key is sealed to Bob's.
        assert_eq!(open(&channel, &alice, &bob, &eve_key, &sealed), Err(SealError::OpenFailed));
        // The body is bound to its channel and author.
        let elsewhere = ChannelId("ch_01".into());
        assert_eq!(open(&elsewhere, &alice, &bob, &bob_key, &sealed), Err(SealError::OpenFailed));
        assert_eq!(open(&channel, &bob, &bob, &bob_key, &sealed), Err(SealError::OpenFailed));
        let signature = sign_message(&alice_id, &channel, &alice, &Content::Sealed(&sealed));
        let signed = signing_bytes(&channel, &alice, &Content::Sealed(&sealed));
        assert!(verify_signature(&alice_id.verifying_key(), &signed, &signature));
        let mut tampered = sealed.clone();
        tampered.recipients.reverse();
        let reordered = signing_bytes(&channel, &alice, &Content::Sealed(&tampered));
        assert!(!verify_signature(&alice_id.verifying_key(), &reordered, &signature));
    }

    #[test]
    fn shapes_are_checked_without_keys() {
        let channel = ChannelId("ch_00".into());
        let (_, alice, alice_key) = member(1);
        let sealed = seal(&channel, &alice, "x", &[(alice.clone(), alice_key.public_key())]).unwrap();
        let mut twice = sealed.clone();
        twice.recipients.push(twice.recipients[0].clone());
        assert!(matches!(check_shape(&twice), Err(SealError::Shape(_))));
        let mut short_nonce = sealed.clone();
        short_nonce.nonce = b64(&[0; 8]);
        assert!(matches!(check_shape(&short_nonce), Err(SealError::Shape(_))));
        let mut version = sealed;
        version.v = 2;
        assert!(matches!(check_shape(&version), Err(SealError::Shape(_))));
    }

    /// The RFC 8032 test-1 seed, derived and signed by npm `@hpke/core` and
    /// `node:crypto` (tests/sealing/interop.mjs): the same key, the same signature.
    #[test]
    fn derivation_and_key_signature_match_the_javascript_client() {
        let seed = hex::decode("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60").unwrap();
        let identity = SigningKey::from_bytes(&seed.try_into().unwrap());
        let public = SealingSecret::derive(&identity).public_key();
        assert_eq!(public, "zv7laTXKoJ3_95JxZxIDlBcOGujAUDXkXnJDYvdVoB8");
        let member = MemberId::from("did:key:z6MktwupdmLXVVqTzCw4i46r4uGyosGXRnR3XjN4Zq7oMMsw");
        assert_eq!(
            sign_sealing_key(&identity, &member, &public),
            "oahGB_p3jNXgOj0mN93-RPu833Ly-f9PA6QF0ebi0L1VC_GolPiGri3WAqR_4Ev8eq2udhCzOorCPYJrFYyYCw"
        );
    }

    #[test]
    fn the_derived_sealing_key_is_stable() {
        let (identity, _, key) = member(7);
        assert_eq!(SealingSecret::derive(&identity).public_key(), key.public_key());
        assert_ne!(member(8).2.public_key(), key.public_key());
    }
}
