"""Bazaar for Python: pay and get paid per call on a Bazaar registry, charged exactly once.

- :class:`Client` — the buyer's client (tokens, paid calls that never double-pay, verify as a receipt check,
  budgets and balance, escrowed purchases above the threshold); refusals raise :class:`ProblemError` with the
  stable ``code``.
- :class:`Merchant` and :class:`PaidRoutes` — ASGI middleware (FastAPI, Starlette): verify → settle once → run
  the handler once → keep the work receipt; :class:`X402Routes` speaks x402 v2 over it; :func:`paid_tool`
  makes a paid function an MCP tool; a merchant refuses to be made without a usable credential.
- :func:`generate_key`, :class:`Key` and :meth:`Client.redeem_invite` — join a registry from Python: make the
  agent's Ed25519 key, enrol with an invite code, and rotate the enrollment credential into the agent's own.
"""

from .asgi import AFTER_SETTLE, BEFORE_ANSWER, Merchant, PaidRoutes, Settled, claims_unverified
from .client import Answer, Client, Escrowed, PaidResponse, Purchase
from .errors import (
    AlreadySettled,
    BazaarError,
    BudgetExceeded,
    EscrowRequired,
    MerchantMisconfigured,
    MerchantUnauthenticated,
    ProblemError,
    RefusedError,
    TokenRefused,
    TokenTooSmall,
    TransportError,
    UnavailableError,
)
from .keys import Key, did_of, generate_key, invite_proof, invite_statement
from .mcp_tool import PaymentRefused, paid_tool
from .receipts import MemoryReceiptStore, ReceiptStore, SqliteReceiptStore, WorkReceipt
from .x402 import X402Routes
from . import wire

__all__ = [
    "wire",
    "AFTER_SETTLE",
    "BEFORE_ANSWER",
    "AlreadySettled",
    "Answer",
    "BazaarError",
    "BudgetExceeded",
    "Client",
    "EscrowRequired",
    "Escrowed",
    "Key",
    "Merchant",
    "MerchantMisconfigured",
    "MerchantUnauthenticated",
    "MemoryReceiptStore",
    "PaidResponse",
    "PaidRoutes",
    "PaymentRefused",
    "ProblemError",
    "Purchase",
    "ReceiptStore",
    "RefusedError",
    "Settled",
    "SqliteReceiptStore",
    "TokenRefused",
    "TokenTooSmall",
    "TransportError",
    "UnavailableError",
    "WorkReceipt",
    "X402Routes",
    "claims_unverified",
    "did_of",
    "generate_key",
    "invite_proof",
    "invite_statement",
    "paid_tool",
]
