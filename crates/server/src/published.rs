//! What the control thread publishes for readers that never queue behind
//! it (the API, the metrics, the NOTIFY task, the fast path's status).

use std::sync::Arc;

use arc_swap::{ArcSwap, ArcSwapOption};
use pharos_model::State;
use pharos_transport::Observation;

use crate::artemis::ArtemisConfig;
use crate::data::DataStatus;
use crate::observe::activity::ControlActivity;
use crate::observe::history::EventLog;
use crate::observe::split::SplitWindow;
use crate::status::{FastPathStatus, StoreStatus};

/// Copies of the state and the data status for readers that never queue
/// behind the control plane; updated before any change is acknowledged.
pub struct Published {
    pub state: ArcSwap<State>,
    pub data: ArcSwap<DataStatus>,
    pub fastpath: ArcSwap<FastPathStatus>,
    /// `[artemis]` as the config file has it since the last start or reload.
    pub artemis: ArcSwapOption<ArtemisConfig>,
    /// What the control plane has done, counted for `/metrics`.
    pub activity: ControlActivity,
    /// What the transports count and log: they write it, the metrics and
    /// the split read it.
    pub observation: Arc<Observation>,
    /// The readings the realized split is measured from.
    pub split: SplitWindow,
    /// The last health transitions and changes, for the dashboard.
    pub events: EventLog,
    /// Written by the control thread and the store's follower.
    pub store: std::sync::Mutex<StoreStatus>,
}

impl Published {
    pub fn store_status(&self) -> StoreStatus {
        self.store.lock().expect("no writer panics holding it").clone()
    }

    pub fn update_store_status(&self, update: impl FnOnce(&mut StoreStatus)) {
        update(&mut self.store.lock().expect("no writer panics holding it"));
    }
}
