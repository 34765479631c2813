//! Stores a collection of strings as a DynamoDB string set (`SS`) instead of a list:
//! `#[serde(with = "dynatree::string_set")]` on a field of type `Vec<String>`,
//! `BTreeSet<String>` or `HashSet<String>` (or an `Option` of one). What
//! [`Patch::add_to_set`](crate::Patch::add_to_set) and
//! [`remove_from_set`](crate::Patch::remove_from_set) need.
//!
//! DynamoDB refuses an empty set and a set with duplicates: pair the attribute with
//! `default` and `skip_serializing_if` for an empty collection (as below), and use a set type
//! (or keep a `Vec` free of duplicates); dynatree refuses such a value with
//! [`ErrorKind::InvalidValue`](crate::ErrorKind::InvalidValue) before sending. Reading accepts
//! both a set and a list.
//!
//! # Examples
//!
//! ```
//! use dynatree::{storage::Item, storage::Value};
//! use serde::{Deserialize, Serialize};
//! use std::collections::BTreeSet;
//!
//! #[derive(Serialize, Deserialize, Debug, PartialEq)]
//! struct Post {
//!     #[serde(with = "dynatree::string_set", default, skip_serializing_if = "BTreeSet::is_empty")]
//!     tags: BTreeSet<String>,
//! }
//!
//! let post = Post { tags: BTreeSet::from(["a".to_owned(), "b".to_owned()]) };
//! let item = Item::from_serialize(&post)?;
//! assert_eq!(item.get("tags"), Some(&Value::Ss(vec!["a".into(), "b".into()])));
//! assert_eq!(item.to_deserialize::<Post>()?, post);
//! # Ok::<(), dynatree::Error>(())
//! ```

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Serializes a collection of strings as a string set.
///
/// # Examples
///
/// ```
/// use dynatree::{storage::Item, storage::Value};
/// use serde::Serialize;
///
/// #[derive(Serialize)]
/// struct Post {
///     #[serde(serialize_with = "dynatree::string_set::serialize")]
///     tags: Vec<String>,
/// }
///
/// let item = Item::from_serialize(&Post { tags: vec!["b".into(), "a".into()] })?;
/// assert!(matches!(item.get("tags"), Some(Value::Ss(tags)) if tags.len() == 2));
/// # Ok::<(), dynatree::Error>(())
/// ```
///
/// # Errors
///
/// If the value is not a sequence of strings.
pub fn serialize<T: Serialize, S: Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
    serde_dynamo::string_set::serialize(value, serializer)
}

/// Deserializes a collection of strings from a string set (or a list).
///
/// # Examples
///
/// ```
/// use dynatree::{storage::Item, storage::Value};
/// use serde::Deserialize;
/// use std::collections::BTreeSet;
///
/// #[derive(Deserialize)]
/// struct Post {
///     #[serde(deserialize_with = "dynatree::string_set::deserialize")]
///     tags: BTreeSet<String>,
/// }
///
/// // A list stored before the field became a set reads too.
/// let mut item = Item::new();
/// item.insert("tags", Value::L(vec![Value::S("b".into()), Value::S("a".into())]));
/// let post: Post = item.to_deserialize()?;
/// assert_eq!(post.tags, BTreeSet::from(["a".to_owned(), "b".to_owned()]));
/// # Ok::<(), dynatree::Error>(())
/// ```
///
/// # Errors
///
/// If the stored value is not a set or list of strings.
pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    T::deserialize(deserializer)
}
