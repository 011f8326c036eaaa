//! The frame the dispatcher tunnels to a replica's host: the client's UDP
//! datagram rebuilt whole (client source, service address destination,
//! the original ports and payload) in Ethernet, inside VXLAN (RFC 7348).
//! The host's kernel VXLAN interface decapsulates it and delivers it to
//! the service address on that interface, so the replica sees the
//! client's own packet and answers the client directly.
//!
//! VXLAN rather than rewriting the destination MAC (which needs the
//! dispatcher and the replicas on one L2 segment) or a format of our own
//! (which needs our code on every replica host): any Linux host
//! decapsulates it in the kernel, across routed networks, and GRE or IPIP
//! are not available everywhere (not in this project's test kernel).

use std::net::{IpAddr, SocketAddr};

/// The IANA port of VXLAN.
pub const VXLAN_PORT: u16 = 4789;
/// The source MAC of every tunnelled frame (locally administered). The
/// receiving VXLAN interface drops frames from its own MAC as looped, so
/// replica hosts must not use this one.
pub const DISPATCHER_MAC: [u8; 6] = [0x02, 0xa7, 0xe3, 0x15, 0x00, 0x00];
const TTL: u8 = 64;
const UDP: u8 = 17;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("client {client} and service {service} are of different address families")]
    MixedFamilies { client: SocketAddr, service: SocketAddr },
    #[error("a {0}-byte payload does not fit one IP packet")]
    TooLong(usize),
    #[error("VNI {0} does not fit 24 bits")]
    BadVni(u32),
}

/// VXLAN header, Ethernet to `mac`, IP and UDP from `client` to `service`, `payload`.
pub fn encapsulate(vni: u32, mac: [u8; 6], client: SocketAddr, service: SocketAddr, payload: &[u8]) -> Result<Vec<u8>, FrameError> {
    if vni >= 1 << 24 {
        return Err(FrameError::BadVni(vni));
    }
    let udp_len = u16::try_from(8 + payload.len()).map_err(|_| FrameError::TooLong(payload.len()))?;
    let mut frame = Vec::with_capacity(8 + 14 + 40 + 8 + payload.len());
    frame.extend_from_slice(&[0x08, 0, 0, 0]); // the I flag: the VNI is valid
    frame.extend_from_slice(&(vni << 8).to_be_bytes());
    frame.extend_from_slice(&mac);
    frame.extend_from_slice(&DISPATCHER_MAC);
    let pseudo_header = match (client.ip(), service.ip()) {
        (IpAddr::V4(source), IpAddr::V4(destination)) => {
            let total = udp_len.checked_add(20).ok_or(FrameError::TooLong(payload.len()))?;
            frame.extend_from_slice(&0x0800u16.to_be_bytes());
            let mut header = [0u8; 20];
            header[0] = 0x45;
            header[2..4].copy_from_slice(&total.to_be_bytes());
            header[6] = 0x40; // don't fragment
            header[8] = TTL;
            header[9] = UDP;
            header[12..16].copy_from_slice(&source.octets());
            header[16..20].copy_from_slice(&destination.octets());
            let checksum = internet_checksum(&[&header]);
            header[10..12].copy_from_slice(&checksum.to_be_bytes());
            frame.extend_from_slice(&header);
            [&source.octets()[..], &destination.octets(), &[0, UDP], &udp_len.to_be_bytes()].concat()
        }
        (IpAddr::V6(source), IpAddr::V6(destination)) => {
            frame.extend_from_slice(&0x86ddu16.to_be_bytes());
            frame.extend_from_slice(&[0x60, 0, 0, 0]);
            frame.extend_from_slice(&udp_len.to_be_bytes());
            frame.extend_from_slice(&[UDP, TTL]);
            frame.extend_from_slice(&source.octets());
            frame.extend_from_slice(&destination.octets());
            [&source.octets()[..], &destination.octets(), &u32::from(udp_len).to_be_bytes(), &[0, 0, 0, UDP]].concat()
        }
        _ => return Err(FrameError::MixedFamilies { client, service }),
    };
    let mut udp = [0u8; 8];
    udp[0..2].copy_from_slice(&client.port().to_be_bytes());
    udp[2..4].copy_from_slice(&service.port().to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    // Zero means "no checksum" in UDP: a computed zero is sent as all ones.
    let checksum = match internet_checksum(&[&pseudo_header, &udp, payload]) {
        0 => 0xffff,
        checksum => checksum,
    };
    udp[6..8].copy_from_slice(&checksum.to_be_bytes());
    frame.extend_from_slice(&udp);
    frame.extend_from_slice(payload);
    Ok(frame)
}

/// RFC 1071: the one's complement of the one's complement sum of 16-bit words.
fn internet_checksum(parts: &[&[u8]]) -> u16 {
    let bytes = parts.iter().flat_map(|part| part.iter().copied());
    let mut sum = 0u32;
    let mut high = None;
    for byte in bytes {
        match high.take() {
            None => high = Some(byte),
            Some(first) => sum += u32::from(u16::from_be_bytes([first, byte])),
        }
    }
    if let Some(last) = high {
        sum += u32::from(u16::from_be_bytes([last, 0]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x42];

    #[test]
    fn an_ipv4_frame_has_every_field_and_checksums_that_verify() {
        let client: SocketAddr = "10.77.1.2:50000".parse().unwrap();
        let service: SocketAddr = "10.99.0.5:4433".parse().unwrap();
        let frame = encapsulate(42, MAC, client, service, b"odd").unwrap();
        assert_eq!(&frame[..8], &[0x08, 0, 0, 0, 0, 0, 42, 0]);
        assert_eq!(&frame[8..14], &MAC);
        assert_eq!(&frame[20..22], &[0x08, 0x00]);
        let ip = &frame[22..42];
        assert_eq!(internet_checksum(&[ip]), 0, "the header checksum verifies");
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]), 20 + 8 + 3);
        assert_eq!((&ip[12..16], &ip[16..20]), (&[10, 77, 1, 2][..], &[10, 99, 0, 5][..]));
        let udp = &frame[42..];
        assert_eq!(&udp[..6], &[0xc3, 0x50, 0x11, 0x51, 0, 11]);
        assert_eq!(&udp[8..], b"odd");
        let pseudo = [&ip[12..20], &[0, UDP, 0, 11]].concat();
        assert_eq!(internet_checksum(&[&pseudo, udp]), 0, "the UDP checksum verifies");
    }

    #[test]
    fn an_ipv6_frame_carries_the_datagram_with_its_checksum() {
        let client: SocketAddr = "[2001:db8::2]:50000".parse().unwrap();
        let service: SocketAddr = "[2001:db8:5::7]:443".parse().unwrap();
        let frame = encapsulate(7, MAC, client, service, b"payload").unwrap();
        assert_eq!(&frame[20..22], &[0x86, 0xdd]);
        let ip = &frame[22..62];
        assert_eq!(&ip[..8], &[0x60, 0, 0, 0, 0, 15, UDP, TTL]);
        let udp = &frame[62..];
        let pseudo = [&ip[8..40], &[0, 0, 0, 15, 0, 0, 0, UDP]].concat();
        assert_eq!(internet_checksum(&[&pseudo, udp]), 0);
        assert_eq!(&udp[8..], b"payload");
    }

    #[test]
    fn refuses_mixed_families_oversized_payloads_and_wide_vnis() {
        let v4: SocketAddr = "10.0.0.1:1".parse().unwrap();
        let v6: SocketAddr = "[::1]:1".parse().unwrap();
        assert_eq!(encapsulate(1, MAC, v4, v6, b""), Err(FrameError::MixedFamilies { client: v4, service: v6 }));
        assert_eq!(encapsulate(1, MAC, v4, v4, &vec![0; 65_530]), Err(FrameError::TooLong(65_530)));
        assert_eq!(encapsulate(1 << 24, MAC, v4, v4, b""), Err(FrameError::BadVni(1 << 24)));
    }
}
