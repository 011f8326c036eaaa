//! Datagrams, raw or sealed with real Initial keys, through the Artemis
//! dispatcher's Initial decoder and ClientHello table. See
//! `pharos_fuzz::initial`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pharos_fuzz::initial::fuzz_initial(data));
