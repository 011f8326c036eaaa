//! The control plane's driver, the I/O around its rules (`pharos_control`,
//! whose `plane::Plane` decides): the shell that owns the store, the files
//! and the published snapshot and does what the rules decide
//! ([`shell::ControlShell`]), and the thread that runs it with the clock
//! ([`thread::ControlThread`], the handle the API reaches it through).

pub mod keys;
pub mod response_settings;
pub mod secondary_copies;
pub mod secrets;
pub mod shell;
pub(crate) mod state_cache;
pub mod thread;

pub use state_cache::CacheError;
