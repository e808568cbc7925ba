"""A paid function as an MCP tool (the ``mcp`` package's ``FastMCP``, ``pip install bazaar-sdk[mcp]``).

The tool takes the caller's payment token as its ``payment_token`` argument besides the function's own, and
runs through the same :class:`~bazaar.asgi.Merchant` as a paid HTTP route: verify (a receipt check) → settle once
→ the function runs once per settlement → its result is kept as the work receipt, so a retried call with the same
token (or another token for the same order) gets the stored result.
"""

from __future__ import annotations

import functools
import inspect
import json
from typing import Any, Awaitable, Callable, TypeVar, Union

from .asgi import Answered, Merchant, Settled
from .receipts import WorkReceipt

R = TypeVar("R")


class PaymentRefused(Exception):
    """The payment was refused; the message carries the stable code (the MCP client sees it as a tool error)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code


def paid_tool(
    merchant: Merchant, price_minor: int
) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[Any]]]:
    """Decorates an async function ``fn(settled: Settled, **args)`` into ``tool(payment_token: str, **args)``,
    ready for ``FastMCP.tool()``: the result must be JSON-serialisable."""

    def decorate(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(fn)
        async def tool(payment_token: str, **arguments: Any) -> Any:
            async def work(settled: Settled) -> Union[WorkReceipt, Answered]:
                result = await fn(settled, **arguments)
                return WorkReceipt(200, "application/json", json.dumps(result).encode())

            status, _, body = await merchant.paid(payment_token, price_minor, work)
            answer = json.loads(body) if body else None
            if status >= 300:
                code = answer.get("code", "payment_refused") if isinstance(answer, dict) else "payment_refused"
                detail = answer.get("detail", "") if isinstance(answer, dict) else ""
                raise PaymentRefused(str(code), str(detail))
            return answer

        # The tool's signature: the payment token, then the function's own parameters after `settled`.
        own = list(inspect.signature(fn).parameters.values())[1:]
        token = inspect.Parameter("payment_token", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str)
        setattr(tool, "__signature__", inspect.Signature([token, *own]))
        tool.__annotations__ = {"payment_token": str, **{p.name: p.annotation for p in own}}
        return tool

    return decorate
