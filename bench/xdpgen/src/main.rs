//! The xdpgen command: runs the generator (src/lib.rs) and prints its
//! summary, dnsload's JSON line.

use clap::Parser;

fn main() {
    match xdpgen::run(&xdpgen::Args::parse()) {
        Ok(report) => println!("{}", report.json()),
        Err(e) => {
            eprintln!("xdpgen: {e:#}");
            std::process::exit(1);
        }
    }
}
