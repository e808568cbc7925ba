"""Concurrent token and settlement calls coalesced into batches, as the Rust SDK's ``coalesce`` module does it.

A call is sent at once when fewer than ``COALESCE_IN_FLIGHT_MAX`` batches of its kind are in flight; otherwise it
waits, and the calls that waited leave together in the next batch (at most ``COALESCE_ITEMS_MAX`` items). There is
no timer: at low load every call leaves alone and at once; under load a call waits at most one batch's round trip.
The registry runs each item with its single call's meaning, so each item is answered (or raised) exactly as its
single call would be: the caller cannot tell but for the throughput.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Optional

from . import contract
from .errors import BazaarError, ProblemError, TransportError, problem

if TYPE_CHECKING:  # only for the annotations: the client imports this module
    from .client import Answer, Client

Json = dict[str, Any]

#: Items one coalesced batch carries at most (the registry accepts up to 1,000).
COALESCE_ITEMS_MAX = contract.COALESCE_ITEMS_MAX
#: Batches of one kind in flight at once from one client; more calls wait for the next batch.
COALESCE_IN_FLIGHT_MAX = contract.COALESCE_IN_FLIGHT_MAX


class Lane:
    """One kind of batch (``POST /v1/tokens/batch`` or ``/v1/settlements/batch``): its path and what waits for it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._queue: "list[tuple[Json, asyncio.Future[Answer[Json]]]]" = []
        self._in_flight = 0
        # The sending tasks, held so the event loop does not drop them half-way.
        self._tasks: "set[asyncio.Task[None]]" = set()

    async def submit(self, client: "Client", item: Json) -> "Answer[Json]":
        """Sends ``item`` (the single call's body, with its ``idempotency_key`` if it has one) in the next batch;
        its own answer, or its own refusal raised."""
        future: "asyncio.Future[Answer[Json]]" = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        batch = self._take()
        if batch is not None:
            task = asyncio.ensure_future(self._send(client, batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await future

    def _take(self) -> "Optional[list[tuple[Json, asyncio.Future[Answer[Json]]]]]":
        """The next batch, if a slot is free and anything waits (counting it in flight)."""
        if not self._queue or self._in_flight >= COALESCE_IN_FLIGHT_MAX:
            return None
        self._in_flight += 1
        batch, self._queue = self._queue[:COALESCE_ITEMS_MAX], self._queue[COALESCE_ITEMS_MAX:]
        return batch

    async def _send(self, client: "Client", batch: "list[tuple[Json, asyncio.Future[Answer[Json]]]]") -> None:
        """Sends ``batch``, answers its items, then sends what waited meanwhile."""
        while True:
            try:
                sent = await client.call("POST", self.path, {"items": [item for item, _ in batch]})
                _answer(batch, sent.body.get("results"))
            except BazaarError as error:
                _refuse(batch, error)
            except BaseException as error:  # cancelled, or a bug: no caller is left waiting forever
                _refuse(batch, TransportError(f"the batch was not sent: {error!r}"))
                raise
            finally:
                self._in_flight -= 1
            next_batch = self._take()
            if next_batch is None:
                return
            batch = next_batch


def _answer(batch: "list[tuple[Json, asyncio.Future[Answer[Json]]]]", results: Any) -> None:
    """Hands each item its own answer (``{status, replayed, body}``) as the single call would have answered."""
    from .client import Answer

    answers = results if isinstance(results, list) else []
    for index, (_, future) in enumerate(batch):
        if future.done():
            continue
        if index >= len(answers) or not isinstance(answers[index], dict):
            future.set_exception(TransportError("the registry answered fewer items than it was sent"))
            continue
        result = answers[index]
        status = result.get("status")
        status = status if isinstance(status, int) else 500
        body = result.get("body")
        if status >= 400:
            future.set_exception(problem(status, body))
        else:
            future.set_result(Answer(body if isinstance(body, dict) else {}, result.get("replayed") is True))


def _refuse(batch: "list[tuple[Json, asyncio.Future[Answer[Json]]]]", error: BaseException) -> None:
    """The whole batch failed: a refusal of the batch (e.g. unauthenticated) is each item's refusal; a transport
    failure is each item's transport failure (retry as after one)."""
    for _, future in batch:
        if future.done():
            continue
        if isinstance(error, ProblemError):
            future.set_exception(problem(error.status, error.body))
        else:
            future.set_exception(TransportError(f"transport (batch): {error}"))
