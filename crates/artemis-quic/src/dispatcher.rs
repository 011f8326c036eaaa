//! The Service Dispatcher on sockets (`pharos dispatcher`): receives on
//! the service addresses (IP_PKTINFO says which one), asks the sans-IO
//! [`pharos_artemis::dispatcher::Dispatcher`], and tunnels each datagram
//! unmodified to the chosen replica's host by VXLAN ([`crate::vxlan`]),
//! which delivers it with the client's source address; the replica then
//! answers the client itself.

use std::collections::HashMap;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Instant;

use pharos_artemis::client_hello::Limits;
use pharos_artemis::dispatcher::{Action, Dispatcher, RecentLimits, ReplicaAt, Target, Topology};
use pharos_artemis::service_id::{CanonicalName, ConflictList, ServiceIdMap, ServicePrefix};
use pharos_route::model::Answering;
use pharos_route::{Policy, Replica, Routes, Service};
use quinn::udp::{RecvMeta, Transmit, UdpSocketState};
use serde::Deserialize;

use crate::vxlan::{self, VXLAN_PORT};

/// The configuration file, TOML.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DispatcherConfig {
    /// The UDP port of every service address.
    pub port: u16,
    /// The operator's service prefix, "192.0.2.0/24".
    pub prefix: String,
    /// `NAME ADDRESS` lines, as for `pharos sid`.
    #[serde(default)]
    pub conflicts: String,
    /// The VXLAN network identifier the replica hosts' interfaces use.
    pub vni: u32,
    #[serde(rename = "service")]
    pub services: Vec<ServiceConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceConfig {
    pub name: String,
    #[serde(rename = "replica")]
    pub replicas: Vec<ReplicaHost>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaHost {
    /// The id its connection IDs carry.
    pub id: u16,
    /// Its own unicast address (its preferred address).
    pub address: IpAddr,
    /// Its host's VXLAN endpoint.
    pub vtep: IpAddr,
    /// The MAC address of that host's VXLAN interface, "02:00:00:00:00:01".
    pub mac: String,
    /// Its share of new connections (the routing core's weighted policy).
    pub weight: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    #[error("prefix: {0}")]
    Prefix(String),
    #[error("conflicts: {0}")]
    Conflicts(String),
    #[error("{0:?} is not a service name: {1}")]
    Name(String, String),
    #[error("replica {id}: {mac:?} is not a MAC address (six hex bytes joined by ':')")]
    Mac { id: u16, mac: String },
    #[error("replica {0}: its VXLAN interface cannot have the dispatcher's own MAC (it would drop the frames as looped)")]
    DispatcherMac(u16),
    #[error("replica id {0} appears twice")]
    DuplicateId(u16),
}

/// Where a replica's datagrams are tunnelled.
#[derive(Debug, Clone, Copy)]
struct Vtep {
    address: SocketAddr,
    mac: [u8; 6],
}

impl DispatcherConfig {
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        Ok(toml::from_str(text)?)
    }

    /// The sans-IO dispatcher this configuration describes, its random
    /// source seeded with `seed`.
    pub fn dispatcher(&self, seed: u64) -> Result<Dispatcher, ConfigError> {
        let topology = Topology {
            replicas: self.replicas()?.into_iter().map(|(id, (address, _))| (id, ReplicaAt { address, datacenter: None })).collect(),
            ..Topology::default()
        };
        Ok(Dispatcher::new(Arc::new(self.routes()?), self.addresses()?, topology, Limits::default(), RecentLimits::default(), seed))
    }

    /// The service address of `name` under this configuration's prefix and conflicts.
    pub fn service_address(&self, name: &CanonicalName) -> Result<IpAddr, ConfigError> {
        Ok(self.addresses()?.address_of(name))
    }

    fn prefix(&self) -> Result<ServicePrefix, ConfigError> {
        self.prefix.parse().map_err(|e: pharos_artemis::service_id::PrefixError| ConfigError::Prefix(e.to_string()))
    }

    fn addresses(&self) -> Result<ServiceIdMap, ConfigError> {
        let prefix = self.prefix()?;
        let conflicts = ConflictList::parse(&self.conflicts, &prefix).map_err(|e| ConfigError::Conflicts(e.to_string()))?;
        Ok(ServiceIdMap::new(prefix, conflicts))
    }

    /// The routing core's view: each service's replicas, chosen by weight.
    fn routes(&self) -> Result<Routes, ConfigError> {
        let mut routes = Routes::default();
        for service in &self.services {
            let name = CanonicalName::new(&service.name).map_err(|e| ConfigError::Name(service.name.clone(), e.to_string()))?;
            let replicas = service
                .replicas
                .iter()
                .map(|replica| Replica { weight: replica.weight, ..Replica::new(replica.id.to_string(), replica.address) })
                .collect();
            let service = Service::new(format!("{name}."), replicas, Policy::Weighted, Answering::plain(60, 0));
            routes.services.insert(wire_name(&name).into(), service);
        }
        Ok(routes)
    }

    fn replicas(&self) -> Result<HashMap<u16, (IpAddr, Vtep)>, ConfigError> {
        let mut replicas = HashMap::new();
        for replica in self.services.iter().flat_map(|service| &service.replicas) {
            let mac = parse_mac(&replica.mac).ok_or_else(|| ConfigError::Mac { id: replica.id, mac: replica.mac.clone() })?;
            if mac == vxlan::DISPATCHER_MAC {
                return Err(ConfigError::DispatcherMac(replica.id));
            }
            let vtep = Vtep { address: SocketAddr::new(replica.vtep, VXLAN_PORT), mac };
            if replicas.insert(replica.id, (replica.address, vtep)).is_some() {
                return Err(ConfigError::DuplicateId(replica.id));
            }
        }
        Ok(replicas)
    }
}

/// A lowercase presentation name in DNS wire format, as `Routes` keys it.
fn wire_name(name: &CanonicalName) -> Vec<u8> {
    let mut wire: Vec<u8> = name.as_str().split('.').flat_map(|label| [&[label.len() as u8][..], label.as_bytes()].concat()).collect();
    wire.push(0);
    wire
}

fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let bytes: Vec<u8> =
        text.split(':').map(|byte| u8::from_str_radix(byte, 16).ok().filter(|_| byte.len() == 2)).collect::<Option<_>>()?;
    bytes.try_into().ok()
}

/// What became of one received datagram, for the operator's log.
#[derive(Debug)]
pub struct Handled {
    pub client: SocketAddr,
    pub service_address: Option<IpAddr>,
    pub outcome: String,
}

pub struct SocketDispatcher {
    socket: UdpSocket,
    state: UdpSocketState,
    tunnel: UdpSocket,
    dispatcher: Dispatcher,
    vteps: HashMap<IpAddr, Vtep>,
    vni: u32,
    port: u16,
}

impl SocketDispatcher {
    /// Binds the service port on every local address (the service
    /// addresses are local, on `lo` or any interface) and a tunnel socket.
    pub fn bind(config: &DispatcherConfig) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let replicas = config.replicas()?;
        let dispatcher = config.dispatcher(std::process::id().into())?;
        let any: IpAddr = match config.prefix()?.network() {
            IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
            IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
        };
        let socket = UdpSocket::bind((any, config.port))?;
        let state = UdpSocketState::new((&socket).into())?;
        // quinn-udp leaves it non-blocking; this loop has nothing else to do.
        socket.set_nonblocking(false)?;
        let tunnel = UdpSocket::bind((Ipv6Addr::UNSPECIFIED, 0))?;
        let vteps = replicas.into_values().collect();
        Ok(Self { socket, state, tunnel, dispatcher, vteps, vni: config.vni, port: config.port })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Handles datagrams until the socket fails, telling `log` of each.
    pub fn run(&mut self, mut log: impl FnMut(&Handled)) -> io::Result<()> {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let mut meta = [RecvMeta::default()];
            self.state.recv((&self.socket).into(), &mut [IoSliceMut::new(&mut buffer)], &mut meta)?;
            let meta = meta[0];
            for datagram in buffer[..meta.len].chunks(meta.stride.max(1)) {
                log(&self.handle(meta.addr, meta.dst_ip, datagram));
            }
        }
    }

    fn handle(&mut self, client: SocketAddr, service_address: Option<IpAddr>, datagram: &[u8]) -> Handled {
        let outcome = match service_address {
            Some(service_address) => match self.dispatcher.on_datagram(client, service_address, datagram, Instant::now()) {
                Action::Forward { target, datagrams, .. } => self.forward(client, service_address, &target, &datagrams),
                Action::SendVersionNegotiation(packet) => {
                    let transmit =
                        Transmit { destination: client, ecn: None, contents: &packet, segment_size: None, src_ip: Some(service_address) };
                    match self.state.send((&self.socket).into(), &transmit) {
                        Ok(()) => "version negotiation".to_owned(),
                        Err(error) => format!("version negotiation failed: {error}"),
                    }
                }
                Action::Wait => "wait".to_owned(),
                Action::Drop(reason) => format!("drop: {reason}"),
            },
            None => "drop: no destination address (IP_PKTINFO)".to_owned(),
        };
        Handled { client, service_address, outcome }
    }

    fn forward(&self, client: SocketAddr, service_address: IpAddr, target: &Target, datagrams: &[Vec<u8>]) -> String {
        let replica = match target {
            Target::Replica(replica) => *replica,
            Target::Dispatcher { datacenter, .. } => return format!("drop: forwarding to data center {datacenter} is not built"),
        };
        let Some(vtep) = self.vteps.get(&replica) else { return format!("drop: no VXLAN endpoint for {replica}") };
        let service = SocketAddr::new(service_address, self.port);
        for datagram in datagrams {
            let sent = vxlan::encapsulate(self.vni, vtep.mac, client, service, datagram)
                .map_err(|error| error.to_string())
                .and_then(|frame| self.tunnel.send_to(&frame, mapped(vtep.address)).map_err(|error| error.to_string()));
            if let Err(error) = sent {
                return format!("drop: tunnel to {}: {error}", vtep.address);
            }
        }
        format!("forward {} to {replica}", datagrams.len())
    }
}

/// The tunnel socket is IPv6 dual-stack: IPv4 VTEPs go mapped.
fn mapped(address: SocketAddr) -> SocketAddr {
    match address {
        SocketAddr::V4(v4) => SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port()),
        v6 => v6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
        port = 4433
        prefix = "10.99.0.0/24"
        conflicts = "svc.example.test 10.99.0.5"
        vni = 42
        [[service]]
        name = "Svc.Example.Test."
        [[service.replica]]
        id = 1
        address = "10.77.21.2"
        vtep = "10.77.11.2"
        mac = "02:00:00:00:00:01"
        weight = 1
    "#;

    fn error_of(text: &str) -> String {
        let config = match DispatcherConfig::parse(text) {
            Ok(config) => config,
            Err(error) => return error.to_string(),
        };
        match (config.routes(), config.replicas(), config.addresses()) {
            (Err(error), _, _) | (_, Err(error), _) | (_, _, Err(error)) => error.to_string(),
            _ => panic!("accepted {text}"),
        }
    }

    #[test]
    fn a_good_config_gives_routes_keyed_by_wire_name_and_tunnel_endpoints() {
        let config = DispatcherConfig::parse(GOOD).unwrap();
        let routes = config.routes().unwrap();
        assert!(routes.services.contains_key(&b"\x03svc\x07example\x04test\x00"[..]));
        let replicas = config.replicas().unwrap();
        let (address, vtep) = replicas[&1];
        assert_eq!(address, "10.77.21.2".parse::<IpAddr>().unwrap());
        assert_eq!((vtep.address, vtep.mac), ("10.77.11.2:4789".parse().unwrap(), [2, 0, 0, 0, 0, 1]));
        assert_eq!(
            config.addresses().unwrap().address_of(&CanonicalName::new("svc.example.test").unwrap()),
            "10.99.0.5".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn bad_configs_say_what_is_wrong() {
        assert!(error_of(&GOOD.replace("02:00:00:00:00:01", "02:00:00:00:01")).contains("is not a MAC address"));
        assert!(error_of(&GOOD.replace("02:00:00:00:00:01", "02:00:00:00:00:1")).contains("is not a MAC address"));
        assert!(error_of(&GOOD.replace("02:00:00:00:00:01", "02:a7:e3:15:00:00")).contains("the dispatcher's own MAC"));
        assert!(error_of(&GOOD.replace("10.99.0.0/24", "10.99.0.1/24")).contains("prefix"));
        assert!(error_of(&GOOD.replace("10.99.0.5", "10.98.0.5")).contains("conflicts"));
        assert!(error_of(&GOOD.replace("Svc.Example.Test.", "bad_name")).contains("is not a service name"));
        assert!(error_of(&GOOD.replace("weight = 1", "weight = 1\ncolour = 3")).contains("unknown field"));
        assert!(error_of(&GOOD.replace("vni = 42\n", "")).contains("missing field"));
        let twice = format!(
            "{GOOD}\n[[service]]\nname = \"b.example\"\n[[service.replica]]\nid = 1\naddress = \"10.0.0.1\"\nvtep = \"10.0.0.1\"\nmac = \"02:00:00:00:00:09\"\nweight = 1\n"
        );
        assert!(error_of(&twice).contains("replica id 1 appears twice"));
    }
}
