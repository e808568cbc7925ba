//! Running a registry and reading its ledger: `serve`, `audit` (offline, on
//! the store) and `events` (over HTTP, operator only).

use super::common::{print, Remote, DEFAULT_PORT};
use anyhow::Result;
use bazaar_cli::{runtime, StoreArgs, WindowArgs};
use clap::Subcommand;
use serde_json::Value;

// reason: parsed once per process; boxing the serve flags would only make clap's derive harder to read.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum Command {
    /// Run a registry over HTTP (127.0.0.1 unless --listen says otherwise).
    Serve {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        listen: bazaar_cli::ListenArgs,
        #[command(flatten)]
        cluster: bazaar_cli::ClusterArgs,
        #[command(flatten)]
        windows: WindowArgs,
        /// The port on 127.0.0.1 (ignored when --listen gives an address).
        #[arg(long, default_value_t = DEFAULT_PORT)]
        port: u16,
        /// Operator credential to set on first start (otherwise one is drawn and written to <data-dir>/operator-credential).
        #[arg(long, env = "BAZAAR_OPERATOR_CREDENTIAL", hide_env_values = true)]
        operator_credential: Option<String>,
        /// The base URL peers reach this registry at (published in its card); default http://127.0.0.1:<port>.
        #[arg(long)]
        public_url: Option<String>,
        /// Let webhooks reach loopback and private addresses (tests and closed networks only; refused otherwise, against SSRF).
        #[arg(long)]
        allow_private_webhooks: bool,
        /// Let anyone watch the live event stream (`GET /v1/stream`) without signing in, as the public may see it (amounts, handles, kinds, refusal codes). See the compromise ledger.
        #[arg(long)]
        public_stream: bool,
        /// The chamber's AI buyer agent: an OpenAI-compatible chat-completions base URL (e.g. a local llama.cpp or
        /// Ollama server's `http://127.0.0.1:11434/v1`); its key, if any, from BAZAAR_AGENT_MODEL_KEY.
        #[arg(long, requires = "agent_model")]
        agent_model_url: Option<String>,
        /// The model the AI buyer agent asks (e.g. `qwen2.5:7b-instruct`); needs --agent-model-url.
        #[arg(long, requires = "agent_model_url")]
        agent_model: Option<String>,
        /// Serve even when the data directory or a file in it is readable by group or others (it holds the
        /// registry's signing key and credentials): a loud warning instead of the refusal.
        #[arg(long)]
        allow_insecure_permissions: bool,
        #[command(flatten)]
        relay: bazaar_cli::RelayArgs,
    },
    /// Verify the event chain end to end and recompute every balance; exits 1 on any mismatch.
    Audit {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Operator: read the hash-chained event ledger, a page at a time.
    Events {
        #[command(flatten)]
        remote: Remote,
        /// Only events after this sequence number (0: from the first); give a page's last seq to read the next.
        #[arg(long, default_value_t = 0)]
        after: u64,
        /// At most this many events (the registry caps it at 500).
        #[arg(long, default_value_t = bazaar_types::limits::PAGE_LIMIT_MAX)]
        limit: usize,
    },
    /// Print the API description (OpenAPI 3.1, the document `GET /openapi.json` serves) without a registry:
    /// what the Python and TypeScript SDKs' wire types are generated from (`scripts/generate-clients`).
    Openapi,
}

pub async fn run(command: Command, json_output: bool) -> Result<i32> {
    match command {
        Command::Serve {
            store,
            listen,
            cluster,
            windows,
            port,
            operator_credential,
            public_url,
            allow_private_webhooks,
            public_stream,
            agent_model_url,
            agent_model,
            allow_insecure_permissions,
            relay,
        } => {
            let model = agent_model_url.zip(agent_model).map(|(url, model)| bazaar_agents::buyer::ModelConfig {
                url,
                model,
                key: std::env::var(bazaar_agents::buyer::MODEL_KEY_ENV).ok().filter(|k| !k.is_empty()),
            });
            let serving = runtime::Serving {
                port,
                listen,
                cluster,
                operator_credential,
                public_url,
                allow_private_webhooks,
                public_stream,
                allow_insecure_permissions,
                relay,
                attacks: Some(std::sync::Arc::new(bazaar_attacks::ChamberAttacks)),
                runs: Some(Box::new(move |registry, operator_credential, clock| {
                    std::sync::Arc::new(bazaar_cli::demo::runs::ChamberRuns::new(
                        registry,
                        operator_credential,
                        clock,
                        model,
                    ))
                })),
            };
            runtime::serve(store, windows, serving).await.map(|_| 0)
        }
        Command::Audit { store } => runtime::audit(store, json_output).await,
        Command::Openapi => {
            let description = bazaar_server::router::api_description();
            println!("{}", serde_json::to_string_pretty(description)?);
            Ok(0)
        }
        Command::Events { remote, after, limit } => {
            let value = bazaar_cli::wire_json(&remote.client()?.events(after, limit).await?);
            print(json_output, &value, events_prose);
            Ok(0)
        }
    }
}

/// One line per event: sequence, kind, the hash's first 12 characters, author.
fn events_prose(page: &Value) -> String {
    let lines: Vec<String> = page["events"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            format!(
                "{:>6} {} {} by {}",
                e["seq"],
                e["kind"].as_str().unwrap_or(""),
                &e["hash"].as_str().unwrap_or("")[..12.min(e["hash"].as_str().unwrap_or("").len())],
                e["authored_by"].as_str().unwrap_or("")
            )
        })
        .collect();
    lines.join("\n")
}
