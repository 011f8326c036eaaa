//! Query bytes through the whole answer path: the first byte picks the
//! transport, the rest is the packet. See `pharos_fuzz::fuzz_respond`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pharos_fuzz::fuzz_respond(data));
