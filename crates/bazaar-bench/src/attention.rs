//! `bazaar-bench attention`: the attention query (`GET /v1/attention`'s
//! store call) on a plane holding `messages` messages in `channels` public
//! rooms of `members` members, each member in `per_member` rooms with a few
//! unread messages in each, on the embedded store and on PostgreSQL in one
//! run. The data is written with SQL in bulk (the same rows the plane's own
//! writes would make); the query is the plane's, through `ConversationStore`.

use anyhow::{bail, Context, Result};
use bazaar_conversation::sqlite::SqliteConversationStore;
use bazaar_conversation::ConversationStore;
use bazaar_types::{Clock, ManualClock, MemberId, SeededEntropy, Timestamp};
use clap::Args;
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;

/// The most of each a run will write (a bound on the harness, not on the plane).
const MESSAGES_MAX: u64 = 5_000_000;
const MEMBERS_MAX: u64 = 100_000;

#[derive(Args, Clone)]
pub struct AttentionArgs {
    #[arg(long, default_value_t = 1_000_000)]
    pub messages: u64,
    #[arg(long, default_value_t = 10_000)]
    pub members: u64,
    #[arg(long, default_value_t = 1_000)]
    pub channels: u64,
    /// Rooms each member is in.
    #[arg(long, default_value_t = 10)]
    pub per_member: u64,
    /// At most this many unread messages per member per room (its read mark sits that far back).
    #[arg(long, default_value_t = 20)]
    pub unread_max: u64,
    /// Attention queries timed per engine (members drawn in a fixed order).
    #[arg(long, default_value_t = 2_000)]
    pub queries: usize,
    /// PostgreSQL admin URL (a database is created for the run and dropped after).
    #[arg(long, env = "BAZAAR_BENCH_DATABASE_URL", default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    pub database_url: String,
    /// Skip PostgreSQL.
    #[arg(long)]
    pub sqlite_only: bool,
}

#[derive(Serialize)]
pub struct Timing {
    pub engine: &'static str,
    pub load_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Channels with something unread, summed over the queries (a check that the query did work).
    pub channels_seen: u64,
}

/// Members in channel `c` are those `m` with `(m + j * stride) % channels == c`
/// for some `j < per_member`; member `m`'s read mark in its `j`-th room sits
/// `(m * 7 + j * 13) % unread_max` messages short of the room's last.
fn shape_ok(args: &AttentionArgs) -> Result<u64> {
    if args.messages == 0 || args.messages > MESSAGES_MAX || args.members == 0 || args.members > MEMBERS_MAX {
        bail!("messages 1..={MESSAGES_MAX}, members 1..={MEMBERS_MAX}");
    }
    if args.channels == 0 || args.per_member == 0 || !args.channels.is_multiple_of(args.per_member) {
        bail!("channels must be a positive multiple of per-member");
    }
    if !args.messages.is_multiple_of(args.channels) || args.members < args.channels {
        bail!("messages must be a multiple of channels, and members at least channels");
    }
    Ok(args.channels / args.per_member)
}

/// The SQL that fills an empty plane, for SQLite (`series` is a recursive CTE) or PostgreSQL.
fn fill_sql(args: &AttentionArgs, postgres: bool) -> Vec<String> {
    let stride = args.channels / args.per_member;
    let per_channel = args.messages / args.channels;
    let hex = if postgres { "lpad(to_hex(X), 32, '0')" } else { "printf('%032x', X)" };
    // The rows 0..n: PostgreSQL's generate_series, SQLite's recursive CTE (named `s` in both).
    let series = |n: u64| if postgres { format!("generate_series(0, {}) AS s(i)", n - 1) } else { "s".to_string() };
    let cte = |n: u64| {
        if postgres {
            String::new()
        } else {
            format!("WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < {}) ", n - 1)
        }
    };
    let channel_of = |expr: &str| format!("'ch_' || {}", hex.replace('X', expr));
    let (falsy, last_seq) = if postgres { ("FALSE", ", last_seq") } else { ("0", "") };
    let last_seq_value = if postgres { format!(", {per_channel}") } else { String::new() };
    let mut sql = vec![
        format!(
            "{}INSERT INTO channels (id, kind, name, created_by, created_at, sealed{last_seq}) \
             SELECT {}, 'public_room', 'room ' || i, 'did:key:zm0', 0, {falsy}{last_seq_value} FROM {}",
            cte(args.channels),
            channel_of("i"),
            series(args.channels)
        ),
        format!(
            "{}INSERT INTO memberships (channel, member, role, joined_at, joined_after, muted, read_seq) \
             SELECT {}, 'did:key:zm' || (i / {pm}), 'member', 0, 0, {falsy}, {per_channel} - ((i / {pm}) * 7 + (i % {pm}) * 13) % {um} FROM {}",
            cte(args.members * args.per_member),
            channel_of(&format!("((i / {pm}) + (i % {pm}) * {stride}) % {ch}", pm = args.per_member, ch = args.channels)),
            series(args.members * args.per_member),
            pm = args.per_member,
            um = args.unread_max,
        ),
        format!(
            "{}INSERT INTO messages (position, channel, seq, authored_by, handle, kind, body, mentions, at) \
             SELECT i + 1, {}, i / {ch} + 1, 'did:key:zm' || (i % {ch}), 'm', '{{\"type\":\"text\"}}', 'message ' || i, \
             CASE WHEN i % 50 = 0 THEN '[\"did:key:zm' || ((i % {ch}) + {ch}) || '\"]' ELSE '[]' END, i FROM {}",
            cte(args.messages),
            channel_of(&format!("i % {ch}", ch = args.channels)),
            series(args.messages),
            ch = args.channels,
        ),
    ];
    if postgres {
        sql.push(format!("UPDATE conversation_head SET last_position = {}", args.messages));
        sql.push("ANALYZE".into());
    } else {
        sql.push("ANALYZE".into());
    }
    sql
}

fn time_queries(
    store: &dyn ConversationStore,
    args: &AttentionArgs,
    engine: &'static str,
    load_s: f64,
) -> Result<Timing> {
    let mut samples = Vec::with_capacity(args.queries);
    let mut seen = 0u64;
    for n in 0..args.queries as u64 {
        let member = MemberId(format!("did:key:zm{}", (n * 7_919) % args.members));
        let started = Instant::now();
        let found = store.attention(&member).context("attention")?;
        samples.push(started.elapsed().as_secs_f64() * 1_000.0);
        seen += found.len() as u64;
    }
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    Ok(Timing { engine, load_s, p50_ms: at(0.50), p99_ms: at(0.99), max_ms: at(1.0), channels_seen: seen })
}

fn clock() -> Arc<dyn Clock> {
    Arc::new(ManualClock::new(Timestamp(1_800_000_000_000)))
}

fn sqlite(args: &AttentionArgs) -> Result<Timing> {
    let dir = std::env::temp_dir().join(format!("bazaar-bench-attention-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("plane.db");
    std::fs::remove_file(&path).ok();
    drop(SqliteConversationStore::open(&path, clock(), Arc::new(SeededEntropy::new(1)))?);
    let started = Instant::now();
    let connection = rusqlite::Connection::open(&path)?;
    connection.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; BEGIN")?;
    for statement in fill_sql(args, false) {
        if statement == "ANALYZE" {
            connection.execute_batch("COMMIT; ANALYZE")?;
        } else {
            connection.execute_batch(&statement).with_context(|| statement.clone())?;
        }
    }
    drop(connection);
    let load_s = started.elapsed().as_secs_f64();
    let store = SqliteConversationStore::open(&path, clock(), Arc::new(SeededEntropy::new(1)))?;
    let timing = time_queries(&store, args, "sqlite", load_s);
    drop(store);
    std::fs::remove_dir_all(&dir).ok();
    timing
}

fn postgres(args: &AttentionArgs) -> Result<Timing> {
    use bazaar_postgres_testing::{execute, with_database};
    let name = format!("bench_attention_{}", std::process::id());
    // One statement each: CREATE DATABASE cannot run inside the implicit transaction of a batch.
    execute(&args.database_url, &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
    execute(&args.database_url, &format!("CREATE DATABASE {name}"));
    let url = with_database(&args.database_url, &name);
    let result = (|| {
        let store = bazaar_conversation_postgres::PostgresConversationStore::connect(
            &url,
            clock(),
            Arc::new(SeededEntropy::new(1)),
        )?;
        let started = Instant::now();
        let fill = fill_sql(args, true).join(";\n");
        execute(&url, &fill);
        let load_s = started.elapsed().as_secs_f64();
        time_queries(&store, args, "postgres", load_s)
    })();
    execute(&args.database_url, &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
    result
}

pub fn run(args: &AttentionArgs) -> Result<Vec<Timing>> {
    shape_ok(args)?;
    eprintln!(
        "[attention] {} messages, {} members, {} rooms, each member in {} with up to {} unread in each",
        args.messages, args.members, args.channels, args.per_member, args.unread_max
    );
    let mut timings = vec![sqlite(args)?];
    if !args.sqlite_only {
        timings.push(postgres(args)?);
    }
    for t in &timings {
        println!(
            "{:<9} load {:>6.1} s   attention p50 {:>6.2} ms   p99 {:>6.2} ms   max {:>6.2} ms   (goal: p99 < 5 ms; {} channels seen)",
            t.engine, t.load_s, t.p50_ms, t.p99_ms, t.max_ms, t.channels_seen
        );
    }
    Ok(timings)
}
