//! How the control plane's threads share cores with the ones answering
//! queries.
//!
//! A query thread at saturation never sleeps, so every time a control
//! thread woke for one API request it would preempt it at once: a context
//! switch both ways, and a query thread whose caches the request's work
//! has cooled. At 1,000 updates a second that cost the queries more than
//! the updates' own CPU time. Marked as batch work, a control thread still
//! gets its fair share of the core, but it waits for the query thread's
//! time slice to end instead of cutting it short, and then serves every
//! request that came meanwhile in one go.

/// Marks the calling thread as batch work (Linux SCHED_BATCH): it does not
/// preempt a running thread when it wakes. Allowed without privileges; if
/// the kernel refuses, the thread runs as before and a warning says so.
pub fn yield_to_queries() {
    let normal_priority = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; the parameter outlives the call.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &normal_priority) } != 0 {
        let error = std::io::Error::last_os_error();
        let thread = std::thread::current().name().unwrap_or("unnamed").to_owned();
        tracing::warn!(%error, thread, "cannot make this control thread yield to the query threads (SCHED_BATCH)");
    }
}
