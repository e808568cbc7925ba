//! What bounty commands answer.

use super::flow::{Bounty, Reward};
use serde::Serialize;

crate::receipt_set! {
    /// Every success answer of a bounty command.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize)]
    #[serde(untagged)]
    pub enum Receipt {
        Bounty(Bounty),
        Reward(Reward),
    }
}
