//! `netdelay`: shapes the packets of one NFQUEUE queue like netem (fixed
//! delay, seeded random loss) until interrupted, then prints its counters.
//! For use by hand; bench/tail runs the same code in threads.
//!
//!     ip netns exec NS iptables -t raw -A PREROUTING -i DEV -j NFQUEUE --queue-num 0
//!     ip netns exec NS netdelay --queue 0 --delay-ms 30 --loss 0.02 --seed 1

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use netdelay::delayer::{self, Shaping};
use netdelay::nfqueue::Queue;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn main() {
    let mut queue = 0u16;
    let mut shaping = Shaping { delay: Duration::ZERO, loss: 0.0, seed: 1, target: None };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: netdelay [--queue N] [--delay-ms MS] [--loss FRACTION] [--seed N]";
    for pair in args.chunks(2) {
        let [flag, value] = pair else { panic!("{usage}") };
        match flag.as_str() {
            "--queue" => queue = value.parse().expect("--queue N"),
            "--delay-ms" => shaping.delay = Duration::from_secs_f64(value.parse::<f64>().expect("--delay-ms MS") / 1000.0),
            "--loss" => shaping.loss = value.parse().expect("--loss FRACTION"),
            "--seed" => shaping.seed = value.parse().expect("--seed N"),
            _ => panic!("{usage}"),
        }
    }
    for signal in [libc::SIGINT, libc::SIGTERM] {
        unsafe { libc::signal(signal, on_signal as *const () as libc::sighandler_t) };
    }
    let mut bound = Queue::open(queue, 128, 8192).unwrap_or_else(|error| panic!("cannot bind NFQUEUE queue {queue}: {error}"));
    eprintln!("netdelay: queue {queue}, delay {:?}, loss {}, seed {}", shaping.delay, shaping.loss, shaping.seed);
    let log = Mutex::new(Vec::new());
    let counters = delayer::run(&mut bound, &shaping, &AtomicBool::new(true), &STOP, &log).expect("netdelay");
    println!("{counters:?}");
}
