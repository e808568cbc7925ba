//! Tidy checks that run under `cargo test`: every Rust file opens with a `//!`
//! line, none of the banned debugging or placeholder macros in the tree, and the dependency
//! direction holds (the core knows no HTTP, SQL or async runtime).

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_says_what_it_holds() {
    let mut files = Vec::new();
    rust_files(&workspace().join("crates"), &mut files);
    assert!(files.len() > 20);
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with("//!"), "{} does not start with a //! line", file.display());
        // Spelled in pieces so this file does not trip its own check.
        for banned in [concat!("todo", "!("), concat!("dbg", "!("), concat!("unimplemented", "!(")] {
            assert!(!text.contains(banned), "{} contains {banned}", file.display());
        }
    }
}

fn dependencies(krate: &str) -> Vec<String> {
    let manifest = std::fs::read_to_string(workspace().join("crates").join(krate).join("Cargo.toml")).unwrap();
    let mut in_deps = false;
    let mut deps = Vec::new();
    for line in manifest.lines() {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps {
            if let Some((name, _)) = line.split_once(['=', '.']) {
                if !name.trim().is_empty() {
                    deps.push(name.trim().to_string());
                }
            }
        }
    }
    deps
}

#[test]
fn dependency_direction_holds() {
    let io = ["axum", "tokio", "rusqlite", "tokio-postgres", "reqwest", "hyper", "sqlx", "tower", "async-trait"];
    for krate in ["bazaar-types", "bazaar-core"] {
        for dep in dependencies(krate) {
            assert!(!io.contains(&dep.as_str()), "{krate} must stay sans-IO but depends on {dep}");
        }
    }
    let store = dependencies("bazaar-store");
    for dep in ["axum", "rusqlite", "tokio-postgres", "bazaar-server"] {
        assert!(!store.contains(&dep.to_string()), "bazaar-store must not depend on {dep}");
    }
    for adapter in ["bazaar-store-sqlite", "bazaar-store-postgres"] {
        let deps = dependencies(adapter);
        assert!(!deps.contains(&"axum".to_string()), "{adapter} must not know HTTP");
        assert!(deps.contains(&"bazaar-store".to_string()));
    }
    let sdk = dependencies("bazaar-sdk");
    for dep in ["bazaar-core", "bazaar-store", "bazaar-server"] {
        assert!(!sdk.contains(&dep.to_string()), "the SDK speaks HTTP only, not {dep}");
    }
    assert!(!dependencies("bazaar-types").iter().any(|d| d.starts_with("bazaar-")));
    // The conversation plane is a sibling, not a command on the money writer.
    let conversation = dependencies("bazaar-conversation");
    for dep in ["bazaar-core", "bazaar-store", "bazaar-server", "tokio"] {
        assert!(!conversation.contains(&dep.to_string()), "bazaar-conversation must not depend on {dep}");
    }
}

#[test]
fn cargo_run_in_the_workspace_runs_the_bazaar_binary() {
    // README: `cargo run --release -- demo` must pick the `bazaar` binary with no -p.
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    assert!(manifest.contains("default-members = [\"crates/bazaar-cli\"]"), "root Cargo.toml lost default-members");
}

/// The core's layers, lowest first, each with what it may use (besides
/// itself and the support modules). ARCHITECTURE.md states the same order.
const CORE_LAYERS: &[(&str, &[&str])] = &[
    ("kernel", &[]),
    ("identity", &["kernel"]),
    ("pay", &["kernel", "identity"]),
    ("escrow", &["kernel", "identity", "pay"]),
    ("dispute", &["kernel", "identity", "pay", "escrow"]),
    ("reputation", &["kernel", "identity", "pay", "escrow", "dispute"]),
    ("federation", &["kernel", "identity", "pay", "escrow", "dispute", "reputation"]),
    ("market", &["kernel", "identity", "pay", "escrow"]),
    ("bounty", &["kernel", "identity", "pay"]),
    ("hire", &["kernel", "identity", "pay", "escrow"]),
];
/// Modules every layer may use; they use only the kernel.
const CORE_SUPPORT: &[&str] = &["crypto", "vc", "validate", "audit", "types"];

fn core_module_files(module: &str) -> Vec<PathBuf> {
    let src = workspace().join("crates/bazaar-core/src");
    let mut files = Vec::new();
    if src.join(module).is_dir() {
        rust_files(&src.join(module), &mut files);
    }
    if src.join(format!("{module}.rs")).is_file() {
        files.push(src.join(format!("{module}.rs")));
    }
    files
}

/// Every `crate::name` a file mentions (code and doc links alike: a doc link up is a smell too).
fn crate_paths(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let tail = &rest[at + "crate::".len()..];
        let name: String = tail.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        names.push(name);
        rest = tail;
    }
    // `use crate::{a, b}` groups.
    for group in text.split("use crate::{").skip(1) {
        let inside = group.split('}').next().unwrap_or("");
        names.extend(inside.split(',').map(|n| n.trim().split("::").next().unwrap_or("").to_string()));
    }
    names.retain(|n| {
        !n.is_empty() && !["event_kinds", "event_bodies", "receipts_into", "document"].contains(&n.as_str())
    });
    names
}

#[test]
fn core_capabilities_use_only_lower_layers() {
    let layer_names: Vec<&str> = CORE_LAYERS.iter().map(|(name, _)| *name).collect();
    for (layer, allowed) in CORE_LAYERS {
        let files = core_module_files(layer);
        assert!(!files.is_empty(), "the core has no module {layer}");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for used in crate_paths(&text) {
                let ok = used == *layer || allowed.contains(&used.as_str()) || CORE_SUPPORT.contains(&used.as_str());
                assert!(
                    ok,
                    "{} ({layer}) uses crate::{used}; {layer} may use only {allowed:?} and {CORE_SUPPORT:?}",
                    file.display()
                );
                assert!(
                    layer_names.contains(&used.as_str()) || CORE_SUPPORT.contains(&used.as_str()),
                    "{} uses crate::{used}, which is neither a layer nor a support module",
                    file.display()
                );
            }
        }
    }
    for support in CORE_SUPPORT.iter().filter(|s| **s != "types") {
        for file in core_module_files(support) {
            let text = std::fs::read_to_string(&file).unwrap();
            for used in crate_paths(&text) {
                let ok = used == "kernel" || CORE_SUPPORT.contains(&used.as_str());
                assert!(ok, "{} (support) uses crate::{used}; support modules use only the kernel", file.display());
            }
        }
    }
}

/// Capabilities extend the one `Batch` with methods, which a path check cannot
/// see: a method only a higher layer defines must not be called from a lower one.
#[test]
fn core_capabilities_call_no_method_of_a_higher_layer() {
    let mut defined: Vec<(String, &str)> = Vec::new();
    for (layer, _) in CORE_LAYERS {
        for file in core_module_files(layer) {
            let text = std::fs::read_to_string(&file).unwrap();
            for line in text.lines() {
                let line = line.trim_start();
                let line = line.strip_prefix("pub(crate) ").or_else(|| line.strip_prefix("pub ")).unwrap_or(line);
                let Some(rest) = line.strip_prefix("fn ") else {
                    continue;
                };
                let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                defined.push((name, layer));
            }
        }
    }
    // Only names defined in exactly one layer say which layer a call reaches.
    let unique: Vec<&(String, &str)> =
        defined.iter().filter(|(name, _)| defined.iter().filter(|(n, _)| n == name).count() == 1).collect();
    assert!(unique.len() > 40, "the scan found too few methods to mean anything");
    for (layer, allowed) in CORE_LAYERS {
        for file in core_module_files(layer) {
            let text = std::fs::read_to_string(&file).unwrap();
            for (name, home) in &unique {
                if home == layer || allowed.contains(home) {
                    continue;
                }
                assert!(
                    !text.contains(&format!("self.{name}(")) && !text.contains(&format!("batch.{name}(")),
                    "{} ({layer}) calls {name}, which {home} defines; {layer} may use only {allowed:?}",
                    file.display()
                );
            }
        }
    }
}

/// Capabilities write events only as typed bodies (`Batch::emit`), so a kind
/// cannot be written with another kind's body or an untyped one.
#[test]
fn core_capabilities_write_only_typed_events() {
    for (layer, _) in CORE_LAYERS.iter().filter(|(layer, _)| *layer != "kernel") {
        for file in core_module_files(layer) {
            let text = std::fs::read_to_string(&file).unwrap();
            for call in [".event(", "-> Step"] {
                assert!(
                    !text.contains(call),
                    "{} ({layer}) uses `{call}`; write typed events and receipts",
                    file.display()
                );
            }
        }
    }
}

#[test]
fn the_core_kernel_config_names_no_capability_setting() {
    let text = std::fs::read_to_string(workspace().join("crates/bazaar-core/src/kernel/config.rs")).unwrap();
    for capability_type in ["Windows", "SearchRecord", "dispute", "market"] {
        assert!(!text.contains(capability_type), "the kernel's Config names {capability_type}");
    }
}

/// Every compromise in `docs/compromises.md` names at least one test that
/// demonstrates it, each as `` `path::function` `` (or `path::module::function`);
/// each must exist.
#[test]
fn every_compromise_names_a_test_that_exists() {
    let root = workspace();
    let ledger = std::fs::read_to_string(root.join("docs/compromises.md")).unwrap();
    let mut named = 0;
    for row in ledger.lines().filter(|l| l.starts_with('|') && !l.contains("---")).skip(1) {
        let cell = row.trim_matches('|').split('|').nth(2).unwrap_or_default();
        let tests: Vec<&str> = cell.split('`').skip(1).step_by(2).filter(|span| span.contains("::")).collect();
        assert!(!tests.is_empty(), "no test named in {row}");
        for test in tests {
            let (path, _) = test.split_once("::").unwrap();
            let (_, function) = test.rsplit_once("::").unwrap();
            let text = std::fs::read_to_string(root.join(path)).unwrap_or_else(|_| panic!("{path} does not exist"));
            assert!(text.contains(&format!("fn {function}")), "{path} has no fn {function}");
        }
        named += 1;
    }
    assert!(named >= 4);
}
