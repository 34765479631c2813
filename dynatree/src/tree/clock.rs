//! Wall-clock milliseconds for leases, read through tokio's clock.
//!
//! Leases (removal marks, intent owners) are stored in the table and compared by other
//! processes, so they are wall-clock times. They are computed as the wall clock at the first
//! call plus the time elapsed since on tokio's clock: the same as the system clock in a normal
//! runtime, and virtual (deterministic, instantly advanced) in a runtime with paused time,
//! which is how the interleaving simulator of `dynatree-testing` explores lease expiry.

use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
    crate::expiry::skewed(
        wall.saturating_add(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)),
    )
}

/// `now + d` in milliseconds, saturating.
pub(crate) fn after_ms(d: Duration) -> u64 {
    now_ms().saturating_add(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
