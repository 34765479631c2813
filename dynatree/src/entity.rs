//! [`Entity`]: what a tree decodes by path, one [`Hierarchical`] type or an enum of them; and
//! [`Entities`], the reads that decode every row into the type its path names.
//!
//! A tree's path templates already say which type lives where, so an enum whose variants are
//! hierarchical types (`#[derive(Entity)]`) reads a parent's children of several types in the
//! request plan of one type: per page, one Query of the parent's listing and one BatchGetItem
//! of the objects. Each object becomes the variant whose template matches its path.
//!
//! A row whose path matches no variant is never an error: it becomes the enum's
//! `#[dynatree(other)]` variant (an [`Unknown`], holding the path and the object), or, without
//! one, it is skipped. A row whose path matches a variant but whose attributes do not fit that
//! type is an error ([`ErrorKind::Serialization`](crate::ErrorKind::Serialization)), as it is for a read of that type alone.
//!
//! Two variants whose templates can name the same path, or that were checked against
//! different reserved characters, do not compile.
//!
//! The children of one parent match one variant at most (their paths differ only in the last
//! component, a placeholder in every template), so a parent's [`list`](Entities::list) holds
//! one type and, with an `other` variant, the objects no variant names; a subtree's
//! [`descendants`](Entities::descendants) mix every type of it in one walk (or one path index
//! query), and [`get`](Entities::get) reads any path.
//!
//! # Examples
//!
//! ```
//! use dynatree::{Entity, Hierarchical, Tree};
//! use dynatree::entity::Unknown;
//! use dynatree_testing::FakeTable;
//! use futures::TryStreamExt;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
//! #[dynatree(path = "Accounts/{account}/Links/{short}")]
//! struct Link { account: String, short: String, target: String }
//!
//! #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
//! #[dynatree(path = "Accounts/{account}/Profiles/{name}")]
//! struct Profile { account: String, name: String }
//!
//! #[derive(Entity, Debug, PartialEq)]
//! enum AccountItem {
//!     Link(Link),
//!     Profile(Profile),
//!     #[dynatree(other)]
//!     Other(Unknown),
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
//! let tree = Tree::new(FakeTable::new());
//! tree.create_table().await?;
//! tree.repo::<Link>().put(&Link { account: "1".into(), short: "x".into(), target: "https://a".into() }).await?;
//! tree.repo::<Profile>().put(&Profile { account: "1".into(), name: "Ann".into() }).await?;
//! tree.put(["Accounts", "1", "Notes", "n1"], &serde_json::json!({ "text": "hi" })).await?;
//!
//! let items = tree.entities::<AccountItem>();
//! let all: Vec<AccountItem> = items.descendants(["Accounts", "1"]).try_collect().await?;
//! assert!(matches!(&all[0], AccountItem::Link(l) if l.short == "x"));
//! assert!(matches!(&all[1], AccountItem::Other(u) if u.path().to_string() == "/Accounts/1/Notes/n1"));
//! assert!(matches!(&all[2], AccountItem::Profile(p) if p.name == "Ann"));
//! # Ok(()) }
//! ```

use std::fmt;
use std::marker::PhantomData;

use futures::stream::BoxStream;
use serde::de::DeserializeOwned;
use tracing::Instrument;

use crate::error::Result;
use crate::hierarchical::Hierarchical;
use crate::item::Item;
use crate::path::{IntoPath, Path};
pub use crate::query::EntityQuery;
use crate::query::Shape;
use crate::storage::{SharedStorage, Storage};
use crate::tree::Tree;

/// A type a tree decodes from an object row by the row's path: a [`Hierarchical`] type (every
/// one is an `Entity`), or an enum of them with `#[derive(Entity)]`.
///
/// The derive takes an enum whose variants each hold one hierarchical type, and at most one
/// variant marked `#[dynatree(other)]` holding an [`Unknown`]. It refuses, at compile time,
/// two variants whose templates can name the same path (a placeholder can be any literal),
/// variants checked against different reserved characters, and any other shape.
///
/// # Examples
///
/// ```
/// use dynatree::{Entity, Hierarchical, Path};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
/// #[dynatree(path = "Folders/{folder}")]
/// struct Folder { folder: String }
///
/// #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
/// #[dynatree(path = "Folders/{folder}/Files/{file}")]
/// struct File { folder: String, file: String, size: u64 }
///
/// #[derive(Entity, Debug, PartialEq)]
/// enum Node { Folder(Folder), File(File) }
///
/// assert_eq!(Node::TEMPLATES, ["Folders/{folder}", "Folders/{folder}/Files/{file}"]);
///
/// let row = dynatree::storage::Item::from_serialize(&File { folder: "f".into(), file: "a".into(), size: 3 })?;
/// let node = Node::decode(&Path::parse("/Folders/f/Files/a")?, row.clone())?;
/// assert!(matches!(node, Some(Node::File(File { size: 3, .. }))));
/// // A path no template matches: skipped (there is no `#[dynatree(other)]` variant).
/// assert_eq!(Node::decode(&Path::parse("/Elsewhere/a")?, row)?, None);
/// # Ok::<(), dynatree::Error>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not decoded by path",
    note = "derive `Hierarchical` on a struct, or `Entity` on an enum of hierarchical types"
)]
pub trait Entity: Sized + Send + 'static {
    /// The path templates this type decodes, one per variant, in declaration order.
    const TEMPLATES: &'static [&'static str];
    /// The reserved character its templates were checked against.
    const RESERVED: char;

    /// The value of the object row `object` stored at the absolute `path`: `Ok(None)` when
    /// `path` matches none of [`TEMPLATES`](Entity::TEMPLATES) and there is no
    /// `#[dynatree(other)]` variant. Bookkeeping attributes are ignored.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Serialization`](crate::ErrorKind::Serialization) if `path` matches a template but the attributes do not
    /// fit its type.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Entity, Hierarchical, Path};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
    /// #[dynatree(path = "Users/{id}")]
    /// struct User { id: String, age: u8 }
    ///
    /// let row = dynatree::storage::Item::from_serialize(&serde_json::json!({ "id": "u", "age": "old" }))?;
    /// let err = User::decode(&Path::parse("/Users/u")?, row).unwrap_err();
    /// assert_eq!(err.kind(), dynatree::ErrorKind::Serialization);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    fn decode(path: &Path, object: Item) -> Result<Option<Self>>;
}

impl<T: Hierarchical> Entity for T {
    const TEMPLATES: &'static [&'static str] = &[T::TEMPLATE];
    const RESERVED: char = T::RESERVED;

    fn decode(path: &Path, object: Item) -> Result<Option<Self>> {
        if !matches::<T>(path) {
            return Ok(None);
        }
        decode_as::<T>(object).map(Some)
    }
}

/// Whether `path` is one of `T`'s (its template, with placeholders that decode).
pub(crate) fn matches<T: Hierarchical>(path: &Path) -> bool {
    T::key_from_components(path.components()).is_ok()
}

/// `object` as `T`, without bookkeeping attributes.
pub(crate) fn decode_as<T: Hierarchical>(mut object: Item) -> Result<T> {
    crate::layout::strip_bookkeeping(&mut object, T::RESERVED);
    object.to_deserialize()
}

/// An object whose path matches no variant of an entity enum: what its
/// `#[dynatree(other)]` variant holds.
///
/// # Examples
///
/// ```
/// use dynatree::entity::Unknown;
/// use dynatree::Path;
///
/// let row = dynatree::storage::Item::from_serialize(&serde_json::json!({ "text": "hi" }))?;
/// let unknown = Unknown::new(Path::parse("/Notes/n1")?, row);
/// assert_eq!(unknown.path().to_string(), "/Notes/n1");
/// let text: serde_json::Value = unknown.value()?;
/// assert_eq!(text["text"], "hi");
/// # Ok::<(), dynatree::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Unknown {
    path: Path,
    object: Item,
}

impl Unknown {
    /// The object `object` at the absolute `path`, its attributes as given (what a tree's
    /// reads put here has no bookkeeping attributes).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::entity::Unknown;
    /// let u = Unknown::new(dynatree::Path::parse("/a")?, dynatree::storage::Item::new());
    /// assert!(u.object().is_empty());
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn new(path: Path, object: Item) -> Self {
        Self { path, object }
    }

    /// The object's path in the table (absolute, also when read through a
    /// [scope](Tree::scope)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::entity::Unknown;
    /// let u = Unknown::new(dynatree::Path::parse("/a/b")?, dynatree::storage::Item::new());
    /// assert_eq!(u.path().len(), 2);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The object's attributes as stored, without bookkeeping.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::entity::Unknown;
    /// # use dynatree::storage::{Item, Value};
    /// let mut row = Item::new();
    /// row.insert("n", Value::N("1".into()));
    /// let u = Unknown::new(dynatree::Path::parse("/a")?, row);
    /// assert_eq!(u.object().get("n"), Some(&Value::N("1".into())));
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn object(&self) -> &Item {
        &self.object
    }

    /// The object as `T`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Serialization`](crate::ErrorKind::Serialization) if it does not fit `T`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::entity::Unknown;
    /// #[derive(serde::Deserialize)]
    /// struct Note { text: String }
    /// let row = dynatree::storage::Item::from_serialize(&serde_json::json!({ "text": "hi" }))?;
    /// let note: Note = Unknown::new(dynatree::Path::parse("/n")?, row).value()?;
    /// assert_eq!(note.text, "hi");
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn value<T: DeserializeOwned>(&self) -> Result<T> {
        self.object.to_deserialize()
    }

    /// The path and the attributes.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::entity::Unknown;
    /// let (path, object) = Unknown::new(dynatree::Path::parse("/a")?, Default::default()).into_parts();
    /// assert_eq!(path.to_string(), "/a");
    /// assert!(object.is_empty());
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn into_parts(self) -> (Path, Item) {
        (self.path, self.object)
    }
}

/// Reads that decode each object as the [`Entity`] `E`, built by [`Tree::entities`]: `get` by
/// path, a parent's children (`list`, `query`), and descendants. See the
/// [module](crate::entity) for an enum of several types.
///
/// # Examples
///
/// ```
/// use dynatree::entity::Entities;
/// use dynatree::{Hierarchical, Tree};
/// use dynatree_testing::FakeTable;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
/// #[dynatree(path = "Users/{id}")]
/// struct User { id: String }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let tree = Tree::new(FakeTable::new());
/// tree.create_table().await?;
/// // A handle is cheap to clone and owns what it needs.
/// let users: Entities<User> = tree.entities();
/// let again = users.clone();
/// tree.repo::<User>().put(&User { id: "u1".into() }).await?;
/// assert_eq!(again.get(["Users", "u1"]).await?, Some(User { id: "u1".into() }));
/// # Ok(()) }
/// ```
pub struct Entities<E, S = SharedStorage> {
    tree: Tree<S>,
    _type: PhantomData<fn() -> E>,
}

impl<E, S> Clone for Entities<E, S> {
    fn clone(&self) -> Self {
        Self {
            tree: self.tree.clone(),
            _type: PhantomData,
        }
    }
}

impl<E, S: fmt::Debug> fmt::Debug for Entities<E, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entities")
            .field("type", &std::any::type_name::<E>())
            .field("tree", &self.tree)
            .finish()
    }
}

impl<S: Storage + 'static> Tree<S> {
    /// Reads that decode each object as `E`: one hierarchical type, or an enum of them with
    /// `#[derive(Entity)]`, each row as the variant its path matches.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Entity, Hierarchical, Tree};
    /// use dynatree_testing::FakeTable;
    /// use futures::TryStreamExt;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
    /// #[dynatree(path = "Owners/{owner}/Cats/{name}")]
    /// struct Cat { owner: String, name: String, lives: u8 }
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
    /// #[dynatree(path = "Owners/{owner}/Dogs/{name}")]
    /// struct Dog { owner: String, name: String, good: bool }
    ///
    /// #[derive(Entity, Debug, PartialEq)]
    /// enum Pet { Cat(Cat), Dog(Dog) }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// let tom = Cat { owner: "ann".into(), name: "tom".into(), lives: 9 };
    /// let rex = Dog { owner: "ann".into(), name: "rex".into(), good: true };
    /// tree.repo::<Cat>().put(&tom).await?;
    /// tree.repo::<Dog>().put(&rex).await?;
    ///
    /// let pets = tree.entities::<Pet>();
    /// // Every pet of ann, of both types, in one walk.
    /// let all: Vec<Pet> = pets.descendants(["Owners", "ann"]).try_collect().await?;
    /// assert_eq!(all, [Pet::Cat(tom), Pet::Dog(rex)]);
    /// let found = pets.get(["Owners", "ann", "Dogs", "rex"]).await?;
    /// assert!(matches!(found, Some(Pet::Dog(d)) if d.good));
    /// # Ok(()) }
    /// ```
    pub fn entities<E: Entity>(&self) -> Entities<E, S> {
        Entities {
            tree: self.clone(),
            _type: PhantomData,
        }
    }
}

impl<E: Entity, S: Storage + 'static> Entities<E, S> {
    /// The object at `path`, following links, decoded as the variant `path` matches (the path
    /// asked for, not a link's target: a link is read as what its own path names, as
    /// [`Tree::get`] reads it as the type the caller names). `None` if there is no object, or
    /// if `path` matches no template and `E` has no `#[dynatree(other)]` variant. One GetItem
    /// (one more per link followed).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
    /// #[dynatree(path = "Users/{id}")]
    /// struct User { id: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// tree.repo::<User>().put(&User { id: "u1".into() }).await?;
    /// let users = tree.entities::<User>();
    /// assert_eq!(users.get(["Users", "u1"]).await?, Some(User { id: "u1".into() }));
    /// assert_eq!(users.get(["Users", "u2"]).await?, None);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`](crate::ErrorKind::InvalidPath); [`ErrorKind::InvalidReserved`](crate::ErrorKind::InvalidReserved) for an entity checked
    /// against another reserved character; [`ErrorKind::LinkLoop`](crate::ErrorKind::LinkLoop);
    /// [`ErrorKind::Serialization`](crate::ErrorKind::Serialization) if the attributes do not fit the type `path` matches.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn get(&self, path: impl IntoPath) -> Result<Option<E>> {
        let tree = &self.tree;
        tree.cx
            .call(async {
                tree.check_entity_reserved(E::RESERVED)?;
                let path = tree.enter(path)?;
                let span = tracing::debug_span!("dynatree.entities.get", path = %path);
                async {
                    tree.cx.inner.layout.check_object_path(&path)?;
                    match crate::tree::read::resolve(&tree.cx, &path).await? {
                        Some(row) => E::decode(&path, row),
                        None => Ok(None),
                    }
                }
                .instrument(span)
                .await
            })
            .await
    }

    /// The children of `parent` decoded as `E`, lazily, in name order; as
    /// [`query(parent).items()`](EntityQuery::items).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
    /// #[dynatree(path = "Users/{id}")]
    /// struct User { id: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// tree.repo::<User>().put(&User { id: "u1".into() }).await?;
    /// tree.put(["Users", "u1", "avatar"], &serde_json::json!({ "png": "…" })).await?;
    /// let users: Vec<User> = tree.entities::<User>().list(["Users"]).try_collect().await?;
    /// assert_eq!(users, [User { id: "u1".into() }]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`EntityQuery::pages`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn list(&self, parent: impl IntoPath) -> BoxStream<'static, Result<E>> {
        self.query(parent).items()
    }

    /// A query of the children of `parent`, decoded as `E`: ranges over their names, order,
    /// limits, pages and cursors. See [`EntityQuery`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
    /// #[dynatree(path = "Users/{id}")]
    /// struct User { id: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// for id in ["ann", "bob", "cy"] {
    ///     tree.repo::<User>().put(&User { id: id.into() }).await?;
    /// }
    /// let query = tree.entities::<User>().query(["Users"]).descending().limit(2);
    /// let last: Vec<User> = query.items().try_collect().await?;
    /// assert_eq!(last, [User { id: "cy".into() }, User { id: "bob".into() }]);
    /// # Ok(()) }
    /// ```
    pub fn query(&self, parent: impl IntoPath) -> EntityQuery<E, S> {
        EntityQuery {
            tree: self.tree.clone(),
            parent: parent.into_path(),
            shape: Shape::default(),
            _type: PhantomData,
        }
    }

    /// The objects strictly below `prefix` decoded as `E`, lazily, in the order of
    /// [`Tree::descendants`] (with its default plan); for its other settings (depth, strategy,
    /// pages and cursors) use [`Descendants::entities`](crate::Descendants::entities).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
    /// #[dynatree(path = "Users/{id}")]
    /// struct User { id: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// tree.repo::<User>().put(&User { id: "u1".into() }).await?;
    /// let all: Vec<User> = tree.entities::<User>().descendants(dynatree::Path::root()).try_collect().await?;
    /// assert_eq!(all.len(), 1);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Descendants::entities`](crate::Descendants::entities).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn descendants(&self, prefix: impl IntoPath) -> BoxStream<'static, Result<E>> {
        self.tree.descendants(prefix).entities::<E>()
    }
}

#[cfg(test)]
mod tests {
    use crate::__private::templates_overlap;

    #[test]
    fn templates_overlap_when_every_component_can_be_equal() {
        for (a, b) in [
            ("A/{x}", "A/{y}"),
            ("A/{x}/B/{y}", "A/{x}/{s}/{y}"),
            ("{a}/{b}", "Users/{id}"),
            ("Users/{id}", "Users/{id}"),
        ] {
            assert!(templates_overlap(a, b), "{a} and {b}");
            assert!(templates_overlap(b, a), "{b} and {a}");
        }
    }

    #[test]
    fn templates_differ_by_length_or_a_literal() {
        for (a, b) in [
            ("A/{x}", "A/{x}/B/{y}"),
            ("A/{x}/B/{y}", "A/{x}/C/{y}"),
            ("Users/{id}", "User/{id}"),
            ("Users/{id}", "Usersx/{id}"),
            ("A/{x}", "{a}"),
        ] {
            assert!(!templates_overlap(a, b), "{a} and {b}");
            assert!(!templates_overlap(b, a), "{b} and {a}");
        }
    }
}
