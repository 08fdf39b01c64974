//! The scheduler, measured (a bench binary: `cargo bench -p klaw-engine --bench
//! scheduler`):
//!
//! - next-run computation: `Schedule::next_after` for a few kinds of expression, in a
//!   zone with DST;
//! - a scheduler tick over 10,000 jobs in SQLite (target: under 5 ms): the claim
//!   transaction (`BEGIN IMMEDIATE`, expired leases, due jobs) and the next-run query,
//!   when nothing is due, and when 100 of the jobs are due each second (each claimed);
//!   and the end of one run recorded (done as each run ends, not in the tick).
//!
//! Numbers are printed, never asserted: machines differ.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a bench binary

use std::time::{Duration, Instant};

use jiff::Timestamp;
use klaw_engine::scheduler::{JobStore, Misfire, NewJob, Schedule, SqliteStore};

const JOBS: usize = 10_000;
const DUE: usize = 100;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn p95(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() * 95 / 100]
}

fn next_runs() {
    let from: Timestamp = "2026-03-01T00:00:00Z".parse().unwrap();
    for expr in [
        "* * * * * *",
        "*/5 * * * *",
        "30 2 * * *",
        "0 9 * * MON-FRI",
        "0 0 L * *",
        "0 12 * * 5#3",
    ] {
        let s = Schedule::parse(expr, "Europe/Berlin").unwrap();
        let n = 10_000u32;
        let mut at = from;
        let started = Instant::now();
        for _ in 0..n {
            at = s.next_after(at).unwrap();
        }
        let each = started.elapsed() / n;
        println!(
            "next run  {expr:<18} {:>8.2} µs each",
            each.as_secs_f64() * 1e6
        );
    }
    let started = Instant::now();
    for _ in 0..1000 {
        Schedule::parse("0 9 * * MON-FRI", "America/New_York").unwrap();
    }
    println!(
        "parse     {:<18} {:>8.2} µs each",
        "0 9 * * MON-FRI",
        started.elapsed().as_secs_f64() * 1e6 / 1000.0
    );
}

fn ticks() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::new(dir.path().join("schedule.sqlite"), 10);
    let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let zones = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo"];
    let crons = [
        "0 9 * * *",
        "30 2 * * *",
        "0 */6 * * *",
        "15 10 1 * *",
        "0 0 * * MON",
    ];
    let added = Instant::now();
    for i in 0..JOBS {
        let cron = if i < DUE {
            "* * * * * *".to_owned()
        } else {
            crons[i % crons.len()].to_owned()
        };
        store
            .add(
                &NewJob {
                    name: format!("job-{i:05}"),
                    cron,
                    timezone: zones[i % zones.len()].into(),
                    message: "report".into(),
                    model: None,
                    inject_into: None,
                    misfire: Misfire::Once,
                    origin: None,
                    history_messages: None,
                },
                start,
                u32::MAX,
            )
            .unwrap();
    }
    println!(
        "add       {JOBS} jobs, one transaction each: {:.1} s",
        added.elapsed().as_secs_f64()
    );
    let lease = Duration::from_secs(30);

    // 100 jobs due each second: claim, record each end, find the next run.
    let (mut busy, mut ends) = (Vec::new(), Vec::new());
    for s in 1..=200 {
        let now = start + jiff::SignedDuration::from_secs(s);
        let t = Instant::now();
        let claims = store.claim_due(now, "bench", lease).unwrap();
        assert_eq!(claims.len(), DUE);
        store.next_due().unwrap();
        busy.push(t.elapsed());
        let t = Instant::now();
        for c in &claims {
            store.finish(c, "bench", Ok(()), now).unwrap();
        }
        ends.push(t.elapsed() / u32::try_from(DUE).unwrap());
    }
    // Nothing due: the tick the engine makes most of the time.
    store
        .remove(&format!("job-{:05}", 0))
        .expect("remove one per-second job");
    for i in 1..DUE {
        store.remove(&format!("job-{i:05}")).unwrap();
    }
    let mut idle = Vec::new();
    for s in 1..=500 {
        // Between the daily runs: nothing is due.
        let now = start + jiff::SignedDuration::from_secs(300 + s);
        let t = Instant::now();
        let claims = store.claim_due(now, "bench", lease).unwrap();
        assert!(claims.is_empty());
        store.next_due().unwrap();
        idle.push(t.elapsed());
    }
    println!(
        "tick      {JOBS} jobs, none due:        median {:>7.3} ms, p95 {:>7.3} ms",
        median(idle.clone()).as_secs_f64() * 1e3,
        p95(idle).as_secs_f64() * 1e3
    );
    println!(
        "tick      {JOBS} jobs, {DUE} due (claimed): median {:>7.3} ms, p95 {:>7.3} ms",
        median(busy.clone()).as_secs_f64() * 1e3,
        p95(busy).as_secs_f64() * 1e3
    );
    println!(
        "run end   recorded (one transaction):  median {:>7.3} ms, p95 {:>7.3} ms",
        median(ends.clone()).as_secs_f64() * 1e3,
        p95(ends).as_secs_f64() * 1e3
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a plain run of the binary works too.
    next_runs();
    ticks();
}
