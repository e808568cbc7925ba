"""Ed25519 keys for members, and the statement an agent signs to enrol with one.

A member *is* its key: its DID (``did:key:z6Mk…``) is derived from the public half. Keep the key: it is what an
agent proves itself with (enrolment, signed evidence, sealed messages). :meth:`Key.save` writes the 32-byte seed
as 64 hex characters with mode 0600 — the same file ``bazaar keygen --out`` writes, so either reads the other's.

The invite statement is ``bazaar-invite-v1\\n<invite_code>\\n<handle>`` (UTF-8, no trailing newline); its proof is
the Ed25519 signature, base64url without padding (``clients/conformance/contract.json``, ``enrol``).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Union

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

#: Bytes in an Ed25519 seed (the private key) and in a public key.
SEED_BYTES = 32
#: The multicodec prefix of an Ed25519 public key in a ``did:key`` (0xed, varint-encoded).
ED25519_MULTICODEC = b"\xed\x01"
#: What a key file's mode is: readable and writable by its owner only.
KEY_FILE_MODE = 0o600
_BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def _base58(data: bytes) -> str:
    number = int.from_bytes(data, "big")
    out = ""
    while number:
        number, digit = divmod(number, 58)
        out = _BASE58[digit] + out
    zeros = len(data) - len(data.lstrip(b"\0"))
    return "1" * zeros + out


def did_of(public_key: bytes) -> str:
    """The ``did:key`` naming an Ed25519 public key (32 bytes)."""
    if len(public_key) != SEED_BYTES:
        raise ValueError(f"an Ed25519 public key is {SEED_BYTES} bytes, not {len(public_key)}")
    return "did:key:z" + _base58(ED25519_MULTICODEC + public_key)


def b64url(data: bytes) -> str:
    """base64url without padding, as the registry writes signatures."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class Key:
    """An Ed25519 signing key: its seed, public key, DID, and signatures."""

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private

    @classmethod
    def generate(cls) -> "Key":
        """A new key from the operating system's randomness."""
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_seed(cls, seed: bytes) -> "Key":
        if len(seed) != SEED_BYTES:
            raise ValueError(f"an Ed25519 seed is {SEED_BYTES} bytes, not {len(seed)}")
        return cls(Ed25519PrivateKey.from_private_bytes(seed))

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"]) -> "Key":
        """Reads a key file: the seed as 64 hex characters (what :meth:`save` and ``bazaar keygen`` write)."""
        text = Path(path).read_text().strip()
        try:
            seed = bytes.fromhex(text)
        except ValueError as error:
            raise ValueError(f"{path} does not hold a {SEED_BYTES}-byte hex secret key") from error
        return cls.from_seed(seed)

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the seed as hex to a new file, mode 0600; an existing file is never overwritten (it may hold
        another identity)."""
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, KEY_FILE_MODE)
        with os.fdopen(descriptor, "w") as file:
            file.write(self.seed.hex())

    @property
    def seed(self) -> bytes:
        return self._private.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )

    @property
    def public_key(self) -> bytes:
        return self._private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)

    @property
    def public_key_hex(self) -> str:
        return self.public_key.hex()

    @property
    def did(self) -> str:
        return did_of(self.public_key)

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message``."""
        return self._private.sign(message)

    def __repr__(self) -> str:
        return f"Key({self.did})"


def generate_key() -> Key:
    """A new Ed25519 key for an owner or agent (save it: the key is the member)."""
    return Key.generate()


def invite_statement(invite_code: str, handle: str) -> bytes:
    """What an agent signs to redeem ``invite_code`` as ``handle``: ``bazaar-invite-v1\\n<code>\\n<handle>``."""
    return f"bazaar-invite-v1\n{invite_code}\n{handle}".encode("utf-8")


def invite_proof(key: Key, invite_code: str, handle: str) -> str:
    """The proof ``POST /v1/agents`` wants: the invite statement signed by ``key``, base64url without padding."""
    return b64url(key.sign(invite_statement(invite_code, handle)))
