// The README is the crate's front page (and its page on the registry). Its links point at
// docs.rs so that they work where the README is shown on its own; these definitions come
// first, and the first definition of a link label wins, so rustdoc resolves the same labels to
// the local items (the gated ones only when their feature is on; otherwise to docs.rs).
#![doc = "[`Tree`]: Tree"]
#![cfg_attr(feature = "dynamodb", doc = "[`DynamoDbTable`]: DynamoDbTable")]
#![doc = "[`Path`]: Path"]
#![doc = "[`IntoPath`]: IntoPath"]
#![doc = "[`Path::parse`]: Path::parse"]
#![doc = "[`Path::parse_escaped`]: Path::parse_escaped"]
#![doc = "[`TreeBuilder::reserved`]: TreeBuilder::reserved"]
#![doc = "[`Error`]: Error"]
#![doc = "[`Tree::put_link`]: Tree::put_link"]
#![doc = "[`Tree::get`]: Tree::get"]
#![doc = "[`TreeBuilder::max_link_hops`]: TreeBuilder::max_link_hops"]
#![doc = "[`Tree::read_link`]: Tree::read_link"]
#![doc = "[`Tree::check`]: Tree::check"]
#![cfg_attr(feature = "derive", doc = "[derive]: macro@Hierarchical")]
#![doc = "[`Tree::repo`]: Tree::repo"]
#![doc = "[`Repository`]: Repository"]
#![doc = "[`Cursor`]: Cursor"]
#![doc = "[`Tree::move_subtree`]: Tree::move_subtree"]
#![doc = "[`Tree::copy_subtree`]: Tree::copy_subtree"]
#![doc = "[`Tree::delete_subtree`]: Tree::delete_subtree"]
#![doc = "[`Tree::delete_node`]: Tree::delete_node"]
#![doc = "[`ErrorKind::Locked`]: ErrorKind::Locked"]
#![doc = "[`Tree::resume`]: Tree::resume"]
#![doc = "[`LinkPolicy::Rewrite`]: ops::LinkPolicy::Rewrite"]
#![doc = "[`TreeBuilder::consistent_reads`]: TreeBuilder::consistent_reads"]
#![doc = "[`consistency`]: consistency"]
#![doc = "[`Error::kind`]: Error::kind"]
#![doc = "[`ErrorKind`]: ErrorKind"]
#![doc = "[`Error::party`]: Error::party"]
#![doc = "[`scope`]: scope"]
#![doc = "[`iam`]: iam"]
#![doc = "[`changes`]: changes"]
#![cfg_attr(
    feature = "streams",
    doc = "[`StreamConsumer`]: changes::StreamConsumer"
)]
#![cfg_attr(feature = "lambda", doc = "[`changes::lambda`]: changes::lambda")]
#![doc = "[`check`]: check"]
#![doc = "[`transfer`]: transfer"]
#![doc = "[`storage`]: storage"]
#![doc = "[`KeySegment`]: keys::KeySegment"]
#![doc = ""]
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![deny(rustdoc::broken_intra_doc_links)]
#![deny(missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod changes;
pub mod check;
mod cursor;
pub mod denorm;
pub mod entity;
pub mod error;
mod expiry;
mod fields;
mod hierarchical;
pub mod iam;
mod index;
mod item;
pub mod keys;
mod layout;
pub mod ops;
mod path;
mod query;
mod read;
mod repo;
mod retry;
mod segment;
pub mod storage;
mod stream;
pub mod string_set;
mod transaction;
pub mod transfer;
mod tree;
pub mod update;
pub mod watch;

#[doc(hidden)]
pub mod __private;

pub mod consistency {
    #![doc = include_str!("consistency.md")]
    #![doc = ""]
    #![doc = include_str!("tree/write.md")]
    #![doc = ""]
    #![doc = include_str!("tree/removal.md")]
    #![doc = ""]
    #![doc = include_str!("tree/guard.md")]
    #![doc = ""]
    #![doc = include_str!("tree/txn.md")]
    #![doc = ""]
    #![doc = include_str!("tree/many.md")]
    #![doc = ""]
    #![doc = include_str!("tree/expire.md")]
    #![doc = ""]
    #![doc = include_str!("tree/scope.md")]
    #![doc = ""]
    #![doc = include_str!("tree/moves.md")]
    #![doc = ""]
    #![doc = include_str!("tree/links.md")]
    #![doc = ""]
    #![doc = include_str!("layout/sharded.md")]
    #![doc = ""]
    #![doc = include_str!("tree/denorm.md")]
    #![doc = ""]
    #![doc = include_str!("check/check.md")]
    #![doc = ""]
    #![doc = include_str!("watch/watch.md")]
    #![doc = ""]
    #![doc = include_str!("tree/readers.md")]
}

pub use crate::cursor::{Cursor, TypedPage};
pub use crate::entity::Entity;
pub use crate::error::{Error, ErrorKind, Result};
pub use crate::expiry::Expiry;
pub use crate::hierarchical::Hierarchical;
pub use crate::path::{IntoPath, Path};
pub use crate::query::{IndexQueryBuilder, TypedQuery};
pub use crate::read::Read;
pub use crate::repo::Repository;
pub use crate::retry::RetryPolicy;
#[cfg(feature = "dynamodb")]
#[cfg_attr(docsrs, doc(cfg(feature = "dynamodb")))]
pub use crate::storage::dynamodb::DynamoDbTable;
pub use crate::transaction::Transaction;
pub use crate::tree::scope;
pub use crate::tree::{Descendant, Descendants, Entry, Strategy, Tree, TreeBuilder};
pub use crate::update::Patch;
/// Derive macro for the [`trait@Entity`] trait: an enum of [hierarchical](trait@Hierarchical)
/// types, each object decoded as the variant whose path template matches its path (see
/// [`entity`]).
///
/// Each variant holds one hierarchical type (`Link(Link)`); at most one variant, marked
/// `#[dynatree(other)]`, holds an [`entity::Unknown`]: what an object whose path matches no
/// other variant becomes (without it, such objects are skipped). A compile error refuses two
/// variants whose templates can name the same path (spanned on both), variants checked
/// against different reserved characters, generics, and any other shape.
/// `#[dynatree(crate = "path::to::dynatree")]` names this crate when it is re-exported.
///
/// # Examples
///
/// ```
/// use dynatree::{Entity, Hierarchical, Path};
/// use dynatree::entity::Unknown;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
/// #[dynatree(path = "Accounts/{id}")]
/// struct Account { id: String }
///
/// #[derive(Entity, Debug, PartialEq)]
/// enum Item {
///     Account(Account),
///     #[dynatree(other)]
///     Other(Unknown),
/// }
///
/// let row = dynatree::storage::Item::from_serialize(&Account { id: "a".into() })?;
/// let other = Item::decode(&Path::parse("/Somewhere/else")?, row.clone())?;
/// assert!(matches!(other, Some(Item::Other(u)) if u.path().to_string() == "/Somewhere/else"));
/// assert_eq!(Item::decode(&Path::parse("/Accounts/a")?, row)?, Some(Item::Account(Account { id: "a".into() })));
/// # Ok::<(), dynatree::Error>(())
/// ```
#[cfg(feature = "derive")]
#[cfg_attr(docsrs, doc(cfg(feature = "derive")))]
pub use dynatree_derive::Entity;
/// Derive macro for the [`trait@Hierarchical`] trait.
///
/// On a struct with named fields. Generates the trait impl, a key struct `<Name>Key` (every
/// placeholder field, `pub`) and a collection struct `<Name>Collection` (every placeholder
/// but the last), both with `path()`; and checks at compile time everything it can. Both
/// structs display as their path (`key.to_string()` is `key.path()?.to_string()`, and never
/// fails: an empty encoded component shows as `//`), serialize as a struct of their fields
/// (under the names the item stores them under, through dynatree's own serde), and implement
/// `Debug`, `Clone`, `PartialEq`, `Eq`, `Hash`, and `PartialOrd`/`Ord` (the order of the paths)
/// when every field is `Ord`.
///
/// Attributes:
///
/// - `#[dynatree(path = "Accounts/{account_id}/Links/{short}")]` (required): literal
///   components and `{field}` placeholders separated by `/`; the last component is a
///   placeholder. Placeholder fields implement [`KeySegment`](keys::KeySegment).
/// - `#[dynatree(parent = Account)]`: checks that this template extends `Account`'s.
/// - `#[dynatree(reserved = "|")]`: the reserved character of the trees this type lives in
///   (default `¦`); literals and stored field names are checked against it.
/// - `#[dynatree(crate = "path::to::dynatree")]`: where to find this crate when it is
///   re-exported.
/// - `#[dynatree(index(name = "by_email", hash = email, range = created))]` (repeatable): a
///   secondary index; generates `T::index_by_email(&email)` for [`Repository::index`], which
///   also takes a borrowed form (`T::index_by_email("a@b")` for a `String` field; see
///   [`AsKeySegment`](keys::AsKeySegment)). Register
///   it with [`TreeBuilder::indexes_of`] so [`Tree::create_table`] creates it.
/// - `#[dynatree(version)]` on a `u64` field: optimistic locking in
///   [`Repository::update`].
///
/// A raw identifier field `r#type` is the placeholder `{type}`. serde's `rename` and
/// `rename_all` are followed; a compile error refuses the serde attributes that would break
/// keys: `skip`, `skip_serializing`, `skip_deserializing` and `skip_serializing_if` on a
/// placeholder, index or version field; `flatten`; `transparent`, `from`, `try_from` and
/// `into`; and a `tag` or `content` named `Key`, `Child`, or starting with the reserved
/// character.
///
/// # Examples
///
/// ```
/// use dynatree::Hierarchical;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Hierarchical, Serialize, Deserialize)]
/// #[dynatree(path = "Accounts/{id}")]
/// struct Account { id: String, name: String, email: String }
///
/// #[derive(Hierarchical, Serialize, Deserialize)]
/// #[dynatree(path = "Accounts/{account_id}/Links/{short}", parent = Account)]
/// struct Link {
///     account_id: String,
///     short: String,
///     target: String,
///     #[dynatree(version)]
///     version: u64,
/// }
///
/// let key = LinkKey { account_id: "a1".into(), short: "xyz".into() };
/// assert_eq!(key.path()?.to_string(), "/Accounts/a1/Links/xyz");
/// assert_eq!(key.to_string(), "/Accounts/a1/Links/xyz");
/// assert_eq!(key.collection().path()?.to_string(), "/Accounts/a1/Links");
/// assert_eq!(Link::key_from_path(&key.path()?)?, key);
/// # Ok::<(), dynatree::Error>(())
/// ```
///
/// See [`trait@Hierarchical`] for the equivalent hand-written impl.
#[cfg(feature = "derive")]
#[cfg_attr(docsrs, doc(cfg(feature = "derive")))]
pub use dynatree_derive::Hierarchical;
