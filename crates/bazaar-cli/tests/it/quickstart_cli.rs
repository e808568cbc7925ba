//! The CLI quick starts run verbatim: the README's walkthrough (`<!-- quickstart: cli -->`) and
//! `docs/connect-an-agent.md`'s (`connect`), their marked blocks extracted from the Markdown by
//! `common/markdown.rs` (the marker grammar and parser of every quick start the tests run, the SDK READMEs'
//! in `quickstart_sdks.rs` too) and run in order, in one `bash` (so a variable one block sets is there for the
//! next, as in the reader's terminal), from a scratch copy of the repository (`git ls-files` copied into a temp
//! dir, so nothing the suite built is there that a fresh clone lacks), against a registry this test starts there.
//!
//! What the test supplies, as the docs tell the reader to:
//! - the registry: `bazaar serve` in the copy (the README's first "Using it" line), on a free port instead of
//!   7878, with `BAZAAR_REGISTRY` naming it — the variable the commands and the docs' `curl` lines read;
//! - `bazaar` on `PATH`: the binary this build made (env!("CARGO_BIN_EXE_bazaar")), as the README's
//!   `export PATH="$PWD/target/release:$PATH"` would; a block line `cargo run --release -- X` runs as
//!   `bazaar X` (compiling release here would take minutes);
//! - `file=PATH` blocks are written to PATH in the copy; after a `waits-for=TEXT` block the test waits for a
//!   line of output holding TEXT (a background process saying it listens, a message arriving).
//!
//! The connect quick start installs `websockets` from PyPI into a fresh venv, as it tells the reader to.

use crate::common;
use crate::common::markdown;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long one block may run (the connect quick start installs a package from PyPI).
const BLOCK_TIMEOUT: Duration = Duration::from_secs(240);
/// How long a `waits-for` line may take to appear after its block.
const WAIT_TIMEOUT: Duration = Duration::from_secs(60);
/// Printed after each block, so the test knows the shell has run it.
const DONE: &str = "__quickstart_block_done__";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// `<temp>/quickstart-<name>-<pid>/{repo,bin}`: the tracked files copied into `repo`, and `bin/bazaar`.
fn scratch_clone(name: &str) -> (PathBuf, PathBuf) {
    let root = std::env::temp_dir().join(format!("quickstart-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&root).ok();
    let (repo, bin) = (root.join("repo"), root.join("bin"));
    let listed = Command::new("git").args(["ls-files", "-z"]).current_dir(workspace()).output().unwrap();
    assert!(listed.status.success(), "git ls-files failed");
    for file in listed.stdout.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        let file = String::from_utf8_lossy(file).to_string();
        let (from, to) = (workspace().join(&file), repo.join(&file));
        if from.is_file() {
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&from, &to).unwrap();
        }
    }
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_bazaar"), bin.join("bazaar")).unwrap();
    (repo, bin)
}

/// `bazaar serve` with its store in `repo/bazaar-data` (where the README's own `serve` puts it, run in the
/// clone), on a free port; its URL.
fn serve_in(repo: &Path) -> (Child, String) {
    let port = common::free_port();
    let data_dir = repo.join("bazaar-data").display().to_string();
    let registry = common::spawn_serve(&["--port".into(), port.to_string(), "--data-dir".into(), data_dir]);
    (registry, format!("http://127.0.0.1:{port}"))
}

/// A `bash` fed the blocks on stdin in its own process group (so its background jobs end with it), its
/// stdout and stderr as one stream of lines.
struct Shell {
    bash: Child,
    lines: Receiver<String>,
    transcript: Vec<String>,
}

impl Shell {
    fn start(repo: &Path, bin: &Path, registry: &str) -> Shell {
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let mut bash = Command::new("bash")
            .args(["--noprofile", "--norc", "-e", "-o", "pipefail"])
            .current_dir(repo)
            .env("PATH", path)
            .env("BAZAAR_REGISTRY", registry)
            .env("BAZAAR_LOG", "warn")
            .env_remove("BAZAAR_CREDENTIAL")
            .env_remove("BAZAAR_CREDENTIAL_FILE")
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start bash");
        let (send, lines) = channel();
        let stdout = BufReader::new(bash.stdout.take().unwrap());
        std::thread::spawn(move || stdout.lines().map_while(Result::ok).try_for_each(|line| send.send(line)));
        let mut shell = Shell { bash, lines, transcript: Vec::new() };
        shell.write("exec 2>&1\n");
        shell
    }

    fn write(&mut self, text: &str) {
        let stdin = self.bash.stdin.as_mut().unwrap();
        stdin.write_all(text.as_bytes()).and_then(|()| stdin.flush()).expect("the shell takes its input");
    }

    /// Reads lines until one holds `text` (or one already read since line `since` of the transcript does);
    /// panics with the transcript on a timeout or when the shell ends.
    fn wait_for(&mut self, text: &str, since: usize, timeout: Duration, what: &str) {
        if self.transcript[since..].iter().any(|line| line.contains(text)) {
            return;
        }
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            match self.lines.recv_timeout(Duration::from_millis(200)) {
                Ok(line) => {
                    let found = line.contains(text);
                    self.transcript.push(line);
                    if found {
                        return;
                    }
                }
                // A background job may hold the output open after the shell itself ended on a failed command.
                Err(RecvTimeoutError::Timeout) => match self.bash.try_wait() {
                    Ok(Some(status)) => {
                        self.transcript.extend(self.lines.try_iter());
                        panic!("{what}: the shell stopped ({status}): a command failed\n{}", self.log())
                    }
                    _ => continue,
                },
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("{what}: the shell stopped (a command failed)\n{}", self.log())
                }
            }
        }
        panic!("{what}: no line with {text:?} within {timeout:?}\n{}", self.log())
    }

    fn log(&self) -> String {
        self.transcript.join("\n")
    }
}

/// Ends the shell and everything it started in the background, also when a block failed and the test panics.
impl Drop for Shell {
    fn drop(&mut self) {
        let group = format!("-{}", self.bash.id());
        Command::new("kill").args(["-TERM", "--", &group]).status().ok();
        self.bash.wait().ok();
    }
}

/// The registry a quick start runs against, stopped when the test ends however it ends.
struct Registry(Child);

impl Drop for Registry {
    fn drop(&mut self) {
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

/// Runs quick start `name` of `doc` (a path in the repository) as the module's header says; returns the
/// copy's directory (its registry stopped) and the shell's transcript.
fn run_quickstart(doc: &str, name: &str) -> (PathBuf, String) {
    let markdown = std::fs::read_to_string(workspace().join(doc)).unwrap();
    let blocks = markdown::quickstart_blocks(&markdown, name);
    assert!(!blocks.is_empty(), "{doc} marks no block of quick start {name}");
    let (repo, bin) = scratch_clone(name);
    let (registry, url) = serve_in(&repo);
    let registry = Registry(registry);
    let mut shell = Shell::start(&repo, &bin, &url);
    for block in &blocks {
        let what = format!("{doc}:{} ({name})", block.line);
        if let Some(file) = block.attribute("file") {
            std::fs::write(repo.join(file), &block.code).unwrap();
            continue;
        }
        // The one substitution: `cargo run --release -- X` is the built `bazaar X`.
        let code = block.code.replace("cargo run --release -- ", "bazaar ");
        shell.transcript.push(format!("$ # {what}\n{code}"));
        let since = shell.transcript.len();
        shell.write(&format!("{code}\necho {DONE}\n"));
        shell.wait_for(DONE, since, BLOCK_TIMEOUT, &what);
        if let Some(text) = block.attribute("waits-for") {
            shell.wait_for(text, since, WAIT_TIMEOUT, &what);
        }
    }
    let transcript = shell.log();
    drop(shell);
    drop(registry);
    (repo, transcript)
}

/// The registry a quick start ran on still audits clean: every balance recomputed, the chain whole.
fn assert_audits(repo: &Path) {
    let audit = Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["audit", "--data-dir"])
        .arg(repo.join("bazaar-data"))
        .output()
        .unwrap();
    assert!(audit.status.success(), "audit failed: {}", String::from_utf8_lossy(&audit.stdout));
}

#[test]
fn the_readme_walkthrough_runs_as_written() {
    // The walkthrough's merchant listens on 8080, as written; say so plainly if something else holds it.
    let free = std::net::TcpListener::bind("127.0.0.1:8080").is_ok();
    assert!(free, "127.0.0.1:8080 is taken: the README's merchant listens there; stop whatever holds it");
    let (repo, transcript) = run_quickstart("README.md", "cli");
    // Two sends of order o-1, one settlement, the work run once: the buyer paid 250 once.
    assert!(transcript.contains("\"balance_minor\": 49750"), "{transcript}");
    assert_eq!(transcript.matches("\"work_run\":1").count(), 2, "{transcript}");
    assert_audits(&repo);
    std::fs::remove_dir_all(repo.parent().unwrap()).ok();
}

#[test]
fn the_connect_an_agent_quick_start_runs_as_written() {
    let (repo, transcript) = run_quickstart("docs/connect-an-agent.md", "connect");
    // The resident loop heard the owner's hello over the WebSocket and saved its cursor after handling it.
    assert!(transcript.contains("@carol: hello, procurement"), "{transcript}");
    let cursor = std::fs::read_to_string(repo.join("agent.cursor")).unwrap_or_default();
    assert!(cursor.trim().parse::<u64>().is_ok_and(|c| c > 0), "cursor {cursor:?}\n{transcript}");
    assert_audits(&repo);
    std::fs::remove_dir_all(repo.parent().unwrap()).ok();
}

#[test]
fn demo_serve_prints_a_buyer_and_a_merchant_ready_to_use() {
    let mut demo = Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["demo", "--serve", "--calls", "2", "--viewer-wait-s", "0"])
        .env("BAZAAR_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = BufReader::new(demo.stdout.take().unwrap()).lines().map_while(Result::ok);
    let exports: Vec<String> = lines.filter(|l| l.starts_with("export BAZAAR_REGISTRY=")).take(2).collect();
    assert_eq!(exports.len(), 2, "{exports:?}");
    let env = |line: &str, name: &str| {
        let word = line.split_whitespace().find_map(|w| w.strip_prefix(&format!("{name}="))).unwrap();
        word.to_string()
    };
    let me = |line: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_bazaar"))
            .args(["--json", "me"])
            .env("BAZAAR_REGISTRY", env(line, "BAZAAR_REGISTRY"))
            .env("BAZAAR_CREDENTIAL", env(line, "BAZAAR_CREDENTIAL"))
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stdout));
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let (buyer, merchant) = (me(&exports[0]), me(&exports[1]));
    // Ctrl-C, so the demo removes its temporary registry as a user's would.
    Command::new("kill").args(["-INT", &demo.id().to_string()]).status().ok();
    demo.wait().ok();
    // Rotated (an enrollment credential would be refused `rotation_required`), and the buyer can spend.
    assert_eq!(buyer["member"]["handle"], "your-buyer");
    assert!(buyer["available_minor"].as_i64().unwrap() > 0, "{buyer}");
    assert_eq!(merchant["member"]["handle"], "your-merchant");
}
