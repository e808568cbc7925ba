//! Registry notifications into members' inboxes: a notifier reads the event
//! ledger after commit (never inside the money writer), turns each event
//! that concerns someone into typed notices, and posts each in the member's
//! DM with the registry. Every transport then carries it: poll, SSE,
//! WebSocket and webhooks.
//!
//! Once only: a notice is keyed `notice:<ledger seq>:<member>`, so reading
//! an event again (after a crash, before the cursor was saved) finds the
//! notice already written. The cursor is the plane's `notifier.ledger_seq`
//! counter, saved after each batch.
//!
//! What is told to whom:
//! - `dispute.filed` → the respondent, with the answer deadline;
//! - every later dispute phase (`dispute.evidence`, `dispute.ruling_opened`,
//!   `dispute.ruled`, `dispute.appealed`, `dispute.arbiter_replaced`,
//!   `dispute.executed`) → both parties, with the phase's deadline;
//! - `rfq.opened` → each invited seller, with the request's deadline;
//! - `order.created` awaiting approval → the buyer's owner, with the link;
//! - an order authorized (`order.created` without approval, `order.approved`)
//!   → each maker, the share notice in her language;
//! - `settlement.posted` → the merchant its fulfilment waits on.
//!
//! A rename (`member.renamed`) is a line in every channel the member is in.
//! Every dispute also has a room of its own (`dispute_room`): its parties and
//! its arbiter are members, the registry owns it, and each of the dispute's
//! ledger events is a phase line there.

use crate::problem::Problem;
use crate::state::AppState;
use bazaar_conversation::{Addressed, Notice, RecordRef, SystemLine};
use bazaar_core::dispute::events::DisputeFiledBody;
use bazaar_core::dispute::Dispute;
use bazaar_core::identity::events::MemberRenamed;
use bazaar_core::kernel::docs::{decode, Document};
use bazaar_core::market::order::Order;
use bazaar_core::market::Rfq;
use bazaar_core::model::Event;
use bazaar_core::pay::events::SettlementPosted;
use bazaar_core::vc::rfc3339_from_ms;
use bazaar_types::limits::NOTIFIER_BATCH;
use bazaar_types::{MemberId, Timestamp};
use std::sync::Arc;
use std::time::Duration;

/// The plane counter holding the last ledger `seq` the notifier has read.
pub const NOTIFIER_COUNTER: &str = "notifier.ledger_seq";
/// How often the notifier looks for new ledger events.
pub const NOTIFIER_TICK_MS: u64 = 500;

/// One notice for one member.
pub struct Told {
    pub to: MemberId,
    pub notice: Notice,
    pub body: String,
}

fn told(to: &MemberId, event: &Event, record: RecordRef, deadline: Option<Timestamp>, body: String) -> Told {
    let notice = Notice {
        event: event.kind.clone(),
        ledger_seq: event.seq,
        record: Some(record),
        deadline,
        language: "en".into(),
    };
    Told { to: to.clone(), notice, body }
}

fn record(kind: &str, id: impl ToString) -> RecordRef {
    RecordRef { kind: kind.into(), id: id.to_string() }
}

fn by(deadline: Option<Timestamp>) -> String {
    deadline.map(|at| format!(" Deadline: {}.", rfc3339_from_ms(at.0))).unwrap_or_default()
}

async fn doc<T: Document>(state: &AppState, id: &str) -> Result<Option<T>, Problem> {
    match state.store.doc(T::KIND, id).await? {
        Some(row) => Ok(Some(decode::<T>(&row)?)),
        None => Ok(None),
    }
}

fn id_in(event: &Event, field: &str) -> Option<String> {
    event.body.get(field).and_then(|v| v.as_str()).map(str::to_string)
}

/// The notices one ledger event makes, in a fixed order.
pub async fn notices_for(state: &AppState, event: &Event) -> Result<Vec<Told>, Problem> {
    let kind = event.kind.as_str();
    match kind {
        "dispute.filed" => {
            let Ok(filed) = serde_json::from_value::<DisputeFiledBody>(event.body.clone()) else { return Ok(vec![]) };
            let deadline = Some(filed.answer_by_ms);
            let reason = serde_json::to_value(filed.reason).ok().and_then(|v| v.as_str().map(str::to_string));
            let body = format!(
                "A dispute was filed against you ({}), claiming {} minor units. Answer it, or it is ruled against you by default.{}",
                reason.unwrap_or_default(),
                filed.claimed_minor,
                by(deadline)
            );
            Ok(vec![told(&filed.filed.respondent, event, record("dispute", &filed.filed.dispute), deadline, body)])
        }
        "dispute.evidence"
        | "dispute.ruling_opened"
        | "dispute.ruled"
        | "dispute.appealed"
        | "dispute.arbiter_replaced"
        | "dispute.executed" => {
            let Some(id) = id_in(event, "dispute") else { return Ok(vec![]) };
            let Some(dispute) = doc::<Dispute>(state, &id).await? else { return Ok(vec![]) };
            let phase = serde_json::to_value(dispute.phase).ok().and_then(|v| v.as_str().map(str::to_string));
            let deadline = if kind == "dispute.executed" { None } else { dispute.deadline };
            let body =
                format!("Dispute {id}: {kind}; it is now in its {} phase.{}", phase.unwrap_or_default(), by(deadline));
            let parties = [&dispute.claimant, &dispute.respondent];
            Ok(parties.into_iter().map(|to| told(to, event, record("dispute", &id), deadline, body.clone())).collect())
        }
        "rfq.opened" => {
            let Some(id) = id_in(event, "rfq") else { return Ok(vec![]) };
            let Some(rfq) = doc::<Rfq>(state, &id).await? else { return Ok(vec![]) };
            let deadline = Some(rfq.request.deadline);
            let body = format!(
                "You are invited to quote on {} × {}, at most {} minor units each.{}",
                rfq.request.quantity,
                rfq.item,
                rfq.request.max_unit_price,
                by(deadline)
            );
            let mut sellers: Vec<&MemberId> = rfq.invited.iter().map(|(seller, _)| seller).collect();
            sellers.dedup();
            Ok(sellers.into_iter().map(|to| told(to, event, record("rfq", &id), deadline, body.clone())).collect())
        }
        "order.created" | "order.approved" => order_notices(state, event).await,
        "settlement.posted" => {
            let Ok(posted) = serde_json::from_value::<SettlementPosted>(event.body.clone()) else { return Ok(vec![]) };
            if posted.corridor.is_some() {
                return Ok(vec![]);
            }
            let paid = &posted.paid;
            let body = format!(
                "Order {} is paid: {} minor units settled from {}. Fulfil it now.",
                paid.order_id, paid.amount_minor, paid.buyer
            );
            Ok(vec![told(&paid.merchant, event, record("order", &paid.order_id), None, body)])
        }
        _ => Ok(vec![]),
    }
}

/// An order waiting for its owner, or authorized: each maker told her share in her language.
async fn order_notices(state: &AppState, event: &Event) -> Result<Vec<Told>, Problem> {
    let Some(id) = id_in(event, "order") else { return Ok(vec![]) };
    let Some(order) = doc::<Order>(state, &id).await? else { return Ok(vec![]) };
    let waiting = event.kind == "order.created" && event.body.get("approval_required") == Some(&true.into());
    if waiting {
        let body = format!(
            "Order {id} for {} minor units waits for your approval: open /approve/{id} to approve or decline it.",
            order.total
        );
        return Ok(vec![told(&order.owner, event, record("order", &id), Some(order.deadline), body)]);
    }
    let mut notices = Vec::new();
    for line in &order.lines {
        let Some(told_her) = &line.notification else { continue };
        let mut notice = told(&line.seller, event, record("order", &id), Some(order.deadline), told_her.text.clone());
        notice.notice.language = told_her.language.clone();
        if notices.iter().all(|n: &Told| n.to != line.seller) {
            notices.push(notice);
        }
    }
    Ok(notices)
}

/// The room of the dispute an event concerns: its parties and its arbiter
/// (when it has one) as members, the registry its owner, and the event as a
/// phase line, written once per ledger `seq`. Other events: nothing.
async fn dispute_room(state: &AppState, event: &Event) -> Result<(), Problem> {
    if !event.kind.starts_with("dispute.") {
        return Ok(());
    }
    let Some(id) = id_in(event, "dispute") else { return Ok(()) };
    let Some(dispute) = doc::<Dispute>(state, &id).await? else { return Ok(()) };
    let plane = state.plane()?;
    let mut members = vec![dispute.claimant.clone(), dispute.respondent.clone()];
    members.extend(dispute.arbiter.iter().cloned());
    let (registry, record) = (state.registry.clone(), record("dispute", &id));
    let (name, opened) = (format!("dispute {id}"), record.clone());
    let (room, added) = plane.call(move |store| store.record_room(&registry, opened, name, members)).await?;
    // Only those just added reload their streams; the others' memberships did not change.
    plane.memberships_changed(&added);
    let phase = serde_json::to_value(dispute.phase).ok().and_then(|v| v.as_str().map(str::to_string));
    let deadline = if event.kind == "dispute.executed" { None } else { dispute.deadline };
    let line = SystemLine::Phase { record, event: event.kind.clone(), phase: phase.unwrap_or_default(), deadline };
    let (registry, key) = (state.registry.clone(), format!("phase:{}", event.seq));
    let written = plane.call(move |store| store.record_line(&registry, &room.id, line, key)).await?;
    plane.published(&written);
    Ok(())
}

/// A rename on the ledger (`member.renamed`) as a line in every channel the
/// member is in now, once per channel.
async fn rename_lines(state: &AppState, event: &Event) -> Result<(), Problem> {
    if event.kind != "member.renamed" {
        return Ok(());
    }
    let Ok(renamed) = serde_json::from_value::<MemberRenamed>(event.body.clone()) else { return Ok(()) };
    let plane = state.plane()?;
    let key = format!("renamed:{}", event.seq);
    let MemberRenamed { member, from, to } = renamed;
    let lines = plane.call(move |store| store.renamed(&member, from, to, key)).await?;
    for line in &lines {
        plane.published(line);
    }
    Ok(())
}

/// What one notifier pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    pub events_read: usize,
    pub notices_written: usize,
}

/// Reads the ledger after the notifier's cursor (up to `NOTIFIER_BATCH`
/// events), writes their notices and moves the cursor.
pub async fn notify_once(state: &Arc<AppState>) -> Result<Pass, Problem> {
    let plane = state.plane()?.clone();
    let after = plane.call(|store| store.counter(NOTIFIER_COUNTER)).await?;
    let events = state.store.events(after, NOTIFIER_BATCH).await?;
    let Some(last) = events.last().map(|event| event.seq) else {
        state.metrics.set("bazaar_notifier_behind_events", String::new(), 0.0);
        return Ok(Pass::default());
    };
    // The batch's notices are written together, in ledger order, in one write of the plane: every paid call
    // makes one (`settlement.posted`), so one write per notice falls behind the ledger under load.
    let mut batch = Vec::new();
    for event in &events {
        dispute_room(state, event).await?;
        rename_lines(state, event).await?;
        for Told { to, notice, body } in notices_for(state, event).await? {
            if to != state.registry {
                let key = format!("notice:{}:{to}", event.seq);
                batch.push(Addressed { to, notice, body, key });
            }
        }
    }
    let written = batch.len();
    if written > 0 {
        let mut recipients: Vec<MemberId> = batch.iter().map(|n| n.to.clone()).collect();
        recipients.sort();
        recipients.dedup();
        let from = state.registry.clone();
        let messages = plane.call(move |store| store.notify(&from, batch)).await?;
        // A notice may have opened a DM: its member's streams reload first.
        plane.memberships_changed(&recipients);
        // One signal to the other nodes for the whole batch (one notice per paid call under load).
        plane.published_all(&messages);
    }
    plane.call(move |store| store.set_counter(NOTIFIER_COUNTER, last)).await?;
    // A short batch reached the head; a full one asks how far the head is.
    let behind = match events.len() < NOTIFIER_BATCH {
        true => 0,
        false => state.store.head().await.map_or(0, |head| head.seq.saturating_sub(last)),
    };
    state.metrics.set("bazaar_notifier_behind_events", String::new(), behind as f64);
    Ok(Pass { events_read: events.len(), notices_written: written })
}

/// The node's notifier: a pass every `NOTIFIER_TICK_MS`, draining whole batches.
pub fn spawn_notifier(state: Arc<AppState>) -> Option<tokio::task::JoinHandle<()>> {
    state.plane().ok()?;
    Some(tokio::spawn(async move {
        loop {
            match notify_once(&state).await {
                Ok(pass) if pass.events_read == NOTIFIER_BATCH => continue,
                Ok(_) => {}
                Err(problem) => tracing::warn!(code = %problem.code, "notifier pass failed; retrying"),
            }
            tokio::time::sleep(Duration::from_millis(NOTIFIER_TICK_MS)).await;
        }
    }))
}
