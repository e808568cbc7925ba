//! The Python and TypeScript SDKs' wire types are generated from the API description, and stay so:
//! `bazaar openapi` prints the very document a registry serves at `/openapi.json`, and
//! `scripts/generate-clients --check` regenerates `clients/openapi.json`, `clients/python/src/bazaar/wire.py`
//! (PyPI datamodel-code-generator) and `clients/typescript/src/wire.ts` (npm openapi-typescript) from it into a
//! scratch directory and fails on any difference from the committed files. Both generators are pinned
//! (`clients/python/requirements-dev.txt`, `clients/typescript/package.json`) and installed by `./scripts/test`.

use crate::common;

use std::process::Command;

#[tokio::test]
async fn the_printed_description_is_the_served_one() {
    let port = common::free_port();
    let dir = common::fresh_dir("bazaar-clients");
    let args: Vec<String> =
        ["--data-dir", dir.to_str().unwrap(), "--port", &port.to_string()].iter().map(|s| s.to_string()).collect();
    let mut server = common::spawn_serve(&args);
    let served: serde_json::Value =
        reqwest::get(format!("http://127.0.0.1:{port}/openapi.json")).await.unwrap().json().await.unwrap();
    server.kill().ok();
    server.wait().ok();
    let printed = Command::new(env!("CARGO_BIN_EXE_bazaar")).arg("openapi").output().unwrap();
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&printed.stdout).unwrap();
    assert_eq!(printed, served, "`bazaar openapi` prints another document than the one served");
    assert!(printed["paths"]["/v1/settlements"]["post"].is_object(), "a described route is missing");
}

#[test]
fn the_clients_wire_types_are_what_the_generators_make_of_the_description() {
    let root = common::repo_root();
    for tool in
        ["clients/python/.venv/bin/datamodel-codegen", "clients/typescript/node_modules/.bin/openapi-typescript"]
    {
        assert!(root.join(tool).exists(), "{tool} is missing: run ./scripts/test once (it installs the generators)");
    }
    let output = Command::new(root.join("scripts/generate-clients"))
        .arg("--check")
        .env("BAZAAR_BIN", env!("CARGO_BIN_EXE_bazaar"))
        .current_dir(&root)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the generated wire types drifted:\n{text}");
    assert!(text.contains("the clients' wire types match the API description"), "{text}");
}
