//! The auditor: verifies the event chain end to end and recomputes every
//! balance from the immutable transfers. Fed page by page by `bazaar audit`.

use crate::kernel::chain::{self, ChainHead};
use crate::kernel::model::{Account, Hold, HoldState, Transfer};
use bazaar_types::{AccountId, HoldId};
use serde::Serialize;
use std::collections::HashMap;

#[derive(Debug, Default)]
pub struct Auditor {
    head: Option<ChainHead>,
    events: u64,
    transfers: u64,
    debits: HashMap<AccountId, u128>,
    credits: HashMap<AccountId, u128>,
    posted_by_hold: HashMap<HoldId, u128>,
    pending: HashMap<AccountId, u128>,
    holds: u64,
    passports_checked: u64,
    problems: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct AuditReport {
    pub ok: bool,
    pub events_verified: u64,
    pub head_seq: u64,
    pub head_hash: String,
    pub transfers: u64,
    pub accounts: u64,
    pub holds: u64,
    /// Passports whose recorded figures matched a recompute from the ledger.
    pub passports_checked: u64,
    /// Balances of `corridor:<peer>` accounts (what this registry and each peer owe each other).
    pub corridors: std::collections::BTreeMap<String, i128>,
    /// Σ posted balances over all accounts; conservation says it is 0.
    pub balance_sum_minor: i128,
    pub problems: Vec<String>,
}

impl Auditor {
    pub fn new() -> Auditor {
        Auditor::default()
    }

    pub fn events(&mut self, page: &[crate::kernel::model::Event]) {
        let head = self.head.get_or_insert_with(ChainHead::genesis);
        if let Err(error) = chain::verify_page(head, page) {
            self.problems.push(format!("event chain: {error}"));
        }
        self.events += page.len() as u64;
    }

    /// Records the outcome of the passport-figures check (see `reputation::PassportAudit`).
    pub fn passport_figures(&mut self, checked: u64, problems: Vec<String>) {
        self.passports_checked = checked;
        self.problems.extend(problems);
    }

    pub fn transfers(&mut self, page: &[Transfer]) {
        for t in page {
            *self.debits.entry(t.debit.clone()).or_default() += t.amount.0 as u128;
            *self.credits.entry(t.credit.clone()).or_default() += t.amount.0 as u128;
            if let Some(hold) = &t.hold {
                *self.posted_by_hold.entry(hold.clone()).or_default() += t.amount.0 as u128;
            }
        }
        self.transfers += page.len() as u64;
    }

    /// Feed holds after every transfer page: each hold's posted amount is
    /// checked against its transfers as it passes, so no hold is kept.
    pub fn holds(&mut self, page: &[Hold]) {
        for hold in page {
            if hold.state == HoldState::Pending {
                *self.pending.entry(hold.account.clone()).or_default() += hold.amount.0 as u128;
            }
            let posted = self.posted_by_hold.get(&hold.id).copied().unwrap_or(0);
            if posted != hold.posted_amount.0 as u128 {
                self.problems
                    .push(format!("hold {}: posted {} but its transfers sum to {posted}", hold.id, hold.posted_amount));
            }
        }
        self.holds += page.len() as u64;
    }

    /// Compares the cached account rows with the recomputation.
    pub fn finish(mut self, accounts: &[Account]) -> AuditReport {
        let mut sum: i128 = 0;
        let mut corridors = std::collections::BTreeMap::new();
        for account in accounts {
            if account.id.is_corridor() {
                corridors.insert(account.id.0.clone(), account.balance());
            }
            let debits = self.debits.remove(&account.id).unwrap_or(0);
            let credits = self.credits.remove(&account.id).unwrap_or(0);
            let pending = self.pending.remove(&account.id).unwrap_or(0);
            if debits != account.debits_posted as u128 || credits != account.credits_posted as u128 {
                self.problems.push(format!(
                    "account {}: cached debits/credits {}/{} but transfers sum to {debits}/{credits}",
                    account.id, account.debits_posted, account.credits_posted
                ));
            }
            if pending != account.debits_pending as u128 {
                self.problems.push(format!(
                    "account {}: cached pending {} but pending holds sum to {pending}",
                    account.id, account.debits_pending
                ));
            }
            if !account.allow_negative && account.available() < 0 {
                self.problems.push(format!("account {}: below its floor ({})", account.id, account.available()));
            }
            sum += account.balance();
        }
        for id in self.debits.keys().chain(self.credits.keys()) {
            self.problems.push(format!("transfer names unknown account {id}"));
        }
        if sum != 0 {
            self.problems.push(format!("conservation: balances sum to {sum}, not 0"));
        }
        let head = self.head.unwrap_or_else(ChainHead::genesis);
        AuditReport {
            ok: self.problems.is_empty(),
            events_verified: self.events,
            head_seq: head.seq,
            head_hash: head.hash,
            transfers: self.transfers,
            accounts: accounts.len() as u64,
            holds: self.holds,
            passports_checked: self.passports_checked,
            corridors,
            balance_sum_minor: sum,
            problems: self.problems,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::model::TransferKind;
    use bazaar_types::{Amount, MemberId, Timestamp, TransferId};

    fn transfer(debit: &str, credit: &str, amount: u64, hold: Option<&str>) -> Transfer {
        Transfer {
            id: TransferId(format!("t-{debit}-{credit}-{amount}")),
            debit: AccountId(debit.into()),
            credit: AccountId(credit.into()),
            amount: Amount(amount),
            kind: TransferKind::Payment,
            hold: hold.map(|h| HoldId(h.into())),
            link: "l".into(),
            authored_by: MemberId("m".into()),
            on_behalf_of: MemberId("m".into()),
            at: Timestamp(0),
        }
    }

    fn account(id: &str, debits: u64, credits: u64, pending: u64, allow_negative: bool) -> Account {
        Account {
            id: AccountId(id.into()),
            allow_negative,
            debits_posted: debits,
            credits_posted: credits,
            debits_pending: pending,
        }
    }

    fn hold(id: &str, amount: u64, state: HoldState, posted: u64) -> Hold {
        Hold {
            id: HoldId(id.into()),
            account: AccountId("b".into()),
            amount: Amount(amount),
            created_at: Timestamp(0),
            expires_at: Timestamp(1),
            state,
            posted_amount: Amount(posted),
            resolved_at: None,
        }
    }

    fn audit(accounts: &[Account], holds: &[Hold]) -> AuditReport {
        let mut auditor = Auditor::new();
        auditor.transfers(&[transfer("i", "b", 100, None), transfer("b", "m", 30, Some("h1"))]);
        auditor.holds(holds);
        auditor.finish(accounts)
    }

    #[test]
    fn each_mismatch_is_named() {
        let honest = [account("i", 100, 0, 0, true), account("b", 30, 100, 10, false), account("m", 0, 30, 0, false)];
        let holds = [hold("h1", 40, HoldState::Posted, 30), hold("h2", 10, HoldState::Pending, 0)];
        let report = audit(&honest, &holds);
        assert!(report.ok, "{:?}", report.problems);
        assert_eq!((report.holds, report.transfers, report.balance_sum_minor), (2, 2, 0));

        let cases: [(&[Account], &[Hold], &str); 4] = [
            (
                &[account("i", 100, 0, 0, true), account("b", 30, 100, 10, false), account("m", 0, 31, 0, false)],
                &holds,
                "transfers sum to",
            ),
            (&honest, &[hold("h1", 40, HoldState::Posted, 40), holds[1].clone()], "hold h1: posted 40"),
            (&honest, &[holds[0].clone()], "pending holds sum to 0"),
            (&[account("i", 100, 0, 0, true), account("b", 30, 100, 10, false)], &holds, "unknown account m"),
        ];
        for (accounts, holds, problem) in cases {
            let report = audit(accounts, holds);
            assert!(!report.ok);
            assert!(report.problems.iter().any(|p| p.contains(problem)), "{problem}: {:?}", report.problems);
        }
        let missing = audit(&[account("i", 100, 0, 0, true), account("b", 30, 100, 10, false)], &holds);
        assert!(
            missing.problems.iter().any(|p| p.contains("conservation: balances sum to -30")),
            "{:?}",
            missing.problems
        );
        let unbalanced = audit(
            &[account("i", 100, 0, 0, false), account("b", 30, 100, 10, false), account("m", 0, 30, 0, false)],
            &holds,
        );
        assert!(unbalanced.problems.iter().any(|p| p.contains("below its floor")), "{:?}", unbalanced.problems);
    }
}
