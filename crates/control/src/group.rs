//! Group commit, as databases do with their logs: the edits queued while
//! the last commit ran are applied in order, validated together and
//! committed once. If together they are invalid, each is redone alone, so
//! every edit is accepted or refused on its own merits. A commit names
//! the tokens whose edits it holds: the change log keeps them with it.

use pharos_model::ControlError;
use pharos_model::{Change, State};

/// Computes a request's changes from the state as it stands once every
/// request before it is applied. It may run twice: if its batch as a whole
/// is invalid, each request is redone alone against the committed state.
pub type Edit = Box<dyn Fn(&State) -> Result<Vec<Change>, ControlError> + Send>;

/// An edit, and the name of the token whose request it is.
pub struct Asked {
    pub author: String,
    pub edit: Edit,
}

/// What a group commit commits to: the state as committed, and the one way
/// to change it.
pub trait Committer {
    fn state(&self) -> &State;
    /// Validates and commits `changes`, which turn the committed state into
    /// `next` (made by the caller, so they are applied only once), asked
    /// for by the tokens named `authors`.
    fn commit(&mut self, next: State, changes: &[Change], authors: &[String]) -> Result<(), ControlError>;
}

/// Commits `edits` in one transaction if together they are valid, else one
/// at a time. Returns each edit's outcome, in order: the changes it made,
/// or why none.
pub fn group_commit(committer: &mut impl Committer, edits: &[Asked]) -> Vec<Result<Vec<Change>, ControlError>> {
    let mut state = committer.state().clone();
    let mut outcomes: Vec<Result<Vec<Change>, ControlError>> = Vec::with_capacity(edits.len());
    let mut authors: Vec<String> = Vec::new();
    for asked in edits {
        let outcome = (asked.edit)(&state);
        if let Ok(changes) = &outcome {
            state.apply(changes);
            if !authors.contains(&asked.author) {
                authors.push(asked.author.clone());
            }
        }
        outcomes.push(outcome);
    }
    let accepted = outcomes.iter().filter(|outcome| outcome.is_ok()).count();
    let all = Change::coalesced(outcomes.iter().flatten().flatten().cloned().collect());
    match committer.commit(state, &all, &authors) {
        Ok(()) => outcomes,
        Err(ControlError::Invalid(_)) if accepted > 1 => {
            edits.iter().zip(outcomes).map(|(edit, outcome)| outcome.and_then(|_| commit_alone(committer, edit))).collect()
        }
        Err(error) => outcomes.into_iter().map(|outcome| outcome.and_then(|_| Err(error.clone()))).collect(),
    }
}

fn commit_alone(committer: &mut impl Committer, asked: &Asked) -> Result<Vec<Change>, ControlError> {
    let changes = (asked.edit)(committer.state())?;
    committer.commit(committer.state().with(&changes), &changes, std::slice::from_ref(&asked.author))?;
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pharos_model::spec::{ReplicaSpec, ServiceSpec};

    /// A committer that refuses any service named outside example.test,
    /// and notes the authors of each commit.
    #[derive(Default)]
    struct Book {
        state: State,
        commits: Vec<Vec<String>>,
    }

    impl Committer for Book {
        fn state(&self) -> &State {
            &self.state
        }

        fn commit(&mut self, next: State, changes: &[Change], authors: &[String]) -> Result<(), ControlError> {
            if let Some(outside) = next.services.iter().find(|service| !service.name.ends_with(".example.test")) {
                return Err(ControlError::invalid(format!("service[{}].name", outside.name), "not inside any served zone"));
            }
            assert_eq!(self.state.with(changes), next, "the changes make the state given");
            self.state = next;
            self.commits.push(authors.to_vec());
            Ok(())
        }
    }

    /// The token `ops` puts a service `name`.
    fn put(name: &'static str) -> Asked {
        let spec = ServiceSpec::new(name, "static", vec![ReplicaSpec::new("a", "192.0.2.1".parse().unwrap())]);
        Asked { author: "ops".into(), edit: Box::new(move |_: &State| Ok(vec![Change::PutService(spec.clone())])) }
    }

    /// The token `author` adds `extra` to replica `a`'s weight of `name`.
    fn add_weight(author: &str, name: &'static str, extra: u32) -> Asked {
        let edit = Box::new(move |state: &State| {
            let mut service = crate::edit::find_service(state, name)?.clone();
            service.replicas[0].weight += extra;
            Ok(vec![Change::PutService(service)])
        });
        Asked { author: author.into(), edit }
    }

    #[test]
    fn a_valid_batch_commits_once_with_its_edits_in_order_naming_each_author_once() {
        let mut book = Book::default();
        let edits = [put("www.example.test"), add_weight("ci", "www.example.test", 4), add_weight("ops", "www.example.test", 10)];
        let outcomes = group_commit(&mut book, &edits);
        assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        assert_eq!(book.commits, [["ops", "ci"]]);
        assert_eq!(book.state.services[0].replicas[0].weight, 15);
    }

    #[test]
    fn an_invalid_batch_is_redone_edit_by_edit() {
        let mut book = Book::default();
        let edits = [
            put("www.example.test"),
            add_weight("ci", "www.example.test", 4),
            put("www.elsewhere.test"),
            add_weight("ci", "nosuch.example.test", 1),
        ];
        let outcomes = group_commit(&mut book, &edits);
        assert!(outcomes[0].is_ok() && outcomes[1].is_ok(), "{outcomes:?}");
        assert!(matches!(&outcomes[2], Err(ControlError::Invalid(error)) if error.message.contains("not inside any served zone")));
        assert!(matches!(outcomes[3], Err(ControlError::NotFound(_))));
        assert_eq!(book.commits, [["ops"], ["ci"]], "the two valid edits, alone");
        assert_eq!(book.state.services[0].replicas[0].weight, 5);
    }

    #[test]
    fn a_store_failure_refuses_every_accepted_edit() {
        struct Down(State);
        impl Committer for Down {
            fn state(&self) -> &State {
                &self.0
            }
            fn commit(&mut self, _: State, _: &[Change], _: &[String]) -> Result<(), ControlError> {
                Err(ControlError::store(std::io::Error::other("disk full")))
            }
        }
        let outcomes = group_commit(&mut Down(State::default()), &[put("a.example.test"), add_weight("ci", "nosuch.example.test", 1)]);
        assert!(matches!(&outcomes[0], Err(ControlError::Store(_))));
        assert!(matches!(outcomes[1], Err(ControlError::NotFound(_))));
    }
}
