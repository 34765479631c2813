//! Denormalized ancestor fields: the declarations, and how copies follow their sources.
//!
//! A field marked `#[dynatree(from = Forum::name)]` holds a copy of a field of an ancestor
//! type (one whose path template the type's template extends). The derive checks at compile
//! time that the source type is a strict ancestor, that it has the field, and that the target
//! field's type can hold it (the same type, or an `Option` of it); it records each declaration
//! as a [`Denormalized`] in [`Hierarchical::DENORMALIZED`](crate::Hierarchical::DENORMALIZED).
//! Chains are allowed (a `Post` copies `Forum::name`, a `Comment` copies `Post::forum_name`);
//! cycles are impossible, since every source is a strict ancestor. An `Option` target is
//! `None` while its source is missing or removed.
//!
//! # Propagation
//!
//! A tree propagates to the target types it knows: those registered with
//! [`TreeBuilder::denormalized`](crate::TreeBuilder::denormalized), or used through
//! [`Tree::repo`](crate::Tree::repo) in this process. Two ways, chosen on the builder
//! ([`Propagation`]):
//!
//! - **Inline** (the default). A target written (`put`, `create`, `update`, `put_if`,
//!   `put_all`, in a [`Transaction`](crate::Transaction)) has its copies filled from its
//!   ancestors' rows (one BatchGetItem); a typed put's transaction checks that those sources
//!   did not change meanwhile (else it fills again), `put_all` and transactions read them
//!   again after the write. A source written (the
//!   same calls, `patch`, an untyped [`Tree::put`](crate::Tree::put) at a source's path) is
//!   stamped with a version (`SC sv`, a hybrid logical clock), fenced so that versions of one
//!   source follow commit order, recorded as an intent (one PutItem), then copied to every
//!   target below it by conditional UpdateItems (`SC dv.<field>`: a copy only moves forward),
//!   and the intent deleted. A failure or crash leaves the intent: [`Tree::resume`](crate::Tree::resume)
//!   finishes it. Beyond [`inline_limit`](crate::TreeBuilder::inline_limit) targets the copies
//!   are written by a background task under the same intent. A moved subtree (moves, copies,
//!   re-parenting deletes) is filled from its new ancestors before the move's intent ends; a
//!   removed source clears the optional copies below it.
//! - **Stream.** Writes only stamp sources; [`Tree::apply_changes`](crate::Tree::apply_changes)
//!   turns the table's stream records into the same conditional writes, fed by
//!   `changes::StreamConsumer` (feature `streams`), `changes::lambda::handle` (feature
//!   `lambda`) or `dynatree_testing::FakeTable::stream_reader`.
//!
//! The invariants and their argument: the [`consistency`](crate::consistency) docs,
//! "Denormalized fields".
//!
//! # Examples
//!
//! ```
//! use dynatree::{denorm::Denormalized, Hierarchical};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Hierarchical, Serialize, Deserialize)]
//! #[dynatree(path = "Forums/{forum}")]
//! struct Forum { forum: String, name: String }
//!
//! #[derive(Hierarchical, Serialize, Deserialize)]
//! #[dynatree(path = "Forums/{forum}/Threads/{thread}")]
//! struct Thread {
//!     forum: String,
//!     thread: String,
//!     title: String,
//!     #[dynatree(from = Forum::name)]
//!     forum_name: Option<String>,
//! }
//!
//! assert_eq!(
//!     Thread::DENORMALIZED,
//!     &[Denormalized::new("forum_name", "Forums/{forum}", "name", true)]
//! );
//! ```

/// One denormalized field of a type: its attribute, and the source type's template and
/// attribute it copies.
///
/// # Examples
///
/// ```
/// use dynatree::denorm::Denormalized;
///
/// let d = Denormalized::new("forum_name", "Forums/{forum}", "name", false);
/// assert_eq!((d.target(), d.source_template(), d.source_attr(), d.optional()),
///            ("forum_name", "Forums/{forum}", "name", false));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Denormalized {
    target: &'static str,
    source_template: &'static str,
    source_attr: &'static str,
    optional: bool,
}

impl Denormalized {
    /// A declaration: the target attribute, the source type's path template, the source
    /// attribute, and whether the target is an `Option` (cleared when the source is missing).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::denorm::Denormalized;
    /// const D: Denormalized = Denormalized::new("t", "A/{a}", "s", true);
    /// assert!(D.optional());
    /// ```
    pub const fn new(
        target: &'static str,
        source_template: &'static str,
        source_attr: &'static str,
        optional: bool,
    ) -> Self {
        Self {
            target,
            source_template,
            source_attr,
            optional,
        }
    }

    /// The attribute the copy is stored under.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::denorm::Denormalized;
    /// assert_eq!(Denormalized::new("t", "A/{a}", "s", true).target(), "t");
    /// ```
    pub const fn target(&self) -> &'static str {
        self.target
    }

    /// The path template of the source type.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::denorm::Denormalized;
    /// assert_eq!(Denormalized::new("t", "A/{a}", "s", true).source_template(), "A/{a}");
    /// ```
    pub const fn source_template(&self) -> &'static str {
        self.source_template
    }

    /// The attribute of the source type that is copied.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::denorm::Denormalized;
    /// assert_eq!(Denormalized::new("t", "A/{a}", "s", true).source_attr(), "s");
    /// ```
    pub const fn source_attr(&self) -> &'static str {
        self.source_attr
    }

    /// Whether the target is an `Option` (cleared when the source is removed or missing).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::denorm::Denormalized;
    /// assert!(!Denormalized::new("t", "A/{a}", "s", false).optional());
    /// ```
    pub const fn optional(&self) -> bool {
        self.optional
    }
}

/// A field type that can hold a copy of a source field of type `V`: `V` itself, or
/// `Option<V>`.
///
/// # Examples
///
/// ```
/// use dynatree::denorm::DenormTarget;
/// assert!(!<String as DenormTarget<String>>::OPTIONAL);
/// assert!(<Option<String> as DenormTarget<String>>::OPTIONAL);
/// ```
#[diagnostic::on_unimplemented(
    message = "a `{Self}` field cannot hold a copy of a `{V}` field",
    note = "a `#[dynatree(from = ...)]` field has the source field's type, or an `Option` of it"
)]
pub trait DenormTarget<V> {
    /// Whether the target is an `Option`.
    const OPTIONAL: bool;
}

impl<V> DenormTarget<V> for V {
    const OPTIONAL: bool = false;
}

impl<V> DenormTarget<V> for Option<V> {
    const OPTIONAL: bool = true;
}

/// What the tree needs to know of a stored type for denormalized fields, without the type:
/// its template and its declarations.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TypeInfo {
    pub(crate) template: &'static str,
    pub(crate) denormalized: &'static [Denormalized],
}

impl TypeInfo {
    /// `T`'s.
    pub(crate) fn of<T: crate::Hierarchical>() -> Self {
        Self {
            template: T::TEMPLATE,
            denormalized: T::DENORMALIZED,
        }
    }
}

/// Who copies denormalized fields ([`Denormalized`]) from their sources to
/// their targets: the write that changes a source, before it returns (the default), or a
/// processor of the table's stream ([`Tree::apply_changes`](crate::Tree::apply_changes)).
///
/// # Examples
///
/// ```
/// use dynatree::{denorm::Propagation, Tree};
/// use dynatree_testing::FakeTable;
///
/// let tree = Tree::builder(FakeTable::new()).propagation(Propagation::Stream).build()?;
/// assert_eq!(tree.propagation(), Propagation::Stream);
/// # Ok::<(), dynatree::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Propagation {
    /// A write of a source copies it to the targets below it before it returns (in the
    /// background, finished by [`Tree::resume`](crate::Tree::resume), beyond
    /// [`inline_limit`](crate::TreeBuilder::inline_limit) targets); a write of a target fills its
    /// copies from its ancestors.
    #[default]
    Inline,
    /// Writes only stamp sources with their versions; the changes reach the targets when the
    /// table's stream is processed ([`Tree::apply_changes`](crate::Tree::apply_changes)). [`Tree::create_table`](crate::Tree::create_table) enables
    /// the stream.
    Stream,
}
