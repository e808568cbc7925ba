"""Keys and enrolment (the invite statement's exact bytes, the key file), the merchant's refusal to start on a
credential it cannot use, and refusals at the merchant that name the party at fault: the buyer raises the typed
error (with the route's price where the amount is the problem) and voids a token it can no longer use.

Run: ``.venv/bin/python -m unittest discover -s tests``. Against a real registry, the conformance scenario
(``clients/conformance/scenario.json``) holds the same behaviour for all three SDKs."""

from __future__ import annotations

import asyncio
import base64
import json
import tempfile
import unittest
from pathlib import Path
from typing import Any, Callable

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

import bazaar
from bazaar import contract
from bazaar.keys import _BASE58

REGISTRY = "http://registry.test"
SHOP = "http://shop.test/translate"
PRICE = 300


def b58decode(text: str) -> bytes:
    number = 0
    for char in text:
        number = number * 58 + _BASE58.index(char)
    return number.to_bytes((number.bit_length() + 7) // 8, "big")


def token_for(order: str, jti: str = "tok_1") -> str:
    claims = base64.urlsafe_b64encode(json.dumps({"ord": order, "jti": jti}).encode()).rstrip(b"=").decode()
    return f"apt_{claims}.c2ln"


def problem(status: int, code: str, facts: "dict[str, Any] | None" = None) -> httpx.Response:
    body: dict[str, Any] = {"status": status, "code": code, "detail": code}
    if facts is not None:
        body["facts"] = facts
    return httpx.Response(status, json=body, headers={"content-type": "application/problem+json"})


class Keys(unittest.TestCase):
    def test_the_invite_statement_is_the_registrys_bytes(self) -> None:
        self.assertEqual(bazaar.invite_statement("inv_abc", "menu-bot"), b"bazaar-invite-v1\ninv_abc\nmenu-bot")

    def test_the_proof_is_an_unpadded_base64url_signature_the_public_key_verifies(self) -> None:
        key = bazaar.Key.from_seed(bytes([7]) * 32)
        proof = bazaar.invite_proof(key, "inv_abc", "menu-bot")
        self.assertNotIn("=", proof)
        signature = base64.urlsafe_b64decode(proof + "=" * (-len(proof) % 4))
        Ed25519PublicKey.from_public_bytes(key.public_key).verify(signature, b"bazaar-invite-v1\ninv_abc\nmenu-bot")

    def test_the_did_is_the_multicodec_public_key_in_base58btc(self) -> None:
        key = bazaar.generate_key()
        self.assertTrue(key.did.startswith("did:key:z6Mk"), key.did)
        self.assertEqual(b58decode(key.did[len("did:key:z") :]), b"\xed\x01" + key.public_key)

    def test_the_key_file_is_hex_0600_never_overwritten_and_reads_back(self) -> None:
        path = Path(tempfile.mkdtemp()) / "agent.key"
        key = bazaar.generate_key()
        key.save(path)
        self.assertEqual(path.stat().st_mode & 0o777, 0o600)
        self.assertEqual(path.read_text(), key.seed.hex())
        self.assertEqual(bazaar.Key.load(path).did, key.did)
        with self.assertRaises(FileExistsError):
            bazaar.generate_key().save(path)


class MerchantCredential(unittest.TestCase):
    REFUSED = [None, "", "   ", "MERCHANT_CREDENTIAL", "<merchant credential>", "${MERCHANT_CREDENTIAL}",
               "{{credential}}", "bzi_not-rotated", "bzc_abc\n"]

    def test_a_merchant_refuses_to_start_on_a_credential_it_cannot_use_and_says_why(self) -> None:
        for credential in self.REFUSED:
            with self.subTest(credential=credential), self.assertRaises(bazaar.MerchantMisconfigured) as raised:
                bazaar.Merchant(bazaar.Client(REGISTRY, credential), bazaar.MemoryReceiptStore())
            self.assertEqual(raised.exception.code, "merchant_credential_invalid")
            self.assertIn("merchant needs its own registry credential", str(raised.exception))

    def test_a_real_looking_credential_is_accepted(self) -> None:
        for credential in ["bzc_Zm9vYmFy", "op-secret", "12345"]:
            self.assertIsNone(contract.merchant_credential_problem(credential), credential)
        bazaar.Merchant(bazaar.Client(REGISTRY, "bzc_Zm9vYmFy"), bazaar.MemoryReceiptStore())


def registry_and_shop(shop: Callable[[httpx.Request], httpx.Response], calls: list[str]) -> httpx.AsyncClient:
    """A mock registry that issues one token and voids it on request, and a mock merchant answering ``shop``."""

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(f"{request.method} {request.url.path}")
        if str(request.url) == SHOP:
            return shop(request)
        if request.url.path == "/v1/tokens":
            return httpx.Response(201, json={"token": token_for("o-1"), "jti": "tok_1", "expires_at_ms": 2**62})
        if request.url.path == "/v1/tokens/tok_1/void":
            return httpx.Response(200, json={"jti": "tok_1", "state": "voided"})
        return problem(404, "not_found")

    return httpx.AsyncClient(transport=httpx.MockTransport(handle))


class BuyerRaises(unittest.TestCase):
    def pay(self, shop: Callable[[httpx.Request], httpx.Response]) -> "tuple[BaseException | bazaar.PaidResponse, list[str]]":
        calls: list[str] = []

        async def run() -> "BaseException | bazaar.PaidResponse":
            buyer = bazaar.Client(REGISTRY, "bzc_buyer", http=registry_and_shop(shop, calls))
            try:
                return await buyer.pay(SHOP, "did:key:zShop", 200, "o-1")
            except bazaar.BazaarError as error:
                return error

        return asyncio.run(run()), calls

    def test_an_under_priced_token_raises_token_too_small_with_the_price_and_is_voided(self) -> None:
        facts = {"amount_minor": PRICE, "max_amount_minor": 200, "price_minor": PRICE}
        error, calls = self.pay(lambda _: problem(402, "amount_exceeds_token", facts))
        assert isinstance(error, bazaar.TokenTooSmall), error
        self.assertEqual((error.price_minor, error.max_amount_minor, error.status), (PRICE, 200, 402))
        self.assertIn("POST /v1/tokens/tok_1/void", calls)

    def test_a_merchant_whose_credential_is_refused_is_named_once_and_the_token_voided(self) -> None:
        error, calls = self.pay(lambda _: problem(503, "merchant_unauthenticated"))
        assert isinstance(error, bazaar.MerchantUnauthenticated), error
        self.assertFalse(error.retryable)
        self.assertEqual(calls.count("POST /translate"), 1, "final: not retried")
        self.assertIn("POST /v1/tokens/tok_1/void", calls)

    def test_a_token_for_another_merchant_raises_token_refused_and_is_voided(self) -> None:
        error, calls = self.pay(lambda _: problem(402, "not_audience"))
        assert isinstance(error, bazaar.TokenRefused) and not isinstance(error, bazaar.TokenTooSmall), error
        self.assertIn("POST /v1/tokens/tok_1/void", calls)

    def test_a_consumed_token_raises_without_a_void(self) -> None:
        error, calls = self.pay(lambda _: problem(402, "token_voided"))
        self.assertIsInstance(error, bazaar.TokenRefused)
        self.assertNotIn("POST /v1/tokens/tok_1/void", calls)

    def test_the_paid_works_own_error_answer_is_returned_not_raised(self) -> None:
        headers = {contract.SETTLEMENT_HEADER: "stl_1"}
        paid, _ = self.pay(lambda _: httpx.Response(404, json={"error": "no such dish"}, headers=headers))
        assert isinstance(paid, bazaar.PaidResponse), paid
        self.assertEqual((paid.status, paid.settlement), (404, "stl_1"))


class MerchantNamesTheParty(unittest.TestCase):
    def answer(self, registry: Callable[[httpx.Request], httpx.Response]) -> "tuple[int, dict[str, Any]]":
        async def run() -> "tuple[int, dict[str, Any]]":
            http = httpx.AsyncClient(transport=httpx.MockTransport(registry))
            merchant = bazaar.Merchant(bazaar.Client(REGISTRY, "bzc_merchant", http=http), bazaar.MemoryReceiptStore())

            async def work(_: bazaar.Settled) -> bazaar.WorkReceipt:
                raise AssertionError("the work must not run")

            status, _, body = await merchant.paid(token_for("o-1"), PRICE, work)
            return status, json.loads(body)

        return asyncio.run(run())

    def test_a_refused_merchant_credential_is_merchant_unauthenticated(self) -> None:
        status, body = self.answer(lambda _: problem(401, "unauthenticated"))
        self.assertEqual((status, body["code"]), (503, "merchant_unauthenticated"))
        self.assertIn("merchant must fix", body["detail"])

    def test_an_amount_refusal_carries_the_routes_price_and_the_registrys_facts(self) -> None:
        def registry(request: httpx.Request) -> httpx.Response:
            if request.url.path == "/v1/tokens/verify":
                return httpx.Response(200, json={"genuine": True, "state": "open"})
            return problem(422, "amount_exceeds_token", {"amount_minor": PRICE, "max_amount_minor": 200})

        status, body = self.answer(registry)
        self.assertEqual((status, body["code"]), (402, "amount_exceeds_token"))
        self.assertEqual(body["facts"], {"amount_minor": PRICE, "max_amount_minor": 200, "price_minor": PRICE})
        self.assertIn(f"costs {PRICE}", body["detail"])


class BuyerRenews(unittest.TestCase):
    """The order's first token replayed: checked with verify, renewed under ``renew:<jti>`` when voided, expired or
    about to expire, used as it is when settled; a fresh token is not checked."""

    def pay(self, replayed: bool, state: str, expires_at_ms: int = 2**62) -> "tuple[bazaar.PaidResponse, list[str]]":
        calls: list[str] = []

        def handle(request: httpx.Request) -> httpx.Response:
            key = request.headers.get(contract.IDEMPOTENCY_KEY_HEADER)
            calls.append(f"{request.method} {request.url.path}" + (f" {key}" if key else ""))
            if str(request.url) == SHOP:
                return httpx.Response(200, json={"token": request.headers[contract.PAYMENT_HEADER]}, headers={contract.SETTLEMENT_HEADER: "stl_1"})
            if request.url.path == "/v1/tokens" and key == "renew:tok_1":
                return httpx.Response(201, json={"token": token_for("o-1", "tok_2"), "jti": "tok_2", "expires_at_ms": 2**62})
            if request.url.path == "/v1/tokens":
                headers = {contract.IDEMPOTENT_REPLAYED_HEADER: "true"} if replayed else {}
                body = {"token": token_for("o-1"), "jti": "tok_1", "expires_at_ms": expires_at_ms}
                return httpx.Response(201, json=body, headers=headers)
            if request.url.path == "/v1/tokens/verify":
                return httpx.Response(200, json={"genuine": True, "state": state, "work_order": False})
            return problem(404, "not_found")

        async def run() -> bazaar.PaidResponse:
            http = httpx.AsyncClient(transport=httpx.MockTransport(handle))
            return await bazaar.Client(REGISTRY, "bzc_buyer", http=http).pay(SHOP, "did:key:zShop", PRICE, "o-1")

        return asyncio.run(run()), calls

    def test_a_replayed_voided_token_is_renewed_under_the_key_naming_it(self) -> None:
        paid, calls = self.pay(replayed=True, state="voided")
        self.assertEqual(paid.token, token_for("o-1", "tok_2"))
        self.assertEqual(calls[:3], ["POST /v1/tokens", "POST /v1/tokens/verify", "POST /v1/tokens renew:tok_1"])

    def test_a_replayed_token_about_to_expire_is_renewed(self) -> None:
        paid, calls = self.pay(replayed=True, state="open", expires_at_ms=0)
        self.assertEqual(paid.token, token_for("o-1", "tok_2"))
        self.assertIn("POST /v1/tokens renew:tok_1", calls)

    def test_a_replayed_settled_token_is_used_as_it_is(self) -> None:
        paid, calls = self.pay(replayed=True, state="settled", expires_at_ms=0)
        self.assertEqual(paid.token, token_for("o-1"))
        self.assertNotIn("POST /v1/tokens renew:tok_1", calls)

    def test_a_fresh_token_is_not_checked(self) -> None:
        paid, calls = self.pay(replayed=False, state="voided")
        self.assertEqual(paid.token, token_for("o-1"))
        self.assertEqual(calls, ["POST /v1/tokens", f"POST {SHOP.removeprefix('http://shop.test')}"])


if __name__ == "__main__":
    unittest.main()
