//! The resolver emulation: a caching forwarder in front of Pharos's DNS
//! server. The experiment decides each query's fate (a cache hit with
//! probability 83.5 %) and prepares the cache for it: emptied before a
//! miss, so the query goes on to Pharos; filled before a hit, so it is
//! answered from the cache.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use domain::base::{Message, MessageBuilder, Name, Rtype};

/// Cache key: the question's name and type.
type Question = (String, Rtype);

pub struct Resolver {
    listen: UdpSocket,
    upstream: UdpSocket,
    cache: Mutex<HashMap<Question, Vec<u8>>>,
}

pub fn query(id: u16, name: &str) -> Vec<u8> {
    let mut builder = MessageBuilder::new_vec();
    builder.header_mut().set_id(id);
    builder.header_mut().set_rd(true);
    let mut question = builder.question();
    question.push((Name::<Vec<u8>>::vec_from_str(name).expect("the experiment's names are valid"), Rtype::A)).expect("a short name fits");
    question.finish()
}

fn question(message: &[u8]) -> Option<Question> {
    let question = Message::from_octets(message).ok()?.first_question()?;
    Some((question.qname().to_string().to_lowercase(), question.qtype()))
}

impl Resolver {
    /// `listen` and `upstream` (connected to the server) belong to the
    /// resolver's namespace.
    pub fn new(listen: UdpSocket, upstream: UdpSocket) -> io::Result<Arc<Resolver>> {
        upstream.set_read_timeout(Some(Duration::from_millis(200)))?;
        Ok(Arc::new(Resolver { listen, upstream, cache: Mutex::new(HashMap::new()) }))
    }

    /// Answers clients until the socket fails.
    pub fn serve(&self) -> io::Result<()> {
        let mut buffer = [0u8; 1500];
        loop {
            let (len, client) = self.listen.recv_from(&mut buffer)?;
            self.answer(&buffer[..len], client)?;
        }
    }

    fn answer(&self, request: &[u8], client: SocketAddr) -> io::Result<()> {
        let Some(key) = question(request) else { return Ok(()) };
        let cached = self.cache.lock().unwrap().get(&key).cloned();
        let mut reply = match cached {
            Some(reply) => reply,
            None => {
                let reply = self.ask_upstream(request)?;
                self.cache.lock().unwrap().insert(key, reply.clone());
                reply
            }
        };
        reply[..2].copy_from_slice(&request[..2]);
        self.listen.send_to(&reply, client).map(drop)
    }

    fn ask_upstream(&self, request: &[u8]) -> io::Result<Vec<u8>> {
        self.upstream.send(request)?;
        let mut buffer = vec![0u8; 1500];
        loop {
            let len = self.upstream.recv(&mut buffer)?;
            if len >= 2 && buffer[..2] == request[..2] {
                buffer.truncate(len);
                return Ok(buffer);
            }
        }
    }

    /// Makes the next query for `name` a hit (`true`: cached now) or a
    /// miss (`false`: nothing cached).
    pub fn prepare(&self, name: &str, hit: bool) -> io::Result<()> {
        self.cache.lock().unwrap().clear();
        if hit {
            let request = query(0, name);
            let reply = self.ask_upstream(&request)?;
            self.cache.lock().unwrap().insert(question(&request).expect("our own query"), reply);
        }
        Ok(())
    }

    /// Waits up to `limit` for the server to answer.
    pub fn wait_for_server(&self, name: &str, limit: Duration) -> io::Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            match self.ask_upstream(&query(1, name)) {
                Ok(_) => return Ok(()),
                Err(error) if Instant::now() >= deadline => {
                    return Err(io::Error::other(format!("Pharos's DNS server is silent: {error}")));
                }
                // Refused until it listens: not a spin meanwhile.
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upstream on loopback that answers every query with its ID and
    /// the number of queries it has had; returns its address.
    fn counting_upstream() -> SocketAddr {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let address = socket.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 1500];
            for asked in 1u8..=u8::MAX {
                let Ok((len, from)) = socket.recv_from(&mut buffer) else { return };
                let mut reply = buffer[..len].to_vec();
                reply.push(asked);
                socket.send_to(&reply, from).unwrap();
            }
        });
        address
    }

    fn ask(resolver: &SocketAddr, id: u16, name: &str) -> Vec<u8> {
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        client.send_to(&query(id, name), resolver).unwrap();
        let mut buffer = [0u8; 1500];
        let len = client.recv(&mut buffer).unwrap();
        buffer[..len].to_vec()
    }

    #[test]
    fn a_prepared_hit_is_answered_from_the_cache_and_a_miss_goes_upstream() {
        let upstream = UdpSocket::bind("127.0.0.1:0").unwrap();
        upstream.connect(counting_upstream()).unwrap();
        let listen = UdpSocket::bind("127.0.0.1:0").unwrap();
        let address = listen.local_addr().unwrap();
        let resolver = Resolver::new(listen, upstream).unwrap();
        let serving = resolver.clone();
        std::thread::spawn(move || serving.serve());

        resolver.prepare("near.example.test", true).unwrap();
        let hit = ask(&address, 7, "near.example.test");
        assert_eq!((&hit[..2], hit.last()), (&7u16.to_be_bytes()[..], Some(&1)), "the warming query's answer, with the client's ID");
        resolver.prepare("near.example.test", false).unwrap();
        let miss = ask(&address, 8, "Near.Example.Test");
        assert_eq!((&miss[..2], miss.last()), (&8u16.to_be_bytes()[..], Some(&2)), "asked upstream");
        let cached = ask(&address, 9, "near.example.test");
        assert_eq!(cached.last(), Some(&2), "the miss's answer is cached, whatever the case of the name");
    }

    #[test]
    fn a_silent_server_is_a_clear_error() {
        let upstream = UdpSocket::bind("127.0.0.1:0").unwrap();
        upstream.connect(UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap()).unwrap();
        let resolver = Resolver::new(UdpSocket::bind("127.0.0.1:0").unwrap(), upstream).unwrap();
        let error = resolver.wait_for_server("near.example.test", Duration::from_millis(300)).unwrap_err();
        assert!(error.to_string().starts_with("Pharos's DNS server is silent"), "{error}");
    }
}
