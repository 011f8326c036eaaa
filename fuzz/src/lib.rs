//! Shared code of the Pharos fuzz targets: the snapshot they answer from,
//! and the invariants every response must keep; [`initial`] is the
//! Artemis dispatcher's Initial decoder target.
//!
//! The invariants are checked with code written here, independently of
//! `pharos-wire`, so that a bug there cannot hide itself.

pub mod initial;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, OnceLock};

use domain::base::{Message, ParsedName};
use domain::rdata::AllRecordData;
use pharos_answer::{Client, ResponseOptions, Settings, Snapshot, Transport, TsigAlgorithm, TsigKey, respond_oversized, respond_with};
use pharos_control::build::DataSources;
use pharos_control::snapshot::build_snapshot;
use pharos_model::spec::{DataCenterSpec, Declared, RegionSpec, ServiceSpec};
use pharos_route::Routes;
use pharos_wire::response::smallest_ttl;
use pharos_zone::{Zone, ZoneSet, parse_zone_text};
use rand::SeedableRng;
use rand::rngs::SmallRng;

/// The zones of the fuzzing snapshot: (origin, master-file text).
pub const ZONES: [(&str, &str); 3] = [
    ("example.test", include_str!("../zones/example.test.zone")),
    ("kid.example.test", include_str!("../zones/kid.example.test.zone")),
    ("other.test", include_str!("../zones/other.test.zone")),
];

/// Largest UDP payload the snapshot advertises (the default, DNS Flag Day 2020).
pub const SERVER_UDP_PAYLOAD: u16 = 1232;
const MIN_UDP: usize = 512;
const MAX_STREAM: usize = 65535;

/// Client addresses the `respond` target picks from: regions 1, 2 and 3
/// of [`snapshot`], and one no region claims.
pub const CLIENTS: [IpAddr; 4] = [
    IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)),
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7)),
    IpAddr::V4(Ipv4Addr::new(203, 0, 113, 9)),
    IpAddr::V4(Ipv4Addr::LOCALHOST),
];

/// The time every signed query is answered at (Unix seconds): the seeds
/// of gen_seeds.py are signed at it.
pub const NOW: u64 = 1_800_000_000;
/// The secret of every TSIG key of the snapshot, as gen_seeds.py signs with it.
pub const TSIG_SECRET: &[u8] = b"the fuzzing snapshot's TSIG secret";

/// The snapshot every `respond` run answers from, built once by the
/// server's own snapshot builder: services of every policy under
/// example.test, and three regions; and a TSIG key for each algorithm,
/// named after it (`hmac-sha256.key.`).
pub fn snapshot() -> &'static Snapshot {
    static SNAPSHOT: OnceLock<Snapshot> = OnceLock::new();
    SNAPSHOT.get_or_init(|| {
        let zones: Vec<Zone> = ZONES
            .iter()
            .map(|(origin, text)| parse_zone_text(origin, text, &format!("{origin}.zone")).unwrap_or_else(|err| panic!("fuzz zone: {err}")))
            .collect();
        let file = services();
        let declared = Declared { datacenters: &file.datacenters, regions: &file.regions, services: &file.services, zones: &[] };
        let tsig_keys =
            TsigAlgorithm::ALL.into_iter().map(|algorithm| TsigKey::new(key_name(algorithm), algorithm, TSIG_SECRET.into())).collect();
        let settings = Settings { nsid: Some((*b"fuzz-node").into()), udp_payload: SERVER_UDP_PAYLOAD, tsig_keys, ..Settings::default() };
        build_snapshot(zones, settings, &declared, &DataSources::default()).unwrap_or_else(|err| panic!("fuzz snapshot: {err}"))
    })
}

/// The name of the fuzzing key for `algorithm`, in wire form.
fn key_name(algorithm: TsigAlgorithm) -> Box<[u8]> {
    let label = algorithm.name();
    [&[label.len() as u8][..], label.as_bytes(), b"\x03key\x00"].concat().into()
}

/// The declarations of zones/services.toml.
#[derive(serde::Deserialize)]
struct ServicesFile {
    #[serde(rename = "datacenter")]
    datacenters: Vec<DataCenterSpec>,
    #[serde(rename = "region")]
    regions: Vec<RegionSpec>,
    #[serde(rename = "service")]
    services: Vec<Arc<ServiceSpec>>,
}

/// zones/services.toml, and a service with enough addresses to overflow
/// any UDP response.
fn services() -> ServicesFile {
    let mut text = include_str!("../zones/services.toml").to_string();
    text.push_str("[[service]]\nname = \"crowd.example.test\"\npolicy = \"weighted\"\nreplica = [\n");
    for i in 0..200 {
        let (third, fourth, weight, enabled) = (i / 100, i % 100, 1 + i % 7, i % 11 != 0);
        text.push_str(&format!("{{ id = \"r{i}\", address = \"10.0.{third}.{fourth}\", weight = {weight}, enabled = {enabled} }},\n"));
    }
    text.push_str("]\n");
    toml::from_str(&text).unwrap_or_else(|err| panic!("fuzz services: {err}"))
}

/// Target `respond`: the first byte chooses the transport (bit 0: UDP or
/// stream), the client's address (bits 1-2, from [`CLIENTS`]) and the seed
/// of the policies' random source (bits 3-7); the rest is the packet.
pub fn fuzz_respond(data: &[u8]) {
    let Some((&selector, packet)) = data.split_first() else { return };
    let transport = if selector & 1 == 0 { Transport::Udp } else { Transport::Stream };
    let client = Client { address: CLIENTS[usize::from(selector >> 1 & 3)], transport };
    answer_and_check(packet, &client, snapshot(), u64::from(selector >> 3));

    // The receive-buffer overflow path sees the same bytes.
    let mut out = Vec::new();
    if respond_oversized(packet, &mut out).is_some() {
        check_response(packet, &out, MIN_UDP, "respond_oversized");
    } else {
        assert!(out.is_empty(), "respond_oversized returned false but wrote {} bytes", out.len());
    }
}

/// Target `zone`: arbitrary text as a master file. Loading must never
/// panic; a zone that loads is frozen into a snapshot and asked about each
/// of its names, and those answers must keep the invariants too.
pub fn fuzz_zone(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // Text that is not a file never reads one: an $INCLUDE is an error.
    let Ok(zone) = parse_zone_text("example.test", text, "fuzz.zone") else { return };
    let mut names: Vec<Box<[u8]>> = zone.nodes.keys().cloned().collect();
    names.sort();
    names.truncate(32);
    let snapshot = Snapshot {
        zones: ZoneSet::new(vec![zone]).expect("one zone is always a valid set").into(),
        routes: Routes::default(),
        settings: Settings { nsid: Some((*b"z").into()), udp_payload: SERVER_UDP_PAYLOAD, ..Settings::default() },
    };
    let udp = Client { address: IpAddr::V4(Ipv4Addr::LOCALHOST), transport: Transport::Udp };
    let stream = Client { transport: Transport::Stream, ..udp };
    for name in &names {
        // A name below it: wildcard synthesis, NXDOMAIN, referral or DNAME.
        let mut child = b"\x02zq".to_vec();
        child.extend_from_slice(name);
        for qname in [&name[..], &child[..]] {
            if qname.len() > 255 {
                continue;
            }
            for (qtype, edns) in [(1, None), (255, Some(4096)), (15, Some(1232)), (28, None)] {
                let packet = query_packet(0x5a5a, qname, qtype, edns);
                answer_and_check(&packet, &udp, &snapshot, 0);
                if qtype == 255 {
                    answer_and_check(&packet, &stream, &snapshot, 0);
                }
            }
        }
    }
}

/// A query with RD set for `qname` (wire form), class IN, and an OPT
/// record advertising `edns` if given.
pub fn query_packet(id: u16, qname: &[u8], qtype: u16, edns: Option<u16>) -> Vec<u8> {
    let mut packet = id.to_be_bytes().to_vec();
    packet.extend([0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, u8::from(edns.is_some())]);
    packet.extend_from_slice(qname);
    packet.extend(qtype.to_be_bytes());
    packet.extend([0, 1]);
    if let Some(payload) = edns {
        packet.extend([0, 0, 41]);
        packet.extend(payload.to_be_bytes());
        packet.extend([0, 0, 0x80, 0, 0, 4, 0, 3, 0, 0]);
    }
    packet
}

/// Runs `respond_with` at [`NOW`] (its random source seeded with `seed`,
/// so that every run of an input is the same) and checks what it wrote.
pub fn answer_and_check(packet: &[u8], client: &Client, snapshot: &Snapshot, seed: u64) {
    let mut out = Vec::new();
    let mut rng = SmallRng::seed_from_u64(seed);
    let options = ResponseOptions { now: NOW, ..ResponseOptions::default() };
    let Some(answered) = respond_with(packet, client, &options, snapshot, &mut rng, &mut out) else {
        assert!(out.is_empty(), "respond returned false but wrote {} bytes", out.len());
        return;
    };
    assert_eq!((answered.len, answered.smallest_ttl), (out.len(), smallest_ttl(&out)), "the summary of the response");
    let limit = match client.transport {
        Transport::Udp => udp_limit(packet, snapshot.settings.udp_payload),
        Transport::Stream => MAX_STREAM,
    };
    check_response(packet, &out, limit, "respond");
}

/// The largest UDP response this packet may get: RFC 6891 section 6.2.5,
/// max(512, min(client's payload, server's payload)); 512 without EDNS.
pub fn udp_limit(packet: &[u8], server_payload: u16) -> usize {
    match client_payload(packet) {
        Some(payload) => (payload as usize).min(server_payload as usize).max(MIN_UDP),
        None => MIN_UDP,
    }
}

/// The UDP payload size of the first OPT record in the additional section,
/// if the packet can be walked that far.
pub fn client_payload(packet: &[u8]) -> Option<u16> {
    let counts = [4, 6, 8, 10].map(|at| read_u16(packet, at));
    let [qd, an, ns, ar] = counts.map(|count| count.unwrap_or(0) as usize);
    packet.get(..12)?;
    let mut pos = 12;
    for _ in 0..qd {
        pos = skip_name(packet, pos)? + 4;
    }
    for index in 0..an + ns + ar {
        pos = skip_name(packet, pos)?;
        let rtype = read_u16(packet, pos)?;
        let class = read_u16(packet, pos + 2)?;
        let rdlen = read_u16(packet, pos + 8)? as usize;
        pos += 10 + rdlen;
        if pos > packet.len() {
            return None;
        }
        if rtype == 41 && index >= an + ns {
            return Some(class);
        }
    }
    None
}

/// Every response must be a well-formed DNS message that answers this query.
pub fn check_response(packet: &[u8], out: &[u8], limit: usize, what: &str) {
    let fail = |message: String| -> ! {
        panic!("{what}: {message}\n  query    {}\n  response {}", hex(packet), hex(out));
    };
    if out.len() < 12 {
        fail(format!("response of {} bytes has no header", out.len()));
    }
    if out.len() > limit {
        fail(format!("response of {} bytes exceeds the limit of {limit}", out.len()));
    }
    if out[2] & 0x80 == 0 {
        fail("QR is not set".into());
    }
    if out[..2] != packet[..2] {
        fail("the query ID is not echoed".into());
    }
    if out[2] & 0x78 != packet[2] & 0x78 {
        fail("the opcode is not echoed".into());
    }
    // The sections hold exactly what the header counts, and nothing follows.
    let counts = [4, 6, 8, 10].map(|at| read_u16(out, at).unwrap() as usize);
    if counts[0] > 1 {
        fail(format!("QDCOUNT {}", counts[0]));
    }
    let mut pos = 12;
    if counts[0] == 1 {
        let end = skip_name(out, 12).map(|end| end + 4).filter(|&end| end <= out.len());
        let Some(end) = end else { fail("unreadable question".into()) };
        if packet.get(12..end) != Some(&out[12..end]) {
            fail("the question is not echoed as asked".into());
        }
        pos = end;
    }
    for index in 0..counts[1] + counts[2] + counts[3] {
        let next = skip_name(out, pos).and_then(|at| Some(at + 10 + read_u16(out, at + 8)? as usize)).filter(|&next| next <= out.len());
        let Some(next) = next else { fail(format!("record {index} of the counted sections is cut short")) };
        pos = next;
    }
    if pos != out.len() {
        fail(format!("{} bytes after the last counted record", out.len() - pos));
    }
    // And an independent parser reads every record, data included.
    let message = Message::from_octets(out).unwrap_or_else(|err| fail(format!("domain cannot read the header: {err}")));
    for question in message.question() {
        question.unwrap_or_else(|err| fail(format!("domain cannot read the question: {err}")));
    }
    let mut section = message.answer().unwrap_or_else(|err| fail(format!("domain cannot reach the answer section: {err}")));
    for name in ["answer", "authority", "additional"] {
        for record in section {
            let record = record.unwrap_or_else(|err| fail(format!("domain cannot read a record in the {name} section: {err}")));
            if let Err(err) = record.to_record::<AllRecordData<_, ParsedName<_>>>() {
                fail(format!("domain cannot read the data of a {} record in the {name} section: {err}", record.rtype()));
            }
        }
        match section.next_section() {
            Ok(Some(next)) => section = next,
            Ok(None) => break,
            Err(err) => fail(format!("domain cannot get past the {name} section: {err}")),
        }
    }
}

/// Offset just past the name at `start`: plain labels, or a pointer that
/// ends it. None if it runs off the end or uses another label type.
fn skip_name(msg: &[u8], start: usize) -> Option<usize> {
    let mut pos = start;
    loop {
        let len = *msg.get(pos)? as usize;
        match len & 0xC0 {
            0x00 if len == 0 => return Some(pos + 1),
            0x00 => pos += 1 + len,
            0xC0 => return msg.get(pos + 1).map(|_| pos + 2),
            _ => return None,
        }
    }
}

fn read_u16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
