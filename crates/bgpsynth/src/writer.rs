//! Writes MRT TABLE_DUMP_V2 RIB dumps (RFC 6396 section 4.3) with
//! bgpkit-parser's encoders: one PEER_INDEX_TABLE, then one
//! RIB_IPV4_UNICAST or RIB_IPV6_UNICAST record per prefix. Pharos itself
//! only reads dumps; this is for the synthetic table and for tests.

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr};

use bgpkit_parser::models::{
    AsPath, Asn, Attribute, AttributeValue, Attributes, CommonHeader, EntryType, MrtMessage, NetworkPrefix, Origin, Peer, PeerIndexTable,
    RibAfiEntries, RibEntry, TableDumpV2Message, TableDumpV2Type,
};
use ipnet::IpNet;

/// A TABLE_DUMP_V2 RIB dump being written.
pub struct RibWriter<W: Write> {
    out: W,
    timestamp: u32,
    sequence: u32,
    peer_addresses: Vec<IpAddr>,
}

impl<W: Write> RibWriter<W> {
    /// Starts a dump taken at `timestamp` (Unix seconds) from `peers`, each
    /// an address and an AS number; a route names its peer by index here.
    pub fn new(out: W, timestamp: u32, peers: &[(IpAddr, u32)]) -> io::Result<Self> {
        let mut table = PeerIndexTable::default();
        for &(address, asn) in peers {
            let bgp_id = match address {
                IpAddr::V4(v4) => v4,
                IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
            };
            table.add_peer(Peer::new(bgp_id, address, Asn::new_32bit(asn))).map_err(io::Error::other)?;
        }
        let peer_addresses = peers.iter().map(|&(address, _)| address).collect();
        let mut writer = RibWriter { out, timestamp, sequence: 0, peer_addresses };
        writer.write_record(TableDumpV2Type::PeerIndexTable, TableDumpV2Message::PeerIndexTable(table))?;
        Ok(writer)
    }

    /// Writes the routes of `prefix`: (peer index, AS path) for each peer
    /// that has one.
    pub fn write_prefix(&mut self, prefix: IpNet, routes: &[(u16, AsPath)]) -> io::Result<()> {
        let rib_type = match prefix {
            IpNet::V4(_) => TableDumpV2Type::RibIpv4Unicast,
            IpNet::V6(_) => TableDumpV2Type::RibIpv6Unicast,
        };
        let rib_entries = routes
            .iter()
            .map(|(peer, path)| RibEntry {
                peer_index: *peer,
                originated_time: self.timestamp,
                path_id: None,
                attributes: self.attributes(prefix, *peer, path),
            })
            .collect();
        let entries = RibAfiEntries { rib_type, sequence_number: self.sequence, prefix: NetworkPrefix::new(prefix, None), rib_entries };
        self.sequence += 1;
        self.write_record(rib_type, TableDumpV2Message::RibAfi(entries))
    }

    /// ORIGIN, AS_PATH and, for IPv4, NEXT_HOP (the peer). IPv6 next hops
    /// live in MP_REACH_NLRI, which Pharos does not read, so it is left out.
    fn attributes(&self, prefix: IpNet, peer: u16, path: &AsPath) -> Attributes {
        let mut values = vec![AttributeValue::Origin(Origin::IGP), AttributeValue::AsPath(path.clone())];
        let next_hop = self.peer_addresses.get(usize::from(peer)).copied().filter(IpAddr::is_ipv4);
        if let (IpNet::V4(_), Some(next_hop)) = (prefix, next_hop) {
            values.push(AttributeValue::NextHop(next_hop));
        }
        Attributes::from(values.into_iter().map(Attribute::from).collect::<Vec<_>>())
    }

    fn write_record(&mut self, subtype: TableDumpV2Type, message: TableDumpV2Message) -> io::Result<()> {
        let body = MrtMessage::TableDumpV2Message(message).encode(subtype as u16).map_err(io::Error::other)?;
        let header = CommonHeader {
            timestamp: self.timestamp,
            microsecond_timestamp: None,
            entry_type: EntryType::TABLE_DUMP_V2,
            entry_subtype: subtype as u16,
            length: body.len() as u32,
        };
        self.out.write_all(&header.encode())?;
        self.out.write_all(&body)
    }

    /// Flushes and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}
