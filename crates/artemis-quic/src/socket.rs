//! A UDP socket for quinn that lets Artemis see or change each datagram's
//! address on its way: the replica counts what arrives at the service
//! address, the client moves to the replica's preferred address.

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};

/// What a [`HookedSocket`] does to the addresses of the datagrams it moves.
pub trait DatagramHook: Send + Sync + fmt::Debug + 'static {
    /// The address to send to instead of `destination`.
    fn destination(&self, destination: SocketAddr) -> SocketAddr;
    /// Sees (and may rewrite) each received buffer's metadata.
    fn received(&self, meta: &mut RecvMeta);
}

/// quinn's own socket, with a hook on every address.
#[derive(Debug)]
pub struct HookedSocket<H> {
    inner: Arc<dyn AsyncUdpSocket>,
    hook: Arc<H>,
}

impl<H: DatagramHook> HookedSocket<H> {
    pub fn new(socket: std::net::UdpSocket, hook: Arc<H>) -> io::Result<Self> {
        let inner = quinn::Runtime::wrap_udp_socket(&quinn::TokioRuntime, socket)?;
        Ok(Self { inner, hook })
    }
}

impl<H: DatagramHook> AsyncUdpSocket for HookedSocket<H> {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        let destination = self.hook.destination(transmit.destination);
        self.inner.try_send(&Transmit { destination, ..*transmit })
    }

    fn poll_recv(&self, cx: &mut Context, bufs: &mut [IoSliceMut<'_>], meta: &mut [RecvMeta]) -> Poll<io::Result<usize>> {
        let received = std::task::ready!(self.inner.poll_recv(cx, bufs, meta))?;
        meta[..received].iter_mut().for_each(|meta| self.hook.received(meta));
        Poll::Ready(Ok(received))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

/// The replica's counts of datagrams received at the service address
/// (through the dispatcher, or a client that has not moved) and at any
/// other (its own address: clients that moved or came straight back).
#[derive(Debug)]
pub struct ArrivalCounts {
    service_address: IpAddr,
    at_service: AtomicU64,
    elsewhere: AtomicU64,
}

impl ArrivalCounts {
    pub(crate) fn new(service_address: IpAddr) -> Self {
        Self { service_address, at_service: AtomicU64::new(0), elsewhere: AtomicU64::new(0) }
    }

    pub fn at_service_address(&self) -> u64 {
        self.at_service.load(Ordering::Relaxed)
    }

    pub fn elsewhere(&self) -> u64 {
        self.elsewhere.load(Ordering::Relaxed)
    }
}

impl DatagramHook for ArrivalCounts {
    fn destination(&self, destination: SocketAddr) -> SocketAddr {
        destination
    }

    fn received(&self, meta: &mut RecvMeta) {
        // With GRO one buffer holds several datagrams, `stride` bytes apart.
        let datagrams = meta.len.div_ceil(meta.stride.max(1)) as u64;
        let counter = if meta.dst_ip == Some(self.service_address) { &self.at_service } else { &self.elsewhere };
        counter.fetch_add(datagrams, Ordering::Relaxed);
    }
}

/// The client's move from the service address to the replica's preferred
/// address, once the handshake is confirmed: datagrams for the service
/// address go to the replica instead, and the replica's come back as if
/// from the service address, because quinn's client drops datagrams from
/// an address it does not know. The connection never learns it moved, so
/// it sends no PATH_CHALLENGE and keeps its connection ID: the smallest
/// change that works, since quinn has no client migration to a preferred
/// address (quinn issue 716).
#[derive(Debug, Default)]
pub struct Migration {
    moved: OnceLock<(SocketAddr, SocketAddr)>,
}

impl Migration {
    /// From now on, `service` means `preferred`. Once only: later calls
    /// change nothing.
    pub fn move_to(&self, service: SocketAddr, preferred: SocketAddr) {
        let _already_moved = self.moved.set((service, preferred));
    }

    pub fn moved(&self) -> Option<(SocketAddr, SocketAddr)> {
        self.moved.get().copied()
    }
}

impl DatagramHook for Migration {
    fn destination(&self, destination: SocketAddr) -> SocketAddr {
        match self.moved() {
            Some((service, preferred)) if destination == service => preferred,
            _ => destination,
        }
    }

    fn received(&self, meta: &mut RecvMeta) {
        if let Some((service, preferred)) = self.moved()
            && meta.addr == preferred
        {
            meta.addr = service;
        }
    }
}
