//! Batch reads and writes of any size: chunked at DynamoDB's 100 / 25 item limits, unprocessed
//! items resent with exponential backoff and full jitter, and a typed error after a bound.

use std::collections::HashSet;

use super::{Key, Storage, WriteRequest};
use crate::error::{Error, ErrorKind, Result};
use crate::item::Item;
use crate::retry::{Backoff, RetryPolicy};

/// DynamoDB's limit on keys in one BatchGetItem.
pub const BATCH_GET_MAX: usize = 100;
/// DynamoDB's limit on requests in one BatchWriteItem.
pub const BATCH_WRITE_MAX: usize = 25;
/// DynamoDB's limit on actions in one TransactWriteItems.
pub const TRANSACT_MAX: usize = 100;

/// Reads every key (duplicates removed), 100 per BatchGetItem, resending unprocessed keys with
/// backoff. Returns the items found, in no particular order.
///
/// # Errors
///
/// [`ErrorKind::Unprocessed`] with [`Error::unprocessed_count`] if keys were still unprocessed
/// after `policy.max_attempts()` tries; any other backend error at once. Throttled requests and
/// transient failures ([`Error::is_transient`]) are retried like unprocessed keys.
///
/// # Cancel safety
///
/// Cancel safe (reads only).
///
/// # Examples
///
/// ```
/// # use dynatree::{storage, RetryPolicy, Tree};
/// # use dynatree::storage::Key;
/// # use dynatree_testing::FakeTable;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let table = FakeTable::new();
/// # Tree::new(table.clone()).create_table().await?;
/// let keys: Vec<Key> = (0..250).map(|i| Key::new("h", format!("{i:03}"))).collect();
/// let found = storage::get_all(&table, keys, true, &RetryPolicy::default()).await?;
/// assert!(found.is_empty());
/// assert_eq!(table.metrics().requests("BatchGetItem"), 3); // 100 + 100 + 50
/// # Ok(()) }
/// ```
pub async fn get_all<S: Storage>(
    storage: &S,
    keys: Vec<Key>,
    consistent: bool,
    policy: &RetryPolicy,
) -> Result<Vec<Item>> {
    get_all_projected(storage, keys, consistent, &[], policy).await
}

/// [`get_all`] reading only the attributes `projection` names (empty: all).
pub(crate) async fn get_all_projected<S: Storage>(
    storage: &S,
    keys: Vec<Key>,
    consistent: bool,
    projection: &[String],
    policy: &RetryPolicy,
) -> Result<Vec<Item>> {
    let mut seen = HashSet::new();
    let keys: Vec<Key> = keys
        .into_iter()
        .filter(|k| seen.insert(k.clone()))
        .collect();
    let mut found = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(BATCH_GET_MAX) {
        let mut pending = chunk.to_vec();
        let mut backoff = Backoff::new(*policy);
        loop {
            let sent = if projection.is_empty() {
                storage.batch_get(pending.clone(), consistent).await
            } else {
                storage
                    .batch_get_projected(pending.clone(), consistent, projection)
                    .await
            };
            // A transient failure of the request is resent like a throttled one (it only
            // reads); it is the error returned if it was the last try's.
            let mut failed = None;
            match sent {
                Ok(out) => {
                    found.extend(out.items);
                    pending = out.unprocessed;
                }
                Err(e) if e.kind() == ErrorKind::Throttled => {}
                Err(e) if e.is_transient() => failed = Some(e),
                Err(e) => return Err(e),
            }
            if pending.is_empty() {
                break;
            }
            if !backoff.retry().await {
                return Err(failed.unwrap_or_else(|| Error::unprocessed(pending.len(), "keys")));
            }
        }
    }
    Ok(found)
}

/// Writes every request, 25 per BatchWriteItem, resending unprocessed ones with backoff.
///
/// Not atomic: use it for rows whose order does not matter (the tree's own writes use
/// transactions).
///
/// # Errors
///
/// [`ErrorKind::Unprocessed`] with [`Error::unprocessed_count`] = the requests not written
/// (this chunk's leftovers plus every chunk not yet sent) after `policy.max_attempts()` tries.
///
/// # Cancel safety
///
/// A dropped future may have written any prefix of the chunks; writing again is idempotent
/// for puts and deletes.
///
/// # Examples
///
/// ```
/// # use dynatree::{storage, RetryPolicy, Tree};
/// # use dynatree::storage::{Key, WriteRequest};
/// # use dynatree_testing::FakeTable;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let table = FakeTable::new();
/// # Tree::new(table.clone()).create_table().await?;
/// let rows = (0..30).map(|i| WriteRequest::Put(Key::new("h", format!("{i:02}")).into_item()));
/// storage::write_all(&table, rows.collect(), &RetryPolicy::default()).await?;
/// assert_eq!(table.metrics().requests("BatchWriteItem"), 2); // 25 + 5
/// # Ok(()) }
/// ```
pub async fn write_all<S: Storage>(
    storage: &S,
    requests: Vec<WriteRequest>,
    policy: &RetryPolicy,
) -> Result<()> {
    let mut chunks = requests.chunks(BATCH_WRITE_MAX);
    let mut left: usize = requests.len();
    for chunk in chunks.by_ref() {
        let mut pending = chunk.to_vec();
        let mut backoff = Backoff::new(*policy);
        loop {
            match storage.batch_write(pending.clone()).await {
                Ok(unprocessed) => pending = unprocessed,
                Err(e) if e.kind() == ErrorKind::Throttled => {}
                Err(e) => return Err(e),
            }
            if pending.is_empty() {
                break;
            }
            if !backoff.retry().await {
                // This chunk's leftovers plus every chunk not yet sent.
                let not_sent = left - chunk.len();
                return Err(Error::unprocessed(
                    pending.len() + not_sent,
                    "write requests",
                ));
            }
        }
        left -= chunk.len();
    }
    Ok(())
}
