//! Reputation's own event body: `passport.issued`, the figures a passport this
//! registry signed claims (written by federation when it records a passport;
//! `bazaar audit` recomputes them at `as_of_seq`).

use super::{IssuedFigures, ReputationEvent};
use crate::kernel::batch::EventBody;
use serde::{Deserialize, Serialize};

/// `passport.issued`: these figures, for this subject, as of that seq, under this credential id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassportIssued {
    #[serde(flatten)]
    pub issued: IssuedFigures,
    pub credential_id: String,
    pub valid_until_ms: i64,
}

impl EventBody for PassportIssued {
    type Kind = ReputationEvent;
    fn kind(&self) -> ReputationEvent {
        ReputationEvent::PassportIssued
    }
}
