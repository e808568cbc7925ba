//! `bazaar-sim`: replays one seed (`--seed N [--steps S]`) or soaks many
//! (`--seeds K` from `--seed`), printing each seed first and, on a failure,
//! the seed, the step and the command that replays it.

use bazaar_sim::{run, Faults, Options, Report};
use std::io::Write;
use std::process::ExitCode;

const USAGE: &str =
    "usage: bazaar-sim --seed N [--steps S] [--seeds K] [--faults standard|peer-trouble|none] [--verbose]";
/// Steps per seed unless `--steps` says otherwise.
const STEPS_DEFAULT: usize = 400;

struct Args {
    seed: u64,
    seeds: u64,
    steps: usize,
    faults: Faults,
    verbose: bool,
}

fn parse() -> Result<Args, String> {
    let mut args = Args { seed: 1, seeds: 1, steps: STEPS_DEFAULT, faults: Faults::standard(), verbose: false };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--verbose" {
            args.verbose = true;
            continue;
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = |v: &str| v.parse::<u64>().map_err(|_| format!("{flag}: not a number: {v}"));
        match flag.as_str() {
            "--seed" => args.seed = number(&value)?,
            "--seeds" => args.seeds = number(&value)?.max(1),
            "--steps" => args.steps = number(&value)? as usize,
            "--faults" => {
                args.faults = match value.as_str() {
                    "standard" => Faults::standard(),
                    "peer-trouble" => Faults::peer_trouble(),
                    "none" => Faults::NONE,
                    other => return Err(format!("--faults: standard, peer-trouble or none, not {other}")),
                }
            }
            _ => return Err(format!("unknown flag {flag}; {USAGE}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let dir = std::env::temp_dir().join(format!("bazaar-sim-{}", std::process::id()));
    if let Err(error) = std::fs::create_dir_all(&dir) {
        eprintln!("cannot create {}: {error}", dir.display());
        return ExitCode::FAILURE;
    }
    let started = std::time::Instant::now();
    let mut total = Report::default();
    let mut out = std::io::stdout();
    for seed in args.seed..args.seed.saturating_add(args.seeds) {
        let _ = writeln!(out, "seed {seed}");
        let _ = out.flush();
        let opts = Options { faults: args.faults, verbose: args.verbose, ..Options::new(seed, args.steps) };
        match run(opts, &dir) {
            Ok(report) => {
                let _ = writeln!(out, "  ok: head {} digest {}", report.head_seq, report.digest);
                if args.seeds == 1 {
                    let _ = report.print(&mut out);
                    let _ = report.print_outcomes(&mut out);
                }
                total.add(&report);
            }
            Err(failure) => {
                let _ = writeln!(out, "FAILED {failure}");
                let _ = std::fs::remove_dir_all(&dir);
                return ExitCode::FAILURE;
            }
        }
    }
    if args.seeds > 1 {
        let _ = writeln!(out, "{} seeds passed in {:.1} s", args.seeds, started.elapsed().as_secs_f64());
        let _ = total.print(&mut out);
        let _ = total.print_outcomes(&mut out);
    } else {
        let _ = writeln!(out, "wall time {:.1} s", started.elapsed().as_secs_f64());
    }
    let _ = std::fs::remove_dir_all(&dir);
    ExitCode::SUCCESS
}
