//! Reading the table's stream: its shards ([`StreamShard`]) and pages of a shard's records
//! ([`StreamPage`]) from a [`StreamPosition`]. What [`watch`](crate::watch) reads through
//! [`Request::StreamShards`](super::Request::StreamShards) and
//! [`Request::StreamRecords`](super::Request::StreamRecords).

use super::record::Change;

/// Where a read of one shard of the table's stream starts
/// ([`Request::StreamRecords`](super::Request::StreamRecords)).
///
/// # Examples
///
/// ```
/// use dynatree::storage::StreamPosition;
///
/// let resume = StreamPosition::After("000000000000000000042".into());
/// assert_ne!(resume, StreamPosition::TrimHorizon);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StreamPosition {
    /// The oldest record the shard still holds (`TRIM_HORIZON`: the stream keeps records for
    /// 24 hours).
    TrimHorizon,
    /// Past the newest record the shard holds now (`LATEST`): only later records.
    Latest,
    /// Right after the record with this sequence number (`AFTER_SEQUENCE_NUMBER`).
    After(String),
    /// Where the page before stopped, as its [`StreamPage::next`] said: the backend's own
    /// continuation (on DynamoDB a shard iterator, good for fifteen minutes). A continuation
    /// that is no longer good fails with
    /// [`ErrorKind::CursorExpired`](crate::ErrorKind::CursorExpired); read again from a
    /// sequence number.
    Next(String),
}

/// One shard of the table's stream, as DescribeStream lists it.
///
/// A shard holds the records of some of the table's partitions, in the order they were
/// written. A shard is closed after a while (about every four hours, or when its partition
/// splits) and its children take over its partitions: read a child only after its parent,
/// and the records of each item come in order.
///
/// # Examples
///
/// ```
/// use dynatree::storage::StreamShard;
///
/// let shard = StreamShard::new("shardId-0002", Some("shardId-0001".into()), false);
/// assert_eq!(shard.parent(), Some("shardId-0001"));
/// assert!(!shard.is_closed());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamShard {
    id: String,
    parent: Option<String>,
    closed: bool,
}

impl StreamShard {
    /// A shard `id` whose parent is `parent`; `closed` when it takes no more records.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::storage::StreamShard;
    /// let root = StreamShard::new("shardId-0001", None, true);
    /// assert_eq!(root.id(), "shardId-0001");
    /// ```
    pub fn new(id: impl Into<String>, parent: Option<String>, closed: bool) -> Self {
        Self {
            id: id.into(),
            parent,
            closed,
        }
    }

    /// The shard's id.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::storage::StreamShard;
    /// assert_eq!(StreamShard::new("s", None, false).id(), "s");
    /// ```
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The shard this one took over from, if any (it may have left the stream already).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::storage::StreamShard;
    /// assert_eq!(StreamShard::new("s", None, false).parent(), None);
    /// ```
    pub fn parent(&self) -> Option<&str> {
        self.parent.as_deref()
    }

    /// Whether the shard takes no more records (it has an ending sequence number).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::storage::StreamShard;
    /// assert!(StreamShard::new("s", None, true).is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.closed
    }
}

/// One page of a shard's records ([`Request::StreamRecords`](super::Request::StreamRecords)).
///
/// # Examples
///
/// ```
/// use dynatree::storage::{StreamPage, StreamPosition};
///
/// let page = StreamPage { records: Vec::new(), next: Some(StreamPosition::Latest) };
/// assert!(page.records.is_empty() && page.next.is_some());
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamPage {
    /// The records, oldest first.
    pub records: Vec<Change>,
    /// Where to read on; `None` when the shard is closed and every record of it was read.
    pub next: Option<StreamPosition>,
}

/// Whether sequence number `a` comes after `b` in their shard. DynamoDB's are decimal strings
/// of 21 to 40 digits: compared as numbers, by length, then digits.
pub(crate) fn sequence_after(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim_start_matches('0'), b.trim_start_matches('0'));
    (a.len(), a) > (b.len(), b)
}

#[cfg(test)]
mod tests {
    use super::sequence_after;

    #[test]
    fn sequence_numbers_compare_as_numbers() {
        assert!(sequence_after("100", "99"));
        assert!(sequence_after("000000000000000000100", "99"));
        assert!(!sequence_after("99", "100"));
        assert!(!sequence_after("42", "000042"));
    }
}
