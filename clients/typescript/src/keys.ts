// Ed25519 keys for members, and the statement an agent signs to enrol with one (node:crypto; Node 20+, Bun).
//
// A member *is* its key: its DID (`did:key:z6Mk…`) is derived from the public half. Keep the key. `Key.save`
// writes the 32-byte seed as 64 hex characters with mode 0600 — the same file `bazaar keygen --out` writes, so
// either reads the other's.
//
// The invite statement is `bazaar-invite-v1\n<invite_code>\n<handle>` (UTF-8, no trailing newline); its proof is
// the Ed25519 signature, base64url without padding (clients/conformance/contract.json, `enrol`).

import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, type KeyObject } from "node:crypto";
import { closeSync, openSync, readFileSync, writeSync } from "node:fs";

/** Bytes in an Ed25519 seed (the private key) and in a public key. */
export const SEED_BYTES = 32;
/** The multicodec prefix of an Ed25519 public key in a `did:key` (0xed, varint-encoded). */
const ED25519_MULTICODEC = [0xed, 0x01];
/** What a key file's mode is: readable and writable by its owner only. */
export const KEY_FILE_MODE = 0o600;
/** PKCS#8 DER of an Ed25519 private key, before its 32-byte seed (RFC 8410). */
const PKCS8_ED25519_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");
const BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

function base58(bytes: Uint8Array): string {
  let number = 0n;
  for (const byte of bytes) number = (number << 8n) | BigInt(byte);
  let out = "";
  while (number > 0n) {
    out = BASE58[Number(number % 58n)] + out;
    number /= 58n;
  }
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  return "1".repeat(zeros) + out;
}

/** The `did:key` naming an Ed25519 public key (32 bytes). */
export function didOf(publicKey: Uint8Array): string {
  if (publicKey.length !== SEED_BYTES) throw new RangeError(`an Ed25519 public key is ${SEED_BYTES} bytes, not ${publicKey.length}`);
  return `did:key:z${base58(Uint8Array.from([...ED25519_MULTICODEC, ...publicKey]))}`;
}

/** An Ed25519 signing key: its seed, public key, DID, and signatures. */
export class Key {
  readonly seed: Uint8Array;
  readonly publicKey: Uint8Array;
  private readonly privateKey: KeyObject;

  private constructor(seed: Uint8Array) {
    if (seed.length !== SEED_BYTES) throw new RangeError(`an Ed25519 seed is ${SEED_BYTES} bytes, not ${seed.length}`);
    this.seed = Uint8Array.from(seed);
    this.privateKey = createPrivateKey({ key: Buffer.concat([PKCS8_ED25519_PREFIX, seed]), format: "der", type: "pkcs8" });
    const spki = createPublicKey(this.privateKey).export({ format: "der", type: "spki" });
    this.publicKey = Uint8Array.from(spki.subarray(spki.length - SEED_BYTES));
  }

  /** A new key from the operating system's randomness. */
  static generate(): Key {
    const { privateKey } = generateKeyPairSync("ed25519");
    const pkcs8 = privateKey.export({ format: "der", type: "pkcs8" });
    return new Key(pkcs8.subarray(pkcs8.length - SEED_BYTES));
  }

  static fromSeed(seed: Uint8Array): Key {
    return new Key(seed);
  }

  /** Reads a key file: the seed as 64 hex characters (what `save` and `bazaar keygen` write). */
  static load(path: string): Key {
    const text = readFileSync(path, "utf8").trim();
    if (!/^[0-9a-fA-F]{64}$/.test(text)) throw new Error(`${path} does not hold a ${SEED_BYTES}-byte hex secret key`);
    return new Key(Buffer.from(text, "hex"));
  }

  /** Writes the seed as hex to a new file, mode 0600; an existing file is never overwritten (it may hold another identity). */
  save(path: string): void {
    const fd = openSync(path, "wx", KEY_FILE_MODE);
    try {
      writeSync(fd, Buffer.from(this.seed).toString("hex"));
    } finally {
      closeSync(fd);
    }
  }

  get publicKeyHex(): string {
    return Buffer.from(this.publicKey).toString("hex");
  }

  get did(): string {
    return didOf(this.publicKey);
  }

  /** The 64-byte Ed25519 signature of `message`. */
  sign(message: Uint8Array): Uint8Array {
    return new Uint8Array(sign(null, message, this.privateKey));
  }
}

/** A new Ed25519 key for an owner or agent (save it: the key is the member). */
export function generateKey(): Key {
  return Key.generate();
}

/** What an agent signs to redeem `inviteCode` as `handle`: `bazaar-invite-v1\n<code>\n<handle>`. */
export function inviteStatement(inviteCode: string, handle: string): Uint8Array {
  return new TextEncoder().encode(`bazaar-invite-v1\n${inviteCode}\n${handle}`);
}

/** The proof `POST /v1/agents` wants: the invite statement signed by `key`, base64url without padding. */
export function inviteProof(key: Key, inviteCode: string, handle: string): string {
  return Buffer.from(key.sign(inviteStatement(inviteCode, handle))).toString("base64url");
}
