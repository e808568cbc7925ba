//! The storefront past listing and search (those, and proof of shipment, are in
//! `client.rs`): requests for quote, offers, allocation, orders, a person's
//! approval, cancelling a share, the owner's order policy and the stored
//! receipt images. The two calls that open something — a request and an
//! order — take an idempotency key; retries must reuse it.

use crate::answer::typed;
use crate::client::{Answer, Client, SdkError};
use bazaar_wire as wire;
use reqwest::Method;
use serde_json::{json, Value};

/// A request for quote: what, how many, the buyer's cap per unit and the deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuoteRequest<'a> {
    /// What is wanted, in words: sellers whose listings match it are invited.
    pub item: &'a str,
    pub quantity: u64,
    pub max_unit_price_minor: u64,
    /// Unix milliseconds by the registry's clock.
    pub deadline_ms: i64,
}

/// A stored file (a courier receipt's image) and the content type it was uploaded with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    pub content_type: String,
    pub bytes: Vec<u8>,
}

impl Client {
    /// [`Client::search`] returning at most `limit` listings (the registry caps it at its own maximum).
    pub async fn search_at_most(&self, query: &str, limit: usize) -> Result<wire::market::SearchResults, SdkError> {
        let mut url = reqwest::Url::parse("http://x/v1/search").expect("static URL");
        url.query_pairs_mut().append_pair("q", query).append_pair("limit", &limit.to_string());
        typed(self.raw(Method::GET, &format!("/v1/search?{}", url.query().unwrap_or_default()), None, None).await?.body)
    }

    /// Buyer's agent: opens a request for quote under `key`; the sellers whose listings match are invited.
    pub async fn create_rfq(
        &self,
        request: &QuoteRequest<'_>,
        key: &str,
    ) -> Result<Answer<wire::market::Rfq>, SdkError> {
        let body = json!({"item": request.item, "quantity": request.quantity,
            "max_unit_price_minor": request.max_unit_price_minor, "deadline_ms": request.deadline_ms});
        self.raw(Method::POST, "/v1/rfqs", Some(body), Some(key)).await?.typed()
    }

    /// Requests for quote naming the caller, as buyer or as an invited seller (how sellers poll).
    pub async fn rfqs(&self) -> Result<wire::market::RfqList, SdkError> {
        typed(self.raw(Method::GET, "/v1/rfqs", None, None).await?.body)
    }

    /// The buyer or an invited seller: the request, every offer (refused ones with their reason), the allocation.
    pub async fn rfq(&self, id: &str) -> Result<wire::market::Rfq, SdkError> {
        typed(self.raw(Method::GET, &format!("/v1/rfqs/{id}"), None, None).await?.body)
    }

    /// An invited seller's agent: offers `quantity` units of `listing` at `unit_price_minor`. A refused
    /// offer is a 422 problem (its code and numbers, the offer in `facts`) and uses one of her attempts.
    pub async fn make_offer(
        &self,
        rfq: &str,
        listing: &str,
        unit_price_minor: u64,
        quantity: u64,
    ) -> Result<Answer<wire::market::Offer>, SdkError> {
        let body = json!({"listing": listing, "unit_price_minor": unit_price_minor, "quantity": quantity});
        self.raw(Method::POST, &format!("/v1/rfqs/{rfq}/offers"), Some(body), None).await?.typed()
    }

    /// The buyer or an invited seller: the allocation as it stands (fixed once closed).
    pub async fn rfq_allocation(&self, rfq: &str) -> Result<wire::market::RfqAllocation, SdkError> {
        typed(self.raw(Method::GET, &format!("/v1/rfqs/{rfq}/allocation"), None, None).await?.body)
    }

    /// The buyer: closes the request; its allocation is fixed and may be ordered.
    pub async fn close_rfq(&self, rfq: &str) -> Result<Answer<wire::market::RfqAllocation>, SdkError> {
        self.raw(Method::POST, &format!("/v1/rfqs/{rfq}/close"), None, None).await?.typed()
    }

    /// Owner: orders of `agent` (handle or DID) with a total above `approval_above_minor` wait for a person
    /// (0: every order).
    pub async fn set_order_policy(
        &self,
        agent: &str,
        approval_above_minor: u64,
    ) -> Result<Answer<wire::market::OrderPolicy>, SdkError> {
        let body = json!({"approval_above_minor": approval_above_minor});
        self.raw(Method::PUT, &format!("/v1/agents/{agent}/order-policy"), Some(body), None).await?.typed()
    }

    /// Buyer's agent: orders a closed request's allocation under `key` — one authorization, or an order
    /// waiting at `approval_url` when the policy (or `require_approval`) asks for a person.
    pub async fn create_order(
        &self,
        rfq: &str,
        require_approval: bool,
        key: &str,
    ) -> Result<Answer<wire::market::Order>, SdkError> {
        let body = json!({"rfq": rfq, "require_approval": require_approval});
        self.raw(Method::POST, "/v1/orders", Some(body), Some(key)).await?.typed()
    }

    /// Orders naming the caller or, with `agent`, naming one of the caller's agents (a maker's owner).
    pub async fn orders(&self, agent: Option<&str>) -> Result<wire::market::OrderList, SdkError> {
        let path = match agent {
            None => "/v1/orders".to_string(),
            Some(agent) => {
                let mut url = reqwest::Url::parse("http://x/v1/orders").expect("static URL");
                url.query_pairs_mut().append_pair("agent", agent);
                format!("/v1/orders?{}", url.query().unwrap_or_default())
            }
        };
        typed(self.raw(Method::GET, &path, None, None).await?.body)
    }

    /// The buyer, its owner, a maker in it (or her owner), or the operator: one order and its shares.
    pub async fn order(&self, id: &str) -> Result<wire::market::Order, SdkError> {
        typed(self.raw(Method::GET, &format!("/v1/orders/{id}"), None, None).await?.body)
    }

    /// The buyer's owner (a person; an agent is refused `approval_by_person`): approves a waiting order.
    pub async fn approve_order(&self, id: &str) -> Result<Answer<wire::market::Order>, SdkError> {
        self.raw(Method::POST, &format!("/v1/orders/{id}/approve"), None, None).await?.typed()
    }

    /// The buyer's owner: declines a waiting order.
    pub async fn decline_order(&self, id: &str) -> Result<Answer<wire::market::Order>, SdkError> {
        self.raw(Method::POST, &format!("/v1/orders/{id}/decline"), None, None).await?.typed()
    }

    /// The buyer agent or its owner: cancels share `share` before it ships; its hold is released.
    pub async fn cancel_share(
        &self,
        order: &str,
        share: u32,
    ) -> Result<Answer<wire::market::ShareCancelled>, SdkError> {
        self.raw(Method::POST, &format!("/v1/orders/{order}/shares/{share}/cancel"), None, None).await?.typed()
    }

    /// A stored receipt image by its SHA-256 (the buyer, its owner, the maker or the operator).
    pub async fn blob(&self, sha256: &str) -> Result<Blob, SdkError> {
        let mut request = self.http().get(format!("{}/v1/blobs/{sha256}", self.base()));
        if let Some(credential) = self.credential() {
            request = request.bearer_auth(credential);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        if status >= 400 {
            return Err(SdkError::problem(status, response.json().await.unwrap_or(Value::Null)));
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/octet-stream")
            .to_string();
        Ok(Blob { content_type, bytes: response.bytes().await?.to_vec() })
    }
}
