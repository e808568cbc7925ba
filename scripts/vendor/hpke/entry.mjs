// What the rooms page's sealing vault uses of HPKE (RFC 9180): the suite docs/sealing.md names.
export { CipherSuite, HkdfSha256 } from "@hpke/core";
export { DhkemX25519HkdfSha256 } from "@hpke/dhkem-x25519";
export { Chacha20Poly1305 } from "@hpke/chacha20poly1305";
