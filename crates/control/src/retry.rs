//! When an edit the store refused is made again. A store shared by a fleet
//! refuses a change made from a state it has moved past (`Behind`): the
//! node catches up and makes it again from the newer state, so that
//! concurrent read-modify-writes through different nodes never undo one
//! another. An edit refused as invalid is refused only once the node has
//! looked for news: the data center or region it names may be one
//! another node declared an instant ago, its notification still on the
//! way. Both are bounded: after [`BEHIND_TRIES`] tries in all, or one
//! look for news, the refusal is the edit's outcome.

use pharos_model::ControlError;

/// How many times in all an edit is tried while the store refuses it
/// because other nodes changed the state first.
pub const BEHIND_TRIES: usize = 5;

/// Why a refused edit is tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Again {
    /// Made from a state the store has moved past: after catching up.
    Behind,
    /// Refused as invalid: only if catching up finds anything new.
    IfNews,
}

/// The tries of one edit (or one group of edits, tried together).
#[derive(Debug, Clone)]
pub struct Retries {
    /// Tries left after the one being made.
    left: usize,
    looked_for_news: bool,
}

impl Default for Retries {
    fn default() -> Self {
        Retries { left: BEHIND_TRIES - 1, looked_for_news: false }
    }
}

impl Retries {
    /// Whether an attempt that ended in `outcome` is tried again, and
    /// why; `None`: the outcome is final.
    pub fn again<T>(&self, outcome: &Result<T, ControlError>) -> Option<Again> {
        match outcome {
            _ if self.left == 0 => None,
            Err(ControlError::Behind { .. }) => Some(Again::Behind),
            Err(ControlError::Invalid { .. }) if !self.looked_for_news => Some(Again::IfNews),
            _ => None,
        }
    }

    /// Settles an attempt refused with `refusal`, to be tried `again`,
    /// once the node has caught up (`caught_up`: whether that brought
    /// anything new): `Ok` if it is tried again, else its final outcome.
    /// A refusal as invalid stands if nothing new could be read; a
    /// catch-up that failed is the outcome of an attempt that was behind.
    pub fn settle(&mut self, again: Again, caught_up: &Result<bool, ControlError>, refusal: ControlError) -> Result<(), ControlError> {
        match (again, caught_up) {
            (Again::Behind, Ok(_)) => Ok(()),
            (Again::Behind, Err(error)) => Err(error.clone()),
            (Again::IfNews, caught_up) => {
                self.looked_for_news = true;
                if matches!(caught_up, Ok(true)) { Ok(()) } else { Err(refusal) }
            }
        }
    }

    /// Counts a try made: the next one is the attempt again.
    pub fn tried(&mut self) {
        self.left = self.left.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn behind() -> ControlError {
        ControlError::Behind { applied: 6, latest: 7 }
    }

    fn invalid() -> ControlError {
        ControlError::invalid("replica[0].datacenter", "no data center \"fra\" is declared")
    }

    fn store_down() -> ControlError {
        ControlError::store(std::io::Error::other("cannot reach PostgreSQL"))
    }

    /// Plays an edit through its tries, the `tries`th refused as
    /// `refusals` says (if at all), each catch-up ending as `caught_up`
    /// says; returns its final outcome (the refusal in words) and the
    /// number of tries it took.
    fn play(
        refusals: impl Fn(usize) -> Option<ControlError>,
        caught_up: impl Fn() -> Result<bool, ControlError>,
    ) -> (Result<(), String>, usize) {
        let mut retries = Retries::default();
        for tries in 1..=BEHIND_TRIES {
            let outcome = refusals(tries).map_or(Ok(()), Err);
            let Some(again) = retries.again(&outcome) else { return (outcome.map_err(|error| error.to_string()), tries) };
            let refusal = outcome.expect_err("only a refusal is tried again");
            if let Err(error) = retries.settle(again, &caught_up(), refusal) {
                return (Err(error.to_string()), tries);
            }
            retries.tried();
        }
        panic!("tried more than {BEHIND_TRIES} times")
    }

    #[test]
    fn an_edit_behind_the_store_is_made_again_after_catching_up() {
        assert_eq!(play(|tries| (tries < 3).then(behind), || Ok(true)), (Ok(()), 3));
        assert_eq!(play(|tries| (tries < 3).then(behind), || Ok(false)), (Ok(()), 3), "news or not");
    }

    #[test]
    fn an_edit_always_behind_is_tried_five_times_and_then_refused_as_behind() {
        assert_eq!(play(|_| Some(behind()), || Ok(true)), (Err(behind().to_string()), BEHIND_TRIES));
    }

    #[test]
    fn an_edit_behind_a_store_that_cannot_be_read_is_refused_with_why() {
        assert_eq!(play(|_| Some(behind()), || Err(store_down())), (Err(store_down().to_string()), 1));
    }

    #[test]
    fn an_invalid_edit_is_made_again_once_if_catching_up_found_news() {
        assert_eq!(play(|tries| (tries == 1).then(invalid), || Ok(true)), (Ok(()), 2), "what it names was declared by another node");
        assert_eq!(play(|_| Some(invalid()), || Ok(true)), (Err(invalid().to_string()), 2), "invalid with the news too");
    }

    #[test]
    fn an_invalid_edit_stands_refused_if_nothing_new_could_be_read() {
        assert_eq!(play(|_| Some(invalid()), || Ok(false)), (Err(invalid().to_string()), 1));
        assert_eq!(play(|_| Some(invalid()), || Err(store_down())), (Err(invalid().to_string()), 1), "the refusal, not the store's");
    }

    #[test]
    fn the_look_for_news_counts_among_the_tries_behind() {
        let first_invalid = |tries: usize| Some(if tries == 1 { invalid() } else { behind() });
        assert_eq!(play(first_invalid, || Ok(true)), (Err(behind().to_string()), BEHIND_TRIES));
        let last_invalid = |tries: usize| Some(if tries < BEHIND_TRIES { behind() } else { invalid() });
        assert_eq!(play(last_invalid, || Ok(true)), (Err(invalid().to_string()), BEHIND_TRIES), "no try left to look for news");
    }

    #[test]
    fn other_refusals_are_final_at_once() {
        let not_found = || ControlError::NotFound("service www.example.test".into());
        assert_eq!(play(|_| Some(not_found()), || Ok(true)), (Err(not_found().to_string()), 1));
    }
}
