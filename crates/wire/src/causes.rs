//! An error told with what caused it, as an operator reading a log line
//! needs it: "cannot load X: cannot read Y: permission denied".
//!
//! It lives here, in the crate at the bottom of the workspace, so that the
//! server, the store and the forwarder tell their errors the same way.

use std::error::Error;

/// `error` and its causes down to the system's, joined by ": ", each said
/// once: a cause whose text its error already ends with (as PostgreSQL's
/// client writes "error connecting to server: {cause}") is not repeated.
pub fn causes(error: &dyn Error) -> String {
    let mut said = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let text = inner.to_string();
        if !said.ends_with(&text) {
            said = format!("{said}: {text}");
        }
        cause = inner.source();
    }
    said
}

#[cfg(test)]
mod tests {
    use super::causes;
    use std::fmt;

    /// An error that says `text`, and then its cause if `repeats` it.
    #[derive(Debug)]
    struct Told {
        text: &'static str,
        cause: Option<Box<Told>>,
        repeats: bool,
    }

    impl fmt::Display for Told {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match &self.cause {
                Some(cause) if self.repeats => write!(f, "{}: {cause}", self.text),
                _ => f.write_str(self.text),
            }
        }
    }

    impl std::error::Error for Told {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.cause.as_deref().map(|cause| cause as _)
        }
    }

    fn told(text: &'static str, repeats: bool, cause: Option<Told>) -> Told {
        Told { text, cause: cause.map(Box::new), repeats }
    }

    #[test]
    fn each_cause_is_said_once_in_order() {
        let system = told("permission denied", false, None);
        assert_eq!(causes(&system), "permission denied");
        let read = told("cannot read y", false, Some(system));
        let load = told("cannot load x", false, Some(read));
        assert_eq!(causes(&load), "cannot load x: cannot read y: permission denied");
    }

    #[test]
    fn a_cause_its_error_already_tells_is_not_repeated() {
        let system = told("connection refused", false, None);
        let connect = told("error connecting to server", true, Some(system));
        let pool = told("cannot create a connection", true, Some(connect));
        assert_eq!(causes(&pool), "cannot create a connection: error connecting to server: connection refused");
    }
}
