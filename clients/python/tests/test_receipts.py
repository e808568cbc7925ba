"""The work-receipt stores prune on the Rust SDK's policy: older than the retention is gone on open, on
``prune`` and on every Nth put; a fresh receipt stays. Run: ``.venv/bin/python -m unittest discover -s tests``."""

from __future__ import annotations

import sqlite3
import tempfile
import unittest
from pathlib import Path

from bazaar import contract
from bazaar.receipts import MemoryReceiptStore, SqliteReceiptStore, WorkReceipt

DAY = 86_400
RECEIPT = WorkReceipt(200, "text/plain", b"done")


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Constants(unittest.TestCase):
    def test_the_rust_values(self) -> None:
        self.assertEqual(contract.WORK_RECEIPT_RETENTION_S, 2_592_000)
        self.assertEqual(contract.WORK_RECEIPT_PRUNE_EVERY, 1024)


class Memory(unittest.TestCase):
    def test_prune_drops_only_receipts_past_retention(self) -> None:
        clock = Clock()
        store = MemoryReceiptStore(clock=clock)
        store.put("old", "o-1", RECEIPT)
        clock.now += 2 * DAY
        store.put("recent", "o-2", RECEIPT)
        clock.now += contract.WORK_RECEIPT_RETENTION_S - DAY  # "old" is 31 days old, "recent" 29
        self.assertEqual(store.prune(contract.WORK_RECEIPT_RETENTION_S), 1)
        self.assertIsNone(store.get("old"))
        self.assertEqual(store.get("recent"), RECEIPT)

    def test_every_nth_put_prunes(self) -> None:
        clock = Clock()
        store = MemoryReceiptStore(prune_every=3, clock=clock)
        store.put("old", "o-1", RECEIPT)
        clock.now += contract.WORK_RECEIPT_RETENTION_S + DAY
        store.put("new-1", "o-2", RECEIPT)
        self.assertIsNotNone(store.get("old"), "the 2nd put does not prune")
        store.put("new-2", "o-3", RECEIPT)
        self.assertIsNone(store.get("old"), "the 3rd put prunes")
        self.assertEqual(store.get("new-2"), RECEIPT)

    def test_default_prunes_every_1024_puts(self) -> None:
        clock = Clock()
        store = MemoryReceiptStore(clock=clock)
        store.put("old", "o", RECEIPT)
        clock.now += contract.WORK_RECEIPT_RETENTION_S + DAY
        for i in range(contract.WORK_RECEIPT_PRUNE_EVERY - 2):
            store.put(f"n-{i}", "o", RECEIPT)
        self.assertIsNotNone(store.get("old"))
        store.put("last", "o", RECEIPT)
        self.assertIsNone(store.get("old"))


class Sqlite(unittest.TestCase):
    def setUp(self) -> None:
        self._dir = tempfile.TemporaryDirectory()
        self.path = Path(self._dir.name) / "receipts.db"

    def tearDown(self) -> None:
        self._dir.cleanup()

    def ids(self) -> list[str]:
        with sqlite3.connect(self.path) as conn:
            return [r[0] for r in conn.execute("SELECT settlement_id FROM work_receipts ORDER BY settlement_id")]

    def test_prune_and_open_drop_receipts_past_retention(self) -> None:
        clock = Clock()
        store = SqliteReceiptStore(self.path, clock=clock)
        for sid, age_days in (("old", 31), ("recent", 29), ("new", 0)):
            clock.now = 1_800_000_000.0 - age_days * DAY
            store.put(sid, "o", RECEIPT)
        clock.now = 1_800_000_000.0
        self.assertEqual(store.prune(contract.WORK_RECEIPT_RETENTION_S), 1)
        self.assertEqual(self.ids(), ["new", "recent"])
        self.assertEqual(store.get("recent"), RECEIPT)
        store.close()
        # Opening the store prunes too: two days on, "recent" is past its retention.
        clock.now += 2 * DAY
        reopened = SqliteReceiptStore(self.path, clock=clock)
        self.assertEqual(self.ids(), ["new"])
        self.assertIsNone(reopened.get("recent"))
        reopened.close()

    def test_open_prunes_with_the_real_clock(self) -> None:
        SqliteReceiptStore(self.path).close()
        with sqlite3.connect(self.path) as conn:
            conn.execute(
                "INSERT INTO work_receipts VALUES ('old', 'o', 200, NULL, x'00',"
                " CAST(strftime('%s','now') AS INTEGER) - ?)",
                (contract.WORK_RECEIPT_RETENTION_S + DAY,),
            )
        SqliteReceiptStore(self.path).close()
        self.assertEqual(self.ids(), [])

    def test_created_at_is_indexed(self) -> None:
        SqliteReceiptStore(self.path).close()
        with sqlite3.connect(self.path) as conn:
            plan = " ".join(
                str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN DELETE FROM work_receipts WHERE created_at < 1")
            )
        self.assertIn("work_receipts_created", plan)

    def test_every_nth_put_prunes(self) -> None:
        clock = Clock()
        store = SqliteReceiptStore(self.path, prune_every=3, clock=clock)
        store.put("old", "o-1", RECEIPT)
        clock.now += contract.WORK_RECEIPT_RETENTION_S + DAY
        store.put("new-1", "o-2", RECEIPT)
        self.assertEqual(self.ids(), ["new-1", "old"], "the 2nd put does not prune")
        store.put("new-2", "o-3", RECEIPT)
        self.assertEqual(self.ids(), ["new-1", "new-2"], "the 3rd put prunes")
        store.close()


if __name__ == "__main__":
    unittest.main()
