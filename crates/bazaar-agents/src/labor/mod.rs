//! The labor market's runtimes, over outbound relay connections only:
//! `worker` (claim, progress, usage, result; one task at a time; restart-safe),
//! `validator` (post → collect → accept → judge → attest, replay, export),
//! `bounty` (a job's reward funded before posting, released on acceptance),
//! `payments` (the hiring agent's journal: saved before money moves, never retried when uncertain),
//! `fetch` (evidence from an allowlist, defensively), `engine` (the pluggable
//! command a worker runs). The rules they apply are `bazaar_relay::labor`'s.

pub mod bounty;
pub mod contest;
pub mod engine;
pub mod fetch;
pub mod identity;
pub mod payments;
pub mod validator;
pub mod worker;
