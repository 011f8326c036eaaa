//! Group commit, as databases do with their logs: the edits queued while
//! the last commit ran are applied in order, validated together and
//! committed once. If together they are invalid, each is redone alone, so
//! every edit is accepted or refused on its own merits.

use pharos_model::ControlError;
use pharos_model::{Change, State};

/// Computes a request's changes from the state as it stands once every
/// request before it is applied. It may run twice: if its batch as a whole
/// is invalid, each request is redone alone against the committed state.
pub type Edit = Box<dyn Fn(&State) -> Result<Vec<Change>, ControlError> + Send>;

/// What a group commit commits to: the state as committed, and the one way
/// to change it.
pub trait Committer {
    fn state(&self) -> &State;
    /// Validates and commits `changes`, which turn the committed state into
    /// `next` (made by the caller, so they are applied only once).
    fn commit(&mut self, next: State, changes: &[Change]) -> Result<(), ControlError>;
}

/// Commits `edits` in one transaction if together they are valid, else one
/// at a time. Returns each edit's outcome, in order: the changes it made,
/// or why none.
pub fn group_commit(committer: &mut impl Committer, edits: &[Edit]) -> Vec<Result<Vec<Change>, ControlError>> {
    let mut state = committer.state().clone();
    let mut outcomes: Vec<Result<Vec<Change>, ControlError>> = Vec::with_capacity(edits.len());
    for edit in edits {
        let outcome = edit(&state);
        if let Ok(changes) = &outcome {
            state.apply(changes);
        }
        outcomes.push(outcome);
    }
    let accepted = outcomes.iter().filter(|outcome| outcome.is_ok()).count();
    let all = Change::coalesced(outcomes.iter().flatten().flatten().cloned().collect());
    match committer.commit(state, &all) {
        Ok(()) => outcomes,
        Err(ControlError::Invalid(_)) if accepted > 1 => {
            edits.iter().zip(outcomes).map(|(edit, outcome)| outcome.and_then(|_| commit_alone(committer, edit))).collect()
        }
        Err(error) => outcomes.into_iter().map(|outcome| outcome.and_then(|_| Err(error.clone()))).collect(),
    }
}

fn commit_alone(committer: &mut impl Committer, edit: &Edit) -> Result<Vec<Change>, ControlError> {
    let changes = edit(committer.state())?;
    committer.commit(committer.state().with(&changes), &changes)?;
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pharos_model::spec::{ReplicaSpec, ServiceSpec};

    /// A committer that refuses any service named outside example.test,
    /// and counts its commits.
    #[derive(Default)]
    struct Book {
        state: State,
        commits: usize,
    }

    impl Committer for Book {
        fn state(&self) -> &State {
            &self.state
        }

        fn commit(&mut self, next: State, changes: &[Change]) -> Result<(), ControlError> {
            if let Some(outside) = next.services.iter().find(|service| !service.name.ends_with(".example.test")) {
                return Err(ControlError::invalid(format!("service[{}].name", outside.name), "not inside any served zone"));
            }
            assert_eq!(self.state.with(changes), next, "the changes make the state given");
            self.state = next;
            self.commits += 1;
            Ok(())
        }
    }

    fn put(name: &'static str) -> Edit {
        let spec = ServiceSpec::new(name, "static", vec![ReplicaSpec::new("a", "192.0.2.1".parse().unwrap())]);
        Box::new(move |_: &State| Ok(vec![Change::PutService(spec.clone())]))
    }

    /// An edit that adds `extra` to replica `a`'s weight of `name`.
    fn add_weight(name: &'static str, extra: u32) -> Edit {
        Box::new(move |state: &State| {
            let mut service = crate::edit::find_service(state, name)?.clone();
            service.replicas[0].weight += extra;
            Ok(vec![Change::PutService(service)])
        })
    }

    #[test]
    fn a_valid_batch_commits_once_with_its_edits_in_order() {
        let mut book = Book::default();
        let outcomes =
            group_commit(&mut book, &[put("www.example.test"), add_weight("www.example.test", 4), add_weight("www.example.test", 10)]);
        assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        assert_eq!(book.commits, 1);
        assert_eq!(book.state.services[0].replicas[0].weight, 15);
    }

    #[test]
    fn an_invalid_batch_is_redone_edit_by_edit() {
        let mut book = Book::default();
        let edits =
            [put("www.example.test"), add_weight("www.example.test", 4), put("www.elsewhere.test"), add_weight("nosuch.example.test", 1)];
        let outcomes = group_commit(&mut book, &edits);
        assert!(outcomes[0].is_ok() && outcomes[1].is_ok(), "{outcomes:?}");
        assert!(matches!(&outcomes[2], Err(ControlError::Invalid(error)) if error.message.contains("not inside any served zone")));
        assert!(matches!(outcomes[3], Err(ControlError::NotFound(_))));
        assert_eq!(book.commits, 2, "the two valid edits, alone");
        assert_eq!(book.state.services[0].replicas[0].weight, 5);
    }

    #[test]
    fn a_store_failure_refuses_every_accepted_edit() {
        struct Down(State);
        impl Committer for Down {
            fn state(&self) -> &State {
                &self.0
            }
            fn commit(&mut self, _: State, _: &[Change]) -> Result<(), ControlError> {
                Err(ControlError::store(std::io::Error::other("disk full")))
            }
        }
        let outcomes = group_commit(&mut Down(State::default()), &[put("a.example.test"), add_weight("nosuch.example.test", 1)]);
        assert!(matches!(&outcomes[0], Err(ControlError::Store(_))));
        assert!(matches!(outcomes[1], Err(ControlError::NotFound(_))));
    }
}
