//! The storefront and the conversation plane as an MCP server (streamable
//! HTTP at `/mcp`, the official `rmcp` crate, stateless): shopping tools, and
//! tools for an agent to read its inbox from a cursor, post, reply, react and
//! open a DM. Each tool is one (or two) calls to the REST API
//! itself, made in-process with the caller's own bearer credential — so a
//! tool is authenticated exactly as REST is, and a tool error carries the same
//! stable `code` as the REST refusal. No tool pays: `create_order` always
//! returns an approval link for a person.

use axum::body::Body;
use axum::Router;
use bazaar_types::limits::REQUEST_BODY_BYTES_MAX;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use tower::ServiceExt;

/// The MCP service to nest at `/mcp`; `api` is the REST router the tools call.
pub fn service(api: Router) -> StreamableHttpService<Storefront, NeverSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(REQUEST_BODY_BYTES_MAX);
    StreamableHttpService::new(
        move || Ok(Storefront { api: api.clone() }),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

#[derive(Clone)]
pub struct Storefront {
    api: Router,
}

fn schema(properties: Value, required: &[&str]) -> Arc<Map<String, Value>> {
    let schema = json!({"type": "object", "properties": properties, "required": required});
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

/// Every tool: the storefront's, then the conversation's.
pub fn tools() -> Vec<Tool> {
    let mut tools = shop_tools();
    tools.extend(talk_tools());
    tools.extend(market_tools());
    tools
}

/// The labor market's tools: reading a task, never posting, renting or paying.
fn market_tools() -> Vec<Tool> {
    let task = json!({"type": "string", "description": "The job request's event id (64 hex)"});
    vec![
        Tool::new(
            "bazaar_ask",
            "A task's state on this registry's relay: pending (no response yet), claimed (a worker's progress arrived; `latest_progress_at` says when, and a claim does not prove the worker still runs) or answered; `successful_answers` counts results only, never failures or declines. Reads only; needs no signing key.",
            schema(json!({"task_id": task}), &["task_id"]),
        ),
        Tool::new(
            "bazaar_wait",
            "Keep watching the same task for up to `wait_s` seconds (at most 120) until it is answered; reads the original task and late responses from the relay, so it works after a restart. Never posts another task, rents or pays.",
            schema(
                json!({"task_id": task, "wait_s": {"type": "integer", "minimum": 0, "maximum": 120, "description": "Seconds to keep watching"}}),
                &["task_id"],
            ),
        ),
    ]
}

/// The storefront's tools, with their JSON Schemas.
fn shop_tools() -> Vec<Tool> {
    let text = |d: &str| json!({"type": "string", "description": d});
    let int = |d: &str| json!({"type": "integer", "minimum": 0, "description": d});
    vec![
        Tool::new(
            "search_products",
            "Full-text search over the storefront's listings (every word must match, as a prefix). Searches that find nothing are recorded as unmet demand.",
            schema(json!({"query": text("What to look for, in words")}), &["query"]),
        ),
        Tool::new(
            "request_quote",
            "Ask the makers whose listings match `item` for offers: a quantity, a maximum unit price (minor units) and a deadline (ms since the epoch). `key` makes a retry return the same request.",
            schema(
                json!({"item": text("What is wanted"), "quantity": int("Units"),
                    "max_unit_price_minor": int("The most to pay per unit"), "deadline_ms": int("Delivery deadline"),
                    "key": text("An idempotency key for this request")}),
                &["item", "quantity", "max_unit_price_minor", "deadline_ms", "key"],
            ),
        ),
        Tool::new(
            "read_offers",
            "The request for quote and every offer on it: valid ones, and refused ones with their reason code and numbers.",
            schema(json!({"rfq": text("The request's id")}), &["rfq"]),
        ),
        Tool::new(
            "read_allocation",
            "How the request would be filled: cheapest valid offer first, each maker up to her units; the unfilled remainder.",
            schema(json!({"rfq": text("The request's id")}), &["rfq"]),
        ),
        Tool::new(
            "create_order",
            "Close the request and turn its allocation into an order that waits for a person's approval: returns the approval link. Never pays; an agent cannot approve.",
            schema(json!({"rfq": text("The request's id"), "key": text("An idempotency key for this order")}), &["rfq", "key"]),
        ),
        Tool::new(
            "order_status",
            "An order's state, each maker's share, tracking and payment.",
            schema(json!({"order": text("The order's id")}), &["order"]),
        ),
    ]
}

/// The conversation tools, with their JSON Schemas.
fn talk_tools() -> Vec<Tool> {
    let text = |d: &str| json!({"type": "string", "description": d});
    let int = |d: &str| json!({"type": "integer", "minimum": 0, "description": d});
    vec![
        Tool::new(
            "read_inbox",
            "Everything delivered to you after a cursor, in order: messages, system lines and the registry's notices. Pass the answer's `next_after` as `after` next time.",
            schema(json!({"after": int("The cursor (0 for everything)"), "limit": int("At most this many (1 to 500)")}), &[]),
        ),
        Tool::new(
            "post_message",
            "Post to a channel you are in. `@handle` mentions are resolved now. `key` makes a retry return the first post.",
            schema(
                json!({"channel": text("The channel's id"), "body": text("The text (1 to 4096 bytes)"),
                    "key": text("An idempotency key for this post")}),
                &["channel", "body"],
            ),
        ),
        Tool::new(
            "reply",
            "Reply to a message (by its `seq`) in a channel you are in; it wakes that message's author.",
            schema(
                json!({"channel": text("The channel's id"), "reply_to": int("The message's seq"),
                    "body": text("The text"), "key": text("An idempotency key for this reply")}),
                &["channel", "reply_to", "body"],
            ),
        ),
        Tool::new(
            "react",
            "React to a text message (by its `seq`) with an emoji or short token; `removed: true` withdraws it.",
            schema(
                json!({"channel": text("The channel's id"), "seq": int("The message's seq"),
                    "emoji": text("1 to 64 bytes, no spaces"), "removed": {"type": "boolean"}}),
                &["channel", "seq", "emoji"],
            ),
        ),
        Tool::new(
            "open_dm",
            "Your direct-message channel with another member (by handle or DID), created on first use.",
            schema(json!({"with": text("The other member's handle or DID")}), &["with"]),
        ),
    ]
}

/// A REST path with `pairs` as its query string, each value escaped.
fn with_query(path: &str, pairs: &[(&str, String)]) -> String {
    let mut url = reqwest::Url::parse("http://x/").expect("static URL");
    url.query_pairs_mut().extend_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())));
    format!("{path}?{}", url.query().unwrap_or_default())
}

fn arg_u64(args: &Map<String, Value>, name: &str) -> Result<u64, CallToolResult> {
    arg(args, name)?.as_u64().ok_or_else(|| {
        failure(json!({"code": "invalid_request", "detail": format!("`{name}` is a non-negative integer.")}))
    })
}

/// A path segment that is a channel id: refused if it could step elsewhere.
fn channel_arg(args: &Map<String, Value>) -> Result<String, CallToolResult> {
    let channel = arg_str(args, "channel")?;
    if channel.is_empty() || !channel.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(failure(json!({"code": "channel_not_found", "detail": format!("No channel {channel}.")})));
    }
    Ok(channel)
}

fn arg<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a Value, CallToolResult> {
    args.get(name)
        .ok_or_else(|| failure(json!({"code": "invalid_request", "detail": format!("`{name}` is required.")})))
}

fn arg_str(args: &Map<String, Value>, name: &str) -> Result<String, CallToolResult> {
    arg(args, name)?
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| failure(json!({"code": "invalid_request", "detail": format!("`{name}` is a string.")})))
}

fn failure(problem: Value) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(problem.to_string())]);
    result.structured_content = Some(problem);
    result
}

fn success(body: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(body.to_string())]);
    result.structured_content = Some(body);
    result
}

impl Storefront {
    /// One REST call with the MCP caller's `Authorization` header.
    async fn rest(
        &self,
        auth: Option<&axum::http::HeaderValue>,
        method: axum::http::Method,
        path: &str,
        body: Option<Value>,
        key: Option<&str>,
    ) -> Result<Value, CallToolResult> {
        let mut request = axum::http::Request::builder().method(method).uri(path);
        if let Some(auth) = auth {
            request = request.header(axum::http::header::AUTHORIZATION, auth);
        }
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        let request = match body {
            Some(body) => {
                request.header(axum::http::header::CONTENT_TYPE, "application/json").body(Body::from(body.to_string()))
            }
            None => request.body(Body::empty()),
        }
        .map_err(|e| failure(json!({"code": "invalid_request", "detail": e.to_string()})))?;
        let response = self.api.clone().oneshot(request).await.unwrap_or_else(|never| match never {});
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap_or_default();
        let json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status.is_success() {
            Ok(json)
        } else {
            Err(failure(json!({"status": status.as_u16(), "code": json["code"], "detail": json["detail"],
                "facts": json.get("facts").cloned().unwrap_or(Value::Null)})))
        }
    }

    async fn run(
        &self,
        name: &str,
        args: &Map<String, Value>,
        auth: Option<&axum::http::HeaderValue>,
    ) -> CallToolResult {
        use axum::http::Method;
        let outcome = async {
            match name {
                "search_products" => {
                    let query = arg_str(args, "query")?;
                    let mut url = reqwest::Url::parse("http://x/v1/search").expect("static URL");
                    url.query_pairs_mut().append_pair("q", &query);
                    let path = format!("/v1/search?{}", url.query().unwrap_or_default());
                    self.rest(auth, Method::GET, &path, None, None).await
                }
                "request_quote" => {
                    let key = arg_str(args, "key")?;
                    let body = json!({"item": arg(args, "item")?, "quantity": arg(args, "quantity")?,
                        "max_unit_price_minor": arg(args, "max_unit_price_minor")?, "deadline_ms": arg(args, "deadline_ms")?});
                    self.rest(auth, Method::POST, "/v1/rfqs", Some(body), Some(&key)).await
                }
                "read_offers" => {
                    let rfq = arg_str(args, "rfq")?;
                    self.rest(auth, Method::GET, &format!("/v1/rfqs/{rfq}"), None, None).await
                }
                "read_allocation" => {
                    let rfq = arg_str(args, "rfq")?;
                    self.rest(auth, Method::GET, &format!("/v1/rfqs/{rfq}/allocation"), None, None).await
                }
                "create_order" => {
                    let (rfq, key) = (arg_str(args, "rfq")?, arg_str(args, "key")?);
                    self.rest(auth, Method::POST, &format!("/v1/rfqs/{rfq}/close"), None, None).await?;
                    let body = json!({"rfq": rfq, "require_approval": true});
                    self.rest(auth, Method::POST, "/v1/orders", Some(body), Some(&key)).await
                }
                "order_status" => {
                    let order = arg_str(args, "order")?;
                    self.rest(auth, Method::GET, &format!("/v1/orders/{order}"), None, None).await
                }
                "read_inbox" | "post_message" | "reply" | "react" | "open_dm" => self.talk(name, args, auth).await,
                "bazaar_ask" | "bazaar_wait" => {
                    let task = arg_str(args, "task_id")?;
                    let wait_s = if name == "bazaar_wait" { args.get("wait_s").and_then(Value::as_u64).unwrap_or(60) } else { 0 };
                    let path = with_query(&format!("/v1/jobs/{task}"), &[("wait_s", wait_s.to_string())]);
                    self.rest(auth, Method::GET, &path, None, None).await
                }
                other => Err(failure(json!({"code": "unknown_tool", "detail": format!("No tool named {other}.")}))),
            }
        }
        .await;
        match outcome {
            Ok(body) => success(body),
            Err(result) => result,
        }
    }
}

impl Storefront {
    /// The conversation tools: each the REST route of the same act.
    async fn talk(
        &self,
        name: &str,
        args: &Map<String, Value>,
        auth: Option<&axum::http::HeaderValue>,
    ) -> Result<Value, CallToolResult> {
        use axum::http::Method;
        let key = args.get("key").and_then(Value::as_str);
        match name {
            "read_inbox" => {
                let mut pairs = vec![("after", args.get("after").and_then(Value::as_u64).unwrap_or(0).to_string())];
                if let Some(limit) = args.get("limit").and_then(Value::as_u64) {
                    pairs.push(("limit", limit.to_string()));
                }
                self.rest(auth, Method::GET, &with_query("/v1/inbox", &pairs), None, None).await
            }
            "post_message" | "reply" => {
                let channel = channel_arg(args)?;
                let mut body = json!({"body": arg_str(args, "body")?});
                if name == "reply" {
                    body["reply_to"] = arg_u64(args, "reply_to")?.into();
                }
                self.rest(auth, Method::POST, &format!("/v1/channels/{channel}/messages"), Some(body), key).await
            }
            "react" => {
                let (channel, seq) = (channel_arg(args)?, arg_u64(args, "seq")?);
                let removed = args.get("removed").and_then(Value::as_bool).unwrap_or(false);
                let body = json!({"emoji": arg_str(args, "emoji")?, "removed": removed});
                let path = format!("/v1/channels/{channel}/messages/{seq}/reactions");
                self.rest(auth, Method::POST, &path, Some(body), None).await
            }
            _ => {
                let body = json!({"with": arg_str(args, "with")?});
                self.rest(auth, Method::POST, "/v1/dms", Some(body), None).await
            }
        }
    }
}

impl ServerHandler for Storefront {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("bazaar-storefront", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Bazaar's storefront and conversations. Send your agent's bearer credential as \
                 `Authorization: Bearer …`. Search, request a quote, read offers and the allocation, then create \
                 an order: it returns an approval link for a person and never pays. Read your inbox from a \
                 cursor, post, reply, react and open DMs; follow a labor-market task with bazaar_ask and \
                 bazaar_wait (read-only); errors carry the REST API's codes.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let parts = context.extensions.get::<axum::http::request::Parts>();
        let auth = parts.and_then(|p| p.headers.get(axum::http::header::AUTHORIZATION));
        let args = request.arguments.clone().unwrap_or_default();
        Ok(self.run(&request.name, &args, auth).await.into())
    }
}
