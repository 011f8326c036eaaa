//! The xdpgen command: runs the generator (src/lib.rs) and prints its
//! summary, dnsload's JSON line. It exits with 1 when it fails, and with
//! [`xdpgen::EXIT_LIVE_FRAMES_REFUSED`] when the kernel refuses the test
//! runs it sends with (the reason on stderr), so a benchmark can tell that
//! apart from a failure.

use clap::Parser;
use xdpgen::kernel::LiveFramesRefused;

fn main() {
    match xdpgen::run(&xdpgen::Args::parse()) {
        Ok(report) => println!("{}", report.json()),
        Err(e) => {
            eprintln!("xdpgen: {e:#}");
            let refused = e.downcast_ref::<LiveFramesRefused>().is_some();
            std::process::exit(if refused { xdpgen::EXIT_LIVE_FRAMES_REFUSED } else { 1 });
        }
    }
}
