//! The ServiceID mapping (Artemis section 3.2): a name's service address
//! is the operator's prefix followed by the leading bits of SHA-512 over
//! the name. Clients compute it alone, so both sides must agree on the
//! exact bytes hashed: the name in lowercase presentation form, A-labels
//! for internationalized names, without the trailing dot.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use idna::uts46::{AsciiDenyList, DnsLength, Hyphens, Uts46};
use sha2::{Digest, Sha512};

/// The operator's service prefix: the anycast block every data center
/// announces. Host bits must be zero, so a typo cannot shift every address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServicePrefix {
    network: IpAddr,
    length: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    #[error("prefix {0:?}: expected ADDRESS/LENGTH, e.g. 192.0.2.0/24 or 2001:db8::/48")]
    Syntax(String),
    #[error("prefix {prefix:?}: length {length} is longer than the address's {width} bits")]
    TooLong { prefix: String, length: u32, width: u32 },
    #[error("prefix {prefix:?}: host bits are set (did you mean {network}/{length}?)")]
    HostBits { prefix: String, network: IpAddr, length: u8 },
}

impl ServicePrefix {
    pub fn new(network: IpAddr, length: u8) -> Result<Self, PrefixError> {
        let text = format!("{network}/{length}");
        let width = width_of(network);
        if u32::from(length) > width {
            return Err(PrefixError::TooLong { prefix: text, length: length.into(), width });
        }
        let masked = from_bits(network, to_bits(network) & network_mask(width, length));
        if masked != network {
            return Err(PrefixError::HostBits { prefix: text, network: masked, length });
        }
        Ok(Self { network, length })
    }

    pub fn network(&self) -> IpAddr {
        self.network
    }

    pub fn length(&self) -> u8 {
        self.length
    }

    /// How many bits of each address come from the hash.
    pub fn host_bits(&self) -> u32 {
        width_of(self.network) - u32::from(self.length)
    }

    pub fn contains(&self, address: IpAddr) -> bool {
        address.is_ipv4() == self.network.is_ipv4()
            && to_bits(address) & network_mask(width_of(address), self.length) == to_bits(self.network)
    }

    /// The address whose host bits are `host` (the low `host_bits()` bits).
    pub fn address_with_host(&self, host: u128) -> IpAddr {
        from_bits(self.network, to_bits(self.network) | host)
    }

    /// The host bits of `address`, which must lie inside the prefix.
    pub fn host_of(&self, address: IpAddr) -> u128 {
        to_bits(address) & !network_mask(width_of(address), self.length)
    }

    /// The service address of a name already in canonical form.
    pub fn service_address(&self, name: &CanonicalName) -> IpAddr {
        let digest = Sha512::digest(name.as_str().as_bytes());
        let leading = u128::from_be_bytes(digest[..16].try_into().expect("SHA-512 has 64 bytes"));
        let host_bits = self.host_bits();
        // The address's host part is the hash's first `host_bits` bits.
        let host = if host_bits == 0 { 0 } else { leading >> (128 - host_bits) };
        self.address_with_host(host)
    }
}

impl FromStr for ServicePrefix {
    type Err = PrefixError;

    fn from_str(text: &str) -> Result<Self, PrefixError> {
        let syntax = || PrefixError::Syntax(text.to_owned());
        let (address, length) = text.split_once('/').ok_or_else(syntax)?;
        let network: IpAddr = address.parse().map_err(|_| syntax())?;
        let length: u32 = length.parse().map_err(|_| syntax())?;
        let width = width_of(network);
        if length > width {
            return Err(PrefixError::TooLong { prefix: text.to_owned(), length, width });
        }
        Self::new(network, length as u8)
    }
}

impl fmt::Display for ServicePrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.length)
    }
}

fn width_of(address: IpAddr) -> u32 {
    if address.is_ipv4() { 32 } else { 128 }
}

fn network_mask(width: u32, length: u8) -> u128 {
    let all = if width == 32 { u128::from(u32::MAX) } else { u128::MAX };
    let host_bits = width - u32::from(length);
    if host_bits == 128 { 0 } else { all & !((1u128 << host_bits) - 1) }
}

fn to_bits(address: IpAddr) -> u128 {
    match address {
        IpAddr::V4(v4) => u32::from(v4).into(),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// An address of the same family as `family` from its bits.
fn from_bits(family: IpAddr, bits: u128) -> IpAddr {
    match family {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(bits as u32)),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(bits)),
    }
}

/// A host name in the form that is hashed: lowercase, A-labels, no
/// trailing dot. Built only by [`CanonicalName::new`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CanonicalName(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("name {name:?} is not a valid host name: {reason}")]
pub struct NameError {
    pub name: String,
    pub reason: &'static str,
}

impl CanonicalName {
    /// Folds case, converts U-labels to A-labels (UTS #46, as browsers do)
    /// and drops one trailing dot. Refuses what cannot be a host name
    /// in SNI: empty names or labels, characters outside letters, digits
    /// and hyphens, labels over 63 bytes, names over 253.
    pub fn new(name: &str) -> Result<Self, NameError> {
        let error = |reason| NameError { name: name.to_owned(), reason };
        let relative = name.strip_suffix('.').unwrap_or(name);
        if relative.is_empty() {
            return Err(error("it is empty"));
        }
        let ascii = Uts46::new()
            .to_ascii(relative.as_bytes(), AsciiDenyList::STD3, Hyphens::CheckFirstLast, DnsLength::Verify)
            .map_err(|_| error("only letters, digits and inner hyphens, labels of 1 to 63 bytes, at most 253 in all"))?;
        Ok(Self(ascii.into_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name in DNS wire form, as the routing core keys services.
    pub fn wire(&self) -> Vec<u8> {
        // `new` verified what the encoder checks: labels of 1 to 63 bytes, at most 253 in all.
        pharos_wire::name::from_dotted(&self.0).expect("a canonical name is a valid DNS name")
    }
}

impl fmt::Display for CanonicalName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Names given fixed addresses (the paper's section 7 conflict list),
/// consulted before the hash: how two names whose hashes collide both
/// get an address of their own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConflictList {
    fixed: HashMap<CanonicalName, IpAddr>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConflictListError {
    #[error("line {line}: expected NAME ADDRESS, found {found:?}")]
    Syntax { line: usize, found: String },
    #[error("line {line}: {source}")]
    Name { line: usize, source: NameError },
    #[error("line {line}: {found:?} is not an IP address")]
    Address { line: usize, found: String },
    #[error("line {line}: {address} for {name} is outside the service prefix {prefix}")]
    OutsidePrefix { line: usize, name: CanonicalName, address: IpAddr, prefix: ServicePrefix },
    #[error("line {line}: {name} is listed twice (first on line {first})")]
    Duplicate { line: usize, name: CanonicalName, first: usize },
}

impl ConflictList {
    /// Reads `NAME ADDRESS` lines; blank lines and `#` comments are
    /// skipped. Every address must lie inside `prefix`: the dispatchers
    /// only receive what the prefix's announcement draws to them.
    pub fn parse(text: &str, prefix: &ServicePrefix) -> Result<Self, ConflictListError> {
        let mut fixed = HashMap::new();
        let mut first_seen = HashMap::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let content = raw.split('#').next().unwrap_or_default().trim();
            if content.is_empty() {
                continue;
            }
            let fields: Vec<&str> = content.split_whitespace().collect();
            let [name, address] = fields[..] else {
                return Err(ConflictListError::Syntax { line, found: content.to_owned() });
            };
            let name = CanonicalName::new(name).map_err(|source| ConflictListError::Name { line, source })?;
            let address: IpAddr = address.parse().map_err(|_| ConflictListError::Address { line, found: address.to_owned() })?;
            if !prefix.contains(address) {
                return Err(ConflictListError::OutsidePrefix { line, name, address, prefix: *prefix });
            }
            if let Some(&first) = first_seen.get(&name) {
                return Err(ConflictListError::Duplicate { line, name, first });
            }
            first_seen.insert(name.clone(), line);
            fixed.insert(name, address);
        }
        Ok(Self { fixed })
    }

    pub fn get(&self, name: &CanonicalName) -> Option<IpAddr> {
        self.fixed.get(name).copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&CanonicalName, IpAddr)> {
        self.fixed.iter().map(|(name, &address)| (name, address))
    }
}

/// The whole mapping a client or a dispatcher applies: the conflict list
/// first, then the hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceIdMap {
    pub prefix: ServicePrefix,
    pub conflicts: ConflictList,
}

impl ServiceIdMap {
    pub fn new(prefix: ServicePrefix, conflicts: ConflictList) -> Self {
        Self { prefix, conflicts }
    }

    pub fn address_of(&self, name: &CanonicalName) -> IpAddr {
        self.conflicts.get(name).unwrap_or_else(|| self.prefix.service_address(name))
    }
}
