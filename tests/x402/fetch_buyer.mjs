// Pays an x402 v2 route with the unmodified @x402/fetch client and Bazaar's
// buyer scheme (clients/typescript, @bazaar/sdk), then replays the exact paid request.
// Usage: node fetch_buyer.mjs URL REGISTRY CREDENTIAL
// Prints one JSON line: status, body, the decoded PAYMENT-RESPONSE, and the
// replay's status and body.
import { wrapFetchWithPayment, x402Client } from "@x402/fetch";
import { bazaarScheme, bazaarSpendControls } from "../../clients/typescript/dist/index.js";

const [url, registry, credential] = process.argv.slice(2);
let paidHeaders = null;
// Record the request @x402/fetch sends with the payment, to replay it verbatim.
const recordingFetch = async (input, init) => {
  const request = new Request(input, init);
  if (request.headers.get("payment-signature")) paidHeaders = Object.fromEntries(request.headers.entries());
  return fetch(request);
};
const client = new x402Client()
  .register("bzr:*", bazaarScheme({ registry, credential }))
  .setSpendControls(bazaarSpendControls("1000"));
const response = await wrapFetchWithPayment(recordingFetch, client)(url);
const decode = (header) => (header ? JSON.parse(Buffer.from(header, "base64").toString("utf8")) : null);
const out = {
  status: response.status,
  body: await response.text(),
  paymentResponse: decode(response.headers.get("payment-response")),
  paymentRequired: decode(response.headers.get("payment-required")),
};
if (paidHeaders) {
  const replay = await fetch(url, { headers: { "payment-signature": paidHeaders["payment-signature"] } });
  out.replayStatus = replay.status;
  out.replayBody = await replay.text();
}
console.log(JSON.stringify(out));
