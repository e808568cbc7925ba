//! Each SDK README's quick start (`clients/python/README.md`, `clients/typescript/README.md`), run verbatim from a
//! scratch copy of the repository, as a newcomer would type it: the Python one in a fresh venv installing the
//! package as its README says, the TypeScript one in a fresh npm project installing the packed SDK (its peer
//! dependency `better-sqlite3` resolved from that project), both against a real `bazaar serve` this test starts.
//!
//! The README marks what runs with an HTML comment before a fenced block, so the docs cannot drift from what is
//! tested:
//!
//! - `<!-- quickstart: registry -->` — the registry's command; it must read [`REGISTRY_COMMAND`], which this test
//!   runs with the built binary in place of `cargo run --release --` and a free port in place of 7878;
//! - `<!-- quickstart: file NAME -->` — the block is written to `NAME` in the project directory;
//! - `<!-- quickstart: run -->` — the block runs in bash (`-euo pipefail`) in the project directory and must succeed;
//! - `<!-- quickstart: background -->` — the block is started and left running until `SHOP_PORT` accepts;
//! - `<!-- quickstart: output -->` — every line of the block appears in what the last `run` block printed.
//!
//! The blocks see `BAZAAR` (the scratch copy), `BAZAAR_REGISTRY` (the registry's URL) and `SHOP_PORT` (a free port
//! for the merchant), which the READMEs tell the reader to set or default.

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What a README's `registry` block must say.
const REGISTRY_COMMAND: &str =
    r#"cd "$BAZAAR" && cargo run --release -- serve --port 7878 --operator-credential op-secret"#;
/// The longest one `run` block may take (installing the packages from their registries and building
/// `better-sqlite3` included).
const RUN_BLOCK_TIMEOUT_S: u64 = 600;
/// The longest a `background` block may take to accept connections on `SHOP_PORT`.
const BACKGROUND_READY_S: u64 = 60;
/// The SDK READMEs whose quick starts run, and the project directory each runs in.
const READMES: [(&str, &str); 2] =
    [("clients/python/README.md", "py-project"), ("clients/typescript/README.md", "ts-project")];

/// What a marked block asks for.
#[derive(Debug)]
enum Step {
    Registry(String),
    File(String, String),
    Run(String),
    Background(String),
    Output(String),
}

/// The marked blocks of `readme`, in order.
fn steps(readme: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        let Some(mark) = line.trim().strip_prefix("<!-- quickstart:").and_then(|m| m.strip_suffix("-->")) else {
            continue;
        };
        let fence = lines.by_ref().find(|l| !l.trim().is_empty()).unwrap_or_default();
        assert!(fence.trim().starts_with("```"), "a quickstart mark is followed by a fenced block, not {fence:?}");
        // A block inside a list item is indented as its fence is: the code is what follows that indent.
        let indent = fence.len() - fence.trim_start().len();
        let block: Vec<&str> = lines
            .by_ref()
            .take_while(|l| l.trim() != "```")
            .map(|l| l.get(indent..).unwrap_or(l.trim_start()))
            .collect();
        let text = block.join("\n") + "\n";
        steps.push(match mark.trim().split_once(' ').unwrap_or((mark.trim(), "")) {
            ("registry", _) => Step::Registry(text.trim().to_string()),
            ("file", name) => Step::File(name.trim().to_string(), text),
            ("run", _) => Step::Run(text),
            ("background", _) => Step::Background(text),
            ("output", _) => Step::Output(text),
            (other, _) => panic!("unknown quickstart mark {other:?}"),
        });
    }
    steps
}

/// Copies the repository's files (tracked, and new ones not ignored — never a `node_modules`, `dist` or venv) to
/// `to`, as a fresh clone would have them.
fn scratch_copy(to: &Path) {
    let root = common::repo_root();
    let listed = Command::new("git")
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(listed.status.success(), "git ls-files: {}", String::from_utf8_lossy(&listed.stderr));
    for path in listed.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let path = Path::new(std::str::from_utf8(path).unwrap());
        let from = root.join(path);
        if !from.is_file() {
            continue; // deleted in the work tree
        }
        let target = to.join(path);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&from, &target).unwrap();
    }
}

/// `bazaar serve` as the README's registry block says, on `port`, keeping its data where running it in `clone`
/// (`cd "$BAZAAR"`) would: the default `./bazaar-data`.
fn start_registry(command: &str, clone: &Path, port: u16) -> Child {
    assert_eq!(command, REGISTRY_COMMAND, "the README's registry command is the one this test runs");
    let args = command.split_once("cargo run --release -- serve ").unwrap().1.replace("7878", &port.to_string());
    let mut args: Vec<String> = args.split_whitespace().map(str::to_string).collect();
    args.extend(["--data-dir".to_string(), clone.join("bazaar-data").display().to_string()]);
    common::spawn_serve(&args)
}

/// A quick start's shell: bash (`-euo pipefail`), under `timeout` when `timeout_s` is given, in `project` with
/// the environment the README names.
fn shell(text: &str, project: &Path, env: &[(&str, String)], timeout_s: Option<u64>) -> Command {
    let mut command = match timeout_s {
        Some(seconds) => {
            let mut command = Command::new("timeout");
            command.args([seconds.to_string(), "bash".into()]);
            command
        }
        None => Command::new("bash"),
    };
    command.args(["-euo", "pipefail", "-c", text]).current_dir(project).envs(env.iter().map(|(k, v)| (k, v)));
    command
}

/// Waits until something accepts connections on 127.0.0.1:`port`, or the deadline passes.
fn wait_for_port(port: u16, background: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(BACKGROUND_READY_S);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = background.try_wait().unwrap() {
            panic!("the background block exited ({status}) before listening on {port}");
        }
        assert!(Instant::now() < deadline, "nothing listened on {port} within {BACKGROUND_READY_S} s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A process this test started, ended with everything it started (its process group) when dropped — also when
/// an assertion fails, so no merchant or registry outlives the test.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        Command::new("kill").args(["-TERM", "--", &group]).stderr(Stdio::null()).status().ok();
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

/// Runs one README's quick start in a fresh `project` directory; what its `run` blocks printed, in order.
fn run_quick_start(readme: &str, steps: &[Step], project: &Path, env: &[(&str, String)]) -> Vec<String> {
    std::fs::create_dir_all(project).unwrap();
    let (mut printed, mut background, mut last) = (Vec::new(), Vec::new(), String::new());
    for step in steps {
        match step {
            Step::Registry(_) => {}
            Step::File(name, text) => std::fs::write(project.join(name), text).unwrap(),
            Step::Run(text) => {
                let output =
                    shell(text, project, env, Some(RUN_BLOCK_TIMEOUT_S)).stdin(Stdio::null()).output().unwrap();
                let (out, err) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
                assert!(
                    output.status.success(),
                    "{readme}: `{}` failed ({}):\n{out}\n{err}",
                    text.trim(),
                    output.status
                );
                last = out.to_string();
                printed.push(last.clone());
            }
            Step::Background(text) => {
                let mut command = shell(text, project, env, None);
                command.process_group(0).stdout(Stdio::null()).stderr(Stdio::null());
                let mut child = command.spawn().unwrap();
                let port = env.iter().find(|(k, _)| *k == "SHOP_PORT").unwrap().1.parse().unwrap();
                wait_for_port(port, &mut child);
                background.push(Running(child));
            }
            Step::Output(text) => {
                for line in text.lines().filter(|l| !l.trim().is_empty()) {
                    assert!(last.contains(line), "{readme}: the output shown (`{line}`) is not what ran:\n{last}");
                }
            }
        }
    }
    drop(background);
    printed
}

#[test]
fn each_sdk_readme_quick_start_runs_verbatim_from_a_scratch_copy() {
    let dir = common::fresh_dir("bazaar-quickstart-sdks");
    let clone: PathBuf = dir.join("bazaar");
    scratch_copy(&clone);
    for stale in ["clients/typescript/node_modules", "clients/typescript/dist", "clients/python/.venv"] {
        assert!(!clone.join(stale).exists(), "the scratch copy has no {stale}");
    }
    let readmes: Vec<(&str, &str, Vec<Step>)> = READMES
        .iter()
        .map(|(path, project)| (*path, *project, steps(&std::fs::read_to_string(clone.join(path)).unwrap())))
        .collect();
    let registry_port = common::free_port();
    let (_, _, first) = &readmes[0];
    let Some(Step::Registry(command)) = first.iter().find(|s| matches!(s, Step::Registry(_))) else {
        panic!("{}: no `quickstart: registry` block", READMES[0].0)
    };
    let registry = Running(start_registry(command, &clone, registry_port));
    for (readme, project, steps) in &readmes {
        for kind in ["registry", "file", "run", "background", "output"] {
            let has = steps.iter().any(|s| format!("{s:?}").to_lowercase().starts_with(kind));
            assert!(has, "{readme}: no `quickstart: {kind}` block");
        }
        let env = [
            ("BAZAAR", clone.display().to_string()),
            ("BAZAAR_REGISTRY", format!("http://127.0.0.1:{registry_port}")),
            ("SHOP_PORT", common::free_port().to_string()),
        ];
        let started = Instant::now();
        let printed = run_quick_start(readme, steps, &dir.join(project), &env);
        eprintln!("{readme}: {} run blocks in {:.0} s", printed.len(), started.elapsed().as_secs_f64());
    }
    drop(registry);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn marked_blocks_are_read_in_order_with_a_list_items_indent_removed() {
    let readme = "# x\n<!-- quickstart: registry -->\n```sh\ncd \"$BAZAAR\" && serve\n```\n\n1. Write it:\n\n   \
                  <!-- quickstart: file a.py -->\n   ```python\n   def f():\n       return 1\n\n   print(f())\n   ```\n\
                  ```sh\nnot marked\n```\n<!-- quickstart: run -->\n```sh\npython a.py\n```\n";
    let steps = format!("{:?}", steps(readme));
    assert_eq!(
        steps,
        r#"[Registry("cd \"$BAZAAR\" && serve"), File("a.py", "def f():\n    return 1\n\nprint(f())\n"), Run("python a.py\n")]"#
    );
}
