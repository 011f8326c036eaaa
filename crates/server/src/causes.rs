//! An error told with what caused it, as an operator reading a log line
//! needs it: "cannot load X: cannot read Y: permission denied".

use std::error::Error;

/// `error` and its causes down to the system's, each said once.
pub fn causes(error: &(dyn Error + 'static)) -> String {
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
