//! Lowest measured latency (Artemis end-user mapping, section 3.3): the
//! data center with the lowest RTT from the client's subnet that holds a
//! serving replica first, its replicas in weighted random order, then the
//! next data center, and replicas without a measurement last.

use rand::Rng;

use super::{Choice, Miss, order_by_key};
use crate::explain::{Explanation, note};
use crate::latency::{DataCenterRtt, Latencies};
use crate::locate::Location;
use crate::replica::Replica;

/// `datacenters[i]`: replica `i`'s data center as an index into
/// `latencies.datacenters`, if it has any measurement.
pub fn choose(
    datacenters: &[Option<u16>],
    latencies: &Latencies,
    replicas: &[Replica],
    candidates: &[usize],
    location: &Location,
    rng: &mut impl Rng,
    mut explanation: Option<&mut Explanation>,
) -> Result<Choice, Miss> {
    let (found, scope) = latencies.lookup(location.client.address);
    let Some(measured) = found else {
        note(&mut explanation, || format!("no fresh measurements for a subnet holding the client (scope /{scope})"));
        return Err(Miss { scope });
    };
    note(&mut explanation, || {
        let subnet = measured.subnet;
        let name = |rtt: &DataCenterRtt| &latencies.datacenters[rtt.datacenter as usize];
        let listed: Vec<String> = subnet.rtts.iter().map(|rtt| format!("{} {:.1} ms ({} s old)", name(rtt), rtt.rtt_ms, rtt.age)).collect();
        format!("measured from {}/{}: {}", subnet.network, subnet.length, listed.join(", "))
    });
    let rtt = |index: usize| measured.rtt_ms(datacenters[index]?);
    let order = order_by_key(replicas, candidates, rtt, rng);
    // Replicas without a measurement sort last, so the first has the lowest RTT if any has one.
    let Some(best) = order.first().and_then(|&first| Some((rtt(first)?, first))) else {
        note(&mut explanation, || "no measured data center holds a serving replica".to_string());
        return Err(Miss { scope });
    };
    note(&mut explanation, || {
        format!("lowest RTT with a serving replica: {} ({:.1} ms)", replicas[best.1].datacenter.as_deref().unwrap_or("?"), best.0)
    });
    Ok(Choice { order, ttl: None, scope })
}
