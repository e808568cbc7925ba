//! Power loss on the embedded store. The store runs on a simulated disk with a
//! volatile write cache (`bazaar-sqlite-disk`, a SQLite VFS); lanes of paid calls
//! (mint, fund, budget, issue token, settle) go through the real group-commit
//! writer until the power is cut at a seeded random mutating operation. The
//! durable image is then written to real files and opened with the normal
//! SQLite path, and checked: it opens and passes `integrity_check`, the audit
//! passes, every call acknowledged before the cut is there (a settlement with
//! its id), clients retrying every call with its idempotency key charge nothing
//! twice, the balances are exactly the model's, and new work is accepted.
//!
//! `BAZAAR_POWER_LOSS_SEED` replays a run (the seed is printed; threads still
//! interleave as they will, so the cut lands on the same operation count, not
//! necessarily the same operation); `BAZAAR_POWER_LOSS_CYCLES` runs more cycles.

use bazaar_core::apply::Applied;
use bazaar_core::command::{Command, Idem, Op};
use bazaar_core::model::Member;
use bazaar_core::pay;
use bazaar_core::token::{self, TokenClaims};
use bazaar_sqlite_disk::{Aim, CutMode, CutReport, Disk, FileKind, OpKind, Rng, Syncs, Volume};
use bazaar_store::conformance::{test_config, Fixture, EPOCH};
use bazaar_store::Store;
use bazaar_store_sqlite::SqliteStore;
use bazaar_types::{AccountId, Amount, ManualClock, TokenId};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Power-loss cycles in a normal `cargo test` run (12 to 15 s in a debug build on the shared 2-core machine).
const CYCLES: u64 = 60;
/// Cycles of the control run, whose syncs make nothing durable.
const CONTROL_CYCLES: u64 = 3;
/// Replays a run from its seed.
const SEED_ENV: &str = "BAZAAR_POWER_LOSS_SEED";
/// Runs this many cycles instead of `CYCLES`.
const CYCLES_ENV: &str = "BAZAAR_POWER_LOSS_CYCLES";
/// Lanes submitting at once, each with its own buyer and merchant, so batches group.
const LANES: usize = 4;
/// Tokens a lane issues and settles at most; the cut comes well before.
const PAYMENTS_PER_LANE_MAX: u64 = 1_000;
/// Where cycles aim their cut: the percent of cycles, which mutating operations
/// (writes, truncates, syncs) count, and the cut falls on one of the first this
/// many of them after setup. Checkpoints run every 100 ms, so cuts aimed at the
/// database file land mid-checkpoint.
const AIMS: [(u64, Aim, u64); 4] = [
    (40, Aim::Any, CUT_OPS_MAX),
    (20, Aim::At(FileKind::Wal, OpKind::Sync), 150),
    (25, Aim::At(FileKind::Db, OpKind::Write), 60),
    (15, Aim::At(FileKind::Db, OpKind::Sync), 2),
];
const _: () = assert!(AIMS[0].0 + AIMS[1].0 + AIMS[2].0 + AIMS[3].0 == 100);
/// The span of an unaimed cut, in mutating operations after setup.
const CUT_OPS_MAX: u64 = 1_200;
/// Percent of cycles cut in the harsh mode (unsynced sectors kept at random).
const HARSH_PERCENT: u64 = 45;
/// Percent of cycles that are a process crash (everything written is kept), not a power cut.
const CRASH_PERCENT: u64 = 10;
/// What each lane's owner mints and funds its buyer with.
const FUNDS: u64 = 10_000_000;
/// The dearest payment; each is between half of it and all of it.
const PRICE_MAX: u64 = 200;
/// The buyer's budget ceilings, far above what a cycle spends.
const CEILING: u64 = FUNDS;
/// A token's lifetime; the clock stands still, so none expires.
const TOKEN_TTL_S: u64 = 900;
/// Problems a failing run prints (all are counted).
const PROBLEMS_SHOWN: usize = 12;
/// The database file on each volume.
const DB: &str = "bazaar.db";

/// One cycle's lane: who pays whom.
#[derive(Clone)]
struct Cast {
    owner: Member,
    buyer: Member,
    merchant: Member,
}

#[derive(Clone, Debug, PartialEq)]
enum What {
    Mint,
    Fund,
    Budget,
    Issue(TokenId),
    Settle { jti: TokenId, amount: u64 },
}

/// A call a client sent, and its answer if it got one before the cut.
#[derive(Clone)]
struct Sent {
    what: What,
    command: Command,
    answer: Option<Applied>,
}

impl Sent {
    fn acknowledged(&self) -> bool {
        self.answer.is_some()
    }
}

/// Everything wrong a recovery showed, by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Problem {
    /// Commits were acknowledged in a cycle whose WAL was never fsynced.
    NoWalSync,
    Integrity,
    Open,
    Audit,
    Refused,
    LostAcknowledged,
    RanTwice,
    Balance,
    NewWork,
}

#[derive(Default)]
struct Figures {
    cycles: u64,
    acknowledged: u64,
    acknowledged_settlements: u64,
    /// Calls not answered before the cut that the recovered database had anyway.
    unanswered_but_durable: u64,
    unanswered: u64,
    harsh: u64,
    crashes: u64,
    torn_writes: u64,
    dropped_writes: u64,
    kept_writes: u64,
    torn_cycles: u64,
    mid_commit: u64,
    mid_checkpoint: u64,
    cut_at: BTreeMap<String, u64>,
    /// Time spent running up to the cuts, and recovering and checking.
    running: std::time::Duration,
    recovering: std::time::Duration,
    problems: Vec<(u64, Problem, String)>,
}

fn seed() -> u64 {
    match std::env::var(SEED_ENV) {
        Ok(text) => {
            let text = text.trim();
            let parsed = match text.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => text.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("{SEED_ENV}={text} is not a u64"))
        }
        // A fresh seed from the OS, through the standard library's hasher keys.
        Err(_) => std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), SEED_ENV),
    }
}

fn cycles() -> u64 {
    std::env::var(CYCLES_ENV).ok().map(|n| n.parse().expect("a cycle count")).unwrap_or(CYCLES)
}

fn registry_key() -> ed25519_dalek::SigningKey {
    ed25519_dalek::SigningKey::from_bytes(&[7u8; 32])
}

/// The VFS every test of this binary shares; volumes keep their runs apart.
fn disk() -> &'static Disk {
    static DISK: OnceLock<&'static Disk> = OnceLock::new();
    DISK.get_or_init(|| Disk::register("bazaar-power-loss"))
}

fn scratch(test: &str, cycle: u64) -> PathBuf {
    std::env::temp_dir().join(format!("bazaar-power-loss-{}", std::process::id())).join(format!("{test}-{cycle}"))
}

fn idem(actor: &Member, kind: &str, key: String) -> Option<Idem> {
    Some(Idem::sent(format!("{}:{kind}", actor.id), key.clone(), format!("fp-{key}")))
}

fn pay(actor: &Member, kind: &str, key: String, op: pay::Op) -> Command {
    Command { actor: actor.clone(), idem: idem(actor, kind, key), op: Op::Pay(op) }
}

/// The setup calls of a lane: mint, fund, budget.
fn setup_calls(operator: &Member, cast: &Cast, tag: &str) -> Vec<(What, Command)> {
    let (owner, buyer) = (&cast.owner, &cast.buyer);
    vec![
        (
            What::Mint,
            pay(
                operator,
                "mint",
                format!("mint-{tag}"),
                pay::Op::Mint { owner: owner.id.clone(), amount: Amount(FUNDS) },
            ),
        ),
        (
            What::Fund,
            pay(owner, "fund", format!("fund-{tag}"), pay::Op::Fund { agent: buyer.id.clone(), amount: Amount(FUNDS) }),
        ),
        (
            What::Budget,
            pay(
                owner,
                "budget",
                format!("budget-{tag}"),
                pay::Op::SetBudget {
                    agent: buyer.id.clone(),
                    per_call_max: Amount(CEILING),
                    per_day_max: Amount(CEILING),
                    total_max: Amount(CEILING),
                },
            ),
        ),
    ]
}

/// A payment: the buyer's token for an order, then the merchant's settle.
fn payment(f: &Fixture, cast: &Cast, lane: usize, n: u64, amount: u64) -> [(What, Command); 2] {
    let order = format!("order-{lane}-{n}");
    let claims: TokenClaims = f.claims(&cast.buyer, &cast.merchant, amount, &order, TOKEN_TTL_S);
    let issue = pay::Op::IssueToken { claims: claims.clone(), token: token::encode(&claims, &f.key) };
    let settle = f.settle_op(&claims, amount);
    let Op::Pay(settle) = settle else { unreachable!("settle_op is a pay op") };
    [
        (What::Issue(claims.jti.clone()), pay(&cast.buyer, "token", format!("issue-{order}"), issue)),
        (
            What::Settle { jti: claims.jti.clone(), amount },
            pay(&cast.merchant, "settle", format!("settle-{order}"), settle),
        ),
    ]
}

/// Sends a lane's calls one after another until one goes unanswered (the power is off).
async fn run_lane(f: Arc<Fixture>, cast: Cast, lane: usize, seed: u64) -> Vec<Sent> {
    let mut rng = Rng::new(seed);
    let mut sent = Vec::new();
    let payments = (0..PAYMENTS_PER_LANE_MAX)
        .flat_map(|n| payment(&f, &cast, lane, n, PRICE_MAX / 2 + rng.below(PRICE_MAX / 2 + 1)));
    for (what, command) in setup_calls(&f.operator, &cast, &format!("lane-{lane}")).into_iter().chain(payments) {
        let answer = f.store.submit(command.clone()).await.ok();
        let unanswered = answer.is_none();
        sent.push(Sent { what, command, answer });
        if unanswered {
            break;
        }
    }
    sent
}

/// What one cycle did before the cut: the calls of each lane and the cut.
struct Run {
    operator: Member,
    /// The registry key seed the store answered with after the cut was armed, if it answered.
    key_seed: Option<[u8; 32]>,
    lanes: Vec<(Cast, Vec<Sent>)>,
    cut: CutReport,
    wal_syncs: u64,
}

/// Opens a store on a fresh volume, sets up the lanes' members (made durable),
/// arms the cut and runs the lanes until it falls.
fn run_until_cut(runtime: &tokio::runtime::Runtime, volume: &Arc<Volume>, rng: &mut Rng, cut: Cut) -> Run {
    runtime.block_on(async {
        let clock = Arc::new(ManualClock::new(EPOCH));
        let store = SqliteStore::open_with_vfs(volume.path(DB), &disk().name, test_config(), clock.clone())
            .expect("open on the simulated disk");
        let f = Arc::new(Fixture::new(Arc::new(store), clock, registry_key()).await);
        let mut casts = Vec::new();
        for lane in 0..LANES {
            let owner = f.owner(&format!("owner-{lane}")).await;
            let buyer = f.agent(&owner, &format!("buyer-{lane}")).await;
            let seller = f.owner(&format!("seller-{lane}")).await;
            let merchant = f.agent(&seller, &format!("merchant-{lane}")).await;
            casts.push(Cast { owner, buyer, merchant });
        }
        volume.flush_all();
        let before = volume.counts();
        volume.arm(cut.aim, cut.low + rng.below(cut.high - cut.low + 1), cut.mode, Rng::new(rng.next_u64()));
        // The first start of a registry stores its key seed (a write outside the writer).
        let key_seed = f.store.registry_key_seed(std::array::from_fn(|_| rng.below(256) as u8)).await.ok();
        let tasks: Vec<_> = casts
            .iter()
            .enumerate()
            .map(|(lane, cast)| tokio::spawn(run_lane(f.clone(), cast.clone(), lane, rng.next_u64())))
            .collect();
        let mut lanes = Vec::new();
        for (cast, task) in casts.into_iter().zip(tasks) {
            lanes.push((cast, task.await.expect("lane")));
        }
        // Lanes that outlast an aimed cut (say, a disk that sees no syncs) are cut when they end.
        volume.cut_now(cut.mode, Rng::new(rng.next_u64()));
        let cut = volume.cut().expect("cut");
        let wal_syncs = volume.counts().get(FileKind::Wal, OpKind::Sync) - before.get(FileKind::Wal, OpKind::Sync);
        Run { operator: f.operator.clone(), key_seed, lanes, cut, wal_syncs }
    })
}

/// Recovers the cut's durable image with the normal SQLite path and checks it.
fn recover(runtime: &tokio::runtime::Runtime, run: &Run, dir: &Path, cycle: u64, figures: &mut Figures) {
    let mut problem = |kind: Problem, detail: String| figures.problems.push((cycle, kind, detail));
    let _ = std::fs::remove_dir_all(dir);
    run.cut.write_image(dir).expect("write the durable image");
    let path = dir.join(DB);
    let integrity = rusqlite::Connection::open(&path)
        .and_then(|c| c.query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0)));
    match integrity {
        Ok(ok) if ok == "ok" => {}
        other => return problem(Problem::Integrity, format!("{other:?}")),
    }
    let durable_but_unanswered = runtime.block_on(async {
        let clock = Arc::new(ManualClock::new(EPOCH));
        let store = match SqliteStore::open(&path, test_config(), clock) {
            Ok(store) => Arc::new(store),
            Err(error) => {
                problem(Problem::Open, error.to_string());
                return 0;
            }
        };
        audit(&store, "after recovery", &mut problem).await;
        acknowledged_are_there(&store, &run.lanes, &mut problem).await;
        key_seed_is_kept(&store, run.key_seed, &mut problem).await;
        let durable = retry_everything(&store, &run.lanes, &mut problem).await;
        balances_are_the_model(&store, &run.lanes, &mut problem).await;
        new_work(&store, &run.operator, &run.lanes[0].0, &mut problem).await;
        audit(&store, "after new work", &mut problem).await;
        durable
    });
    figures.unanswered_but_durable += durable_but_unanswered;
}

async fn audit(store: &SqliteStore, when: &str, problem: &mut impl FnMut(Problem, String)) {
    match bazaar_store::audit::audit(store, &|_| {}).await {
        Ok(report) if report.ok && report.balance_sum_minor == 0 => {}
        Ok(report) => {
            problem(Problem::Audit, format!("{when}: {:?}, sum {}", report.problems, report.balance_sum_minor))
        }
        Err(error) => problem(Problem::Audit, format!("{when}: {error}")),
    }
}

/// Every settlement acknowledged before the cut is there with its id; every acknowledged token too.
async fn acknowledged_are_there(
    store: &SqliteStore,
    lanes: &[(Cast, Vec<Sent>)],
    problem: &mut impl FnMut(Problem, String),
) {
    for sent in lanes.iter().flat_map(|(_, sent)| sent) {
        let Some(answer) = &sent.answer else { continue };
        let body = match &answer.outcome {
            Ok(receipt) => receipt.to_json(),
            Err(refusal) => {
                problem(Problem::Refused, format!("{:?} refused before the cut: {refusal:?}", sent.what));
                continue;
            }
        };
        match &sent.what {
            What::Settle { jti, amount } => {
                let stored = store.token(jti).await.ok().flatten().and_then(|view| view.settlement);
                let id = body["settlement_id"].as_str();
                match stored {
                    Some(s) if Some(s.id.as_str()) == id && s.amount == Amount(*amount) => {}
                    other => {
                        problem(Problem::LostAcknowledged, format!("settlement {id:?} of {jti:?}: found {other:?}"))
                    }
                }
            }
            What::Issue(jti) => {
                if !matches!(store.token(jti).await, Ok(Some(_))) {
                    problem(Problem::LostAcknowledged, format!("token {jti:?}"));
                }
            }
            // Checked by the retries: an acknowledged mint, fund or budget must replay.
            What::Mint | What::Fund | What::Budget => {}
        }
    }
}

/// A registry key seed the store answered with is the one it keeps.
async fn key_seed_is_kept(store: &SqliteStore, answered: Option<[u8; 32]>, problem: &mut impl FnMut(Problem, String)) {
    let Some(answered) = answered else { return };
    match store.registry_key_seed([0; 32]).await {
        Ok(kept) if kept == answered => {}
        other => problem(Problem::LostAcknowledged, format!("registry key seed: answered {answered:?}, now {other:?}")),
    }
}

/// Every client resends every call it sent, with its idempotency key, in its order
/// (the lanes at once, so the writer groups them): an acknowledged call replays
/// its answer, an unanswered one runs now or replays.
/// Returns how many unanswered calls the recovered database already had.
async fn retry_everything(
    store: &Arc<SqliteStore>,
    lanes: &[(Cast, Vec<Sent>)],
    problem: &mut impl FnMut(Problem, String),
) -> u64 {
    let tasks: Vec<_> = lanes.iter().map(|(_, sent)| tokio::spawn(retry_lane(store.clone(), sent.clone()))).collect();
    let mut durable = 0;
    for task in tasks {
        let (lane_durable, problems) = task.await.expect("retry lane");
        durable += lane_durable;
        problems.into_iter().for_each(|(kind, detail)| problem(kind, detail));
    }
    durable
}

async fn retry_lane(store: Arc<SqliteStore>, lane: Vec<Sent>) -> (u64, Vec<(Problem, String)>) {
    let (mut durable, mut problems) = (0, Vec::new());
    for sent in lane {
        let retried = match store.submit(sent.command.clone()).await {
            Ok(retried) => retried,
            Err(error) => {
                problems.push((Problem::NewWork, format!("retry of {:?}: {error}", sent.what)));
                continue;
            }
        };
        if let Err(refusal) = &retried.outcome {
            problems.push((Problem::Refused, format!("retry of {:?}: {refusal:?}", sent.what)));
        }
        match &sent.answer {
            Some(answer) if !retried.replayed || retried.outcome != answer.outcome => problems.push((
                Problem::RanTwice,
                format!("acknowledged {:?} did not replay: {:?}", sent.what, retried.outcome),
            )),
            None if retried.replayed => durable += 1,
            _ => {}
        }
    }
    (durable, problems)
}

/// After the retries every lane is exactly its calls, each once.
async fn balances_are_the_model(
    store: &SqliteStore,
    lanes: &[(Cast, Vec<Sent>)],
    problem: &mut impl FnMut(Problem, String),
) {
    for (cast, sent) in lanes {
        let funded = if sent.iter().any(|s| s.what == What::Fund) { FUNDS } else { 0 };
        let spent: u64 = sent.iter().map(|s| if let What::Settle { amount, .. } = s.what { amount } else { 0 }).sum();
        let expected = i128::from(funded) - i128::from(spent);
        let balance = match store.account(&AccountId::of_member(&cast.buyer.id)).await {
            Ok(Some(account)) => account.balance(),
            other => return problem(Problem::Balance, format!("buyer account {other:?}")),
        };
        if balance != expected {
            problem(Problem::Balance, format!("buyer {} holds {balance}, the model {expected}", cast.buyer.handle));
        }
    }
}

/// The recovered registry takes fresh paid calls: mint, fund, budget, a token and its settle.
async fn new_work(store: &SqliteStore, operator: &Member, cast: &Cast, problem: &mut impl FnMut(Problem, String)) {
    let key = registry_key();
    let claims = TokenClaims {
        v: 1,
        iss: bazaar_types::MemberId(bazaar_core::crypto::did_key(&key.verifying_key())),
        jti: TokenId("tok_after_recovery".into()),
        sub: cast.buyer.id.clone(),
        aud: cast.merchant.id.clone(),
        max: Amount(PRICE_MAX),
        ord: bazaar_types::OrderId("order-after-recovery".into()),
        res: "https://merchant.test/restock".into(),
        iat_ms: EPOCH,
        exp_ms: EPOCH.plus_s(TOKEN_TTL_S),
        via: None,
    };
    let issue = pay::Op::IssueToken { claims: claims.clone(), token: token::encode(&claims, &key) };
    let settle = pay::Op::Settle { claims: claims.clone(), amount: Amount(PRICE_MAX), order_id: claims.ord.clone() };
    let payment = [
        pay(&cast.buyer, "token", "issue-after-recovery".into(), issue),
        pay(&cast.merchant, "settle", "settle-after-recovery".into(), settle),
    ];
    let calls = setup_calls(operator, cast, "after-recovery").into_iter().map(|(_, command)| command);
    for command in calls.chain(payment) {
        match store.submit(command).await {
            Ok(Applied { outcome: Ok(_), replayed: false }) => {}
            other => problem(Problem::NewWork, format!("{other:?}")),
        }
    }
}

fn tally(figures: &mut Figures, run: &Run) {
    let cut = &run.cut;
    figures.cycles += 1;
    for sent in run.lanes.iter().flat_map(|(_, sent)| sent) {
        if sent.acknowledged() {
            figures.acknowledged += 1;
            figures.acknowledged_settlements += u64::from(matches!(sent.what, What::Settle { .. }));
        } else {
            figures.unanswered += 1;
        }
    }
    figures.harsh += u64::from(cut.mode == CutMode::Harsh);
    figures.crashes += u64::from(cut.mode == CutMode::ProcessCrash);
    figures.torn_writes += cut.torn as u64;
    figures.dropped_writes += cut.dropped as u64;
    figures.kept_writes += cut.kept as u64;
    figures.torn_cycles += u64::from(cut.torn > 0);
    let on = |kind: FileKind| cut.at.is_some_and(|(file, _)| file == kind);
    figures.mid_commit += u64::from(cut.wal_unsynced > 0 || on(FileKind::Wal));
    figures.mid_checkpoint += u64::from(cut.db_unsynced > 0 || on(FileKind::Db));
    let at = cut.at.map_or("after the lanes ended".into(), |(file, op)| format!("{file:?} {op:?}"));
    *figures.cut_at.entry(at).or_default() += 1;
}

/// Where a cycle cuts: the `low`-th to `high`-th operation `aim` matches, in `mode`.
#[derive(Clone, Copy)]
struct Cut {
    aim: Aim,
    low: u64,
    high: u64,
    mode: CutMode,
}

/// A cut as `AIMS`, `HARSH_PERCENT` and `CRASH_PERCENT` say.
fn any_cut(rng: &mut Rng) -> Cut {
    let mode = match rng.below(100) {
        roll if roll < HARSH_PERCENT => CutMode::Harsh,
        roll if roll < HARSH_PERCENT + CRASH_PERCENT => CutMode::ProcessCrash,
        _ => CutMode::Clean,
    };
    let mut roll = rng.below(100);
    for (percent, aim, high) in AIMS {
        if roll < percent {
            return Cut { aim, low: 1, high, mode };
        }
        roll -= percent;
    }
    unreachable!("AIMS add up to 100")
}

/// Runs `cycles` cut-and-recover cycles on volumes whose syncs behave as `syncs`.
fn power_loss_cycles(test: &str, seed: u64, cycles: u64, syncs: Syncs, choose: fn(&mut Rng) -> Cut) -> Figures {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let mut rng = Rng::new(seed);
    let mut figures = Figures::default();
    for cycle in 0..cycles {
        let name = format!("{test}-{seed:x}-{cycle}");
        let volume = disk().volume(&name, syncs);
        let cut = choose(&mut rng);
        let started = std::time::Instant::now();
        let run = run_until_cut(&runtime, &volume, &mut rng, cut);
        figures.running += started.elapsed();
        disk().drop_volume(&name);
        let acknowledged = run.lanes.iter().flat_map(|(_, s)| s).filter(|s| s.acknowledged()).count();
        if syncs == Syncs::Honoured && acknowledged > 0 && run.wal_syncs == 0 {
            figures.problems.push((cycle, Problem::NoWalSync, "commits were acknowledged without a WAL fsync".into()));
        }
        tally(&mut figures, &run);
        let dir = scratch(test, cycle);
        let problems = figures.problems.len();
        let started = std::time::Instant::now();
        recover(&runtime, &run, &dir, cycle, &mut figures);
        figures.recovering += started.elapsed();
        if figures.problems.len() == problems {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    // Gone once empty: kept while a failed cycle's image is in it (or another test is running).
    let _ = std::fs::remove_dir(scratch(test, 0).parent().expect("a parent"));
    figures
}

fn summary(test: &str, seed: u64, figures: &Figures, elapsed: std::time::Duration) -> String {
    format!(
        "{test}: seed {seed} ({SEED_ENV}={seed} replays it): {} cycles in {:.1} s ({:.1} s running, {:.1} s recovering); acknowledged calls {} \
         (settlements {}); unanswered {} of which durable {}; process crashes {}; harsh cuts {} (writes kept {}, torn {}, dropped {}; \
         cycles with a torn write {}); cut mid-commit {}, mid-checkpoint {}; cut at {:?}; problems {} {:?}",
        figures.cycles,
        elapsed.as_secs_f64(),
        figures.running.as_secs_f64(),
        figures.recovering.as_secs_f64(),
        figures.acknowledged,
        figures.acknowledged_settlements,
        figures.unanswered,
        figures.unanswered_but_durable,
        figures.crashes,
        figures.harsh,
        figures.kept_writes,
        figures.torn_writes,
        figures.dropped_writes,
        figures.torn_cycles,
        figures.mid_commit,
        figures.mid_checkpoint,
        figures.cut_at,
        figures.problems.len(),
        figures.problems.iter().fold(BTreeMap::<Problem, u64>::new(), |mut by_kind, (_, kind, _)| {
            *by_kind.entry(*kind).or_default() += 1;
            by_kind
        }),
    )
}

#[test]
fn acknowledged_payments_survive_power_loss() {
    let (seed, started) = (seed(), std::time::Instant::now());
    println!("power loss: seed {seed} ({SEED_ENV}={seed} replays it)");
    let figures = power_loss_cycles("power", seed, cycles(), Syncs::Honoured, any_cut);
    let summary = summary("power loss", seed, &figures, started.elapsed());
    println!("{summary}");
    let first: Vec<_> = figures.problems.iter().take(PROBLEMS_SHOWN).collect();
    assert!(figures.problems.is_empty(), "{summary}\nfirst problems: {first:#?}");
    assert!(figures.acknowledged_settlements > 0, "the cuts left no acknowledged settlement to check: {summary}");
}

/// The control: on a disk whose syncs persist nothing (what `synchronous = OFF`
/// would leave on any disk), the same cycles lose acknowledged settlements and
/// the checks say so. So the test above would catch a non-durable pragma.
#[test]
fn without_fsync_acknowledged_payments_are_lost() {
    let seed = seed();
    let started = std::time::Instant::now();
    let figures = power_loss_cycles("control", seed, CONTROL_CYCLES, Syncs::Ignored, |_| Cut {
        aim: Aim::Any,
        low: CUT_OPS_MAX / 2,
        high: CUT_OPS_MAX,
        mode: CutMode::Clean,
    });
    let summary = summary("control", seed, &figures, started.elapsed());
    println!("{summary}");
    let lost: Vec<u64> =
        figures.problems.iter().filter(|(_, kind, _)| *kind == Problem::LostAcknowledged).map(|(c, _, _)| *c).collect();
    for cycle in 0..CONTROL_CYCLES {
        assert!(lost.contains(&cycle), "control cycle {cycle} lost nothing acknowledged: {summary}");
        // Its problems are the point, so its images are not kept.
        let _ = std::fs::remove_dir_all(scratch("control", cycle));
    }
    let _ = std::fs::remove_dir(scratch("control", 0).parent().expect("a parent"));
}

/// Sends one call and keeps its answer.
async fn send(f: &Fixture, (what, command): (What, Command)) -> Sent {
    let answer = f.store.submit(command.clone()).await.ok();
    Sent { what, command, answer }
}

/// A failed fsync (the power staying on, the unsynced pages lost as Linux
/// loses them) fails its batch; the writer goes on, the client's retry
/// settles, and after a later power cut everything acknowledged is there.
#[test]
fn a_failed_fsync_is_not_acknowledged_and_the_writer_carries_on() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let name = format!("fsync-{}", std::process::id());
    let volume = disk().volume(&name, Syncs::Honoured);
    let run = runtime.block_on(async {
        let clock = Arc::new(ManualClock::new(EPOCH));
        let store = SqliteStore::open_with_vfs(volume.path(DB), &disk().name, test_config(), clock.clone()).unwrap();
        let f = Fixture::new(Arc::new(store), clock, registry_key()).await;
        let owner = f.owner("owner").await;
        let buyer = f.agent(&owner, "buyer").await;
        let seller = f.owner("seller").await;
        let cast = Cast { owner, buyer, merchant: f.agent(&seller, "merchant").await };
        volume.flush_all();
        let mut sent = Vec::new();
        for call in setup_calls(&f.operator, &cast, "lane-0") {
            sent.push(send(&f, call).await);
        }
        for n in 0..3 {
            let [issue, settle] = payment(&f, &cast, 0, n, PRICE_MAX);
            sent.push(send(&f, issue).await);
            if n == 1 {
                volume.fail_next(Aim::At(FileKind::Wal, OpKind::Sync));
                let failed = f.store.submit(settle.1.clone()).await;
                assert!(failed.is_err(), "a batch whose fsync failed was acknowledged: {failed:?}");
            }
            sent.push(send(&f, settle).await);
        }
        let unanswered: Vec<_> = sent.iter().filter(|s| !s.acknowledged()).map(|s| s.what.clone()).collect();
        assert!(unanswered.is_empty(), "after a failed fsync the writer refused {unanswered:?}");
        volume.arm(Aim::Any, 1, CutMode::Clean, Rng::new(1));
        assert!(f.store.submit(setup_calls(&f.operator, &cast, "after").remove(0).1).await.is_err());
        let cut = volume.cut().expect("cut");
        Run { operator: f.operator.clone(), key_seed: None, lanes: vec![(cast, sent)], cut, wal_syncs: 0 }
    });
    disk().drop_volume(&name);
    let mut figures = Figures::default();
    let dir = scratch("fsync", 0);
    recover(&runtime, &run, &dir, 0, &mut figures);
    assert!(figures.problems.is_empty(), "{:#?}", figures.problems);
    std::fs::remove_dir_all(&dir).ok();
}
