//! The control API's named tokens: what each may do ([`Scope`]) and how it
//! is kept ([`TokenSpec`], its secret only as a hash). Tokens are part of
//! the stored state, changed like declarations, so a token made or revoked
//! on one node of a fleet reaches every other as any change does.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The name of the token the server makes at first start (or takes from
/// `[control] token`); it is not kept among the named tokens and is always
/// an admin.
pub const BOOTSTRAP: &str = "admin";

/// What a token may do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Scope {
    /// Every reading route, no change (dashboards, scrapers).
    Read,
    /// What `Read` may, and changes to the named services and zones only.
    Write { services: Vec<String>, zones: Vec<String> },
    /// Everything, including managing tokens.
    Admin,
}

/// A scope as text that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a scope: expected read, admin, or write:service=NAME,zone=NAME,... ({why})")]
pub struct ScopeError {
    pub text: String,
    pub why: &'static str,
}

impl Scope {
    /// Whether this scope may change the service `name`.
    pub fn writes_service(&self, name: &str) -> bool {
        match self {
            Scope::Admin => true,
            Scope::Write { services, .. } => services.iter().any(|service| same_name(service, name)),
            Scope::Read => false,
        }
    }

    /// Whether this scope may change the zone `name`.
    pub fn writes_zone(&self, name: &str) -> bool {
        match self {
            Scope::Admin => true,
            Scope::Write { zones, .. } => zones.iter().any(|zone| same_name(zone, name)),
            Scope::Read => false,
        }
    }
}

/// Domain names compare without case and without the root's dot.
fn same_name(a: &str, b: &str) -> bool {
    a.trim_end_matches('.').eq_ignore_ascii_case(b.trim_end_matches('.'))
}

impl fmt::Display for Scope {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Read => out.write_str("read"),
            Scope::Admin => out.write_str("admin"),
            Scope::Write { services, zones } => {
                let services = services.iter().map(|name| format!("service={name}"));
                let targets: Vec<String> = services.chain(zones.iter().map(|name| format!("zone={name}"))).collect();
                write!(out, "write:{}", targets.join(","))
            }
        }
    }
}

impl FromStr for Scope {
    type Err = ScopeError;

    fn from_str(text: &str) -> Result<Scope, ScopeError> {
        let refused = |why| ScopeError { text: text.into(), why };
        match text {
            "read" => return Ok(Scope::Read),
            "admin" => return Ok(Scope::Admin),
            _ => {}
        }
        let targets = text.strip_prefix("write:").ok_or_else(|| refused("an unknown scope"))?;
        let (mut services, mut zones) = (Vec::new(), Vec::new());
        for target in targets.split(',') {
            let (list, name) = match target.split_once('=') {
                Some(("service", name)) => (&mut services, name),
                Some(("zone", name)) => (&mut zones, name),
                _ => return Err(refused("each target is service=NAME or zone=NAME")),
            };
            if name.is_empty() {
                return Err(refused("a target without a name"));
            }
            // Matched against the request's path as sent: a name that
            // would be escaped there could never match.
            if name.contains(['/', '%', '?', '#']) {
                return Err(refused("a name with a character a path escapes"));
            }
            list.push(name.to_owned());
        }
        Ok(Scope::Write { services, zones })
    }
}

impl TryFrom<String> for Scope {
    type Error = ScopeError;

    fn try_from(text: String) -> Result<Scope, ScopeError> {
        text.parse()
    }
}

impl From<Scope> for String {
    fn from(scope: Scope) -> String {
        scope.to_string()
    }
}

/// A named token as the store keeps it: never the secret, only its
/// SHA-256. The secret is 256 random bits, so a fast hash is as safe as a
/// slow one: there is no dictionary to try, and a slow hash would only
/// slow every request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenSpec {
    pub name: String,
    /// The SHA-256 of the secret, in lowercase hex.
    pub sha256: String,
    pub scope: Scope,
    /// Unix seconds.
    pub created: u64,
    /// Refused from the moment this is seen; kept, so that `list` shows it
    /// and the name is not given again.
    pub revoked: bool,
}

/// A token as listed: everything but its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenView {
    pub name: String,
    pub scope: Scope,
    pub created: u64,
    pub revoked: bool,
}

impl From<&TokenSpec> for TokenView {
    fn from(token: &TokenSpec) -> TokenView {
        TokenView { name: token.name.clone(), scope: token.scope.clone(), created: token.created, revoked: token.revoked }
    }
}

/// A request to make a token.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    pub name: String,
    pub scope: Scope,
}

/// The reply to [`NewToken`]: the secret, shown this once.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenMade {
    pub name: String,
    pub scope: Scope,
    pub token: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_read_back_as_written() {
        for text in ["read", "admin", "write:service=app.example.test.,zone=example.test.", "write:zone=a.test"] {
            let scope: Scope = text.parse().unwrap();
            assert_eq!(scope.to_string(), text);
        }
    }

    #[test]
    fn a_write_scope_reaches_its_targets_only() {
        let scope: Scope = "write:service=App.Example.Test,zone=example.test.".parse().unwrap();
        assert!(scope.writes_service("app.example.test."));
        assert!(!scope.writes_service("other.example.test."));
        assert!(scope.writes_zone("example.test"));
        assert!(!scope.writes_zone("app.example.test"), "a service is not a zone");
        assert!(!Scope::Read.writes_service("app.example.test."));
        assert!(Scope::Admin.writes_zone("anything."));
    }

    #[test]
    fn bad_scopes_are_named() {
        for text in ["", "write", "write:", "write:service=", "write:host=a", "readonly", "write:zone=a%2etest"] {
            let refused = text.parse::<Scope>().unwrap_err();
            assert_eq!(refused.text, text);
        }
    }
}
