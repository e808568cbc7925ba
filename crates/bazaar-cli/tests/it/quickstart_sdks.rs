//! Each SDK README's quick start (`clients/python/README.md`'s `python`, `clients/typescript/README.md`'s
//! `typescript`), run verbatim from a scratch copy of the repository, as a newcomer would type it: the Python one
//! in a fresh venv installing the package as its README says, the TypeScript one in a fresh npm project
//! installing the packed SDK (its peer dependency `better-sqlite3` resolved from that project), both against a
//! real `bazaar serve` this test starts.
//!
//! The README marks what runs as every quick start the tests run is marked (`common/markdown.rs`): an HTML
//! comment `<!-- quickstart: NAME [attribute …] -->` before a fenced block, so the docs cannot drift from what
//! is tested. Every marked block of the README belongs to its quick start, and its attributes say what it is:
//!
//! - `<!-- quickstart: NAME registry -->` — the registry's command; it must read [`REGISTRY_COMMAND`], which this
//!   test runs with the built binary in place of `cargo run --release --` and a free port in place of 7878;
//! - `<!-- quickstart: NAME file=PATH -->` — the block is written to `PATH` in the project directory;
//! - `<!-- quickstart: NAME -->` — the block runs in bash (`-euo pipefail`) in the project directory and must
//!   succeed;
//! - `<!-- quickstart: NAME background -->` — the block is started and left running until `SHOP_PORT` accepts;
//! - `<!-- quickstart: NAME output -->` — every line of the block appears in what the last block that ran printed.
//!
//! The blocks see `BAZAAR` (the scratch copy), `BAZAAR_REGISTRY` (the registry's URL) and `SHOP_PORT` (a free port
//! for the merchant), which the READMEs tell the reader to set or default.

use crate::common;
use crate::common::markdown;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What a README's `registry` block must say.
const REGISTRY_COMMAND: &str =
    r#"cd "$BAZAAR" && cargo run --release -- serve --port 7878 --operator-credential op-secret"#;
/// The longest one block that runs (one with no attribute) may take (installing the packages from their
/// registries and building `better-sqlite3` included).
const RUN_BLOCK_TIMEOUT_S: u64 = 600;
/// The longest a `background` block may take to accept connections on `SHOP_PORT`.
const BACKGROUND_READY_S: u64 = 60;
/// The SDK READMEs whose quick starts run: each README, its quick start's name, and the project directory it
/// runs in.
const READMES: [(&str, &str, &str); 2] = [
    ("clients/python/README.md", "python", "py-project"),
    ("clients/typescript/README.md", "typescript", "ts-project"),
];
/// The attributes a block may carry, at most one of them; a block with none runs.
const KINDS: [&str; 4] = ["registry", "file", "background", "output"];

/// What a marked block asks for.
#[derive(Debug)]
enum Step {
    Registry(String),
    File(String, String),
    Run(String),
    Background(String),
    Output(String),
}

impl Step {
    /// Its attribute in the marker (`run` for a block with none).
    fn kind(&self) -> &'static str {
        match self {
            Step::Registry(_) => "registry",
            Step::File(..) => "file",
            Step::Run(_) => "run",
            Step::Background(_) => "background",
            Step::Output(_) => "output",
        }
    }
}

/// The blocks of quick start `name` in `readme`, in order — every block the README marks, which must all be it.
fn steps(readme: &str, name: &str) -> Vec<Step> {
    let blocks = markdown::all_quickstart_blocks(readme);
    if let Some(other) = blocks.iter().find(|block| block.quickstart != name) {
        panic!("line {}: a block of quick start `{}`, not `{name}`", other.line, other.quickstart);
    }
    blocks
        .into_iter()
        .map(|block| {
            let line = block.line;
            let unknown = block.attributes.iter().find(|(key, _)| !KINDS.contains(&key.as_str()));
            assert!(unknown.is_none(), "line {line}: unknown quickstart attribute {unknown:?}");
            assert!(block.attributes.len() <= 1, "line {line}: one of {KINDS:?} at most, not {:?}", block.attributes);
            match block.attributes.first().map(|(key, value)| (key.as_str(), value.as_str())) {
                None => Step::Run(block.code),
                Some(("registry", _)) => Step::Registry(block.code.trim().to_string()),
                Some(("file", path)) => {
                    assert!(!path.is_empty(), "line {line}: `file` names no path (`file=PATH`)");
                    Step::File(path.to_string(), block.code)
                }
                Some(("background", _)) => Step::Background(block.code),
                Some(("output", _)) => Step::Output(block.code),
                Some((other, _)) => unreachable!("{other} is not in KINDS"),
            }
        })
        .collect()
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

/// Runs one README's quick start in a fresh `project` directory; what the blocks it ran printed, in order.
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
        .map(|(path, name, project)| {
            (*path, *project, steps(&std::fs::read_to_string(clone.join(path)).unwrap(), name))
        })
        .collect();
    let registry_port = common::free_port();
    let (_, _, first) = &readmes[0];
    let Some(Step::Registry(command)) = first.iter().find(|s| matches!(s, Step::Registry(_))) else {
        panic!("{}: no `quickstart: {} registry` block", READMES[0].0, READMES[0].1)
    };
    let registry = Running(start_registry(command, &clone, registry_port));
    for (readme, project, steps) in &readmes {
        for kind in ["registry", "file", "run", "background", "output"] {
            assert!(steps.iter().any(|s| s.kind() == kind), "{readme}: no `{kind}` block in its quick start");
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
fn marked_blocks_become_steps_in_order() {
    let readme = concat!(
        "# x\n<!-- quickstart: py registry -->\n```sh\ncd \"$BAZAAR\" && serve\n```\n\n",
        "1. Write it:\n\n   <!-- quickstart: py file=a.py -->\n   ```python\n   print(1)\n   ```\n",
        "```sh\nnot marked\n```\n<!-- quickstart: py -->\n```sh\npython a.py\n```\n",
        "<!-- quickstart: py background -->\n```sh\nshop\n```\n<!-- quickstart: py output -->\n```text\n1\n```\n",
    );
    let steps: Vec<String> = steps(readme, "py").iter().map(|step| format!("{step:?}")).collect();
    assert_eq!(
        steps,
        [
            r#"Registry("cd \"$BAZAAR\" && serve")"#,
            r#"File("a.py", "print(1)\n")"#,
            r#"Run("python a.py\n")"#,
            r#"Background("shop\n")"#,
            r#"Output("1\n")"#,
        ]
    );
}

#[test]
#[should_panic(expected = "unknown quickstart attribute")]
fn an_attribute_the_test_gives_no_meaning_is_an_error() {
    steps("<!-- quickstart: py waits-for=x -->\n```sh\ntrue\n```\n", "py");
}

#[test]
#[should_panic(expected = "a block of quick start `ts`, not `py`")]
fn a_block_of_another_quick_start_is_an_error() {
    steps("<!-- quickstart: py -->\n```sh\ntrue\n```\n<!-- quickstart: ts -->\n```sh\ntrue\n```\n", "py");
}
