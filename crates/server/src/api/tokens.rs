//! `/v1/tokens`: an admin makes, lists and revokes the named tokens. A
//! token is a change to the state like any other, committed to the store
//! and followed by every node of a fleet: one revoked on any node is
//! refused by each as soon as it has read the change.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use pharos_model::token::{BOOTSTRAP, NewToken, TokenMade, TokenSpec, TokenView};
use pharos_model::{Change, ControlError};
use ring::rand::{SecureRandom, SystemRandom};

use crate::api::auth::Author;
use crate::api::{Api, ApiError, Reply, auth, bad_request, commit};

/// A token's secret: 256 bits from the system's random source.
fn new_secret() -> Result<String, ApiError> {
    let mut bytes = [0u8; 32];
    SystemRandom::new().fill(&mut bytes).map_err(|_| ApiError {
        status: StatusCode::SERVICE_UNAVAILABLE,
        message: "the system's random source failed".into(),
        field: None,
    })?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// Refuses a name that is empty, too long, not letters, digits, `.`, `_`
/// and `-`, or the bootstrap token's.
fn check_name(name: &str) -> Result<(), ApiError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 64 || !name.chars().all(allowed) {
        return Err(bad_request("name", format!("{name:?}: a token's name is 1 to 64 letters, digits, '.', '_' or '-'")));
    }
    if name == BOOTSTRAP {
        return Err(bad_request("name", format!("{BOOTSTRAP:?} is the bootstrap token's name")));
    }
    Ok(())
}

pub(crate) async fn list(State(api): State<Api>) -> Json<Vec<TokenView>> {
    Json(api.control.state().tokens.iter().map(TokenView::from).collect())
}

/// Makes a token; the reply carries its secret, which is not kept.
pub(crate) async fn make(
    State(api): State<Api>,
    Extension(author): Extension<Author>,
    Json(new): Json<NewToken>,
) -> Reply<(StatusCode, Json<TokenMade>)> {
    check_name(&new.name)?;
    let secret = new_secret()?;
    let token = TokenSpec {
        name: new.name.clone(),
        sha256: auth::sha256_hex(&secret),
        scope: new.scope.clone(),
        created: crate::data::unix_millis() / 1000,
        revoked: false,
    };
    commit(&api, author, move |state| {
        if state.tokens.iter().any(|known| known.name == token.name) {
            let message = format!("a token named {:?} exists (revoked tokens keep their names)", token.name);
            return Err(ControlError::Conflict { field: "name".into(), message });
        }
        Ok(vec![Change::PutToken(token.clone())])
    })
    .await?;
    Ok((StatusCode::CREATED, Json(TokenMade { name: new.name, scope: new.scope, token: secret })))
}

/// Revokes a token: refused from the moment each node reads the change.
pub(crate) async fn revoke(State(api): State<Api>, Extension(author): Extension<Author>, Path(name): Path<String>) -> Reply<StatusCode> {
    commit(&api, author, move |state| {
        let token = state.tokens.iter().find(|token| token.name == name);
        let token = token.ok_or_else(|| ControlError::NotFound(format!("token {name}")))?;
        Ok(if token.revoked { Vec::new() } else { vec![Change::PutToken(TokenSpec { revoked: true, ..token.clone() })] })
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}
