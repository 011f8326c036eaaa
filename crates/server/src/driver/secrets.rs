//! Secrets every node of a fleet shares, kept in the store: made at the
//! first start of the first node, read by every other.

use std::sync::Arc;

use pharos_transport::cookies::CookieSecret;

use crate::config::CookiesConfig;
use crate::driver::shell::{ControlShell, SecretError};

/// The store setting that keeps the master secret of server cookies.
const COOKIE_SECRET_SETTING: &str = "cookie_secret";

/// Why the cookie secret cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum CookieSecretError {
    #[error(transparent)]
    Kept(#[from] SecretError),
    #[error("the store's {COOKIE_SECRET_SETTING} setting")]
    Unreadable(#[source] BadSecret),
}

/// What is wrong with a secret written in hexadecimal.
#[derive(Debug, thiserror::Error)]
pub enum BadSecret {
    #[error("{0:?} is not 32 hexadecimal digits")]
    Length(String),
    #[error("{hex:?} is not hexadecimal")]
    NotHex { hex: String, source: std::num::ParseIntError },
}

/// The cookie secret the store keeps (made at the first start of the
/// first node, and read by every other), with `config`'s rotation.
pub fn cookie_secret(shell: &mut ControlShell, config: CookiesConfig) -> Result<Arc<CookieSecret>, CookieSecretError> {
    let (hex, _) = shell.secret_setting(COOKIE_SECRET_SETTING, 16)?;
    let master = parse_secret(&hex).map_err(CookieSecretError::Unreadable)?;
    Ok(Arc::new(CookieSecret::new(master, config.rotation_hours * 3600)))
}

/// Reads 16 octets written as 32 hexadecimal digits.
fn parse_secret(hex: &str) -> Result<[u8; 16], BadSecret> {
    let mut secret = [0u8; 16];
    if hex.len() != 32 || !hex.is_ascii() {
        return Err(BadSecret::Length(hex.to_owned()));
    }
    for (index, byte) in secret.iter_mut().enumerate() {
        *byte =
            u8::from_str_radix(&hex[2 * index..2 * index + 2], 16).map_err(|source| BadSecret::NotHex { hex: hex.to_owned(), source })?;
    }
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_cookie_secret_as_32_hexadecimal_digits() {
        assert_eq!(parse_secret("000102030405060708090a0b0c0d0e0f").unwrap(), std::array::from_fn(|index| index as u8));
        for bad in ["", "0001", "000102030405060708090a0b0c0d0e0g", "000102030405060708090a0b0c0d0e0f00", "é0102030405060708090a0b0c0d0e0"]
        {
            assert!(parse_secret(bad).is_err(), "{bad:?}");
        }
    }
}
