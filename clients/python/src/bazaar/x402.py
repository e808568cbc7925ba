"""x402 v2 on top of the paid-route middleware (``docs/x402.md``): no payment → ``402`` with ``PAYMENT-REQUIRED``;
a ``PAYMENT-SIGNATURE`` carrying a registry token (scheme ``apt``) → settled exactly once and run once per
settlement, with work receipts, answered with ``PAYMENT-RESPONSE``. Unmodified x402 clients (``@x402/fetch`` with
Bazaar's buyer scheme) pay it."""

from __future__ import annotations

import base64
import json
import secrets
from typing import Any, Mapping, Optional, Union

from . import contract
from .asgi import ASGIApp, Answered, Merchant, PaidRoutes, Receive, Scope, Send, claims_unverified, header



def _b64_json(value: Any) -> bytes:
    return base64.b64encode(json.dumps(value, separators=(",", ":")).encode())


class X402Routes:
    """ASGI middleware: the paths in ``prices`` speak x402 v2; the merchant's DID and the registry's network are
    read from the registry on the first paid request."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        merchant: Merchant,
        prices: Union[Mapping[str, int], int],
        description: str = "a paid call",
    ) -> None:
        self.app = app
        self.routes = PaidRoutes(app, merchant=merchant, prices=prices)
        self.merchant = merchant
        self.description = description
        self._terms: Optional[dict[str, str]] = None

    async def terms(self) -> dict[str, str]:
        if self._terms is None:
            me = await self.merchant.client.me()
            card = await self.merchant.client.well_known()
            member = me.get("member") or {}
            x402 = card.get("x402") or {}
            self._terms = {
                "pay_to": str(member.get("id", "")),
                "network": str(x402.get("network", "")),
                "registry": str(card.get("did", "")),
            }
        return self._terms

    def _requirements(self, terms: dict[str, str], price: int, resource: str, order_id: str) -> dict[str, Any]:
        return {
            "scheme": "apt",
            "network": terms["network"],
            "amount": str(price),
            "asset": "BNU",
            "payTo": terms["pay_to"],
            "maxTimeoutSeconds": contract.TOKEN_TTL_S_MAX,
            "extra": {"registry": terms["registry"], "resource": resource, "orderId": order_id},
        }

    async def _required(self, price: int, resource: str, error: str) -> Answered:
        terms = await self.terms()
        offer = {
            "x402Version": 2,
            "error": error,
            "resource": {"url": resource, "description": self.description, "mimeType": "application/json"},
            "accepts": [self._requirements(terms, price, resource, f"x402-{secrets.token_hex(16)}")],
        }
        headers = [(b"content-type", b"application/json"), (contract.X402_PAYMENT_REQUIRED.encode(), _b64_json(offer))]
        return 402, headers, b"{}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        price = self.routes.price_of(scope.get("path", "")) if scope["type"] == "http" else None
        if price is None:
            await self.app(scope, receive, send)
            return
        status, headers, body = await self.handle(scope, receive, price)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def handle(self, scope: Scope, receive: Receive, price: int) -> Answered:
        host = header(scope, "host") or "localhost"
        resource = f"http://{host}{scope.get('path', '')}"
        signature = header(scope, contract.X402_PAYMENT_SIGNATURE)
        if signature is None:
            return await self._required(price, resource, "Payment required")
        try:
            payload = json.loads(base64.b64decode(signature.strip(), validate=True))
        except (ValueError, json.JSONDecodeError):
            return await self._required(price, resource, "invalid_payload")
        if not isinstance(payload, dict):
            return await self._required(price, resource, "invalid_payload")
        terms = await self.terms()
        offered = self._requirements(terms, price, resource, "")
        accepted = payload.get("accepted") or {}
        same = isinstance(accepted, dict) and all(accepted.get(k) == offered[k] for k in ("scheme", "network", "amount", "asset", "payTo"))
        if payload.get("x402Version") != 2 or not same:
            return await self._required(price, resource, "invalid_payment_requirements")
        token = (payload.get("payload") or {}).get("token")
        if not isinstance(token, str):
            return await self._required(price, resource, "invalid_payload")
        claims = claims_unverified(token) or {}
        if claims.get("res") != resource:
            # A token minted for another resource is refused before anything settles.
            return await self._required(price, resource, "wrong_resource")
        status, headers, body = await self.routes.handle(scope, receive, token, price)
        if 200 <= status < 300:
            settlement = next((v.decode() for k, v in headers if k == contract.SETTLEMENT_HEADER.encode()), "")
            settled = {"success": True, "transaction": settlement, "network": terms["network"], "payer": claims.get("sub"), "amount": str(price)}
            headers = headers + [
                (contract.X402_PAYMENT_RESPONSE.encode(), _b64_json(settled)),
                (b"access-control-expose-headers", b"PAYMENT-RESPONSE"),
            ]
            return status, headers, body
        if status >= 500:
            return status, headers, body
        try:
            code = json.loads(body).get("code", "payment_refused")
        except (ValueError, AttributeError):
            code = "payment_refused"
        return await self._required(price, resource, str(code))
