//! Writes a synthetic, Internet-sized MRT RIB dump (see the `bgpsynth` library).
//!
//! `bgp-synth --out FILE [--seed N]`; a name ending in `.gz` is gzipped.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use bgpsynth::Config;
use clap::Parser;

/// Write a seeded synthetic MRT TABLE_DUMP_V2 RIB dump.
#[derive(Parser)]
struct Args {
    /// Where to write; a name ending in .gz is gzipped.
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value_t = Config::internet(0).ases)]
    ases: usize,
    #[arg(long, default_value_t = Config::internet(0).prefixes_v4)]
    prefixes_v4: usize,
    #[arg(long, default_value_t = Config::internet(0).prefixes_v6)]
    prefixes_v6: usize,
    /// Collector peers with a full table each.
    #[arg(long, default_value_t = Config::internet(0).peers)]
    peers: usize,
}

fn main() -> io::Result<()> {
    let args = Args::parse();
    let config =
        Config { seed: args.seed, ases: args.ases, prefixes_v4: args.prefixes_v4, prefixes_v6: args.prefixes_v6, peers: args.peers };
    let started = Instant::now();
    let file = BufWriter::with_capacity(1 << 20, File::create(&args.out)?);
    let summary = if args.out.extension().is_some_and(|extension| extension == "gz") {
        let mut gzip = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
        let summary = bgpsynth::write(&config, &mut gzip)?;
        gzip.finish()?.flush()?;
        summary
    } else {
        bgpsynth::write(&config, file)?
    };
    println!("{}: {summary}", args.out.display());
    println!("written in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}
