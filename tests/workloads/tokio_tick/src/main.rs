//! tokio_tick: seed report 001. A tokio `interval` of 1 ms with the default
//! `MissedTickBehavior::Burst` writes a heartbeat per tick. Stop the process (SIGSTOP)
//! and continue it: every tick it missed fires at once, a catch-up burst.
//!
//! `tokio_tick [--wait] [--seconds S] [--period-ms P] [--skip]`: with --wait prints
//! "pid N" and waits for a line on stdin. At the end prints one JSON line: the ticks, the
//! longest gap between two ticks (the stop) and how many ticks came in the first 100 ms
//! after it.

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};
use tokio::time::{interval, MissedTickBehavior};

struct Opts {
    wait: bool,
    seconds: f64,
    period_ms: u64,
    skip: bool,
}

fn parse() -> Opts {
    let mut o = Opts { wait: false, seconds: 6.0, period_ms: 1, skip: false };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--wait" => o.wait = true,
            "--skip" => o.skip = true,
            "--seconds" => o.seconds = args.next().and_then(|v| v.parse().ok()).expect("--seconds S"),
            "--period-ms" => o.period_ms = args.next().and_then(|v| v.parse().ok()).expect("--period-ms P"),
            _ => panic!("unknown argument {a}"),
        }
    }
    o
}

fn main() {
    let o = parse();
    if o.wait {
        println!("pid {}", std::process::id());
        std::io::stdout().flush().unwrap();
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).unwrap();
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let ticks = rt.block_on(async {
        let mut heartbeat = std::fs::OpenOptions::new().write(true).open("/dev/null").unwrap();
        let mut iv = interval(Duration::from_millis(o.period_ms));
        if o.skip {
            iv.set_missed_tick_behavior(MissedTickBehavior::Skip);
        }
        let end = Instant::now() + Duration::from_secs_f64(o.seconds);
        let mut ticks = Vec::new();
        while Instant::now() < end {
            iv.tick().await;
            ticks.push(Instant::now());
            heartbeat.write_all(b"tick\n").unwrap(); // one write(2) per tick
        }
        ticks
    });
    // the stop: the longest gap between two ticks, then the ticks of the 100 ms after it
    let (mut gap, mut at) = (Duration::ZERO, 0);
    for i in 1..ticks.len() {
        let d = ticks[i] - ticks[i - 1];
        if d > gap {
            gap = d;
            at = i;
        }
    }
    let after = ticks[at..].iter().take_while(|t| **t - ticks[at] < Duration::from_millis(100)).count();
    println!(
        "{{\"tid\": {}, \"ticks\": {}, \"gap_ns\": {}, \"ticks_first_100ms\": {}}}",
        std::process::id(),
        ticks.len(),
        gap.as_nanos(),
        after
    );
}
