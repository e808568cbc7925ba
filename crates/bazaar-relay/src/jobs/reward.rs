//! What a job pays: `["reward", "<amount_minor>", "<poster>"]` for a bounty
//! funded at the poster's registry before the job was published, or
//! `["reward", "none"]` said explicitly. The relay stores the tag as any other;
//! the registry holding the bounty is what makes it true (`bty_<job id>`).

use crate::event::Event;

/// The tag's name.
pub const REWARD_TAG: &str = "reward";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobReward {
    /// The job pays nothing, and says so.
    None,
    /// A bounty of `amount_minor` ledger units funded by `poster` (a member id).
    Bounty { amount_minor: u64, poster: String },
}

impl JobReward {
    pub fn tag(&self) -> Vec<String> {
        match self {
            JobReward::None => vec![REWARD_TAG.into(), "none".into()],
            JobReward::Bounty { amount_minor, poster } => {
                vec![REWARD_TAG.into(), amount_minor.to_string(), poster.clone()]
            }
        }
    }

    /// The job's reward tag, read strictly; `None` when absent or malformed.
    pub fn of(event: &Event) -> Option<JobReward> {
        let tag = event.tags.iter().find(|t| t.first().map(String::as_str) == Some(REWARD_TAG))?;
        match tag.as_slice() {
            [_, none] if none == "none" => Some(JobReward::None),
            [_, amount, poster] => {
                let amount_minor = amount.parse::<u64>().ok().filter(|a| *a > 0 && amount == &a.to_string())?;
                (!poster.is_empty()).then(|| JobReward::Bounty { amount_minor, poster: poster.clone() })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reward_tags_read_back_and_malformed_ones_are_refused() {
        let signer = crate::event::Signer::generate(&bazaar_types::SeededEntropy::new(3));
        for reward in [JobReward::None, JobReward::Bounty { amount_minor: 500, poster: "did:key:z6M".into() }] {
            let event = signer.sign(1, 5_905, vec![reward.tag()], "");
            assert_eq!(JobReward::of(&event), Some(reward));
        }
        for bad in [vec!["reward"], vec!["reward", "0", "p"], vec!["reward", "05", "p"], vec!["reward", "5", ""]] {
            let event = signer.sign(1, 5_905, vec![bad.iter().map(|s| s.to_string()).collect()], "");
            assert_eq!(JobReward::of(&event), None, "{bad:?}");
        }
    }
}
