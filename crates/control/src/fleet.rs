//! When a node of a fleet shares its health (see [`crate::quorum`]): it
//! reports its probes' verdicts when they change, and that it is alive
//! every report interval, reading the others' in the same exchange with
//! the store. While the store cannot be reached it holds the fleet's
//! last verdicts for the staleness window, then serves its own view.

use pharos_model::fleet::FleetReports;

use crate::quorum::{FleetVerdicts, Quorum};

/// A node's schedule of exchanges with the fleet, and what it has
/// gathered from them.
#[derive(Debug, Clone)]
pub struct FleetHealth {
    quorum: Quorum,
    report_interval_ms: u64,
    /// When the next report is due (Unix ms).
    next_report: u64,
    /// When the last exchange with the store succeeded (Unix ms).
    exchanged: Option<u64>,
    /// Every node's verdicts, gathered from what each exchange read.
    known: FleetVerdicts,
}

/// Which verdicts a node serves after an exchange.
#[derive(Debug)]
pub enum Serve<'a> {
    /// The fleet's, weighed from every node's.
    Fleet(&'a FleetVerdicts),
    /// Those it served already: the store was not reached, but the fleet's
    /// last verdicts hold a while longer.
    Same,
    /// Its own probes': the store has not been reached for the staleness
    /// window.
    Own,
}

impl FleetHealth {
    /// A node of the fleet weighing verdicts by `quorum`, reporting every
    /// `report_interval_ms`, the first time at `now`.
    pub fn new(quorum: Quorum, report_interval_ms: u64, now: u64) -> FleetHealth {
        FleetHealth { quorum, report_interval_ms, next_report: now, exchanged: None, known: FleetVerdicts::default() }
    }

    pub fn quorum(&self) -> &Quorum {
        &self.quorum
    }

    /// When the next report is due (Unix ms).
    pub fn next_report(&self) -> u64 {
        self.next_report
    }

    /// Takes a reloaded quorum and report interval (the node keeps its
    /// name); the next report follows the new interval.
    pub fn follow(&mut self, quorum: Quorum, report_interval_ms: u64) {
        self.quorum = Quorum { node: std::mem::take(&mut self.quorum.node), ..quorum };
        self.next_report = self.next_report.saturating_sub(self.report_interval_ms) + report_interval_ms;
        self.report_interval_ms = report_interval_ms;
    }

    /// Starts an exchange at `now` (due or not: a verdict that changed is
    /// told at once): the next report is due an interval later. Returns the
    /// stamp to read the verdicts changed after.
    pub fn exchange(&mut self, now: u64) -> u64 {
        self.next_report = now + self.report_interval_ms;
        self.known.stamp()
    }

    /// Ends the exchange started at `now`: with what the store answered, or
    /// `None` if it could not be reached. Says which verdicts to serve.
    pub fn exchanged(&mut self, answer: Option<FleetReports>, now: u64) -> Serve<'_> {
        match answer {
            Some(reports) => {
                self.known.take(reports);
                self.exchanged = Some(now);
                Serve::Fleet(&self.known)
            }
            None if self.exchanged.is_some_and(|at| at + self.quorum.stale_after_ms > now) => Serve::Same,
            None => Serve::Own,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quorum::MAJORITY;

    fn quorum(stale_after_ms: u64) -> Quorum {
        Quorum { node: "n1".into(), stale_after_ms, down_share: MAJORITY }
    }

    fn reports(stamp: u64) -> FleetReports {
        FleetReports { reported: [("n2".to_owned(), 1000)].into(), verdicts: Vec::new(), stamp }
    }

    #[test]
    fn reports_fall_due_an_interval_after_the_last_exchange() {
        let mut fleet = FleetHealth::new(quorum(1000), 200, 5000);
        assert_eq!(fleet.next_report(), 5000, "the first at once");
        assert_eq!(fleet.exchange(5000), 0, "nothing read yet");
        assert_eq!(fleet.next_report(), 5200);
        assert!(matches!(fleet.exchanged(Some(reports(7)), 5000), Serve::Fleet(known) if known.stamp() == 7));
        assert_eq!(fleet.exchange(5150), 7, "a turn told early reads after what was read");
        assert_eq!(fleet.next_report(), 5350, "and moves the next report");
    }

    #[test]
    fn a_reload_moves_the_next_report_to_the_new_interval_and_keeps_the_name() {
        let mut fleet = FleetHealth::new(quorum(1000), 200, 5000);
        fleet.exchange(5000);
        fleet.follow(Quorum { node: "renamed".into(), stale_after_ms: 3000, down_share: 0.3 }, 500);
        assert_eq!(fleet.next_report(), 5500);
        assert_eq!(fleet.quorum(), &Quorum { node: "n1".into(), stale_after_ms: 3000, down_share: 0.3 });
    }

    #[test]
    fn without_the_store_the_fleet_s_verdicts_hold_for_the_staleness_window_then_its_own() {
        let mut fleet = FleetHealth::new(quorum(1000), 200, 0);
        assert!(matches!(fleet.exchanged(None, 0), Serve::Own), "never reached: its own view");
        assert!(matches!(fleet.exchanged(Some(reports(1)), 2000), Serve::Fleet(_)));
        assert!(matches!(fleet.exchanged(None, 2200), Serve::Same));
        assert!(matches!(fleet.exchanged(None, 2999), Serve::Same));
        assert!(matches!(fleet.exchanged(None, 3000), Serve::Own), "1000 ms after the last exchange");
        assert!(matches!(fleet.exchanged(Some(reports(2)), 3200), Serve::Fleet(_)), "reached again");
    }
}
