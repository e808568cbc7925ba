//! The auditor the simulator runs after every step. Over the real store it
//! checks: the event chain and every balance (`bazaar_store::audit`:
//! conservation, floors, pending sums, each hold's postings); every contract
//! balanced and holding exactly what its milestone holds still hold; every
//! open dispute's subject and freeze untouched until execution, and nothing
//! left frozen after it; each token, order, milestone release and dispute
//! execution happening at most once (counted from the events), and so each
//! service payment, hire acceptance, lease purchase and bounty's end (every
//! bounty's hold agreeing with its state); and the
//! ledger never losing an acknowledged commit (the head it had is still there).

use crate::flows::read_doc;
use crate::relay::Relays;
use bazaar_core::bounty::{Bounty, BountyState};
use bazaar_core::dispute::{dispute_holds, Dispute, Phase, Subject};
use bazaar_core::escrow::{milestone_hold, Contract, ContractState, MilestoneState};
use bazaar_core::federation::{Netting, NettingState, Relay, RelayState};
use bazaar_core::market::order::{LineState, Order};
use bazaar_core::model::{Event, Hold, HoldState};
use bazaar_store::Store;
use bazaar_types::limits::PAGE_LIMIT_MAX;
use bazaar_types::{AccountId, ContractId, DisputeId, HoldId, MarketOrderId, MemberId};
use futures::executor::block_on;
use std::collections::{BTreeMap, BTreeSet};

pub type Audit = Result<(), String>;

/// The documents the workload asked for, whose holds the auditor checks.
#[derive(Clone, Copy, Default)]
pub struct Watched<'a> {
    pub contracts: &'a [ContractId],
    pub disputes: &'a [DisputeId],
    pub orders: &'a [MarketOrderId],
    pub bounties: &'a [String],
}

/// What the auditor remembers between steps.
#[derive(Default)]
pub struct Auditor {
    /// Events counted so far (all with `seq <= seen`).
    seen: u64,
    /// Each token's end (settled, voided or expired), by token id.
    token_ends: BTreeMap<String, String>,
    settled_orders: BTreeSet<String>,
    released: BTreeSet<String>,
    executed: BTreeSet<String>,
    /// Each share's end (paid or cancelled), by order and index.
    share_ends: BTreeMap<String, String>,
    /// Authorizations paid, hires accepted (and paid), leases bought, leases receipted.
    services_paid: BTreeSet<String>,
    hires_paid: BTreeSet<String>,
    leases_bought: BTreeSet<String>,
    leases_receipted: BTreeSet<String>,
    /// Each bounty's end (released or withdrawn), by bounty.
    bounty_ends: BTreeMap<String, String>,
    /// The last acknowledged head: (seq, hash). It must survive every crash.
    acked_head: Option<(u64, String)>,
    pub audits: u64,
}

fn err(what: impl std::fmt::Display) -> String {
    what.to_string()
}

impl Auditor {
    /// Every check, once.
    pub fn check(&mut self, store: &dyn Store, watched: Watched<'_>) -> Audit {
        let Watched { contracts, disputes, orders, bounties } = watched;
        self.audits += 1;
        let report = block_on(bazaar_store::audit::audit(store, &|_| {})).map_err(err)?;
        if !report.ok || report.balance_sum_minor != 0 {
            return Err(format!("ledger audit: {:?} (sum {})", report.problems, report.balance_sum_minor));
        }
        self.durable(store)?;
        self.once(store)?;
        let holds = all_holds(store)?;
        for id in contracts {
            if let Some(c) = read_doc::<Contract>(store, id).map_err(err)? {
                check_contract(&c, &holds)?;
            }
        }
        for id in disputes {
            if let Some(d) = read_doc::<Dispute>(store, id).map_err(err)? {
                check_dispute(store, &d, &holds)?;
            }
        }
        for id in orders {
            if let Some(o) = read_doc::<Order>(store, id).map_err(err)? {
                check_order(&o, &holds)?;
            }
        }
        for id in bounties {
            if let Some(b) = read_doc::<Bounty>(store, id).map_err(err)? {
                check_bounty(&b, &holds)?;
            }
        }
        Ok(())
    }

    /// How many subjects were seen to happen once: settled orders, ended tokens, released milestones, executed disputes.
    pub fn once_counts(&self) -> [(&'static str, u64); 10] {
        [
            ("orders settled", self.settled_orders.len() as u64),
            ("tokens ended", self.token_ends.len() as u64),
            ("milestones released", self.released.len() as u64),
            ("disputes executed", self.executed.len() as u64),
            ("order shares ended", self.share_ends.len() as u64),
            ("service payments", self.services_paid.len() as u64),
            ("hires paid", self.hires_paid.len() as u64),
            ("leases bought", self.leases_bought.len() as u64),
            ("leases receipted", self.leases_receipted.len() as u64),
            ("bounties ended", self.bounty_ends.len() as u64),
        ]
    }

    /// Remembers the head after a commit a client was told of.
    pub fn acked(&mut self, store: &dyn Store) -> Audit {
        let head = block_on(store.head()).map_err(err)?;
        self.acked_head = Some((head.seq, head.hash));
        Ok(())
    }

    /// The acknowledged head is still in the chain, with the same hash.
    fn durable(&self, store: &dyn Store) -> Audit {
        let Some((seq, hash)) = &self.acked_head else { return Ok(()) };
        let found = block_on(store.events(seq - 1, 1)).map_err(err)?;
        match found.first() {
            Some(e) if e.seq == *seq && &e.hash == hash => Ok(()),
            other => {
                Err(format!("acknowledged event {seq} ({hash}) is gone: found {:?}", other.map(|e| (e.seq, &e.hash))))
            }
        }
    }

    /// Counts the new events: nothing that runs once ran twice.
    fn once(&mut self, store: &dyn Store) -> Audit {
        loop {
            let page = block_on(store.events(self.seen, PAGE_LIMIT_MAX)).map_err(err)?;
            let Some(last) = page.last() else { return Ok(()) };
            self.seen = last.seq;
            for e in &page {
                self.count(e)?;
            }
        }
    }

    fn count(&mut self, e: &Event) -> Audit {
        let field = |name: &str| e.body.get(name).map(|v| v.to_string()).unwrap_or_default();
        match e.kind.as_str() {
            "settlement.posted" => {
                let order = format!("{} {}", field("merchant"), field("order_id"));
                once(&mut self.settled_orders, "settlement of order", order, e)?;
                ends_once(&mut self.token_ends, "token", field("jti"), e)
            }
            "hold.voided" | "hold.expired" => ends_once(&mut self.token_ends, "token", field("jti"), e),
            "order.share_paid" | "order.share_cancelled" => {
                ends_once(&mut self.share_ends, "share", format!("{} {}", field("order"), field("share")), e)
            }
            // A milestone ends once: released to the seller or reclaimed by the buyer, never both.
            "milestone.released" | "milestone.reclaimed" => {
                let key = format!("{} {}", field("contract"), field("milestone"));
                once(&mut self.released, "release or reclaim of milestone", key, e)
            }
            "dispute.executed" => once(&mut self.executed, "execution of dispute", field("dispute"), e),
            "service.paid" => once(&mut self.services_paid, "payment of authorization", field("authorization"), e),
            "hire.accepted" => once(&mut self.hires_paid, "acceptance of hire", field("hire"), e),
            "lease.bought" => {
                let id = e.body.get("lease").and_then(|l| l.get("id")).map(|v| v.to_string()).unwrap_or_default();
                once(&mut self.leases_bought, "purchase of lease", id, e)
            }
            "lease.receipted" => once(&mut self.leases_receipted, "receipt of lease", field("lease"), e),
            // A bounty ends once: released to one worker or withdrawn by its poster, never both.
            "bounty.released" | "bounty.withdrawn" => ends_once(&mut self.bounty_ends, "bounty", field("bounty"), e),
            _ => Ok(()),
        }
    }
}

/// `e` names its subject: `key` is not empty.
fn named(key: &str, e: &Event) -> Audit {
    if key.is_empty() || key == "null" {
        return Err(format!("event {} ({}) names no subject: {}", e.seq, e.kind, e.body));
    }
    Ok(())
}

/// `what` happens to `key` at most once.
fn once(seen: &mut BTreeSet<String>, what: &str, key: String, e: &Event) -> Audit {
    named(&key, e)?;
    if !seen.insert(key.clone()) {
        return Err(format!("{what} {key} happened twice (event {})", e.seq));
    }
    Ok(())
}

/// The `what` `key` ends at most once, whichever way it ends (the event's kind says how).
fn ends_once(ends: &mut BTreeMap<String, String>, what: &str, key: String, e: &Event) -> Audit {
    named(&key, e)?;
    match ends.insert(key.clone(), e.kind.clone()) {
        Some(before) => Err(format!("{what} {key} ended twice: {before}, then {} (event {})", e.kind, e.seq)),
        None => Ok(()),
    }
}

fn all_holds(store: &dyn Store) -> Result<BTreeMap<HoldId, Hold>, String> {
    let mut holds = BTreeMap::new();
    let mut after = String::new();
    loop {
        let page = block_on(store.holds(&after, PAGE_LIMIT_MAX)).map_err(err)?;
        let Some(last) = page.last() else { return Ok(holds) };
        after = last.id.0.clone();
        holds.extend(page.into_iter().map(|h| (h.id.clone(), h)));
    }
}

/// Held = what the document says is still held; each milestone's hold agrees with its state.
fn check_contract(c: &Contract, holds: &BTreeMap<HoldId, Hold>) -> Audit {
    if !c.balanced() {
        return Err(format!("contract {} out of balance: {c:?}", c.id));
    }
    let mut pending = 0;
    for m in &c.milestones {
        let id = milestone_hold(&c.id, m.index);
        let hold = holds.get(&id).ok_or_else(|| format!("contract {}: milestone hold {id} missing", c.id))?;
        if hold.amount != m.amount {
            return Err(format!("contract {} milestone {}: holds {} for {}", c.id, m.index, hold.amount, m.amount));
        }
        let live = matches!(m.state, MilestoneState::Pending | MilestoneState::Delivered | MilestoneState::Disputed);
        let open = matches!(c.state, ContractState::Offered | ContractState::Accepted | ContractState::Completed);
        if open && live != (hold.state == HoldState::Pending) {
            return Err(format!(
                "contract {} milestone {} is {:?} but its hold is {:?}",
                c.id, m.index, m.state, hold.state
            ));
        }
        if m.state == MilestoneState::Reclaimed && (hold.state != HoldState::Voided || hold.posted_amount.0 != 0) {
            return Err(format!("contract {} milestone {} reclaimed but its hold is {hold:?}", c.id, m.index));
        }
        if hold.state == HoldState::Pending {
            pending += hold.amount.0;
        }
    }
    if pending != c.held().0 {
        return Err(format!("contract {}: says it holds {} but its holds hold {pending}", c.id, c.held()));
    }
    Ok(())
}

/// An order is balanced, and holds exactly its authorized shares: each such share's hold pending for
/// its amount, every paid or cancelled share's hold resolved.
fn check_order(o: &Order, holds: &BTreeMap<HoldId, Hold>) -> Audit {
    if !o.balanced() {
        return Err(format!("order {} out of balance: {o:?}", o.id));
    }
    let mut pending = 0;
    for line in &o.lines {
        let Some(hold) = holds.get(&line.hold) else {
            if line.state == LineState::Authorized {
                return Err(format!("order {} share {}: hold {} missing", o.id, line.index, line.hold));
            }
            continue;
        };
        let live = line.state == LineState::Authorized;
        if live != (hold.state == HoldState::Pending) || (live && hold.amount != line.amount) {
            return Err(format!("order {} share {} is {:?} but its hold is {hold:?}", o.id, line.index, line.state));
        }
        if live {
            pending += hold.amount.0;
        }
    }
    if pending != o.held().0 {
        return Err(format!("order {}: says it holds {} but its holds hold {pending}", o.id, o.held()));
    }
    Ok(())
}

/// A funded bounty's hold is pending for its reward; a released or withdrawn one's is resolved.
fn check_bounty(b: &Bounty, holds: &BTreeMap<HoldId, Hold>) -> Audit {
    let hold = holds.get(&b.hold).ok_or_else(|| format!("bounty {}: hold {} missing", b.id, b.hold))?;
    let funded = b.state == BountyState::Funded;
    if funded != (hold.state == HoldState::Pending) || hold.amount != b.amount {
        return Err(format!("bounty {} is {:?} but its hold is {hold:?}", b.id, b.state));
    }
    let posted = hold.state == HoldState::Posted && hold.posted_amount == b.amount;
    let voided = hold.state == HoldState::Voided && hold.posted_amount.0 == 0;
    match b.state {
        BountyState::Released if !posted => Err(format!("bounty {} released but its hold is {hold:?}", b.id)),
        BountyState::Withdrawn if !voided => Err(format!("bounty {} withdrawn but its hold is {hold:?}", b.id)),
        _ => Ok(()),
    }
}

/// An open dispute's subject and freeze are untouched; an executed one leaves nothing frozen.
fn check_dispute(store: &dyn Store, d: &Dispute, holds: &BTreeMap<HoldId, Hold>) -> Audit {
    let [balance, stake, bond] = dispute_holds(&d.id);
    let executed = d.phase == Phase::Executed;
    let frozen = [
        (balance, d.frozen.balance),
        (stake, d.frozen.stake),
        (bond, d.appeal.as_ref().map(|a| a.bond).unwrap_or_default()),
    ];
    for (id, amount) in frozen {
        match holds.get(&id) {
            Some(h) if executed && h.state == HoldState::Pending => {
                return Err(format!("dispute {} executed but {id} is still held", d.id))
            }
            Some(h) if !executed && (h.state != HoldState::Pending || h.amount != amount) => {
                return Err(format!("dispute {} open but {id} moved: {h:?} (froze {amount})", d.id))
            }
            None if amount.0 > 0 && !executed => {
                return Err(format!("dispute {} froze {amount} but {id} is missing", d.id))
            }
            _ => {}
        }
    }
    if let Subject::Milestone { contract, index } = &d.subject {
        let c = read_doc::<Contract>(store, contract)
            .map_err(err)?
            .ok_or_else(|| format!("dispute {}: contract {contract} missing", d.id))?;
        let m = &c.milestones[*index as usize];
        let hold = &holds[&milestone_hold(contract, *index)];
        let (want, pending) =
            if executed { (MilestoneState::Resolved, false) } else { (MilestoneState::Disputed, true) };
        if d.frozen.escrow.0 > 0 && (m.state != want || (hold.state == HoldState::Pending) != pending) {
            return Err(format!(
                "dispute {} ({:?}): milestone {index} is {:?}, its hold {:?}",
                d.id, d.phase, m.state, hold.state
            ));
        }
    }
    Ok(())
}

fn balance(store: &dyn Store, account: &AccountId) -> Result<i128, String> {
    Ok(block_on(store.account(account)).map_err(err)?.map(|a| a.balance()).unwrap_or(0))
}

/// Units netted by the statements `store` holds recorded among `ids`.
fn netted(store: &dyn Store, ids: &[String]) -> Result<i128, String> {
    let mut sum = 0i128;
    for id in ids {
        if let Some(netting) = read_doc::<Netting>(store, id).map_err(err)? {
            if netting.state == NettingState::Recorded {
                sum += netting.statement.amount_minor.0 as i128;
            }
        }
    }
    Ok(sum)
}

/// The corridor between the home registry (which issued the relayed tokens) and the peer (where `shop`
/// sells): the peer credits nothing home has not settled, and for the same amount; each side's corridor
/// account holds exactly what it settled less what it netted, and home records no netting B has not.
/// `quiet` (nothing pending any more): every relay settled on one side is settled on the other, every
/// netting recorded on one side is on the other, and the two corridors mirror each other.
pub fn check_corridors(home: &dyn Store, peer: &dyn Store, relays: &Relays, shop: &MemberId, quiet: bool) -> Audit {
    let tokens = &relays.tokens;
    let Some(first) = tokens.first() else { return Ok(()) };
    let peer_id = first.via.clone().ok_or("a relayed token names its corridor")?;
    let (mut at_home, mut at_peer) = (0i128, 0i128);
    for claims in tokens {
        let view = block_on(home.token(&claims.jti)).map_err(err)?;
        let home_paid = view.and_then(|v| v.settlement).map(|s| s.amount.0);
        let peer_paid = block_on(peer.settlement_by_order(shop, &claims.ord)).map_err(err)?.map(|s| s.amount.0);
        if peer_paid.is_some() && peer_paid != home_paid {
            return Err(format!("token {}: the peer credited {peer_paid:?}, home settled {home_paid:?}", claims.jti));
        }
        if quiet {
            if home_paid.is_some() != peer_paid.is_some() {
                return Err(format!(
                    "token {}: settled on one side only (home {home_paid:?}, peer {peer_paid:?})",
                    claims.jti
                ));
            }
            if let Some(relay) = read_doc::<Relay>(peer, claims.jti.as_str()).map_err(err)? {
                let open = matches!(relay.state, RelayState::Pending | RelayState::Stuck);
                if open || (relay.state == RelayState::Settled) != peer_paid.is_some() {
                    return Err(format!(
                        "token {}: relay {:?} but the peer credited {peer_paid:?}",
                        claims.jti, relay.state
                    ));
                }
            }
        }
        at_home += home_paid.unwrap_or(0) as i128;
        at_peer += peer_paid.unwrap_or(0) as i128;
    }
    let corridor_home = balance(home, &AccountId::corridor(&peer_id))?;
    let corridor_peer = balance(peer, &AccountId::corridor(&first.iss))?;
    let (netted_home, netted_peer) = (netted(home, &relays.nettings)?, netted(peer, &relays.nettings)?);
    if corridor_home != at_home - netted_home || corridor_peer != netted_peer - at_peer {
        return Err(format!(
            "corridors: home's holds {corridor_home} for {at_home} settled less {netted_home} netted, the peer's \
             {corridor_peer} for {at_peer} credited less {netted_peer} netted"
        ));
    }
    if netted_home > netted_peer || (quiet && netted_home != netted_peer) {
        return Err(format!("netting: home recorded {netted_home}, the peer {netted_peer}"));
    }
    if quiet && corridor_home != -corridor_peer {
        return Err(format!("corridors do not mirror at the end: home {corridor_home}, peer {corridor_peer}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(seq: u64, kind: &str, body: serde_json::Value) -> Event {
        let who = MemberId("did:key:zSim".into());
        Event {
            seq,
            prev_hash: String::new(),
            hash: String::new(),
            kind: kind.into(),
            body,
            authored_by: who.clone(),
            on_behalf_of: who,
            at: bazaar_types::Timestamp(0),
        }
    }

    #[test]
    fn a_second_payment_of_a_hire_an_authorization_or_a_lease_or_a_second_end_is_caught() {
        for (kind, body, other) in [
            ("hire.accepted", json!({"hire": "hir_1"}), json!({"hire": "hir_2"})),
            ("service.paid", json!({"authorization": "sva_1"}), json!({"authorization": "sva_2"})),
            ("lease.bought", json!({"lease": {"id": "lse_1"}}), json!({"lease": {"id": "lse_2"}})),
            ("lease.receipted", json!({"lease": "lse_1"}), json!({"lease": "lse_2"})),
        ] {
            let mut auditor = Auditor::default();
            assert_eq!(auditor.count(&event(1, kind, body.clone())), Ok(()));
            assert_eq!(auditor.count(&event(2, kind, other)), Ok(()), "another subject is another {kind}");
            let twice = auditor.count(&event(3, kind, body)).unwrap_err();
            assert!(twice.contains("happened twice (event 3)"), "{kind}: {twice}");
            let unnamed = auditor.count(&event(4, kind, json!({}))).unwrap_err();
            assert!(unnamed.contains("names no subject"), "{kind}: {unnamed}");
        }
        let mut auditor = Auditor::default();
        assert_eq!(auditor.count(&event(1, "bounty.released", json!({"bounty": "bty_1"}))), Ok(()));
        let both = auditor.count(&event(2, "bounty.withdrawn", json!({"bounty": "bty_1"}))).unwrap_err();
        assert!(both.contains("ended twice: bounty.released, then bounty.withdrawn"), "{both}");
        let settled = json!({"merchant": "m", "order_id": "o", "jti": "tok_1"});
        assert_eq!(auditor.count(&event(3, "settlement.posted", settled)), Ok(()));
        let voided = auditor.count(&event(4, "hold.voided", json!({"jti": "tok_1"}))).unwrap_err();
        assert!(voided.contains("token \"tok_1\" ended twice: settlement.posted, then hold.voided"), "{voided}");
    }

    #[test]
    fn a_bounty_whose_hold_disagrees_with_its_state_is_caught() {
        let at = bazaar_types::Timestamp(0);
        let bounty = Bounty {
            id: "bty_1".into(),
            job: "j".into(),
            validator: "v".into(),
            poster: MemberId("did:key:zPoster".into()),
            amount: bazaar_types::Amount(500),
            hold: HoldId("hold_bty_1".into()),
            state: BountyState::Funded,
            funded_at: at,
            claim_until: at,
            resolved_at: None,
            worker: None,
            refunded: bazaar_types::Amount(0),
        };
        let hold = |state: HoldState, posted: u64| Hold {
            id: bounty.hold.clone(),
            account: AccountId::of_member(&bounty.poster),
            amount: bounty.amount,
            created_at: at,
            expires_at: at,
            state,
            posted_amount: bazaar_types::Amount(posted),
            resolved_at: None,
        };
        let holds = |h: Hold| BTreeMap::from([(h.id.clone(), h)]);
        assert_eq!(check_bounty(&bounty, &holds(hold(HoldState::Pending, 0))), Ok(()));
        assert!(check_bounty(&bounty, &holds(hold(HoldState::Posted, 500))).is_err(), "funded, yet paid out");
        assert!(check_bounty(&bounty, &BTreeMap::new()).unwrap_err().contains("missing"));
        let released = Bounty { state: BountyState::Released, ..bounty.clone() };
        assert_eq!(check_bounty(&released, &holds(hold(HoldState::Posted, 500))), Ok(()));
        assert!(check_bounty(&released, &holds(hold(HoldState::Posted, 499))).is_err(), "paid short");
        let withdrawn = Bounty { state: BountyState::Withdrawn, ..bounty.clone() };
        assert_eq!(check_bounty(&withdrawn, &holds(hold(HoldState::Voided, 0))), Ok(()));
        assert!(check_bounty(&withdrawn, &holds(hold(HoldState::Posted, 500))).is_err(), "withdrawn, yet paid");
    }
}
