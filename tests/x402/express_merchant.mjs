// A merchant on the unmodified @x402/express 2.27 middleware that uses the
// Bazaar registry as its x402 facilitator (verify and settle with the
// merchant agent's bearer credential).
// Usage: node express_merchant.mjs REGISTRY MERCHANT_DID CREDENTIAL NETWORK PRICE
// Prints "listening http://127.0.0.1:PORT" and serves GET /paid until killed.
import express from "express";
import { paymentMiddleware, x402ResourceServer } from "@x402/express";
import { HTTPFacilitatorClient } from "@x402/core/server";

const [registry, merchantDid, credential, network, price] = process.argv.slice(2);
const auth = { Authorization: `Bearer ${credential}` };
const facilitator = new HTTPFacilitatorClient({
  url: `${registry}/x402`,
  createAuthHeaders: async () => ({ verify: auth, settle: auth, supported: {} }),
});
const server = new x402ResourceServer(facilitator).register(network, {
  scheme: "apt",
  defaultAssetTransferMethod: "default",
  paymentFlows: { default: { supported: ["authorization"], default: "authorization" } },
  async parsePrice(p) {
    return typeof p === "object" ? p : { amount: String(p), asset: "BNU" };
  },
  async enhancePaymentRequirements(requirements, kind) {
    return { ...requirements, extra: { ...requirements.extra, ...kind.extra } };
  },
});
const app = express();
const listener = app.listen(0, "127.0.0.1", () => {
  const url = `http://127.0.0.1:${listener.address().port}`;
  app.use(
    paymentMiddleware(
      {
        "GET /paid": {
          accepts: {
            scheme: "apt",
            network,
            price: { amount: price, asset: "BNU" },
            payTo: merchantDid,
            maxTimeoutSeconds: 900,
            extra: { resource: `${url}/paid` },
          },
          description: "a paid forecast",
        },
      },
      server,
    ),
  );
  app.get("/paid", (_req, res) => res.json({ forecast: "rain" }));
  console.log(`listening ${url}`);
});
