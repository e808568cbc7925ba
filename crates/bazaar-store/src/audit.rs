//! The audit over any store: verify the event chain end to end and recompute
//! every balance from the immutable transfers, page by page.

use crate::{Store, StoreError};
use bazaar_core::audit::{AuditReport, Auditor};
use bazaar_types::limits::PAGE_LIMIT_MAX;

/// Progress reported while auditing: what is being read and how many so far.
#[derive(Clone, Copy, Debug)]
pub struct Progress<'a> {
    pub stage: &'a str,
    pub rows: u64,
}

/// Reads every event, transfer, hold and account and checks them.
pub async fn audit(store: &dyn Store, progress: &(dyn Fn(Progress) + Sync)) -> Result<AuditReport, StoreError> {
    let mut auditor = Auditor::new();
    let mut passports = bazaar_core::reputation::PassportAudit::new();
    let mut after = 0;
    loop {
        let page = store.events(after, PAGE_LIMIT_MAX).await?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        auditor.events(&page);
        passports.collect(&page);
        progress(Progress { stage: "events", rows: after });
    }
    // Second pass: every passport's recorded figures against a recompute from
    // scratch at the sequence it was computed at.
    let mut after = 0;
    loop {
        let page = store.events(after, PAGE_LIMIT_MAX).await?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        passports.check(&page);
        progress(Progress { stage: "passport figures", rows: after });
    }
    let (checked, problems) = passports.finish();
    auditor.passport_figures(checked, problems);
    let (mut position, mut transfers) = (0, 0u64);
    loop {
        let page = store.transfers(position, PAGE_LIMIT_MAX).await?;
        let Some((last, _)) = page.last() else { break };
        position = *last;
        transfers += page.len() as u64;
        auditor.transfers(&page.into_iter().map(|(_, t)| t).collect::<Vec<_>>());
        progress(Progress { stage: "transfers", rows: transfers });
    }
    let (mut after, mut holds) = (String::new(), 0u64);
    loop {
        let page = store.holds(&after, PAGE_LIMIT_MAX).await?;
        let Some(last) = page.last() else { break };
        after = last.id.0.clone();
        holds += page.len() as u64;
        auditor.holds(&page);
        progress(Progress { stage: "holds", rows: holds });
    }
    let mut accounts = Vec::new();
    let mut after = String::new();
    loop {
        let page = store.accounts(&after, PAGE_LIMIT_MAX).await?;
        let Some(last) = page.last() else { break };
        after = last.id.0.clone();
        accounts.extend(page);
        progress(Progress { stage: "accounts", rows: accounts.len() as u64 });
    }
    Ok(auditor.finish(&accounts))
}
