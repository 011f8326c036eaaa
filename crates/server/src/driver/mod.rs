//! The control plane's I/O around its rules (`pharos_control`).

pub mod keys;
pub mod secrets;
pub mod shell;
mod state_cache;
pub mod thread;
