//! When a signed zone is signed again: a zone's keys change state at the
//! times their rollover set (published, active, retired, removed), and
//! the zones are then reloaded with signers for the keys' new states. A
//! step whose reload failed is not tried again at once, forever, but at
//! the next reload made for another reason (SIGHUP, the refresh, the API).

/// The key steps of the signed zones, and the last one tried.
#[derive(Debug, Clone, Default)]
pub struct KeySteps {
    /// The last step (Unix seconds) the zones were signed again for.
    tried: Option<u64>,
}

impl KeySteps {
    /// The first of `steps` (Unix seconds, each a zone signer's next) not
    /// tried yet.
    pub fn next(&self, steps: impl IntoIterator<Item = u64>) -> Option<u64> {
        steps.into_iter().filter(|&step| Some(step) != self.tried).min()
    }

    /// The step of `steps` due at `now` (Unix ms), if any, counted as tried:
    /// the zones are to be signed again for it.
    pub fn due(&mut self, steps: impl IntoIterator<Item = u64>, now: u64) -> Option<u64> {
        let step = self.next(steps).filter(|&step| step * 1000 <= now)?;
        self.tried = Some(step);
        Some(step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_step_of_any_zone_falls_due_at_its_second() {
        let mut steps = KeySteps::default();
        assert_eq!(steps.next([2000, 1000]), Some(1000));
        assert_eq!(steps.due([2000, 1000], 999_999), None, "a millisecond early");
        assert_eq!(steps.due([2000, 1000], 1_000_000), Some(1000));
        assert_eq!(steps.next([]), None, "no signed zone, no step");
    }

    #[test]
    fn a_step_tried_is_not_tried_again_and_the_next_one_follows() {
        let mut steps = KeySteps::default();
        assert_eq!(steps.due([1000, 2000], 1_500_000), Some(1000));
        // The reload failed: the signers still name the same steps.
        assert_eq!(steps.next([1000, 2000]), Some(2000), "not the one tried");
        assert_eq!(steps.due([1000, 2000], 1_600_000), None);
        assert_eq!(steps.due([1000, 2000], 2_000_000), Some(2000));
        // A reload for another reason signs the zones for the keys' states
        // at its time: their next steps are later ones.
        assert_eq!(steps.next([3000]), Some(3000));
    }
}
