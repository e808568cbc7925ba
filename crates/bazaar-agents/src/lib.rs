//! The agents that act on a registry from outside it, as libraries: the labor market's runtimes
//! (`labor`: the `worker` — accepted askers only, one task at a time, answers saved before they are published,
//! its `Meter` keeping the allowance and its `LeaseSource` ordering the queue by active leases; the
//! `validator` — post, collect, accept, judge, attest, replay, export, records, on its own SQLite file; the
//! `contest` and its pairwise judge; `fetch`, the evidence fetch policy; `engine`, the pluggable command a
//! worker runs, its usage read as it arrives; `identity`, the did:key seam for enrollment; `bounty`, funding
//! before posting and release on acceptance; `payments`, the hiring agent's journal, saved before money moves
//! and never retrying an uncertain attempt), the chamber's AI buyer (`buyer`: OpenAI-compatible tool calling
//! over the storefront's MCP tools), the relay client they share (`relay_client`, NIP-01 over outbound
//! WebSockets, and `follow_task`, the remote ask/wait) and the client side of sealed channels (`sealed`).
//!
//! Each reaches a registry only as any client would: the SDK over HTTP and the relay over WebSockets; the
//! rules they apply are `bazaar_relay::labor`'s. The `bazaar` binary parses arguments and calls these.

pub mod buyer;
pub mod labor;
pub mod relay_client;
pub mod sealed;
