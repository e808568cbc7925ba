"""Errors: every refusal from a registry (or a merchant) is RFC 9457 problem+json with a stable ``code``."""

from __future__ import annotations

from typing import Any, Optional


class BazaarError(Exception):
    """Anything this SDK raises."""


class TransportError(BazaarError):
    """The registry (or merchant) could not be reached, or the connection broke before an answer."""


class ProblemError(BazaarError):
    """A problem+json answer: ``status``, the stable ``code``, the ``detail`` for people, and ``facts``."""

    def __init__(self, status: int, code: str, detail: str, body: dict[str, Any]) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.body = body

    @property
    def facts(self) -> dict[str, Any]:
        """The machine-readable facts some refusals carry (e.g. the settlement an order already has)."""
        facts = self.body.get("facts")
        return facts if isinstance(facts, dict) else {}

    @property
    def retryable(self) -> bool:
        """Whether the same request, with the same idempotency key, may be sent again."""
        return self.status >= 500 or self.code == "idempotency_in_flight"

    @property
    def price_minor(self) -> Optional[int]:
        """The paid route's price, where a merchant's refusal is about the amount (``facts.price_minor``)."""
        price = self.facts.get("price_minor")
        return price if isinstance(price, int) and not isinstance(price, bool) else None


class RefusedError(ProblemError):
    """A 4xx refusal: sending the same request again gets the same answer."""


class UnavailableError(ProblemError):
    """A 5xx answer: retrying the same request with the same key is safe."""


class BudgetExceeded(RefusedError):
    """One of the agent's ceilings (per call, per day, total) set by its owner would be passed."""


class EscrowRequired(RefusedError):
    """The order is above the escrow threshold: it rides an escrowed contract (see ``Client.purchase``)."""


class AlreadySettled(RefusedError):
    """The token, or the order, has been settled; ``facts`` names the settlement."""


class TokenRefused(RefusedError):
    """The token is malformed, forged, expired, voided, for another merchant, or too small."""


class TokenTooSmall(TokenRefused):
    """The token allows less than the paid route costs (``amount_exceeds_token``): ``price_minor`` is the route's
    price, ``max_amount_minor`` what the token allowed. Ask again with a new order id and at least the price."""

    @property
    def max_amount_minor(self) -> Optional[int]:
        value = self.facts.get("max_amount_minor")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


class MerchantUnauthenticated(ProblemError):
    """The merchant's own registry credential was refused (``merchant_unauthenticated``): the merchant is
    misconfigured, not the buyer. Final for this call (not retried); the buyer's client voids the token."""

    @property
    def retryable(self) -> bool:
        return False


class MerchantMisconfigured(BazaarError, ValueError):
    """A merchant middleware was made without a usable credential (missing, blank, a placeholder such as
    ``MERCHANT_CREDENTIAL``, or an enrollment credential not yet rotated); ``code`` is
    ``merchant_credential_invalid``. Raised when the merchant is made, never at a buyer's request."""

    code = "merchant_credential_invalid"


_BY_CODE: dict[str, type[ProblemError]] = {
    "budget_per_call_exceeded": BudgetExceeded,
    "budget_per_day_exceeded": BudgetExceeded,
    "budget_total_exceeded": BudgetExceeded,
    "escrow_required": EscrowRequired,
    "token_settled": AlreadySettled,
    "order_already_settled": AlreadySettled,
    "token_malformed": TokenRefused,
    "token_signature_invalid": TokenRefused,
    "token_expired": TokenRefused,
    "token_voided": TokenRefused,
    "token_not_found": TokenRefused,
    "not_audience": TokenRefused,
    "amount_exceeds_token": TokenTooSmall,
}


def problem(status: int, body: Any) -> ProblemError:
    """The typed exception for an answer with ``status`` and (problem+json) ``body``."""
    data: dict[str, Any] = body if isinstance(body, dict) else {}
    code = data.get("code") if isinstance(data.get("code"), str) else "unknown"
    detail = data.get("detail") if isinstance(data.get("detail"), str) else ""
    assert isinstance(code, str) and isinstance(detail, str)
    if code == "merchant_unauthenticated":
        return MerchantUnauthenticated(status, code, detail, data)
    if status >= 500:
        return UnavailableError(status, code, detail, data)
    kind = _BY_CODE.get(code, RefusedError)
    return kind(status, code, detail, data)
