//! Storefront orders: a closed request's allocation becomes one order with one
//! authorization — a hold per maker's share on the buyer agent's budget, all
//! opened by one command. When the owner's policy asks for it (an order above
//! an amount) the order first waits for a person's approval: only the buyer's
//! owner approves, never an agent. Each maker is told in her own language
//! (falling back to English), proves shipment with a courier receipt's hash and
//! a tracking number, and is paid her share on that proof. Cancelling a share
//! before it ships releases its hold.
//!
//! Per order `total = held + paid + fees + released`, asserted on every write.

use super::events::*;
use super::listing::Listing;
use super::receipts::{ShareCancelled, SharePaid};
use super::rfq::{Rfq, RfqState};
use super::rules::Allocation;
use crate::escrow::events::{ContractCreated, ContractVoided};
use crate::escrow::receipts::Released;
use crate::kernel::batch::Batch;
use crate::kernel::docs::parties_with;
use crate::kernel::ledger::{PaidOut, PayOut};
use crate::kernel::model::{Blob, Budget, MemberKind, TransferKind};
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use bazaar_types::limits::{ORDER_LINES_MAX, RECEIPT_IMAGE_BYTES_MAX, RECEIPT_SHA256_HEX_LEN, TRACKING_LEN_MAX};
use bazaar_types::{
    AccountId, Amount, ContractId, HoldId, ListingId, MarketOrderId, MemberId, RfqId, Timestamp, TransferId,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderState {
    AwaitingApproval,
    Authorized,
    /// Every share paid or cancelled.
    Completed,
    /// Refused on the approval link, or every share cancelled before any shipped.
    Cancelled,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineState {
    AwaitingApproval,
    Authorized,
    Paid,
    Cancelled,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proof {
    /// SHA-256 (hex) of the courier receipt's image.
    pub receipt_sha256: String,
    pub tracking: String,
    pub at: Timestamp,
    /// The maker's owner, when she proved on her agent's behalf; absent when the agent did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proved_by: Option<MemberId>,
}

/// How a share was paid, kept on the share and told in `order.share_paid`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Payment {
    /// An escrowed share: its contract's milestone was delivered and released.
    Escrowed { net_minor: Amount, fee_minor: Amount, contract: ContractId, release: Released, paid_at_ms: Timestamp },
    /// A plain share: its hold was posted to the maker.
    Direct { net_minor: Amount, fee_minor: Amount, transfers: Vec<TransferId>, link: String, paid_at_ms: Timestamp },
}

impl Payment {
    /// What the maker received and the fee taken.
    pub fn net_and_fee(&self) -> (Amount, Amount) {
        match self {
            Payment::Escrowed { net_minor, fee_minor, .. } | Payment::Direct { net_minor, fee_minor, .. } => {
                (*net_minor, *fee_minor)
            }
        }
    }
}

/// What a maker is told, in her language.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notification {
    pub language: String,
    pub text: String,
    /// True when her language had no translation and English was used.
    pub fallback: bool,
    pub at: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderLine {
    pub index: u32,
    pub seller: MemberId,
    pub listing: ListingId,
    pub units: u64,
    pub unit_price: Amount,
    pub amount: Amount,
    pub language: String,
    pub hold: HoldId,
    /// Above the escrow threshold: the escrowed contract (one milestone) holding this share.
    #[serde(default)]
    pub contract: Option<ContractId>,
    pub state: LineState,
    #[serde(default)]
    pub notification: Option<Notification>,
    #[serde(default)]
    pub proof: Option<Proof>,
    #[serde(default)]
    pub payment: Option<serde_json::Value>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub required: bool,
    /// The owner's policy: orders above this wait for a person.
    pub above_minor: Option<Amount>,
    #[serde(default)]
    pub decided_by: Option<MemberId>,
    #[serde(default)]
    pub approved: Option<bool>,
    #[serde(default)]
    pub decided_at: Option<Timestamp>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    pub id: MarketOrderId,
    pub buyer: MemberId,
    /// The person who may approve it.
    pub owner: MemberId,
    pub rfq: RfqId,
    pub item: String,
    pub deadline: Timestamp,
    pub lines: Vec<OrderLine>,
    pub total: Amount,
    pub paid_net: Amount,
    pub fees: Amount,
    pub released: Amount,
    pub state: OrderState,
    pub approval: Approval,
    pub created_at: Timestamp,
}

/// An owner's rule for one agent's orders.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderPolicy {
    pub agent: MemberId,
    /// Orders with a total above this wait for the owner's approval (0: every order).
    pub approval_above_minor: Amount,
}

pub fn order_id(buyer: &MemberId, key: &str) -> MarketOrderId {
    MarketOrderId(format!("ord_{}", &crate::crypto::sha256_hex(format!("{buyer}\n{key}").as_bytes())[..32]))
}

/// One maker's share of an order: the order and the share's place in it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ShareId {
    pub order: MarketOrderId,
    pub index: u32,
}

impl ShareId {
    /// The hold that authorizes this share.
    pub fn hold(&self) -> HoldId {
        line_hold(&self.order, self.index)
    }

    /// The escrowed contract this share rides above the threshold.
    pub fn contract(&self, buyer: &MemberId, seller: &MemberId) -> ContractId {
        share_contract(&self.order, buyer, seller, self.index)
    }
}

pub fn line_hold(order: &str, index: u32) -> HoldId {
    HoldId(format!("hold_{order}_l{index}"))
}

/// Above the escrow threshold, each share rides its own escrowed contract (one
/// milestone, the dispute desk as arbiter), derived from the order and share.
/// An escrowed share is paid or cancelled only while its milestone is still
/// pending: the contract is an ordinary one, so its buyer may have reclaimed it
/// past the due date (or disputed it) through the contract routes, and its hold
/// then resolved already — paying or voiding it again would resolve it twice.
fn share_milestone_open(contract: &crate::escrow::Contract) -> Result<(), Refusal> {
    let m = &contract.milestones[0];
    if m.state == crate::escrow::MilestoneState::Pending {
        return Ok(());
    }
    Err(Refusal::new(
        Code::MilestoneState,
        "This share's escrowed milestone is no longer pending (reclaimed, disputed or delivered); it is settled there.",
    )
    .with(json!({"contract": contract.id, "state": m.state, "dispute": m.dispute})))
}

pub fn share_contract(order: &str, buyer: &MemberId, seller: &MemberId, index: u32) -> ContractId {
    let desk = MemberId(crate::kernel::model::DESK_ID.into());
    crate::escrow::contract_id_for(buyer, seller, &desk, &format!("order:{order}:share:{index}"))
}

impl Order {
    pub fn held(&self) -> Amount {
        let held = self.lines.iter().filter(|l| l.state == LineState::Authorized).map(|l| l.amount.0).sum();
        Amount(held)
    }
    /// `total = held + paid_net + fees + released` once authorized.
    pub fn balanced(&self) -> bool {
        if self.state == OrderState::AwaitingApproval {
            return true;
        }
        let accounted = self.held().0 + self.paid_net.0 + self.fees.0 + self.released.0;
        let cancelled_unauthorized = if self.approval.approved == Some(false) { self.total.0 } else { 0 };
        accounted == self.total.0 || cancelled_unauthorized == self.total.0
    }
}

crate::document!(Order, Order, version 1,
    id = |o| o.id.to_string(),
    parties = |o| parties_with(vec![o.buyer.clone(), o.owner.clone()], o.lines.iter().map(|l| l.seller.clone())),
    invariants = |o| assert!(o.balanced(), "order {}: total = held + paid + fees + released", o.id),
);

crate::document!(OrderPolicy, Policy, version 1, id = |p| p.agent.to_string(), parties = |p| vec![p.agent.clone()]);

// ---- the makers' message catalogue ----------------------------------------------------

/// Receipt images accepted with a proof of shipment.
pub const RECEIPT_CONTENT_TYPES: &[&str] = &["image/jpeg", "image/png", "image/webp"];

/// Languages with a translation of every message; others fall back to English.
pub const LANGUAGES: &[&str] = &["en", "es", "fr", "hi"];

/// The text telling a maker her share is held, in `language` (its primary
/// subtag), and whether English stood in for a missing translation.
pub fn share_message(language: &str, units: u64, item: &str, amount: Amount, deadline_day: &str) -> (String, bool) {
    let primary = language.split('-').next().unwrap_or_default().to_ascii_lowercase();
    let text = match primary.as_str() {
        "en" => Some(format!(
            "New order: {units} × {item}. {amount} BNU is held for you; ship by {deadline_day}, then upload your courier receipt to be paid."
        )),
        "es" => Some(format!(
            "Nuevo pedido: {units} × {item}. Hay {amount} BNU retenidos para ti; envía antes del {deadline_day} y sube el recibo del mensajero para cobrar."
        )),
        "fr" => Some(format!(
            "Nouvelle commande : {units} × {item}. {amount} BNU sont réservés pour vous ; expédiez avant le {deadline_day}, puis envoyez le reçu du transporteur pour être payée."
        )),
        "hi" => Some(format!(
            "नया ऑर्डर: {units} × {item}। आपके लिए {amount} BNU रोके गए हैं; {deadline_day} तक भेजें, फिर भुगतान के लिए कूरियर की रसीद अपलोड करें।"
        )),
        _ => None,
    };
    match text {
        Some(text) => (text, false),
        None => (share_message("en", units, item, amount, deadline_day).0, true),
    }
}

fn day_of(at: Timestamp) -> String {
    let date = crate::vc::rfc3339_from_ms(at.ms());
    date.get(..10).unwrap_or(&date).to_string()
}

fn refuse<T>(code: Code, detail: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal::new(code, detail))
}

impl Batch<'_> {
    fn order(&self, id: &MarketOrderId) -> Result<Order, Refusal> {
        self.load::<Order>(id).ok_or_else(|| Refusal::new(Code::OrderNotFound, "No such order."))
    }

    /// The stored order, checking the buyer the edge named (to load its rows) is its buyer.
    pub(crate) fn order_for(&self, id: &MarketOrderId, buyer: &MemberId) -> Result<Order, Refusal> {
        let order = self.order(id)?;
        if &order.buyer != buyer {
            return refuse(Code::OrderInvalid, "The order's buyer changed under the request; retry.");
        }
        Ok(order)
    }

    pub(crate) fn set_order_policy(
        &mut self,
        command: &Caller<'_>,
        agent: &MemberId,
        above: Amount,
    ) -> Result<OrderPolicy, Refusal> {
        let member = self.member(agent)?;
        if member.owner.as_ref() != Some(&command.actor.id) {
            return refuse(Code::NotOwner, "Only the agent's owner sets its order policy.");
        }
        let policy = OrderPolicy { agent: agent.clone(), approval_above_minor: above };
        self.upsert(&policy);
        self.emit(command, &OrderPolicySet(policy.clone()));
        Ok(policy)
    }

    pub(crate) fn create_order(
        &mut self,
        command: &Caller<'_>,
        rfq_id: &RfqId,
        force_approval: bool,
    ) -> Result<Order, Refusal> {
        let Some(idem) = &command.idem else {
            return refuse(Code::IdempotencyKeyRequired, "An order needs an Idempotency-Key.");
        };
        let buyer = command.actor.clone();
        command.require_agent("Orders are placed by buyers' agents")?;
        let Some(owner) = buyer.owner.clone() else {
            return refuse(Code::NotPermitted, "An agent without an owner here cannot place storefront orders.");
        };
        let id = order_id(&buyer.id, &idem.key);
        let (mut rfq, allocation) = self.orderable(&buyer.id, rfq_id, &id)?;
        let lines = self.order_lines(&rfq, &allocation, &id);
        for line in &lines {
            // The edge named the makers to load their rows; a maker it did not name has no account loaded.
            if !self.snap.accounts.contains_key(&AccountId::of_member(&line.seller)) {
                return refuse(Code::OrderInvalid, "The order's makers changed under the request; retry.");
            }
            self.check_invited(&line.seller, &buyer.id)?;
        }
        let above = self.load::<OrderPolicy>(buyer.id.as_str()).map(|p| p.approval_above_minor);
        let total = allocation.total;
        let required = force_approval || above.is_some_and(|above| total > above);
        let mut order = Order {
            id: id.clone(),
            buyer: buyer.id.clone(),
            owner,
            rfq: rfq.id.clone(),
            item: rfq.item.clone(),
            deadline: rfq.request.deadline,
            lines,
            total,
            paid_net: Amount::ZERO,
            fees: Amount::ZERO,
            released: Amount::ZERO,
            state: OrderState::AwaitingApproval,
            approval: Approval { required, above_minor: above, decided_by: None, approved: None, decided_at: None },
            created_at: self.now,
        };
        if !required {
            self.authorize(command, &mut order)?;
        }
        self.insert(&order);
        rfq.order = Some(id.clone());
        self.update(&rfq);
        let created = OrderCreated {
            order: id,
            buyer: order.buyer.clone(),
            total_minor: total,
            shares: order.lines.len(),
            approval_required: required,
        };
        self.emit(command, &created);
        Ok(order)
    }

    /// The buyer's closed request, not ordered yet, and its allocation.
    fn orderable(&self, buyer: &MemberId, rfq_id: &str, id: &str) -> Result<(Rfq, Allocation), Refusal> {
        let Some(rfq) = self.load::<Rfq>(rfq_id) else {
            return refuse(Code::RfqNotFound, "No such request for quote.");
        };
        if &rfq.buyer != buyer {
            return refuse(Code::NotParty, "Only the request's buyer orders from it.");
        }
        if rfq.state != RfqState::Closed {
            return refuse(Code::RfqInvalid, "Close the request first: its allocation is what is ordered.");
        }
        if self.exists::<Order>(id) {
            return refuse(Code::OrderExists, "An order with this Idempotency-Key already exists.");
        }
        if let Some(placed) = &rfq.order {
            return Err(Refusal::new(
                Code::RfqOrdered,
                "This request was already ordered; its allocation is ordered once.",
            )
            .with(json!({"order": placed})));
        }
        let allocation = rfq.current_allocation();
        if allocation.lines.is_empty() || allocation.lines.len() > ORDER_LINES_MAX {
            return Err(Refusal::new(Code::OrderInvalid, format!("An order has 1–{ORDER_LINES_MAX} shares."))
                .with(json!({"shares": allocation.lines.len()})));
        }
        Ok((rfq, allocation))
    }

    /// A share per allocated line, each told in its maker's listing language.
    fn order_lines(&self, rfq: &Rfq, allocation: &Allocation, id: &str) -> Vec<OrderLine> {
        let mut lines = Vec::new();
        for (index, line) in allocation.lines.iter().enumerate() {
            let offer = rfq.offers.iter().find(|o| o.id == line.offer_id).expect("allocated offers are recorded");
            let language = self.load::<Listing>(&offer.listing).map(|l| l.language).unwrap_or_else(|| "en".into());
            lines.push(OrderLine {
                index: index as u32,
                seller: line.seller.clone(),
                listing: offer.listing.clone(),
                units: line.units,
                unit_price: line.unit_price,
                amount: line.amount,
                language,
                hold: line_hold(id, index as u32),
                contract: None,
                state: LineState::AwaitingApproval,
                notification: None,
                proof: None,
                payment: None,
            });
        }
        lines
    }

    /// The one authorization: a hold per share, all in this command — above the
    /// escrow threshold each inside an escrowed contract (one milestone) —
    /// then each maker is told.
    fn authorize(&mut self, command: &Caller<'_>, order: &mut Order) -> Result<(), Refusal> {
        let account = AccountId::of_member(&order.buyer);
        self.check_available(&account, order.total)?;
        let budget = self.snap.budgets.get(&order.buyer).cloned().unwrap_or_else(|| Budget::zero(order.buyer.clone()));
        crate::kernel::ledger::check_ceilings(&budget, order.total, self.now)?;
        self.put_budget(crate::kernel::ledger::spend(budget, order.total, self.now));
        let escrowed = order.total > self.config.escrow_threshold;
        for line in order.lines.iter_mut() {
            // Above the registry's threshold every share rides escrow; below it, a share above its maker's own.
            if escrowed || line.amount > self.merchant_threshold(&line.seller) {
                let id = share_contract(&order.id, &order.buyer, &line.seller, line.index);
                line.hold = crate::escrow::milestone_hold(&id, 0);
                line.contract = Some(id.clone());
                self.open_hold(line.hold.clone(), account.clone(), line.amount, Timestamp::NEVER);
                let contract = crate::escrow::Contract {
                    id: id.clone(),
                    buyer: order.buyer.clone(),
                    seller: line.seller.clone(),
                    arbiter: MemberId(crate::kernel::model::DESK_ID.into()),
                    total: line.amount,
                    terms_sha256: crate::crypto::sha256_hex(format!("{}:{}", order.id, line.index).as_bytes()),
                    review_window_s: bazaar_types::limits::REVIEW_WINDOW_S,
                    // Her offer was her acceptance.
                    state: crate::escrow::ContractState::Accepted,
                    milestones: vec![crate::escrow::Milestone {
                        index: 0,
                        amount: line.amount,
                        description: format!("{} × {} (order {})", line.units, order.item, order.id),
                        due_at: order.deadline,
                        hold: line.hold.clone(),
                        state: crate::escrow::MilestoneState::Pending,
                        delivered_at: None,
                        evidence_sha256: None,
                        review_deadline: None,
                        released_at: None,
                        release: None,
                        dispute: None,
                        reclaimed_at: None,
                    }],
                    created_at: self.now,
                    accepted_at: Some(self.now),
                    released_net: Amount::ZERO,
                    fees: Amount::ZERO,
                    refunded: Amount::ZERO,
                };
                self.insert(&contract);
                let created = ContractCreated {
                    contract: id.clone(),
                    buyer: order.buyer.clone(),
                    seller: line.seller.clone(),
                    arbiter: contract.arbiter.clone(),
                    total_minor: line.amount,
                    milestones: 1,
                };
                self.emit(command, &ShareContractCreated { created, order: order.id.clone() });
            } else {
                self.open_hold(line.hold.clone(), account.clone(), line.amount, Timestamp::NEVER);
            }
            line.state = LineState::Authorized;
            let (text, fallback) =
                share_message(&line.language, line.units, &order.item, line.amount, &day_of(order.deadline));
            line.notification = Some(Notification { language: line.language.clone(), text, fallback, at: self.now });
        }
        order.state = OrderState::Authorized;
        Ok(())
    }

    pub(crate) fn decide_order(
        &mut self,
        command: &Caller<'_>,
        id: &MarketOrderId,
        approve: bool,
    ) -> Result<Order, Refusal> {
        let mut order = self.order(id)?;
        if command.actor.kind != MemberKind::Owner {
            return refuse(
                Code::ApprovalByPerson,
                "Orders are approved by a person (the buyer's owner), never by an agent.",
            );
        }
        if command.actor.id != order.owner {
            return refuse(Code::NotOwner, "Only the buyer agent's owner approves its orders.");
        }
        if order.state != OrderState::AwaitingApproval {
            return Err(Refusal::new(Code::OrderState, "This order is not waiting for approval.")
                .with(json!({"state": order.state})));
        }
        if approve {
            self.authorize(command, &mut order)?;
        } else {
            order.state = OrderState::Cancelled;
            for line in order.lines.iter_mut() {
                line.state = LineState::Cancelled;
            }
        }
        order.approval.decided_by = Some(command.actor.id.clone());
        order.approval.approved = Some(approve);
        order.approval.decided_at = Some(self.now);
        self.update(&order);
        let decision =
            OrderDecision { order: order.id.clone(), by: command.actor.id.clone(), total_minor: order.total };
        if approve {
            self.emit(command, &OrderApproved(decision));
        } else {
            self.emit(command, &OrderDeclined(decision));
        }
        Ok(order)
    }

    fn authorized_line(&self, order: &Order, index: u32) -> Result<OrderLine, Refusal> {
        let line = order
            .lines
            .get(index as usize)
            .cloned()
            .ok_or_else(|| Refusal::new(Code::OrderInvalid, "No such share in this order."))?;
        match line.state {
            LineState::Authorized => {
                if let Some(contract_id) = &line.contract {
                    share_milestone_open(&self.contract(contract_id).expect("share contracts are loaded"))?;
                }
                Ok(line)
            }
            LineState::Paid => {
                Err(Refusal::new(Code::SharePaid, "This share was already paid on its proof; it is paid once.")
                    .with(json!({"payment": line.payment})))
            }
            state => Err(Refusal::new(Code::OrderState, "This share is not authorized.").with(json!({"state": state}))),
        }
    }

    fn finish_if_done(order: &mut Order) {
        if order.lines.iter().all(|l| matches!(l.state, LineState::Paid | LineState::Cancelled)) {
            let any_paid = order.lines.iter().any(|l| l.state == LineState::Paid);
            order.state = if any_paid { OrderState::Completed } else { OrderState::Cancelled };
        }
    }

    pub(crate) fn prove_shipment(
        &mut self,
        command: &Caller<'_>,
        share: &ShareId,
        seller: &MemberId,
        receipt_sha256: &str,
        tracking: &str,
        receipt: Option<&(String, Vec<u8>)>,
    ) -> Result<SharePaid, Refusal> {
        let (id, index) = (&share.order, share.index);
        let mut order = self.order(id)?;
        let named = order.lines.get(index as usize).map(|line| &line.seller);
        if named.is_some_and(|named| named != seller) {
            return refuse(Code::OrderInvalid, "The share's maker changed under the request; retry.");
        }
        // The maker's agent proves, or the person who owns it does on its behalf (recorded as such).
        // Who is asked comes before the share's state: a stranger learns nothing of it.
        let proved_by = if command.actor.id == *seller {
            None
        } else if self.member(seller)?.owner.as_ref() == Some(&command.actor.id) {
            Some(command.actor.id.clone())
        } else {
            return refuse(
                Code::NotParty,
                "Only the maker of this share, or the person who owns her agent, proves its shipment.",
            );
        };
        let line = self.authorized_line(&order, index)?;
        let receipt_sha256 = check_proof(receipt_sha256, tracking)?;
        if let Some((content_type, bytes)) = receipt {
            self.keep_receipt_image(&order, &line, &receipt_sha256, content_type, bytes)?;
        }
        let payment = self.pay_share(command, &order, &line, &receipt_sha256)?;
        let (net, fee) = payment.net_and_fee();
        let slot = &mut order.lines[index as usize];
        slot.state = LineState::Paid;
        slot.proof = Some(Proof {
            receipt_sha256: receipt_sha256.clone(),
            tracking: tracking.to_string(),
            at: self.now,
            proved_by: proved_by.clone(),
        });
        slot.payment = Some(serde_json::to_value(&payment).expect("payments serialize"));
        order.paid_net = order.paid_net.checked_add(net).expect("within total");
        order.fees = order.fees.checked_add(fee).expect("within total");
        Self::finish_if_done(&mut order);
        self.update(&order);
        let paid = SharePayment {
            order: order.id,
            share: index,
            seller: line.seller,
            tracking: tracking.to_string(),
            receipt_sha256,
            payment,
            order_state: order.state,
            proved_by,
        };
        self.emit(command, &OrderSharePaid { paid: paid.clone() });
        Ok(SharePaid { paid })
    }

    /// Stores the courier receipt's image by its SHA-256, once, after checking it hashes to the proof.
    fn keep_receipt_image(
        &mut self,
        order: &Order,
        line: &OrderLine,
        receipt_sha256: &str,
        content_type: &str,
        bytes: &[u8],
    ) -> Result<(), Refusal> {
        if crate::crypto::sha256_hex(bytes) != receipt_sha256 {
            return refuse(Code::OrderInvalid, "The receipt image does not hash to `receipt_sha256`.");
        }
        if bytes.len() > RECEIPT_IMAGE_BYTES_MAX || !RECEIPT_CONTENT_TYPES.contains(&content_type) {
            return refuse(
                Code::OrderInvalid,
                format!("A receipt image is JPEG, PNG or WebP, at most {RECEIPT_IMAGE_BYTES_MAX} bytes."),
            );
        }
        if !self.snap.blobs.contains(receipt_sha256) {
            self.insert_blob(Blob {
                sha256: receipt_sha256.to_string(),
                content_type: content_type.to_string(),
                bytes: bytes.to_vec(),
                parties: vec![order.buyer.clone(), order.owner.clone(), line.seller.clone()],
                created_at: self.now,
            });
        }
        Ok(())
    }

    /// Pays the maker her share on proof: an escrowed share's milestone is
    /// delivered and released (the buyer keeps its dispute rights on it); a
    /// plain share's hold is posted. Returns the payment record.
    fn pay_share(
        &mut self,
        command: &Caller<'_>,
        order: &Order,
        line: &OrderLine,
        receipt_sha256: &str,
    ) -> Result<Payment, Refusal> {
        if let Some(contract_id) = &line.contract {
            let mut contract = self.contract(contract_id).expect("share contracts are loaded");
            let slot = &mut contract.milestones[0];
            slot.state = crate::escrow::MilestoneState::Delivered;
            slot.delivered_at = Some(self.now);
            slot.evidence_sha256 = Some(receipt_sha256.to_string());
            let release = self.release(command, contract, 0, false)?;
            return Ok(Payment::Escrowed {
                net_minor: release.payout.net_minor,
                fee_minor: release.payout.fee_minor,
                contract: contract_id.clone(),
                release,
                paid_at_ms: self.now,
            });
        }
        let hold = self.snap.holds.get(&line.hold).cloned().expect("share holds are loaded");
        let ids = format!("tr_{}_l{}", order.id, line.index);
        let out = PayOut {
            payee: AccountId::of_member(&line.seller),
            amount: line.amount,
            kind: TransferKind::Payment,
            ids: &ids,
            suffix: "pay",
            fee_bps: self.config.fee_bps,
        };
        let PaidOut { net, fee, link, transfers } = self.pay_out(command, hold, out, Some(&order.buyer));
        Ok(Payment::Direct { net_minor: net, fee_minor: fee, transfers, link, paid_at_ms: self.now })
    }

    pub(crate) fn cancel_share(&mut self, command: &Caller<'_>, share: &ShareId) -> Result<ShareCancelled, Refusal> {
        let (id, index) = (&share.order, share.index);
        let mut order = self.order(id)?;
        if command.actor.id != order.buyer && command.actor.id != order.owner {
            return refuse(Code::NotParty, "The buyer agent or its owner cancels a share.");
        }
        let line = self.authorized_line(&order, index)?;
        let hold = self.snap.holds.get(&line.hold).cloned().expect("share holds are loaded");
        self.post_hold(command, hold, &[], Some(&order.buyer));
        if let Some(contract_id) = &line.contract {
            let mut contract = self.contract(contract_id).expect("share contracts are loaded");
            contract.milestones[0].state = crate::escrow::MilestoneState::Voided;
            contract.refunded = contract.refunded.checked_add(line.amount).expect("within total");
            contract.state = crate::escrow::ContractState::Cancelled;
            self.update(&contract);
            let voided = ContractVoided { contract: contract_id.clone(), released_minor: line.amount };
            self.emit(command, &ShareContractCancelled(voided));
        }
        order.lines[index as usize].state = LineState::Cancelled;
        order.released = order.released.checked_add(line.amount).expect("within total");
        Self::finish_if_done(&mut order);
        self.update(&order);
        let cancelled = OrderShareCancelled {
            order: order.id.clone(),
            share: index,
            released_minor: line.amount,
            order_state: order.state,
        };
        self.emit(command, &cancelled);
        Ok(ShareCancelled { order: order.id, share: index, released_minor: line.amount, order_state: order.state })
    }
}

/// A proof of shipment is the courier receipt's SHA-256 and a tracking number; returns the hash in lowercase.
fn check_proof(receipt_sha256: &str, tracking: &str) -> Result<String, Refusal> {
    let hex_ok =
        receipt_sha256.len() == RECEIPT_SHA256_HEX_LEN && receipt_sha256.chars().all(|c| c.is_ascii_hexdigit());
    if !hex_ok || tracking.trim().is_empty() || tracking.len() > TRACKING_LEN_MAX {
        return refuse(
            Code::OrderInvalid,
            format!("A proof is the courier receipt's SHA-256 (64 hex) and a tracking number of 1–{TRACKING_LEN_MAX} characters."),
        );
    }
    Ok(receipt_sha256.to_ascii_lowercase())
}
