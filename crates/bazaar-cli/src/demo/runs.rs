//! The chamber's run buttons, attached to a served registry by the binary
//! (`bazaar_server::live::StoryRunner`): the scripted cushion-cover story and
//! the AI buyer agent, each with a fresh cast enrolled through the operator's
//! credential (handles end in `-r<n>`, so a registry can run them again), each
//! ending at the order's approval link.
//!
//! In the AI run the makers' agents answer as in the scripted story: as soon
//! as the AI's request for quote reaches them, each offers her scripted
//! proposals (the AI chooses what to ask and what to order; it does not play
//! the makers).

use super::market::{self, place_order, stage};
use super::stranger;
use anyhow::{Context, Result};
use bazaar_agents::buyer::{self as agent, ModelConfig};
use bazaar_sdk::wire::chamber::{AgentReport, FederationProof, PilotProof, StoryReport};
use bazaar_sdk::Client;
use bazaar_server::live::StoryRunner;
use bazaar_types::Clock;
use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Paid calls in the pilot's proof.
pub const PILOT_CALLS: u32 = 100;

/// The runs for the registry at `registry`, as its operator.
pub struct ChamberRuns {
    pub registry: String,
    pub operator_credential: String,
    /// The registry's clock (deadlines are set from it).
    pub clock: Arc<dyn Clock>,
    pub model: Option<ModelConfig>,
    pub runs: AtomicU64,
    /// The peer registry the federation run pays from, started on its first run.
    peer: Arc<tokio::sync::OnceCell<stranger::Peer>>,
}

impl ChamberRuns {
    pub fn new(
        registry: String,
        operator_credential: String,
        clock: Arc<dyn Clock>,
        model: Option<ModelConfig>,
    ) -> ChamberRuns {
        ChamberRuns { registry, operator_credential, clock, model, runs: AtomicU64::new(0), peer: Default::default() }
    }

    /// A suffix no earlier run on this registry used: the run's number and the clock.
    fn suffix(&self) -> String {
        let n = self.runs.fetch_add(1, Ordering::Relaxed) + 1;
        format!("-r{n}x{}", self.clock.now().ms() % 1_000_000)
    }
}

/// The scripted story up to its approval link.
async fn story(registry: String, operator: String, now_ms: i64, suffix: String) -> Result<StoryReport> {
    let operator = Client::new(&registry, Some(operator));
    let staged = stage(&operator, now_ms, &suffix, &|_| {}).await?;
    let order = place_order(&staged, &suffix).await?;
    Ok(StoryReport {
        run: "story".into(),
        cast: suffix,
        order: order["id"].as_str().context("the order's id")?.to_string(),
        total_minor: order["total"].as_u64().context("the order's total")?,
        approval_url: format!("{registry}{}", order["approval_url"].as_str().unwrap_or_default()),
        hotel_owner_credential: staged.hotel.credential().map(str::to_string),
        proposals: staged.proposals,
        allocation: staged.allocation,
        unmet: serde_json::from_value(staged.unmet).context("the unmet searches")?,
    })
}

/// The AI buyer agent on `request`, with the makers listed and answering as in the story.
async fn ai_run(
    registry: String,
    operator: String,
    now_ms: i64,
    suffix: String,
    model: ModelConfig,
    request: String,
) -> Result<AgentReport> {
    let operator = Client::new(&registry, Some(operator));
    let makers = market::list_makers(&operator, &suffix, &|_| {}).await?;
    let (hotel, buyer) = market::hotel(&operator, &suffix).await?;
    let credential = buyer.credential().context("the buyer agent's credential")?.to_string();
    let (makers, tag) = (&makers, suffix.clone());
    let answer_quotes = |tool: String, answer: Value| {
        let tag = tag.clone();
        async move {
            if tool == "request_quote" {
                if let Some(rfq) = answer["id"].as_str() {
                    market::collect_offers(makers, rfq, &tag, &|_| {}).await?;
                }
            }
            Ok(())
        }
    };
    let run = agent::run(&model, &registry, &credential, &request, now_ms, answer_quotes).await?;
    Ok(AgentReport {
        run: "agent".into(),
        cast: suffix,
        request,
        agent: run,
        hotel_owner_credential: hotel.credential().map(str::to_string),
    })
}

/// A number no other peer registry of this process was started with.
fn peer_number() -> u64 {
    static PEERS: AtomicU64 = AtomicU64::new(0);
    PEERS.fetch_add(1, Ordering::Relaxed) + 1
}

impl StoryRunner for ChamberRuns {
    fn story(&self) -> BoxFuture<'static, Result<StoryReport, String>> {
        let (registry, operator) = (self.registry.clone(), self.operator_credential.clone());
        let (now, suffix) = (self.clock.now().ms(), self.suffix());
        async move { story(registry, operator, now, suffix).await.map_err(|e| format!("{e:#}")) }.boxed()
    }

    fn pilot(&self) -> BoxFuture<'static, Result<PilotProof, String>> {
        let (registry, operator) = (self.registry.clone(), self.operator_credential.clone());
        let suffix = self.suffix();
        async move {
            let dir = std::env::temp_dir().join(format!("bazaar-pilot{suffix}-{}", std::process::id()));
            let operator = Client::new(&registry, Some(operator));
            let proof = super::restock::pilot(&operator, &dir, PILOT_CALLS, &suffix).await;
            std::fs::remove_dir_all(&dir).ok();
            proof.map_err(|e| format!("{e:#}"))
        }
        .boxed()
    }

    fn federation(&self) -> BoxFuture<'static, Result<FederationProof, String>> {
        let (registry, operator) = (self.registry.clone(), self.operator_credential.clone());
        let (now, suffix, peer) = (self.clock.now().ms(), self.suffix(), self.peer.clone());
        async move {
            let here = Client::new(&registry, Some(operator));
            let scratch = std::env::temp_dir().join(format!("bazaar-federation-{}", std::process::id()));
            // Each runner's peer in its own directory (several served registries may share a process).
            let peer_dir = scratch.join(format!("peer{}", peer_number()));
            let run = async {
                let peer = peer.get_or_try_init(|| stranger::start_peer(&here, now, &peer_dir)).await?;
                let run_dir = scratch.join(format!("run{suffix}"));
                let proof = stranger::stranger_run(&here, peer, now, &suffix, &run_dir).await;
                std::fs::remove_dir_all(&run_dir).ok();
                proof
            };
            run.await.map_err(|e| format!("{e:#}"))
        }
        .boxed()
    }

    fn agent_model(&self) -> Option<String> {
        self.model.as_ref().map(|m| m.model.clone())
    }

    fn agent(&self, request: String) -> BoxFuture<'static, Result<AgentReport, String>> {
        let Some(model) = self.model.clone() else {
            return async { Err("no model is configured".to_string()) }.boxed();
        };
        let (registry, operator) = (self.registry.clone(), self.operator_credential.clone());
        let (now, suffix) = (self.clock.now().ms(), self.suffix());
        async move { ai_run(registry, operator, now, suffix, model, request).await.map_err(|e| format!("{e:#}")) }
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_run_gets_a_new_cast() {
        let runs = ChamberRuns::new("http://x".into(), "op".into(), Arc::new(bazaar_sdk::clock::SystemClock), None);
        assert_ne!(runs.suffix(), runs.suffix());
    }
}
