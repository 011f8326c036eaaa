//! What the control plane holds for the resolver view, counted by the
//! allocator: 12,000 resolvers that ask all the time, and a million of
//! which each drain sees a seeded sample, drained 20 times into one
//! window (a scrape every 15 s for 5 minutes). The only test of this
//! binary, so that nothing else allocates while it counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

use pharos_model::State;
use pharos_server::observe::split::SplitWindow;
use pharos_transport::metrics::resolvers::{ResolverAnswers, Resolvers};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The system allocator, counting the bytes held now and the most held.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call goes to the system allocator unchanged; only counts
// are kept beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let held = HELD.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(held, Ordering::Relaxed);
        // SAFETY: the caller's layout, as given.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: allocated by `alloc` above with this layout.
        unsafe { System.dealloc(pointer, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Readings in a window: a scrape every 15 s for 5 minutes.
const DRAINS: usize = 20;
/// Resolvers one drain can hold: 4 answering threads of 8,192 slots.
const DRAINED_AT_MOST: usize = 4 * 8192;

/// One drain of `resolvers`, each answered twice (fra, then sin) for one
/// service in one of 4 regions.
fn drain(resolvers: impl Iterator<Item = IpAddr>) -> Resolvers {
    let mut drained = Resolvers::default();
    for resolver in resolvers {
        let region = u32::from(matches!(resolver, IpAddr::V4(v4) if v4.octets()[3] % 4 == 0));
        let answers = ResolverAnswers { answers: 2, cached_seconds: [("fra".into(), 60), ("sin".into(), 60)].into() };
        drained.tally.entry(("svc.example.test.".into(), region)).or_default().insert(resolver, answers);
    }
    drained
}

/// Bytes the window holds after `DRAINS` readings of the drains `next`
/// makes, and the most a reading allocated beyond what it was handed (the
/// window so far and the drain).
fn held_by_window(mut next: impl FnMut() -> Resolvers) -> (usize, usize) {
    let state = State::default();
    let before = HELD.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let window = SplitWindow::default();
    let mut peak_beyond_drain = 0;
    for _ in 0..DRAINS {
        let drained = next();
        let with_drain = HELD.load(Ordering::Relaxed);
        PEAK.store(with_drain, Ordering::Relaxed);
        drop(window.measure(Default::default(), Some(drained), &state));
        peak_beyond_drain = peak_beyond_drain.max(PEAK.load(Ordering::Relaxed) - with_drain);
    }
    (HELD.load(Ordering::Relaxed) - before, peak_beyond_drain)
}

#[test]
fn the_window_holds_a_few_megabytes_whatever_the_resolvers() {
    let few: Vec<IpAddr> = (0..12_000u32).map(|number| IpAddr::from((0x0a00_0000 + number).to_be_bytes())).collect();
    let (few_held, few_peak) = held_by_window(|| drain(few.iter().copied()));
    let mut rng = SmallRng::seed_from_u64(17);
    let mut one_of_a_million = || IpAddr::from((0x0b00_0000 + rng.random_range(0..1_000_000u32)).to_be_bytes());
    let (many_held, many_peak) = held_by_window(|| drain((0..DRAINED_AT_MOST).map(|_| one_of_a_million())));
    let mib = |bytes: usize| bytes as f64 / (1 << 20) as f64;
    println!(
        "12,000 resolvers: {:.1} MiB held, {:.1} MiB more at a reading's peak; 1,000,000: {:.1} MiB held, {:.1} MiB more at a peak",
        mib(few_held),
        mib(few_peak),
        mib(many_held),
        mib(many_peak)
    );
    for (held, peak) in [(few_held, few_peak), (many_held, many_peak)] {
        assert!(held < 8 << 20 && peak < 8 << 20, "{held} B held, {peak} B more at a reading's peak");
    }
}
