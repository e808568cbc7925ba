//! What this process holds in memory, as `/metrics` shows it: every cache,
//! buffer and queue that grows with use (`bazaar_cache_entries{cache=…}`
//! beside its bound `bazaar_cache_entries_max`, absent where no constant
//! bounds it: the ledger does, or pruning), each SQLite database's connections and configured page cache
//! and mmap, tokio's live tasks, and the process's resident set from
//! `/proc/self/status`. Every figure is a length or a counter read under its
//! lock: a scrape scans nothing.

use crate::chamber::attacks::ATTACK_VISITORS_TRACKED_MAX;
use crate::state::AppState;
use bazaar_store::{CacheGauge, SqliteMemory};
use bazaar_types::limits::{HTTP_REQUESTS_IN_FLIGHT_MAX, WRITE_QUEUE_MAX};
use std::fmt::Write;

/// The memory section of `/metrics`, in Prometheus text.
pub fn render(state: &AppState) -> String {
    let mut caches = state.caches();
    let visitors = state.attack_limiter.visitors.lock().expect("limiter lock").len();
    caches.push(gauge("attack_visitors", visitors, Some(ATTACK_VISITORS_TRACKED_MAX)));
    caches.push(gauge("http_requests_in_flight", in_flight(state), Some(HTTP_REQUESTS_IN_FLIGHT_MAX)));
    caches.push(gauge("writer_queue", state.store.writer_stats().queued as usize, Some(WRITE_QUEUE_MAX)));
    caches.extend(state.store.caches());
    if let Ok(plane) = state.plane() {
        caches.extend(plane.caches());
    }
    let mut out = String::new();
    write_caches(&mut out, &caches);
    let mut databases = state.store.sqlite_memory();
    databases.extend(state.relay().ok().and_then(|relay| relay.store().memory()));
    databases.extend(state.plane().ok().and_then(|plane| plane.sqlite_memory()));
    write_sqlite(&mut out, &databases);
    let tasks = tokio::runtime::Handle::try_current().map(|h| h.metrics().num_alive_tasks()).unwrap_or(0);
    let tasks_help = "Tasks alive on the tokio runtime serving this registry.";
    let _ = writeln!(
        out,
        "# HELP bazaar_tokio_tasks {tasks_help}\n# TYPE bazaar_tokio_tasks gauge\nbazaar_tokio_tasks {tasks}"
    );
    write_process(&mut out, &std::fs::read_to_string("/proc/self/status").unwrap_or_default());
    out
}

fn gauge(cache: &'static str, entries: usize, max: Option<usize>) -> CacheGauge {
    CacheGauge { cache, entries: entries as u64, entries_max: max.map(|m| m as u64) }
}

fn in_flight(state: &AppState) -> usize {
    HTTP_REQUESTS_IN_FLIGHT_MAX.saturating_sub(state.requests.available_permits())
}

fn write_caches(out: &mut String, caches: &[CacheGauge]) {
    let _ = writeln!(
        out,
        "# HELP bazaar_cache_entries Entries held now by each in-memory cache, buffer or queue that grows with use.\n\
         # TYPE bazaar_cache_entries gauge"
    );
    for c in caches {
        let _ = writeln!(out, "bazaar_cache_entries{{cache=\"{}\"}} {}", c.cache, c.entries);
    }
    let _ = writeln!(
        out,
        "# HELP bazaar_cache_entries_max The most each cache holds (a cache without a line has no fixed bound: the ledger, or pruning, bounds it).\n\
         # TYPE bazaar_cache_entries_max gauge"
    );
    for c in caches {
        if let Some(max) = c.entries_max {
            let _ = writeln!(out, "bazaar_cache_entries_max{{cache=\"{}\"}} {max}", c.cache);
        }
    }
}

/// One SQLite figure: its series name, its help, and how to read it.
type SqliteSeries = (&'static str, &'static str, fn(&SqliteMemory) -> u64);

fn write_sqlite(out: &mut String, databases: &[SqliteMemory]) {
    let series: [SqliteSeries; 3] = [
        ("bazaar_sqlite_connections", "SQLite connections kept open, per database.", |d| d.connections),
        (
            "bazaar_sqlite_cache_size_bytes",
            "Page cache all of a database's connections may fill together (PRAGMA cache_size, as configured).",
            |d| d.cache_size_bytes,
        ),
        (
            "bazaar_sqlite_mmap_size_bytes",
            "File bytes each connection may map (PRAGMA mmap_size, as configured); mapped pages count in RSS as file-backed.",
            |d| d.mmap_size_bytes,
        ),
    ];
    for (name, help, value) in series {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for db in databases {
            let _ = writeln!(out, "{name}{{db=\"{}\"}} {}", db.db, value(db));
        }
    }
}

/// The resident set from `/proc/self/status` (kB there): all of it, and the
/// anonymous (heap, stacks) and file-backed (mapped files: the binary, SQLite's mmap) parts.
fn write_process(out: &mut String, status: &str) {
    for (field, name, help) in [
        ("VmRSS:", "bazaar_process_resident_bytes", "Resident set size of this process."),
        ("RssAnon:", "bazaar_process_resident_anon_bytes", "Resident anonymous memory (heap, stacks)."),
        (
            "RssFile:",
            "bazaar_process_resident_file_bytes",
            "Resident file-backed memory (the binary, SQLite's mmap): the kernel's page cache, counted once per mapping, \
             and SQLite maps each database once per connection.",
        ),
    ] {
        if let Some(kib) = status_kib(status, field) {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {}", kib * 1024);
        }
    }
}

/// A `Name:   123 kB` field of `/proc/<pid>/status`, in KiB.
pub fn status_kib(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_are_read_in_kib() {
        let status = "Name:\tbazaar\nVmRSS:\t  141312 kB\nRssAnon:\t   90000 kB\nRssFile:\t   51312 kB\n";
        assert_eq!(status_kib(status, "VmRSS:"), Some(141_312));
        assert_eq!(status_kib(status, "RssFile:"), Some(51_312));
        assert_eq!(status_kib(status, "VmSwap:"), None);
        let mut out = String::new();
        write_process(&mut out, status);
        assert!(out.contains("\nbazaar_process_resident_bytes 144703488\n"), "{out}");
        assert!(out.contains("\nbazaar_process_resident_anon_bytes 92160000\n"), "{out}");
    }

    #[test]
    fn a_cache_bounded_only_by_the_ledger_has_no_max_line() {
        let mut out = String::new();
        write_caches(&mut out, &[gauge("a", 3, Some(10)), gauge("b", 7, None)]);
        assert!(out.contains("bazaar_cache_entries{cache=\"a\"} 3\n"));
        assert!(out.contains("bazaar_cache_entries{cache=\"b\"} 7\n"));
        assert!(out.contains("bazaar_cache_entries_max{cache=\"a\"} 10\n"));
        assert!(!out.contains("bazaar_cache_entries_max{cache=\"b\"}"));
    }
}
