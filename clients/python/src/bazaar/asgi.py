"""Paid routes for any ASGI app (FastAPI, Starlette, …): verify → settle once → run the handler once → keep the
work receipt → answer; a retried or replayed order gets the stored response and the handler does not run again.

Verify is a receipt check, never a work order: it only says the token is genuine and what state it is in. The
money is real when the settlement is; the handler runs after that, at most once per settlement.

Sharp edge, the same as in the Rust SDK: the receipt is written right after the handler returns. If the process
dies inside that window, the settlement exists without a receipt and the next retry runs the handler again.
Handlers whose effects must never repeat should make them idempotent on the settlement id the middleware hands
them (``request.state.bazaar.settlement_id`` in Starlette/FastAPI, ``scope["bazaar.settled"]`` in plain ASGI).
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping, MutableMapping, Optional, Union, cast

from . import contract, wire
from .client import Client
from .errors import MerchantMisconfigured, ProblemError, TransportError
from .receipts import ReceiptStore, WorkReceipt

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Where a test may make the merchant "crash": after settling (handler not yet run), or after the receipt is
#: stored (the answer never sent). The hook gets the point and the order id; returning True answers 503.
AFTER_SETTLE = "after_settle"
BEFORE_ANSWER = "before_answer"
FaultHook = Callable[[str, str], bool]
#: An answer as (status, headers, body).
Answered = tuple[int, list[tuple[bytes, bytes]], bytes]


@dataclass(frozen=True)
class Settled:
    """What the paid handler is handed: the settlement it runs for."""

    settlement_id: str
    order_id: str
    buyer: str
    amount_minor: int


def claims_unverified(token: str) -> Optional[dict[str, Any]]:
    """The claims of an ``apt_`` token, unchecked (the registry checks the signature when it settles)."""
    if not token.startswith("apt_") or "." not in token:
        return None
    encoded = token[len("apt_") :].split(".", 1)[0]
    try:
        claims = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    except (ValueError, json.JSONDecodeError):
        return None
    return claims if isinstance(claims, dict) else None


def problem_response(status: int, code: str, detail: str, facts: Optional[Mapping[str, Any]] = None) -> Answered:
    problem: dict[str, Any] = {
        "type": f"https://bazaar.dev/problems/{code}",
        "title": code.replace("_", " "),
        "status": status,
        "code": code,
        "detail": detail,
    }
    if facts:
        problem["facts"] = dict(facts)
    return status, [(b"content-type", b"application/problem+json")], json.dumps(problem).encode()


async def _respond(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _failure(error: BaseException, price: int) -> Answered:
    """The buyer's answer when verify or settle did not succeed, naming the party at fault."""
    if isinstance(error, ProblemError):
        if error.status == 401 or error.code == "rotation_required":
            # The registry refused the merchant's own credential: nothing the buyer sent is wrong.
            detail = (
                f"The registry refused this merchant's own credential ({error.code}): the merchant must fix its "
                "configuration. Your token was not settled; void it to release its hold (Bazaar's clients do)."
            )
            return problem_response(contract.MERCHANT_UNAUTHENTICATED_STATUS, contract.MERCHANT_UNAUTHENTICATED, detail)
        status = 503 if error.status >= 500 or error.status == 409 else 402
        facts = dict(error.facts)
        detail = error.detail
        if error.code == "amount_exceeds_token":
            facts["price_minor"] = price
            allowed = facts.get("max_amount_minor")
            detail = f"This costs {price} minor units; the token allows at most {allowed}. Pay with a token for {price}."
        return problem_response(status, error.code, detail, facts)
    return problem_response(503, "registry_unreachable", f"The registry could not be reached: {error}")


class Merchant:
    """The merchant side of a paid call, whatever carries it (an HTTP route, an MCP tool): verify → settle once →
    run the work once per settlement → keep its receipt → answer; a retry gets the stored answer.

    ``client`` carries the merchant's credential; ``receipts`` keeps work receipts (e.g.
    ``SqliteReceiptStore("receipts.db")``). A merchant refuses to be made without a usable credential
    (:class:`~bazaar.errors.MerchantMisconfigured`): missing, blank, a placeholder such as ``MERCHANT_CREDENTIAL``,
    or an enrollment credential not yet rotated — else every buyer would be refused for the merchant's mistake.
    """

    def __init__(self, client: Client, receipts: ReceiptStore, *, fault: Optional[FaultHook] = None) -> None:
        problem = contract.merchant_credential_problem(client.credential)
        if problem is not None:
            raise MerchantMisconfigured(
                f"{contract.MERCHANT_CREDENTIAL_INVALID}: a merchant needs its own registry credential, and {problem}. "
                "Enrol the merchant agent (bazaar.Client(url).redeem_invite(...)) and pass the credential it got."
            )
        self.client = client
        self.receipts = receipts
        self.fault = fault
        # One lock per settlement (and how many requests hold it), so concurrent retries run the work once.
        self._running: dict[str, tuple[asyncio.Lock, list[int]]] = {}

    def _crash(self, point: str, order: str) -> bool:
        return self.fault is not None and self.fault(point, order)

    async def paid(
        self,
        token: Optional[str],
        price: int,
        work: Callable[[Settled], Awaitable[Union[WorkReceipt, Answered]]],
    ) -> Answered:
        """One paid request; the answer as (status, headers, body). ``work`` runs at most once per settlement;
        it may answer a refusal of its own (a tuple), which is sent and not kept."""
        if token is None:
            detail = f"This costs {price} minor units: send a registry token in the `Bazaar-Payment` header."
            return problem_response(402, "payment_required", detail, {"price_minor": price})
        claims = claims_unverified(token)
        if claims is None or not isinstance(claims.get("ord"), str) or not isinstance(claims.get("jti"), str):
            return problem_response(402, "token_malformed", "The payment token is not an apt_ token.")
        order_id = str(claims["ord"])
        try:
            # A receipt check: genuine and its state. Never the signal to work.
            await self.client.verify(token)
            receipt = await self._settle(token, price, order_id)
        except (ProblemError, TransportError) as error:
            return _failure(error, price)
        settled = Settled(
            settlement_id=receipt["settlement_id"],
            order_id=order_id,
            buyer=receipt["buyer"],
            amount_minor=receipt["amount_minor"],
        )
        lock, users = self._running.setdefault(settled.settlement_id, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                stored = await asyncio.to_thread(self.receipts.get, settled.settlement_id)
                if stored is not None:
                    return _stored(stored, settled.settlement_id, replayed=True)
                if self._crash(AFTER_SETTLE, order_id):
                    return problem_response(503, "merchant_crashed", "Simulated crash after settle.")
                made = await work(settled)
                if isinstance(made, tuple):
                    return made
                await asyncio.to_thread(self.receipts.put, settled.settlement_id, order_id, made)
                if self._crash(BEFORE_ANSWER, order_id):
                    return problem_response(503, "merchant_crashed", "Simulated crash before answering.")
                return _stored(made, settled.settlement_id, replayed=False)
        finally:
            users[0] -= 1
            if users[0] == 0:
                self._running.pop(settled.settlement_id, None)

    async def _settle(self, token: str, price: int, order_id: str) -> wire.Settlement:
        # The registry keys a settle by its token (``token:<jti>``): a refused earlier token for this order never
        # blocks this one, and one settlement per order stays the registry's uniqueness.
        try:
            receipt: wire.Settlement = (await self.client.settle(token, price, order_id)).body
            return receipt
        except ProblemError as error:
            if error.code in contract.ALREADY_PAID_CODES:
                # Paid before (a retry, a replay, another token for the order): answer from its receipt, which the
                # refusal's facts carry (refusal facts are not yet typed in the API description).
                return cast(wire.Settlement, error.facts)
            raise


class PaidRoutes:
    """ASGI middleware: requests to the paths in ``prices`` (path → price in minor units; an int prices every
    path) are paid routes run through ``merchant``. Other paths pass through untouched."""

    def __init__(self, app: ASGIApp, *, merchant: Merchant, prices: Union[Mapping[str, int], int]) -> None:
        self.app = app
        self.merchant = merchant
        self.prices = prices

    def price_of(self, path: str) -> Optional[int]:
        if isinstance(self.prices, int):
            return self.prices
        return self.prices.get(path)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        price = self.price_of(scope.get("path", "")) if scope["type"] == "http" else None
        if price is None:
            await self.app(scope, receive, send)
            return
        answer = await self.handle(scope, receive, header(scope, contract.PAYMENT_HEADER), price)
        await _respond(send, *answer)

    async def handle(self, scope: Scope, receive: Receive, token: Optional[str], price: int) -> Answered:
        async def work(settled: Settled) -> Union[WorkReceipt, Answered]:
            return await self._run(scope, receive, settled)

        return await self.merchant.paid(token, price, work)

    async def _run(self, scope: Scope, receive: Receive, settled: Settled) -> Union[WorkReceipt, Answered]:
        inner = dict(scope)
        inner["bazaar.settled"] = settled
        state = dict(scope.get("state") or {})
        state["bazaar"] = settled
        inner["state"] = state
        status = 500
        content_type: Optional[str] = None
        chunks: list[bytes] = []
        size = 0
        too_large = False

        async def capture(message: Message) -> None:
            nonlocal status, content_type, size, too_large
            if message["type"] == "http.response.start":
                status = int(message["status"])
                for name, value in message.get("headers", []):
                    if name.lower() == b"content-type":
                        content_type = value.decode("latin-1")
            elif message["type"] == "http.response.body":
                body = bytes(message.get("body", b""))
                size += len(body)
                if size > contract.WORK_RECEIPT_BYTES_MAX:
                    too_large = True
                else:
                    chunks.append(body)

        await self.app(inner, receive, capture)
        if too_large:
            return problem_response(500, "work_receipt_too_large", "The paid response exceeded the work-receipt limit.")
        return WorkReceipt(status, content_type, b"".join(chunks))


def header(scope: Scope, name: str) -> Optional[str]:
    wanted = name.encode()
    for key, value in scope.get("headers", []):
        if key.lower() == wanted:
            return str(value.decode("latin-1"))
    return None


def _stored(receipt: WorkReceipt, settlement_id: str, *, replayed: bool) -> Answered:
    headers: list[tuple[bytes, bytes]] = [(contract.SETTLEMENT_HEADER.encode(), settlement_id.encode())]
    if receipt.content_type:
        headers.append((b"content-type", receipt.content_type.encode("latin-1")))
    if replayed:
        headers.append((contract.WORK_RECEIPT_HEADER.encode(), b"replayed"))
    return receipt.status, headers, receipt.body
