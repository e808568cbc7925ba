"""The Python SDK's conformance driver (clients/conformance/scenario.json).

    python driver.py WORLD.json SCENARIO.json

Serves the SDK's merchant middleware (Starlette under uvicorn, on 127.0.0.1) for the world's price at /work,
runs each step of the scenario with the SDK, and prints one JSON line: {"steps": [{"name", "observed"}]}.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import uvicorn
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


class Runs:
    """How often the paid work ran, across the driver's shops."""

    count = 0


class Shop:
    """The merchant: a Starlette app behind PaidRoutes, counting its paid work; faults fire once per order."""

    def __init__(self, world: dict[str, Any], receipts: Path, who: str = "merchant") -> None:
        self.faults: dict[str, str] = {}
        self.fired: set[str] = set()
        self.client = bazaar.Client(world["registry"], world[who])

        async def work(request: Request) -> JSONResponse:
            Runs.count += 1
            settled: bazaar.Settled = request.state.bazaar
            return JSONResponse({"order": settled.order_id, "run": Runs.count, "settlement": settled.settlement_id})

        def fault(point: str, order: str) -> bool:
            if self.faults.get(order) == point and order not in self.fired:
                self.fired.add(order)
                return True
            return False

        app = Starlette(routes=[Route("/work", work, methods=["POST"])])
        merchant = bazaar.Merchant(self.client, bazaar.SqliteReceiptStore(receipts), fault=fault)
        self.app = bazaar.PaidRoutes(app, merchant=merchant, prices={"/work": int(world["price_minor"])})
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/work"
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning"))

    async def start(self) -> None:
        self.task = asyncio.create_task(self.server.serve())
        while not self.server.started:
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        self.server.should_exit = True
        await self.task


def refusal(error: bazaar.ProblemError) -> dict[str, Any]:
    return {"status": error.status, "code": error.code, "error_class": type(error).__name__, "price_minor": error.price_minor}


async def purse(buyer: bazaar.Client) -> tuple[Any, int]:
    """What the buyer's registry holds on its budget, and its balance."""
    me = await buyer.me()
    return me.get("held_minor"), int(me.get("balance_minor") or 0)


def merchant_start(world: dict[str, Any], credentials: list[Any]) -> dict[str, Any]:
    """Which credentials a merchant refuses to be made with, and the code it says."""
    refused: list[bool] = []
    code = None
    for given in credentials:
        credential = world["merchant"] if given == "@merchant" else given
        try:
            bazaar.Merchant(bazaar.Client(world["registry"], credential), bazaar.MemoryReceiptStore())
            refused.append(False)
        except bazaar.MerchantMisconfigured as error:
            refused.append(True)
            code = code or error.code
    return {"refused": refused, "code": code}


async def enrol(world: dict[str, Any]) -> dict[str, Any]:
    """A key made here, saved and read back; the world's invite redeemed with it and rotated; the fixed key."""
    key = bazaar.generate_key()
    key_file = Path(tempfile.mkdtemp()) / "joiner.key"
    key.save(key_file)
    async with bazaar.Client(world["registry"]) as anyone:
        joined = await anyone.redeem_invite(world["invite"], key, world["joiner_handle"])
        me = await anyone.with_credential(str(joined["credential"])).me()
    vector = world["key_vector"]
    fixed = bazaar.Key.from_seed(bytes.fromhex(vector["seed_hex"]))
    proof = bazaar.invite_proof(fixed, vector["invite_code"], vector["handle"])
    member = me.get("member") or {}
    return {
        "enrolled_as_key": member.get("id") == key.did,
        "kind": member.get("kind"),
        "owner_is_inviter": member.get("owner") == world["invite_owner"],
        "credential_rotated": str(joined["credential"]).startswith("bzc_"),
        "key_file_mode": format(key_file.stat().st_mode & 0o777, "o"),
        "key_file_round_trips": bazaar.Key.load(key_file).did == key.did,
        "same_key_proof_and_did_as_rust": (fixed.did, fixed.public_key_hex, proof)
        == (vector["did"], vector["public_key_hex"], vector["proof"]),
    }


async def run(world: dict[str, Any], scenario: dict[str, Any]) -> list[dict[str, Any]]:
    registry = world["registry"]
    buyer = bazaar.Client(registry, world["buyer"])
    clients = {
        "buyer": buyer,
        "poor_buyer": buyer.with_credential(world["poor_buyer"]),
        "merchant": buyer.with_credential(world["merchant"]),
        "other_merchant": buyer.with_credential(world["other_merchant"]),
        "nobody": buyer.with_credential("not-a-credential"),
    }
    shop = Shop(world, Path(tempfile.mkdtemp()) / "receipts.db")
    await shop.start()
    revocable = Shop(world, Path(tempfile.mkdtemp()) / "receipts.db", "revocable")
    await revocable.start()
    merchant_did = world["merchant_did"]
    price = int(world["price_minor"])
    last_token = ""
    contracts: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for step in scenario["steps"]:
        op, args = step["op"], step.get("args", {})
        observed: dict[str, Any] = {}
        try:
            if op == "constants":
                observed = {
                    "headers": {
                        "payment": contract.PAYMENT_HEADER,
                        "settlement": contract.SETTLEMENT_HEADER,
                        "work_receipt": contract.WORK_RECEIPT_HEADER,
                        "idempotency_key": contract.IDEMPOTENCY_KEY_HEADER,
                        "idempotent_replayed": contract.IDEMPOTENT_REPLAYED_HEADER,
                        "x402_payment_required": contract.X402_PAYMENT_REQUIRED,
                        "x402_payment_signature": contract.X402_PAYMENT_SIGNATURE,
                        "x402_payment_response": contract.X402_PAYMENT_RESPONSE,
                    },
                    "retry_attempts_max": contract.RETRY_ATTEMPTS_MAX,
                    "retry_base_ms": contract.RETRY_BASE_MS,
                    "token_renew_margin_ms": contract.TOKEN_RENEW_MARGIN_MS,
                    "work_receipt_bytes_max": contract.WORK_RECEIPT_BYTES_MAX,
                    "work_receipt_retention_s": contract.WORK_RECEIPT_RETENTION_S,
                    "work_receipt_prune_every": contract.WORK_RECEIPT_PRUNE_EVERY,
                    "escrow_due_s": contract.ESCROW_DUE_S,
                    "merchant_unauthenticated": [contract.MERCHANT_UNAUTHENTICATED_STATUS, contract.MERCHANT_UNAUTHENTICATED],
                    "merchant_credential_invalid": contract.MERCHANT_CREDENTIAL_INVALID,
                    "void_on_codes": list(contract.VOID_ON_CODES),
                    "coalesce_items_max": contract.COALESCE_ITEMS_MAX,
                    "coalesce_in_flight_max": contract.COALESCE_IN_FLIGHT_MAX,
                }
            elif op == "pay":
                if "fault" in args:
                    shop.faults[args["order"]] = args["fault"]
                to = shop if args.get("shop") != "revocable" else revocable
                merchant = world[args.get("to", "merchant_did" if to is shop else "revocable_did")]
                to.app.prices = {"/work": int(args.get("price", price))}
                held_before, balance_before = await purse(buyer)
                try:
                    paid = await buyer.pay(to.url, merchant, int(args.get("amount", price)), args["order"])
                    observed = {"status": paid.status, "replayed": paid.replayed, "settled": paid.settlement is not None,
                                "retried": paid.attempts > 1, "raised": False, "same_token": paid.token == last_token}
                    last_token = paid.token
                except bazaar.ProblemError as error:
                    observed = {**refusal(error), "raised": True}
                finally:
                    to.app.prices = {"/work": price}
                held_after, balance_after = await purse(buyer)
                observed["held_released"] = held_after == held_before
                observed["charged_minor"] = balance_before - balance_after
            elif op == "merchant_start":
                observed = merchant_start(world, args["credentials"])
            elif op == "enrol":
                observed = await enrol(world)
            elif op == "revoke_merchant":
                await clients["merchant"].with_credential(world["revocable"]).revoke_credential()
                observed = {"status": 200}
            elif op == "verify_last":
                verified = await buyer.verify(last_token)
                observed = {k: verified.get(k) for k in ("genuine", "state", "work_order")}
            elif op == "settle_last":
                claims = bazaar.claims_unverified(last_token) or {}
                await clients["merchant"].settle(last_token, price, str(claims.get("ord")), args["key"])
                observed = {"status": 200}
            elif op == "replay_last":
                observed = await raw(shop, last_token)
            elif op == "merchant_raw":
                observed = await raw(shop, args["payment"])
            elif op == "merchant_tampered":
                issued = await buyer.issue_token(merchant_did, price, args["order"], shop.url)
                token = str(issued.body["token"])
                body, signature = token.rsplit(".", 1)
                flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
                observed = await raw(shop, f"{body}.{flipped}")
            elif op == "purchase":
                bought = await buyer.purchase(shop.url, merchant_did, int(world["escrow_price_minor"]), args["order"])
                assert isinstance(bought, bazaar.Escrowed), "expected an escrowed purchase"
                cid = str(bought.contract.get("id"))
                observed = {"escrowed": True, "state": bought.contract.get("state"),
                            "same_contract": contracts.get(args["order"]) == cid}
                contracts.setdefault(args["order"], cid)
            elif op == "token":
                who = clients[args.get("as", "buyer")]
                amount = int(world["escrow_price_minor"]) if args["amount"] == "escrow" else int(args["amount"])
                await who.issue_token(merchant_did, amount, args["order"], shop.url)
                observed = {"status": 200}
            elif op == "token_then_settle":
                issued = await buyer.issue_token(merchant_did, int(args["amount"]), args["order"], shop.url)
                if args.get("void_first"):
                    await buyer.void(str(issued.body["jti"]))
                settler = clients[args.get("by", "merchant")]
                await settler.settle(str(issued.body["token"]), int(args["settle"]), args.get("settle_order", args["order"]))
                observed = {"status": 200}
            elif op == "me":
                await clients[args["as"]].me()
                observed = {"status": 200}
            elif op == "token_twice_with_key":
                await buyer.issue_token(merchant_did, price, "k-1", shop.url, idempotency_key=args["key"])
                await buyer.issue_token(merchant_did, price, "k-2", shop.url, idempotency_key=args["key"])
                observed = {"status": 200}
            elif op == "expired_settle":
                issued = await buyer.issue_token(merchant_did, price, args["order"], shop.url, ttl_s=int(args["ttl_s"]))
                await asyncio.sleep(int(args["ttl_s"]) + 1.5)
                await clients["merchant"].settle(str(issued.body["token"]), price, args["order"])
                observed = {"status": 200}
            elif op == "balance":
                observed = {"balance_minor": await buyer.balance()}
            elif op == "failover":
                spread = bazaar.Client([world["dead_node"], registry], world["buyer"], http=buyer.http)
                await spread.me()
                paid = await spread.pay(shop.url, merchant_did, price, args["order"])
                observed = {
                    "read": 200,
                    "status": paid.status,
                    "settled": paid.settlement is not None,
                    "moved_on": spread.base_url == registry.rstrip("/"),
                }
            elif op == "batch":
                observed = await batch(buyer, clients["merchant"], world, shop, args)
            else:
                observed = {"unsupported_op": op}
        except bazaar.ProblemError as error:
            observed = refusal(error)
        observed["work_runs"] = Runs.count
        out.append({"name": step["name"], "observed": observed})
    await revocable.stop()
    await shop.stop()
    await buyer.aclose()
    return out


MONEY_ROUTES = ("/v1/tokens", "/v1/tokens/batch", "/v1/settlements", "/v1/settlements/batch")


async def requests_served(client: bazaar.Client) -> dict[str, int]:
    """Requests the registry has answered on each money route, from its /metrics."""
    text = (await client.http.get(f"{client.base_url}/metrics")).text
    counts = dict.fromkeys(MONEY_ROUTES, 0)
    for line in text.splitlines():
        match = re.match(r'bazaar_http_requests_total\{route="([^"]+)",status="\d+"\} (\S+)', line)
        if match and match.group(1) in counts:
            counts[match.group(1)] += int(float(match.group(2)))
    return counts


async def batch(buyer: bazaar.Client, merchant: bazaar.Client, world: dict[str, Any], shop: Shop, args: dict[str, Any]) -> dict[str, Any]:
    """The scenario's ``batch`` op: tokens, settlements and replays all at once from coalescing clients."""
    price, merchant_did = int(world["price_minor"]), world["merchant_did"]
    orders = [f"{args['prefix']}{i}" for i in range(1, int(args["orders"]) + 1)]
    over = f"{args['prefix']}over"
    before = await requests_served(buyer)
    held_before, balance_before = await purse(buyer)
    buying, selling = buyer.coalescing(), merchant.coalescing()
    issued = await asyncio.gather(
        *(buying.issue_token(merchant_did, price, order, shop.url) for order in orders + [over]), return_exceptions=True
    )
    ok = [answer for answer in issued if isinstance(answer, bazaar.Answer)]
    tokens = {order: str(answer.body["token"]) for order, answer in zip(orders + [over], issued) if isinstance(answer, bazaar.Answer)}
    settles = [selling.settle(tokens[order], price, order) for order in orders]
    settles.append(selling.settle(tokens[over], price + 1, over))
    settled = await asyncio.gather(*settles, return_exceptions=True)
    again = await asyncio.gather(*(selling.settle(tokens[order], price, order) for order in orders[:2]), return_exceptions=True)
    refused = settled[-1]
    await buyer.void(str(issued[-1].body["jti"]) if isinstance(issued[-1], bazaar.Answer) else "")
    held_after, balance_after = await purse(buyer)
    after = await requests_served(buyer)
    calls = len(issued) + len(settled) + len(again)
    batches = sum(after[route] - before[route] for route in MONEY_ROUTES if route.endswith("/batch"))
    return {
        "issued": len(ok),
        "distinct_tokens": len({answer.body["jti"] for answer in ok}),
        "settled": sum(isinstance(answer, bazaar.Answer) for answer in settled[:-1]),
        "refused_code": refused.code if isinstance(refused, bazaar.ProblemError) else None,
        "again_replayed": all(
            isinstance(second, bazaar.Answer) and isinstance(first, bazaar.Answer) and second.replayed
            and second.body["settlement_id"] == first.body["settlement_id"]
            for first, second in zip(settled, again)
        ),
        "charged_minor": balance_before - balance_after,
        "held_released": held_after == held_before,
        "single_calls": sum(after[route] - before[route] for route in ("/v1/tokens", "/v1/settlements")),
        "batched": 0 < batches < calls,
    }


async def raw(shop: Shop, payment: Any) -> dict[str, Any]:
    """One request to the merchant with ``payment`` as it is (or none): its status, code and receipt header."""
    headers = {contract.PAYMENT_HEADER: payment} if isinstance(payment, str) else {}
    response = await shop.client.http.post(shop.url, headers=headers)
    observed: dict[str, Any] = {"status": response.status_code,
                                "replayed": response.headers.get(contract.WORK_RECEIPT_HEADER) is not None}
    if response.status_code >= 400:
        observed["code"] = response.json().get("code")
    return observed


def main() -> None:
    world = json.loads(Path(sys.argv[1]).read_text())
    scenario = json.loads(Path(sys.argv[2]).read_text())
    steps = asyncio.run(run(world, scenario))
    print(json.dumps({"sdk": "python", "steps": steps}))


if __name__ == "__main__":
    main()
