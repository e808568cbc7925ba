"""Failover across a registry's nodes: a client given every node's URL uses one at a time and moves to the next
when a node cannot be reached. A request goes again to the next node only when that is safe: it never reached the
node (connection refused), or it is a read, or it carries an idempotency key (or is one the registry keys by its
order). The Rust SDK's ``Client::with_nodes`` behaves the same (``crates/bazaar-cli/tests/it/cluster.rs``).

Run: ``.venv/bin/python -m unittest discover -s tests``."""

from __future__ import annotations

import asyncio
import unittest
from typing import Any, Coroutine, TypeVar

import httpx

import bazaar
from bazaar.errors import TransportError

DOWN = "http://node-a.test"
UP = "http://node-b.test"


class Nodes:
    """Two nodes: ``down`` refuses connections (or, with ``drop``, takes the request and drops the connection)."""

    def __init__(self, drop: bool = False) -> None:
        self.drop = drop
        self.seen: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(f"{request.method} {request.url.host} {request.url.path}")
        if request.url.host == "node-a.test":
            if self.drop:
                raise httpx.ReadError("the node took the request and the connection dropped", request=request)
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200, json={"status": "ok", "event_seq": 7})

    def client(self, credential: "str | None" = "bzc_x") -> bazaar.Client:
        http = httpx.AsyncClient(transport=httpx.MockTransport(self.handle))
        return bazaar.Client([DOWN, UP], credential, http=http)


T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


class Failover(unittest.TestCase):
    def test_a_node_that_refuses_connections_is_passed_over_and_the_next_one_kept(self) -> None:
        nodes = Nodes()
        client = nodes.client()

        async def two_reads() -> None:
            await client.call("GET", "/healthz")
            await client.call("GET", "/healthz")

        run(two_reads())
        self.assertEqual(
            nodes.seen, ["GET node-a.test /healthz", "GET node-b.test /healthz", "GET node-b.test /healthz"]
        )
        self.assertEqual(client.base_url, UP)
        # A copy for another credential shares the nodes and the one in use.
        self.assertEqual(client.with_credential("bzc_y").base_url, UP)

    def test_an_unkeyed_write_that_never_reached_a_node_goes_to_the_next(self) -> None:
        nodes = Nodes()
        run(nodes.client().call("POST", "/v1/rooms", {"name": "ops"}))
        self.assertEqual(nodes.seen, ["POST node-a.test /v1/rooms", "POST node-b.test /v1/rooms"])

    def test_an_unkeyed_write_a_node_may_have_taken_is_not_sent_again(self) -> None:
        nodes = Nodes(drop=True)
        with self.assertRaises(TransportError):
            run(nodes.client().call("POST", "/v1/rooms", {"name": "ops"}))
        self.assertEqual(nodes.seen, ["POST node-a.test /v1/rooms"], "sent once: it may have been done")

    def test_a_keyed_write_and_a_settlement_go_again_to_the_next_node(self) -> None:
        nodes = Nodes(drop=True)
        client = nodes.client()
        run(client.call("POST", "/v1/mint", {"owner": "o", "amount_minor": 1}, idempotency_key="mint-1"))
        run(nodes.client().call("POST", "/v1/settlements", {"token": "apt_x", "amount_minor": 1, "order_id": "o"}))
        self.assertEqual(
            nodes.seen,
            [
                "POST node-a.test /v1/mint",
                "POST node-b.test /v1/mint",
                "POST node-a.test /v1/settlements",
                "POST node-b.test /v1/settlements",
            ],
        )

    def test_one_url_is_still_a_client_and_none_is_refused(self) -> None:
        self.assertEqual(bazaar.Client("http://one.test/").nodes, ("http://one.test",))
        with self.assertRaises(ValueError):
            bazaar.Client([])


if __name__ == "__main__":
    unittest.main()
