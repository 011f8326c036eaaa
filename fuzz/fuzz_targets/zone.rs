//! Arbitrary text as a zone file, then queries against whatever loaded.
//! See `pharos_fuzz::fuzz_zone`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pharos_fuzz::fuzz_zone(data));
