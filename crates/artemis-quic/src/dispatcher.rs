//! The Service Dispatcher on sockets (`pharos dispatcher`): receives on
//! the service addresses (IP_PKTINFO says which one), asks the sans-IO
//! [`pharos_artemis::dispatcher::Dispatcher`], and tunnels each datagram
//! unmodified to the chosen replica's host by VXLAN ([`crate::vxlan`]),
//! which delivers it with the client's source address; the replica then
//! answers the client itself. A replica in another data center gets it
//! through that data center's dispatcher ([`crate::interdc`]), which
//! listens on its tunnel port on a thread of its own and delivers what
//! its peers send to its own replicas, once their tag under the shared
//! key and their time are right; what it refuses it counts.

use std::collections::{HashMap, HashSet};
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use pharos_artemis::client_hello::Limits;
use pharos_artemis::dispatcher::{Action, Dispatcher, RecentLimits, ReplicaAt, Target, Topology};
use pharos_artemis::service_id::{CanonicalName, ConflictList, ServiceIdMap, ServicePrefix};
use pharos_route::model::Answering;
use pharos_route::{Policy, Replica, Routes, Service};
use quinn::udp::{RecvMeta, Transmit, UdpSocketState};
use serde::Deserialize;

use crate::interdc::{self, KeyError, TunnelKey, Tunnelled};
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
    /// This dispatcher's data center, as replicas name theirs.
    #[serde(default)]
    pub datacenter: Option<String>,
    /// The UDP port every dispatcher receives its peers' tunnel on
    /// ([`crate::interdc`]); required with peers.
    #[serde(default)]
    pub tunnel_port: Option<u16>,
    /// The key the tunnel's datagrams are tagged with, shared by every
    /// dispatcher: hex, at least 32 digits; or `tunnel_key_file`, a file
    /// holding it. One of them is required with peers.
    #[serde(default)]
    pub tunnel_key: Option<String>,
    #[serde(default)]
    pub tunnel_key_file: Option<PathBuf>,
    /// The other data centers' dispatchers.
    #[serde(default, rename = "peer")]
    pub peers: Vec<PeerConfig>,
    #[serde(rename = "service")]
    pub services: Vec<ServiceConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    pub datacenter: String,
    pub address: IpAddr,
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
    /// Its data center; absent: this dispatcher's.
    #[serde(default)]
    pub datacenter: Option<String>,
    /// Its host's VXLAN endpoint; required in this data center.
    pub vtep: Option<IpAddr>,
    /// The MAC address of that host's VXLAN interface, "02:00:00:00:00:01".
    pub mac: Option<String>,
    /// Its share of new connections (the routing core's weighted policy).
    pub weight: u32,
}

impl ReplicaHost {
    fn is_local(&self, datacenter: Option<&str>) -> bool {
        self.datacenter.is_none() || self.datacenter.as_deref() == datacenter
    }
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
    #[error("replica {0} is in this data center: it needs a vtep and a mac")]
    NoVtep(u16),
    #[error("replica {id} is in data center {datacenter}, which has no [[peer]] dispatcher")]
    NoPeer { id: u16, datacenter: String },
    #[error("[[peer]] dispatchers need a tunnel_port")]
    NoTunnelPort,
    #[error("[[peer]] dispatchers need a tunnel_key or a tunnel_key_file")]
    NoTunnelKey,
    #[error("tunnel_key and tunnel_key_file both given: keep one")]
    TwoTunnelKeys,
    #[error("tunnel_key_file {path}: {error}")]
    TunnelKeyFile { path: String, error: String },
    #[error("tunnel_key: {0}")]
    TunnelKey(#[from] KeyError),
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
            datacenter: self.datacenter.clone().unwrap_or_default(),
            dispatchers: self.peers.iter().map(|peer| (peer.datacenter.clone(), peer.address)).collect(),
            replicas: self.replicas()?,
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
                .map(|replica| Replica {
                    weight: replica.weight,
                    datacenter: replica.datacenter.clone(),
                    ..Replica::new(replica.id.to_string(), replica.address)
                })
                .collect();
            let service = Service::new(format!("{name}."), replicas, Policy::Weighted, Answering::plain(60, 0));
            routes.services.insert(name.wire().into(), service.into());
        }
        Ok(routes)
    }

    /// Every replica by the id its connection IDs carry, and where it is.
    fn replicas(&self) -> Result<HashMap<u16, ReplicaAt>, ConfigError> {
        if !self.peers.is_empty() && self.tunnel_port.is_none() {
            return Err(ConfigError::NoTunnelPort);
        }
        let own = self.datacenter.as_deref();
        let mut replicas = HashMap::new();
        for replica in self.services.iter().flat_map(|service| &service.replicas) {
            let datacenter = replica.datacenter.clone().filter(|_| !replica.is_local(own));
            if let Some(datacenter) = &datacenter
                && !self.peers.iter().any(|peer| &peer.datacenter == datacenter)
            {
                return Err(ConfigError::NoPeer { id: replica.id, datacenter: datacenter.clone() });
            }
            if replicas.insert(replica.id, ReplicaAt { address: replica.address, datacenter }).is_some() {
                return Err(ConfigError::DuplicateId(replica.id));
            }
        }
        Ok(replicas)
    }

    /// The peer dispatchers with the tunnel's port and key; `None` without peers.
    fn peers(&self) -> Result<Option<Peers>, ConfigError> {
        let key = match (&self.tunnel_key, &self.tunnel_key_file) {
            (Some(_), Some(_)) => return Err(ConfigError::TwoTunnelKeys),
            (Some(hex), None) => Some(TunnelKey::from_hex(hex)?),
            (None, Some(path)) => {
                let unreadable =
                    |error: std::io::Error| ConfigError::TunnelKeyFile { path: path.display().to_string(), error: error.to_string() };
                Some(TunnelKey::from_hex(&std::fs::read_to_string(path).map_err(unreadable)?)?)
            }
            (None, None) => None,
        };
        if self.peers.is_empty() {
            return Ok(None);
        }
        Ok(Some(Peers {
            port: self.tunnel_port.ok_or(ConfigError::NoTunnelPort)?,
            addresses: self.peers.iter().map(|peer| peer.address).collect(),
            key: key.ok_or(ConfigError::NoTunnelKey)?,
            refused: AtomicU64::new(0),
        }))
    }

    /// The VXLAN endpoints of this data center's replicas, by replica address.
    fn vteps(&self) -> Result<HashMap<IpAddr, Vtep>, ConfigError> {
        let own = self.datacenter.as_deref();
        let mut vteps = HashMap::new();
        for replica in self.services.iter().flat_map(|service| &service.replicas).filter(|replica| replica.is_local(own)) {
            let (Some(vtep), Some(mac)) = (replica.vtep, &replica.mac) else { return Err(ConfigError::NoVtep(replica.id)) };
            let mac = parse_mac(mac).ok_or_else(|| ConfigError::Mac { id: replica.id, mac: mac.clone() })?;
            if mac == vxlan::DISPATCHER_MAC {
                return Err(ConfigError::DispatcherMac(replica.id));
            }
            vteps.insert(replica.address, Vtep { address: SocketAddr::new(vtep, VXLAN_PORT), mac });
        }
        Ok(vteps)
    }
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
    dispatcher: Dispatcher,
    delivery: Arc<Delivery>,
    port: u16,
}

/// The sending side, shared with the thread that serves the peers' tunnel.
struct Delivery {
    /// Sends VXLAN to replica hosts and the tunnel to peers; receives the peers' tunnel.
    tunnel: UdpSocket,
    vteps: HashMap<IpAddr, Vtep>,
    vni: u32,
    peers: Option<Peers>,
}

/// The other data centers' dispatchers, and what this one refused of
/// their tunnel.
struct Peers {
    /// The tunnel's UDP port, the same on every dispatcher.
    port: u16,
    /// The only senders believed on the tunnel.
    addresses: HashSet<IpAddr>,
    key: TunnelKey,
    /// Tunnel datagrams refused: from another sender, with a wrong tag,
    /// outside the time window, or malformed.
    refused: AtomicU64,
}

impl SocketDispatcher {
    /// Binds the service port on every local address (the service
    /// addresses are local, on `lo` or any interface) and a tunnel socket.
    pub fn bind(config: &DispatcherConfig) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let dispatcher = config.dispatcher(std::process::id().into())?;
        let any: IpAddr = match config.prefix()?.network() {
            IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
            IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
        };
        let socket = UdpSocket::bind((any, config.port))?;
        let state = UdpSocketState::new((&socket).into())?;
        // quinn-udp leaves it non-blocking; this loop has nothing else to do.
        socket.set_nonblocking(false)?;
        let tunnel = UdpSocket::bind((Ipv6Addr::UNSPECIFIED, config.tunnel_port.unwrap_or(0)))?;
        let delivery = Delivery { tunnel, vteps: config.vteps()?, vni: config.vni, peers: config.peers()? };
        Ok(Self { socket, state, dispatcher, delivery: Arc::new(delivery), port: config.port })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Handles datagrams until the service socket fails, telling `log` of
    /// each; with peers, a thread delivers what they tunnel here.
    pub fn run(&mut self, log: impl FnMut(&Handled) + Send + 'static) -> io::Result<()> {
        let log = Arc::new(Mutex::new(log));
        if self.delivery.peers.is_some() {
            let (delivery, log) = (self.delivery.clone(), log.clone());
            std::thread::spawn(move || {
                if let Err(error) = delivery.serve_tunnel(|handled| log_one(&log, handled)) {
                    tracing::error!("the peers' tunnel stopped: {error}");
                }
            });
        }
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let mut meta = [RecvMeta::default()];
            self.state.recv((&self.socket).into(), &mut [IoSliceMut::new(&mut buffer)], &mut meta)?;
            let meta = meta[0];
            for datagram in buffer[..meta.len].chunks(meta.stride.max(1)) {
                log_one(&log, &self.handle(meta.addr, meta.dst_ip, datagram));
            }
        }
    }

    fn handle(&mut self, client: SocketAddr, service_address: Option<IpAddr>, datagram: &[u8]) -> Handled {
        let outcome = match service_address {
            Some(service_address) => match self.dispatcher.on_datagram(client, service_address, datagram, Instant::now()) {
                Action::Forward { target, datagrams, .. } => {
                    self.delivery.forward(client, SocketAddr::new(service_address, self.port), &target, &datagrams)
                }
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
}

impl Delivery {
    fn forward(&self, client: SocketAddr, service: SocketAddr, target: &Target, datagrams: &[Vec<u8>]) -> String {
        match target {
            Target::Replica(replica) => self.to_replica(client, service, *replica, datagrams),
            Target::Dispatcher { datacenter, address, replica } => {
                let Some(peers) = &self.peers else { return format!("drop: no [[peer]] dispatchers to reach data center {datacenter}") };
                let peer = SocketAddr::new(*address, peers.port);
                for datagram in datagrams {
                    let sent = Tunnelled { client, service, replica: *replica, datagram }
                        .seal(&peers.key, unix_ms())
                        .map_err(|error| error.to_string())
                        .and_then(|bytes| self.tunnel.send_to(&bytes, mapped(peer)).map_err(|error| error.to_string()));
                    if let Err(error) = sent {
                        return format!("drop: tunnel to data center {datacenter} ({peer}): {error}");
                    }
                }
                format!("forward {} to {replica} through data center {datacenter} ({address})", datagrams.len())
            }
        }
    }

    /// VXLAN to the host of `replica`, one of this data center's.
    fn to_replica(&self, client: SocketAddr, service: SocketAddr, replica: IpAddr, datagrams: &[impl AsRef<[u8]>]) -> String {
        let Some(vtep) = self.vteps.get(&replica) else { return format!("drop: no VXLAN endpoint for {replica}") };
        for datagram in datagrams {
            let sent = vxlan::encapsulate(self.vni, vtep.mac, client, service, datagram.as_ref())
                .map_err(|error| error.to_string())
                .and_then(|frame| self.tunnel.send_to(&frame, mapped(vtep.address)).map_err(|error| error.to_string()));
            if let Err(error) = sent {
                return format!("drop: tunnel to {}: {error}", vtep.address);
            }
        }
        format!("forward {} to {replica}", datagrams.len())
    }

    /// Delivers what peer dispatchers tunnel here until the socket fails.
    fn serve_tunnel(&self, mut log: impl FnMut(&Handled)) -> io::Result<()> {
        let Some(peers) = &self.peers else { return Ok(()) };
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let (len, from) = self.tunnel.recv_from(&mut buffer)?;
            log(&self.deliver_tunnelled(peers, from.ip().to_canonical(), &buffer[..len]));
        }
    }

    fn deliver_tunnelled(&self, peers: &Peers, sender: IpAddr, bytes: &[u8]) -> Handled {
        let refuse = |why: String| {
            let count = peers.refused.fetch_add(1, Ordering::Relaxed) + 1;
            let outcome = format!("drop: tunnel datagram from {sender} refused ({count} so far): {why}");
            Handled { client: SocketAddr::new(sender, 0), service_address: None, outcome }
        };
        if !peers.addresses.contains(&sender) {
            return refuse("not a peer dispatcher".into());
        }
        match interdc::open(bytes, &peers.key, unix_ms()) {
            Ok(tunnelled) => {
                let delivered = self.to_replica(tunnelled.client, tunnelled.service, tunnelled.replica, &[tunnelled.datagram]);
                let outcome = format!("tunnelled from {sender}: {delivered}");
                Handled { client: tunnelled.client, service_address: Some(tunnelled.service.ip()), outcome }
            }
            Err(error) => refuse(error.to_string()),
        }
    }
}

/// The wall clock the tunnel's times are read on, Unix ms.
fn unix_ms() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64)
}

/// One line to the log the service loop and the tunnel thread share.
fn log_one(log: &Mutex<impl FnMut(&Handled)>, handled: &Handled) {
    (log.lock().expect("the log panicked on another thread"))(handled);
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
        let checks = [config.routes().err(), config.replicas().err(), config.vteps().err(), config.addresses().err(), config.peers().err()];
        checks.into_iter().flatten().next().unwrap_or_else(|| panic!("accepted {text}")).to_string()
    }

    #[test]
    fn a_good_config_gives_routes_keyed_by_wire_name_and_tunnel_endpoints() {
        let config = DispatcherConfig::parse(GOOD).unwrap();
        let routes = config.routes().unwrap();
        assert!(routes.services.contains_key(&b"\x03svc\x07example\x04test\x00"[..]));
        let replicas = config.replicas().unwrap();
        let address: IpAddr = "10.77.21.2".parse().unwrap();
        assert_eq!(replicas[&1], ReplicaAt { address, datacenter: None });
        let vtep = config.vteps().unwrap()[&address];
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
        assert!(error_of(&GOOD.replace("vtep = \"10.77.11.2\"\n", "")).contains("needs a vtep and a mac"));
        let far = GOOD.replace("weight = 1", "weight = 1\ndatacenter = \"dc2\"");
        assert!(error_of(&far).contains("in data center dc2, which has no [[peer]]"));
        let peered = far.replace("vni = 42\n", "vni = 42\n[[peer]]\ndatacenter = \"dc2\"\naddress = \"10.77.3.2\"\n");
        assert!(error_of(&peered).contains("need a tunnel_port"));
        let ported = peered.replace("vni = 42\n", "vni = 42\ntunnel_port = 4790\n");
        assert!(error_of(&ported).contains("need a tunnel_key or a tunnel_key_file"));
        let key = format!("tunnel_key = \"{}\"\n", "ab".repeat(32));
        let both = ported.replace("vni = 42\n", &format!("vni = 42\n{key}tunnel_key_file = \"/nonexistent\"\n"));
        assert!(error_of(&both).contains("both given"));
        let missing = ported.replace("vni = 42\n", "vni = 42\ntunnel_key_file = \"/nonexistent/key\"\n");
        assert!(error_of(&missing).contains("tunnel_key_file /nonexistent/key: "));
        let short = ported.replace("vni = 42\n", "vni = 42\ntunnel_key = \"abcd\"\n");
        assert!(error_of(&short).contains("at least 16"));
        let keyed = ported.replace("vni = 42\n", &format!("vni = 42\n{key}"));
        let config = DispatcherConfig::parse(&keyed).unwrap();
        assert_eq!(config.peers().unwrap().map(|peers| peers.port), Some(4790));
    }

    #[test]
    fn the_tunnel_key_may_come_from_a_file() {
        let file = std::env::temp_dir().join(format!("pharos-tunnel-key-{}", std::process::id()));
        std::fs::write(&file, format!("{}\n", "0f".repeat(32))).unwrap();
        let text = GOOD.replace(
            "vni = 42\n",
            &format!(
                "vni = 42\ntunnel_port = 4790\ntunnel_key_file = {:?}\n[[peer]]\ndatacenter = \"dc2\"\naddress = \"10.77.3.2\"\n",
                file
            ),
        );
        let peers = DispatcherConfig::parse(&text).unwrap().peers();
        std::fs::remove_file(&file).unwrap();
        assert!(peers.unwrap().is_some());
    }

    #[test]
    fn replicas_of_other_data_centers_are_reached_through_their_dispatcher_and_need_no_vtep() {
        let text = GOOD
            .replace(
                "vni = 42\n",
                "vni = 42\ndatacenter = \"dc1\"\ntunnel_port = 4790\ntunnel_key = \"00112233445566778899aabbccddeeff\"\n[[peer]]\ndatacenter = \"dc2\"\naddress = \"10.77.3.2\"\n",
            )
            .replace("vtep = \"10.77.11.2\"", "datacenter = \"dc2\"")
            .replace("mac = \"02:00:00:00:00:01\"", "");
        let config = DispatcherConfig::parse(&text).unwrap();
        let address: IpAddr = "10.77.21.2".parse().unwrap();
        assert_eq!(config.replicas().unwrap()[&1], ReplicaAt { address, datacenter: Some("dc2".into()) });
        assert!(config.vteps().unwrap().is_empty());
        let service = &config.routes().unwrap().services[&b"\x03svc\x07example\x04test\x00"[..]];
        assert_eq!(service.replicas[0].datacenter.as_deref(), Some("dc2"));
    }
}
