// Sealed messages (docs/sealing.md) made and opened with the unmodified @hpke npm packages, so the
// suite can check Bazaar's Rust implementation against an independent one in both directions.
//
//   echo '{"op": ...}' | node interop.mjs
//
// Reads one JSON object on stdin and writes one JSON object on stdout. Operations:
//   derive   {seed}                                   -> {public_key}
//   sign_key {seed, member, public_key}               -> {signature}
//   seal     {channel, author, author_seed, plaintext, recipients: [{member, key}]}
//                                                     -> {sealed: {v, nonce, ciphertext, recipients}, signature}
//   open     {channel, author, author_public_key, member, seed, sealed, signature}
//                                                     -> {plaintext, signature_valid}
// Seeds are 64 hex chars (an Ed25519 secret seed), author_public_key 64 hex chars; every other binary
// value is base64url without padding. Any failure: a message on stderr and exit status 1.
import { createCipheriv, createDecipheriv, createHash, createPrivateKey, createPublicKey, randomBytes, sign, verify } from "node:crypto";
import { CipherSuite, HkdfSha256 } from "@hpke/core";
import { DhkemX25519HkdfSha256 } from "@hpke/dhkem-x25519";
import { Chacha20Poly1305 } from "@hpke/chacha20poly1305";

const SEALING_KEY_LABEL = "bazaar/sealing-key/v1";
const SEALED_LABEL = "bazaar/sealed/v1"; // body AAD prefix and the HPKE info
const MESSAGE_LABEL = "bazaar/message/v1";

// HPKE base mode, KEM 0x0020 / KDF 0x0001 / AEAD 0x0003.
const suite = new CipherSuite({
  kem: new DhkemX25519HkdfSha256(),
  kdf: new HkdfSha256(),
  aead: new Chacha20Poly1305(),
});

// Ed25519 keys for node:crypto, wrapped in the fixed PKCS#8 / SPKI DER headers.
const PKCS8_ED25519 = Buffer.from("302e020100300506032b657004220420", "hex");
const SPKI_ED25519 = Buffer.from("302a300506032b6570032100", "hex");

class Failure extends Error {}

const utf8 = (text) => Buffer.from(text, "utf8");
const sha256 = (...parts) => createHash("sha256").update(Buffer.concat(parts)).digest();
const b64url = (bytes) => Buffer.from(bytes).toString("base64url");

// Strict base64url: URL-safe alphabet, no padding, canonical (re-encoding gives the same text).
function fromB64url(text, what, length) {
  if (typeof text !== "string" || !/^[A-Za-z0-9_-]*$/.test(text)) throw new Failure(`${what}: not base64url`);
  const bytes = Buffer.from(text, "base64url");
  if (bytes.toString("base64url") !== text) throw new Failure(`${what}: not canonical unpadded base64url`);
  if (length !== undefined && bytes.length !== length) throw new Failure(`${what}: ${bytes.length} bytes, expected ${length}`);
  return bytes;
}

function fromHex(text, what, length) {
  if (typeof text !== "string" || text.length !== length * 2 || !/^[0-9a-fA-F]*$/.test(text)) {
    throw new Failure(`${what}: expected ${length * 2} hex characters`);
  }
  return Buffer.from(text, "hex");
}

function str(value, what) {
  if (typeof value !== "string") throw new Failure(`${what}: expected a string`);
  return value;
}

const ed25519Private = (seed) => createPrivateKey({ key: Buffer.concat([PKCS8_ED25519, seed]), format: "der", type: "pkcs8" });
const ed25519Public = (raw) => createPublicKey({ key: Buffer.concat([SPKI_ED25519, raw]), format: "der", type: "spki" });

// The sealing key pair Bazaar's clients derive from the identity seed:
// ikm = SHA-256("bazaar/sealing-key/v1" ‖ seed), then RFC 9180 DeriveKeyPair(ikm).
async function sealingKeyPair(seed) {
  const keyPair = await suite.kem.deriveKeyPair(sha256(utf8(SEALING_KEY_LABEL), seed));
  const publicKey = b64url(await suite.kem.serializePublicKey(keyPair.publicKey));
  return { keyPair, publicKey };
}

// The text whose SHA-256 a sealed message's signature covers (the b64url strings as sent).
function sealedDigest(sealed) {
  let content = `${sealed.nonce}.${sealed.ciphertext}`;
  for (const r of sealed.recipients) content += `\n${r.member}.${r.key}.${r.enc}.${r.wrapped}`;
  return createHash("sha256").update(utf8(content)).digest("hex");
}

const messageSigningInput = (channel, author, digest) => utf8(`${MESSAGE_LABEL}\n${channel}\n${author}\n${digest}`);

async function derive(req) {
  const { publicKey } = await sealingKeyPair(fromHex(req.seed, "seed", 32));
  return { public_key: publicKey };
}

function signKey(req) {
  const seed = fromHex(req.seed, "seed", 32);
  const member = str(req.member, "member");
  const publicKey = str(req.public_key, "public_key");
  const signature = sign(null, utf8(`${SEALING_KEY_LABEL}\n${member}\n${publicKey}`), ed25519Private(seed));
  return { signature: b64url(signature) };
}

async function seal(req) {
  const channel = str(req.channel, "channel");
  const author = str(req.author, "author");
  const authorSeed = fromHex(req.author_seed, "author_seed", 32);
  const plaintext = utf8(str(req.plaintext, "plaintext"));
  if (!Array.isArray(req.recipients) || req.recipients.length === 0) throw new Failure("recipients: expected a non-empty array");

  // 1-2. Random content key and nonce; the body is ChaCha20-Poly1305 (ciphertext ‖ 16-byte tag).
  const contentKey = randomBytes(32);
  const nonce = randomBytes(12);
  const cipher = createCipheriv("chacha20-poly1305", contentKey, nonce, { authTagLength: 16 });
  cipher.setAAD(utf8(`${SEALED_LABEL}\n${channel}\n${author}`), { plaintextLength: plaintext.length });
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);

  // 3. Wrap the content key for every recipient with a single-shot HPKE SealBase.
  const recipients = [];
  for (const [i, r] of req.recipients.entries()) {
    const member = str(r?.member, `recipients[${i}].member`);
    const key = str(r?.key, `recipients[${i}].key`);
    const recipientPublicKey = await suite.kem.deserializePublicKey(fromB64url(key, `recipients[${i}].key`, 32));
    const { enc, ct: wrapped } = await suite.seal(
      { recipientPublicKey, info: utf8(SEALED_LABEL) },
      contentKey,
      utf8(`${channel}\n${member}`),
    );
    if (enc.byteLength !== 32 || wrapped.byteLength !== 48) throw new Failure(`recipients[${i}]: unexpected HPKE output sizes`);
    recipients.push({ member, key, enc: b64url(enc), wrapped: b64url(wrapped) });
  }

  // 4. The message and the author's signature over its digest.
  const sealed = { v: 1, nonce: b64url(nonce), ciphertext: b64url(ciphertext), recipients };
  const signature = sign(null, messageSigningInput(channel, author, sealedDigest(sealed)), ed25519Private(authorSeed));
  return { sealed, signature: b64url(signature) };
}

async function open(req) {
  const channel = str(req.channel, "channel");
  const author = str(req.author, "author");
  const authorPublicKey = fromHex(req.author_public_key, "author_public_key", 32);
  const member = str(req.member, "member");
  const seed = fromHex(req.seed, "seed", 32);
  const sealed = req.sealed;
  if (typeof sealed !== "object" || sealed === null) throw new Failure("sealed: expected an object");
  if (sealed.v !== 1) throw new Failure(`sealed.v: unsupported version ${JSON.stringify(sealed.v)}`);
  if (!Array.isArray(sealed.recipients)) throw new Failure("sealed.recipients: expected an array");
  const nonce = fromB64url(sealed.nonce, "sealed.nonce", 12);
  const ciphertext = fromB64url(sealed.ciphertext, "sealed.ciphertext");
  if (ciphertext.length < 16) throw new Failure("sealed.ciphertext: shorter than the 16-byte tag");

  // Our recipient entry, which must be sealed to the key derived from our seed.
  const { keyPair, publicKey } = await sealingKeyPair(seed);
  const entries = sealed.recipients.filter((r) => r?.member === member);
  if (entries.length !== 1) throw new Failure(`${entries.length} recipient entries for ${member}, expected 1`);
  const entry = entries[0];
  if (entry.key !== publicKey) throw new Failure(`recipient entry for ${member} names key ${entry.key}, ours is ${publicKey}`);

  // K = HPKE.OpenBase(sk, enc, info, aad, wrapped).
  let contentKey;
  try {
    contentKey = Buffer.from(
      await suite.open(
        { recipientKey: keyPair, enc: fromB64url(entry.enc, "enc", 32), info: utf8(SEALED_LABEL) },
        fromB64url(entry.wrapped, "wrapped", 48),
        utf8(`${channel}\n${member}`),
      ),
    );
  } catch (error) {
    if (error instanceof Failure) throw error;
    throw new Failure(`HPKE open of the content key failed: ${error.name}: ${error.message}`);
  }
  if (contentKey.length !== 32) throw new Failure(`content key is ${contentKey.length} bytes, expected 32`);

  // The body.
  let plaintext;
  try {
    const decipher = createDecipheriv("chacha20-poly1305", contentKey, nonce, { authTagLength: 16 });
    decipher.setAAD(utf8(`${SEALED_LABEL}\n${channel}\n${author}`), { plaintextLength: ciphertext.length - 16 });
    decipher.setAuthTag(ciphertext.subarray(ciphertext.length - 16));
    plaintext = Buffer.concat([decipher.update(ciphertext.subarray(0, ciphertext.length - 16)), decipher.final()]);
  } catch (error) {
    throw new Failure(`ChaCha20-Poly1305 open of the body failed: ${error.message}`);
  }
  let text;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(plaintext);
  } catch {
    throw new Failure("plaintext is not valid UTF-8");
  }

  // The author's signature over the digest of the message as received (false if malformed).
  let signatureValid = false;
  try {
    const signature = fromB64url(req.signature, "signature", 64);
    signatureValid = verify(null, messageSigningInput(channel, author, sealedDigest(sealed)), ed25519Public(authorPublicKey), signature);
  } catch {
    signatureValid = false;
  }
  return { plaintext: text, signature_valid: signatureValid };
}

const OPS = { derive, sign_key: signKey, seal, open };

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  let req;
  try {
    req = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch (error) {
    throw new Failure(`stdin is not JSON: ${error.message}`);
  }
  const op = OPS[req?.op];
  if (!op) throw new Failure(`unknown op ${JSON.stringify(req?.op)}`);
  process.stdout.write(JSON.stringify(await op(req)) + "\n");
}

main().catch((error) => {
  process.stderr.write(`interop.mjs: ${error instanceof Failure ? error.message : error.stack ?? error}\n`);
  process.exitCode = 1;
});
