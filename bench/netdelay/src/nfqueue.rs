//! NFQUEUE over a raw netlink socket (libc only): bind a queue, read the
//! packets the kernel hands over, give each its verdict. The kernel holds
//! every queued packet until its verdict comes, in any order, which is what
//! lets [`super::delayer`] delay packets.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const NETLINK_NETFILTER: libc::c_int = 12;
const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_PACKET: u16 = 0;
const NFQNL_MSG_VERDICT: u16 = 1;
const NFQNL_MSG_CONFIG: u16 = 2;
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_PAYLOAD: u16 = 10;
const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_COPY_PACKET: u8 = 2;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const SOL_NETLINK: libc::c_int = 270;
const NETLINK_NO_ENOBUFS: libc::c_int = 5;
const NF_DROP: u32 = 0;
const NF_ACCEPT: u32 = 1;

/// One queued packet: the kernel's ID for it and its first octets (the IP
/// header onwards, up to the copy range).
#[derive(Debug, Clone)]
pub struct Packet {
    pub id: u32,
    pub data: Vec<u8>,
}

/// A bound queue in the network namespace of the thread that opened it.
pub struct Queue {
    fd: OwnedFd,
    queue: u16,
    sequence: u32,
    buffer: Vec<u8>,
}

fn check(result: libc::c_int) -> io::Result<libc::c_int> {
    if result < 0 { Err(io::Error::last_os_error()) } else { Ok(result) }
}

fn push_attribute(message: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    message.extend(((4 + payload.len()) as u16).to_ne_bytes());
    message.extend(kind.to_ne_bytes());
    message.extend(payload);
    while !message.len().is_multiple_of(4) {
        message.push(0);
    }
}

/// A netfilter queue message: netlink header, nfgenmsg, attributes.
fn message(kind: u16, flags: u16, sequence: u32, family: u8, queue: u16, attributes: &[(u16, &[u8])]) -> Vec<u8> {
    let mut message = vec![0; 16];
    message.extend([family, 0]);
    message.extend(queue.to_be_bytes());
    for (kind, payload) in attributes {
        push_attribute(&mut message, *kind, payload);
    }
    let length = message.len() as u32;
    message[0..4].copy_from_slice(&length.to_ne_bytes());
    message[4..6].copy_from_slice(&((NFNL_SUBSYS_QUEUE << 8) | kind).to_ne_bytes());
    message[6..8].copy_from_slice(&flags.to_ne_bytes());
    message[8..12].copy_from_slice(&sequence.to_ne_bytes());
    message
}

/// The netlink messages in one datagram: (type, body after the header).
fn messages(datagram: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut rest = datagram;
    std::iter::from_fn(move || {
        if rest.len() < 16 {
            return None;
        }
        let length = u32::from_ne_bytes(rest[0..4].try_into().unwrap()) as usize;
        if length < 16 || length > rest.len() {
            return None;
        }
        let kind = u16::from_ne_bytes(rest[4..6].try_into().unwrap());
        let body = &rest[16..length];
        rest = &rest[length.next_multiple_of(4).min(rest.len())..];
        Some((kind, body))
    })
}

/// The attributes after the nfgenmsg of a netfilter message body.
fn attributes(body: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut rest = body.get(4..).unwrap_or_default();
    std::iter::from_fn(move || {
        if rest.len() < 4 {
            return None;
        }
        let length = u16::from_ne_bytes(rest[0..2].try_into().unwrap()) as usize;
        if length < 4 || length > rest.len() {
            return None;
        }
        let kind = u16::from_ne_bytes(rest[2..4].try_into().unwrap()) & 0x3fff;
        let payload = &rest[4..length];
        rest = &rest[length.next_multiple_of(4).min(rest.len())..];
        Some((kind, payload))
    })
}

impl Queue {
    /// Binds queue `queue`, copying the first `copy_range` octets of each
    /// packet, with room for `max_length` packets held at once.
    pub fn open(queue: u16, copy_range: u32, max_length: u32) -> io::Result<Queue> {
        let fd = check(unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, NETLINK_NETFILTER) })?;
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut address: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        address.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        let size = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
        check(unsafe { libc::bind(fd.as_raw_fd(), (&raw const address).cast(), size) })?;
        let set = |level, option, value: libc::c_int| {
            let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            check(unsafe { libc::setsockopt(fd.as_raw_fd(), level, option, (&raw const value).cast(), size) })
        };
        // Bursts must never overflow the socket: a lost notification would
        // leave its packet held until the queue is unbound.
        set(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 16 << 20).or_else(|_| set(libc::SOL_SOCKET, libc::SO_RCVBUF, 16 << 20))?;
        set(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)?;
        let mut queue = Queue { fd, queue, sequence: 0, buffer: vec![0; 1 << 16] };
        queue.configure(libc::AF_UNSPEC as u8, &[(NFQA_CFG_CMD, &[NFQNL_CFG_CMD_BIND, 0, 0, 0])])?;
        let mut params = copy_range.to_be_bytes().to_vec();
        params.push(NFQNL_COPY_PACKET);
        queue.configure(libc::AF_UNSPEC as u8, &[(NFQA_CFG_PARAMS, &params)])?;
        queue.configure(libc::AF_UNSPEC as u8, &[(NFQA_CFG_QUEUE_MAXLEN, &max_length.to_be_bytes())])?;
        Ok(queue)
    }

    fn send(&self, message: &[u8]) -> io::Result<()> {
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        let size = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
        let sent =
            unsafe { libc::sendto(self.fd.as_raw_fd(), message.as_ptr().cast(), message.len(), 0, (&raw const kernel).cast(), size) };
        if sent < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
    }

    /// Sends a configuration request and waits for the kernel's ack.
    fn configure(&mut self, family: u8, attributes: &[(u16, &[u8])]) -> io::Result<()> {
        self.sequence += 1;
        let sequence = self.sequence;
        self.send(&message(NFQNL_MSG_CONFIG, NLM_F_REQUEST | NLM_F_ACK, sequence, family, self.queue, attributes))?;
        loop {
            let length = check(unsafe { libc::recv(self.fd.as_raw_fd(), self.buffer.as_mut_ptr().cast(), self.buffer.len(), 0) as i32 })?;
            for (kind, body) in messages(&self.buffer[..length as usize]) {
                if kind == NLMSG_ERROR && body.len() >= 4 {
                    let error = i32::from_ne_bytes(body[0..4].try_into().unwrap());
                    return if error == 0 { Ok(()) } else { Err(io::Error::from_raw_os_error(-error)) };
                }
            }
        }
    }

    /// Reads every packet waiting, without blocking, into `out`.
    pub fn receive(&mut self, out: &mut Vec<Packet>) -> io::Result<()> {
        loop {
            let length = unsafe { libc::recv(self.fd.as_raw_fd(), self.buffer.as_mut_ptr().cast(), self.buffer.len(), libc::MSG_DONTWAIT) };
            if length < 0 {
                let error = io::Error::last_os_error();
                return if error.kind() == io::ErrorKind::WouldBlock { Ok(()) } else { Err(error) };
            }
            for (kind, body) in messages(&self.buffer[..length as usize]) {
                if kind == NLMSG_ERROR && body.len() >= 4 {
                    let error = i32::from_ne_bytes(body[0..4].try_into().unwrap());
                    if error != 0 {
                        return Err(io::Error::other(format!("nfqueue: {}", io::Error::from_raw_os_error(-error))));
                    }
                    continue;
                }
                if kind != (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET {
                    continue;
                }
                let mut packet = Packet { id: 0, data: Vec::new() };
                let mut has_id = false;
                for (attribute, payload) in attributes(body) {
                    match attribute {
                        NFQA_PACKET_HDR if payload.len() >= 4 => {
                            packet.id = u32::from_be_bytes(payload[0..4].try_into().unwrap());
                            has_id = true;
                        }
                        NFQA_PAYLOAD => packet.data = payload.to_vec(),
                        _ => {}
                    }
                }
                if has_id {
                    out.push(packet);
                }
            }
        }
    }

    /// Lets the packet go on (`accept`) or drops it.
    pub fn verdict(&self, id: u32, accept: bool) -> io::Result<()> {
        let mut header = (if accept { NF_ACCEPT } else { NF_DROP }).to_be_bytes().to_vec();
        header.extend(id.to_be_bytes());
        self.send(&message(NFQNL_MSG_VERDICT, NLM_F_REQUEST, 0, libc::AF_UNSPEC as u8, self.queue, &[(NFQA_VERDICT_HDR, &header)]))
    }

    /// Waits until a packet is waiting or `timeout` passes.
    pub fn wait(&self, timeout: std::time::Duration) -> io::Result<()> {
        let mut poll = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let timeout = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
        let result = unsafe { libc::ppoll(&raw mut poll, 1, &raw const timeout, std::ptr::null()) };
        if result < 0 {
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::Interrupted {
                return Err(error);
            }
        }
        Ok(())
    }
}

impl AsRawFd for Queue {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_attributes_round_trip() {
        let built = message(NFQNL_MSG_VERDICT, NLM_F_REQUEST, 7, 0, 3, &[(NFQA_VERDICT_HDR, &[0, 0, 0, 1, 0, 0, 0, 9]), (5, &[1])]);
        assert_eq!(built.len(), 16 + 4 + 12 + 8);
        let parsed: Vec<_> = messages(&built).collect();
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].0, (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_VERDICT);
        assert_eq!(&parsed[0].1[2..4], &3u16.to_be_bytes());
        let attributes: Vec<_> = attributes(parsed[0].1).collect();
        assert_eq!(attributes, [(NFQA_VERDICT_HDR, &[0, 0, 0, 1, 0, 0, 0, 9][..]), (5, &[1][..])]);
    }
}
