//! netem emulated in user space over NFQUEUE, and the persistent-connections
//! experiment that bench/tail and tests/tail.rs run with it. std and libc
//! only: tests/tail.rs includes this file with `#[path]`, so every module
//! names its siblings through `super::`.

pub mod delayer;
pub mod experiment;
pub mod netns;
pub mod nfqueue;
pub mod stub;
