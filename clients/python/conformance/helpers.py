"""The Python SDK's x402 route helper and MCP tool helper against a real registry.

    python helpers.py WORLD.json

x402: a Starlette route behind ``bazaar.X402Routes`` (uvicorn, 127.0.0.1): no payment → 402 with a
``PAYMENT-REQUIRED`` offer; a ``PAYMENT-SIGNATURE`` with the buyer's token → 200 with ``PAYMENT-RESPONSE``; the same
signature again → the stored answer, the work run once; a token minted for another resource → 402 before anything
settles. MCP: a FastMCP server whose ``translate`` tool is ``bazaar.paid_tool`` over the streamable HTTP transport,
called by the ``mcp`` package's own client twice with one token (worked once) and once with a forged token (a tool
error naming the refusal). Prints one JSON line with what it saw.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import tempfile
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.server.fastmcp import FastMCP
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import bazaar
from bazaar import contract


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def serve(app: Any, port: int) -> uvicorn.Server:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    return server


def decode(header: str | None) -> Any:
    return json.loads(base64.b64decode(header)) if header else None


async def x402(world: dict[str, Any], buyer: bazaar.Client, merchant: bazaar.Merchant) -> dict[str, Any]:
    runs = 0

    async def forecast(request: Request) -> JSONResponse:
        nonlocal runs
        runs += 1
        return JSONResponse({"forecast": "rain", "run": runs})

    port = free_port()
    app = bazaar.X402Routes(Starlette(routes=[Route("/forecast", forecast)]), merchant=merchant,
                            prices={"/forecast": int(world["price_minor"])}, description="a paid forecast")
    server = await serve(app, port)
    url = f"http://127.0.0.1:{port}/forecast"
    async with httpx.AsyncClient() as http:
        first = await http.get(url)
        offer = decode(first.headers.get(contract.X402_PAYMENT_REQUIRED))
        accepted = offer["accepts"][0]
        order = accepted["extra"]["orderId"]
        issued = await buyer.issue_token(accepted["payTo"], int(accepted["amount"]), order, accepted["extra"]["resource"])
        signature = base64.b64encode(json.dumps({"x402Version": 2, "accepted": accepted,
                                                 "payload": {"token": issued.body["token"]}}).encode()).decode()
        paid = await http.get(url, headers={contract.X402_PAYMENT_SIGNATURE: signature})
        again = await http.get(url, headers={contract.X402_PAYMENT_SIGNATURE: signature})
        elsewhere = await buyer.issue_token(accepted["payTo"], int(accepted["amount"]), order + "-b", "http://elsewhere/forecast")
        wrong = base64.b64encode(json.dumps({"x402Version": 2, "accepted": accepted,
                                             "payload": {"token": elsewhere.body["token"]}}).encode()).decode()
        refused = await http.get(url, headers={contract.X402_PAYMENT_SIGNATURE: wrong})
    server.should_exit = True
    return {
        "unpaid_status": first.status_code,
        "offer_scheme": accepted["scheme"],
        "offer_network_is_bazaar": str(accepted["network"]).startswith("bzr:"),
        "paid_status": paid.status_code,
        "payment_response": decode(paid.headers.get(contract.X402_PAYMENT_RESPONSE)),
        "again_status": again.status_code,
        "again_replayed": again.headers.get(contract.WORK_RECEIPT_HEADER) is not None,
        "wrong_resource_status": refused.status_code,
        "wrong_resource_error": (decode(refused.headers.get(contract.X402_PAYMENT_REQUIRED)) or {}).get("error"),
        "work_runs": runs,
    }


async def mcp_tool(world: dict[str, Any], buyer: bazaar.Client, merchant: bazaar.Merchant) -> dict[str, Any]:
    runs = 0
    server = FastMCP("atelier", stateless_http=True, json_response=True)

    @server.tool()
    @bazaar.paid_tool(merchant, int(world["price_minor"]))
    async def translate(settled: bazaar.Settled, text: str) -> dict[str, Any]:
        """Translates a menu line, paid per call."""
        nonlocal runs
        runs += 1
        return {"text": text.upper(), "order": settled.order_id, "run": runs}

    port = free_port()
    http_server = await serve(server.streamable_http_app(), port)
    issued = await buyer.issue_token(world["merchant_did"], int(world["price_minor"]), "mcp-1", "mcp:translate")
    token = str(issued.body["token"])
    body, signature = token.rsplit(".", 1)
    forged = f"{body}.{'A' if signature[0] != 'A' else 'B'}{signature[1:]}"
    async with streamablehttp_client(f"http://127.0.0.1:{port}/mcp") as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            schema = next(t.inputSchema for t in tools.tools if t.name == "translate")
            first = await session.call_tool("translate", {"payment_token": token, "text": "soupe"})
            again = await session.call_tool("translate", {"payment_token": token, "text": "soupe"})
            bad = await session.call_tool("translate", {"payment_token": forged, "text": "soupe"})
    http_server.should_exit = True

    def text(result: Any) -> str:
        return "".join(getattr(c, "text", "") for c in result.content)

    return {
        "parameters": sorted(schema.get("properties", {}).keys()),
        "first": json.loads(text(first)),
        "again": json.loads(text(again)),
        "bad_is_error": bool(bad.isError),
        "bad_text": text(bad),
        "work_runs": runs,
    }


async def main(world: dict[str, Any]) -> dict[str, Any]:
    receipts = bazaar.SqliteReceiptStore(Path(tempfile.mkdtemp()) / "receipts.db")
    async with bazaar.Client(world["registry"], world["buyer"]) as buyer:
        merchant = bazaar.Merchant(buyer.with_credential(world["merchant"]), receipts)
        return {"sdk": "python", "x402": await x402(world, buyer, merchant), "mcp": await mcp_tool(world, buyer, merchant)}


if __name__ == "__main__":
    import sys

    print(json.dumps(asyncio.run(main(json.loads(Path(sys.argv[1]).read_text())))))
