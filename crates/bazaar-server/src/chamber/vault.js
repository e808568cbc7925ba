// The rooms page's sealing vault (docs/sealing.md, docs/chamber.md). The member's identity seed (the 32-byte
// secret of her did:key, from which her sealing key is derived) lives in this browser's localStorage only,
// wrapped by AES-256-GCM under a key derived from a passphrase (PBKDF2-SHA-256) or from one of her passkeys
// (the WebAuthn PRF extension, then HKDF-SHA-256). The registry never sees the seed, the passphrase or the PRF
// output: it stores and forwards ciphertext. HPKE is the unmodified @hpke packages (inlined before this script
// as `hpke`); Ed25519, SHA-256, PBKDF2, HKDF and AES-GCM are the browser's WebCrypto.
const vault = (() => {
  "use strict";
  const SEALING_KEY_LABEL = "bazaar/sealing-key/v1";
  const SEALED_LABEL = "bazaar/sealed/v1";
  const MESSAGE_LABEL = "bazaar/message/v1";
  const VAULT_VERSION = 1;
  /** PBKDF2-SHA-256 iterations for a passphrase (OWASP's 2023 figure). */
  const VAULT_PBKDF2_ITERATIONS = 600_000;
  /** Characters a vault passphrase must have at least. */
  const VAULT_PASSPHRASE_CHARS_MIN = 10;
  const HKDF_INFO = "bazaar/vault/v1";
  const STORAGE_PREFIX = "bazaar.vault.";
  const PKCS8_ED25519 = hex("302e020100300506032b657004220420");
  const subtle = crypto.subtle;
  const suite = new hpke.CipherSuite({ kem: new hpke.DhkemX25519HkdfSha256(), kdf: new hpke.HkdfSha256(), aead: new hpke.Chacha20Poly1305() });

  class VaultError extends Error {}
  const utf8 = (text) => new TextEncoder().encode(text);
  function hex(text) { return Uint8Array.from(text.match(/../g) || [], (b) => parseInt(b, 16)); }
  const toHex = (bytes) => [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("");
  const concat = (...parts) => { const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0)); let at = 0; for (const p of parts) { out.set(new Uint8Array(p), at); at += p.byteLength; } return out; };
  const b64url = (bytes) => btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  function fromB64url(text, what) {
    if (typeof text !== "string" || !/^[A-Za-z0-9_-]*$/.test(text)) throw new VaultError(`${what}: not base64url`);
    const padded = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
    return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
  }
  const random = (n) => crypto.getRandomValues(new Uint8Array(n));
  const sha256 = async (...parts) => new Uint8Array(await subtle.digest("SHA-256", concat(...parts)));

  // did:key for Ed25519: "did:key:z" + base58btc(0xed 0x01 ‖ public key).
  const B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
  function base58(bytes) {
    let n = 0n; for (const b of bytes) n = n * 256n + BigInt(b);
    let out = ""; while (n > 0n) { out = B58[Number(n % 58n)] + out; n /= 58n; }
    for (const b of bytes) { if (b !== 0) break; out = "1" + out; }
    return out;
  }
  function unbase58(text) {
    let n = 0n;
    for (const c of text) { const i = B58.indexOf(c); if (i < 0) throw new VaultError("not base58"); n = n * 58n + BigInt(i); }
    const bytes = []; while (n > 0n) { bytes.unshift(Number(n % 256n)); n /= 256n; }
    for (const c of text) { if (c !== "1") break; bytes.unshift(0); }
    return Uint8Array.from(bytes);
  }
  const didOf = (publicKey) => `did:key:z${base58(concat(Uint8Array.of(0xed, 0x01), publicKey))}`;
  function publicKeyOfDid(did) {
    if (typeof did !== "string" || !did.startsWith("did:key:z")) throw new VaultError(`${did} is not a did:key`);
    const bytes = unbase58(did.slice("did:key:z".length));
    if (bytes.length !== 34 || bytes[0] !== 0xed || bytes[1] !== 0x01) throw new VaultError(`${did} is not an Ed25519 did:key`);
    return bytes.slice(2);
  }

  // The identity a seed gives: its Ed25519 signing key, its did:key, and the sealing key pair derived from it.
  async function identityOf(seed) {
    const pkcs8 = concat(PKCS8_ED25519, seed);
    const exportable = await subtle.importKey("pkcs8", pkcs8, { name: "Ed25519" }, true, ["sign"]);
    const publicKey = fromB64url((await subtle.exportKey("jwk", exportable)).x, "public key");
    const signing = await subtle.importKey("pkcs8", pkcs8, { name: "Ed25519" }, false, ["sign"]);
    const sealingPair = await suite.kem.deriveKeyPair(await sha256(utf8(SEALING_KEY_LABEL), seed));
    const sealingKey = b64url(await suite.kem.serializePublicKey(sealingPair.publicKey));
    return { did: didOf(publicKey), signing, sealingPair, sealingKey };
  }
  const sign = async (identity, text) => b64url(await subtle.sign({ name: "Ed25519" }, identity.signing, utf8(text)));

  // Wrapping keys.
  async function passphraseKey(passphrase, salt) {
    const material = await subtle.importKey("raw", utf8(passphrase), "PBKDF2", false, ["deriveKey"]);
    return subtle.deriveKey({ name: "PBKDF2", hash: "SHA-256", salt, iterations: VAULT_PBKDF2_ITERATIONS }, material, { name: "AES-GCM", length: 256 }, false, ["encrypt", "decrypt"]);
  }
  async function prfKey(prfOutput, salt) {
    const material = await subtle.importKey("raw", prfOutput, "HKDF", false, ["deriveKey"]);
    return subtle.deriveKey({ name: "HKDF", hash: "SHA-256", salt, info: utf8(HKDF_INFO) }, material, { name: "AES-GCM", length: 256 }, false, ["encrypt", "decrypt"]);
  }
  // One of this site's passkeys, asked for the PRF of `prfSalt`; `credentialId` (b64url) names the one to use.
  async function passkeyPrf(prfSalt, credentialId) {
    if (!window.PublicKeyCredential) throw new VaultError("This browser has no passkeys; use a passphrase.");
    const options = { challenge: random(32), userVerification: "required", extensions: { prf: { eval: { first: prfSalt } } } };
    if (credentialId) options.allowCredentials = [{ type: "public-key", id: fromB64url(credentialId, "credential id") }];
    const credential = await navigator.credentials.get({ publicKey: options });
    const first = credential?.getClientExtensionResults?.().prf?.results?.first;
    if (!first) throw new VaultError("That passkey (or this browser) does not give a PRF secret, so it cannot lock the vault; use a passphrase.");
    return { output: new Uint8Array(first), credentialId: b64url(credential.rawId) };
  }
  const aad = (member) => utf8(`${HKDF_INFO}\n${member}`);

  const storageKey = (member) => STORAGE_PREFIX + member;
  function stored(member) {
    try { const record = JSON.parse(localStorage.getItem(storageKey(member)) || "null"); return record && record.v === VAULT_VERSION ? record : null; }
    catch { return null; }
  }

  /** Imports the member's key (64 hex characters, as in her key file) and locks it; the unlocked identity. */
  async function create(member, seedHex, how) {
    const text = (seedHex || "").trim();
    if (!/^[0-9a-fA-F]{64}$/.test(text)) throw new VaultError("A key is 64 hex characters (the content of your key file).");
    const seed = hex(text);
    const identity = await identityOf(seed);
    if (identity.did !== member) throw new VaultError(`That key is ${identity.did}, not the member signed in here (${member}).`);
    const salt = random(16), iv = random(12);
    const record = { v: VAULT_VERSION, member, salt: b64url(salt), iv: b64url(iv) };
    let key;
    if (how.passphrase !== undefined) {
      if (how.passphrase.length < VAULT_PASSPHRASE_CHARS_MIN) throw new VaultError(`A passphrase is at least ${VAULT_PASSPHRASE_CHARS_MIN} characters.`);
      record.lock = "passphrase"; key = await passphraseKey(how.passphrase, salt);
    } else {
      const prfSalt = random(32);
      const prf = await passkeyPrf(prfSalt, null);
      record.lock = "passkey"; record.prf_salt = b64url(prfSalt); record.credential_id = prf.credentialId;
      key = await prfKey(prf.output, salt);
    }
    record.wrapped = b64url(await subtle.encrypt({ name: "AES-GCM", iv, additionalData: aad(member) }, key, seed));
    localStorage.setItem(storageKey(member), JSON.stringify(record));
    return identity;
  }

  /** Opens the member's vault with its passphrase (or its passkey when `how.passkey`); the identity. */
  async function unlock(member, how) {
    const record = stored(member);
    if (!record) throw new VaultError("This browser holds no vault for you yet.");
    const salt = fromB64url(record.salt, "salt");
    let key;
    if (record.lock === "passphrase") {
      if (!how.passphrase) throw new VaultError("This vault is locked with a passphrase.");
      key = await passphraseKey(how.passphrase, salt);
    } else {
      const prf = await passkeyPrf(fromB64url(record.prf_salt, "PRF salt"), record.credential_id);
      key = await prfKey(prf.output, salt);
    }
    let seed;
    try { seed = new Uint8Array(await subtle.decrypt({ name: "AES-GCM", iv: fromB64url(record.iv, "iv"), additionalData: aad(member) }, key, fromB64url(record.wrapped, "vault"))); }
    catch { throw new VaultError(record.lock === "passphrase" ? "Wrong passphrase." : "That passkey does not open this vault."); }
    return identityOf(seed);
  }

  function forget(member) { localStorage.removeItem(storageKey(member)); }

  /** The body of `PUT /v1/sealing-key` for this identity. */
  async function publication(identity) {
    return { public_key: identity.sealingKey, signature: await sign(identity, `${SEALING_KEY_LABEL}\n${identity.did}\n${identity.sealingKey}`) };
  }

  function sealedDigestText(sealed) {
    let content = `${sealed.nonce}.${sealed.ciphertext}`;
    for (const r of sealed.recipients) content += `\n${r.member}.${r.key}.${r.enc}.${r.wrapped}`;
    return content;
  }
  const signingText = async (channel, author, content) => `${MESSAGE_LABEL}\n${channel}\n${author}\n${toHex(await sha256(utf8(content)))}`;

  /** Seals `text` by this identity in `channel` for `recipients` ([{member, key}]); the post's body. */
  async function seal(identity, channel, text, recipients) {
    const contentKey = random(32), nonce = random(12);
    const ciphertext = await suite.aead.createEncryptionContext(contentKey).seal(nonce, utf8(text), utf8(`${SEALED_LABEL}\n${channel}\n${identity.did}`));
    const sealedFor = [];
    for (const r of recipients) {
      const recipientPublicKey = await suite.kem.deserializePublicKey(fromB64url(r.key, `${r.member}'s sealing key`));
      const { enc, ct } = await suite.seal({ recipientPublicKey, info: utf8(SEALED_LABEL) }, contentKey, utf8(`${channel}\n${r.member}`));
      sealedFor.push({ member: r.member, key: r.key, enc: b64url(enc), wrapped: b64url(ct) });
    }
    const sealed = { v: 1, nonce: b64url(nonce), ciphertext: b64url(ciphertext), recipients: sealedFor };
    return { sealed, signature: await sign(identity, await signingText(channel, identity.did, sealedDigestText(sealed))) };
  }

  /** Opens a sealed message for this identity: {text, signed} (`signed`: the author's signature checks). */
  async function open(identity, channel, message) {
    const sealed = message.sealed;
    const entry = sealed.recipients.find((r) => r.member === identity.did);
    if (!entry) throw new VaultError("not sealed for you");
    let contentKey, plaintext;
    try {
      contentKey = await suite.open({ recipientKey: identity.sealingPair, enc: fromB64url(entry.enc, "enc"), info: utf8(SEALED_LABEL) }, fromB64url(entry.wrapped, "wrapped"), utf8(`${channel}\n${identity.did}`));
      plaintext = await suite.aead.createEncryptionContext(contentKey).open(fromB64url(sealed.nonce, "nonce"), fromB64url(sealed.ciphertext, "ciphertext"), utf8(`${SEALED_LABEL}\n${channel}\n${message.authored_by}`));
    } catch (error) { if (error instanceof VaultError) throw error; throw new VaultError("does not open with your key"); }
    let signed = false;
    if (typeof message.signature === "string") {
      const author = await subtle.importKey("raw", publicKeyOfDid(message.authored_by), { name: "Ed25519" }, false, ["verify"]);
      signed = await subtle.verify({ name: "Ed25519" }, author, fromB64url(message.signature, "signature"), utf8(await signingText(channel, message.authored_by, sealedDigestText(sealed))));
    }
    return { text: new TextDecoder("utf-8", { fatal: true }).decode(plaintext), signed };
  }

  return { VaultError, stored, create, unlock, forget, publication, seal, open, VAULT_PASSPHRASE_CHARS_MIN };
})();
