//! Why a declaration is wrong, and where; why the control plane did not
//! make a change.

use std::fmt;
use std::sync::Arc;

/// What is wrong with a declaration, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// A path to the field, e.g. `service[www.example.test].replica[fra-1].address`.
    pub field: String,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for SpecError {}

impl SpecError {
    /// `field` is wrong, and `message` says how.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> SpecError {
        SpecError { field: field.into(), message: message.into() }
    }
}

/// Why a change was not made.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ControlError {
    /// The change would make the state invalid; `field` says where.
    #[error("{0}")]
    Invalid(SpecError),
    #[error("{0} not found")]
    NotFound(String),
    /// The change would create what exists already; `field` says which.
    #[error("{message}")]
    Conflict { field: String, message: String },
    /// The store could not commit: nothing changed, try again later.
    #[error("the store is unavailable: {0}")]
    Store(Source),
    /// A shared store took changes from other nodes after those this
    /// node's state holds (it has up to batch `applied`, the store up to
    /// `latest`): the change, made from that state, was not committed,
    /// lest it undo theirs. Catch up and make it again.
    #[error("the store has changes up to {latest} that this node has not applied yet (it has up to {applied})")]
    Behind { applied: u64, latest: u64 },
    /// Zone files (or the configuration naming them) could not be loaded:
    /// the old zones keep serving.
    #[error(transparent)]
    Zones(Source),
    /// The control thread is gone (the server is stopping).
    #[error("the control plane has stopped")]
    Stopped,
}

/// The error of another crate that a [`ControlError`] carries as it is;
/// shared, so that the error can be handed to every edit it refuses.
pub type Source = Arc<dyn std::error::Error + Send + Sync>;

impl ControlError {
    /// The store could not commit, for `error`.
    pub fn store(error: impl std::error::Error + Send + Sync + 'static) -> ControlError {
        ControlError::Store(Arc::new(error))
    }

    /// New zones cannot be served, for `error`.
    pub fn zones(error: impl std::error::Error + Send + Sync + 'static) -> ControlError {
        ControlError::Zones(Arc::new(error))
    }

    /// The value of `field` is wrong, and `message` says how.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> ControlError {
        ControlError::Invalid(SpecError { field: field.into(), message: message.into() })
    }
}
