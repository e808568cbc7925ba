//! Server-side time per route, from the Prometheus text both Bazaar and the
//! baseline serve on `/metrics` (`bazaar_http_request_seconds_sum` and
//! `bazaar_http_requests_total`), and the small recorder the baseline uses.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Requests answered and seconds spent, per route.
pub type RouteTimes = BTreeMap<String, (f64, f64)>;

const SECONDS: &str = "bazaar_http_request_seconds_sum";
const REQUESTS: &str = "bazaar_http_requests_total";

/// Reads per-route request counts (summed over statuses) and seconds.
pub fn parse(text: &str) -> RouteTimes {
    let mut routes = RouteTimes::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let Ok(value) = value.parse::<f64>() else { continue };
        let Some((name, labels)) = series.split_once('{') else { continue };
        let Some(route) = label(labels, "route") else { continue };
        let entry = routes.entry(route).or_default();
        match name {
            REQUESTS => entry.0 += value,
            SECONDS => entry.1 += value,
            _ => {}
        }
    }
    routes
}

/// The group-commit writer's (batches, commands) counters, if the server has them.
pub fn writer(text: &str) -> Option<(f64, f64)> {
    let value =
        |name: &str| text.lines().find_map(|l| l.strip_prefix(name).and_then(|rest| rest.trim().parse::<f64>().ok()));
    Some((value("bazaar_writer_batches_total ")?, value("bazaar_writer_commands_total ")?))
}

/// Commands per writer transaction between two scrapes.
pub fn commands_per_batch(before: Option<(f64, f64)>, after: Option<(f64, f64)>) -> Option<f64> {
    let ((batches0, commands0), (batches1, commands1)) = (before?, after?);
    (batches1 > batches0).then(|| (commands1 - commands0) / (batches1 - batches0))
}

/// The value of label `key` in a series's `{…}` labels.
pub fn label(labels: &str, key: &str) -> Option<String> {
    let start = labels.find(&format!("{key}=\""))? + key.len() + 2;
    let end = labels[start..].find('"')? + start;
    Some(labels[start..end].to_string())
}

/// Mean server-side milliseconds per request, per route, between two scrapes.
pub fn mean_ms(before: &RouteTimes, after: &RouteTimes) -> BTreeMap<String, f64> {
    after
        .iter()
        .filter_map(|(route, (count, seconds))| {
            let (count0, seconds0) = before.get(route).copied().unwrap_or_default();
            let requests = count - count0;
            (requests > 0.0).then(|| (route.clone(), (seconds - seconds0) / requests * 1000.0))
        })
        .collect()
}

/// The baseline's counters, rendered in the same format Bazaar uses.
#[derive(Default)]
pub struct Recorder {
    counters: Mutex<BTreeMap<(String, u16), (u64, f64)>>,
}

impl Recorder {
    pub fn record(&self, route: &str, status: u16, seconds: f64) {
        let mut counters = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        let entry = counters.entry((route.to_string(), status)).or_default();
        entry.0 += 1;
        entry.1 += seconds;
    }

    pub fn render(&self) -> String {
        let counters = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = format!("# TYPE {REQUESTS} counter\n");
        for ((route, status), (count, _)) in counters.iter() {
            out.push_str(&format!("{REQUESTS}{{route=\"{route}\",status=\"{status}\"}} {count}\n"));
        }
        out.push_str(&format!("# TYPE {SECONDS} counter\n"));
        let mut seconds: BTreeMap<&str, f64> = BTreeMap::new();
        for ((route, _), (_, s)) in counters.iter() {
            *seconds.entry(route).or_default() += s;
        }
        for (route, s) in seconds {
            out.push_str(&format!("{SECONDS}{{route=\"{route}\"}} {s}\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bazaar_metrics() {
        let text = "# HELP x\nbazaar_http_requests_total{route=\"/v1/settlements\",status=\"200\"} 10\n\
            bazaar_http_requests_total{route=\"/v1/settlements\",status=\"409\"} 2\n\
            bazaar_http_request_seconds_sum{route=\"/v1/settlements\"} 0.6\nbazaar_settlements_total 10\n";
        let routes = parse(text);
        assert_eq!(routes["/v1/settlements"], (12.0, 0.6));
        let before = RouteTimes::from([("/v1/settlements".to_string(), (2.0, 0.1))]);
        assert!((mean_ms(&before, &routes)["/v1/settlements"] - 50.0).abs() < 1e-9);
    }

    #[test]
    fn reads_writer_batch_sizes() {
        let before = writer("bazaar_writer_batches_total 10\nbazaar_writer_commands_total 100\n");
        let after = writer("bazaar_writer_batches_total 20\nbazaar_writer_commands_total 400\n");
        assert_eq!(commands_per_batch(before, after), Some(30.0));
        assert_eq!(writer("nothing here"), None);
    }

    #[test]
    fn recorder_round_trips() {
        let recorder = Recorder::default();
        recorder.record("/v1/tokens", 201, 0.002);
        recorder.record("/v1/tokens", 201, 0.004);
        let routes = parse(&recorder.render());
        assert_eq!(routes["/v1/tokens"].0, 2.0);
        assert!((routes["/v1/tokens"].1 - 0.006).abs() < 1e-12);
    }
}
