//! What every command family shares: the flags that reach a registry
//! (`Remote`), the prose-or-`--json` printer, and idempotency keys.

use anyhow::{Context, Result};
use bazaar_sdk::Client;
use clap::Args;
use serde_json::Value;
use std::path::PathBuf;

/// The port `bazaar serve` listens on by default…
pub const DEFAULT_PORT: u16 = 7878;
/// …and the registry the client commands call by default.
const DEFAULT_REGISTRY: &str = "http://127.0.0.1:7878";

#[derive(Args, Clone)]
pub struct Remote {
    /// Registry base URL.
    #[arg(long, env = "BAZAAR_REGISTRY", default_value = DEFAULT_REGISTRY)]
    registry: String,
    /// Bearer credential (or use --credential-file).
    #[arg(long, env = "BAZAAR_CREDENTIAL", hide_env_values = true)]
    credential: Option<String>,
    /// File holding the bearer credential.
    #[arg(long, env = "BAZAAR_CREDENTIAL_FILE")]
    credential_file: Option<PathBuf>,
}

impl Remote {
    pub fn client(&self) -> Result<Client> {
        Ok(Client::new(&self.registry, credential(&self.credential, &self.credential_file)?))
    }
}

/// The bearer credential given on the command line, or read from the file named, if either.
pub fn credential(given: &Option<String>, file: &Option<PathBuf>) -> Result<Option<String>> {
    Ok(match (given, file) {
        (Some(c), _) => Some(c.clone()),
        (None, Some(path)) => Some(
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?.trim().to_string(),
        ),
        (None, None) => None,
    })
}

/// Prints `value` as one line of JSON with `--json`, else the prose `human` makes of it.
pub fn print(json_output: bool, value: &Value, human: impl FnOnce(&Value) -> String) {
    if json_output {
        println!("{value}");
    } else {
        println!("{}", human(value));
    }
}

/// [`print`] for answers whose prose is the JSON itself, indented.
pub fn print_pretty(json_output: bool, value: &Value) {
    print(json_output, value, |v| serde_json::to_string_pretty(v).unwrap_or_default());
}

/// The caller's idempotency key, or a fresh one when it gave none.
pub fn key_or_random(key: Option<String>) -> String {
    key.unwrap_or_else(|| format!("cli-{}", bazaar_server::random_b64(&bazaar_server::OsEntropy, 16)))
}

/// A registry's refusal as a command prints it with `--json`: `error` as every command's, plus the
/// problem's status, code, detail and facts.
pub fn refusal_json(error: String, status: u16, code: &str, detail: &str, body: &Value) -> Value {
    let facts = body.get("facts").cloned().unwrap_or(Value::Null);
    serde_json::json!({"error": error, "status": status, "code": code, "detail": detail, "facts": facts})
}

/// A refusal's facts as the line printed under it (`facts: name=value …`; a fact that is a document, the
/// refused offer, by its id), if it has any.
pub fn facts_line(body: &Value) -> Option<String> {
    let facts = body.get("facts").and_then(Value::as_object).filter(|facts| !facts.is_empty())?;
    let text = |value: &Value| value.as_str().map(str::to_string).unwrap_or_else(|| value.to_string());
    let fact = |(name, value): (&String, &Value)| match value.get("id") {
        Some(id) => format!("{name}={}", text(id)),
        None => format!("{name}={}", text(value)),
    };
    Some(format!("facts: {}", facts.iter().map(fact).collect::<Vec<_>>().join(" ")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_registry_is_the_default_serve_port() {
        assert_eq!(super::DEFAULT_REGISTRY, format!("http://127.0.0.1:{}", super::DEFAULT_PORT));
    }
}
