//! `GET /metrics`: what Pharos does, in the Prometheus text format
//! (OpenMetrics). Two
//! kinds of source meet at each scrape: what the control thread counts as
//! it works (`crate::observe::activity::ControlActivity`, metrics of `prometheus-client` kept for
//! the process's life), and what is read afresh (a [`Scrape`]): the
//! transports' per-thread counts merged (`pharos_transport::metrics`), the
//! health of every probed replica, the kernel fast path's counters, what
//! response rate limiting limited, the
//! age of the proximity data and the store. Every label is a name the
//! operator chose or one fixed here: nothing is keyed by client. With
//! counting off (`[metrics] counting = false`) the families counted on the
//! query path (queries, responses, latency, decisions and the split made
//! of them) are left out, not written as zeros a rate would take for no
//! traffic, and `pharos_dns_counting` says 0.

use pharos_answer::Tsig;
use pharos_control::health::ReplicaHealth;
use pharos_model::ControlError;
use pharos_transport::metrics::{self as counts, Mechanism, RCODE_NAMES, Refusal, Totals, qtype_class_name};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

use crate::api::UdpLimits;
use crate::data::{DataFile, DataStatus};
use crate::driver::thread::ControlThread;
use crate::observe::activity::replica_labels;
use crate::observe::split::{MAX_RESOLVERS, ReplicaShare, Split, Splits};
use crate::status::FastPathStatus;

/// What `prometheus-client` writes: OpenMetrics, which Prometheus asks for.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The older text format, for every other client (promtool, curl).
pub const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Everything read afresh for one scrape.
#[derive(Debug)]
struct Scrape {
    /// Whether the transports count (then `totals` and `splits` mean something).
    counting: bool,
    totals: Totals,
    connections: counts::Connections,
    handshakes: [counts::Handshakes; 4],
    proxy_refusals: Vec<(Mechanism, Refusal, u64)>,
    dnstap_dropped: u64,
    /// Region names by id, for the decisions' labels.
    regions: Vec<(u32, String)>,
    health: Vec<ReplicaHealth>,
    fastpath: FastPathStatus,
    /// What response rate limiting limited; `None` when it is off.
    rrl: Option<pharos_rrl::Counters>,
    data: DataStatus,
    /// Whether the state is kept in a file or a database.
    store_persistent: bool,
    /// Unix seconds now, for the age of data.
    now: u64,
    splits: Splits,
}

/// The text of one scrape, in OpenMetrics.
pub async fn render(control: &ControlThread, limits: &UdpLimits) -> Result<String, ControlError> {
    let state = control.state();
    let observation = control.observation();
    let scrape = Scrape {
        counting: observation.counters.counting_queries(),
        totals: observation.counters.totals(),
        connections: observation.counters.connections(),
        handshakes: observation.counters.handshakes(),
        proxy_refusals: observation.counters.proxy_refusals(),
        dnstap_dropped: observation.query_log.dropped(),
        regions: state.regions.iter().map(|region| (region.id, region.name.clone())).collect(),
        health: control.health().await?,
        fastpath: control.fastpath_now().await?,
        rrl: limits.responses.as_ref().map(|limit| limit.counters()),
        data: control.data().as_ref().clone(),
        store_persistent: control.store_status().persistent(),
        now: crate::data::unix_millis() / 1000,
        splits: control.split(),
    };
    let mut registry = Registry::default();
    control.activity().register(&mut registry);
    registry.register_collector(Box::new(scrape));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("writing to a String cannot fail");
    Ok(text)
}

/// `openmetrics` in the text format 0.0.4: the same samples, but a counter
/// family is named as its samples are (with `_total`), and there are no
/// UNIT lines and no EOF marker.
pub fn to_text_format(openmetrics: &str) -> String {
    let counters: Vec<&str> = openmetrics.lines().filter_map(|line| line.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut text = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let descriptor = ["# HELP ", "# TYPE "].into_iter().find_map(|prefix| Some((prefix, line.strip_prefix(prefix)?)));
        match descriptor {
            Some((prefix, rest)) if counters.iter().any(|name| rest.split(' ').next() == Some(*name)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                text.push_str(&format!("{prefix}{name}_total {tail}\n"));
            }
            _ => {
                text.push_str(line);
                text.push('\n');
            }
        }
    }
    text
}

/// Writes one metric family: a descriptor, then each labelled value.
fn family<'l, Metric: EncodeMetric + 'l>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    kind: MetricType,
    values: impl IntoIterator<Item = (Vec<(&'l str, String)>, Metric)>,
) -> std::fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, unit, kind)?;
    for (labels, value) in values {
        value.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

fn counter(value: u64) -> ConstCounter<u64> {
    ConstCounter::new(value)
}

fn gauge(value: i64) -> ConstGauge<i64> {
    ConstGauge::new(value)
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let counting = [(vec![], gauge(i64::from(self.counting)))];
        let help = "1 when the DNS transports count queries, 0 when [metrics] counting is off and the query families are left out";
        family(&mut encoder, "pharos_dns_counting", help, None, MetricType::Gauge, counting)?;
        if self.counting {
            self.encode_queries(&mut encoder)?;
            self.encode_decisions(&mut encoder)?;
            self.encode_splits(&mut encoder)?;
        }
        self.encode_connections(&mut encoder)?;
        self.encode_health(&mut encoder)?;
        self.encode_fastpath(&mut encoder)?;
        self.encode_rrl(&mut encoder)?;
        self.encode_data(&mut encoder)
    }
}

impl Scrape {
    fn encode_queries(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let transport = |mechanism: usize| vec![("transport", Mechanism::ALL[mechanism].name().to_string())];
        let received = (0..Mechanism::ALL.len()).map(|mechanism| (transport(mechanism), counter(self.totals.received[mechanism])));
        family(encoder, "pharos_dns_queries", "DNS queries received", None, MetricType::Counter, received)?;
        let responses = self.totals.responses.iter().map(|(&(mechanism, rcode, class), &count)| {
            let mut labels = transport(mechanism);
            labels.push(("rcode", RCODE_NAMES[rcode].to_string()));
            labels.push(("qtype", qtype_class_name(class).to_string()));
            (labels, counter(count))
        });
        family(encoder, "pharos_dns_responses", "DNS responses sent", None, MetricType::Counter, responses)?;
        let signed = Tsig::ALL.map(|tsig| (vec![("outcome", tsig.name().to_string())], counter(self.totals.tsig[tsig as usize])));
        let help = "Signed DNS requests (TSIG, RFC 8945), queries and transfers, by outcome: verified and answered signed, \
                    or refused with its TSIG error (NOTAUTH), or FORMERR for a TSIG record that cannot be read";
        family(encoder, "pharos_tsig_requests", help, None, MetricType::Counter, signed)?;
        let mut latency = encoder.encode_descriptor(
            "pharos_dns_answer",
            "Time from receiving a query to its answer, server side; a UDP batch's time counts for each query in it",
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?;
        for (mechanism, histogram) in self.totals.latency.iter().enumerate() {
            let mut cumulative = 0;
            let bounds = counts::LATENCY_BOUNDS_NS.iter().map(|&ns| ns as f64 / 1e9).chain([f64::INFINITY]);
            let buckets: Vec<(f64, u64)> = bounds
                .zip(histogram.buckets)
                .map(|(bound, count)| {
                    cumulative += count;
                    (bound, cumulative)
                })
                .collect();
            let labels = transport(mechanism);
            latency.encode_family(&labels)?.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                histogram.sum_ns as f64 / 1e9,
                cumulative,
                &buckets,
                None,
            )?;
        }
        Ok(())
    }

    fn encode_decisions(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let region_name = |id: u32| match self.regions.iter().find(|(region, _)| *region == id) {
            Some((_, name)) => name.clone(),
            None if id == pharos_route::UNCLASSIFIED => "unclassified".to_string(),
            None => format!("region {id}"),
        };
        let decisions = self.totals.decisions.iter().map(|((service, replica, region), &count)| {
            let labels = vec![("service", service.clone()), ("region", region_name(*region)), ("replica", replica.clone())];
            (labels, counter(count))
        });
        let help = "Routed answers by service, client region and the replica answered first";
        family(encoder, "pharos_routing_decisions", help, None, MetricType::Counter, decisions)
    }

    fn encode_connections(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let connections = &self.connections;
        let open = [(vec![], gauge(connections.open as i64))];
        family(encoder, "pharos_connections_open", "TCP, TLS, HTTPS and QUIC connections open", None, MetricType::Gauge, open)?;
        let shed = [(vec![], counter(connections.shed))];
        let help = "Connections closed to make room for others or for being idle";
        family(encoder, "pharos_connections_shed", help, None, MetricType::Counter, shed)?;
        let handshakes = self.handshakes.iter().flat_map(|counted| {
            let labels = |kind: &str| vec![("transport", counted.over.name().to_string()), ("kind", kind.to_string())];
            [(labels("full"), counter(counted.full)), (labels("resumed"), counter(counted.resumed))]
        });
        let help = "TLS handshakes completed, full or resuming a session (QUIC: as its ticket key accepted tickets)";
        family(encoder, "pharos_tls_handshakes", help, None, MetricType::Counter, handshakes)?;
        let refused = self.proxy_refusals.iter().map(|&(mechanism, refusal, count)| {
            (vec![("transport", mechanism.name().to_string()), ("reason", refusal.name().to_string())], counter(count))
        });
        let help = "Datagrams and connections refused for a PROXY protocol header from a source not in server.proxy_protocol_from (unexpected), its absence from one that is (missing), or a malformed one";
        family(encoder, "pharos_proxy_refused", help, None, MetricType::Counter, refused)?;
        let dropped = [(vec![], counter(self.dnstap_dropped))];
        let help = "Sampled queries the dnstap log dropped: its writer was behind, or had no reader";
        family(encoder, "pharos_dnstap_dropped", help, None, MetricType::Counter, dropped)
    }

    fn encode_health(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let labels = |health: &ReplicaHealth| replica_labels(&health.service, &health.replica).to_vec();
        let up = self.health.iter().map(|health| (labels(health), gauge(i64::from(health.up))));
        family(encoder, "pharos_replica_up", "Probed replicas: 1 up, 0 down", None, MetricType::Gauge, up)?;
        let since = self.health.iter().map(|health| (labels(health), gauge(health.since as i64)));
        let help = "When each probed replica entered its state, Unix seconds";
        family(encoder, "pharos_replica_state_since_timestamp", help, Some(&Unit::Seconds), MetricType::Gauge, since)
    }

    fn encode_fastpath(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let status = &self.fastpath;
        let entries = [(vec![], gauge(status.entries as i64))];
        family(encoder, "pharos_fastpath_entries", "Answers the kernel fast path holds", None, MetricType::Gauge, entries)?;
        let capacity = [(vec![], gauge(i64::from(status.capacity)))];
        family(encoder, "pharos_fastpath_capacity", "Answers the kernel fast path can hold", None, MetricType::Gauge, capacity)?;
        let totals = status.totals;
        let changes = [("installed", totals.installed), ("updated", totals.updated), ("removed", totals.removed)];
        let changes = changes.map(|(change, count)| (vec![("change", change.to_string())], counter(count as u64)));
        family(encoder, "pharos_fastpath_changes", "Fast-path entries changed by syncs", None, MetricType::Counter, changes)?;
        let traffic: Vec<_> =
            status.interfaces.iter().filter_map(|interface| Some((&interface.name, interface.traffic.as_ref()?))).collect();
        let by_interface = |outcome: &str, count: u64, interface: &String| {
            (vec![("interface", interface.clone()), ("outcome", outcome.to_string())], counter(count))
        };
        let packets = traffic.iter().flat_map(|&(interface, traffic)| {
            let misses = &traffic.misses;
            [
                ("answered_static", traffic.answered_static),
                ("answered_routed", traffic.answered_routed),
                ("rate_limited_passed", traffic.rate_limited_passed),
                ("rate_limited_dropped", traffic.rate_limited_dropped),
                ("rrl_slipped", traffic.rrl_slipped),
                ("rrl_dropped", traffic.rrl_dropped),
                ("miss_no_entry", misses.no_entry),
                ("miss_too_large", misses.too_large),
                ("miss_edns_unsupported", misses.edns_unsupported),
                ("miss_not_a_plain_query", misses.not_a_plain_query),
                ("miss_fragment_or_options", misses.fragment_or_options),
                ("miss_adjust_tail_failed", misses.adjust_tail_failed),
                ("miss_suspended", misses.suspended),
                ("miss_bad_checksum", misses.bad_checksum),
            ]
            .map(|(outcome, count)| by_interface(outcome, count, interface))
        });
        let help = "DNS packets the kernel fast path saw, by interface and what it did: answered, rate-limited or missed (and why)";
        family(encoder, "pharos_fastpath_packets", help, None, MetricType::Counter, packets)
    }

    fn encode_rrl(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let Some(counters) = self.rrl else { return Ok(()) };
        let limited = [("slipped", counters.slipped), ("dropped", counters.dropped)]
            .map(|(action, count)| (vec![("action", action.to_string())], counter(count)));
        let help = "UDP responses over their response rate limit ([rrl]), by what was done: sent empty with TC=1, or dropped";
        family(encoder, "pharos_rrl_limited", help, None, MetricType::Counter, limited)
    }

    fn encode_splits(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let share_labels = |split: &Split, share: &ReplicaShare| {
            vec![("service", split.service.clone()), ("region", split.region.clone()), ("replica", share.replica.clone())]
        };
        let shares = || self.splits.splits.iter().flat_map(|split| split.replicas.iter().map(move |share| (split, share)));
        let realized = shares().map(|(split, share)| (share_labels(split, share), ConstGauge::new(share.realized)));
        let help = "Share of first answers each replica got over the sliding window, per service and client region";
        family(encoder, "pharos_split_realized_share", help, None, MetricType::Gauge, realized)?;
        let configured = shares().filter_map(|(split, share)| Some((share_labels(split, share), ConstGauge::new(share.configured?))));
        let help = "Share of first answers the policy gives each replica (probabilities or weights)";
        family(encoder, "pharos_split_configured_share", help, None, MetricType::Gauge, configured)?;
        let distances = self.splits.splits.iter().filter_map(|split| {
            let labels = vec![("service", split.service.clone()), ("region", split.region.clone())];
            Some((labels, ConstGauge::new(split.total_variation?)))
        });
        let help = "Total variation distance between the realized and the configured split";
        family(encoder, "pharos_split_total_variation", help, None, MetricType::Gauge, distances)?;
        let cached = shares().filter_map(|(split, share)| Some((share_labels(split, share), ConstGauge::new(share.cached?))));
        let help = "Share of resolvers' cache time each replica holds, every resolver weighing the same ([metrics] resolver_view)";
        family(encoder, "pharos_split_cached_share", help, None, MetricType::Gauge, cached)?;
        let views = || self.splits.splits.iter().filter_map(|split| Some((split, split.resolvers.as_ref()?)));
        let labels = |split: &Split| vec![("service", split.service.clone()), ("region", split.region.clone())];
        let skews = views().map(|(split, view)| (labels(split), ConstGauge::new(view.caching_skew)));
        let help = "Total variation distance between the realized split and the resolvers' cached one";
        family(encoder, "pharos_split_caching_skew", help, None, MetricType::Gauge, skews)?;
        let tops = views().map(|(split, view)| (labels(split), ConstGauge::new(view.top_resolver_share)));
        let help = "Share of the window's answers the busiest resolver got";
        family(encoder, "pharos_split_top_resolver_share", help, None, MetricType::Gauge, tops)?;
        let resolvers = views().map(|(split, view)| (labels(split), gauge(view.resolvers as i64)));
        family(encoder, "pharos_split_resolvers", "Distinct resolvers answered in the window", None, MetricType::Gauge, resolvers)?;
        let splits = &self.splits;
        let untallied = [("slot_taken", splits.untallied_answers), ("window_full", splits.over_cap_answers)]
            .into_iter()
            .filter_map(|(reason, count)| Some((vec![("reason", reason.to_string())], counter(count?))));
        let help = "Routed answers the resolver view did not tally: their resolver's slot in a thread was taken (or it had a fifth \
                    first replica), or the window held its cap of (service, region, resolver) entries";
        family(encoder, "pharos_split_untallied_answers", help, None, MetricType::Counter, untallied)?;
        let kept = splits.window_resolvers.map(|kept| (vec![], gauge(kept as i64)));
        let help = format!("(service, region, resolver) entries the resolver view's window holds, at most {MAX_RESOLVERS}");
        family(encoder, "pharos_split_window_resolvers", &help, None, MetricType::Gauge, kept)?;
        let window = [(vec![], ConstGauge::new(self.splits.window_seconds))];
        family(encoder, "pharos_split_window", "Span the realized split was measured over", Some(&Unit::Seconds), MetricType::Gauge, window)
    }

    fn encode_data(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let bgp = self.data.bgp.loaded.iter().map(|loaded| (vec![], gauge(self.now.saturating_sub(loaded.loaded_at) as i64)));
        let help = "Age of the BGP table serving now";
        family(encoder, "pharos_bgp_table_age", help, Some(&Unit::Seconds), MetricType::Gauge, bgp)?;
        let made = |file: &Option<DataFile>| {
            file.iter().map(|file| (vec![], gauge(self.now.saturating_sub(file.made_at) as i64))).collect::<Vec<_>>()
        };
        let help = "Age of the MaxMind DB in use, from its build time";
        family(encoder, "pharos_geo_database_age", help, Some(&Unit::Seconds), MetricType::Gauge, made(&self.data.geo))?;
        let help = "Age of the IP-to-AS table in use, from its file's modification time";
        family(encoder, "pharos_asn_table_age", help, Some(&Unit::Seconds), MetricType::Gauge, made(&self.data.asn_table))?;
        let oldest = self.data.latency.oldest_age(self.now).map(|age| (vec![], gauge(age as i64)));
        let help = "Age of the oldest latency measurement in use";
        family(encoder, "pharos_latency_oldest_measurement_age", help, Some(&Unit::Seconds), MetricType::Gauge, oldest)?;
        let measurements = [(vec![], gauge(self.data.latency.measurements as i64))];
        let help = "Fresh latency measurements in use";
        family(encoder, "pharos_latency_measurements", help, None, MetricType::Gauge, measurements)?;
        let persistent = [(vec![], gauge(i64::from(self.store_persistent)))];
        let help = "1 when the state is kept in a file (SQLite) or a database (PostgreSQL), 0 when in memory only";
        family(encoder, "pharos_store_persistent", help, None, MetricType::Gauge, persistent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_format_names_counters_by_their_samples_and_drops_what_it_lacks() {
        let openmetrics = "# HELP a_things Things.\n# TYPE a_things counter\n# UNIT a_things things\na_things_total{x=\"1\"} 3\n\
                           # HELP b_seconds Time.\n# TYPE b_seconds gauge\nb_seconds 2\n# EOF\n";
        let text = "# HELP a_things_total Things.\n# TYPE a_things_total counter\na_things_total{x=\"1\"} 3\n\
                    # HELP b_seconds Time.\n# TYPE b_seconds gauge\nb_seconds 2\n";
        assert_eq!(to_text_format(openmetrics), text);
    }
}
