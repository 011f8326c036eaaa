//! The rules of the Pharos control plane, without I/O. [`plane::Plane`] is
//! the state machine the server drives: each input (a commit, a probe
//! result, a load report, a batch of latency measurements, a timer) takes
//! the time and returns its effects. It is built from: the declarations
//! (`pharos_model`) checked and built into routes ([`build`], every error
//! naming the field to fix), each service built again only when what it is
//! built from changed ([`services`]); the routing state they make
//! (`pharos_model::State`, changed by `Change`s that the operator's
//! [`edit`]s compute, committed in groups by [`group`]); latency
//! measurements checked before they are kept (`pharos_model::check_measurements`);
//! probes and their hysteresis ([`probe`], [`health`]), weighed with the
//! other nodes' on a shared store ([`quorum`]) in exchanges [`fleet`]
//! schedules; load control in timed rounds ([`load_control`], [`load`]);
//! signed zones signed again at their keys' steps ([`key_steps`]); and the
//! one builder of the snapshot the query path answers from, which moves a
//! zone's serial when what a secondary would transfer of it changes
//! ([`snapshot`]). Beside the plane, the rules the server's driver asks
//! before it acts: which of the file's declarations to apply
//! ([`declared`]), how a node follows a shared store's log and when it
//! reads it ([`follow`]), and when an edit the store refused is made
//! again ([`retry`]). No sockets, threads or clocks: times are Unix
//! milliseconds, passed in.

pub mod build;
pub mod catalog;
pub mod declared;
pub mod edit;
pub mod fleet;
pub mod follow;
pub mod group;
pub mod health;
pub mod key_steps;
pub mod load;
pub mod load_control;
pub mod plane;
pub mod probe;
pub mod quorum;
pub mod retry;
pub mod services;
pub mod snapshot;
pub mod zones;
