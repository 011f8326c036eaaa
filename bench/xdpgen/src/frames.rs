//! The mix as whole Ethernet frames: query k of the file, with DNS ID k,
//! from source address k mod the number of sources, to the server, ready
//! for the kernel to copy into a frame.

use std::net::Ipv4Addr;

use anyhow::{Result, bail};
use dnsload::query::{MAX_QUERY_LEN, Query};
use pharos_xdp::maps::ones_complement_sum;

use crate::kernel::{FRAME, MAX_QUERIES, QueryFrame};

const ETHERNET: usize = 14;
const IPV4: usize = 20;
const UDP: usize = 8;
const UDP_PROTOCOL: u8 = 17;
const TTL: u8 = 64;
/// Every query's UDP source port (responses never reach a socket).
pub const CLIENT_PORT: u16 = 40000;

/// Where the frames go and come from.
pub struct Path {
    pub client_mac: [u8; 6],
    pub server_mac: [u8; 6],
    pub sources: Vec<Ipv4Addr>,
    pub server: Ipv4Addr,
    pub port: u16,
}

/// One frame per query, in the file's order.
pub fn build(queries: &[Query], path: &Path) -> Result<Vec<QueryFrame>> {
    if queries.len() > MAX_QUERIES {
        bail!("{} queries in the mix: at most {MAX_QUERIES} (the DNS ID names the query)", queries.len());
    }
    if path.sources.is_empty() {
        bail!("no source address");
    }
    Ok(queries.iter().enumerate().map(|(k, query)| frame(query, k as u16, path.sources[k % path.sources.len()], path)).collect())
}

fn frame(query: &Query, id: u16, source: Ipv4Addr, path: &Path) -> QueryFrame {
    let mut dns = [0u8; MAX_QUERY_LEN];
    let dns_len = query.encode_into(&mut dns, id, None);
    let mut out = QueryFrame { len: (ETHERNET + IPV4 + UDP + dns_len) as u32, question_len: query.question_len as u32, frame: [0; FRAME] };
    let f = &mut out.frame;
    f[..6].copy_from_slice(&path.server_mac);
    f[6..12].copy_from_slice(&path.client_mac);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[ETHERNET..ETHERNET + IPV4];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((IPV4 + UDP + dns_len) as u16).to_be_bytes());
    // Don't fragment, as a socket client's datagrams leave.
    ip[6] = 0x40;
    ip[8] = TTL;
    ip[9] = UDP_PROTOCOL;
    ip[12..16].copy_from_slice(&source.octets());
    ip[16..20].copy_from_slice(&path.server.octets());
    let check = !ones_complement_sum(ip);
    ip[10..12].copy_from_slice(&check.to_be_bytes());
    let udp = &mut f[ETHERNET + IPV4..ETHERNET + IPV4 + UDP];
    udp[0..2].copy_from_slice(&CLIENT_PORT.to_be_bytes());
    udp[2..4].copy_from_slice(&path.port.to_be_bytes());
    udp[4..6].copy_from_slice(&((UDP + dns_len) as u16).to_be_bytes());
    // UDP checksum 0 ("none", allowed over IPv4): the server's stack then
    // verifies nothing, as behind a NIC that checked it in hardware
    // (CHECKSUM_UNNECESSARY), and as for dnsload's datagrams on a veth.
    f[ETHERNET + IPV4 + UDP..ETHERNET + IPV4 + UDP + dns_len].copy_from_slice(&dns[..dns_len]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dnsload::query::parse_query_file;

    const DNS: usize = ETHERNET + IPV4 + UDP;
    const DNS_HEADER: usize = 12;

    fn path() -> Path {
        Path {
            client_mac: [2, 0, 0, 0, 0, 1],
            server_mac: [2, 0, 0, 0, 0, 2],
            sources: vec![Ipv4Addr::new(100, 64, 0, 2), Ipv4Addr::new(100, 65, 0, 2)],
            server: Ipv4Addr::new(198, 51, 100, 1),
            port: 53,
        }
    }

    #[test]
    fn frames_carry_the_query_with_its_index_as_id_from_the_sources_in_turn() {
        let queries = parse_query_file("a.example A\nb.example AAAA\nc.example A\n").unwrap();
        let frames = build(&queries, &path()).unwrap();
        assert_eq!(frames.len(), 3);
        for (k, f) in frames.iter().enumerate() {
            let len = f.len as usize;
            let dns = &f.frame[DNS..len];
            assert_eq!(u16::from_be_bytes([dns[0], dns[1]]), k as u16);
            assert_eq!(&dns[DNS_HEADER..DNS_HEADER + f.question_len as usize], queries[k].question());
            assert_eq!(&f.frame[ETHERNET + 12..ETHERNET + 16], &path().sources[k % 2].octets());
            assert_eq!(u16::from_be_bytes([f.frame[ETHERNET + 2], f.frame[ETHERNET + 3]]) as usize, len - ETHERNET);
            assert_eq!(ones_complement_sum(&f.frame[ETHERNET..ETHERNET + IPV4]), 0xffff, "IPv4 header checksum");
            assert!(len < FRAME);
        }
    }

    #[test]
    fn a_mix_longer_than_the_ids_is_refused() {
        let queries = vec![Query::new("a.example", 1).unwrap(); MAX_QUERIES + 1];
        assert!(build(&queries, &path()).err().unwrap().to_string().contains("at most 65536"));
    }

    #[test]
    fn no_source_is_refused() {
        let queries = parse_query_file("a.example A\n").unwrap();
        let mut p = path();
        p.sources.clear();
        assert!(build(&queries, &p).err().unwrap().to_string().contains("no source"));
    }
}
