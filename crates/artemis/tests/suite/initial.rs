//! The Initial decoder and ClientHello table, on real clients' Initials
//! (quinn, aioquic; v1 and v2; one, two and three packets) fed in every
//! order, duplicated, truncated and corrupted, and on hand-sealed packets
//! for each malformed case.

use crate::support;

use std::time::{Duration, Instant};

use pharos_artemis::client_hello::{ClientHelloTable, Decoded, Limits};
use pharos_artemis::initial::{DropReason, QUIC_V2, QuicVersion};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use support::{SERVER_NAME, Sealed, aioquic_initials, client, crypto_frame, quinn_initials};

/// Every ordering of `items`.
fn permutations(items: &[Vec<u8>]) -> Vec<Vec<Vec<u8>>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut all = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let mut rest = items.to_vec();
        rest.remove(index);
        for mut tail in permutations(&rest) {
            tail.insert(0, item.clone());
            all.push(tail);
        }
    }
    all
}

/// Feeds `datagrams` in every order, each one twice in a row: the
/// ClientHello completes exactly on the last new datagram, and the
/// datagrams come back once each, in arrival order.
fn assert_reassembles_in_every_order(datagrams: &[Vec<u8>], alpn_first: &[u8]) {
    for order in permutations(datagrams) {
        let mut table = ClientHelloTable::new(Limits::default());
        let now = Instant::now();
        for (index, datagram) in order.iter().enumerate() {
            for _copy in 0..2 {
                let decoded = table.receive(client(), datagram, now).unwrap();
                if index + 1 < order.len() {
                    assert_eq!(decoded, Decoded::Incomplete);
                    continue;
                }
                let Decoded::Complete { hello, datagrams: forwarded } = decoded else {
                    // The second copy of the last datagram starts afresh.
                    assert_eq!(decoded, Decoded::Incomplete);
                    continue;
                };
                assert_eq!(hello.server_name.as_str(), SERVER_NAME);
                assert_eq!(hello.alpn[0], alpn_first);
                assert_eq!(forwarded, order, "unmodified, in arrival order");
            }
        }
    }
}

/// Each truncation and each single-byte corruption of each datagram is
/// dropped (or, where the version changed, answered with Version
/// Negotiation) and leaves the table as it was; the good copies then
/// still complete.
fn assert_damage_changes_nothing(datagrams: &[Vec<u8>]) {
    let mut table = ClientHelloTable::new(Limits::default());
    let now = Instant::now();
    let (first, rest) = datagrams.split_first().unwrap();
    if !rest.is_empty() {
        assert_eq!(table.receive(client(), first, now).unwrap(), Decoded::Incomplete);
    }
    let before = (table.len(), table.bytes());
    for datagram in datagrams {
        for cut in (0..datagram.len()).step_by(7) {
            assert!(table.receive(client(), &datagram[..cut], now).is_err(), "cut at {cut}");
            assert_eq!((table.len(), table.bytes()), before);
        }
        for position in (0..datagram.len()).step_by(5) {
            if datagram[position..].iter().all(|&byte| byte == 0) {
                continue; // aioquic pads after its packet: bytes no packet holds, ignored
            }
            let mut corrupted = datagram.clone();
            corrupted[position] ^= 0x10;
            match table.receive(client(), &corrupted, now) {
                Err(_) | Ok(Decoded::VersionNegotiation(_)) => {}
                Ok(other) => panic!("byte {position} corrupted gave {other:?}"),
            }
            assert_eq!((table.len(), table.bytes()), before, "byte {position} corrupted");
        }
    }
    let last = rest.iter().fold(None, |_, datagram| Some(table.receive(client(), datagram, now).unwrap()));
    let last = last.unwrap_or_else(|| table.receive(client(), first, now).unwrap());
    assert!(matches!(last, Decoded::Complete { .. }), "{last:?}");
}

#[test]
fn quinn_one_packet_client_hello() {
    let datagrams = quinn_initials(1);
    assert_eq!(datagrams.len(), 1);
    assert_reassembles_in_every_order(&datagrams, b"artemis-test-protocol-000");
    assert_damage_changes_nothing(&datagrams);
}

#[test]
fn quinn_client_hello_split_over_two_and_three_packets() {
    for (alpn_count, packets) in [(60, 2), (90, 3)] {
        let datagrams = quinn_initials(alpn_count);
        assert_eq!(datagrams.len(), packets, "{alpn_count} protocols");
        assert_reassembles_in_every_order(&datagrams, b"artemis-test-protocol-000");
        assert_damage_changes_nothing(&datagrams);
    }
}

#[test]
fn aioquic_v1_and_v2_in_one_and_two_packets() {
    for version in [QuicVersion::V1, QuicVersion::V2] {
        for (big, packets) in [(false, 1), (true, 2)] {
            let Some(datagrams) = aioquic_initials(version, big) else { return };
            assert_eq!(datagrams.len(), packets, "{version:?}, big: {big}");
            assert_eq!(&datagrams[0][1..5], &version.wire().to_be_bytes());
            assert_reassembles_in_every_order(&datagrams, b"h3");
            assert_damage_changes_nothing(&datagrams);
        }
    }
}

/// A ClientHello message with these extensions (type, data) and nothing
/// else worth reading.
fn client_hello(extensions: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(&[7; 32]); // random
    body.push(0); // no session ID
    body.extend_from_slice(&[0, 2, 0x13, 0x01]); // TLS_AES_128_GCM_SHA256
    body.extend_from_slice(&[1, 0]); // null compression
    let mut encoded = Vec::new();
    for (kind, data) in extensions {
        encoded.extend_from_slice(&kind.to_be_bytes());
        encoded.extend_from_slice(&(data.len() as u16).to_be_bytes());
        encoded.extend_from_slice(data);
    }
    body.extend_from_slice(&(encoded.len() as u16).to_be_bytes());
    body.extend_from_slice(&encoded);
    let mut message = vec![1];
    message.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    message.extend_from_slice(&body);
    message
}

fn sni(name: &str) -> (u16, Vec<u8>) {
    let mut entry = vec![0];
    entry.extend_from_slice(&(name.len() as u16).to_be_bytes());
    entry.extend_from_slice(name.as_bytes());
    let mut data = (entry.len() as u16).to_be_bytes().to_vec();
    data.extend_from_slice(&entry);
    (0, data)
}

fn alpn(protocols: &[&str]) -> (u16, Vec<u8>) {
    let mut list = Vec::new();
    for protocol in protocols {
        list.push(protocol.len() as u8);
        list.extend_from_slice(protocol.as_bytes());
    }
    let mut data = (list.len() as u16).to_be_bytes().to_vec();
    data.extend_from_slice(&list);
    (16, data)
}

fn receive_one(datagram: &[u8]) -> Result<Decoded, DropReason> {
    ClientHelloTable::new(Limits::default()).receive(client(), datagram, Instant::now())
}

#[test]
fn allowed_frames_around_a_hand_sealed_client_hello_in_v1_and_v2() {
    let hello = client_hello(&[alpn(&["h3", "doq"]), sni("Svc.Example.Test")]);
    // PING; ACK; CONNECTION_CLOSE with a reason; ACK with a second range and ECN counts.
    let mut frames = vec![0x01, 0x02, 0, 0, 0, 0, 0x1c, 0, 0, 2, b'o', b'k', 0x03, 5, 0, 1, 0, 1, 1, 1, 2, 3];
    frames.extend_from_slice(&crypto_frame(0, &hello));
    let v1 = Sealed::new(frames.clone());
    let v2 = Sealed { version: QUIC_V2, first_byte: 0xd3, ..v1.clone() };
    for sealed in [v1, v2] {
        let Decoded::Complete { hello, datagrams } = receive_one(&sealed.seal()).unwrap() else { panic!() };
        assert_eq!(hello.server_name.as_str(), "svc.example.test");
        assert_eq!(hello.alpn, [b"h3".to_vec(), b"doq".to_vec()]);
        assert_eq!(datagrams, [sealed.seal()]);
    }
}

#[test]
fn coalesced_initials_are_read_together_and_other_connections_ignored() {
    let hello = client_hello(&[sni(SERVER_NAME)]);
    let (head, tail) = hello.split_at(30);
    let first = Sealed { datagram_size: 600, ..Sealed::new(crypto_frame(30, tail)) };
    let second = Sealed { packet_number: 1, datagram_size: 600, ..Sealed::new(crypto_frame(0, head)) };
    let other_connection = Sealed { dcid: vec![9; 8], datagram_size: 100, ..Sealed::new(vec![0x08]) };
    let datagram = [first.seal(), second.seal(), other_connection.seal()].concat();
    let Decoded::Complete { hello, .. } = receive_one(&datagram).unwrap() else { panic!() };
    assert_eq!(hello.server_name.as_str(), SERVER_NAME);

    let empty_second = Sealed { packet_number: 1, datagram_size: 0, ..Sealed::new(Vec::new()) };
    let datagram = [Sealed { datagram_size: 1200, ..first }.seal(), empty_second.seal()].concat();
    assert_eq!(receive_one(&datagram), Err(DropReason::NoFrames));
}

#[test]
fn unknown_versions_get_version_negotiation_listing_v1_and_v2() {
    let mut datagram = vec![0xc0, 0x1a, 0x2a, 0x3a, 0x4a, 3, 1, 2, 3, 2, 4, 5];
    datagram.resize(1200, 0);
    let expected = [0xc0, 0, 0, 0, 0, 2, 4, 5, 3, 1, 2, 3, 0, 0, 0, 1, 0x6b, 0x33, 0x43, 0xcf];
    assert_eq!(receive_one(&datagram), Ok(Decoded::VersionNegotiation(expected.to_vec())));
    assert_eq!(receive_one(&datagram[..1199]), Err(DropReason::TooSmall(1199)), "no amplification");
}

#[test]
fn every_malformed_initial_is_dropped_with_its_reason() {
    let hello = || crypto_frame(0, &client_hello(&[sni(SERVER_NAME)]));
    let valid = Sealed::new(hello());
    let mut bad_tag = valid.seal();
    *bad_tag.last_mut().unwrap() ^= 1;
    let mut version_zero = valid.seal();
    version_zero[1..5].copy_from_slice(&[0; 4]);
    let cases: Vec<(Vec<u8>, DropReason)> = vec![
        (Vec::new(), DropReason::Truncated("first byte")),
        (vec![0xc3, 0, 0], DropReason::Truncated("version")),
        (vec![0x43; 1200], DropReason::ShortHeader),
        (version_zero, DropReason::VersionNegotiation),
        (Sealed { datagram_size: 1000, ..valid.clone() }.seal(), DropReason::TooSmall(1000)),
        (Sealed { dcid: vec![1; 21], ..valid.clone() }.seal(), DropReason::ConnectionIdTooLong(21)),
        (Sealed { dcid: vec![1; 4], ..valid.clone() }.seal(), DropReason::ConnectionIdTooShort(4)),
        (Sealed { first_byte: 0xe3, ..valid.clone() }.seal(), DropReason::NotInitial),
        (Sealed { version: QUIC_V2, ..valid.clone() }.seal(), DropReason::NotInitial),
        (Sealed { first_byte: 0x83, ..valid.clone() }.seal(), DropReason::FixedBitClear),
        (bad_tag, DropReason::Undecryptable),
        (Sealed { first_byte: 0xcf, ..valid.clone() }.seal(), DropReason::ReservedBits),
        (Sealed::new(vec![0x08, 0, 0]).seal(), DropReason::ForbiddenFrame(0x08)),
        (Sealed::new(vec![0x1e]).seal(), DropReason::ForbiddenFrame(0x1e)),
        (Sealed::new(vec![0x06, 0, 0x5f, 0xff]).seal(), DropReason::Truncated("CRYPTO data")),
        (Sealed::new(vec![0x02, 0, 0, 0x80, 0x10, 0, 0, 0]).seal(), DropReason::Truncated("ACK gap")),
        (Sealed::new(crypto_frame(100_000, b"x")).seal(), DropReason::CryptoTooFar(100_001)),
        (Sealed::new(crypto_frame(0, &[2, 0, 0, 1, 0])).seal(), DropReason::NotClientHello),
        (Sealed::new(crypto_frame(0, &[1, 0x10, 0, 0])).seal(), DropReason::ClientHelloTooLong(0x10_0004)),
        (Sealed::new(crypto_frame(0, &[1, 0, 0, 4, 1, 2, 3, 4])).seal(), DropReason::BadClientHello),
        (Sealed::new(crypto_frame(0, &client_hello(&[alpn(&["h3"])]))).seal(), DropReason::NoServerName),
        (Sealed::new(crypto_frame(0, &client_hello(&[sni("bad_name.example")]))).seal(), DropReason::BadServerName),
    ];
    for (datagram, reason) in cases {
        assert_eq!(receive_one(&datagram), Err(reason.clone()), "{reason}");
    }
}

#[test]
fn seeded_garbage_is_dropped() {
    let mut rng = SmallRng::seed_from_u64(15);
    let mut table = ClientHelloTable::new(Limits::default());
    for _ in 0..2000 {
        let mut datagram = vec![0; rng.random_range(1200..1500)];
        rng.fill(&mut datagram[..]);
        datagram[0] |= 0xc0;
        datagram[1..5].copy_from_slice(&1u32.to_be_bytes());
        assert!(table.receive(client(), &datagram, Instant::now()).is_err());
    }
    assert!(table.is_empty());
}

/// An Initial with the first bytes of a 1000-byte ClientHello, for the
/// connection named by `dcid`: it stays in the table.
fn partial_hello(dcid: u8, offset: u64) -> Vec<u8> {
    let mut data = vec![1, 0, 0x03, 0xe8];
    data.resize(100, 0);
    Sealed { dcid: vec![dcid; 8], ..Sealed::new(crypto_frame(offset, &data)) }.seal()
}

#[test]
fn the_table_keeps_its_caps_and_deadlines() {
    let limits = Limits { entries: 2, bytes_per_entry: 3000, total_bytes: 5000, lifetime: Duration::from_secs(2) };
    let mut table = ClientHelloTable::new(limits);
    let start = Instant::now();
    assert_eq!(table.receive(client(), &partial_hello(1, 0), start), Ok(Decoded::Incomplete));
    assert_eq!(table.receive(client(), &partial_hello(1, 100), start), Ok(Decoded::Incomplete));
    assert_eq!(table.receive(client(), &partial_hello(1, 200), start), Err(DropReason::EntryFull));
    assert_eq!(table.receive(client(), &partial_hello(2, 0), start), Ok(Decoded::Incomplete));
    assert_eq!(table.receive(client(), &partial_hello(3, 0), start), Err(DropReason::TableFull), "entries");
    assert_eq!(table.receive(client(), &partial_hello(2, 100), start), Err(DropReason::TableFull), "bytes");
    assert_eq!((table.len(), table.bytes()), (2, 3 * 1300));

    let later = start + Duration::from_secs(1);
    let expired = start + limits.lifetime;
    assert_eq!(table.receive(client(), &partial_hello(3, 0), later), Err(DropReason::TableFull));
    assert_eq!(table.receive(client(), &partial_hello(3, 0), expired), Ok(Decoded::Incomplete));
    assert_eq!((table.len(), table.bytes()), (1, 1300), "both old entries expired");
}
