// Nostr event verification (NIP-01) with BIP-340 Schnorr signatures over secp256k1, in plain
// JavaScript: BigInt arithmetic, SHA-256 from WebCrypto (`crypto.subtle`), nothing else.
//
// The relay page (`/relay`) imports it in the browser; `tests/relay/verify_vectors.mjs` imports this
// same file in Node and checks it against the BIP-340 test vectors and events nostr-tools signed.
// It only verifies: it holds no key and signs nothing, so it need not be constant-time.

const P = 0xfffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc2fn;
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const GX = 0x79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798n;
const GY = 0x483ada7726a3c4655da4fbfc0e1108a8fd17b448a68554199c47d08ffb10d4b8n;

const HEX64 = /^[0-9a-f]{64}$/;
const HEX128 = /^[0-9a-f]{128}$/;

const mod = (a, m = P) => {
  const r = a % m;
  return r < 0n ? r + m : r;
};

function pow(base, exponent, m = P) {
  let result = 1n;
  let b = mod(base, m);
  for (let e = exponent; e > 0n; e >>= 1n) {
    if (e & 1n) result = (result * b) % m;
    b = (b * b) % m;
  }
  return result;
}

// Points in Jacobian coordinates [X, Y, Z] standing for (X/Z², Y/Z³); Z = 0 is the point at infinity.
const INFINITY = [0n, 1n, 0n];
const G = [GX, GY, 1n];

function double([x, y, z]) {
  if (z === 0n || y === 0n) return INFINITY;
  const a = (x * x) % P;
  const b = (y * y) % P;
  const c = (b * b) % P;
  const d = mod(2n * ((x + b) ** 2n - a - c));
  const e = (3n * a) % P;
  const x3 = mod(e * e - 2n * d);
  const y3 = mod(e * (d - x3) - 8n * c);
  return [x3, y3, (2n * y * z) % P];
}

function add(p1, p2) {
  const [x1, y1, z1] = p1;
  const [x2, y2, z2] = p2;
  if (z1 === 0n) return p2;
  if (z2 === 0n) return p1;
  const z1z1 = (z1 * z1) % P;
  const z2z2 = (z2 * z2) % P;
  const u1 = (x1 * z2z2) % P;
  const u2 = (x2 * z1z1) % P;
  const s1 = (((y1 * z2) % P) * z2z2) % P;
  const s2 = (((y2 * z1) % P) * z1z1) % P;
  if (u1 === u2) return s1 === s2 ? double(p1) : INFINITY;
  const h = mod(u2 - u1);
  const r = mod(s2 - s1);
  const hh = (h * h) % P;
  const hhh = (h * hh) % P;
  const v = (u1 * hh) % P;
  const x3 = mod(r * r - hhh - 2n * v);
  const y3 = mod(r * (v - x3) - s1 * hhh);
  return [x3, y3, (((h * z1) % P) * z2) % P];
}

// a·A + b·B with one pass of doublings (Shamir's trick).
function twoMultiply(a, pointA, b, pointB) {
  const both = add(pointA, pointB);
  let result = INFINITY;
  const bits = Math.max(a.toString(2).length, b.toString(2).length);
  for (let i = BigInt(bits - 1); i >= 0n; i--) {
    result = double(result);
    const bitA = (a >> i) & 1n;
    const bitB = (b >> i) & 1n;
    if (bitA && bitB) result = add(result, both);
    else if (bitA) result = add(result, pointA);
    else if (bitB) result = add(result, pointB);
  }
  return result;
}

function toAffine([x, y, z]) {
  if (z === 0n) return null;
  const zInverse = pow(z, P - 2n);
  const zz = (zInverse * zInverse) % P;
  return [(x * zz) % P, (((y * zz) % P) * zInverse) % P];
}

// BIP-340 lift_x: the point with x-coordinate x and an even y, or null when there is none.
export function liftX(x) {
  if (x >= P) return null;
  const c = mod(x * x * x + 7n);
  const y = pow(c, (P + 1n) / 4n);
  if ((y * y) % P !== c) return null;
  return [x, y & 1n ? P - y : y, 1n];
}

export function hexToBytes(hex) {
  if (typeof hex !== "string" || hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) {
    throw new TypeError("not an even-length hex string");
  }
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return bytes;
}

export const bytesToHex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

const bytesToNumber = (bytes) => (bytes.length === 0 ? 0n : BigInt("0x" + bytesToHex(bytes)));
const numberToBytes = (n) => hexToBytes(n.toString(16).padStart(64, "0"));

export async function sha256(bytes) {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
}

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

// hash_tag(x) = SHA256(SHA256(tag) ‖ SHA256(tag) ‖ x).
export async function taggedHash(tag, ...parts) {
  const tagHash = await sha256(new TextEncoder().encode(tag));
  return sha256(concat(tagHash, tagHash, ...parts));
}

/**
 * BIP-340 verification: `publicKey` is the 32-byte x-only key, `message` the signed bytes (an event id
 * is 32 bytes; any length is hashed as BIP-340 asks), `signature` the 64 bytes r ‖ s. True or false;
 * never throws for wrong lengths (false).
 */
export async function verifySchnorr(publicKey, message, signature) {
  if (publicKey.length !== 32 || signature.length !== 64) return false;
  const point = liftX(bytesToNumber(publicKey));
  if (point === null) return false;
  const r = bytesToNumber(signature.subarray(0, 32));
  const s = bytesToNumber(signature.subarray(32, 64));
  if (r >= P || s >= N) return false;
  const challenge = await taggedHash("BIP0340/challenge", signature.subarray(0, 32), publicKey, message);
  const e = mod(bytesToNumber(challenge), N);
  // R = s·G − e·P = s·G + (n − e)·P.
  const affine = toAffine(twoMultiply(s, G, mod(N - e, N), point));
  return affine !== null && (affine[1] & 1n) === 0n && affine[0] === r;
}

/** The NIP-01 serialisation an event id is the SHA-256 of. */
export const canonicalJson = (event) =>
  JSON.stringify([0, event.pubkey, event.created_at, event.kind, event.tags, event.content]);

/** The id an event's fields hash to, as 64 lowercase hex. */
export async function computeId(event) {
  return bytesToHex(await sha256(new TextEncoder().encode(canonicalJson(event))));
}

const isUnsigned = (n, max) => Number.isSafeInteger(n) && n >= 0 && n <= max;

/** Why `event` is not of the NIP-01 shape, or null when it is. */
export function shapeProblem(event) {
  if (event === null || typeof event !== "object" || Array.isArray(event)) return "not a JSON object";
  if (!HEX64.test(event.id)) return "id must be 64 lowercase hex characters";
  if (!HEX64.test(event.pubkey)) return "pubkey must be 64 lowercase hex characters";
  if (!HEX128.test(event.sig)) return "sig must be 128 lowercase hex characters";
  if (!isUnsigned(event.created_at, Number.MAX_SAFE_INTEGER)) return "created_at must be a non-negative integer";
  if (!isUnsigned(event.kind, 65535)) return "kind must be an integer from 0 to 65535";
  if (typeof event.content !== "string") return "content must be a string";
  const tagsOk =
    Array.isArray(event.tags) &&
    event.tags.every((tag) => Array.isArray(tag) && tag.every((value) => typeof value === "string"));
  return tagsOk ? null : "tags must be an array of arrays of strings";
}

/**
 * Checks one event: `{shape, id, sig, verdict}`. `shape` is null or why the event is malformed; `id` says
 * the fields hash to the stated id; `sig` says the signature is the author's over the stated id.
 * `verdict` is "valid", "invalid id", "invalid signature" or "malformed".
 */
export async function verifyEvent(event) {
  const shape = shapeProblem(event);
  if (shape !== null) return { shape, id: false, sig: false, verdict: "malformed" };
  const id = (await computeId(event)) === event.id;
  const sig = await verifySchnorr(hexToBytes(event.pubkey), hexToBytes(event.id), hexToBytes(event.sig));
  const verdict = !id ? "invalid id" : !sig ? "invalid signature" : "valid";
  return { shape: null, id, sig, verdict };
}
