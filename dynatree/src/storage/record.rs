//! One change of one row, as DynamoDB Streams reports it: re-exported by
//! [`changes`](crate::changes), and read by [`watch`](crate::watch)'s typed decoding.

use std::time::SystemTime;

use crate::item::Item;
use crate::storage::Key;

/// What happened to a row.
///
/// # Examples
///
/// ```
/// use dynatree::changes::ChangeKind;
///
/// assert_eq!(ChangeKind::from_event_name("MODIFY"), Some(ChangeKind::Modify));
/// assert_eq!(ChangeKind::Remove.event_name(), "REMOVE");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChangeKind {
    /// The row was created.
    Insert,
    /// The row was changed.
    Modify,
    /// The row was deleted (by a request, or by time to live).
    Remove,
}

impl ChangeKind {
    /// The stream's event name: `INSERT`, `MODIFY` or `REMOVE`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::ChangeKind;
    /// assert_eq!(ChangeKind::Insert.event_name(), "INSERT");
    /// ```
    pub fn event_name(self) -> &'static str {
        match self {
            Self::Insert => "INSERT",
            Self::Modify => "MODIFY",
            Self::Remove => "REMOVE",
        }
    }

    /// The kind of a stream event name; `None` for anything else.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::ChangeKind;
    /// assert_eq!(ChangeKind::from_event_name("INSERT"), Some(ChangeKind::Insert));
    /// assert_eq!(ChangeKind::from_event_name("insert"), None);
    /// ```
    pub fn from_event_name(name: &str) -> Option<Self> {
        match name {
            "INSERT" => Some(Self::Insert),
            "MODIFY" => Some(Self::Modify),
            "REMOVE" => Some(Self::Remove),
            _ => None,
        }
    }
}

/// One change of one row: a stream record with the images of `NEW_AND_OLD_IMAGES`.
///
/// # Examples
///
/// ```
/// use dynatree::changes::{Change, ChangeKind};
/// use dynatree::storage::Key;
/// use dynatree::{storage::Item, storage::Value};
///
/// let key = Key::new("\u{a6}Forums\u{a6}rust", "\u{a6}");
/// let mut new = key.clone().into_item();
/// new.insert("name", Value::S("Rust".into()));
/// let change = Change::new(ChangeKind::Insert, key, None, Some(new), "000100");
/// assert_eq!(change.sequence_number(), "000100");
/// assert!(change.old_image().is_none());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    kind: ChangeKind,
    key: Key,
    old_image: Option<Item>,
    new_image: Option<Item>,
    sequence_number: String,
    created_at: Option<SystemTime>,
}

impl Change {
    /// A change of the row `key`: its image before (`None` for an insert) and after (`None`
    /// for a removal), and the stream's sequence number of the record.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::{Change, ChangeKind};
    /// # use dynatree::storage::Key;
    /// let gone = Change::new(ChangeKind::Remove, Key::new("h", "r"), None, None, "7");
    /// assert_eq!(gone.kind(), ChangeKind::Remove);
    /// ```
    pub fn new(
        kind: ChangeKind,
        key: Key,
        old_image: Option<Item>,
        new_image: Option<Item>,
        sequence_number: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            key,
            old_image,
            new_image,
            sequence_number: sequence_number.into(),
            created_at: None,
        }
    }

    /// The same change, recorded at about `at` (the stream's `ApproximateCreationDateTime`).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::{Change, ChangeKind};
    /// # use dynatree::storage::Key;
    /// use std::time::{Duration, SystemTime};
    ///
    /// let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    /// let c = Change::new(ChangeKind::Insert, Key::new("h", "r"), None, None, "1").with_created_at(at);
    /// assert_eq!(c.created_at(), Some(at));
    /// ```
    #[must_use]
    pub fn with_created_at(mut self, at: SystemTime) -> Self {
        self.created_at = Some(at);
        self
    }

    /// When the stream recorded the change, about (DynamoDB Streams rounds it down to the
    /// second); `None` when the source did not say.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::{Change, ChangeKind};
    /// # use dynatree::storage::Key;
    /// let c = Change::new(ChangeKind::Insert, Key::new("h", "r"), None, None, "1");
    /// assert_eq!(c.created_at(), None);
    /// ```
    pub fn created_at(&self) -> Option<SystemTime> {
        self.created_at
    }

    /// What happened.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::{Change, ChangeKind};
    /// # use dynatree::storage::Key;
    /// let c = Change::new(ChangeKind::Modify, Key::new("h", "r"), None, None, "1");
    /// assert_eq!(c.kind(), ChangeKind::Modify);
    /// ```
    pub fn kind(&self) -> ChangeKind {
        self.kind
    }

    /// The row's key.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::{Change, ChangeKind};
    /// # use dynatree::storage::Key;
    /// let c = Change::new(ChangeKind::Modify, Key::new("h", "r"), None, None, "1");
    /// assert_eq!(c.key(), &Key::new("h", "r"));
    /// ```
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// The row before the change (`None` for an insert, or when the stream's view type does
    /// not include old images).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::{Change, ChangeKind};
    /// # use dynatree::storage::Key;
    /// let c = Change::new(ChangeKind::Insert, Key::new("h", "r"), None, None, "1");
    /// assert!(c.old_image().is_none());
    /// ```
    pub fn old_image(&self) -> Option<&Item> {
        self.old_image.as_ref()
    }

    /// The row after the change (`None` for a removal).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::{Change, ChangeKind};
    /// # use dynatree::storage::Key;
    /// let row = Key::new("h", "r").into_item();
    /// let c = Change::new(ChangeKind::Insert, Key::new("h", "r"), None, Some(row.clone()), "1");
    /// assert_eq!(c.new_image(), Some(&row));
    /// ```
    pub fn new_image(&self) -> Option<&Item> {
        self.new_image.as_ref()
    }

    /// The record's sequence number in its shard (what a Lambda reports back as the first
    /// failed record, and what a consumer checkpoints).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::{Change, ChangeKind};
    /// # use dynatree::storage::Key;
    /// let c = Change::new(ChangeKind::Insert, Key::new("h", "r"), None, None, "42");
    /// assert_eq!(c.sequence_number(), "42");
    /// ```
    pub fn sequence_number(&self) -> &str {
        &self.sequence_number
    }
}
