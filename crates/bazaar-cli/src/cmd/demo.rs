//! `bazaar demo`: the story on a fresh embedded registry (the chapters live in
//! the library's `demo` module, where the tests reach them too).

use anyhow::Result;
use clap::Subcommand;

#[derive(Subcommand)]
pub enum Command {
    /// The restock story on a fresh embedded registry, narrated.
    Demo {
        /// Paid calls to make.
        #[arg(long, default_value_t = 100)]
        calls: u32,
        /// Serve the live chamber while the story runs (its URL is printed first) and after it, until Ctrl-C.
        #[arg(long)]
        serve: bool,
        /// With --serve: the chamber's AI buyer agent asks this OpenAI-compatible chat-completions base URL
        /// (e.g. Ollama's `http://127.0.0.1:11434/v1`); its key, if any, from BAZAAR_AGENT_MODEL_KEY.
        #[arg(long, requires_all = ["agent_model", "serve"])]
        agent_model_url: Option<String>,
        /// With --serve: the model the AI buyer agent asks; needs --agent-model-url.
        #[arg(long, requires = "agent_model_url")]
        agent_model: Option<String>,
        /// With --serve: wait at most this many seconds for the first viewer of the chamber (the page at the printed
        /// URL opening its live stream) before telling the story, so whoever opens it sees the story happen; 0 tells
        /// it at once (scripts, CI). The terminal says which happened.
        #[arg(long, default_value_t = bazaar_cli::demo::VIEWER_WAIT_S, requires = "serve")]
        viewer_wait_s: u64,
    },
}

pub async fn run(command: Command, json_output: bool) -> Result<i32> {
    let Command::Demo { calls, serve, agent_model_url, agent_model, viewer_wait_s } = command;
    let model = agent_model_url.zip(agent_model).map(|(url, model)| bazaar_agents::buyer::ModelConfig {
        url,
        model,
        key: std::env::var(bazaar_agents::buyer::MODEL_KEY_ENV).ok().filter(|k| !k.is_empty()),
    });
    bazaar_cli::demo::run_with(calls, json_output, serve, model, viewer_wait_s).await
}
