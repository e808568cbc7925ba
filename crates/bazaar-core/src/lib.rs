//! Sans-IO domain core of Bazaar, organised by capability around a small money
//! kernel.
//!
//! - [`kernel`]: the batch, snapshot and changes, ledger primitives, the event
//!   chain, idempotency, refusals. It names no capability.
//! - Capabilities, lowest first: [`identity`], [`pay`], [`escrow`],
//!   [`dispute`] (with stake), [`reputation`] (a read model over events),
//!   [`federation`], [`market`] (beside dispute, above escrow) and [`bounty`]
//!   (the labor market's rewards, on identity and pay) and [`hire`] (owners'
//!   exact authorizations to pay specialists and guest hires, on escrow), and
//!   [`chamber`] (the refusal an attack press met in a scratch registry, on the
//!   kernel alone). Each owns
//!   its `Op` sub-enum, row keys, apply functions and event kinds; a
//!   capability uses only lower ones.
//! - The composer on top: [`command`] (`Command`, `Op`, keys, dispatch) and
//!   [`apply`] (`Config`, `apply_batch`).
//! - Support modules every layer may use: [`crypto`], [`vc`], [`validate`],
//!   and [`audit`] (chain and balance recomputation).
//!
//! Nothing here performs I/O, reads a clock or draws randomness. A storage
//! adapter loads a [`state::Snapshot`] for a batch of [`command::Command`]s,
//! calls [`apply::apply_batch`], and writes the returned [`state::Changes`] in
//! one transaction. Every outcome is a value: a receipt or a [`refusal::Refusal`]
//! with a stable code.
//!
//! ## Map
//!
//! (What this crate holds, file by file; `ARCHITECTURE.md` keeps the one-line summary.)
//!
//! sans-IO domain logic, organised **by capability around a
//! small money kernel**. Layers, lowest first (each uses only those before it;
//! `dispute` and `market` both sit on `escrow` and never use each other):
//!
//! ```text
//! kernel ← identity ← pay ← escrow ← dispute ← reputation ← federation
//!                        ↖ bounty  ↖ market, hire
//! composer (command.rs, apply.rs) on top; support (crypto, vc, validate, audit) beside
//! ```
//!
//! - `kernel/` names no capability: `batch` (`Batch`, the driver
//!   `apply_batch` that runs each command once or replays its idempotency
//!   record, `refuse`, the write primitives, `EventKind` and the
//!   `event_kinds!` macro each capability declares its closed enum of event
//!   kinds with), `ledger` (accounts, holds that resolve once, transfers,
//!   linked legs, spending ceilings, and `pay_out` — the one way a hold pays
//!   someone less the protocol fee), `docs` (the `Document` trait: one body
//!   type per `DocKind` with a version; `Batch::load` decodes a stored body at
//!   most once per batch), `keys` (`Keys`: the rows a batch needs), `state`
//!   (`Snapshot` in, `Changes` out), `model` (rows, `DocRow`, `DocKind`),
//!   `chain` (event hashing, `verify_page`), `refusal` (`Code`: stable machine
//!   codes), `request` (`Caller`, `Idem`), `config` (the fee and
//!   the escrow threshold — kernel settings only).
//! - One folder per capability, each with its `Op` sub-enum (`name`, `keys`,
//!   `apply`), its event-kind enum, its event bodies (`events.rs`: one
//!   `EventBody` type per kind it writes, written with `Batch::emit`, the parts
//!   other capabilities read flattened into them), its success answers
//!   (`receipts.rs`: one type per answer and a `Receipt` declared with
//!   `receipt_set!` that `Op::apply` returns; the composer tags it with its
//!   capability, `command::Receipt`, and `Outcome` carries that type to the
//!   edge, into the idempotency record and back) and its documents.
//!   A receipt and the event it accompanies are separate types even where
//!   they share fields, so either can change alone. The capabilities:
//!   `identity` (bootstrap, owners, invites,
//!   credentials — with their scopes; a credential without `pay` cannot send a
//!   command whose `Op::moves_money` is true, each capability classifying its
//!   own commands exhaustively —, handles), `pay` (budgets, mint, fund, `apt_` tokens in
//!   `pay::token`, settle, void/expire), `escrow` (contracts and milestones),
//!   `dispute` (four phases, one function per act in `acts.rs`, the run-once
//!   `execute.rs`, stake, the desk), `reputation` (the `bazaar-rep-v1` fold
//!   over typed events: `Ledger::observe`, `figures`, `combine`,
//!   `PassportAudit`), `federation` (key history, peers and corridors —
//!   corridor tokens and relayed settlement live here so pay never calls up —,
//!   passports imported, guests, the relay state machine, `netting`: signed
//!   corridor netting statements), `market` (rules,
//!   listings and search, requests for quote, orders in `market::order`),
//!   `bounty` (on identity and pay only: a job's reward held at posting —
//!   `Bounty`, `bty_<job>` — paid once to the worker's owner-held destination
//!   on an accepted verdict the edge verified, as a `Reward` document whose
//!   parties are the worker and the destination; withdrawn only after the
//!   claim window), `hire` (on identity, pay and escrow: an owner's exact
//!   `ServiceAuthorization` — task, specialist, pay-to, amount; zero is
//!   sponsorship — and the one payment it allows, from the hiring agent's own
//!   account and budget, gross/fee/net apart; and guest hires — a `Hire`
//!   whose terms, signed by the specialist, are locked at agreement, accepted
//!   only on a response the edge verified, paid directly or by releasing the
//!   escrowed contract it opened, which is why `hire` sits on escrow; and
//!   priority `Lease`s — prepaid for the payer's own task identity, never
//!   renewed, `recovery` until the worker's receipt, then `active` until the
//!   period ends), `chamber` (kernel only: the registry alone records the
//!   refusal a chamber press met in a scratch registry, as one `refusal.recorded`).
//! - The composer: `command` (`Command`, `enum Op { Identity(identity::Op),
//!   Pay(pay::Op), … }`, `Keys::add`, `run`) and `apply` (`Config` = kernel
//!   settings + dispute windows, `apply_batch`). One line per capability in
//!   each match.
//! - Support: `crypto` (`did:key`, Ed25519), `vc` (W3C VC 2.0 with an
//!   `eddsa-jcs-2022` proof), `validate` (shape checks on outside values),
//!   `audit` (`Auditor`: chain + balance recomputation).
//!
//! Contracts, disputes, stake records, peers, imports, relays, listings,
//! requests, orders and policies are documents (`DocRow`: kind, id, versioned
//! body, `due_at` for the sweeper, parties for listing); money they speak of
//! is always holds and transfers in the ledger.
//!
//! **To add a command** (say, `pay::Op::Refund`): add the variant to
//! `pay::Op` with its `name`, its rows in `Op::keys`, and its arm in
//! `Op::apply` calling a new `impl Batch` method in a file of `pay/`; give
//! its event a variant in `PayEvent`. Nothing outside `pay/` changes, then
//! the edge route. A new *capability* adds its folder and one line in each of
//! `command::Op`, `Op::name`, `Keys::add` and `command::run`, plus its row in
//! the tidy test's `CORE_LAYERS`.

pub mod kernel;

pub mod bounty;
pub mod chamber;
pub mod dispute;
pub mod escrow;
pub mod federation;
pub mod hire;
pub mod identity;
pub mod market;
pub mod pay;
pub mod reputation;

pub mod apply;
pub mod command;

pub mod audit;
pub mod crypto;
pub mod validate;
pub mod vc;

// The kernel's storage-facing modules, at the paths adapters and the edge use.
pub use kernel::{chain, model, refusal, state};
pub use market::order;
pub use pay::token;

pub use bazaar_types as types;
