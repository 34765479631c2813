//! Partial updates of stored values: [`Patch`].

use crate::tree::{denorm, txn};
use std::marker::PhantomData;

use serde::Serialize;

use crate::error::{Error, ErrorKind, Result};
pub use crate::fields::{Cond, Field, Operand, ReadOnly, Updatable};
use crate::hierarchical::Hierarchical;
use crate::item::{Item, Value};
use crate::retry::Backoff;
use crate::storage::{Comparison, Condition, Storage as _, UpdateAction};

/// A field a partial update may change: a [`Field`] of an [`Updatable`] field. Key fields, index
/// fields, the version field and denormalized copies have `ReadOnly` handles, which a [`Patch`]
/// refuses at compile time.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be changed by a partial update",
    label = "a key field, an index field, the version field or a denormalized copy",
    note = "a key field changes the path (use `move_subtree`); an index field or the version field changes with `Repository::update` or `put`; a denormalized copy (`#[dynatree(from = ...)]`) follows its source and is written by dynatree only"
)]
pub trait UpdatableField<T> {
    /// The field's Rust type.
    type Value;
    /// The attribute the field is stored under.
    fn attribute(&self) -> &'static str;
}

impl<T, V> UpdatableField<T> for Field<T, V, Updatable> {
    type Value = V;
    fn attribute(&self) -> &'static str {
        self.name()
    }
}

/// Field types a string set is stored from (with `#[serde(with = "dynatree::string_set")]`):
/// `Vec<String>`, `BTreeSet<String>`, `HashSet<String>`, and `Option`s of them.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a collection of strings: `add_to_set` needs a string set field"
)]
pub trait StringSetField {}

impl StringSetField for Vec<String> {}
impl StringSetField for std::collections::BTreeSet<String> {}
impl<H> StringSetField for std::collections::HashSet<String, H> {}
impl<C: StringSetField> StringSetField for Option<C> {}

/// Numbers a partial update can add to (DynamoDB `ADD`), and `Option`s of them.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a number: `add` needs a number field",
    note = "`set` replaces a value of any type; `append` adds to a list"
)]
pub trait Numeric: Serialize {
    /// The smallest and the largest value of the type, for an integer type; `None` for a
    /// floating-point one. [`Patch::add`] never takes a stored field outside this range: the
    /// update is conditional on the sum staying inside it.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::update::Numeric;
    ///
    /// assert_eq!(<u8 as Numeric>::RANGE, Some((0, 255)));
    /// assert_eq!(<Option<i64> as Numeric>::RANGE, Some((i64::MIN.into(), i64::MAX as u128)));
    /// assert_eq!(<f64 as Numeric>::RANGE, None);
    /// ```
    const RANGE: Option<(i128, u128)> = None;
}

macro_rules! integer {
    ($($t:ty),*) => {$(
        impl Numeric for $t {
            const RANGE: Option<(i128, u128)> = Some((<$t>::MIN as i128, <$t>::MAX as u128));
        }
        impl Numeric for Option<$t> {
            const RANGE: Option<(i128, u128)> = <$t as Numeric>::RANGE;
        }
    )*};
}
integer!(
    u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize
);

impl Numeric for f32 {}
impl Numeric for Option<f32> {}
impl Numeric for f64 {}
impl Numeric for Option<f64> {}

/// What keeps one change of a patch inside its field's type: a condition on the stored value,
/// and the detail of the [`ErrorKind::InvalidValue`] reported when it does not hold.
#[derive(Debug, Clone)]
pub(crate) struct Bound {
    guard: Condition,
    detail: String,
}

/// The bound of adding the number `n` (DynamoDB's text of it) to `name`, an integer of the
/// range `(min, max)`: the stored value plus `n` stays in the range (a missing field counts as
/// zero). `None` when no stored value can leave the range (adding zero, or not an integer).
fn add_bound(name: &str, n: &str, (min, max): (i128, u128)) -> Result<Option<Bound>> {
    let detail = format!(
        "adding {n} to `{name}` would take it outside the range of its type ({min} to {max})"
    );
    // The bound as a sign and a magnitude: `field + n <= max` is `field <= max - n` for an
    // addition, `field + n >= min` is `field >= min - n` for a subtraction.
    let (subtract, magnitude) = match n.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, n),
    };
    let Ok(magnitude) = magnitude.parse::<u128>() else {
        return Ok(None);
    };
    if magnitude == 0 {
        return Ok(None);
    }
    let (negative, bound, from_zero) = if subtract {
        let low = min.unsigned_abs(); // min <= 0
        if magnitude >= low {
            (false, magnitude - low, magnitude <= low)
        } else {
            (true, low - magnitude, true)
        }
    } else if magnitude <= max {
        (false, max - magnitude, true)
    } else {
        (true, magnitude - max, false)
    };
    let Some(text) = bound_text(negative, bound, !subtract) else {
        return Err(Error::new(ErrorKind::InvalidValue, detail));
    };
    let op = if subtract {
        Comparison::Lt
    } else {
        Comparison::Gt
    };
    let outside = Condition::Compare(name.to_owned(), op, Value::N(text));
    let inside = Condition::Not(Box::new(outside));
    // A missing field counts as zero: `n` itself must then be in the range.
    let guard = if from_zero {
        inside
    } else {
        Condition::And(vec![Condition::attr_exists(name), inside])
    };
    Ok(Some(Bound { guard, detail }))
}

/// A bound in DynamoDB's text, which keeps 38 significant digits: a 39-digit bound (only 128-bit
/// types have them) is rounded to a multiple of 10, down for `field > bound` (`floor`), up for
/// `field < bound`. A stored integer of 39 digits is itself a multiple of 10, so it compares
/// with the rounded bound as with the exact one.
fn bound_text(negative: bool, magnitude: u128, floor: bool) -> Option<String> {
    const DIGITS: u128 = 10u128.pow(38);
    let mut magnitude = magnitude;
    let rest = magnitude % 10;
    if magnitude >= DIGITS && rest != 0 {
        // Away from zero when rounding a negative bound down or a positive one up.
        magnitude = if negative == floor {
            magnitude.checked_add(10 - rest)?
        } else {
            magnitude - rest
        };
    }
    Some(if negative {
        format!("-{magnitude}")
    } else {
        magnitude.to_string()
    })
}

/// A partial update of one stored value of `T`: which fields change and how, under which
/// condition. Build it with [`Patch::new`], then send it with
/// [`Repository::patch`](crate::Repository::patch) or add it to a
/// [`Transaction`](crate::Transaction::patch).
///
/// The update applies only to a stored object (never creates one, never touches a link), with
/// the version field (if the type has one) incremented, and under the same guard as a put: never
/// while the object's listing row is being removed or moved.
///
/// # Examples
///
/// ```
/// use dynatree::{Hierarchical, Patch, Tree};
/// use dynatree_testing::FakeTable;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
/// #[dynatree(path = "Posts/{id}")]
/// struct Post {
///     id: String,
///     title: String,
///     views: u64,
///     tags: Vec<String>,
///     note: Option<String>,
///     #[dynatree(version)]
///     version: u64,
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let tree = Tree::new(FakeTable::new());
/// tree.create_table().await?;
/// let posts = tree.repo::<Post>();
/// let post = Post { id: "p1".into(), title: "Hi".into(), views: 0, tags: vec![], note: Some("draft".into()), version: 1 };
/// posts.put(&post).await?;
///
/// let f = Post::FIELDS;
/// let patch = Patch::new(&post.key())
///     .set(f.title, "Hello")
///     .add(f.views, 1)
///     .append(f.tags, ["rust"])
///     .remove(f.note)
///     .when(f.views.lt(1000));
/// posts.patch(patch).await?;
/// let now = posts.get(&post.key()).await?.unwrap();
/// assert_eq!((now.title.as_str(), now.views, now.tags.len(), now.note, now.version), ("Hello", 1, 1, None, 2));
///
/// // `f.id` (a key field) and `f.version` cannot be patched: that does not compile.
/// # Ok(()) }
/// ```
#[must_use = "a patch does nothing until it is sent or added to a transaction"]
pub struct Patch<T: Hierarchical> {
    pub(crate) key: T::Key,
    pub(crate) actions: Vec<UpdateAction>,
    pub(crate) condition: Cond<T>,
    /// What keeps the additions inside their fields' types.
    bounds: Vec<Bound>,
    /// The first invalid value (the error's kind and detail), reported before anything is sent.
    error: Option<(ErrorKind, String)>,
    _marker: PhantomData<fn() -> T>,
}

impl<T: Hierarchical> Clone for Patch<T> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            actions: self.actions.clone(),
            condition: self.condition.clone(),
            bounds: self.bounds.clone(),
            error: self.error.clone(),
            _marker: PhantomData,
        }
    }
}

impl<T: Hierarchical> std::fmt::Debug for Patch<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Patch")
            .field("key", &self.key)
            .field("actions", &self.actions)
            .field("condition", &self.condition)
            .finish_non_exhaustive()
    }
}

impl<T: Hierarchical> Patch<T> {
    /// An empty patch of the value at `key`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Patch, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// # #[dynatree(path = "Posts/{id}")]
    /// # struct Post { id: String, title: String, views: u64, tags: Vec<String>, note: Option<String> }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let posts = tree.repo::<Post>();
    /// let post = Post { id: "p".into(), title: "Hi".into(), views: 0, tags: vec![], note: Some("draft".into()) };
    /// posts.put(&post).await?;
    /// let f = Post::FIELDS;
    /// posts.patch(Patch::new(&post.key()).set(f.title, "Hello")).await?;
    /// // A patch without changes is refused before anything is sent.
    /// let err = posts.patch(Patch::new(&post.key())).await.unwrap_err();
    /// assert_eq!(err.kind(), dynatree::ErrorKind::InvalidArgument);
    /// # Ok(()) }
    /// ```
    pub fn new(key: &T::Key) -> Self {
        Self {
            key: key.clone(),
            actions: Vec::new(),
            condition: Cond::always(),
            bounds: Vec::new(),
            error: None,
            _marker: PhantomData,
        }
    }

    /// Adds the action `f` of the value `v`, checked as DynamoDB checks values (NaN, infinities
    /// and numbers out of its range, empty sets are refused before sending).
    fn push(
        mut self,
        name: &'static str,
        v: Result<Value>,
        f: impl FnOnce(String, Value) -> UpdateAction,
    ) -> Self {
        match v.and_then(|v| v.check(name).map(|()| v)) {
            Ok(v) => self.actions.push(f(name.to_owned(), v)),
            Err(e) => self.fail(name, &e),
        }
        self
    }

    /// Records the first invalid value.
    fn fail(&mut self, name: &str, e: &Error) {
        if self.error.is_none() {
            self.error = Some((
                e.kind(),
                format!("the new value of `{name}`: {}", crate::fields::detail(e)),
            ));
        }
    }

    /// Sets the field to `value`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Patch, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// # #[dynatree(path = "Posts/{id}")]
    /// # struct Post { id: String, title: String, views: u64, tags: Vec<String>, note: Option<String> }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let posts = tree.repo::<Post>();
    /// let post = Post { id: "p".into(), title: "Hi".into(), views: 0, tags: vec![], note: Some("draft".into()) };
    /// posts.put(&post).await?;
    /// let f = Post::FIELDS;
    /// posts.patch(Patch::new(&post.key()).set(f.title, "Hello").set(f.note, "final")).await?;
    /// let now = posts.get(&post.key()).await?.unwrap();
    /// assert_eq!((now.title.as_str(), now.note.as_deref()), ("Hello", Some("final")));
    /// # Ok(()) }
    /// ```
    pub fn set<F>(self, field: F, value: impl Operand<F::Value>) -> Self
    where
        F: UpdatableField<T>,
    {
        self.push(
            field.attribute(),
            Value::from_serialize(&value),
            UpdateAction::Set,
        )
    }

    /// Removes an optional field (it reads back as `None`).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Patch, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// # #[dynatree(path = "Posts/{id}")]
    /// # struct Post { id: String, title: String, views: u64, tags: Vec<String>, note: Option<String> }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let posts = tree.repo::<Post>();
    /// let post = Post { id: "p".into(), title: "Hi".into(), views: 0, tags: vec![], note: Some("draft".into()) };
    /// posts.put(&post).await?;
    /// let f = Post::FIELDS;
    /// posts.patch(Patch::new(&post.key()).remove(f.note)).await?;
    /// assert_eq!(posts.get(&post.key()).await?.unwrap().note, None);
    /// # Ok(()) }
    /// ```
    pub fn remove<F, U>(mut self, field: F) -> Self
    where
        F: UpdatableField<T, Value = Option<U>>,
    {
        self.actions
            .push(UpdateAction::Remove(field.attribute().to_owned()));
        self
    }

    /// Adds `n` to a number field (a missing field counts as zero), atomically: concurrent
    /// additions all count.
    ///
    /// The sum never leaves the range of the field's integer type ([`Numeric::RANGE`]): the
    /// update is conditional on it, and a patch that would take the stored value below the
    /// type's minimum or above its maximum fails with [`ErrorKind::InvalidValue`], changing
    /// nothing. NaN and infinities are refused before sending, with the same kind.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Patch, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// # #[dynatree(path = "Posts/{id}")]
    /// # struct Post { id: String, title: String, views: u64, tags: Vec<String>, note: Option<String> }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let posts = tree.repo::<Post>();
    /// let post = Post { id: "p".into(), title: "Hi".into(), views: 0, tags: vec![], note: Some("draft".into()) };
    /// posts.put(&post).await?;
    /// let f = Post::FIELDS;
    /// posts.patch(Patch::new(&post.key()).add(f.views, 2)).await?;
    /// posts.patch(Patch::new(&post.key()).add(f.views, 3)).await?;
    /// assert_eq!(posts.get(&post.key()).await?.unwrap().views, 5);
    /// // `views` is a u64: it cannot go past u64::MAX.
    /// let err = posts.patch(Patch::new(&post.key()).add(f.views, u64::MAX)).await.unwrap_err();
    /// assert_eq!(err.kind(), dynatree::ErrorKind::InvalidValue);
    /// assert_eq!(posts.get(&post.key()).await?.unwrap().views, 5);
    /// # Ok(()) }
    /// ```
    pub fn add<F>(self, field: F, n: impl Operand<F::Value>) -> Self
    where
        F: UpdatableField<T>,
        F::Value: Numeric,
    {
        let name = field.attribute();
        let value = Value::from_serialize(&n);
        let bound = match (&value, <F::Value as Numeric>::RANGE) {
            (Ok(Value::N(n)), Some(range)) => add_bound(name, n, range),
            _ => Ok(None),
        };
        let mut patch = self.push(name, value, UpdateAction::Add);
        match bound {
            Ok(Some(b)) => patch.bounds.push(b),
            Ok(None) => {}
            Err(e) => patch.fail(name, &e),
        }
        patch
    }

    /// Appends `items` to the end of a list field (a missing field counts as empty),
    /// atomically.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Patch, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// # #[dynatree(path = "Posts/{id}")]
    /// # struct Post { id: String, title: String, views: u64, tags: Vec<String>, note: Option<String> }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let posts = tree.repo::<Post>();
    /// let post = Post { id: "p".into(), title: "Hi".into(), views: 0, tags: vec![], note: Some("draft".into()) };
    /// posts.put(&post).await?;
    /// let f = Post::FIELDS;
    /// posts.patch(Patch::new(&post.key()).append(f.tags, ["a"])).await?;
    /// posts.patch(Patch::new(&post.key()).append(f.tags, ["b", "c"])).await?;
    /// assert_eq!(posts.get(&post.key()).await?.unwrap().tags, ["a", "b", "c"]);
    /// # Ok(()) }
    /// ```
    pub fn append<F, U, I>(self, field: F, items: I) -> Self
    where
        F: UpdatableField<T, Value = Vec<U>>,
        I: IntoIterator,
        I::Item: Operand<U>,
    {
        let values: Result<Vec<Value>> = items
            .into_iter()
            .map(|i| Value::from_serialize(&i))
            .collect();
        self.push(
            field.attribute(),
            values.map(Value::L),
            UpdateAction::Append,
        )
    }

    /// Adds `items` to a string set field (DynamoDB `ADD`: a union, atomically; a missing field
    /// counts as empty). The field must be stored as a set, not a list: annotate it with
    /// `#[serde(with = "dynatree::string_set")]` (serde stores every Rust collection as a list
    /// otherwise, and DynamoDB then refuses the patch with
    /// [`ErrorKind::Validation`]). Adding no item changes nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Hierarchical, Patch, Tree};
    /// use dynatree_testing::FakeTable;
    /// use serde::{Deserialize, Serialize};
    /// use std::collections::BTreeSet;
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Posts/{id}")]
    /// struct Post {
    ///     id: String,
    ///     #[serde(with = "dynatree::string_set", default, skip_serializing_if = "BTreeSet::is_empty")]
    ///     tags: BTreeSet<String>,
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// let posts = tree.repo::<Post>();
    /// let key = PostKey { id: "p".into() };
    /// posts.put(&Post { id: "p".into(), tags: BTreeSet::from(["rust".to_owned()]) }).await?;
    /// let f = Post::FIELDS;
    /// posts.patch(Patch::new(&key).add_to_set(f.tags, ["dynamodb", "rust"])).await?;
    /// posts.patch(Patch::new(&key).remove_from_set(f.tags, ["rust"])).await?;
    /// assert_eq!(posts.get(&key).await?.unwrap().tags, BTreeSet::from(["dynamodb".to_owned()]));
    /// # Ok(()) }
    /// ```
    pub fn add_to_set<F, I>(self, field: F, items: I) -> Self
    where
        F: UpdatableField<T>,
        F::Value: StringSetField,
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.set_action(field.attribute(), items, UpdateAction::Add)
    }

    /// Removes `items` from a string set field (DynamoDB `DELETE`, atomically); see
    /// [`add_to_set`](Patch::add_to_set). Removing no item changes nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Patch, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # use std::collections::BTreeSet;
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Posts/{id}")]
    /// struct Post {
    ///     id: String,
    ///     #[serde(with = "dynatree::string_set", default, skip_serializing_if = "BTreeSet::is_empty")]
    ///     tags: BTreeSet<String>,
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let posts = tree.repo::<Post>();
    /// let key = PostKey { id: "p".into() };
    /// posts.put(&Post { id: "p".into(), tags: BTreeSet::from(["a".to_owned(), "b".to_owned()]) }).await?;
    /// // Items not in the set are ignored.
    /// posts.patch(Patch::new(&key).remove_from_set(Post::FIELDS.tags, ["a", "z"])).await?;
    /// assert_eq!(posts.get(&key).await?.unwrap().tags, BTreeSet::from(["b".to_owned()]));
    /// # Ok(()) }
    /// ```
    pub fn remove_from_set<F, I>(self, field: F, items: I) -> Self
    where
        F: UpdatableField<T>,
        F::Value: StringSetField,
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.set_action(field.attribute(), items, UpdateAction::Delete)
    }

    fn set_action<I>(
        mut self,
        name: &'static str,
        items: I,
        f: impl FnOnce(String, Value) -> UpdateAction,
    ) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        // A set value has no duplicates and is not empty (DynamoDB refuses both).
        let items: std::collections::BTreeSet<String> = items.into_iter().map(Into::into).collect();
        if !items.is_empty() {
            self.actions
                .push(f(name.to_owned(), Value::Ss(items.into_iter().collect())));
        }
        self
    }

    /// Applies the patch only if `condition` holds for the stored value (in addition to the
    /// value existing). Calling it again adds to the condition (both must hold).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Patch, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// # #[dynatree(path = "Posts/{id}")]
    /// # struct Post { id: String, title: String, views: u64, tags: Vec<String>, note: Option<String> }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let posts = tree.repo::<Post>();
    /// let post = Post { id: "p".into(), title: "Hi".into(), views: 0, tags: vec![], note: Some("draft".into()) };
    /// posts.put(&post).await?;
    /// let f = Post::FIELDS;
    /// // Count a view only while the post has fewer than 2 (both conditions must hold).
    /// let view = || Patch::new(&post.key()).add(f.views, 1).when(f.views.lt(2)).when(f.title.eq("Hi"));
    /// posts.patch(view()).await?;
    /// posts.patch(view()).await?;
    /// assert!(posts.patch(view()).await.unwrap_err().is_condition_failed());
    /// assert_eq!(posts.get(&post.key()).await?.unwrap().views, 2);
    /// # Ok(()) }
    /// ```
    pub fn when(mut self, condition: Cond<T>) -> Self {
        self.condition = std::mem::replace(&mut self.condition, Cond::always()).and(condition);
        self
    }

    /// The update actions (the version bump included) and the condition on the object row,
    /// checked as DynamoDB would refuse them, before anything is sent. The condition keeps
    /// every number the patch adds to (the version too) inside its type
    /// ([`out_of_range`](Patch::out_of_range) tells which one did not).
    pub(crate) fn plan(
        &self,
        layout: &crate::layout::Layout,
    ) -> Result<(Vec<UpdateAction>, Condition)> {
        if let Some((kind, e)) = &self.error {
            return Err(Error::new(*kind, e.clone()));
        }
        if self.actions.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "a patch needs at least one change",
            ));
        }
        // A copy follows its source: only dynatree writes it (a hand-made `Field` handle
        // could name it; the derive's are read-only).
        for a in &self.actions {
            if let Some(d) = T::DENORMALIZED.iter().find(|d| d.target() == a.name()) {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "`{}` is a denormalized copy of `{}` of {}: it follows its source and cannot be patched",
                        d.target(),
                        d.source_attr(),
                        d.source_template()
                    ),
                ));
            }
        }
        let mut actions = self.actions.clone();
        if let Some(version) = T::VERSION_FIELD {
            actions.push(UpdateAction::Add(
                version.to_owned(),
                Value::N("1".to_owned()),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for a in &actions {
            let name = update_target(a);
            if !seen.insert(name) {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("a patch changes `{name}` twice"),
                ));
            }
        }
        // Neither a fence row (fenced puts) nor a link is a value.
        let mut parts = vec![
            Condition::Exists,
            Condition::attr_not_exists(layout.fence_attr()),
            Condition::attr_not_exists(layout.link_attr()),
            self.condition.clone().into_condition()?,
        ];
        parts.extend(self.bounds().into_iter().map(|b| b.guard));
        Ok((actions, Condition::And(parts)))
    }

    /// The bounds of the additions and of the version bump.
    pub(crate) fn bounds(&self) -> Vec<Bound> {
        let mut bounds = self.bounds.clone();
        if let Some(version) = T::VERSION_FIELD {
            bounds.push(Bound {
                guard: Condition::Not(Box::new(Condition::Compare(
                    version.to_owned(),
                    Comparison::Gt,
                    Value::N((u64::MAX - 1).to_string()),
                ))),
                detail: format!(
                    "the version field is at its maximum ({}) and cannot be incremented",
                    u64::MAX
                ),
            });
        }
        bounds
    }

    /// Why the patch cannot apply to the stored `row`, if an addition (or the version bump)
    /// would take a field outside its type: [`ErrorKind::InvalidValue`], as
    /// [`Repository::update`](crate::Repository::update) refuses a version at its maximum.
    pub(crate) fn out_of_range(&self, row: &Item) -> Option<Error> {
        out_of_range(&self.bounds(), row)
    }
}

/// The error of the first of `bounds` that does not hold for `row`.
pub(crate) fn out_of_range(bounds: &[Bound], row: &Item) -> Option<Error> {
    bounds
        .iter()
        .find(|b| !b.guard.eval(Some(row)))
        .map(|b| Error::new(ErrorKind::InvalidValue, b.detail.clone()))
}

/// The attribute an update action changes.
fn update_target(a: &UpdateAction) -> &str {
    match a {
        UpdateAction::Set(n, _)
        | UpdateAction::Remove(n)
        | UpdateAction::Add(n, _)
        | UpdateAction::Delete(n, _)
        | UpdateAction::Append(n, _) => n,
        #[allow(unreachable_patterns)]
        _ => "",
    }
}

impl<T: Hierarchical, S: crate::storage::Storage + 'static> crate::Repository<T, S> {
    /// Stores `value` only if `condition` holds for what is stored at its path (evaluated
    /// atomically with the write; with nothing stored, conditions on fields do not hold, and
    /// [`Cond::not_exists`] does).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Hierarchical, Tree};
    /// use dynatree_testing::FakeTable;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Jobs/{id}")]
    /// struct Job { id: String, state: String, owner: Option<String> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// let jobs = tree.repo::<Job>();
    /// jobs.put(&Job { id: "j".into(), state: "queued".into(), owner: None }).await?;
    /// let f = Job::FIELDS;
    /// let take = |who: &str| Job { id: "j".into(), state: "running".into(), owner: Some(who.into()) };
    /// // Only one worker takes the job.
    /// jobs.put_if(&take("w1"), f.state.eq("queued")).await?;
    /// let err = jobs.put_if(&take("w2"), f.state.eq("queued")).await.unwrap_err();
    /// assert!(err.is_condition_failed());
    /// assert_eq!(jobs.get(&JobKey { id: "j".into() }).await?.unwrap().owner.as_deref(), Some("w1"));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ConditionFailed`] if the condition does not hold (nothing is written);
    /// [`ErrorKind::Serialization`] if serde cannot store a value of the condition,
    /// [`ErrorKind::InvalidValue`] if DynamoDB could not (NaN, an infinity; nothing is sent);
    /// as [`put`](crate::Repository::put).
    ///
    /// # Cancel safety
    ///
    /// As [`put`](crate::Repository::put).
    pub async fn put_if(&self, value: &T, condition: Cond<T>) -> Result<()> {
        crate::retry::call(self.tree().cx.inner.config.retry, async {
            let condition = txn::live_if(
                &self.tree().cx,
                T::TTL_FIELD.is_some(),
                condition.into_condition()?,
            );
            let (path, row) = self.row(value)?;
            self.write_row(&path, row, &condition).await
        })
        .await
    }

    /// Deletes the value at `key` only if `condition` holds for it, then removes the listing
    /// rows that name nothing any more (as [`delete`](crate::Repository::delete) does).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Hierarchical, Tree};
    /// use dynatree_testing::FakeTable;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Sessions/{id}")]
    /// struct Session { id: String, expires: u64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// let sessions = tree.repo::<Session>();
    /// let s = Session { id: "s".into(), expires: 100 };
    /// sessions.put(&s).await?;
    /// let f = Session::FIELDS;
    /// assert!(sessions.delete_if(&s.key(), f.expires.lt(50)).await.unwrap_err().is_condition_failed());
    /// sessions.delete_if(&s.key(), f.expires.lt(150)).await?;
    /// assert_eq!(sessions.get(&s.key()).await?, None);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ConditionFailed`] if the condition does not hold, or nothing is stored and
    /// the condition names a field (nothing is deleted); [`ErrorKind::Locked`] inside a subtree
    /// a move holds; as [`delete`](crate::Repository::delete).
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have deleted the value; leftover listing rows are
    /// removed by the next delete under them.
    pub async fn delete_if(&self, key: &T::Key, condition: Cond<T>) -> Result<()> {
        crate::retry::call(self.tree().cx.inner.config.retry, async {
            let mut tx = self.tree().transaction();
            tx.delete_if::<T>(key, condition);
            single(tx.commit().await)
        })
        .await
    }

    /// Applies a partial update to the stored value (see [`Patch`]).
    ///
    /// One TransactWriteItems of two actions: the update of the object row and a check of its
    /// listing row (so the update never lands while the value is being removed or moved).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Hierarchical, Patch, Tree};
    /// use dynatree_testing::FakeTable;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Counters/{name}")]
    /// struct Counter { name: String, n: i64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// let counters = tree.repo::<Counter>();
    /// let key = CounterKey { name: "visits".into() };
    /// assert!(counters.patch(Patch::new(&key).add(Counter::FIELDS.n, 1)).await.unwrap_err().is_not_found());
    /// counters.put(&Counter { name: "visits".into(), n: 0 }).await?;
    /// counters.patch(Patch::new(&key).add(Counter::FIELDS.n, 1)).await?;
    /// assert_eq!(counters.get(&key).await?.unwrap().n, 1);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::NotFound`] if no value is stored at the key (or a link is);
    /// [`ErrorKind::ConditionFailed`] if the patch's condition does not hold;
    /// [`ErrorKind::InvalidValue`] if an [`add`](Patch::add) would take the stored number
    /// outside its type's range, or the version field is at `u64::MAX` (as
    /// [`update`](crate::Repository::update) refuses it; nothing is written);
    /// [`ErrorKind::InvalidArgument`] for a patch without changes, changing one field twice or
    /// changing a denormalized copy, [`ErrorKind::Serialization`] for a value serde cannot
    /// store, [`ErrorKind::InvalidValue`] for one DynamoDB cannot (NaN, an infinity; nothing
    /// is sent);
    /// [`ErrorKind::Locked`] inside a subtree a move holds; DynamoDB's refusals
    /// ([`ErrorKind::Validation`]: adding to a field that holds no number, an item over 400 KB).
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have applied the patch (`add` and `append` are not
    /// idempotent: use a [`Transaction`](crate::Transaction) with an idempotency token when
    /// that matters).
    pub async fn patch(&self, patch: Patch<T>) -> Result<()> {
        crate::retry::call(self.tree().cx.inner.config.retry, async {
            let tree = self.tree();
            let path = tree.enter(T::key_path(&patch.key)?)?;
            // A patch DynamoDB or dynatree refuses writes nothing, not even a source's intent.
            patch.plan(tree.cx.layout())?;
            let ty = crate::denorm::TypeInfo::of::<T>();
            let mut stored_version = 0;
            let guard = denorm::before_source_write(&tree.cx, ty, &path).await?;
            let result = self
                .patch_loop(&patch, &path, ty, &mut stored_version)
                .await;
            match result {
                Ok(()) => denorm::propagate_patched(&tree.cx, guard, &path).await,
                Err(e) => {
                    denorm::source_write_failed(&tree.cx, guard, &e).await;
                    Err(e)
                }
            }
        })
        .await
    }

    async fn patch_loop(
        &self,
        patch: &Patch<T>,
        path: &crate::Path,
        ty: crate::denorm::TypeInfo,
        stored_version: &mut u64,
    ) -> Result<()> {
        let tree = self.tree();
        let mut backoff = Backoff::new(tree.cx.config_retry());
        loop {
            // A source is stamped with a version after the stored one, fenced like a put (see
            // `Repository::write_row`).
            let mut attempt_patch = patch.clone();
            let fence = denorm::source_fence(&tree.cx, ty, path, *stored_version);
            if fence.is_none() && backoff.retries() == 0 {
                // Not a source of denormalized fields: one UpdateItem, conditional on the
                // value being there (so its listing row is), live, not a link and not held by
                // a move or copy, and on the patch's condition. Anything else (a failed
                // condition included) takes the transaction below, which tells why.
                let layout = tree.cx.layout();
                let (actions, condition) = patch.plan(layout)?;
                let condition = Condition::And(vec![
                    layout.live(condition, crate::expiry::now_secs()),
                    Condition::attr_not_exists(layout.held_attr()),
                ]);
                match tree
                    .cx
                    .io()
                    .update_item(&layout.object_key(path), actions, condition)
                    .await
                {
                    Ok(_) => return Ok(()),
                    Err(e) if e.is_condition_failed() => {}
                    Err(e) => return Err(e),
                }
            }
            if let Some((stamp, fence)) = fence {
                attempt_patch.actions.push(stamp);
                attempt_patch = attempt_patch.when(Cond::of(fence));
            }
            let mut tx = tree.transaction();
            tx.propagate = false;
            tx.patch(attempt_patch.clone());
            let e = match single(tx.commit().await) {
                Err(e) if e.is_condition_failed() => e,
                Ok(()) => return Ok(()),
                other => return other,
            };
            // Tell a missing value from a condition that does not hold, at one moment: the
            // value as a consistent read sees it. Missing (or a link, or expired): not found.
            // Present and the condition false: the condition failed. Present and the condition
            // true: it changed in between; try again.
            let layout = tree.cx.layout();
            let stored = tree
                .cx
                .io()
                .get_item(&layout.object_key(path), true)
                .await?
                .filter(|row| {
                    !row.contains(layout.link_attr())
                        && !layout.is_absent(row, crate::expiry::now_secs())
                });
            let Some(row) = stored else {
                return Err(Error::new(
                    ErrorKind::NotFound,
                    format!("nothing to patch at {}", T::key_path(&patch.key)?),
                )
                .with_source(e));
            };
            if let Some(v) = denorm::row_version(&tree.cx, path, &row) {
                *stored_version = (*stored_version).max(v);
            }
            if let Some(out) = patch.out_of_range(&row) {
                return Err(out.with_source(e));
            }
            let (_, condition) = patch.plan(layout)?;
            if !condition.eval(Some(&row)) || !backoff.retry().await {
                return Err(e);
            }
        }
    }
}

/// The outcome of a one-action transaction: a failed condition is the caller's
/// [`ErrorKind::ConditionFailed`].
fn single(result: Result<()>) -> Result<()> {
    match result {
        Err(e)
            if e.is_transaction_canceled()
                && e.cancellation_reasons()
                    .first()
                    .is_some_and(crate::error::CancellationReason::is_condition_failed) =>
        {
            Err(Error::new(
                ErrorKind::ConditionFailed,
                "the value's condition does not hold",
            )
            .with_source(e))
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the change the bound guards may apply to a stored `n` (`None`: missing).
    fn allows(bound: &Bound, stored: Option<&str>) -> bool {
        let mut row = Item::new();
        if let Some(n) = stored {
            row.insert("f", Value::N(n.to_owned()));
        }
        bound.guard.eval(Some(&row))
    }

    fn bound<V: Numeric>(n: &str) -> Option<Bound> {
        add_bound("f", n, V::RANGE.expect("an integer type")).expect("a bound")
    }

    #[test]
    fn additions_stay_inside_unsigned_types() {
        let b = bound::<u64>("1").expect("a bound");
        assert!(allows(&b, Some("18446744073709551614")));
        assert!(!allows(&b, Some("18446744073709551615")));
        assert!(allows(&b, None));
        // A subtraction: down to zero, and not from a missing field (zero) below it.
        let b = bound::<u8>("-3").expect("a bound");
        assert!(allows(&b, Some("3")));
        assert!(!allows(&b, Some("2")));
        assert!(!allows(&b, None));
        assert!(bound::<u32>("0").is_none());
    }

    #[test]
    fn additions_stay_inside_signed_types() {
        let b = bound::<i8>("-1").expect("a bound");
        assert!(allows(&b, Some("-127")));
        assert!(!allows(&b, Some("-128")));
        assert!(allows(&b, None));
        let b = bound::<i8>("127").expect("a bound");
        assert!(allows(&b, Some("0")));
        assert!(!allows(&b, Some("1")));
        let b = bound::<i64>("-9223372036854775808").expect("a bound");
        assert!(allows(&b, Some("0")));
        assert!(!allows(&b, Some("-1")));
        assert!(allows(&b, None));
    }

    #[test]
    fn bounds_of_128_bit_types_keep_38_digits() {
        // u128::MAX - 1 has 39 significant digits: the bound is rounded down to a multiple of
        // 10, which a stored 39-digit integer (38 significant digits at most) compares with as
        // with the exact bound.
        let b = bound::<u128>("1").expect("a bound");
        let Condition::Not(outside) = &b.guard else {
            panic!("{:?}", b.guard)
        };
        assert_eq!(
            **outside,
            Condition::Compare(
                "f".into(),
                Comparison::Gt,
                Value::N("340282366920938463463374607431768211450".into())
            )
        );
        assert!(b.guard.check().is_ok());
        assert!(allows(&b, Some("340282366920938463463374607431768211450")));
        assert!(!allows(&b, Some("340282366920938463463374607431768211460")));
        // The lower bound of i128 is rounded up (towards zero).
        let b = bound::<i128>("-1").expect("a bound");
        assert!(b.guard.check().is_ok());
        assert!(allows(&b, Some("-170141183460469231731687303715884105720")));
        assert!(!allows(
            &b,
            Some("-170141183460469231731687303715884105730")
        ));
        assert_eq!(
            bound_text(
                true,
                170_141_183_460_469_231_731_687_303_715_884_105_727,
                false
            )
            .as_deref(),
            Some("-170141183460469231731687303715884105720")
        );
        assert_eq!(
            bound_text(
                true,
                170_141_183_460_469_231_731_687_303_715_884_105_727,
                true
            )
            .as_deref(),
            Some("-170141183460469231731687303715884105730")
        );
        assert_eq!(bound_text(false, 42, true).as_deref(), Some("42"));
    }

    #[test]
    fn floats_have_no_bounds() {
        assert_eq!(<f64 as Numeric>::RANGE, None);
        assert_eq!(<Option<f32> as Numeric>::RANGE, None);
    }
}
