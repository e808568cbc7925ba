//! CPU and memory accounting from `/proc`: one process's utime+stime and resident set, the PostgreSQL
//! processes serving one database (plus the cluster's shared helpers), this
//! process, and the whole machine.

use std::collections::HashMap;

/// `/proc` reports CPU time in USER_HZ, which Linux fixes at 100 for userspace.
pub const TICKS_PER_S: f64 = 100.0;

/// utime + stime of `pid`, in ticks; `None` once the process is gone.
pub fn process_ticks(pid: u32) -> Option<u64> {
    parse_stat_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Every process whose command name (`/proc/<pid>/comm`) is `name`.
pub fn pids_named(name: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|comm| comm.trim() == name))
        .collect()
}

/// utime + stime of this process (the load generator), in ticks.
pub fn self_ticks() -> u64 {
    process_ticks(std::process::id()).unwrap_or(0)
}

/// utime + stime from the text of `/proc/<pid>/stat`. The command name may
/// hold spaces and parentheses, so fields are counted after the last `)`.
pub fn parse_stat_ticks(text: &str) -> Option<u64> {
    let fields: Vec<&str> = text.get(text.rfind(')')? + 1..)?.split_whitespace().collect();
    // Field 3 (state) is index 0 here, so utime (14) is 11 and stime (15) is 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// utime + stime of each thread of `pid`, keyed by thread id, with its name.
pub fn thread_ticks(pid: u32) -> HashMap<u32, (String, u64)> {
    let mut threads = HashMap::new();
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return threads };
    for entry in entries.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")) else { continue };
        let name = text.find('(').zip(text.rfind(')')).map(|(a, b)| text[a + 1..b].to_string()).unwrap_or_default();
        if let Some(ticks) = parse_stat_ticks(&text) {
            threads.insert(tid, (name, ticks));
        }
    }
    threads
}

/// Ticks spent per thread name between two [`thread_ticks`] snapshots.
pub fn thread_delta(
    before: &HashMap<u32, (String, u64)>,
    after: &HashMap<u32, (String, u64)>,
) -> std::collections::BTreeMap<String, u64> {
    let mut by_name = std::collections::BTreeMap::new();
    for (tid, (name, ticks)) in after {
        let earlier = before.get(tid).map(|(_, t)| *t).unwrap_or(0);
        *by_name.entry(name.clone()).or_default() += ticks.saturating_sub(earlier);
    }
    by_name
}

/// A `Name:   123 kB` field of `/proc/<pid>/status` (`VmRSS:`, `RssAnon:`, `RssFile:`), in KiB.
pub fn status_kib(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].split_whitespace().next()?.parse().ok()
}

/// Busy and total ticks over all CPUs, from the first line of `/proc/stat`.
pub fn machine_ticks() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    parse_machine_ticks(&text).unwrap_or((0, 0))
}

pub fn parse_machine_ticks(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().next()?.strip_prefix("cpu ")?;
    let values: Vec<u64> = line.split_whitespace().filter_map(|v| v.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal [guest guest_nice, already inside user/nice]
    let total: u64 = values.iter().take(8).sum();
    let idle = values.get(3)? + values.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// PostgreSQL processes at one instant, split into those serving `database`
/// and the cluster's shared helpers (postmaster, WAL writer, checkpointer,
/// background writer), which every database on the cluster uses.
#[derive(Default, Clone, Debug)]
pub struct PgProcesses {
    pub backends: HashMap<u32, u64>,
    pub shared: HashMap<u32, u64>,
}

/// What a role a PostgreSQL process plays for the database being measured.
#[derive(Debug, PartialEq, Eq)]
pub enum PgRole {
    Backend,
    Shared,
    Other,
}

/// Classifies a PostgreSQL process by its (retitled) command line.
pub fn pg_role(cmdline: &str, database: &str) -> PgRole {
    let words: Vec<&str> = cmdline.split_whitespace().collect();
    if words.contains(&database) {
        return PgRole::Backend;
    }
    let shared = ["checkpointer", "background writer", "walwriter", "/bin/postgres"];
    if shared.iter().any(|s| cmdline.contains(s)) {
        PgRole::Shared
    } else {
        PgRole::Other
    }
}

pub fn pg_processes(database: &str) -> PgProcesses {
    let mut found = PgProcesses::default();
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() != "postgres" {
            continue;
        }
        let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        let Some(ticks) = process_ticks(pid) else { continue };
        match pg_role(&cmdline, database) {
            PgRole::Backend => found.backends.insert(pid, ticks),
            PgRole::Shared => found.shared.insert(pid, ticks),
            PgRole::Other => None,
        };
    }
    found
}

/// Ticks spent between two snapshots by the processes alive at the second
/// (a process that exited in between is lost; one that started counts in full).
pub fn delta(before: &HashMap<u32, u64>, after: &HashMap<u32, u64>) -> u64 {
    after.iter().map(|(pid, ticks)| ticks.saturating_sub(before.get(pid).copied().unwrap_or(0))).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_ticks_skip_odd_command_names() {
        let text = "1234 (tokio (rt) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 8 0 1 0 0";
        assert_eq!(parse_stat_ticks(text), Some(325));
    }

    #[test]
    fn machine_ticks_count_iowait_as_idle() {
        let text = "cpu  100 5 50 800 40 1 2 0 0 0\ncpu0 1 2 3";
        assert_eq!(parse_machine_ticks(text), Some((158, 998)));
    }

    #[test]
    fn pg_roles_by_title() {
        let db = "bazaar_bench_7";
        assert_eq!(pg_role("postgres: 15/main: postgres bazaar_bench_7 127.0.0.1(5544) idle", db), PgRole::Backend);
        assert_eq!(pg_role("postgres: 15/main: postgres bazaar_bench_77 127.0.0.1(5544) idle", db), PgRole::Other);
        assert_eq!(pg_role("postgres: 15/main: walwriter ", db), PgRole::Shared);
        assert_eq!(pg_role("/usr/lib/postgresql/15/bin/postgres -D /var/lib/x", db), PgRole::Shared);
    }

    #[test]
    fn own_threads_are_found() {
        let threads = thread_ticks(std::process::id());
        assert!(!threads.is_empty());
        let names = thread_delta(&HashMap::new(), &threads);
        assert!(!names.is_empty());
    }

    #[test]
    fn status_fields_in_kib() {
        let status = "Name:\tbazaar\nVmRSS:\t  141312 kB\nRssAnon:\t   90000 kB\n";
        assert_eq!(status_kib(status, "VmRSS:"), Some(141_312));
        assert_eq!(status_kib(status, "RssAnon:"), Some(90_000));
        assert_eq!(status_kib(status, "RssFile:"), None);
        let own = std::fs::read_to_string("/proc/self/status").unwrap();
        assert!(status_kib(&own, "VmRSS:").is_some_and(|kib| kib > 0));
    }

    #[test]
    fn delta_counts_new_processes_in_full() {
        let before = HashMap::from([(1, 10), (2, 5)]);
        let after = HashMap::from([(1, 15), (3, 7)]);
        assert_eq!(delta(&before, &after), 12);
    }
}
