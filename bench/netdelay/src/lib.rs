//! netem emulated in user space over NFQUEUE, and the persistent-connections
//! experiment that bench/tail and this crate's tests/tail.rs run with it.

pub mod delayer;
pub mod experiment;
pub mod netns;
pub mod nfqueue;
pub mod stub;
