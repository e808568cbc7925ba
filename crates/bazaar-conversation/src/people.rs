//! People in the browser: their passkeys (WebAuthn credentials, stored as the
//! JSON the WebAuthn library keeps), the short-lived state of a registration or
//! sign-in ceremony, and the sessions a sign-in opens. The plane stores them;
//! the server runs the ceremonies (`bazaar-server`'s `people`). Only a
//! session's SHA-256 is kept, never the cookie value itself.

use bazaar_types::limits::{PASSKEYS_PER_MEMBER_MAX, SESSION_TTL_S};
use bazaar_types::{MemberId, Timestamp};

use crate::engine::{Engine, PeopleRows};
pub use crate::model::{Ceremony, PasskeyRecord, Session};
use crate::store::{ConversationError, Result};

pub trait PeopleStore {
    /// Keeps a passkey that finished registration; `passkey_exists` if the
    /// credential id is registered already (to anyone).
    fn add_passkey(&self, passkey: PasskeyRecord) -> Result<PasskeyRecord>;
    fn passkey(&self, credential_id: &str) -> Result<Option<PasskeyRecord>>;
    fn passkeys_of(&self, member: &MemberId) -> Result<Vec<PasskeyRecord>>;
    /// Writes a passkey's new state (its counter) after a sign-in.
    fn passkey_used(&self, credential_id: &str, passkey: String) -> Result<()>;
    fn begin_ceremony(&self, ceremony: Ceremony) -> Result<()>;
    /// The ceremony, removed so it is used at most once; `None` if unknown or expired.
    fn take_ceremony(&self, id: &str) -> Result<Option<Ceremony>>;
    /// Opens a session for `member` for `SESSION_TTL_S`; revokes `replacing` (the
    /// session the browser held before signing in again), if any.
    fn open_session(&self, hash: String, member: &MemberId, replacing: Option<String>) -> Result<Session>;
    /// The session if it is live at `now`.
    fn session(&self, hash: &str, now: Timestamp) -> Result<Option<Session>>;
    fn revoke_session(&self, hash: &str) -> Result<()>;
}

impl<E: Engine> PeopleStore for E {
    fn add_passkey(&self, passkey: PasskeyRecord) -> Result<PasskeyRecord> {
        self.write(move |tx, now| {
            if tx.load_passkey(&passkey.credential_id)?.is_some() {
                return Err(ConversationError::PasskeyExists);
            }
            if tx.passkeys_of(&passkey.member)?.len() >= PASSKEYS_PER_MEMBER_MAX {
                return Err(ConversationError::TooManyPasskeys { max: PASSKEYS_PER_MEMBER_MAX });
            }
            let passkey = PasskeyRecord { created_at: now, last_used_at: None, ..passkey };
            tx.insert_passkey(&passkey)?;
            Ok(passkey)
        })
    }

    fn passkey(&self, credential_id: &str) -> Result<Option<PasskeyRecord>> {
        self.read(|tx| tx.load_passkey(credential_id))
    }

    fn passkeys_of(&self, member: &MemberId) -> Result<Vec<PasskeyRecord>> {
        self.read(|tx| tx.passkeys_of(member))
    }

    fn passkey_used(&self, credential_id: &str, passkey: String) -> Result<()> {
        let credential_id = credential_id.to_string();
        self.write(move |tx, now| {
            let Some(found) = tx.load_passkey(&credential_id)? else { return Ok(()) };
            tx.update_passkey(&PasskeyRecord { passkey, last_used_at: Some(now), ..found })
        })
    }

    fn begin_ceremony(&self, ceremony: Ceremony) -> Result<()> {
        self.write(move |tx, _now| tx.insert_ceremony(&ceremony))
    }

    fn take_ceremony(&self, id: &str) -> Result<Option<Ceremony>> {
        let id = id.to_string();
        self.write(move |tx, now| Ok(tx.take_ceremony(&id)?.filter(|ceremony| now < ceremony.expires_at)))
    }

    fn open_session(&self, hash: String, member: &MemberId, replacing: Option<String>) -> Result<Session> {
        let member = member.clone();
        self.write(move |tx, now| {
            if let Some(old) = replacing {
                if let Some(session) = tx.load_session(&old)? {
                    tx.update_session(&Session { revoked_at: Some(now), ..session })?;
                }
            }
            let session =
                Session { hash, member, created_at: now, expires_at: now.plus_s(SESSION_TTL_S), revoked_at: None };
            tx.insert_session(&session)?;
            Ok(session)
        })
    }

    fn session(&self, hash: &str, now: Timestamp) -> Result<Option<Session>> {
        self.read(|tx| Ok(tx.load_session(hash)?.filter(|session| session.is_live(now))))
    }

    fn revoke_session(&self, hash: &str) -> Result<()> {
        let hash = hash.to_string();
        self.write(move |tx, now| {
            if let Some(session) = tx.load_session(&hash)? {
                if session.revoked_at.is_none() {
                    tx.update_session(&Session { revoked_at: Some(now), ..session })?;
                }
            }
            Ok(())
        })
    }
}
