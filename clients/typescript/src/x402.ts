// A buyer scheme for @x402/fetch (x402 v2) that pays Bazaar merchants (moved here from clients/x402-bazaar).
//
// Scheme `apt` on a Bazaar registry's network (`bzr:<16 hex>`): to pay, the buyer's agent asks its own registry
// for a payment token addressed to the merchant (`payTo`) for the price (`amount`) and the resource, and sends it
// as the payload `{ token }`. The merchant settles it through its registry, exactly once per order.
//
//   import { wrapFetchWithPayment, x402Client } from "@x402/fetch";
//   import { bazaarScheme, bazaarSpendControls } from "@bazaar/sdk";
//   const client = new x402Client()
//     .register("bzr:*", bazaarScheme({ registry: "http://127.0.0.1:7878", credential: process.env.BAZAAR_CREDENTIAL }))
//     .setSpendControls(bazaarSpendControls("1000"));   // required: BNU is not a default x402 asset
//   const response = await wrapFetchWithPayment(fetch, client)("http://merchant.example/paid");
//
// Spend controls: @x402/fetch rejects unknown assets by default, so a Bazaar buyer must allow `BNU` on `bzr:*` —
// and the cap given here is also a client-side per-payment ceiling, on top of the agent's budget ceilings at its
// registry.

import { Client } from "./client.js";
import * as contract from "./contract.js";
import { ProblemError } from "./errors.js";
import { claimsUnverified } from "./merchant.js";

export const SCHEME = "apt";

interface Requirements {
  payTo: string;
  amount: string;
  extra?: { orderId?: string; resource?: string };
}

/** What `@x402/core` (2.27) tells a scheme's `onPaymentResponse` hook once the paid request is answered. */
interface PaymentResponse {
  paymentPayload: { payload?: { token?: unknown } };
  settleResponse?: unknown;
  /** A 402 refusal's `PAYMENT-REQUIRED`: its `error` is the merchant's reason (the registry's code). */
  paymentRequired?: { error?: string };
}

/**
 * The `apt` scheme client for `x402Client.register("bzr:*", …)`. It follows the SDK's buyer rules where x402 lets it
 * see them (`clients/conformance/contract.json`, `buyer`): the token comes from `Client.orderToken`, so an order's
 * replayed token that is voided, expired or about to expire is renewed (`renew:<jti>`) and a settled one used as
 * it is; and its `onPaymentResponse` hook voids the token when the merchant's 402 names one of `VOID_ON_CODES`,
 * releasing its hold at once. A merchant's 5xx (`merchant_unauthenticated` among them) reaches the hook with neither
 * a settlement nor a reason, so that token is left to expire.
 */
export function bazaarScheme({ registry, credential, fetch: doFetch = globalThis.fetch }: { registry: string; credential: string; fetch?: typeof fetch }) {
  const client = new Client(registry, credential, { fetch: doFetch });
  return {
    scheme: SCHEME,
    async createPaymentPayload(x402Version: number, requirements: Requirements) {
      const extra = requirements.extra ?? {};
      const orderId = extra.orderId ?? `x402-${crypto.randomUUID()}`;
      let answer;
      try {
        answer = await client.orderToken(requirements.payTo, Number(requirements.amount), orderId, extra.resource ?? "");
      } catch (error) {
        if (error instanceof ProblemError) throw new Error(`Bazaar refused a payment token: ${error.code}: ${error.detail}`);
        throw error;
      }
      return { x402Version, payload: { token: answer.body["token"] } };
    },
    schemeHooks: {
      async onPaymentResponse(response: PaymentResponse): Promise<void> {
        const reason = response.settleResponse === undefined ? response.paymentRequired?.error : undefined;
        const token = response.paymentPayload.payload?.token;
        if (reason === undefined || !contract.VOID_ON_CODES.includes(reason) || typeof token !== "string") return;
        const jti = claimsUnverified(token)?.["jti"];
        if (typeof jti !== "string" || !jti) return;
        // A failed void leaves the token to expire, as in `Client.pay`.
        await client.void(jti).catch(() => undefined);
      },
    },
  };
}

/** Spend controls allowing BNU on every Bazaar network, at most `maxAmountPerPayment` minor units each. */
export function bazaarSpendControls(maxAmountPerPayment: string | number) {
  return { allowedAssets: [{ network: "bzr:*", asset: "BNU", maxAmountPerPayment: String(maxAmountPerPayment) }] };
}
