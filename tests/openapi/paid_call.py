"""A paid call made only with a client that openapi-python-client generated from
the registry's served /openapi.json: the buyer agent issues a token, the merchant
settles it, a retry of the settle replays the same receipt, and the merchant's
balance reads what it was paid net of the fee.

usage: paid_call.py GENERATED_PARENT_DIR URL BUYER_CREDENTIAL MERCHANT_CREDENTIAL MERCHANT_HANDLE
Prints one JSON line with what it saw; exits non-zero on any refusal.
"""

import json
import sys

sys.path.insert(0, sys.argv[1])

from bazaar_api import AuthenticatedClient  # noqa: E402
from bazaar_api.api.ledger import account_transfers  # noqa: E402
from bazaar_api.api.pay import issue_token, settle  # noqa: E402
from bazaar_api.models import SettleRequest, SettlementReceipt, TokenIssued, TokenRequest  # noqa: E402

url, buyer_credential, merchant_credential, merchant_handle = sys.argv[2:6]
buyer = AuthenticatedClient(base_url=url, token=buyer_credential)
merchant = AuthenticatedClient(base_url=url, token=merchant_credential)
PRICE = 300
ORDER = "generated-client-order-1"

issued = issue_token.sync(
    client=buyer,
    body=TokenRequest(max_amount_minor=PRICE, merchant=merchant_handle, order_id=ORDER, resource="/generated"),
)
if not isinstance(issued, TokenIssued):
    sys.exit(f"issue_token refused: {issued}")

request = SettleRequest(amount_minor=PRICE, order_id=ORDER, token=issued.token)
first = settle.sync_detailed(client=merchant, body=request)
if not isinstance(first.parsed, SettlementReceipt):
    sys.exit(f"settle refused: {first.status_code} {first.content!r}")
again = settle.sync_detailed(client=merchant, body=request)
if not isinstance(again.parsed, SettlementReceipt):
    sys.exit(f"settle retry refused: {again.status_code} {again.content!r}")

held = account_transfers.sync_detailed(f"acct:{first.parsed.merchant}", client=merchant)
if held.status_code != 200:
    sys.exit(f"balance refused: {held.status_code} {held.content!r}")

print(
    json.dumps(
        {
            "settlement_id": first.parsed.settlement_id,
            "replayed_settlement_id": again.parsed.settlement_id,
            "replayed_header": again.headers.get("idempotent-replayed"),
            "amount_minor": first.parsed.amount_minor,
            "net_minor": first.parsed.net_minor,
            "fee_minor": first.parsed.fee_minor,
            "balance": json.loads(held.content),
        }
    )
)
