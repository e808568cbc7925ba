"""Coalescing: a client from ``Client.coalescing()`` sends concurrent tokens and settlements in batches, and each
call is answered (or raises) exactly as its single call would. The Rust SDK's ``coalesce`` module behaves the same;
the conformance scenario's ``batch`` step holds all three SDKs to it against a real registry.

Run: ``.venv/bin/python -m unittest discover -s tests``."""

from __future__ import annotations

import asyncio
import json
import unittest
from typing import Any

import httpx

import bazaar
from bazaar import contract
from bazaar.errors import AlreadySettled, ProblemError, TransportError

URL = "http://registry.test"


class Registry:
    """Answers batches item by item: a token per order; a settlement of order ``dup`` is refused as settled, one of
    order ``again`` is a replay. ``refuse_all`` answers every batch 401; ``short`` drops the last result."""

    def __init__(self, refuse_all: bool = False, short: bool = False) -> None:
        self.refuse_all = refuse_all
        self.short = short
        self.requests: list[tuple[str, int]] = []
        self.credentials: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        body: Any = json.loads(request.content) if request.content else None
        items = body.get("items", [body]) if isinstance(body, dict) else []
        self.requests.append((request.url.path, len(items)))
        self.credentials.append(request.headers.get("authorization", ""))
        if self.refuse_all:
            problem = {"type": "about:blank", "status": 401, "code": "unauthenticated", "detail": "no such credential"}
            return httpx.Response(401, json=problem)
        if not request.url.path.endswith("/batch"):
            return httpx.Response(200, json=self.item(request.url.path, body)["body"])
        results = [self.item(request.url.path, item) for item in items]
        return httpx.Response(200, json={"results": results[:-1] if self.short else results})

    def item(self, path: str, item: dict[str, Any]) -> dict[str, Any]:
        order = item["order_id"]
        if path.startswith("/v1/tokens"):
            body = {"jti": f"jti-{order}", "token": f"apt_{order}", "key": item.get("idempotency_key")}
            return {"status": 200, "replayed": False, "body": body}
        if order == "dup":
            refusal = {"status": 409, "code": "order_already_settled", "detail": "settled", "facts": {"id": "stl_1"}}
            return {"status": 409, "replayed": False, "body": refusal}
        return {"status": 200, "replayed": order == "again", "body": {"id": f"stl_{order}", "amount_minor": item["amount_minor"]}}

    def client(self, credential: str = "bzc_buyer") -> bazaar.Client:
        http = httpx.AsyncClient(transport=httpx.MockTransport(self.handle))
        return bazaar.Client(URL, credential, http=http)


def tokens(client: bazaar.Client, orders: list[str]) -> Any:
    async def go() -> Any:
        calls = [client.issue_token("did:m", 300, order, "https://shop.test/work") for order in orders]
        return await asyncio.gather(*calls, return_exceptions=True)

    return asyncio.run(go())


class Coalescing(unittest.TestCase):
    def test_concurrent_tokens_leave_in_batches_each_answered_as_its_own_call(self) -> None:
        registry = Registry()
        orders = [f"o-{i}" for i in range(10)]
        answers = tokens(registry.client().coalescing(), orders)
        self.assertEqual([a.body["jti"] for a in answers], [f"jti-{o}" for o in orders], "each call its own answer")
        self.assertTrue(all(a.replayed is False for a in answers))
        # The first COALESCE_IN_FLIGHT_MAX calls leave at once, alone; the rest waited and leave together.
        self.assertTrue(all(path == "/v1/tokens/batch" for path, _ in registry.requests))
        self.assertEqual(sorted(n for _, n in registry.requests), [1] * contract.COALESCE_IN_FLIGHT_MAX + [6])

    def test_a_batch_carries_at_most_coalesce_items_max(self) -> None:
        registry = Registry()
        count = contract.COALESCE_IN_FLIGHT_MAX + contract.COALESCE_ITEMS_MAX + 3
        answers = tokens(registry.client().coalescing(), [f"o-{i}" for i in range(count)])
        self.assertEqual(len(answers), count)
        self.assertEqual(max(n for _, n in registry.requests), contract.COALESCE_ITEMS_MAX)
        self.assertEqual(sum(n for _, n in registry.requests), count)

    def test_an_item_refused_raises_its_own_typed_error_and_its_neighbours_are_answered(self) -> None:
        registry = Registry()
        client = registry.client("bzc_merchant").coalescing()

        async def go() -> Any:
            calls = [client.settle(f"apt_{o}", 300, o, idempotency_key=f"k-{o}" if o == "a" else None) for o in "ab"]
            calls += [client.settle("apt_dup", 300, "dup"), client.settle("apt_again", 300, "again")]
            return await asyncio.gather(*calls, return_exceptions=True)

        first, second, dup, again = asyncio.run(go())
        self.assertEqual((first.body["id"], second.body["id"]), ("stl_a", "stl_b"))
        self.assertIsInstance(dup, AlreadySettled)
        self.assertEqual(dup.facts, {"id": "stl_1"})
        self.assertTrue(again.replayed, "a replay is still a replay")
        self.assertTrue(all(path == "/v1/settlements/batch" for path, _ in registry.requests))

    def test_the_key_a_single_call_sends_as_a_header_rides_in_its_item(self) -> None:
        registry = Registry()
        client = registry.client().coalescing()
        answer = asyncio.run(client.issue_token("did:m", 300, "o-1", "https://shop.test/work", idempotency_key="k-1"))
        self.assertEqual(dict(answer.body).get("key"), "k-1")

    def test_a_refused_batch_is_each_calls_refusal(self) -> None:
        registry = Registry(refuse_all=True)
        answers = tokens(registry.client().coalescing(), ["o-1", "o-2", "o-3", "o-4", "o-5", "o-6"])
        self.assertTrue(all(isinstance(a, ProblemError) and a.code == "unauthenticated" for a in answers), answers)
        self.assertEqual(len({id(a) for a in answers}), len(answers), "each call raises its own error")

    def test_an_answer_with_fewer_results_fails_the_items_left_in_transport(self) -> None:
        registry = Registry(short=True)
        client = registry.client().coalescing()
        answers = tokens(client, [f"o-{i}" for i in range(6)])
        failed = [a for a in answers if isinstance(a, TransportError)]
        # Four batches of one (each short by its one item) and one of two (its second item short).
        self.assertEqual(len(failed), 5, answers)

    def test_a_plain_client_sends_single_calls_and_a_copy_for_another_credential_coalesces_on_its_own(self) -> None:
        registry = Registry()
        tokens(registry.client(), ["o-1"])
        self.assertEqual(registry.requests, [("/v1/tokens", 1)])
        registry.requests.clear()
        registry.credentials.clear()
        coalescing = registry.client().coalescing()
        other = coalescing.with_credential("bzc_other")

        async def go() -> Any:
            calls = [c.issue_token("did:m", 300, f"o-{i}", "r") for i, c in enumerate([coalescing, other] * 6)]
            return await asyncio.gather(*calls)

        asyncio.run(go())
        batches = list(zip(registry.requests, registry.credentials))
        self.assertTrue(all(path == "/v1/tokens/batch" for (path, _), _ in batches))
        # Each credential's calls ride in batches of its own: 4 alone and then 2 together, for each.
        self.assertEqual(sorted(n for (_, n), c in batches if c == "Bearer bzc_other"), [1, 1, 1, 1, 2])
        self.assertEqual(sorted(n for (_, n), c in batches if c == "Bearer bzc_buyer"), [1, 1, 1, 1, 2])


if __name__ == "__main__":
    unittest.main()
