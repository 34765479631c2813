//! Wall-clock milliseconds for leases, read through tokio's clock.
//!
//! Leases (removal marks, intent owners) are stored in the table and compared by other
//! processes, so they are wall-clock times. They are computed as the wall clock at the first
//! call plus the time elapsed since on tokio's clock: the same as the system clock in a normal
//! runtime, and virtual (deterministic, instantly advanced) in a runtime with paused time,
//! which is how the interleaving simulator of `dynatree-testing` explores lease expiry.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

thread_local! {
    /// Milliseconds this thread's clock is off by, while a simulated process with a skewed
    /// clock is polled (see `__private::with_clock_skew`); 0 otherwise.
    static SKEW_MS: Cell<i64> = const { Cell::new(0) };
}

/// Runs `f` with this thread's wall clock `skew_ms` milliseconds ahead (negative: behind).
pub(crate) fn with_skew<R>(skew_ms: i64, f: impl FnOnce() -> R) -> R {
    struct Restore(i64);
    impl Drop for Restore {
        fn drop(&mut self) {
            SKEW_MS.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(SKEW_MS.with(|c| c.replace(skew_ms)));
    f()
}

/// `ms` shifted by the skew of the simulated process being polled, saturating.
pub(crate) fn skewed(ms: u64) -> u64 {
    let skew = SKEW_MS.with(Cell::get);
    if skew >= 0 {
        ms.saturating_add(skew.unsigned_abs())
    } else {
        ms.saturating_sub(skew.unsigned_abs())
    }
}

/// Milliseconds since the Unix epoch, on tokio's clock.
pub(crate) fn now_ms() -> u64 {
    static BASE: OnceLock<(u64, Instant)> = OnceLock::new();
    let (wall, at) = *BASE.get_or_init(|| {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        (wall, Instant::now())
    });
    let elapsed = tokio::time::Instant::now()
        .into_std()
        .saturating_duration_since(at);
    skewed(wall.saturating_add(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)))
}

/// `now + d` in milliseconds, saturating.
pub(crate) fn after_ms(d: Duration) -> u64 {
    now_ms().saturating_add(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
