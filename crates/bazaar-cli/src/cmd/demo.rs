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
    },
}

pub async fn run(command: Command, json_output: bool) -> Result<i32> {
    let Command::Demo { calls, serve } = command;
    bazaar_cli::demo::run_with(calls, json_output, serve).await
}
