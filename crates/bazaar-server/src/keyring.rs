//! The registry's signing keys: the genesis key (whose DID is the registry's
//! identity) and every key rotated to since, each handed over by a signature
//! of the key before it. The public half is published as the key history;
//! tokens and passports signed by an old key stay verifiable through it.

use bazaar_core::crypto::{did_key, sign};
use bazaar_core::federation::{key_valid_at, rotation_message, KeyEntry};
use bazaar_core::token::{self, TokenClaims, TokenError};
use bazaar_store::StoreError;
use bazaar_types::{MemberId, Timestamp};
use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

/// One rotated key as stored (the seed never leaves the store and this process).
#[derive(Serialize, Deserialize)]
struct StoredKey {
    seed_hex: String,
    entry: KeyEntry,
}

pub struct KeyRing {
    pub current: SigningKey,
    /// Oldest first; the last entry is current (`until_ms: None`).
    pub history: Vec<KeyEntry>,
    /// The same keys, decoded once.
    pub public: Vec<(KeyEntry, VerifyingKey)>,
}

impl KeyRing {
    pub fn load(genesis_seed: &[u8; 32], records: &[String]) -> Result<KeyRing, StoreError> {
        let genesis = SigningKey::from_bytes(genesis_seed);
        let mut history =
            vec![KeyEntry { did: did_key(&genesis.verifying_key()), from_ms: 0, until_ms: None, sig: None }];
        let mut current = genesis;
        for record in records {
            let stored: StoredKey =
                serde_json::from_str(record).map_err(|e| StoreError::Corrupt(format!("rotated key record: {e}")))?;
            let seed: [u8; 32] = hex::decode(&stored.seed_hex)
                .ok()
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| StoreError::Corrupt("rotated key seed".into()))?;
            current = SigningKey::from_bytes(&seed);
            if did_key(&current.verifying_key()) != stored.entry.did {
                return Err(StoreError::Corrupt("a rotated key's seed does not match its DID".into()));
            }
            history.last_mut().expect("genesis first").until_ms = Some(stored.entry.from_ms);
            history.push(KeyEntry { until_ms: None, ..stored.entry });
        }
        let public = history
            .iter()
            .map(|k| {
                let key = bazaar_core::crypto::public_key_from_did(&k.did)
                    .map_err(|_| StoreError::Corrupt(format!("key {} in the history", k.did)))?;
                Ok((k.clone(), key))
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(KeyRing { current, history, public })
    }

    /// A fresh key, handed over by the current one from `now`: the record to
    /// store, its public entry, and its number in the history.
    pub fn next(
        &self,
        registry: &MemberId,
        now: Timestamp,
        entropy: &dyn bazaar_types::Entropy,
    ) -> (String, KeyEntry, u32) {
        let mut seed = [0u8; 32];
        entropy.fill(&mut seed);
        let key = SigningKey::from_bytes(&seed);
        let did = did_key(&key.verifying_key());
        // Never before the current key's own start, so periods stay ordered.
        let from_ms = now.ms().max(self.history.last().map(|k| k.from_ms).unwrap_or(0));
        let sig = sign(&self.current, &rotation_message(registry.as_str(), &did, from_ms));
        let entry = KeyEntry { did, from_ms, until_ms: None, sig: Some(sig) };
        let record = serde_json::to_string(&StoredKey { seed_hex: hex::encode(seed), entry: entry.clone() })
            .expect("key records serialize");
        (record, entry, self.history.len() as u32)
    }
}

/// Checks a token's signature against whichever key in `history` was current
/// when it was issued (its `iat_ms`).
pub fn decode_token_with(text: &str, history: &[KeyEntry]) -> Result<TokenClaims, TokenError> {
    let keys: Vec<(KeyEntry, VerifyingKey)> = history
        .iter()
        .filter_map(|k| bazaar_core::crypto::public_key_from_did(&k.did).ok().map(|v| (k.clone(), v)))
        .collect();
    decode_token_among(text, &keys)
}

/// [`decode_token_with`] over keys already decoded (the hot path keeps them).
pub fn decode_token_among(text: &str, keys: &[(KeyEntry, VerifyingKey)]) -> Result<TokenClaims, TokenError> {
    let claims = token::peek(text)?;
    // Newest first: around a rotation two keys may both cover the issue time.
    for (entry, public) in keys.iter().rev() {
        if key_valid_at(std::slice::from_ref(entry), &entry.did, claims.iat_ms.ms()).is_none() {
            continue;
        }
        if token::check_signature(text, public).is_ok() {
            return Ok(claims);
        }
    }
    Err(TokenError::BadSignature)
}
