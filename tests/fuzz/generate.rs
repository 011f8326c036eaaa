//! Seeded generation of queries: a plain query for a name of the pool, then
//! a few oddities drawn independently, each rare enough that most queries
//! carry one or two and a difference can be traced to them.

use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

use super::names::{NameKind, NamePool};
use super::query::{EdnsOption, FuzzQuery, OPT_COOKIE, OPT_ECS, OPT_EDE, OPT_KEEPALIVE, OPT_NSID, OPT_PADDING, Opt, OptPlace, Question};
use super::tsig::MODES;

const DATA_TYPES: [u16; 16] = [1, 2, 5, 6, 12, 13, 15, 16, 28, 33, 35, 39, 44, 64, 65, 257];
const META_TYPES: [u16; 11] = [255, 252, 251, 41, 250, 249, 253, 254, 128, 0, 65535];
const DNSSEC_TYPES: [u16; 7] = [43, 46, 47, 48, 50, 51, 59];
const CLASSES: [u16; 7] = [3, 4, 254, 255, 2, 0, 1000];
const PAYLOADS: [u16; 7] = [0, 1, 511, 512, 1232, 4096, 65535];

pub struct Generator<'p> {
    rng: SmallRng,
    pool: &'p NamePool,
}

impl<'p> Generator<'p> {
    pub fn new(seed: u64, pool: &'p NamePool) -> Self {
        Generator { rng: SmallRng::seed_from_u64(seed), pool }
    }

    pub fn pool(&self) -> &'p NamePool {
        self.pool
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    pub fn next_query(&mut self) -> FuzzQuery {
        let (labels, types) = self.name();
        let qtype = self.qtype(&types);
        let mut q = FuzzQuery::plain(labels, qtype);
        if self.chance(0.06) {
            q.questions[0].qclass = *CLASSES.choose(&mut self.rng).unwrap();
        }
        self.header(&mut q);
        self.edns(&mut q);
        if self.chance(0.05) {
            q.tsig = Some(*MODES.choose(&mut self.rng).unwrap());
        }
        self.shape(&mut q);
        q
    }

    /// A name of the pool, perhaps with labels put in front, perhaps in
    /// mixed case; and the types it holds.
    fn name(&mut self) -> (Vec<Vec<u8>>, Vec<u16>) {
        let base = self.pool.names.choose(&mut self.rng).unwrap();
        let mut labels = base.labels.clone();
        let mut types = base.types.clone();
        if base.kind != NameKind::Outside && self.chance(0.2) {
            let label: Vec<u8> = match self.rng.random_range(0..4) {
                0 => b"*".to_vec(),
                1 => (0..self.rng.random_range(1..=63)).map(|_| self.rng.random_range(b'a'..=b'z')).collect(),
                2 => (0..self.rng.random_range(1..=8)).map(|_| self.rng.random::<u8>()).collect(),
                _ => b"www".to_vec(),
            };
            labels.insert(0, label);
            types.clear();
        }
        if self.chance(0.3) {
            for label in &mut labels {
                for c in label.iter_mut() {
                    if self.rng.random_bool(0.5) {
                        *c = c.to_ascii_uppercase();
                    }
                }
            }
        }
        // A name must fit in 255 octets.
        while labels.iter().map(|l| l.len() + 1).sum::<usize>() + 1 > 255 {
            labels.remove(0);
        }
        (labels, types)
    }

    fn qtype(&mut self, types: &[u16]) -> u16 {
        match self.rng.random_range(0..100) {
            0..45 if !types.is_empty() => *types.choose(&mut self.rng).unwrap(),
            0..70 => *DATA_TYPES.choose(&mut self.rng).unwrap(),
            70..82 => *META_TYPES.choose(&mut self.rng).unwrap(),
            82..92 => *DNSSEC_TYPES.choose(&mut self.rng).unwrap(),
            _ => self.rng.random_range(258..65280),
        }
    }

    fn header(&mut self, q: &mut FuzzQuery) {
        let h = &mut q.header;
        h.rd = self.rng.random_bool(0.3);
        let odd = 0.015;
        h.qr = self.rng.random_bool(odd);
        h.aa = self.rng.random_bool(odd);
        h.tc = self.rng.random_bool(odd);
        h.ra = self.rng.random_bool(odd);
        h.z = self.rng.random_bool(odd);
        h.ad = self.rng.random_bool(0.1);
        h.cd = self.rng.random_bool(0.1);
        if self.rng.random_bool(0.03) {
            h.opcode = self.rng.random_range(1..16);
        }
        if self.rng.random_bool(odd) {
            h.rcode = self.rng.random_range(1..16);
        }
    }

    fn edns(&mut self, q: &mut FuzzQuery) {
        if self.chance(0.15) {
            q.opt = None;
            return;
        }
        let mut opt = Opt::default();
        if self.chance(0.3) {
            opt.payload = *PAYLOADS.choose(&mut self.rng).unwrap();
        }
        opt.dnssec_ok = self.chance(0.3);
        if self.chance(0.03) {
            opt.version = *[1u8, 2, 255].choose(&mut self.rng).unwrap();
        }
        if self.chance(0.02) {
            opt.z = self.rng.random_range(1..0x8000);
        }
        if self.chance(0.02) {
            opt.ext_rcode = self.rng.random_range(1..=255);
        }
        if self.chance(0.01) {
            opt.owner = b"\x03www\x00".to_vec();
        }
        if self.chance(0.01) {
            opt.place = OptPlace::Answer;
        }
        if self.chance(0.01) {
            opt.twice = true;
        }
        let count = match self.rng.random_range(0..100) {
            0..55 => 0,
            55..85 => 1,
            85..95 => 2,
            _ => 3,
        };
        for _ in 0..count {
            let option = self.option();
            opt.options.push(option);
        }
        q.opt = Some(opt);
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.rng.random::<u8>()).collect()
    }

    fn option(&mut self) -> EdnsOption {
        let client: [u8; 8] = self.rng.random();
        match self.rng.random_range(0..20) {
            0..3 => EdnsOption::Raw(OPT_NSID, Vec::new()),
            3 => EdnsOption::Raw(OPT_NSID, self.bytes(4)),
            4 => EdnsOption::Raw(OPT_ECS, vec![0, 1, 24, 0, 198, 51, 100]),
            5 => EdnsOption::Raw(OPT_ECS, vec![0, 2, 56, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0]),
            6 => EdnsOption::Raw(OPT_ECS, vec![0, 1, 24, 16, 198, 51, 100]),
            7 => {
                let len = self.rng.random_range(0..8);
                EdnsOption::Raw(OPT_ECS, self.bytes(len))
            }
            8 => EdnsOption::Raw(OPT_ECS, vec![0, 9, 8, 0, 1]),
            9..11 => EdnsOption::Raw(OPT_COOKIE, client.to_vec()),
            11..13 => EdnsOption::GoodCookie,
            13 => EdnsOption::Raw(OPT_COOKIE, [&client[..], &[1, 0, 0, 0], &self.bytes(12)].concat()),
            14 => {
                let len = *[0usize, 1, 7, 9, 15, 16, 40, 41].choose(&mut self.rng).unwrap();
                EdnsOption::Raw(OPT_COOKIE, self.bytes(len))
            }
            15 => EdnsOption::Raw(OPT_PADDING, vec![0; self.rng.random_range(0..64)]),
            16 => {
                let len = if self.chance(0.5) { 0 } else { self.rng.random_range(1..4) };
                let data = self.bytes(len);
                EdnsOption::Raw(OPT_KEEPALIVE, data)
            }
            17 => EdnsOption::Raw(OPT_EDE, [&[0u8, 18][..], b"from a client"].concat()),
            18 => {
                let code = *[0u16, 4, 16, 20, 65001, 65535].choose(&mut self.rng).unwrap();
                let len = self.rng.random_range(0..6);
                EdnsOption::Raw(code, self.bytes(len))
            }
            _ => {
                let code = *[OPT_NSID, OPT_COOKIE, OPT_ECS, 65001].choose(&mut self.rng).unwrap();
                let len = self.rng.random_range(0..4);
                EdnsOption::LongerThanItIs(code, self.bytes(len), self.rng.random_range(1..=8))
            }
        }
    }

    /// Messages cut short or with garbage after them, other counts.
    fn shape(&mut self, q: &mut FuzzQuery) {
        if self.chance(0.02) {
            q.cut = self.rng.random_range(1..24);
        }
        if self.chance(0.02) {
            let len = self.rng.random_range(1..16);
            q.garbage = self.bytes(len);
        }
        if self.chance(0.01) {
            q.qdcount = Some(0);
            q.questions.clear();
        }
        if self.chance(0.01) {
            let (labels, _) = self.name();
            q.questions.push(Question { labels, qtype: 1, qclass: 1 });
        }
        if self.chance(0.01) {
            q.answer_record = true;
        }
        if self.chance(0.01) {
            q.authority_record = true;
        }
    }
}
