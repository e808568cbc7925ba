"""The hundred-paid-calls story with the Python SDK, with real crashes.

    python hundred.py WORLD.json              the buyer: supervises the merchant process and pays 100 orders
    python hundred.py merchant WORLD.json PORT the merchant process (started by the buyer)

The merchant is a separate process (Starlette behind ``bazaar.PaidRoutes``, SQLite receipts) that counts each
run of its paid work in an SQLite file. It kills itself (``os._exit``) right after settling orders 42 and 77,
before the work and before answering — once each; the buyer's supervisor starts it again on the same port.
The buyer pays orders 1..100; for order 17 a buyer process is killed mid-request (the merchant holds that
order's first answer for a moment) and the order is re-sent five times. Prints one JSON line with what it saw.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import bazaar

ORDERS = 100
CRASHED_BUYER_ORDER = 17
RESENDS = 5
KILLED_MERCHANT_ORDERS = (42, 77)
ORDER_DEADLINE_S = 60.0


def order_id(n: int) -> str:
    return f"py-hundred-{n:03}"


def merchant(world: dict[str, Any], port: int) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    work_dir = Path(world["work_dir"])
    runs = sqlite3.connect(str(work_dir / "py-work.db"), isolation_level=None, check_same_thread=False)
    runs.execute("PRAGMA synchronous = FULL")
    runs.execute("CREATE TABLE IF NOT EXISTS runs (n INTEGER PRIMARY KEY, order_id TEXT NOT NULL)")
    held = work_dir / f"py-held-{order_id(CRASHED_BUYER_ORDER)}"

    async def work(request: Request) -> JSONResponse:
        settled: bazaar.Settled = request.state.bazaar
        if settled.order_id == order_id(CRASHED_BUYER_ORDER) and not held.exists():
            held.touch()
            await asyncio.sleep(1.0)  # long enough for the buyer to be killed mid-request
        runs.execute("INSERT INTO runs (order_id) VALUES (?)", (settled.order_id,))
        return JSONResponse({"order": settled.order_id})

    def fault(point: str, order: str) -> bool:
        if point == bazaar.AFTER_SETTLE and order in {order_id(n) for n in KILLED_MERCHANT_ORDERS}:
            marker = work_dir / f"py-killed-{order}"
            if not marker.exists():
                marker.touch()
                os._exit(137)  # settled; the work has not run and nothing is answered
        return False

    client = bazaar.Client(world["registry"], world["merchant"])
    receipts = bazaar.SqliteReceiptStore(work_dir / "py-receipts.db")
    app = bazaar.PaidRoutes(
        Starlette(routes=[Route("/work", work, methods=["POST"])]),
        merchant=bazaar.Merchant(client, receipts, fault=fault),
        prices={"/work": int(world["price_minor"])},
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


class Supervisor:
    """Keeps the merchant process running on one port, starting it again whenever it dies."""

    def __init__(self, world_file: str, port: int) -> None:
        self.world_file, self.port, self.starts = world_file, port, 0
        self.process: subprocess.Popen[bytes] | None = None

    def ensure(self) -> None:
        if self.process is None or self.process.poll() is not None:
            self.starts += 1
            self.process = subprocess.Popen([sys.executable, __file__, "merchant", self.world_file, str(self.port)])
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                    return
                except OSError:
                    time.sleep(0.05)
            raise RuntimeError("the merchant did not start")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(10)


async def pay_until_answered(buyer: bazaar.Client, supervisor: Supervisor, url: str, world: dict[str, Any], order: str) -> bazaar.PaidResponse:
    """Pays ``order`` until the merchant answers 200, starting the merchant again when it died."""
    deadline = time.monotonic() + ORDER_DEADLINE_S
    while True:
        supervisor.ensure()
        try:
            paid = await buyer.pay(url, world["merchant_did"], int(world["price_minor"]), order)
            if paid.status == 200:
                return paid
        except (bazaar.TransportError, bazaar.UnavailableError):
            pass  # the merchant is down (killed mid-request): start it again and re-send
        if time.monotonic() > deadline:
            raise RuntimeError(f"order {order} never answered")
        await asyncio.sleep(0.1)


async def buyer(world_file: str) -> dict[str, Any]:
    world = json.loads(Path(world_file).read_text())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    supervisor = Supervisor(world_file, port)
    url = f"http://127.0.0.1:{port}/work"
    replayed = 0
    sends = 0
    async with bazaar.Client(world["registry"], world["buyer"]) as client:
        try:
            for n in range(1, ORDERS + 1):
                order = order_id(n)
                if n == CRASHED_BUYER_ORDER:
                    # A buyer process that dies mid-request: it asked for the token and sent it; the answer never came.
                    supervisor.ensure()
                    code = (
                        "import asyncio, bazaar, sys; c = bazaar.Client(sys.argv[1], sys.argv[2]);"
                        "asyncio.run(c.pay(sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]))"
                    )
                    crashing = subprocess.Popen([sys.executable, "-c", code, world["registry"], world["buyer"], url,
                                                 world["merchant_did"], str(world["price_minor"]), order])
                    time.sleep(0.6)
                    crashing.kill()
                    crashing.wait()
                    sends += 1
                    for _ in range(RESENDS):
                        paid = await pay_until_answered(client, supervisor, url, world, order)
                        sends += 1
                        replayed += int(paid.replayed)
                    continue
                paid = await pay_until_answered(client, supervisor, url, world, order)
                replayed += int(paid.replayed)
        finally:
            supervisor.stop()
        balance = await client.balance()
    runs = sqlite3.connect(str(Path(world["work_dir"]) / "py-work.db"))
    work_runs = runs.execute("SELECT COUNT(*), COUNT(DISTINCT order_id) FROM runs").fetchone()
    return {
        "sdk": "python",
        "orders": ORDERS,
        "work_runs": work_runs[0],
        "distinct_work_orders": work_runs[1],
        "merchant_starts": supervisor.starts,
        "sends_of_crashed_order": sends,
        "replayed_answers": replayed,
        "balance_minor": balance,
    }


def main() -> None:
    if sys.argv[1] == "merchant":
        merchant(json.loads(Path(sys.argv[2]).read_text()), int(sys.argv[3]))
        return
    print(json.dumps(asyncio.run(buyer(sys.argv[1]))))


if __name__ == "__main__":
    main()
