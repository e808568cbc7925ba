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
    // Agents reach a registry as any client does (the SDK, the relay's WebSocket), never through its insides.
    let agents = dependencies("bazaar-agents");
    for dep in ["bazaar-server", "bazaar-store", "bazaar-store-sqlite", "bazaar-store-postgres", "bazaar-stage", "axum"]
    {
        assert!(!agents.contains(&dep.to_string()), "bazaar-agents must not depend on {dep}");
    }
    // The libraries never reach up into the binary.
    for krate in ["bazaar-agents", "bazaar-stage", "bazaar-attacks"] {
        assert!(!dependencies(krate).contains(&"bazaar-cli".to_string()), "{krate} must not depend on bazaar-cli");
    }
    assert!(!dependencies("bazaar-stage").contains(&"bazaar-attacks".to_string()));
}

/// The most integration-test binaries (top-level `tests/*.rs` files) one crate may have. Each is a link of
/// the whole dependency graph; a crate with many families of tests keeps them as modules of one binary
/// (`tests/it/main.rs`), with at most a fuzz or power-loss binary beside it that runs on its own.
const MAX_TEST_BINARIES_PER_CRATE: usize = 4;

/// Every crate links its integration tests as at most [`MAX_TEST_BINARIES_PER_CRATE`] binaries.
#[test]
fn a_crate_links_its_tests_as_few_binaries() {
    let mut checked = 0;
    for entry in std::fs::read_dir(workspace().join("crates")).unwrap() {
        let krate = entry.unwrap().path();
        let Ok(tests) = std::fs::read_dir(krate.join("tests")) else { continue };
        let mut binaries: Vec<String> = tests
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "rs"))
            .map(|p| p.file_name().unwrap().to_string_lossy().to_string())
            .collect();
        if krate.join("tests/it/main.rs").exists() {
            binaries.push("it/main.rs".into());
        }
        binaries.sort();
        assert!(
            binaries.len() <= MAX_TEST_BINARIES_PER_CRATE,
            "{} builds {} test binaries ({}); make them modules of tests/it/main.rs",
            krate.display(),
            binaries.len(),
            binaries.join(", ")
        );
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} crates have tests");
}

/// "market" has one meaning, the storefront: every source module named `market` (a `market.rs` or a
/// `market/` folder) says in its `//!` docs that it is the storefront's, and no code names the labor market's
/// rules anything but `labor` (`bazaar_relay::labor`).
#[test]
fn market_means_the_storefront_everywhere() {
    let mut files = Vec::new();
    rust_files(&workspace().join("crates"), &mut files);
    let mut modules = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let path = file.to_string_lossy();
        if path.contains("/tests/") {
            continue;
        }
        assert!(!text.contains("relay::market"), "{path} names the labor market's rules `market`");
        let module = file.file_stem().is_some_and(|s| s == "market")
            || (file.file_name().is_some_and(|n| n == "mod.rs")
                && file.parent().and_then(|p| p.file_name()).is_some_and(|n| n == "market"));
        if module {
            let docs: String = text.lines().take_while(|l| l.starts_with("//!")).collect::<Vec<_>>().join(" ");
            assert!(
                docs.to_lowercase().contains("storefront"),
                "{path}: a `market` module that is not the storefront's"
            );
            modules += 1;
        }
    }
    assert!(modules >= 5, "only {modules} market modules found");
}

/// The PostgreSQL test helpers (they panic on failure) are never linked into a server: only tests, and the
/// benchmark harness that makes its own databases, depend on `bazaar-postgres-testing`.
#[test]
fn postgres_test_helpers_are_for_tests_only() {
    for entry in std::fs::read_dir(workspace().join("crates")).unwrap() {
        let krate = entry.unwrap().file_name().to_string_lossy().to_string();
        if ["bazaar-postgres-testing", "bazaar-bench"].contains(&krate.as_str()) {
            continue;
        }
        let deps = dependencies(&krate);
        assert!(
            !deps.contains(&"bazaar-postgres-testing".to_string()),
            "{krate} depends on bazaar-postgres-testing outside [dev-dependencies]"
        );
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
    // The chamber's record of an attack met in a scratch registry: a refusal, nothing else.
    ("chamber", &["kernel"]),
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
        !n.is_empty()
            && !["event_kinds", "event_bodies", "receipts_into", "receipt_set", "document"].contains(&n.as_str())
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
/// cannot be written with another kind's body or an untyped one. (Receipts are
/// typed by the compiler: `command::run` answers the tagged `command::Receipt`.)
#[test]
fn core_capabilities_write_only_typed_events() {
    for (layer, _) in CORE_LAYERS.iter().filter(|(layer, _)| *layer != "kernel") {
        for file in core_module_files(layer) {
            let text = std::fs::read_to_string(&file).unwrap();
            assert!(!text.contains(".event("), "{} ({layer}) uses `.event(`; write typed events", file.display());
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

/// Words that claim something about encryption. Said about messages, sealing or rooms, they belong on the
/// compromise ledger, the one place that says what sealing protects and what it does not; anywhere else they
/// must link to it in the same paragraph: a Markdown link or an `href` whose target is the ledger
/// (`docs/compromises.md`, `compromises.md` or `/compromises`). A path in backticks names it but is no link.
const ENCRYPTION_CLAIMS: &[&str] = &["cannot read", "end-to-end", "encrypted", "e2e", "e2ee"];

/// Paragraphs that use one of [`ENCRYPTION_CLAIMS`] about something other than messages, sealing or rooms:
/// (file, a fragment of the paragraph, why it may). Each entry must still match, so the list cannot rot.
const ENCRYPTION_CLAIMS_ALLOWED: &[(&str, &str, &str)] = &[
    ("ARCHITECTURE.md", "cannot read (unknown version", "a stored body a build cannot parse, not a secret"),
    ("docs/operators.md", "its build cannot read", "a stored body a build cannot parse, not a secret"),
    ("docs/operators.md", "no cors headers are sent", "the browser's same-origin rule, not encryption"),
    ("docs/labor-market.md", "cannot read gives no priority", "a lease receipt a worker cannot parse"),
];

/// Directories a walk of the docs skips: dependencies, virtualenvs, build output.
fn skipped_dir(name: &str) -> bool {
    name.starts_with('.') || ["node_modules", "target", "dist", "build", "__pycache__"].contains(&name)
}

fn files_named(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        if path.is_dir() {
            if !skipped_dir(&name) {
                files_named(&path, keep, out);
            }
        } else if keep(&path) {
            out.push(path);
        }
    }
}

/// The docs and served pages that may speak of messages, sealing or rooms, except the compromise ledger itself.
fn docs_and_pages(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    let ext = |wanted: &'static str| move |p: &Path| p.extension().is_some_and(|e| e == wanted);
    files_named(&root.join("docs"), &ext("md"), &mut files);
    files_named(&root.join("clients"), &|p: &Path| p.file_name().is_some_and(|n| n == "README.md"), &mut files);
    files_named(&root.join("crates/bazaar-server/src"), &ext("html"), &mut files);
    files.retain(|f| !f.ends_with("docs/compromises.md"));
    files
}

/// A Markdown file's paragraphs: blocks between blank lines and fences, each list item, table row and heading
/// on its own.
fn markdown_paragraphs(text: &str) -> Vec<String> {
    let mut paragraphs = vec![String::new()];
    for line in text.lines() {
        let item = line.trim_start();
        let starts_item = ["- ", "* ", "+ ", "|", "#", "```"].iter().any(|p| item.starts_with(p))
            || item.split_once(". ").is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if line.trim().is_empty() || starts_item {
            paragraphs.push(String::new());
        }
        let last = paragraphs.last_mut().unwrap();
        last.push_str(line);
        last.push('\n');
        if item.starts_with('|') || item.starts_with('#') || item.starts_with("```") {
            paragraphs.push(String::new());
        }
    }
    paragraphs.retain(|p| !p.trim().is_empty());
    paragraphs
}

/// A page's paragraphs: blocks between blank lines, split again before every block-level element and after
/// every `</p>` (a list item's link and the `<p>` inside it stay one paragraph).
fn html_paragraphs(text: &str) -> Vec<String> {
    const BLOCKS: &[&str] = &["<li", "<tr", "<h1", "<h2", "<h3", "<h4", "<section", "<dt", "<dd", "<table", "<script"];
    let mut paragraphs = Vec::new();
    for block in text.split("\n\n") {
        let lower = block.to_lowercase();
        let mut bounds: Vec<usize> = BLOCKS.iter().flat_map(|tag| lower.match_indices(tag).map(|(at, _)| at)).collect();
        bounds.extend(lower.match_indices("</p>").map(|(at, end)| at + end.len()));
        bounds.extend([0, block.len()]);
        bounds.sort_unstable();
        bounds.dedup();
        paragraphs.extend(bounds.windows(2).map(|w| block[w[0]..w[1]].to_string()));
    }
    paragraphs
}

/// The claims of [`ENCRYPTION_CLAIMS`] in `paragraph` (lowercased), as whole words where a claim is a bare
/// abbreviation (`e2e` inside a hex string is not one).
fn encryption_claims(paragraph: &str) -> Vec<&'static str> {
    let bounded = |at: usize, len: usize| {
        let before = paragraph[..at].chars().next_back().is_none_or(|c| !c.is_ascii_alphanumeric());
        let after = paragraph[at + len..].chars().next().is_none_or(|c| !c.is_ascii_alphanumeric());
        before && after
    };
    ENCRYPTION_CLAIMS
        .iter()
        .copied()
        .filter(|claim| {
            paragraph.match_indices(claim).any(|(at, _)| {
                claim.contains(' ') || claim.contains('-') || claim.len() > 4 || bounded(at, claim.len())
            })
        })
        .collect()
}

/// Whether `paragraph` (lowercased) holds a link whose target is the compromise ledger: `[…](…compromises…)`,
/// `<http…/compromises>` or `href="…compromises…"`.
fn links_to_the_ledger(paragraph: &str) -> bool {
    let targets = |opening: &'static str, closing: char| {
        paragraph.match_indices(opening).map(move |(at, _)| {
            let rest = &paragraph[at + opening.len()..];
            rest[..rest.find(closing).unwrap_or(rest.len())].to_string()
        })
    };
    let is_ledger = |target: &String| target.ends_with("compromises.md") || target.ends_with("/compromises");
    targets("](", ')').chain(targets("<http", '>')).chain(targets("href=\"", '"')).any(|t| is_ledger(&t))
}

/// The check itself, on `files` under `root`: every paragraph that claims something about encryption links to
/// the compromise ledger or is allowed; returns the offenders and the allowlist entries nothing matched.
fn unlinked_encryption_claims(root: &Path, files: &[PathBuf]) -> (Vec<String>, Vec<&'static str>) {
    let mut offenders = Vec::new();
    let mut used = vec![false; ENCRYPTION_CLAIMS_ALLOWED.len()];
    for file in files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        let relative = file.strip_prefix(root).unwrap_or(file).to_string_lossy().replace('\\', "/");
        let html = relative.ends_with(".html");
        let paragraphs = if html { html_paragraphs(&text) } else { markdown_paragraphs(&text) };
        for paragraph in paragraphs {
            let lower = paragraph.to_lowercase();
            let claims = encryption_claims(&lower);
            if claims.is_empty() || links_to_the_ledger(&lower) {
                continue;
            }
            let allowed = ENCRYPTION_CLAIMS_ALLOWED
                .iter()
                .position(|(path, fragment, _)| *path == relative && lower.contains(fragment));
            match allowed {
                Some(at) => used[at] = true,
                None => {
                    let lines = paragraph.lines().filter(|l| !encryption_claims(&l.to_lowercase()).is_empty());
                    let lines: Vec<&str> = lines.map(str::trim).collect();
                    offenders.push(format!(
                        "{relative}: says {claims:?} in a paragraph that does not link the compromise ledger: {}",
                        lines.join(" / ")
                    ))
                }
            }
        }
    }
    let unused = ENCRYPTION_CLAIMS_ALLOWED
        .iter()
        .zip(used)
        .filter(|(_, used)| !used)
        .map(|((_, fragment, _), _)| *fragment)
        .collect();
    (offenders, unused)
}

/// Claims about encryption live on the compromise ledger (`docs/compromises.md`, served at `/compromises`),
/// which says what sealing protects and what it leaves open: no doc or served page says "cannot read",
/// "end-to-end" or "encrypted" (or e2e, E2EE) without linking to it in the same paragraph, except the uses
/// [`ENCRYPTION_CLAIMS_ALLOWED`] names.
#[test]
fn encryption_claims_link_to_the_compromise_ledger() {
    let root = workspace();
    let files = docs_and_pages(&root);
    assert!(files.len() > 20, "the walk found too few docs and pages: {}", files.len());
    let (offenders, unused) = unlinked_encryption_claims(&root, &files);
    assert!(offenders.is_empty(), "{}", offenders.join("\n\n"));
    assert!(unused.is_empty(), "allowlist entries that match nothing any more (remove them): {unused:?}");
}

#[test]
fn the_encryption_claim_check_sees_what_it_must() {
    let dir = std::env::temp_dir().join(format!("tidy-claims-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let check = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).unwrap();
        unlinked_encryption_claims(&dir, &[dir.join(name)]).0.len()
    };
    for (name, text, offenders) in [
        ("a.md", "Sealed rooms are End-to-End encrypted.\n", 1),
        ("b.md", "Sealed rooms are end-to-end\nencrypted; see [the ledger](docs/compromises.md).\n", 0),
        ("b2.md", "Sealed rooms are end-to-end encrypted; see `docs/compromises.md`.\n", 1),
        ("c.md", "Sealed rooms are E2EE.\n\nThe ledger: [here](/compromises).\n", 1),
        ("d.md", "- The registry cannot read it.\n- See `/compromises`.\n", 1),
        ("e.md", "| sealed | e2e |\n| link | [ledger](/compromises) |\n", 1),
        ("e2.md", "| sealed | e2e, see [ledger](../compromises.md) |\n", 0),
        ("f.md", "head 8e2e0f and decrypt(x)\n", 0),
        ("g.html", "<p>Bodies are encrypted.</p>\n<p><a href=\"/compromises\">ledger</a></p>\n", 1),
        ("h.html", "<li>Bodies are encrypted: <a href=\"/compromises\">what that means</a></li>\n", 0),
        ("i.html", "<li><a href=\"/compromises\">Ledger</a><p>Weaker than end-to-end.</p></li>\n", 0),
        ("j.html", "<li><a href=\"/compromises\">Ledger</a></li><li><p>Weaker than end-to-end.</p></li>\n", 1),
    ] {
        assert_eq!(check(name, text), offenders, "{name}: {text}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Names the map speaks of that live outside this workspace (other crates' types, an HTTP status).
const MAP_OUTSIDE_NAMES: &[&str] = &["OsRng", "ThreadRng", "OK", "SystemTime", "rand", "utoipa", "anyhow"];

/// Every Rust item this workspace defines, by name: functions, types, traits, constants, statics, modules,
/// macros and enum variants (a line that starts with the name and a `(`, `{` or `,`), and every file's and
/// directory's name under `crates/`.
fn workspace_names(root: &Path) -> std::collections::HashSet<String> {
    let mut names = std::collections::HashSet::new();
    let mut files = Vec::new();
    files_named(&root.join("crates"), &|_| true, &mut files);
    let keywords = ["fn ", "struct ", "enum ", "trait ", "type ", "const ", "static ", "mod ", "macro_rules! "];
    for file in files {
        for part in file.strip_prefix(root).unwrap().iter() {
            let part = part.to_string_lossy();
            names.insert(part.trim_end_matches(".rs").to_string());
        }
        if file.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        for line in std::fs::read_to_string(&file).unwrap().lines() {
            let line = line.trim_start();
            for keyword in keywords {
                for (i, _) in line.match_indices(keyword) {
                    let before = line[..i].chars().last();
                    if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                        continue;
                    }
                    let name: String =
                        line[i + keyword.len()..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    names.insert(name);
                }
            }
            // Environment variables and other names the code spells as a string: `"BAZAAR_LOG"`.
            for literal in line.split('"').skip(1).step_by(2) {
                if !literal.is_empty() && literal.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                    names.insert(literal.to_string());
                }
            }
            let variant: String = line.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if line[variant.len()..].starts_with(['(', '{', ',', ' ']) && variant.starts_with(char::is_uppercase) {
                names.insert(variant);
            }
        }
    }
    names
}

/// What a backticked span of the map names, if it names a path or a Rust item: `Some(checks)` where each
/// check is a path (contains `/` or a file extension) or an item name; `None` for prose, commands, routes,
/// headers, keys and SQL.
fn map_names(span: &str) -> Option<Vec<String>> {
    let rusty = |c: char| c.is_alphanumeric() || c == '_';
    if span.contains([' ', '{', '<', '*', '=', '\'', '.']) && !span.ends_with(".rs") && !span.ends_with(".md") {
        return None;
    }
    if span.starts_with(['/', '-']) || span.contains(":{") {
        return None;
    }
    if span.contains('/') || span.ends_with(".rs") || span.ends_with(".md") {
        return Some(vec![span.trim_end_matches('/').to_string()]);
    }
    let span = span.trim_end_matches('!');
    let segments: Vec<&str> = span.split("::").collect();
    // Another crate's item, or an HTTP header (`Retry-After`).
    if MAP_OUTSIDE_NAMES.contains(&segments[0]) || (span.contains('-') && span.starts_with(char::is_uppercase)) {
        return None;
    }
    if segments.iter().any(|s| s.is_empty() || !s.replace('-', "_").chars().all(rusty)) {
        return None;
    }
    if segments.len() == 1 {
        let name = segments[0];
        // A type or a constant, or a test's name; single lowercase words are prose.
        let named = name.starts_with(char::is_uppercase) || name.matches('_').count() >= 3;
        return named.then(|| vec![name.to_string()]);
    }
    Some(segments.iter().map(|s| s.replace('-', "_")).collect())
}

/// The map (`ARCHITECTURE.md`) stays true: every file or directory it names exists, and every Rust item it
/// names (`Batch::emit`, `bazaar_store::packed`, `AppState`, `IDEMPOTENCY_RETENTION_S`, a test's name) is
/// defined somewhere in the workspace.
#[test]
fn the_map_names_only_what_exists() {
    let root = workspace();
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let names = workspace_names(&root);
    let mut files = Vec::new();
    files_named(&root, &|_| true, &mut files);
    let paths: Vec<String> = files.iter().map(|f| f.strip_prefix(&root).unwrap().display().to_string()).collect();
    let mut missing = Vec::new();
    for span in map.split('`').skip(1).step_by(2) {
        let Some(checks) = map_names(span) else { continue };
        for check in checks {
            let crate_name = check.replace('_', "-");
            let known = if check.contains('/') || check.contains('.') {
                root.join(&check).exists()
                    || root.join("crates").join(&check).exists()
                    || paths.iter().any(|p| p.ends_with(&format!("/{check}")) || p.contains(&format!("/{check}/")))
            } else {
                names.contains(&check)
                    || MAP_OUTSIDE_NAMES.contains(&check.as_str())
                    || root.join("crates").join(&crate_name).is_dir()
                    || ["std", "serde_json"].contains(&check.as_str())
            };
            if !known {
                missing.push(format!("`{span}` ({check})"));
            }
        }
    }
    assert!(missing.is_empty(), "ARCHITECTURE.md names what does not exist: {missing:?}");
}

/// The Rust SDK's public methods take and return wire types, never `serde_json::Value` (`Client::call`/`send`
/// are generic over the answer): no `pub fn` signature in `bazaar-sdk` names `Value`.
#[test]
fn no_public_sdk_method_takes_or_returns_json() {
    let mut files = Vec::new();
    rust_files(&workspace().join("crates/bazaar-sdk/src"), &mut files);
    let mut untyped = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (at, _) in text.match_indices("pub fn ").chain(text.match_indices("pub async fn ")) {
            let signature = &text[at..text[at..].find('{').map_or(text.len(), |end| at + end)];
            let words = signature.split(|c: char| !(c.is_alphanumeric() || c == '_'));
            if words.into_iter().any(|word| word == "Value") {
                untyped.push(format!(
                    "{}: {}",
                    file.display(),
                    signature.split_whitespace().collect::<Vec<_>>().join(" ")
                ));
            }
        }
    }
    assert!(untyped.is_empty(), "public SDK methods that speak JSON: {untyped:#?}");
}

/// Every operation answers a typed body: only the OpenAPI document itself is described as a free-form object.
#[test]
fn only_the_api_description_answers_a_free_form_object() {
    let mut files = Vec::new();
    rust_files(&workspace().join("crates/bazaar-server/src"), &mut files);
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for line in text.lines().filter(|line| line.contains("#[utoipa::path(") && line.contains("OpenObject")) {
            assert!(line.contains("path = \"/openapi.json\""), "{} answers a free-form object: {line}", file.display());
        }
    }
}
