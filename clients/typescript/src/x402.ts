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

export const SCHEME = "apt";

interface Requirements {
  payTo: string;
  amount: string;
  extra?: { orderId?: string; resource?: string };
}

/** The `apt` scheme client for `x402Client.register("bzr:*", …)`. */
export function bazaarScheme({ registry, credential, fetch: doFetch = globalThis.fetch }: { registry: string; credential: string; fetch?: typeof fetch }) {
  return {
    scheme: SCHEME,
    async createPaymentPayload(x402Version: number, requirements: Requirements) {
      const extra = requirements.extra ?? {};
      const body = {
        merchant: requirements.payTo,
        max_amount_minor: Number(requirements.amount),
        order_id: extra.orderId ?? `x402-${crypto.randomUUID()}`,
        resource: extra.resource ?? "",
      };
      const response = await doFetch(`${registry.replace(/\/$/, "")}/v1/tokens`, {
        method: "POST",
        headers: { authorization: `Bearer ${credential}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const answer = (await response.json()) as { token?: string; code?: string; detail?: string };
      if (!response.ok) {
        throw new Error(`Bazaar refused a payment token: ${answer.code}: ${answer.detail}`);
      }
      return { x402Version, payload: { token: answer.token } };
    },
  };
}

/** Spend controls allowing BNU on every Bazaar network, at most `maxAmountPerPayment` minor units each. */
export function bazaarSpendControls(maxAmountPerPayment: string | number) {
  return { allowedAssets: [{ network: "bzr:*", asset: "BNU", maxAmountPerPayment: String(maxAmountPerPayment) }] };
}
