"""The buyer's (and anyone's) client over a registry's HTTP API.

Every money-moving call carries an idempotency key — one the registry derives from the order where it can
(tokens, settlements), one this client derives otherwise (escrowed purchases) — so every retry is the same
request and is charged at most once.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generic, Optional, Sequence, TypeVar, Union, cast

import httpx

from . import contract, wire
from .coalesce import Lane
from .errors import BazaarError, ProblemError, TransportError, problem
from .keys import Key, invite_proof

Json = dict[str, Any]
T = TypeVar("T")


@dataclass(frozen=True)
class Answer(Generic[T]):
    """A JSON answer, and whether the registry replayed it from an idempotency record. ``T`` is the answer's wire
    type (:mod:`bazaar.wire`, generated from the registry's API description): a ``TypedDict``, so the body is the
    registry's JSON object as it came."""

    body: T
    replayed: bool


class _Nodes:
    """A registry's nodes as one client (and its ``with_credential`` copies) sees them: every URL, and the one in
    use."""

    def __init__(self, urls: "list[str]") -> None:
        if not urls:
            raise ValueError("a client needs at least one registry URL")
        self.urls = [url.rstrip("/") for url in urls]
        self.current = 0

    def current_url(self) -> str:
        return self.urls[self.current]

    def fail_over(self, failed: int) -> None:
        """Moves past ``failed``, unless another request already moved on."""
        if self.current == failed:
            self.current = (failed + 1) % len(self.urls)


@dataclass(frozen=True)
class PaidResponse:
    """What a paid call came back with: the merchant's answer, and how it was paid."""

    status: int
    body: bytes
    headers: httpx.Headers
    token: str
    attempts: int

    @property
    def settlement(self) -> Optional[str]:
        """The settlement the merchant's middleware named (``Bazaar-Settlement``)."""
        value = self.headers.get(contract.SETTLEMENT_HEADER)
        return str(value) if value is not None else None

    @property
    def replayed(self) -> bool:
        """The merchant answered from its work receipt: the work did not run again."""
        return self.headers.get(contract.WORK_RECEIPT_HEADER) is not None

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Escrowed:
    """A purchase above the escrow threshold: the contract opened (or found again) for it."""

    contract: wire.Contract


Purchase = Union[PaidResponse, Escrowed]


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def _lanes() -> "tuple[Lane, Lane]":
    return (Lane("/v1/tokens/batch"), Lane("/v1/settlements/batch"))


def _keyed(body: Json, idempotency_key: Optional[str]) -> Json:
    """A batch item: the single call's body, with the key the single call would send as a header."""
    return body if idempotency_key is None else {**body, "idempotency_key": idempotency_key}


def _retryable(error: BaseException) -> bool:
    if isinstance(error, TransportError):
        return True
    return isinstance(error, ProblemError) and error.retryable


def merchant_refusal(response: httpx.Response) -> Optional[ProblemError]:
    """A paid call the merchant refused (an answer of 400 or more with no settlement: the work did not run) as the
    typed error its problem+json ``code`` names; None for an answer of the paid work, whatever its status."""
    if response.status_code < 400 or response.headers.get(contract.SETTLEMENT_HEADER) is not None:
        return None
    try:
        data = response.json() if response.content else None
    except ValueError:
        data = None
    return problem(response.status_code, data)


class Client:
    """An async client for one registry, speaking for the holder of ``credential`` (or for nobody).

    ``verify`` is a receipt check, never a work order: a consumed token still verifies as genuine.
    """

    def __init__(
        self,
        base_url: Union[str, Sequence[str]],
        credential: Optional[str] = None,
        *,
        http: Optional[httpx.AsyncClient] = None,
        timeout_s: float = contract.REQUEST_TIMEOUT_S,
    ) -> None:
        """``base_url`` is one registry URL, or every node's URL of a registry served by several nodes: the
        client uses one at a time and moves to the next when a node cannot be reached (as the Rust SDK's
        ``Client::with_nodes`` does)."""
        self._nodes = _Nodes([base_url] if isinstance(base_url, str) else list(base_url))
        self.credential = credential
        self._owns_http = http is None
        self.http = http or httpx.AsyncClient(timeout=timeout_s)
        # When coalescing: the lanes tokens and settlements wait in (one pair per credential).
        self._lanes: "Optional[tuple[Lane, Lane]]" = None

    @property
    def base_url(self) -> str:
        """The node in use."""
        return self._nodes.current_url()

    @property
    def nodes(self) -> "tuple[str, ...]":
        """Every node's URL, in the order the client tries them."""
        return tuple(self._nodes.urls)

    def with_credential(self, credential: str) -> "Client":
        """The same registry (its nodes, and the one in use) and connection pool, speaking for another credential.
        A coalescing client's copy coalesces too, in batches of its own (a batch carries one credential)."""
        other = self._copy(credential)
        if self._lanes is not None:
            other._lanes = _lanes()
        return other

    def coalescing(self) -> "Client":
        """This client (same credential, nodes and connection pool), with concurrent :meth:`issue_token` and
        :meth:`settle` calls coalesced into ``POST /v1/tokens/batch`` and ``/v1/settlements/batch``
        (:mod:`bazaar.coalesce`): each call is answered, or raises, exactly as alone; under load there are fewer
        requests. Use it from one event loop."""
        other = self._copy(self.credential)
        other._lanes = _lanes()
        return other

    def _copy(self, credential: Optional[str]) -> "Client":
        other = Client(self._nodes.urls, credential, http=self.http)
        other._nodes = self._nodes
        other._owns_http = False
        return other

    async def aclose(self) -> None:
        if self._owns_http:
            await self.http.aclose()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # ---- transport -------------------------------------------------------------------------------

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        idempotency_key: Optional[str] = None,
    ) -> Answer[Json]:
        """One request; a problem+json answer raises the typed :class:`~bazaar.errors.ProblemError`."""
        headers: dict[str, str] = {}
        if self.credential:
            headers["authorization"] = f"Bearer {self.credential}"
        if idempotency_key is not None:
            headers[contract.IDEMPOTENCY_KEY_HEADER] = idempotency_key
        # Safe to send again to another node whatever happened to the first: reads, keyed requests and the calls
        # the registry keys by their order itself. Anything else moves on only when it never reached the node.
        resendable = method == "GET" or idempotency_key is not None or path in contract.NATURALLY_KEYED
        tries = len(self._nodes.urls)
        while True:
            at = self._nodes.current
            try:
                response = await self.http.request(
                    method, f"{self._nodes.urls[at]}{path}", headers=headers, json=body if body is not None else None
                )
                break
            except httpx.HTTPError as error:
                if tries > 1 and (isinstance(error, httpx.ConnectError) or resendable):
                    tries -= 1
                    self._nodes.fail_over(at)
                    continue
                raise TransportError(f"{method} {path}: {error!r}") from error
        try:
            data = response.json() if response.content else None
        except ValueError:
            data = None
        if response.status_code >= 400:
            raise problem(response.status_code, data)
        replayed = response.headers.get(contract.IDEMPOTENT_REPLAYED_HEADER) is not None
        return Answer(data if isinstance(data, dict) else {"items": data}, replayed)

    async def retrying(self, call: Callable[[], Awaitable[Answer[T]]]) -> Answer[T]:
        """Sends ``call`` again while the answer is retryable (transport, 5xx, 409 in flight): same request, same key."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return await call()
            except (TransportError, ProblemError) as error:
                if not _retryable(error) or attempt >= contract.RETRY_ATTEMPTS_MAX:
                    raise
            await asyncio.sleep(contract.RETRY_BASE_MS * (2 ** (attempt - 1)) / 1000)

    async def _get(self, path: str) -> Json:
        return (await self.call("GET", path)).body

    # ---- reading ---------------------------------------------------------------------------------

    async def well_known(self) -> Json:
        """The registry's signed card: its DID, fee, escrow threshold, limits."""
        return await self._get("/.well-known/bazaar")

    async def me(self) -> wire.Me:
        return cast(wire.Me, await self._get("/v1/me"))

    async def balance(self) -> int:
        """This member's balance in minor units of the network unit."""
        value = (await self.me()).get("balance_minor")
        return int(value) if isinstance(value, int) else 0

    async def member(self, who: str) -> wire.Member:
        return cast(wire.Member, await self._get(f"/v1/members/{who}"))

    # ---- joining ---------------------------------------------------------------------------------

    async def create_owner(self, key: Key, handle: str) -> wire.Enrolled:
        """Operator: register an owner (a person) by her public key. The answer's ``credential`` is shown once."""
        body = {"public_key": key.public_key_hex, "handle": handle}
        return cast(wire.Enrolled, (await self.call("POST", "/v1/owners", body)).body)

    async def mint(self, owner: str, amount_minor: int, idempotency_key: str) -> wire.Minted:
        """Operator: create ``amount_minor`` units in an owner's account (``owner`` is her DID)."""
        body = {"owner": owner, "amount_minor": amount_minor}
        return cast(wire.Minted, (await self.call("POST", "/v1/mint", body, idempotency_key)).body)

    async def issue_invite(self) -> str:
        """Owner: a single-use invite code (``inv_…``, 24 h) to hand to one new agent."""
        return cast(wire.Invite, (await self.call("POST", "/v1/invites")).body)["invite_code"]

    async def redeem_invite(self, invite_code: str, key: Key, handle: str) -> wire.Enrolled:
        """An agent's enrolment, from any client (no credential needed): redeem ``invite_code`` with the agent's
        own ``key`` (signing ``bazaar-invite-v1\\n<code>\\n<handle>``), then rotate the enrollment credential
        the invite gave — the agent's first act. The answer (``id``, ``handle``, ``owner``) carries the rotated
        ``credential``, which nobody else has seen."""
        body = {
            "invite_code": invite_code,
            "public_key": key.public_key_hex,
            "handle": handle,
            "proof": invite_proof(key, invite_code, handle),
        }
        anyone = self._copy(None)
        joined = cast(wire.Enrolled, (await anyone.call("POST", "/v1/agents", body)).body)
        joined["credential"] = await self.with_credential(joined["credential"]).rotate_credential()
        return joined

    async def rotate_credential(self) -> str:
        """Replaces this client's credential with a new one (returned); the old one stops working at once."""
        return cast(wire.Rotated, (await self.call("POST", "/v1/credentials/rotate")).body)["credential"]

    async def revoke_credential(self) -> wire.Revoked:
        """Revokes this client's credential."""
        return cast(wire.Revoked, (await self.call("POST", "/v1/credentials/revoke")).body)

    # ---- owners ----------------------------------------------------------------------------------

    async def set_budget(self, agent: str, per_call: int, per_day: int, total: int) -> wire.Budget:
        """Owner: the agent's ceilings in minor units."""
        body = {"per_call_max_minor": per_call, "per_day_max_minor": per_day, "total_max_minor": total}
        return cast(wire.Budget, (await self.call("PUT", f"/v1/agents/{agent}/budget", body)).body)

    async def fund(self, agent: str, amount_minor: int, idempotency_key: str) -> wire.Funded:
        """Owner: move units from the owner's account to the agent's."""
        body = {"amount_minor": amount_minor}
        return cast(wire.Funded, (await self.call("POST", f"/v1/agents/{agent}/fund", body, idempotency_key)).body)

    # ---- paying ----------------------------------------------------------------------------------

    async def issue_token(
        self,
        merchant: str,
        max_amount_minor: int,
        order_id: str,
        resource: str,
        *,
        registry: Optional[str] = None,
        ttl_s: Optional[int] = None,
        idempotency_key: Optional[str] = None,
    ) -> Answer[wire.TokenIssued]:
        """Buyer: a payment token for one order. Asking again for the same (merchant, order) gives the same token."""
        body: Json = {"merchant": merchant, "max_amount_minor": max_amount_minor, "order_id": order_id, "resource": resource}
        if registry is not None:
            body["registry"] = registry
        if ttl_s is not None:
            body["ttl_s"] = ttl_s
        if self._lanes is not None:
            return cast("Answer[wire.TokenIssued]", await self._lanes[0].submit(self, _keyed(body, idempotency_key)))
        return cast("Answer[wire.TokenIssued]", await self.call("POST", "/v1/tokens", body, idempotency_key))

    async def verify(self, token: str) -> wire.TokenCheck:
        """A receipt check, never a work order: says whether the token is genuine and its state (a settled
        token still says ``genuine: true``). Only :meth:`settle` makes the money real."""
        return cast(wire.TokenCheck, (await self.call("POST", "/v1/tokens/verify", {"token": token})).body)

    async def settle(
        self, token: str, amount_minor: int, order_id: str, idempotency_key: Optional[str] = None
    ) -> Answer[wire.SettlementReceipt]:
        """Merchant: settle exactly once. Without a key the registry derives one from the order."""
        body: Json = {"token": token, "amount_minor": amount_minor, "order_id": order_id}
        if self._lanes is not None:
            answer = await self._lanes[1].submit(self, _keyed(body, idempotency_key))
            return cast("Answer[wire.SettlementReceipt]", answer)
        return cast("Answer[wire.SettlementReceipt]", await self.call("POST", "/v1/settlements", body, idempotency_key))

    async def void(self, jti: str) -> wire.Voided:
        """Buyer (or its owner): void an unsettled token and release its hold."""
        return cast(wire.Voided, (await self.call("POST", f"/v1/tokens/{jti}/void")).body)

    async def pay(
        self,
        url: str,
        merchant: str,
        max_amount_minor: int,
        order_id: str,
        *,
        registry: Optional[str] = None,
        method: str = "POST",
        body: Any = None,
    ) -> PaidResponse:
        """Buyer: get (or get again) the order's token and call the paid ``url`` with it, retrying transport
        errors, 5xx and 409 with the same token. The merchant settles once and keeps a work receipt, so every
        retry is safe: it is charged once and the work runs once.

        A refusal at the merchant raises the typed :class:`~bazaar.errors.ProblemError` its code names (e.g.
        :class:`~bazaar.errors.TokenTooSmall` with the route's ``price_minor``); where the token is of no more use
        to this call (``contract.VOID_ON_CODES``: the merchant's own credential refused, the token too small, for
        another merchant or order) it is voided first, releasing its hold. Asking again for the order replays that
        token: a replay is checked with :meth:`verify`, and one voided, expired or about to expire is renewed under
        ``renew:<jti>`` (a settled one is used as it is), so the order can still be paid once."""
        issued = await self.retrying(
            lambda: self.issue_token(merchant, max_amount_minor, order_id, url, registry=registry)
        )
        # The order's derived key replays its first token even once it is dead (expired, or voided by a merchant's
        # refusal): ask again under a key naming the dead token, and check that answer the same way if it is a
        # replay too — one key per dead token, so every retry of the order finds the same chain.
        while issued.replayed and not await self._usable(issued.body):
            jti = issued.body["jti"]
            key = f"{contract.RENEW_KEY_PREFIX}{jti}"
            issued = await self.retrying(
                lambda: self.issue_token(merchant, max_amount_minor, order_id, url, registry=registry, idempotency_key=key)
            )
            if issued.body["jti"] == jti:
                break
        token = issued.body["token"]
        attempt = 0
        while True:
            attempt += 1
            response: Optional[httpx.Response] = None
            failure: Optional[BaseException] = None
            try:
                response = await self.http.request(method, url, headers={contract.PAYMENT_HEADER: token}, json=body)
            except httpx.HTTPError as error:
                failure = error
            refusal = merchant_refusal(response) if response is not None else None
            final = refusal is not None and not refusal.retryable
            retry = not final and (response is None or response.status_code >= 500 or response.status_code == 409)
            if not retry or attempt >= contract.RETRY_ATTEMPTS_MAX:
                if response is None:
                    raise TransportError(f"{method} {url}: {failure!r}") from failure
                if refusal is not None:
                    if refusal.code in contract.VOID_ON_CODES:
                        await self._void_quietly(issued.body["jti"])
                    raise refusal
                return PaidResponse(response.status_code, response.content, response.headers, token, attempt)
            await asyncio.sleep(contract.RETRY_BASE_MS * (2 ** (attempt - 1)) / 1000)

    async def _usable(self, issued: wire.TokenIssued) -> bool:
        """Whether a replayed token can still pay (``contract.json``, ``buyer.renew_rule``): its state by
        :meth:`verify` — a receipt check, asked only of replays — settled (used as it is: the merchant answers the
        order from its work receipt) or open and not expiring within ``TOKEN_RENEW_MARGIN_MS``. Voided or expired
        is not; if verify cannot answer, the expiry alone decides."""
        token = issued["token"]
        try:
            verified = await self.retrying(lambda: self.call("POST", "/v1/tokens/verify", {"token": token}))
            state = verified.body.get("state")
        except BazaarError:
            state = None
        if state == "settled":
            return True
        if state in ("voided", "expired"):
            return False
        return issued["expires_at_ms"] > wall_clock_ms() + contract.TOKEN_RENEW_MARGIN_MS

    async def _void_quietly(self, jti: str) -> None:
        """Voids a token this call can no longer use, so its hold is released now rather than when it expires. A
        failure here (the token settled or expired meanwhile, the registry unreachable) leaves it to expire."""
        if not jti:
            return
        try:
            await self.void(jti)
        except BazaarError:
            pass

    async def create_contract(
        self,
        seller: str,
        milestones: list[tuple[int, str, int]],
        terms: str,
        idempotency_key: str,
        *,
        arbiter: Optional[str] = None,
        review_window_s: Optional[int] = None,
    ) -> Answer[wire.Contract]:
        """Buyer: open and fund an escrowed contract; ``milestones`` are (amount, description, due_at_ms)."""
        body = {
            "seller": seller,
            "arbiter": arbiter,
            "milestones": [{"amount_minor": a, "description": d, "due_at_ms": due} for a, d, due in milestones],
            "terms_sha256": hashlib.sha256(terms.encode()).hexdigest(),
            "review_window_s": review_window_s,
        }
        return cast("Answer[wire.Contract]", await self.call("POST", "/v1/contracts", body, idempotency_key))

    async def contract(self, contract_id: str) -> wire.Contract:
        return cast(wire.Contract, await self._get(f"/v1/contracts/{contract_id}"))

    async def purchase(self, url: str, merchant: str, price_minor: int, order_id: str) -> Purchase:
        """Buys at ``price_minor``: a paid call within the registry's escrow threshold, else an escrowed contract
        with one milestone due a week after the end of today (UTC), under a key derived from the order — a retry
        the same day finds the same contract."""
        card = await self.well_known()
        threshold = card.get("escrow_threshold_minor")
        if isinstance(threshold, int) and price_minor <= threshold:
            return await self.pay(url, merchant, price_minor, order_id)
        day_ms = 86_400_000
        due = (wall_clock_ms() // day_ms + 1) * day_ms + contract.ESCROW_DUE_S * 1000
        description = f"order {order_id}: {url}"
        terms = f"bazaar-order-v1\n{merchant}\n{order_id}\n{url}\n{price_minor}"
        key = f"order:{merchant}:{order_id}"
        answer = await self.retrying(lambda: self.create_contract(merchant, [(price_minor, description, due)], terms, key))
        return Escrowed(answer.body)
