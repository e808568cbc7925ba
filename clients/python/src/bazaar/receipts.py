"""Work receipts: the merchant's record of each paid response, keyed by its settlement.

A retried or replayed order whose settlement has a receipt is answered from it and the paid work does not run
again — also after the merchant process restarted, since the default store is an SQLite file written with
``synchronous = FULL``. Any object with ``get`` and ``put`` (:class:`ReceiptStore`) can replace it.

Both stores here prune on the same policy as the Rust and TypeScript SDKs: a receipt is kept
:data:`~bazaar.contract.WORK_RECEIPT_RETENTION_S` (30 days) and then deleted — when the store opens and every
:data:`~bazaar.contract.WORK_RECEIPT_PRUNE_EVERY` (1,024) receipts stored. A retry of an order after that runs
the work again; the settlement itself never repeats. A store of your own keeps its own retention.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Protocol, Union

from . import contract


@dataclass(frozen=True)
class WorkReceipt:
    status: int
    content_type: Optional[str]
    body: bytes


class ReceiptStore(Protocol):
    """Where receipts live. ``put`` keeps the first receipt of a settlement and ignores later ones."""

    def get(self, settlement_id: str) -> Optional[WorkReceipt]: ...

    def put(self, settlement_id: str, order_id: str, receipt: WorkReceipt) -> None: ...


class _PruneSchedule:
    """When a store prunes: every ``every`` puts (at least 1), by ``clock`` in whole seconds since the epoch."""

    def __init__(self, every: int, clock: Callable[[], float]) -> None:
        if every < 1:
            raise ValueError("prune_every must be at least 1")
        self._every = every
        self._clock = clock
        self._puts = 0

    def now_s(self) -> int:
        return int(self._clock())

    def counted_put_is_due(self) -> bool:
        """Counts one put; true on every ``every``-th."""
        self._puts += 1
        return self._puts % self._every == 0


class MemoryReceiptStore:
    """Receipts in this process only: a restart forgets them (tests, or work that is harmless to repeat).

    Pruned like the SQLite store: every ``prune_every`` puts, receipts older than the retention are dropped.
    ``clock`` (seconds since the epoch) is for tests.
    """

    def __init__(
        self,
        *,
        prune_every: int = contract.WORK_RECEIPT_PRUNE_EVERY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._receipts: dict[str, tuple[WorkReceipt, int]] = {}
        self._lock = threading.Lock()
        self._schedule = _PruneSchedule(prune_every, clock)

    def get(self, settlement_id: str) -> Optional[WorkReceipt]:
        with self._lock:
            kept = self._receipts.get(settlement_id)
        return kept[0] if kept is not None else None

    def put(self, settlement_id: str, order_id: str, receipt: WorkReceipt) -> None:
        with self._lock:
            self._receipts.setdefault(settlement_id, (receipt, self._schedule.now_s()))
            if self._schedule.counted_put_is_due():
                self._prune(contract.WORK_RECEIPT_RETENTION_S)

    def prune(self, older_than_s: int = contract.WORK_RECEIPT_RETENTION_S) -> int:
        """Deletes the receipts stored more than ``older_than_s`` seconds ago; returns how many."""
        with self._lock:
            return self._prune(older_than_s)

    def _prune(self, older_than_s: int) -> int:
        cutoff = self._schedule.now_s() - older_than_s
        old = [sid for sid, (_, created_at) in self._receipts.items() if created_at < cutoff]
        for sid in old:
            del self._receipts[sid]
        return len(old)


class SqliteReceiptStore:
    """Receipts in an SQLite file (WAL, ``synchronous = FULL``): they survive a crash once ``put`` returns.

    Receipts older than the retention are deleted when the store opens and every ``prune_every`` puts (the
    ``created_at`` column is indexed). ``clock`` (seconds since the epoch) is for tests.
    """

    def __init__(
        self,
        path: Union[str, Path],
        *,
        prune_every: int = contract.WORK_RECEIPT_PRUNE_EVERY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._schedule = _PruneSchedule(prune_every, clock)
        with self._lock:
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = FULL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS work_receipts (settlement_id TEXT PRIMARY KEY, order_id TEXT NOT NULL,"
                " status INTEGER NOT NULL, content_type TEXT, body BLOB NOT NULL, created_at INTEGER NOT NULL)"
            )
            self._conn.execute("CREATE INDEX IF NOT EXISTS work_receipts_created ON work_receipts (created_at)")
            self._prune(contract.WORK_RECEIPT_RETENTION_S)

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
                (settlement_id, order_id, receipt.status, receipt.content_type, receipt.body, self._schedule.now_s()),
            )
            if self._schedule.counted_put_is_due():
                self._prune(contract.WORK_RECEIPT_RETENTION_S)

    def prune(self, older_than_s: int = contract.WORK_RECEIPT_RETENTION_S) -> int:
        """Deletes the receipts stored more than ``older_than_s`` seconds ago; returns how many."""
        with self._lock:
            return self._prune(older_than_s)

    def _prune(self, older_than_s: int) -> int:
        cursor = self._conn.execute(
            "DELETE FROM work_receipts WHERE created_at < ?", (self._schedule.now_s() - older_than_s,)
        )
        return cursor.rowcount

    def close(self) -> None:
        with self._lock:
            self._conn.close()
