// Checks the relay page's own verifier (crates/bazaar-server/src/relay/verify.mjs, the file the page
// loads) against the BIP-340 test vectors and against events npm nostr-tools signed.
//
//   node verify_vectors.mjs            one JSON line: {"ok":true,"vectors":N,...} and exit 0,
//                                      or {"ok":false,"failures":[...]} and exit 1
//
// The vectors are bitcoin/bips bip-0340/test-vectors.csv, indices 0-14 (the ones with 32-byte messages;
// 15-18 test other message lengths, which a Nostr event id never has).
import { finalizeEvent, generateSecretKey, verifyEvent as nostrToolsVerify } from "nostr-tools/pure";
import {
  hexToBytes,
  verifyEvent,
  verifySchnorr,
} from "../../crates/bazaar-server/src/relay/verify.mjs";

const M1 = "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89";
const PK = "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659";

// [index, public key, message, signature, expected, comment]
const VECTORS = [
  [0, "F9308A019258C31049344F85F89D5229B531C845836F99B08601F113BCE036F9",
    "0000000000000000000000000000000000000000000000000000000000000000",
    "E907831F80848D1069A5371B402410364BDF1C5F8307B0084C55F1CE2DCA821525F66A4A85EA8B71E482A74F382D2CE5EBEEE8FDB2172F477DF4900D310536C0",
    true, ""],
  [1, PK, M1,
    "6896BD60EEAE296DB48A229FF71DFE071BDE413E6D43F917DC8DCF8C78DE33418906D11AC976ABCCB20B091292BFF4EA897EFCB639EA871CFA95F6DE339E4B0A",
    true, ""],
  [2, "DD308AFEC5777E13121FA72B9CC1B7CC0139715309B086C960E18FD969774EB8",
    "7E2D58D8B3BCDF1ABADEC7829054F90DDA9805AAB56C77333024B9D0A508B75C",
    "5831AAEED7B44BB74E5EAB94BA9D4294C49BCF2A60728D8B4C200F50DD313C1BAB745879A5AD954A72C45A91C3A51D3C7ADEA98D82F8481E0E1E03674A6F3FB7",
    true, ""],
  [3, "25D1DFF95105F5253C4022F628A996AD3A0D95FBF21D468A1B33F8C160D8F517",
    "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF",
    "7EB0509757E246F19449885651611CB965ECC1A187DD51B64FDA1EDC9637D5EC97582B9CB13DB3933705B32BA982AF5AF25FD78881EBB32771FC5922EFC66EA3",
    true, "test fails if msg is reduced modulo p or n"],
  [4, "D69C3509BB99E412E68B0FE8544E72837DFA30746D8BE2AA65975F29D22DC7B9",
    "4DF3C3F68FCC83B27E9D42C90431A72499F17875C81A599B566C9889B9696703",
    "00000000000000000000003B78CE563F89A0ED9414F5AA28AD0D96D6795F9C6376AFB1548AF603B3EB45C9F8207DEE1060CB71C04E80F593060B07D28308D7F4",
    true, ""],
  [5, "EEFDEA4CDB677750A420FEE807EACF21EB9898AE79B9768766E4FAA04A2D4A34", M1,
    "6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E17776969E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B",
    false, "public key not on the curve"],
  [6, PK, M1,
    "FFF97BD5755EEEA420453A14355235D382F6472F8568A18B2F057A14602975563CC27944640AC607CD107AE10923D9EF7A73C643E166BE5EBEAFA34B1AC553E2",
    false, "has_even_y(R) is false"],
  [7, PK, M1,
    "1FA62E331EDBC21C394792D2AB1100A7B432B013DF3F6FF4F99FCB33E0E1515F28890B3EDB6E7189B630448B515CE4F8622A954CFE545735AAEA5134FCCDB2BD",
    false, "negated message"],
  [8, PK, M1,
    "6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E177769961764B3AA9B2FFCB6EF947B6887A226E8D7C93E00C5ED0C1834FF0D0C2E6DA6",
    false, "negated s value"],
  [9, PK, M1,
    "0000000000000000000000000000000000000000000000000000000000000000123DDA8328AF9C23A94C1FEECFD123BA4FB73476F0D594DCB65C6425BD186051",
    false, "sG - eP is infinite (x(inf) as 0)"],
  [10, PK, M1,
    "00000000000000000000000000000000000000000000000000000000000000017615FBAF5AE28864013C099742DEADB4DBA87F11AC6754F93780D5A1837CF197",
    false, "sG - eP is infinite (x(inf) as 1)"],
  [11, PK, M1,
    "4A298DACAE57395A15D0795DDBFD1DCB564DA82B0F269BC70A74F8220429BA1D69E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B",
    false, "sig[0:32] is not an X coordinate on the curve"],
  [12, PK, M1,
    "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC2F69E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B",
    false, "sig[0:32] is equal to field size"],
  [13, PK, M1,
    "6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E177769FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141",
    false, "sig[32:64] is equal to curve order"],
  [14, "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC30", M1,
    "6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E17776969E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B",
    false, "public key is not a valid X coordinate because it exceeds the field size"],
];

const failures = [];
let checks = 0;
const expect = (what, got, want) => {
  checks += 1;
  if (got !== want) failures.push({ what, got, want });
};

for (const [index, publicKey, message, signature, expected, comment] of VECTORS) {
  const got = await verifySchnorr(hexToBytes(publicKey), hexToBytes(message), hexToBytes(signature));
  expect(`BIP-340 vector ${index}${comment ? ` (${comment})` : ""}`, got, expected);
}

const vectorChecks = checks;

// Events signed by an unmodified client: as signed, then with content or signature changed after signing.
const secret = generateSecretKey();
const signed = finalizeEvent(
  {
    kind: 5905,
    created_at: Math.floor(Date.now() / 1000),
    tags: [["i", "a brief — with “quotes”, \\ and \n a newline, é, 🚀", "text"], ["t", "bazaar-job"]],
    content: "content with \"quotes\", \t a tab, \u0001 a control character and ünïcödé",
  },
  secret,
);
const plain = JSON.parse(JSON.stringify(signed));
expect("nostr-tools accepts its own event", nostrToolsVerify({ ...plain }), true);
expect("a nostr-tools event", (await verifyEvent(plain)).verdict, "valid");
expect("the same event, content changed", (await verifyEvent({ ...plain, content: plain.content + "!" })).verdict,
  "invalid id");
const flipped = (plain.sig[0] === "0" ? "1" : "0") + plain.sig.slice(1);
expect("the same event, signature changed", (await verifyEvent({ ...plain, sig: flipped })).verdict,
  "invalid signature");
expect("the same event, author changed", (await verifyEvent({ ...plain, pubkey: PK.toLowerCase() })).verdict,
  "invalid id");
expect("an uppercase id", (await verifyEvent({ ...plain, id: plain.id.toUpperCase() })).verdict, "malformed");

// Speed, one event at a time as the page does it.
const rounds = 40;
const started = performance.now();
for (let i = 0; i < rounds; i++) await verifyEvent(plain);
const msPerEvent = (performance.now() - started) / rounds;

const line = {
  ok: failures.length === 0,
  vectors: vectorChecks,
  events: checks - vectorChecks,
  ms_per_event: Math.round(msPerEvent * 100) / 100,
};
if (failures.length > 0) line.failures = failures;
console.log(JSON.stringify(line));
process.exitCode = failures.length === 0 ? 0 : 1;
