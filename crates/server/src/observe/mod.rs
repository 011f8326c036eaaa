//! What the node has seen, for the API, the metrics and the dashboard.

pub mod activity;
pub mod history;
pub mod split;
