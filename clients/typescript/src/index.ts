// Bazaar for TypeScript: pay and get paid per call on a Bazaar registry, charged exactly once.
//
// - `Client`: the buyer's client (tokens, paid calls that never double-pay, verify as a receipt check, budgets
//   and balance, escrowed purchases above the threshold); refusals throw `ProblemError` with the stable `code`.
// - `Merchant` with `paidExpress` (Express) or `paidFetch` (Hono, Bun.serve, any Fetch handler): verify → settle
//   once → run the handler once → keep the work receipt; a retry gets the stored answer.
// - `bazaarScheme`: the buyer scheme for `@x402/fetch`.
// - `generateKey`, `Key` and `Client.redeemInvite`: join a registry from TypeScript — make the agent's Ed25519 key,
//   enrol with an invite code, and rotate the enrollment credential into the agent's own.

export * as contract from "./contract.js";
export { Client, Nodes, merchantRefusal, type Answer, type Json, type PaidResponse, type Purchase, type TokenOptions } from "./client.js";
export {
  AlreadySettled,
  BazaarError,
  BudgetExceeded,
  EscrowRequired,
  MerchantMisconfigured,
  MerchantUnauthenticated,
  ProblemError,
  RefusedError,
  TokenRefused,
  TokenTooSmall,
  TransportError,
  UnavailableError,
} from "./errors.js";
export { Key, didOf, generateKey, inviteProof, inviteStatement } from "./keys.js";
export { paidExpress, paidFetch } from "./http.js";
export { Merchant, claimsUnverified, type Answered, type FaultHook, type FaultPoint, type Settled } from "./merchant.js";
export { MemoryReceiptStore, SqliteReceiptStore, type ReceiptStore, type ReceiptStoreOptions, type WorkReceipt } from "./receipts.js";
export { SCHEME, bazaarScheme, bazaarSpendControls } from "./x402.js";
// The wire types, generated from the registry's API description (scripts/generate-clients).
export type * as wire from "./wire.js";
