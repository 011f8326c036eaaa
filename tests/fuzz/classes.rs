//! A run of the fuzzer: queries generated in batches, every difference
//! sorted into a class (its signature: who differs, over what transport,
//! in which field, and coarse words about the smallest query that still
//! shows it), one reproduction per class, and the report.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use super::bench::Bench;
use super::generate::Generator;
use super::names::NamePool;
use super::query::{FuzzQuery, Target, hex};
use super::verdict::{Finding, PHAROS};
use crate::support::compare::Mismatch;
use crate::support::wire::Transport;

/// Queries generated and sent at once.
const BATCH: usize = 256;
/// Classes that implicate Pharos and no deviation explains, shrunk per
/// server and field; past them a finding not covered by a class goes
/// unshrunk into a class of its own query's features (marked `OVERFLOW`),
/// so that the time a run spends shrinking stays bounded when something is
/// badly wrong. Explained classes do not count: a field with many listed
/// deviations still gets its new differences made small. Differences
/// between the references alone are never shrunk (they never fail a run).
const MAX_SHRUNK_PER_FIELD: usize = 8;
const OVERFLOW: &str = "(more, not shrunk)";
const T_A: u16 = 1;

/// A class of difference the RFCs allow, or a reference's known fault,
/// matched narrowly: the same attribution, field and transport, and every
/// listed query feature present in the class's signature.
pub struct Deviation {
    /// The configuration it is about (a test's name), or "*".
    pub config: &'static str,
    pub attribution: &'static str,
    pub field: &'static str,
    pub transport: Option<Transport>,
    pub features: &'static [&'static str],
    pub why: &'static str,
}

impl Deviation {
    pub fn matches(&self, config: &str, class: &Class) -> bool {
        self.bears_on(config, class)
            && (self.attribution == class.attribution || self.is_one_of_the_pair(&class.attribution))
            && self.field == class.field
            && self.transport.is_none_or(|t| class.transports.iter().all(|c| *c == t))
    }

    /// A server listed as the odd one out, in a class of a pair of servers
    /// (the third's reply was not compared: rate-limited, or unreadable),
    /// is as odd in the pair.
    fn is_one_of_the_pair(&self, attribution: &str) -> bool {
        let pair = attribution.split_once('≠').filter(|_| !attribution.contains(','));
        pair.is_some_and(|(left, right)| [left, right].iter().any(|server| self.attribution == format!("odd={server}")))
    }

    /// Of `config`, and every listed feature one of the class's query.
    fn bears_on(&self, config: &str, class: &Class) -> bool {
        (self.config == "*" || self.config == config) && self.features.iter().all(|f| class.features.iter().any(|c| c == f))
    }

    /// Whether this lets Pharos answer the class's query with an RCODE of
    /// its own (or none): the rest of its reply follows from it.
    fn is_rcode_choice_of_pharos(&self, config: &str, class: &Class) -> bool {
        let pharos_apart = pharos_apart_from_all(self.attribution)
            || self.attribution == format!("rule:{PHAROS}")
            || self.attribution.starts_with(&format!("{PHAROS}≠"));
        self.bears_on(config, class) && pharos_apart && ["rcode", "reply"].contains(&self.field) && !self.features.is_empty()
    }

    /// Whether this is a fault of `reference` that changes its whole reply
    /// or the class's own field, and that the class's query has every
    /// feature of.
    fn is_fault_of(&self, reference: &str, config: &str, class: &Class) -> bool {
        let attributions = [format!("odd={reference}"), format!("rule:{reference}")];
        self.bears_on(config, class)
            && attributions.iter().any(|a| a == self.attribution)
            && (WHOLE_REPLY_FIELDS.contains(&self.field) || self.field == class.field)
            && !self.features.is_empty()
    }
}

/// One class of difference.
pub struct Class {
    pub attribution: String,
    /// The transports it showed over.
    pub transports: BTreeSet<Transport>,
    pub field: String,
    /// Features of the reproduction.
    pub features: Vec<String>,
    /// Queries of the run that showed it.
    pub count: usize,
    /// The smallest query found that shows it, and over which transport.
    pub reproduction: FuzzQuery,
    pub transport: Transport,
    pub details: Vec<Mismatch>,
    /// See `Finding::implicates_pharos`.
    pub implicates_pharos: bool,
}

impl Class {
    pub fn signature(&self) -> String {
        format!("{} field={} | {}", self.attribution, self.field, self.features.join(" "))
    }

    /// Whether a finding for query `q` is taken to be of this class
    /// without shrinking it: the same server and field, and the query has
    /// every feature of this class's smallest query, but for its type when
    /// that is A (the shrinker asks for A when the type does not matter)
    /// and the query has a question.
    fn covers(&self, finding: &Finding, features: &[String]) -> bool {
        let is_type = |f: &String| f.starts_with("qtype=");
        let any_type = self.reproduction.questions.first().is_some_and(|q| q.qtype == T_A) && features.iter().any(is_type);
        self.attribution == finding.attribution
            && self.field == finding.field
            && self.features.iter().all(|f| features.contains(f) || (any_type && is_type(f)))
    }
}

/// What a run found.
pub struct Run {
    pub queries: usize,
    pub elapsed: Duration,
    pub classes: BTreeMap<String, Class>,
    /// Differences that did not show again when their query was sent apart.
    pub unrepeatable: usize,
    /// Differences made smaller (each a few rounds of queries sent apart),
    /// and the time that took.
    pub shrinks: usize,
    pub shrinking: Duration,
}

/// Findings sorted into classes as they come.
struct Sorter<'e> {
    /// The names of the run, for the features of a query's name.
    pool: &'e NamePool,
    /// Whether a deviation explains a class.
    explained: &'e dyn Fn(&Class) -> bool,
    classes: BTreeMap<String, Class>,
    /// The class each finding made smaller fell in, by what the query that
    /// showed it looked like (`memo_key`): the same finding on a query of
    /// the same features falls in it without being made smaller again.
    memo: HashMap<String, String>,
    /// Findings whose query did not show them again: not tried twice.
    unrepeated: BTreeSet<String>,
    unrepeatable: usize,
    shrinks: usize,
    shrinking: Duration,
}

fn memo_key(finding: &Finding, features: &[String]) -> String {
    format!("{} {} {} | {}", finding.attribution, finding.transport, finding.field, features.join(" "))
}

impl<'e> Sorter<'e> {
    fn new(explained: &'e dyn Fn(&Class) -> bool, pool: &'e NamePool) -> Self {
        Sorter {
            pool,
            explained,
            classes: BTreeMap::new(),
            memo: HashMap::new(),
            unrepeated: BTreeSet::new(),
            unrepeatable: 0,
            shrinks: 0,
            shrinking: Duration::ZERO,
        }
    }

    /// Counts `finding` (of query `q`) in its class.
    fn sort(&mut self, bench: &Bench, q: &FuzzQuery, finding: Finding) {
        let key = format!("{} {} {} {:?}", finding.attribution, finding.transport, finding.field, q);
        let transport = finding.transport;
        let class = if self.unrepeated.contains(&key) { None } else { self.classify(bench, q, finding) };
        match class {
            Some(signature) => {
                let class = self.classes.get_mut(&signature).unwrap();
                class.count += 1;
                class.transports.insert(transport);
            }
            None => {
                self.unrepeated.insert(key);
                self.unrepeatable += 1;
            }
        }
    }

    /// The class a finding falls in: the most specific known class covering
    /// it, else the class of its query made as small as it goes (None: the
    /// difference did not show again).
    fn classify(&mut self, bench: &Bench, q: &FuzzQuery, finding: Finding) -> Option<String> {
        let features = self.features(q);
        let known = self.classes.values().filter(|c| c.covers(&finding, &features)).max_by_key(|c| c.features.len());
        if let Some(class) = known {
            return Some(class.signature());
        }
        let key = memo_key(&finding, &features);
        if let Some(signature) = self.memo.get(&key) {
            return Some(signature.clone());
        }
        let open_in_field = self
            .classes
            .values()
            .filter(|c| c.attribution == finding.attribution && c.field == finding.field && c.implicates_pharos && !(self.explained)(c))
            .count();
        if !finding.implicates_pharos || open_in_field >= MAX_SHRUNK_PER_FIELD {
            return Some(overflow(&mut self.classes, q, finding, features));
        }
        let started = Instant::now();
        let shrunk = bench.shrink(q, &finding);
        self.shrinks += 1;
        self.shrinking += started.elapsed();
        let (smallest, found) = shrunk?;
        let class = Class {
            attribution: found.attribution.clone(),
            transports: BTreeSet::new(),
            field: found.field.clone(),
            features: self.features(&smallest),
            count: 0,
            reproduction: smallest,
            transport: found.transport,
            details: found.details,
            implicates_pharos: found.implicates_pharos,
        };
        let signature = class.signature();
        self.classes.entry(signature.clone()).or_insert(class);
        self.memo.insert(key, signature.clone());
        Some(signature)
    }

    /// The query's features, and what its name is where that matters to
    /// a listed deviation: below a DNAME, or a CNAME.
    fn features(&self, q: &FuzzQuery) -> Vec<String> {
        let mut features = q.features();
        if let Some(question) = q.questions.first() {
            if self.pool.is_below_dname(&question.labels) {
                features.push("qname=below-DNAME".into());
            }
            if self.pool.is_cname(&question.labels) {
                features.push("qname=CNAME".into());
            }
            features.sort();
        }
        features
    }
}

/// The class of a finding left unshrunk because it is between the
/// references alone, or its server and field already have
/// `MAX_SHRUNK_PER_FIELD` unexplained classes: the features of
/// its query as generated (so a deviation can still match it), its
/// reproduction the first such query.
fn overflow(classes: &mut BTreeMap<String, Class>, q: &FuzzQuery, finding: Finding, features: Vec<String>) -> String {
    let class = Class {
        attribution: finding.attribution.clone(),
        transports: BTreeSet::new(),
        field: finding.field.clone(),
        features: std::iter::once(OVERFLOW.to_string()).chain(features).collect(),
        count: 0,
        reproduction: q.clone(),
        transport: finding.transport,
        implicates_pharos: finding.implicates_pharos,
        details: finding.details,
    };
    let signature = class.signature();
    classes.entry(signature.clone()).or_insert(class);
    signature
}

/// Generates and judges `count` queries, or as many as `budget` leaves
/// time for (whole batches: the run is a prefix of the seed's sequence);
/// `explained` says whether a deviation explains a class.
pub fn run(bench: &mut Bench, generator: &mut Generator, count: usize, budget: Duration, explained: &dyn Fn(&Class) -> bool) -> Run {
    let started = Instant::now();
    let mut sorter = Sorter::new(explained, generator.pool());
    let mut done = 0;
    while done < count && started.elapsed() < budget {
        let n = BATCH.min(count - done);
        let queries: Vec<FuzzQuery> = (0..n).map(|_| generator.next_query()).collect();
        bench.renew_cookies();
        let replies = bench.send(&queries, done as u16);
        for (q, sides) in queries.iter().zip(replies) {
            for finding in super::verdict::judge(q, &sides, &bench.zones) {
                sorter.sort(bench, q, finding);
            }
        }
        done += n;
        if std::env::var_os("PHAROS_FUZZ_PROGRESS").is_some() && (done / BATCH).is_multiple_of(8) {
            eprintln!(
                "  {done} queries, {} classes, {:.0?} ({} shrinks took {:.0?})",
                sorter.classes.len(),
                started.elapsed(),
                sorter.shrinks,
                sorter.shrinking
            );
        }
    }
    Run {
        queries: done,
        elapsed: started.elapsed(),
        classes: sorter.classes,
        unrepeatable: sorter.unrepeatable,
        shrinks: sorter.shrinks,
        shrinking: sorter.shrinking,
    }
}

/// The report of one class: signature, count, reproduction in words, hex
/// and as a dig command, and what differed.
pub fn describe_class(class: &Class, bench: &Bench, why: Option<&str>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "--- {}", class.signature());
    let transports: Vec<String> = class.transports.iter().map(|t| t.to_string()).collect();
    let _ = writeln!(out, "    {} of the run's queries, over {}", class.count, transports.join(" and "));
    if let Some(why) = why {
        let _ = writeln!(out, "    known: {why}");
    }
    let q = &class.reproduction;
    let _ = writeln!(out, "    query: {}", q.describe());
    let packet = q.encode(&Target { id: 0x5152, good_cookie: None });
    let _ = writeln!(out, "    hex:   {}", hex(&packet));
    let pharos = bench.addr("pharos");
    match q.dig_command(pharos) {
        Some(cmd) => {
            let _ = writeln!(out, "    dig:   {cmd}{}", if class.transport == Transport::Tcp { " +tcp" } else { "" });
        }
        None => {
            let nc = if class.transport == Transport::Udp { "-u " } else { "" };
            let frame = if class.transport == Transport::Tcp { format!("{:04x}", packet.len()) } else { String::new() };
            let _ = writeln!(out, "    send:  echo {frame}{} | xxd -r -p | nc {nc}-w1 {} {}", hex(&packet), pharos.ip(), pharos.port());
        }
    }
    for m in class.details.iter().take(6) {
        let _ = writeln!(out, "    [{}] {}\n        {}\n        {}", m.transport, m.field, m.left, m.right);
    }
    out
}

/// The fields in which a reference's fault changes its whole reply: its
/// RCODE, whether it replies and can be read, whether it has an OPT record.
const WHOLE_REPLY_FIELDS: [&str; 4] = ["reply", "parse", "rcode", "edns"];

/// Why a class is no fault of Pharos's.
pub enum Explanation {
    /// The deviation of this index in the list.
    Listed(usize),
    /// Every reference differs from Pharos by a listed fault of its own
    /// that changes its whole reply or the very field that differs (a query cut short by one and carrying
    /// a header RCODE for the other, say): Pharos, which has neither
    /// fault, agrees with no reference, and nothing is left to compare.
    ReferencesAtFault,
    /// A listed deviation lets Pharos answer this query with an RCODE of
    /// its own (a FORMERR to an option the references ignore, say): what
    /// else differs follows from it.
    PharosRcodeChosen,
}

const PHAROS_RCODE_CHOSEN: &str = "a listed deviation above lets Pharos answer this query with an RCODE of its \
    own (the deviations with these features); what else differs follows from that RCODE";
const REFERENCES_AT_FAULT: &str = "each reference answers this query by a listed fault of its own that changes \
    its whole reply or this field (the deviations above with these features); Pharos has neither fault";

/// Why a class of `config` is explained, if it is: a listed deviation, or
/// (where Pharos is the odd one out, all three differ, or Pharos differs
/// from the one reference whose reply was compared) every reference it is
/// apart from at fault.
pub fn explain(deviations: &[Deviation], references: &[&str], config: &str, class: &Class) -> Option<Explanation> {
    if let Some(index) = deviations.iter().position(|d| d.matches(config, class)) {
        return Some(Explanation::Listed(index));
    }
    // The references Pharos is apart from: all of them when it is the odd
    // one out or all differ, or the one of a pair when the other's reply was
    // not compared (or the configuration has one reference).
    let apart_from: Vec<&str> = if pharos_apart_from_all(&class.attribution) {
        references.to_vec()
    } else {
        references.iter().copied().filter(|r| class.attribution == format!("{PHAROS}≠{r}")).collect()
    };
    let at_fault = |reference: &&str| deviations.iter().any(|d| d.is_fault_of(reference, config, class));
    if !apart_from.is_empty() && apart_from.iter().all(at_fault) {
        return Some(Explanation::ReferencesAtFault);
    }
    // Not for the RCODE itself, nor for a rule Pharos breaks alone: only
    // for what follows from an RCODE a deviation allows.
    let follows_from_rcode = !class.attribution.starts_with("rule:") && !["rcode", "reply"].contains(&class.field.as_str());
    (follows_from_rcode && deviations.iter().any(|d| d.is_rcode_choice_of_pharos(config, class))).then_some(Explanation::PharosRcodeChosen)
}

/// Whether `attribution` puts Pharos apart from every reference: the odd
/// one out, or all three servers differing.
fn pharos_apart_from_all(attribution: &str) -> bool {
    attribution == format!("odd={PHAROS}") || attribution.split(',').count() == 3
}

/// Prints the run; returns the signatures of the classes that implicate
/// Pharos (see `Finding::implicates_pharos`) and no deviation explains
/// (those where Pharos agrees with a reference are printed apart). Deviations of `config` that matched nothing are reported as
/// stale.
pub fn report(config: &str, seed: u64, run: &Run, bench: &Bench, deviations: &[Deviation], references: &[&str]) -> Vec<String> {
    let mut used = vec![0usize; deviations.len()];
    let mut text = format!(
        "\n===== differential fuzz, {config} (seed {seed}): {} queries in {:.1?} ({:.0}/s), {} classes, {} differences \
         that did not repeat, {} made smaller in {:.1?} =====\n",
        run.queries,
        run.elapsed,
        run.queries as f64 / run.elapsed.as_secs_f64(),
        run.classes.len(),
        run.unrepeatable,
        run.shrinks,
        run.shrinking
    );
    let mut unexplained = Vec::new();
    let mut known = String::new();
    let mut untriaged = String::new();
    let mut untriaged_references = 0;
    for (signature, class) in &run.classes {
        match explain(deviations, references, config, class) {
            Some(Explanation::Listed(i)) => {
                used[i] += class.count;
                known.push_str(&describe_class(class, bench, Some(deviations[i].why)));
            }
            Some(Explanation::ReferencesAtFault) => known.push_str(&describe_class(class, bench, Some(REFERENCES_AT_FAULT))),
            Some(Explanation::PharosRcodeChosen) => known.push_str(&describe_class(class, bench, Some(PHAROS_RCODE_CHOSEN))),
            None if class.implicates_pharos => {
                unexplained.push(signature.clone());
                text.push_str(&describe_class(class, bench, None));
            }
            None => {
                untriaged_references += 1;
                untriaged.push_str(&describe_class(class, bench, None));
            }
        }
    }
    let _ = writeln!(
        text,
        "\n{} classes implicate Pharos unexplained (above); {untriaged_references} classes where Pharos agrees with a \
         reference or the RFC but the references differ, not yet in the list:",
        unexplained.len()
    );
    text.push_str(&untriaged);
    let _ = writeln!(text, "\nknown deviations:");
    text.push_str(&known);
    for (d, n) in deviations.iter().zip(&used) {
        if d.config == config && *n == 0 {
            let _ = writeln!(text, "STALE? known deviation matched nothing in this run: {} {} {:?}", d.attribution, d.field, d.features);
        }
    }
    eprintln!("{text}");
    if let Some(path) = std::env::var_os("PHAROS_FUZZ_REPORT") {
        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
        file.write_all(text.as_bytes()).unwrap();
    }
    unexplained
}
