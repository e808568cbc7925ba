"""Work receipts: the merchant's record of each paid response, keyed by its settlement.

A retried or replayed order whose settlement has a receipt is answered from it and the paid work does not run
again — also after the merchant process restarted, since the default store is an SQLite file written with
``synchronous = FULL``. Any object with ``get`` and ``put`` (:class:`ReceiptStore`) can replace it.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Protocol, Union


@dataclass(frozen=True)
class WorkReceipt:
    status: int
    content_type: Optional[str]
    body: bytes


class ReceiptStore(Protocol):
    """Where receipts live. ``put`` keeps the first receipt of a settlement and ignores later ones."""

    def get(self, settlement_id: str) -> Optional[WorkReceipt]: ...

    def put(self, settlement_id: str, order_id: str, receipt: WorkReceipt) -> None: ...


class MemoryReceiptStore:
    """Receipts in this process only: a restart forgets them (tests, or work that is harmless to repeat)."""

    def __init__(self) -> None:
        self._receipts: dict[str, WorkReceipt] = {}
        self._lock = threading.Lock()

    def get(self, settlement_id: str) -> Optional[WorkReceipt]:
        with self._lock:
            return self._receipts.get(settlement_id)

    def put(self, settlement_id: str, order_id: str, receipt: WorkReceipt) -> None:
        with self._lock:
            self._receipts.setdefault(settlement_id, receipt)


class SqliteReceiptStore:
    """Receipts in an SQLite file (WAL, ``synchronous = FULL``): they survive a crash once ``put`` returns."""

    def __init__(self, path: Union[str, Path]) -> None:
        self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = FULL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS work_receipts (settlement_id TEXT PRIMARY KEY, order_id TEXT NOT NULL,"
                " status INTEGER NOT NULL, content_type TEXT, body BLOB NOT NULL, created_at INTEGER NOT NULL)"
            )

    def get(self, settlement_id: str) -> Optional[WorkReceipt]:
        with self._lock:
            row = self._conn.execute(
                "SELECT status, content_type, body FROM work_receipts WHERE settlement_id = ?", (settlement_id,)
            ).fetchone()
        if row is None:
            return None
        return WorkReceipt(int(row[0]), row[1], bytes(row[2]))

    def put(self, settlement_id: str, order_id: str, receipt: WorkReceipt) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR IGNORE INTO work_receipts VALUES (?, ?, ?, ?, ?, ?)",
                (settlement_id, order_id, receipt.status, receipt.content_type, receipt.body, int(time.time())),
            )

    def close(self) -> None:
        with self._lock:
            self._conn.close()
