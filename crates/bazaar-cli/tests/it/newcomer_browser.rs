//! The first five minutes, in Debian's headless Chromium: the real `bazaar demo --serve` is started as a
//! newcomer starts it, the printed URL is opened while the demo waits for its first viewer, and each of the
//! chamber's three story panels (the paid call, the contract, the dispute) must fill within
//! [`PANEL_FILL_S`]. Once the story is told, `tests/browser/newcomer.mjs` walks every page as an anonymous
//! visitor, as a signed-in member and as the operator, at 1280 and 390 px, failing on a `?` placeholder,
//! `undefined`, `NaN`, a console error or horizontal overflow. Its screenshots go to
//! `target/chamber-screenshots/newcomer`, or — with `BAZAAR_DOCS_SCREENSHOTS=1` — to `docs/chamber/`, where
//! `docs/chamber.md` shows them.
//!
//! Needs `/usr/bin/chromium` and `tests/browser/node_modules`; `./scripts/test` installs both. Without them this
//! test fails; it never passes silently.

use crate::common;

use bazaar_stage::enroll_pair;
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Each story panel fills within this many seconds of the newcomer opening the printed URL.
const PANEL_FILL_S: u64 = 90;
/// The demo announces its chamber (and waits for a viewer) within this many seconds of starting.
const DEMO_ANNOUNCE_S: u64 = 120;
/// The story ends (the demo says the chamber stays open) within this many seconds of the first viewer.
const STORY_END_S: u64 = 300;
/// Set to `1` to write the walk's screenshots into `docs/chamber/` instead of `target/`.
const DOCS_SCREENSHOTS_ENV: &str = "BAZAAR_DOCS_SCREENSHOTS";

/// `bazaar demo --serve` as a child process, its stdout read line by line on a thread; killed when dropped.
struct Demo {
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
    said: Vec<String>,
}

impl Demo {
    fn start() -> Demo {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bazaar"))
            .args(["demo", "--serve"])
            .env("BAZAAR_LOG", "warn")
            .env_remove("BAZAAR_OPERATOR_CREDENTIAL")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start bazaar demo --serve");
        let (send, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Demo { child, lines, said: Vec::new() }
    }

    /// The lines said until one containing `mark` (that one included), within `within_s`.
    fn until(&mut self, mark: &str, within_s: u64) -> &str {
        let deadline = std::time::Instant::now() + Duration::from_secs(within_s);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {mark:?} within {within_s} s: {:?}", self.said));
            self.said.push(line);
            if self.said.last().unwrap().contains(mark) {
                return self.said.last().unwrap();
            }
        }
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_sees_the_story_fill_every_panel_and_every_page_reads_cleanly() {
    let mut demo = Demo::start();
    let url = demo.until("chamber on ", DEMO_ANNOUNCE_S).trim_start_matches("chamber on ").to_string();
    let operator_credential =
        demo.until("operator credential", DEMO_ANNOUNCE_S).rsplit(' ').next().unwrap().to_string();
    demo.until("waiting for the first viewer", DEMO_ANNOUNCE_S);

    let (report, exited_ok) =
        common::browser_driver("newcomer", vec!["panels".into(), url.clone(), PANEL_FILL_S.to_string()]).await;
    assert_eq!(report["problems"], json!([]), "{report}");
    for panel in ["paid_call", "contract", "dispute"] {
        let seconds = report["panels"][panel]["seconds"].as_f64().unwrap_or(f64::MAX);
        assert!(seconds <= PANEL_FILL_S as f64, "{panel} filled after {seconds} s: {report}");
    }
    assert!(exited_ok, "{report}");
    println!("panels filled (seconds after the newcomer opened the URL): {}", report["panels"]);
    demo.until("a viewer opened the chamber", DEMO_ANNOUNCE_S);
    demo.until("Ctrl-C", STORY_END_S);
    assert!(demo.said.iter().any(|l| l.contains("audit: passed")), "{:?}", demo.said);

    let base = url.trim_end_matches("/chamber").to_string();
    let operator = bazaar_sdk::Client::new(&base, Some(operator_credential.clone()));
    let (member, _) = enroll_pair(&operator, "newcomer-owner", "newcomer-agent").await.unwrap();
    let shots = if std::env::var(DOCS_SCREENSHOTS_ENV).is_ok_and(|v| v == "1") {
        common::repo_root().join("docs/chamber")
    } else {
        common::screenshot_dir().join("newcomer")
    };
    std::fs::create_dir_all(&shots).unwrap();
    let args = vec![
        "walk".into(),
        base,
        operator_credential,
        member.credential().unwrap().to_string(),
        shots.display().to_string(),
    ];
    let (report, exited_ok) = common::browser_driver("newcomer", args).await;
    assert_eq!(report["problems"], json!([]), "{report}");
    assert!(exited_ok && report["visited"].as_u64().unwrap() >= 3 * 2 * 16, "{report}");
    println!("walked {} page views; screenshots in {}", report["visited"], shots.display());
    drop(demo);
}
