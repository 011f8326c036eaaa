//! DNS cookies (RFC 7873): every query with a COOKIE option gets a fresh
//! server cookie, made as RFC 9018 says (version 1, the time, SipHash-2-4
//! over the client cookie, those and the client's address) so that any
//! RFC 9018 server holding the same secret accepts it. Over UDP, a query
//! echoing a server cookie that is not good is answered BADCOOKIE; one
//! echoing a good one has shown that its source address is really its
//! own, and is exempt from response rate limiting. Over TCP and TLS the
//! connection's handshake has shown the address already: a query is
//! answered normally whatever server cookie it echoes (RFC 7873 section
//! 5.2.4 lets a server do so), with a fresh one to keep, as Knot DNS and
//! NSD answer.
//!
//! The secret is shared by every node (a master secret in the store) and
//! rotated on a schedule without any node telling another: the secret of
//! a period is derived from the master and the period's number, and a
//! cookie is checked with the secret of the period its own timestamp
//! falls in, so the previous period's cookies stay good for their hour.

use std::net::IpAddr;

use domain::base::Serial;
use domain::base::opt::cookie::{ClientCookie, ServerCookie, StandardServerCookie};
use pharos_answer::{CookieReply, SERVER_COOKIE_LEN};
use pharos_wire::edns::Cookie;
use siphasher::sip::SipHasher24;
use std::hash::Hasher;

/// RFC 9018 section 4.3: a server cookie older than this is not good.
const MAX_AGE_SECONDS: i64 = 3600;
/// ...nor one from further in the future than this (clock skew between nodes).
const MAX_AHEAD_SECONDS: i64 = 300;

/// The master secret every node shares and the length of a secret's period.
#[derive(Debug)]
pub struct CookieSecret {
    master: [u8; 16],
    rotation_seconds: u32,
}

/// The server's reply to a query's cookie, and whether the query proved
/// its address with a good server cookie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Checked {
    pub reply: CookieReply,
    pub proven: bool,
}

impl CookieSecret {
    pub fn new(master: [u8; 16], rotation_seconds: u32) -> CookieSecret {
        CookieSecret { master, rotation_seconds: rotation_seconds.max(1) }
    }

    /// The secret of the period that `unix_seconds` falls in.
    fn secret_at(&self, unix_seconds: u32) -> [u8; 16] {
        let period = unix_seconds / self.rotation_seconds;
        let half = |which: u8| {
            let mut hasher = SipHasher24::new_with_key(&self.master);
            hasher.write_u32(period);
            hasher.write_u8(which);
            hasher.finish().to_le_bytes()
        };
        let mut secret = [0; 16];
        secret[..8].copy_from_slice(&half(0));
        secret[8..].copy_from_slice(&half(1));
        secret
    }

    /// Checks `cookie`, from `client` at `now` (Unix seconds), and makes
    /// the server cookie to send back.
    pub(crate) fn check(&self, cookie: &Cookie, client: IpAddr, now: u32) -> Checked {
        let client_cookie = ClientCookie::from_octets(cookie.client);
        let proven = cookie.server().is_some_and(|server| self.is_good(client_cookie, server, client, now));
        let echoed = cookie.server().is_some();
        Checked { reply: CookieReply { server: self.fresh(client_cookie, client, now), bad: echoed && !proven }, proven }
    }

    /// The server's reply to `cookie` from `client` over a stream, now: a
    /// fresh server cookie, whatever it echoes, which is not checked.
    pub(crate) fn over_stream(&self, cookie: &Cookie, client: IpAddr) -> CookieReply {
        CookieReply { server: self.fresh(ClientCookie::from_octets(cookie.client), client, unix_seconds()), bad: false }
    }

    /// The server cookie made for `client_cookie` and `client` at `now`.
    fn fresh(&self, client_cookie: ClientCookie, client: IpAddr, now: u32) -> [u8; SERVER_COOKIE_LEN] {
        let made = ServerCookie::from(StandardServerCookie::calculate(client_cookie, Serial(now), client, &self.secret_at(now)));
        let mut server = [0; SERVER_COOKIE_LEN];
        server.copy_from_slice(made.as_ref());
        server
    }

    /// Whether `server` is a cookie this secret made for this client
    /// cookie and address, and is neither too old nor from the future.
    fn is_good(&self, client_cookie: ClientCookie, server: &[u8], client: IpAddr, now: u32) -> bool {
        let Some(standard) = ServerCookie::from_octets(server).try_to_standard() else { return false };
        let made = standard.timestamp().into_int();
        let age = i64::from(now.wrapping_sub(made) as i32);
        (-MAX_AHEAD_SECONDS..=MAX_AGE_SECONDS).contains(&age)
            && standard.version() == 1
            && standard.check_hash(client_cookie, client, &self.secret_at(made))
    }
}

/// The time as cookies carry it: Unix seconds, modulo 2^32 (RFC 9018
/// compares them in serial number arithmetic).
pub(crate) fn unix_seconds() -> u32 {
    crate::unix_seconds(std::time::SystemTime::now()) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u32 = 1_700_000_000;
    const CLIENT: [u8; 8] = [0x24, 0x64, 0xc4, 0xab, 0xcf, 0x10, 0xc9, 0x57];

    fn secret() -> CookieSecret {
        CookieSecret::new(*b"sixteen octets!!", 86_400)
    }

    fn address() -> IpAddr {
        "198.51.100.100".parse().unwrap()
    }

    fn cookie(server: Option<&[u8]>) -> Cookie {
        let mut body = CLIENT.to_vec();
        body.extend(server.unwrap_or_default());
        Cookie::parse(&body).unwrap()
    }

    #[test]
    fn a_client_cookie_alone_gets_a_version_1_server_cookie_with_the_time() {
        let checked = secret().check(&cookie(None), address(), NOW);
        assert!(!checked.proven && !checked.reply.bad);
        let server = checked.reply.server;
        assert_eq!(server[..4], [1, 0, 0, 0], "version 1, reserved zero");
        assert_eq!(server[4..8], NOW.to_be_bytes());
    }

    #[test]
    fn an_echoed_cookie_is_good_for_an_hour_and_across_a_rotation() {
        let secret = secret();
        // Made 30 minutes before a rotation, echoed 50 minutes later.
        let made = (NOW / 86_400 + 1) * 86_400 - 1800;
        let server = secret.check(&cookie(None), address(), made).reply.server;
        for later in [0, 3000, 3600] {
            let checked = secret.check(&cookie(Some(&server)), address(), made + later);
            assert!(checked.proven && !checked.reply.bad, "{later} s later");
        }
        let expired = secret.check(&cookie(Some(&server)), address(), made + 3601);
        assert!(!expired.proven && expired.reply.bad, "older than an hour");
        let from_the_future = secret.check(&cookie(Some(&server)), address(), made - 301);
        assert!(from_the_future.reply.bad, "more than five minutes ahead");
    }

    #[test]
    fn a_cookie_for_another_address_client_cookie_or_secret_is_bad() {
        let server = secret().check(&cookie(None), address(), NOW).reply.server;
        assert!(secret().check(&cookie(Some(&server)), "198.51.100.101".parse().unwrap(), NOW).reply.bad);
        let mut other_client = cookie(Some(&server));
        other_client.client[0] ^= 1;
        assert!(secret().check(&other_client, address(), NOW).reply.bad);
        assert!(CookieSecret::new([7; 16], 86_400).check(&cookie(Some(&server)), address(), NOW).reply.bad);
        let mut tampered = server;
        tampered[15] ^= 1;
        assert!(secret().check(&cookie(Some(&tampered)), address(), NOW).reply.bad);
        assert!(secret().check(&cookie(Some(&[1; 8])), address(), NOW).reply.bad, "not an RFC 9018 cookie");
    }

    #[test]
    fn over_a_stream_no_server_cookie_is_bad_and_a_fresh_one_is_given() {
        let secret = secret();
        let expired = secret.check(&cookie(None), address(), NOW - 7200).reply.server;
        for echoed in [None, Some(&expired[..]), Some(&[1; 8][..])] {
            let reply = secret.over_stream(&cookie(echoed), address());
            assert!(!reply.bad, "{echoed:?}");
            assert!(secret.check(&cookie(Some(&reply.server)), address(), unix_seconds()).proven, "{echoed:?}: the fresh one is good");
        }
    }

    #[test]
    fn nodes_sharing_the_master_accept_each_others_cookies() {
        let server = secret().check(&cookie(None), address(), NOW).reply.server;
        let other_node = secret();
        assert!(other_node.check(&cookie(Some(&server)), address(), NOW + 10).proven);
    }
}
