//! Time to live: values that expire.
//!
//! A field marked `#[dynatree(ttl)]` holds when the value expires. On every write, dynatree
//! copies it (as seconds since the Unix epoch) into the bookkeeping attribute `SC ttl` of the
//! object row (`¦ttl` with the default reserved character): one attribute name for every type of
//! the table, which is what DynamoDB's time to live needs (one attribute per table), and which
//! the Go library ignores. [`TreeBuilder::time_to_live`](crate::TreeBuilder::time_to_live) makes
//! [`Tree::create_table`](crate::Tree::create_table) enable DynamoDB's TTL on it.
//!
//! What happens when a value expires:
//!
//! - **Reads never return it.** DynamoDB deletes expired items in the background, usually
//!   within days, and until then they are still read; dynatree's reads (get, get_many, lists of
//!   values, queries, index queries, descendants) skip object rows whose expiry has passed, by
//!   the clock of the reading machine.
//! - **Conditions see it as absent, too.** For a type with a `#[dynatree(ttl)]` field, the
//!   conditions of `create`, `update`, `put_if`, `delete_if`, `patch` and of a transaction's
//!   actions are evaluated against "nothing stored" when the value has expired: a session can be
//!   created again at the path of an expired one, and an expired value is not patched
//!   (`NotFound`). One exception: a transaction with an idempotency token compares as DynamoDB
//!   stores it (the resent request must be identical, and the time of the check would differ).
//! - **DynamoDB deletes the object row only.** It knows nothing of the tree, so the listing row
//!   that names the value stays behind: a name without an object, like an emptied directory.
//!   Names (`list`) still show it until it is cleaned up, and the invariants still hold (a
//!   listing row without its object is allowed; an object without its listing row would not be,
//!   and expiry never makes one).
//! - **Cleaning up.** [`Tree::sweep_expired`](crate::Tree::sweep_expired) walks a subtree and
//!   removes, by the guarded removal every delete uses, the expired objects and the listing rows
//!   that then name nothing; run it on a schedule if names matter. A later put at the same path
//!   reuses the listing row. The integrity checker planned for the command line reports such rows
//!   as "leftovers of TTL expiry".
//!
//! # Examples
//!
//! ```
//! use dynatree::{Hierarchical, Tree};
//! use dynatree_testing::FakeTable;
//! use futures::TryStreamExt;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
//! #[dynatree(path = "Sessions/{id}")]
//! struct Session { id: String, #[dynatree(ttl)] expires: u64 }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
//! let table = FakeTable::new();
//! let tree = Tree::builder(table.clone()).time_to_live(true).build()?;
//! tree.create_table().await?;
//! let sessions = tree.repo::<Session>();
//! sessions.put(&Session { id: "old".into(), expires: 1_000 }).await?; // 1970
//! sessions.put(&Session { id: "new".into(), expires: 4_000_000_000 }).await?; // 2096
//!
//! // Expired but not yet deleted by DynamoDB: not returned.
//! assert_eq!(sessions.get(&SessionKey { id: "old".into() }).await?, None);
//! assert!(sessions.get(&SessionKey { id: "new".into() }).await?.is_some());
//!
//! // DynamoDB deletes the object row; the sweep removes the name left behind.
//! table.expire_ttl(2_000);
//! let names: Vec<String> = tree.list(["Sessions"]).try_collect().await?;
//! assert_eq!(names, ["new", "old"]);
//! tree.sweep_expired(["Sessions"]).await?;
//! let names: Vec<String> = tree.list(["Sessions"]).try_collect().await?;
//! assert_eq!(names, ["new"]);
//! # Ok(()) }
//! ```

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

/// A type a `#[dynatree(ttl)]` field can have: when the value expires, in seconds since the
/// Unix epoch (`None`: never). Implemented for unsigned and signed integers of seconds (a
/// negative one is long expired), [`SystemTime`], and `Option`s of them.
///
/// # Examples
///
/// ```
/// use dynatree::Expiry;
/// use std::time::{Duration, UNIX_EPOCH};
///
/// assert_eq!(1_700_000_000u64.expires_at(), Some(1_700_000_000));
/// assert_eq!((UNIX_EPOCH + Duration::from_secs(5)).expires_at(), Some(5));
/// assert_eq!(None::<u64>.expires_at(), None);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a `#[dynatree(ttl)]` field",
    note = "use seconds since the Unix epoch (`u64`, `i64`, ...), a `std::time::SystemTime`, or an `Option` of one"
)]
pub trait Expiry {
    /// When the value expires, in seconds since the Unix epoch.
    fn expires_at(&self) -> Option<u64>;
}

macro_rules! unsigned {
    ($($t:ty),*) => {$(
        impl Expiry for $t {
            fn expires_at(&self) -> Option<u64> {
                u64::try_from(*self).ok()
            }
        }
    )*};
}
unsigned!(u32, u64, u128, usize);

macro_rules! signed {
    ($($t:ty),*) => {$(
        impl Expiry for $t {
            fn expires_at(&self) -> Option<u64> {
                Some(u64::try_from(*self).unwrap_or(0))
            }
        }
    )*};
}
signed!(i32, i64, i128, isize);

impl Expiry for SystemTime {
    fn expires_at(&self) -> Option<u64> {
        Some(self.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()))
    }
}

impl<T: Expiry> Expiry for Option<T> {
    fn expires_at(&self) -> Option<u64> {
        self.as_ref().and_then(Expiry::expires_at)
    }
}

/// Seconds since the Unix epoch now, by this machine's clock.
pub(crate) fn now_secs() -> u64 {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    skewed(ms) / 1000
}

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
