//! The storefront: sellers list, a buyer asks for quotes from the listings of
//! other owners' sellers, sellers offer, the buyer closes the request and
//! orders its allocation (one authorization, a hold per share), then each
//! maker proves shipment and is paid — or the buyer cancels a share first. A
//! third of the orders wait for the buyer's owner, who approves (the holds are
//! placed then) or declines.
//! Requests are built as the server's market routes build them; proofs and
//! cancellations carry no idempotency key there, so none here either: their
//! exactly-once comes from the order itself, which the auditor counts.

use crate::cast::{command, Cast, AGENT_OWNERS, TRADERS};
use crate::flows::{recent_docs, WRONG_PER_MILLE};
use crate::rng::Rng;
use bazaar_core::command::{Command, Op};
use bazaar_core::crypto::sha256_hex;
use bazaar_core::market::order::{LineState, Order, OrderState, ShareId};
use bazaar_core::market::{self, listing_id, rfq_id, ListingSpec, Proposal, Request, Rfq, RfqState, Terms};
use bazaar_store::{Store, StoreError};
use bazaar_types::{Amount, ListingId, MarketOrderId, RfqId, Timestamp};

/// SKUs each seller lists, at most (a listing is relisted under its SKU).
const SKUS_PER_SELLER: u64 = 2;
/// A listing's price, in minor units, at least and at most.
const LIST_PRICE_MINOR: (u64, u64) = (500, 3_000);
/// Units a request asks for, at least and at most (kept so an order stays under the buyer's per-call ceiling).
const RFQ_UNITS: (u64, u64) = (2, 12);
/// A request's deadline, in days ahead.
const RFQ_DEADLINE_DAYS: u64 = 20;
/// Requests and orders the workload picks among (the most recent).
const RECENT_MAX: usize = 12;

#[derive(Default)]
pub struct Storefront {
    next: u64,
    /// Listings put, with the index of their seller.
    listings: Vec<(usize, ListingId)>,
    rfqs: Vec<RfqId>,
    pub orders: Vec<MarketOrderId>,
}

fn terms(rng: &mut Rng) -> Terms {
    let list = rng.between(LIST_PRICE_MINOR.0, LIST_PRICE_MINOR.1);
    Terms {
        list_price: Amount(list),
        floor: Amount(list * 6 / 10),
        max_discount_bps: 2_000,
        capacity_per_day: 5,
        capacity_max: 40,
        lead_time_days: 1,
        notice_days: 2,
    }
}

impl Storefront {
    fn key(&mut self) -> String {
        self.next += 1;
        format!("m-{}", self.next)
    }

    pub fn next(
        &mut self,
        rng: &mut Rng,
        cast: &Cast,
        store: &dyn Store,
        now: Timestamp,
    ) -> Result<Option<Command>, StoreError> {
        if self.listings.is_empty() || rng.below(100) < 5 {
            return Ok(Some(self.list(rng, cast)));
        }
        let open = recent_docs::<Rfq, _>(store, &self.rfqs, RECENT_MAX, |r| r.order.is_none())?;
        let live = recent_docs::<Order, _>(store, &self.orders, RECENT_MAX, |o| o.state == OrderState::Authorized)?;
        let waiting =
            recent_docs::<Order, _>(store, &self.orders, RECENT_MAX, |o| o.state == OrderState::AwaitingApproval)?;
        let roll = rng.below(100);
        let command = if roll < 15 {
            Some(self.ask(rng, cast, now))
        } else if let Some(order) = rng.pick(&waiting).filter(|_| roll < 35).cloned() {
            Some(self.decide(rng, cast, &order))
        } else if let Some(rfq) = rng.pick(&open).filter(|_| roll < 60 || live.is_empty()).cloned() {
            self.on_rfq(rng, cast, &rfq)
        } else if let Some(order) = rng.pick(&live).cloned() {
            self.on_order(rng, cast, &order)
        } else {
            Some(self.ask(rng, cast, now))
        };
        Ok(command)
    }

    fn list(&mut self, rng: &mut Rng, cast: &Cast) -> Command {
        let seller = TRADERS[rng.index(TRADERS.len())];
        let sku = format!("sku-{seller}-{}", rng.below(SKUS_PER_SELLER));
        let id = listing_id(&cast.agents[seller].id, &sku);
        if !self.listings.iter().any(|(_, l)| l == &id) {
            self.listings.push((seller, id));
        }
        let spec = ListingSpec {
            sku,
            title: "Linen cushion cover".into(),
            description: "Hand-stitched.".into(),
            tags: vec!["cushion".into()],
            terms: terms(rng),
            language: "en".into(),
        };
        command(&cast.agents[seller], Some(self.key()), Op::Market(market::Op::PutListing { spec }))
    }

    fn ask(&mut self, rng: &mut Rng, cast: &Cast, now: Timestamp) -> Command {
        let buyer = TRADERS[rng.index(TRADERS.len())];
        let invited = self
            .listings
            .iter()
            .filter(|(s, _)| AGENT_OWNERS[*s] != AGENT_OWNERS[buyer])
            .map(|(s, l)| (cast.agents[*s].id.clone(), l.clone()))
            .collect();
        let request = Request {
            quantity: rng.between(RFQ_UNITS.0, RFQ_UNITS.1),
            max_unit_price: Amount(LIST_PRICE_MINOR.1),
            deadline: now.plus_s(RFQ_DEADLINE_DAYS * 86_400),
        };
        let key = self.key();
        self.rfqs.push(rfq_id(&cast.agents[buyer].id, &key));
        let op = Op::Market(market::Op::CreateRfq { item: "cushion covers".into(), request, invited });
        command(&cast.agents[buyer], Some(key), op)
    }

    /// An offer from an invited seller, the buyer closing it, or the buyer ordering a closed one.
    fn on_rfq(&mut self, rng: &mut Rng, cast: &Cast, rfq: &Rfq) -> Option<Command> {
        let buyer = cast.find(&rfq.buyer)?;
        let key = Some(self.key());
        if rfq.state == RfqState::Closed {
            // A third of the orders wait for a person's approval, whatever the owner's policy.
            let op = Op::Market(market::Op::order_for(rfq, rng.below(3) == 0));
            if let Some(k) = &key {
                self.orders.push(market::order::order_id(&buyer.id, k));
            }
            return Some(command(buyer, key, op));
        }
        if !rfq.offers.is_empty() && rng.below(2) == 0 {
            return Some(command(buyer, key, Op::Market(market::Op::CloseRfq { rfq: rfq.id.clone() })));
        }
        let (seller, listing) = rng.pick(&rfq.invited)?.clone();
        let price = rng.between(LIST_PRICE_MINOR.0 * 6 / 10, LIST_PRICE_MINOR.1);
        let proposal = Proposal { unit_price: Amount(price), quantity: rng.between(1, rfq.request.quantity) };
        let op = Op::Market(market::Op::MakeOffer { rfq: rfq.id.clone(), listing, proposal, committed: 0 });
        Some(command(cast.find(&seller)?, key, op))
    }

    /// The buyer's owner approves an order waiting for it (its shares' holds are placed then) or
    /// declines it (nothing was held); sometimes the buyer agent itself tries, and is refused.
    fn decide(&mut self, rng: &mut Rng, cast: &Cast, order: &Order) -> Command {
        let agent = cast.agent_index(&order.buyer).expect("a cast buyer");
        let person = if rng.chance(WRONG_PER_MILLE) { &cast.agents[agent] } else { cast.owner_of(agent) };
        let op = Op::Market(market::Op::DecideOrder {
            order: order.id.clone(),
            buyer: order.buyer.clone(),
            lines: order.lines.len() as u32,
            sellers: order.lines.iter().map(|l| l.seller.clone()).collect(),
            approve: rng.below(4) != 0,
        });
        command(person, Some(self.key()), op)
    }

    /// A maker proves a share shipped (and is paid), or the buyer cancels one before it ships.
    fn on_order(&mut self, rng: &mut Rng, cast: &Cast, order: &Order) -> Option<Command> {
        let open: Vec<u32> = order.lines.iter().filter(|l| l.state == LineState::Authorized).map(|l| l.index).collect();
        let index = *rng.pick(&open)?;
        let line = &order.lines[index as usize];
        let share = ShareId { order: order.id.clone(), index };
        let (buyer, seller) = (order.buyer.clone(), line.seller.clone());
        if rng.below(3) == 0 {
            let op = Op::Market(market::Op::CancelShare { share, buyer, seller });
            return Some(command(cast.find(&order.buyer)?, None, op));
        }
        self.next += 1;
        let image = format!("receipt {} {index} {}", order.id, self.next).into_bytes();
        let op = Op::Market(market::Op::ProveShipment {
            share,
            buyer,
            seller: seller.clone(),
            receipt_sha256: sha256_hex(&image),
            tracking: format!("TRACK{}", self.next),
            receipt: Some(("image/png".into(), image)),
        });
        Some(command(cast.find(&seller)?, None, op))
    }
}
