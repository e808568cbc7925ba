//! The fuzz harness every crate's `tests/fuzz.rs` includes with
//! `#[path = "../../../fuzz/harness.rs"] mod harness;`: stable-toolchain
//! fuzzing with proptest. A target replays its committed corpus
//! (`fuzz/corpus/<target>/`, one input a file) unchanged, then runs a bounded
//! number of generated cases — byte-level mutations of corpus entries,
//! splices of two entries, dictionary tokens, and inputs from scratch — and
//! prints how many inputs it executed. A failure (a broken property or a
//! panic) is shrunk by proptest, saved as `fuzz/corpus/<target>/regress-<hash>`
//! and printed with the seed that reproduces it.

#![allow(dead_code)]

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Generated cases per target, overriding each target's own bounded count:
/// `BAZAAR_FUZZ_CASES=200000 cargo test --release -p CRATE --test fuzz -- --nocapture`.
pub const CASES_ENV: &str = "BAZAAR_FUZZ_CASES";
/// The run's random seed (a u64); without it each target's seed is fixed, so
/// the bounded run in `cargo test` explores the same inputs every time.
pub const SEED_ENV: &str = "BAZAAR_FUZZ_SEED";
/// Bytes an input generated from scratch holds at most.
pub const SCRATCH_BYTES_MAX: usize = 600;
/// Edits one mutated input carries at most.
pub const EDITS_MAX: usize = 6;
/// Bytes one edit inserts at most.
pub const INSERT_BYTES_MAX: usize = 12;
/// A committed corpus entry is at most this large (seeds stay small and readable).
pub const CORPUS_ENTRY_BYTES_MAX: usize = 64 * 1024;

/// Tokens worth inserting into any text input: JSON structure, boundary
/// numbers, escapes and separators the parsers split on.
pub const COMMON_TOKENS: &[&str] = &[
    "\"",
    "\\",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "=",
    ".",
    " ",
    "\n",
    "\t",
    "\0",
    "null",
    "true",
    "false",
    "0",
    "-1",
    "1e999",
    "-0",
    "0.5",
    "9007199254740993",
    "18446744073709551616",
    "-9223372036854775809",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\u{10ffff}",
    "é",
    "%00",
    "%ff",
    "apt_",
    "did:key:z6Mk",
    "v1,",
    "whsec_",
    "#",
    "?",
    "&",
    "/",
];

/// One input: bytes, printed as an escaped string so a failure reads.
#[derive(Clone, PartialEq, Eq)]
pub struct Input(pub Vec<u8>);

impl Input {
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }
}

impl fmt::Debug for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} ({} bytes)", self.text(), self.0.len())
    }
}

/// One edit of a mutation; positions are taken modulo the input's length.
#[derive(Clone, Debug)]
pub enum Edit {
    Flip { at: usize, bit: u8 },
    Set { at: usize, byte: u8 },
    Insert { at: usize, bytes: Vec<u8> },
    Remove { at: usize, len: usize },
    Duplicate { at: usize, len: usize },
    Token { at: usize, which: usize },
    Splice { at: usize, from: usize, start: usize, len: usize },
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Edit::Flip { at, bit }),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Edit::Set { at, byte }),
        2 => (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..INSERT_BYTES_MAX))
            .prop_map(|(at, bytes)| Edit::Insert { at, bytes }),
        2 => (any::<usize>(), 1usize..16).prop_map(|(at, len)| Edit::Remove { at, len }),
        1 => (any::<usize>(), 1usize..64).prop_map(|(at, len)| Edit::Duplicate { at, len }),
        3 => (any::<usize>(), any::<usize>()).prop_map(|(at, which)| Edit::Token { at, which }),
        1 => (any::<usize>(), any::<usize>(), any::<usize>(), 1usize..128)
            .prop_map(|(at, from, start, len)| Edit::Splice { at, from, start, len }),
    ]
}

/// Applies `edits` to `seed`; tokens come from `tokens`, splices from `corpus`.
pub fn apply(seed: &[u8], edits: &[Edit], corpus: &[Vec<u8>], tokens: &[&str]) -> Vec<u8> {
    let mut out = seed.to_vec();
    for edit in edits {
        let at = |at: usize, len: usize| if len == 0 { 0 } else { at % (len + 1) };
        match edit {
            Edit::Flip { at: i, bit } if !out.is_empty() => {
                let i = i % out.len();
                out[i] ^= 1 << bit;
            }
            Edit::Set { at: i, byte } if !out.is_empty() => {
                let i = i % out.len();
                out[i] = *byte;
            }
            Edit::Flip { .. } | Edit::Set { .. } => {}
            Edit::Insert { at: i, bytes } => {
                let i = at(*i, out.len());
                out.splice(i..i, bytes.iter().copied());
            }
            Edit::Remove { at: i, len } => {
                let i = at(*i, out.len()).min(out.len());
                let end = (i + len).min(out.len());
                out.drain(i..end);
            }
            Edit::Duplicate { at: i, len } => {
                let i = at(*i, out.len()).min(out.len());
                let end = (i + len).min(out.len());
                let copy: Vec<u8> = out[i..end].to_vec();
                out.splice(end..end, copy);
            }
            Edit::Token { at: i, which } => {
                let all = COMMON_TOKENS.len() + tokens.len();
                let token = match which % all {
                    n if n < tokens.len() => tokens[n],
                    n => COMMON_TOKENS[n - tokens.len()],
                };
                let i = at(*i, out.len());
                out.splice(i..i, token.bytes());
            }
            Edit::Splice { at: i, from, start, len } if !corpus.is_empty() => {
                let other = &corpus[from % corpus.len()];
                let start = if other.is_empty() { 0 } else { start % other.len() };
                let end = (start + len).min(other.len());
                let i = at(*i, out.len());
                out.splice(i..i, other[start..end].iter().copied());
            }
            Edit::Splice { .. } => {}
        }
    }
    out
}

/// Inputs for a byte target: mostly mutated corpus entries (a single-byte
/// change among them), some from tokens alone, some raw bytes.
pub fn inputs(corpus: Arc<Vec<Vec<u8>>>, tokens: &'static [&'static str]) -> impl Strategy<Value = Input> {
    let mutated = {
        let corpus = corpus.clone();
        (any::<usize>(), proptest::collection::vec(edit(), 1..=EDITS_MAX)).prop_map(move |(seed, edits)| {
            let base: &[u8] = corpus.get(seed % corpus.len().max(1)).map_or(&[], Vec::as_slice);
            Input(apply(base, &edits, &corpus, tokens))
        })
    };
    let one_byte = {
        let corpus = corpus.clone();
        (any::<usize>(), any::<usize>(), any::<u8>()).prop_map(move |(seed, at, byte)| {
            let base: &[u8] = corpus.get(seed % corpus.len().max(1)).map_or(&[], Vec::as_slice);
            Input(apply(base, &[Edit::Set { at, byte }], &corpus, tokens))
        })
    };
    let from_tokens = proptest::collection::vec(any::<usize>(), 0..24).prop_map(move |picks| {
        let all: Vec<&str> = tokens.iter().chain(COMMON_TOKENS).copied().collect();
        Input(picks.iter().flat_map(|p| all[p % all.len()].bytes()).collect())
    });
    let scratch = proptest::collection::vec(any::<u8>(), 0..SCRATCH_BYTES_MAX).prop_map(Input);
    prop_oneof![6 => mutated, 2 => one_byte, 1 => from_tokens, 1 => scratch]
}

/// The directory of `target`'s committed corpus.
pub fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target)
}

/// Every committed entry of `target`'s corpus, by file name; a target has at least one.
pub fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir(target);
    let mut entries: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!("no corpus at {}: {e} (write the seeds with BAZAAR_FUZZ_WRITE_SEEDS=1)", dir.display())
        })
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .filter(|(name, _)| !name.starts_with('.') && name != "README.md")
        .collect();
    entries.sort();
    assert!(!entries.is_empty(), "the corpus {} is empty", dir.display());
    for (name, bytes) in &entries {
        assert!(bytes.len() <= CORPUS_ENTRY_BYTES_MAX, "{target}/{name} is over {CORPUS_ENTRY_BYTES_MAX} bytes");
    }
    entries
}

/// Set to rewrite the seed entries instead of checking them:
/// `BAZAAR_FUZZ_WRITE_SEEDS=1 cargo test -p CRATE --test fuzz committed_seeds`.
pub const WRITE_SEEDS_ENV: &str = "BAZAAR_FUZZ_WRITE_SEEDS";

/// A seed entry as this build makes it: checked against the committed one (so
/// a format change that would leave the corpus stale fails the test), or
/// written when `BAZAAR_FUZZ_WRITE_SEEDS` is set.
pub fn write_seed(target: &str, name: &str, bytes: &[u8]) {
    let dir = corpus_dir(target);
    if std::env::var_os(WRITE_SEEDS_ENV).is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
        return;
    }
    let committed = std::fs::read(dir.join(name)).unwrap_or_default();
    assert!(
        committed == bytes,
        "fuzz/corpus/{target}/{name} is not what this build makes: rewrite the seeds with {WRITE_SEEDS_ENV}=1"
    );
}

/// The generated cases to run: `BAZAAR_FUZZ_CASES` if set, else the target's bounded count.
pub fn cases(bounded: u32) -> u32 {
    std::env::var(CASES_ENV).ok().and_then(|n| n.parse().ok()).unwrap_or(bounded)
}

fn seed_of(target: &str) -> u64 {
    let fixed = target.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    std::env::var(SEED_ENV).ok().and_then(|s| s.parse().ok()).unwrap_or(fixed)
}

fn hash_hex(bytes: &[u8]) -> String {
    let h = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ *b as u64).wrapping_mul(0x100_0000_01b3));
    format!("{h:016x}")
}

/// What a target's run did.
#[derive(Debug)]
pub struct Report {
    pub target: String,
    pub corpus: usize,
    pub executions: u64,
    pub elapsed: Duration,
}

/// Replays `target`'s corpus through `check`, then `bounded` (or
/// `BAZAAR_FUZZ_CASES`) generated inputs from [`inputs`]. `check` returns why
/// an input broke a property; a panic inside it is a failure too.
pub fn fuzz(
    target: &str,
    bounded: u32,
    tokens: &'static [&'static str],
    check: impl Fn(&Input) -> Result<(), String>,
) -> Report {
    fuzz_from(target, bounded, |seeds| inputs(seeds, tokens), check)
}

/// [`fuzz`] with the strategy `make` builds from the corpus entries.
pub fn fuzz_from<S: Strategy<Value = Input>>(
    target: &str,
    bounded: u32,
    make: impl FnOnce(Arc<Vec<Vec<u8>>>) -> S,
    check: impl Fn(&Input) -> Result<(), String>,
) -> Report {
    let entries = corpus(target);
    let seeds = Arc::new(entries.iter().map(|(_, bytes)| bytes.clone()).collect::<Vec<_>>());
    fuzz_with(target, bounded, &entries, make(seeds), check)
}

/// [`fuzz`] over any strategy of inputs (a structure-aware one, say).
pub fn fuzz_with(
    target: &str,
    bounded: u32,
    entries: &[(String, Vec<u8>)],
    strategy: impl Strategy<Value = Input>,
    check: impl Fn(&Input) -> Result<(), String>,
) -> Report {
    let started = Instant::now();
    let executions = AtomicU64::new(0);
    for (name, bytes) in entries {
        let value = Input(bytes.clone());
        executions.fetch_add(1, Ordering::Relaxed);
        if let Err(why) = check(&value) {
            panic!("fuzz {target}: corpus entry {name} fails: {why}");
        }
    }
    let cases = cases(bounded);
    let seed = seed_of(target);
    let config = Config { cases, failure_persistence: None, max_shrink_iters: 2_000, ..Config::default() };
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes));
    let result = runner.run(&strategy, |value| {
        executions.fetch_add(1, Ordering::Relaxed);
        check(&value).map_err(TestCaseError::fail)
    });
    let report = Report {
        target: target.to_string(),
        corpus: entries.len(),
        executions: executions.load(Ordering::Relaxed),
        elapsed: started.elapsed(),
    };
    match result {
        Ok(()) => {
            println!(
                "fuzz {target}: {} executions ({} corpus entries + {cases} generated cases) in {:.2} s, seed {seed}",
                report.executions,
                report.corpus,
                report.elapsed.as_secs_f64()
            );
            report
        }
        Err(TestError::Fail(why, value)) => {
            let bytes = value.0;
            let name = format!("regress-{}", hash_hex(&bytes));
            write_seed(target, &name, &bytes);
            panic!(
                "fuzz {target}: {why}\n  minimal input: {:?}\n  saved as fuzz/corpus/{target}/{name} (commit it once fixed)\n  reproduce: {SEED_ENV}={seed} {CASES_ENV}={cases}",
                Input(bytes)
            );
        }
        Err(TestError::Abort(why)) => panic!("fuzz {target}: aborted: {why} (seed {seed})"),
    }
}

/// `Err(why)` unless `condition`: properties read as `ensure(x == y, || "…")?`.
pub fn ensure(condition: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if condition {
        Ok(())
    } else {
        Err(why())
    }
}

// ---- structure-aware mutation of JSON inputs ------------------------------------------

/// Values a JSON node is replaced with: wrong types, boundary numbers,
/// long, empty, control-character and non-ASCII strings, deep nesting.
fn hostile_value(which: usize, long_len: usize) -> serde_json::Value {
    use serde_json::json;
    match which % 18 {
        0 => serde_json::Value::Null,
        1 => json!(true),
        2 => json!(0),
        3 => json!(-1),
        4 => json!(u64::MAX),
        5 => json!(i64::MIN),
        6 => json!(9_007_199_254_740_993u64),
        7 => json!(0.5),
        8 => json!(""),
        9 => json!("x".repeat(long_len)),
        10 => json!("\u{0}\u{1f}\u{7f}\u{2028}"),
        11 => json!("é✓𝄞"),
        12 => json!([]),
        13 => json!({}),
        14 => (0..64).fold(json!(1), |inner, _| json!([inner])),
        15 => json!("-1"),
        16 => json!("18446744073709551616"),
        _ => json!({"é": 1, "__proto__": {}}),
    }
}

/// Every node's path (object keys and array indices) in `value`, the root first.
fn node_paths(value: &serde_json::Value, here: &mut Vec<serde_json::Value>, out: &mut Vec<Vec<serde_json::Value>>) {
    out.push(here.clone());
    match value {
        serde_json::Value::Object(fields) => {
            for (key, item) in fields {
                here.push(key.clone().into());
                node_paths(item, here, out);
                here.pop();
            }
        }
        serde_json::Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                here.push(index.into());
                node_paths(item, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

fn node_at<'a>(value: &'a mut serde_json::Value, path: &[serde_json::Value]) -> Option<&'a mut serde_json::Value> {
    path.iter().try_fold(value, |node, step| match step {
        serde_json::Value::String(key) => node.get_mut(key.as_str()),
        serde_json::Value::Number(index) => node.get_mut(index.as_u64()? as usize),
        _ => None,
    })
}

/// One structural edit of a JSON document.
#[derive(Clone, Debug)]
pub struct JsonEdit {
    pub node: usize,
    pub op: u8,
    pub which: usize,
    pub long_len: usize,
}

fn json_edit() -> impl Strategy<Value = JsonEdit> {
    (any::<usize>(), 0u8..6, any::<usize>(), prop_oneof![0usize..40, 1000usize..70_000])
        .prop_map(|(node, op, which, long_len)| JsonEdit { node, op, which, long_len })
}

/// Applies `edits` to the JSON `seed`: replace a node with a hostile value,
/// remove it, add a member, rename a key, copy another node over it, or wrap it.
pub fn apply_json(seed: &serde_json::Value, edits: &[JsonEdit]) -> serde_json::Value {
    let mut doc = seed.clone();
    for edit in edits {
        let mut paths = Vec::new();
        node_paths(&doc, &mut Vec::new(), &mut paths);
        let path = paths[edit.node % paths.len()].clone();
        let donor = node_at(&mut doc.clone(), &paths[edit.which % paths.len()]).cloned().unwrap_or_default();
        let (parent_path, last) = match path.split_last() {
            Some((last, parent)) => (parent.to_vec(), Some(last.clone())),
            None => (Vec::new(), None),
        };
        match (edit.op, last) {
            (1, Some(last)) => match (node_at(&mut doc, &parent_path), last) {
                (Some(serde_json::Value::Object(fields)), serde_json::Value::String(key)) => {
                    fields.remove(&key);
                }
                (Some(serde_json::Value::Array(items)), serde_json::Value::Number(i)) => {
                    items.remove(i.as_u64().unwrap_or(0) as usize);
                }
                _ => {}
            },
            (2, _) => match node_at(&mut doc, &path) {
                Some(serde_json::Value::Object(fields)) => {
                    fields.insert(format!("extra{}", edit.which % 3), hostile_value(edit.which, edit.long_len));
                }
                Some(serde_json::Value::Array(items)) => items.push(hostile_value(edit.which, edit.long_len)),
                _ => {}
            },
            (3, Some(serde_json::Value::String(key))) => {
                if let Some(serde_json::Value::Object(fields)) = node_at(&mut doc, &parent_path) {
                    if let Some(item) = fields.remove(&key) {
                        let renamed = ["", "É", " ", "id", "type", "proof"][edit.which % 6];
                        fields.insert(format!("{key}{renamed}"), item);
                    }
                }
            }
            (4, _) => {
                if let Some(node) = node_at(&mut doc, &path) {
                    *node = donor;
                }
            }
            (5, _) => {
                if let Some(node) = node_at(&mut doc, &path) {
                    let inner = node.take();
                    *node =
                        if edit.which % 2 == 0 { serde_json::json!([inner]) } else { serde_json::json!({"": inner}) };
                }
            }
            _ => {
                if let Some(node) = node_at(&mut doc, &path) {
                    *node = hostile_value(edit.which, edit.long_len);
                }
            }
        }
    }
    doc
}

/// Structure-aware inputs: a corpus entry read as JSON, given a few
/// structural edits, written back (compact or pretty). Entries that are not
/// JSON are passed through byte-mutated instead.
pub fn json_inputs(corpus: Arc<Vec<Vec<u8>>>) -> impl Strategy<Value = Input> {
    (any::<usize>(), proptest::collection::vec(json_edit(), 1..4), any::<bool>()).prop_map(
        move |(seed, edits, pretty)| {
            let base: &[u8] = corpus.get(seed % corpus.len().max(1)).map_or(&[], Vec::as_slice);
            match serde_json::from_slice::<serde_json::Value>(base) {
                Ok(doc) => {
                    let doc = apply_json(&doc, &edits);
                    let text = if pretty { serde_json::to_vec_pretty(&doc) } else { serde_json::to_vec(&doc) };
                    Input(text.expect("a JSON value serialises"))
                }
                Err(_) => Input(apply(base, &[Edit::Flip { at: edits[0].node, bit: 0 }], &corpus, &[])),
            }
        },
    )
}

/// Byte-level and structure-aware inputs, mixed: what a JSON target fuzzes with.
pub fn mixed_inputs(corpus: Arc<Vec<Vec<u8>>>, tokens: &'static [&'static str]) -> impl Strategy<Value = Input> {
    prop_oneof![inputs(corpus.clone(), tokens), json_inputs(corpus)]
}

/// Replays and fuzzes a JSON target with [`mixed_inputs`].
pub fn fuzz_json(
    target: &str,
    bounded: u32,
    tokens: &'static [&'static str],
    check: impl Fn(&Input) -> Result<(), String>,
) -> Report {
    fuzz_from(target, bounded, |seeds| mixed_inputs(seeds, tokens), check)
}

/// The corpus entries whose names start with `seed-` (the valid inputs the
/// generator wrote), read once per target.
pub fn valid_seeds(target: &str) -> Arc<Vec<Vec<u8>>> {
    type ByTarget = std::collections::HashMap<String, Arc<Vec<Vec<u8>>>>;
    static SEEDS: std::sync::OnceLock<std::sync::Mutex<ByTarget>> = std::sync::OnceLock::new();
    let mut seeds = SEEDS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    seeds
        .entry(target.to_string())
        .or_insert_with(|| {
            let valid = corpus(target).into_iter().filter(|(name, _)| name.starts_with("seed-"));
            Arc::new(valid.map(|(_, bytes)| bytes).collect())
        })
        .clone()
}
