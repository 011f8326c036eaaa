//! Why a client got the replicas it got: each step of a decision, in words
//! and numbers an operator can read at 3 a.m.

use std::fmt;

/// The decision path, step by step. Built only when asked for (the `explain`
/// API); the query path passes `None` and pays nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Explanation {
    pub steps: Vec<String>,
}

impl Explanation {
    pub fn note(&mut self, step: impl Into<String>) {
        self.steps.push(step.into());
    }
}

/// Records a step if an explanation is being built; the closure runs only
/// then, so the query path formats nothing.
pub fn note(explanation: &mut Option<&mut Explanation>, step: impl FnOnce() -> String) {
    if let Some(explanation) = explanation.as_deref_mut() {
        explanation.note(step());
    }
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (number, step) in self.steps.iter().enumerate() {
            writeln!(f, "{}. {step}", number + 1)?;
        }
        Ok(())
    }
}
