//! The chamber's AI buyer agent: it reads a request in words and chooses the
//! storefront's MCP tools itself. It speaks the OpenAI-compatible
//! chat-completions tool-calling protocol to a model the operator configures
//! (`--agent-model-url`, `--agent-model`, the key from
//! `BAZAAR_AGENT_MODEL_KEY`; llama.cpp's server or Ollama work locally) and
//! reaches the storefront as any MCP client would (`/mcp`, the buyer agent's
//! bearer credential). It cannot pay: the storefront's `create_order` tool
//! always ends at an approval link for a person, and the run stops there.
//!
//! A model that asks for a tool the storefront does not offer, sends
//! arguments that are not a JSON object, or fails to answer stops the run
//! with a clear error; nothing it asked for happens.

use anyhow::{anyhow, bail, Context, Result};
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::time::Duration;

/// Model turns one run takes at most before it stops.
pub const AGENT_STEPS_MAX: usize = 12;
/// One model answer gives up after this long.
pub const MODEL_TIMEOUT_S: u64 = 90;
/// Characters of a tool's answer kept in the run's record (the model sees it whole).
pub const STEP_RECORD_CHARS_MAX: usize = 2_000;
/// The storefront tools the agent is offered: shopping only — no messages, no labor market.
pub const AGENT_TOOLS: &[&str] =
    &["search_products", "request_quote", "read_offers", "read_allocation", "create_order", "order_status"];
/// The environment variable holding the model's API key, if it needs one.
pub const MODEL_KEY_ENV: &str = "BAZAAR_AGENT_MODEL_KEY";

/// Where the operator's model is.
#[derive(Clone, Debug)]
pub struct ModelConfig {
    /// The OpenAI-compatible base URL, e.g. `http://127.0.0.1:11434/v1` (`/chat/completions` is appended).
    pub url: String,
    pub model: String,
    pub key: Option<String>,
}

/// One tool call the model made and what came back, and how a run ended: the chamber serves them.
pub use bazaar_sdk::wire::chamber::{AgentRun, AgentStep as Step};

fn system_prompt(now_ms: i64) -> String {
    format!(
        "You are a hotel's procurement agent on a Bazaar registry. Use the tools to find makers, ask for a quote \
         (quantity, the most per unit in minor units, a deadline in ms since the epoch; now is {now_ms}), read the \
         offers and the allocation, then create the order. You cannot pay or approve: create_order returns an \
         approval link for a person, and that is where your work ends. Use only the tools you are given."
    )
}

/// The text of an MCP tool result (its text parts joined) and whether it was an error.
fn tool_text(result: &rmcp::model::CallToolResult) -> (String, bool) {
    let value = serde_json::to_value(result).unwrap_or(Value::Null);
    let text = value["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|part| part["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    (text, value["isError"] == true)
}

fn clip(text: &str) -> String {
    if text.chars().count() <= STEP_RECORD_CHARS_MAX {
        return text.to_string();
    }
    let kept: String = text.chars().take(STEP_RECORD_CHARS_MAX).collect();
    format!("{kept}…")
}

/// Asks the model for its next turn.
async fn complete(http: &reqwest::Client, model: &ModelConfig, messages: &[Value], tools: &[Value]) -> Result<Value> {
    let url = format!("{}/chat/completions", model.url.trim_end_matches('/'));
    let body = json!({"model": model.model, "messages": messages, "tools": tools, "tool_choice": "auto"});
    let mut request = http.post(&url).json(&body).timeout(Duration::from_secs(MODEL_TIMEOUT_S));
    if let Some(key) = &model.key {
        request = request.bearer_auth(key);
    }
    let answer = request.send().await.with_context(|| format!("the model at {url} did not answer"))?;
    let status = answer.status();
    let text = answer.text().await.context("reading the model's answer")?;
    if !status.is_success() {
        bail!("the model at {url} answered {status}: {}", clip(&text));
    }
    let parsed: Value =
        serde_json::from_str(&text).with_context(|| format!("the model's answer is not JSON: {}", clip(&text)))?;
    parsed["choices"][0]["message"].as_object().cloned().map(Value::Object).ok_or_else(|| {
        anyhow!("the model's answer has no choices[0].message (not the chat-completions shape): {}", clip(&text))
    })
}

type Storefront = rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>;

/// The storefront's MCP server as the buyer agent, and the shopping tools it offers.
async fn storefront(registry: &str, credential: &str) -> Result<(Storefront, Vec<rmcp::model::Tool>)> {
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", registry.trim_end_matches('/')))
        .auth_header(credential.to_string());
    let mcp = ClientConfig::default()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .context("connecting to the storefront's MCP server")?;
    let offered = mcp
        .list_all_tools()
        .await
        .context("listing the storefront's tools")?
        .into_iter()
        .filter(|tool| AGENT_TOOLS.contains(&tool.name.as_ref()))
        .collect();
    Ok((mcp, offered))
}

/// What one tool call the model asked for came to.
enum Called {
    /// The tool answered (its text goes back to the model).
    Answered(String),
    /// An order waits at this approval link: the run ends.
    Approved(String),
    /// The call could not be made: the run stops, saying why.
    Stop(String),
}

/// Makes one of the model's tool calls, recording it as a step.
async fn call_tool(
    mcp: &Storefront,
    offered: &[rmcp::model::Tool],
    registry: &str,
    call: &Value,
    record: &mut AgentRun,
) -> Result<Called> {
    let name = call["function"]["name"].as_str().unwrap_or_default().to_string();
    if !offered.iter().any(|tool| tool.name == name) {
        let offered = AGENT_TOOLS.join(", ");
        return Ok(Called::Stop(format!(
            "the model asked for a tool that does not exist here: {name:?} (offered: {offered})"
        )));
    }
    let raw = call["function"]["arguments"].as_str().unwrap_or("{}");
    let Ok(Value::Object(arguments)) = serde_json::from_str::<Value>(raw) else {
        return Ok(Called::Stop(format!("the model's arguments for {name} are not a JSON object: {}", clip(raw))));
    };
    let result = mcp
        .call_tool(CallToolRequestParams::new(name.clone()).with_arguments(arguments.clone()))
        .await
        .with_context(|| format!("calling {name}"))?;
    let (text, is_error) = tool_text(&result);
    record.steps.push(Step { tool: name, arguments: Value::Object(arguments), ok: !is_error, result: clip(&text) });
    let approval =
        serde_json::from_str::<Value>(&text).ok().and_then(|v| v["approval_url"].as_str().map(str::to_string));
    Ok(match (is_error, approval) {
        (false, Some(path)) if path.starts_with("http") => Called::Approved(path),
        (false, Some(path)) => Called::Approved(format!("{}{path}", registry.trim_end_matches('/'))),
        _ => Called::Answered(text),
    })
}

/// Runs the agent on `request` (words) against the storefront at `registry` as the buyer agent `credential`;
/// `after_tool` sees each successful tool answer (the chamber's makers answer a request for quote there).
pub async fn run<F, Fut>(
    model: &ModelConfig,
    registry: &str,
    credential: &str,
    request: &str,
    now_ms: i64,
    after_tool: F,
) -> Result<AgentRun>
where
    F: Fn(String, Value) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let (mcp, offered) = storefront(registry, credential).await?;
    let tools: Vec<Value> = offered
        .iter()
        .map(|tool| {
            json!({"type": "function", "function": {"name": tool.name, "description": tool.description,
                "parameters": Value::Object((*tool.input_schema).clone())}})
        })
        .collect();
    let mut messages =
        vec![json!({"role": "system", "content": system_prompt(now_ms)}), json!({"role": "user", "content": request})];
    let http = reqwest::Client::new();
    let mut record = AgentRun {
        model: model.model.clone(),
        steps: Vec::new(),
        outcome: "stopped".into(),
        approval_url: None,
        answer: None,
        error: None,
    };
    for _ in 0..AGENT_STEPS_MAX {
        let message = match complete(&http, model, &messages, &tools).await {
            Ok(message) => message,
            Err(error) => return Ok(AgentRun { error: Some(format!("{error:#}")), ..record }),
        };
        let calls = message["tool_calls"].as_array().cloned().unwrap_or_default();
        if calls.is_empty() {
            let answer = message["content"].as_str().map(str::to_string);
            return Ok(AgentRun { outcome: "answered".into(), answer, ..record });
        }
        messages.push(message.clone());
        for call in calls {
            match call_tool(&mcp, &offered, registry, &call, &mut record).await? {
                Called::Stop(why) => return Ok(AgentRun { error: Some(why), ..record }),
                Called::Approved(url) => {
                    return Ok(AgentRun { outcome: "approval_link".into(), approval_url: Some(url), ..record });
                }
                Called::Answered(text) => {
                    let tool = call["function"]["name"].as_str().unwrap_or_default().to_string();
                    let step_ok = record.steps.last().is_some_and(|s| s.ok);
                    if step_ok {
                        after_tool(tool, serde_json::from_str::<Value>(&text).unwrap_or(Value::Null)).await?;
                    }
                    messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": text}));
                }
            }
        }
    }
    Ok(AgentRun { error: Some(format!("no approval link after {AGENT_STEPS_MAX} model turns")), ..record })
}
