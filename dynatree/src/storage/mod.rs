//! The backend interface, for those who write or wrap a backend: the [`Storage`] trait (one
//! DynamoDB table with a string hash key `Key` and a string range key `Child`, spoken to in
//! dynatree's own types), its requests and pages, raw keys, and batch helpers. Applications
//! only need [`Tree`](crate::Tree) and a backend.
//!
//! Two backends implement it: [`DynamoDbTable`](crate::DynamoDbTable) (feature `dynamodb`) and
//! `dynatree_testing::FakeTable`. Both give DynamoDB's semantics: UTF-8 byte order of keys, 1 MB
//! query pages, 25/100-item batches with partial results, atomic transactions with per-action
//! cancellation reasons.
//!
//! A backend, or a layer around one (retries, fault injection, a simulator's scheduler),
//! implements one method, [`Storage::send`], over a [`Request`] answered with a [`Response`];
//! the typed methods callers use ([`Storage::get_item`], [`Storage::transact_write`], ...)
//! build the request. Requests are values, so a layer is one function over every kind:
//! `dynatree_testing::Faulty` injects faults, the simulator parks requests, the tree's own
//! retry layer resends them, each without a method per kind.

pub(crate) mod batch;
#[cfg(feature = "dynamodb")]
pub(crate) mod dynamodb;
#[cfg(feature = "streams")]
pub(crate) mod dynamodb_stream;
mod expr;
mod number;
pub(crate) mod record;
mod request;
mod settings;
mod stream;

use std::any::Any;
use std::cmp::Ordering;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
pub use batch::{BATCH_GET_MAX, BATCH_WRITE_MAX, TRANSACT_MAX, get_all, write_all};
pub use request::{Op, Request, Response, Unprocessed};
pub use settings::{IndexSettings, TableSettings};
pub(crate) use stream::sequence_after;
pub use stream::{StreamPage, StreamPosition, StreamShard};

pub use crate::item::{Item, MAX_ATTRIBUTE_NAME_BYTES, MAX_ITEM_BYTES, Value};

/// The default reserved character, U+00A6 BROKEN BAR (`C2 A6` in UTF-8).
pub const DEFAULT_RESERVED: char = '¦';
/// The name of the path index's global secondary index (see
/// [`TreeBuilder::path_index`](crate::TreeBuilder::path_index)).
pub const PATH_INDEX: &str = "dynatree_paths";

/// The hash key attribute of a tree table.
pub const HASH_KEY: &str = "Key";
/// The range key attribute of a tree table.
pub const RANGE_KEY: &str = "Child";
/// DynamoDB's limit on a partition key value, in UTF-8 bytes.
pub const MAX_HASH_KEY_BYTES: usize = 2048;
/// DynamoDB's limit on a sort key value, in UTF-8 bytes.
pub const MAX_RANGE_KEY_BYTES: usize = 1024;

/// The primary key of one row: the `Key` (hash) and `Child` (range) strings.
///
/// # Examples
///
/// ```
/// use dynatree::storage::Key;
///
/// let k = Key::new("¦Accounts¦", "123456");
/// let item = k.clone().into_item();
/// assert_eq!(Key::from_item(&item), Some(k));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// The hash key (`Key` attribute).
    pub hash: String,
    /// The range key (`Child` attribute).
    pub range: String,
}

impl Key {
    /// A key from its two strings.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Key;
    ///
    /// let k = Key::new("¦Accounts¦", "123456");
    /// assert_eq!((k.hash.as_str(), k.range.as_str()), ("¦Accounts¦", "123456"));
    /// ```
    pub fn new(hash: impl Into<String>, range: impl Into<String>) -> Self {
        Self {
            hash: hash.into(),
            range: range.into(),
        }
    }

    /// An item holding just this key.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::{HASH_KEY, Key, RANGE_KEY};
    ///
    /// let item = Key::new("h", "r").into_item();
    /// assert_eq!(item.get_s(HASH_KEY), Some("h"));
    /// assert_eq!(item.get_s(RANGE_KEY), Some("r"));
    /// assert_eq!(item.len(), 2);
    /// ```
    pub fn into_item(self) -> Item {
        let mut item = Item::new();
        item.insert(HASH_KEY, Value::S(self.hash));
        item.insert(RANGE_KEY, Value::S(self.range));
        item
    }

    /// The key of an item, if it has both key attributes as strings.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    /// use dynatree::storage::{HASH_KEY, Key};
    ///
    /// let mut item = Key::new("h", "r").into_item();
    /// item.insert("name", Value::S("ann".into()));
    /// assert_eq!(Key::from_item(&item), Some(Key::new("h", "r")));
    /// let mut no_range = Item::new();
    /// no_range.insert(HASH_KEY, Value::S("h".into()));
    /// assert_eq!(Key::from_item(&no_range), None);
    /// ```
    pub fn from_item(item: &Item) -> Option<Self> {
        Some(Self::new(item.get_s(HASH_KEY)?, item.get_s(RANGE_KEY)?))
    }
}

/// A condition on the current state of one item, evaluated atomically with a write.
///
/// Attribute names are top-level attribute names (any characters: backends send them as
/// placeholders, never inline). Values compare as DynamoDB compares them: numbers by value
/// (exactly, not through `f64`), strings and binaries by their bytes; a comparison with an
/// attribute of another type, or a missing one, is false, except [`Comparison::Ne`], which
/// holds unless the attribute exists with an equal value.
///
/// # Examples
///
/// ```
/// use dynatree::{storage::Item, storage::Value};
/// use dynatree::storage::{Comparison, Condition};
///
/// let mut item = Item::new();
/// item.insert("v", Value::N("1".into()));
/// item.insert("tags", Value::Ss(vec!["red".into()]));
/// assert!(Condition::Exists.eval(Some(&item)));
/// assert!(Condition::NotExists.eval(None));
/// assert!(Condition::equals("v", Value::N("1".into())).eval(Some(&item)));
/// assert!(!Condition::attr_exists("w").eval(Some(&item)));
/// assert!(Condition::compare("v", Comparison::Lt, Value::N("10".into())).eval(Some(&item)));
/// assert!(Condition::between("v", Value::N("0".into()), Value::N("1".into())).eval(Some(&item)));
/// assert!(Condition::contains("tags", Value::S("red".into())).eval(Some(&item)));
/// assert!(Condition::not(Condition::attr_exists("w")).eval(Some(&item)));
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub enum Condition {
    /// No condition.
    #[default]
    Always,
    /// The item exists.
    Exists,
    /// The item does not exist.
    NotExists,
    /// The item exists and has this attribute.
    AttrExists(String),
    /// The item does not exist or lacks this attribute.
    AttrNotExists(String),
    /// The item has this attribute with exactly this value.
    Equals(String, Value),
    /// All of these hold.
    And(Vec<Condition>),
    /// At least one of these holds.
    Or(Vec<Condition>),
    /// This does not hold (`NOT`).
    Not(Box<Condition>),
    /// `attribute <op> value`: see [`Comparison`]. `Lt`, `Le`, `Gt` and `Ge` take a number,
    /// string or binary value (DynamoDB refuses other types).
    Compare(String, Comparison, Value),
    /// `attribute BETWEEN low AND high`, both bounds inclusive; the bounds are numbers,
    /// strings or binaries of one type, `low` not above `high` (DynamoDB refuses the rest).
    Between(String, Value, Value),
    /// `begins_with(attribute, value)`: a string or binary attribute starting with the value
    /// (a string or binary).
    BeginsWith(String, Value),
    /// `contains(attribute, value)`: a string attribute with the value as a substring, a
    /// binary one with it as a contiguous run of bytes, a set with it as a member, a list with
    /// it as an element.
    Contains(String, Value),
}

/// How [`Condition::Compare`] compares an attribute with a value (equality is
/// [`Condition::Equals`]).
///
/// # Examples
///
/// ```
/// use dynatree::{storage::Item, storage::Value};
/// use dynatree::storage::{Comparison, Condition};
///
/// let mut item = Item::new();
/// item.insert("n", Value::N("2.5".into()));
/// assert!(Condition::compare("n", Comparison::Gt, Value::N("2.25".into())).eval(Some(&item)));
/// // `<>` holds on a missing attribute; the ordering comparisons do not.
/// assert!(Condition::compare("m", Comparison::Ne, Value::N("1".into())).eval(Some(&item)));
/// assert!(!Condition::compare("m", Comparison::Lt, Value::N("1".into())).eval(Some(&item)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Comparison {
    /// `<>`: not equal (also true when the attribute is missing or of another type).
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Comparison {
    /// The operator as written in a DynamoDB expression (`"<>"`, `"<"`, …).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(dynatree::storage::Comparison::Le.operator(), "<=");
    /// ```
    pub fn operator(self) -> &'static str {
        match self {
            Comparison::Ne => "<>",
            Comparison::Lt => "<",
            Comparison::Le => "<=",
            Comparison::Gt => ">",
            Comparison::Ge => ">=",
        }
    }
}

/// The order of two scalar values of one type (number, string, binary), as DynamoDB orders
/// them; `None` for other types or a mix.
fn order(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::N(a), Value::N(b)) => number::compare(a, b),
        (Value::S(a), Value::S(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
        (Value::B(a), Value::B(b)) => Some(a.cmp(b)),
        _ => None,
    }
}

fn is_scalar_key_type(v: &Value) -> bool {
    matches!(v, Value::N(_) | Value::S(_) | Value::B(_))
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::S(_) => "S",
        Value::N(_) => "N",
        Value::B(_) => "B",
        Value::Bool(_) => "BOOL",
        Value::Null => "NULL",
        Value::L(_) => "L",
        Value::M(_) => "M",
        Value::Ss(_) => "SS",
        Value::Ns(_) => "NS",
        Value::Bs(_) => "BS",
    }
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidArgument, msg)
}

/// Checks an attribute name as DynamoDB checks names (not empty, not too long).
fn check_name(name: &str) -> Result<()> {
    let mut item = Item::new();
    item.insert(name, Value::Null);
    item.check()
        .map_err(|e| invalid(format!("attribute name not valid: {e}")))
}

impl Condition {
    /// [`Condition::AttrExists`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    /// use dynatree::storage::Condition;
    ///
    /// let mut item = Item::new();
    /// item.insert("v", Value::N("1".into()));
    /// assert!(Condition::attr_exists("v").eval(Some(&item)));
    /// assert!(!Condition::attr_exists("w").eval(Some(&item)));
    /// assert!(!Condition::attr_exists("v").eval(None));
    /// ```
    pub fn attr_exists(name: impl Into<String>) -> Self {
        Self::AttrExists(name.into())
    }

    /// [`Condition::AttrNotExists`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    /// use dynatree::storage::Condition;
    ///
    /// let mut item = Item::new();
    /// item.insert("v", Value::N("1".into()));
    /// assert!(Condition::attr_not_exists("w").eval(Some(&item)));
    /// assert!(!Condition::attr_not_exists("v").eval(Some(&item)));
    /// assert!(Condition::attr_not_exists("v").eval(None)); // no item, no attribute
    /// ```
    pub fn attr_not_exists(name: impl Into<String>) -> Self {
        Self::AttrNotExists(name.into())
    }

    /// [`Condition::Equals`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    /// use dynatree::storage::Condition;
    ///
    /// let mut item = Item::new();
    /// item.insert("v", Value::N("1.0".into()));
    /// assert!(Condition::equals("v", Value::N("1".into())).eval(Some(&item))); // by value
    /// assert!(!Condition::equals("v", Value::S("1".into())).eval(Some(&item)));
    /// ```
    pub fn equals(name: impl Into<String>, value: Value) -> Self {
        Self::Equals(name.into(), value)
    }

    /// [`Condition::Not`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Condition;
    ///
    /// assert!(Condition::not(Condition::Exists).eval(None));
    /// ```
    #[allow(clippy::should_implement_trait)]
    pub fn not(condition: Condition) -> Self {
        Self::Not(Box::new(condition))
    }

    /// [`Condition::Compare`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    /// use dynatree::storage::{Comparison, Condition};
    ///
    /// let mut item = Item::new();
    /// item.insert("s", Value::S("b".into()));
    /// assert!(Condition::compare("s", Comparison::Ge, Value::S("a".into())).eval(Some(&item)));
    /// ```
    pub fn compare(name: impl Into<String>, op: Comparison, value: Value) -> Self {
        Self::Compare(name.into(), op, value)
    }

    /// [`Condition::Between`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    /// use dynatree::storage::Condition;
    ///
    /// let mut item = Item::new();
    /// item.insert("n", Value::N("5".into()));
    /// let c = Condition::between("n", Value::N("1".into()), Value::N("5".into()));
    /// assert!(c.eval(Some(&item)));
    /// ```
    pub fn between(name: impl Into<String>, low: Value, high: Value) -> Self {
        Self::Between(name.into(), low, high)
    }

    /// [`Condition::BeginsWith`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    /// use dynatree::storage::Condition;
    ///
    /// let mut item = Item::new();
    /// item.insert("s", Value::S("2026-11-21".into()));
    /// assert!(Condition::begins_with("s", Value::S("2026-".into())).eval(Some(&item)));
    /// ```
    pub fn begins_with(name: impl Into<String>, prefix: Value) -> Self {
        Self::BeginsWith(name.into(), prefix)
    }

    /// [`Condition::Contains`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    /// use dynatree::storage::Condition;
    ///
    /// let mut item = Item::new();
    /// item.insert("l", Value::L(vec![Value::N("1".into()), Value::S("x".into())]));
    /// assert!(Condition::contains("l", Value::N("1.0".into())).eval(Some(&item)));
    /// ```
    pub fn contains(name: impl Into<String>, value: Value) -> Self {
        Self::Contains(name.into(), value)
    }

    /// Evaluates the condition against the item's current state (`None`: absent). Values
    /// compare as DynamoDB compares them: numbers by value, sets regardless of order, strings
    /// and binaries by bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    /// use dynatree::storage::{Comparison, Condition};
    ///
    /// let mut item = Item::new();
    /// item.insert("n", Value::N("10".into()));
    /// let below_20 = Condition::compare("n", Comparison::Lt, Value::N("2e1".into()));
    /// assert!(below_20.eval(Some(&item)));
    /// assert!(!below_20.eval(None)); // an absent item has no attribute to compare
    /// assert!(Condition::Always.eval(None));
    /// ```
    pub fn eval(&self, item: Option<&Item>) -> bool {
        let attr = |n: &str| item.and_then(|i| i.get(n));
        match self {
            Condition::Always => true,
            Condition::Exists => item.is_some(),
            Condition::NotExists => item.is_none(),
            Condition::AttrExists(n) => item.is_some_and(|i| i.contains(n)),
            Condition::AttrNotExists(n) => !item.is_some_and(|i| i.contains(n)),
            Condition::Equals(n, v) => attr(n).is_some_and(|x| x.same_as(v)),
            Condition::And(cs) => cs.iter().all(|c| c.eval(item)),
            Condition::Or(cs) => cs.iter().any(|c| c.eval(item)),
            Condition::Not(c) => !c.eval(item),
            Condition::Compare(n, Comparison::Ne, v) => !attr(n).is_some_and(|x| x.same_as(v)),
            Condition::Compare(n, op, v) => {
                let Some(o) = attr(n).and_then(|x| order(x, v)) else {
                    return false;
                };
                match op {
                    Comparison::Lt => o.is_lt(),
                    Comparison::Le => o.is_le(),
                    Comparison::Gt => o.is_gt(),
                    Comparison::Ge => o.is_ge(),
                    Comparison::Ne => o.is_ne(),
                }
            }
            Condition::Between(n, lo, hi) => attr(n).is_some_and(|x| {
                order(x, lo).is_some_and(Ordering::is_ge)
                    && order(x, hi).is_some_and(Ordering::is_le)
            }),
            Condition::BeginsWith(n, v) => match (attr(n), v) {
                (Some(Value::S(a)), Value::S(p)) => a.as_bytes().starts_with(p.as_bytes()),
                (Some(Value::B(a)), Value::B(p)) => a.starts_with(p),
                _ => false,
            },
            Condition::Contains(n, v) => match (attr(n), v) {
                (Some(Value::S(a)), Value::S(p)) => a.contains(p.as_str()),
                (Some(Value::B(a)), Value::B(p)) => {
                    p.is_empty() || a.windows(p.len()).any(|w| w == p.as_slice())
                }
                (Some(Value::Ss(set)), Value::S(p)) => set.contains(p),
                (Some(Value::Bs(set)), Value::B(p)) => set.contains(p),
                (Some(Value::Ns(set)), Value::N(p)) => set
                    .iter()
                    .any(|m| number::compare(m, p) == Some(Ordering::Equal)),
                (Some(Value::L(list)), v) => list.iter().any(|e| e.same_as(v)),
                _ => false,
            },
        }
    }

    /// Whether this is [`Condition::Always`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Condition;
    ///
    /// assert!(Condition::Always.is_always());
    /// assert!(Condition::default().is_always());
    /// assert!(!Condition::Exists.is_always());
    /// ```
    pub fn is_always(&self) -> bool {
        matches!(self, Condition::Always)
    }

    /// Checks the condition as DynamoDB checks a condition expression before it reads the
    /// item: valid attribute names and values, number, string or binary operands for
    /// `<`, `<=`, `>`, `>=` and `BETWEEN` (whose bounds are of one type, the lower not above
    /// the upper), and a string or binary operand for `begins_with`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Value;
    /// use dynatree::storage::Condition;
    ///
    /// let n = |s: &str| Value::N(s.into());
    /// assert!(Condition::between("v", n("1"), n("2")).check().is_ok());
    /// let e = Condition::between("v", n("2"), n("1")).check().unwrap_err();
    /// assert_eq!(e.kind(), dynatree::ErrorKind::InvalidArgument);
    /// assert!(Condition::begins_with("v", n("1")).check().is_err());
    /// ```
    pub fn check(&self) -> Result<()> {
        let value = |n: &str, v: &Value| {
            check_name(n)?;
            v.check(n)
                .map_err(|e| invalid(format!("condition value not valid: {e}")))
        };
        let operand = |f: &str, v: &Value| {
            invalid(format!(
                "incorrect operand type for operator or function; operator or function: {f}, operand type: {}",
                type_name(v)
            ))
        };
        match self {
            Condition::Always | Condition::Exists | Condition::NotExists => Ok(()),
            Condition::AttrExists(n) | Condition::AttrNotExists(n) => check_name(n),
            Condition::Equals(n, v) => value(n, v),
            Condition::And(cs) | Condition::Or(cs) => cs.iter().try_for_each(Condition::check),
            Condition::Not(c) => c.check(),
            Condition::Compare(n, op, v) => {
                value(n, v)?;
                if *op != Comparison::Ne && !is_scalar_key_type(v) {
                    return Err(operand(op.operator(), v));
                }
                Ok(())
            }
            Condition::Between(n, lo, hi) => {
                value(n, lo)?;
                value(n, hi)?;
                for v in [lo, hi] {
                    if !is_scalar_key_type(v) {
                        return Err(operand("BETWEEN", v));
                    }
                }
                match order(lo, hi) {
                    None => Err(invalid(
                        "the BETWEEN operator requires the same data type for its lower and upper bounds",
                    )),
                    Some(Ordering::Greater) => Err(invalid(
                        "the BETWEEN operator requires its upper bound to be greater than or equal to its lower bound",
                    )),
                    Some(_) => Ok(()),
                }
            }
            Condition::BeginsWith(n, v) => {
                value(n, v)?;
                if !matches!(v, Value::S(_) | Value::B(_)) {
                    return Err(operand("begins_with", v));
                }
                Ok(())
            }
            // Any operand: a set, list or map can be a list's element.
            Condition::Contains(n, v) => value(n, v),
        }
    }
}

/// One action of a partial update ([`Storage::update_item`], [`TransactAction::Update`]):
/// DynamoDB's `UpdateExpression` clauses on top-level attributes.
///
/// DynamoDB's rules, which both backends apply: no action may name a key attribute
/// ([`HASH_KEY`], [`RANGE_KEY`]), no two actions may name one attribute ("two document paths
/// overlap"); the item after the update is at most 400 KB. An update of an absent item
/// creates it (when the condition holds), with its key and what the actions set (with no
/// action: just its key). Inside a transaction an update needs at least one action.
///
/// # Examples
///
/// ```
/// # use dynatree::Tree;
/// # use dynatree::storage::{Condition, Key, Storage, UpdateAction}; use dynatree_testing::FakeTable;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// # let table = FakeTable::new(); Tree::new(table.clone()).create_table().await?;
/// use dynatree::storage::Value;
///
/// let key = Key::new("h", "r");
/// let item = table
///     .update_item(&key, vec![
///         UpdateAction::Set("title".into(), Value::S("hello".into())),
///         UpdateAction::Add("views".into(), Value::N("1".into())),
///         UpdateAction::Append("log".into(), Value::L(vec![Value::S("created".into())])),
///     ], Condition::Always)
///     .await?;
/// assert_eq!(item.get("views"), Some(&Value::N("1".into())));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum UpdateAction {
    /// `SET #n = :v`: the attribute gets this value (any type).
    Set(String, Value),
    /// `REMOVE #n`: the attribute is removed (nothing happens if it is missing).
    Remove(String),
    /// `ADD #n :v`: for a number value, adds it to the attribute (a missing attribute counts
    /// as 0); for a set value, adds its members to the attribute, a set of the same type (a
    /// missing attribute counts as the empty set). Any other value, or an attribute of another
    /// type, is refused.
    Add(String, Value),
    /// `DELETE #n :v`: removes the set value's members from the attribute, a set of the same
    /// type; a set left empty is removed, a missing attribute stays missing. A value that is
    /// not a set, or an attribute of another type, is refused.
    Delete(String, Value),
    /// `SET #n = list_append(if_not_exists(#n, :empty), :v)`: appends the list value's
    /// elements to the attribute, a list (a missing attribute counts as the empty list). A
    /// value that is not a list, or an attribute of another type, is refused.
    Append(String, Value),
}

impl UpdateAction {
    /// The attribute the action changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::UpdateAction;
    ///
    /// assert_eq!(UpdateAction::Remove("a".into()).name(), "a");
    /// ```
    pub fn name(&self) -> &str {
        match self {
            UpdateAction::Set(n, _)
            | UpdateAction::Remove(n)
            | UpdateAction::Add(n, _)
            | UpdateAction::Delete(n, _)
            | UpdateAction::Append(n, _) => n,
        }
    }

    /// The action's value, if it has one.
    fn value(&self) -> Option<&Value> {
        match self {
            UpdateAction::Remove(_) => None,
            UpdateAction::Set(_, v)
            | UpdateAction::Add(_, v)
            | UpdateAction::Delete(_, v)
            | UpdateAction::Append(_, v) => Some(v),
        }
    }

    /// Checks a list of actions as DynamoDB checks an update expression before it reads the
    /// item: no key attribute, no attribute named twice, valid names and values, `ADD` of a
    /// number or a set, `DELETE` of a set, an append of a list. No action at all is valid
    /// (UpdateItem without an update expression: it creates an absent item with just its
    /// key), except inside a transaction.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Value;
    /// use dynatree::storage::UpdateAction;
    ///
    /// let set = |n: &str| UpdateAction::Set(n.into(), Value::Bool(true));
    /// assert!(UpdateAction::check_all(&[set("a"), set("b")]).is_ok());
    /// assert!(UpdateAction::check_all(&[set("a"), set("a")]).is_err()); // overlap
    /// assert!(UpdateAction::check_all(&[set("Key")]).is_err()); // a key attribute
    /// assert!(UpdateAction::check_all(&[]).is_ok());
    /// ```
    pub fn check_all(actions: &[UpdateAction]) -> Result<()> {
        let mut seen = std::collections::HashSet::new();
        for a in actions {
            let n = a.name();
            check_name(n)?;
            if n == HASH_KEY || n == RANGE_KEY {
                return Err(invalid(format!(
                    "cannot update attribute {n}: this attribute is part of the key"
                )));
            }
            if !seen.insert(n) {
                return Err(invalid(format!(
                    "two document paths overlap with each other; must remove or rewrite one of these paths; path one: [{n}], path two: [{n}]"
                )));
            }
            if let Some(v) = a.value() {
                v.check(n)
                    .map_err(|e| invalid(format!("update value not valid: {e}")))?;
            }
            let operand = |op: &str, v: &Value| {
                invalid(format!(
                    "incorrect operand type for operator or function; operator: {op}, operand type: {}",
                    type_name(v)
                ))
            };
            match a {
                UpdateAction::Add(_, v)
                    if !matches!(v, Value::N(_) | Value::Ss(_) | Value::Ns(_) | Value::Bs(_)) =>
                {
                    return Err(operand("ADD", v));
                }
                UpdateAction::Delete(_, v)
                    if !matches!(v, Value::Ss(_) | Value::Ns(_) | Value::Bs(_)) =>
                {
                    return Err(operand("DELETE", v));
                }
                UpdateAction::Append(_, v) if !matches!(v, Value::L(_)) => {
                    return Err(operand("list_append", v));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The item after applying `actions` to `current` (`None`: absent, so the update creates
    /// an item with `key`), as DynamoDB applies an update expression. It first checks the
    /// actions ([`check_all`](UpdateAction::check_all)); the condition is not its business.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for what [`check_all`](UpdateAction::check_all) refuses;
    /// [`ErrorKind::Validation`] (as DynamoDB answers) when an action meets an attribute of
    /// another type, a sum is out of DynamoDB's number range, or the new item is over 400 KB.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{ErrorKind, storage::Item, storage::Value};
    /// use dynatree::storage::{Key, UpdateAction};
    ///
    /// let key = Key::new("h", "r");
    /// let add = |v: Value| vec![UpdateAction::Add("n".into(), v)];
    /// let item = UpdateAction::apply(&key, None, &add(Value::N("2.5".into())))?;
    /// let item = UpdateAction::apply(&key, Some(&item), &add(Value::N("0.5".into())))?;
    /// assert_eq!(item.get("n"), Some(&Value::N("3".into())));
    /// let e = UpdateAction::apply(&key, Some(&item), &add(Value::Ss(vec!["x".into()])));
    /// assert_eq!(e.unwrap_err().kind(), ErrorKind::Validation);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn apply(key: &Key, current: Option<&Item>, actions: &[UpdateAction]) -> Result<Item> {
        Self::check_all(actions)?;
        let mut item = current.cloned().unwrap_or_default();
        item.insert(HASH_KEY, Value::S(key.hash.clone()));
        item.insert(RANGE_KEY, Value::S(key.range.clone()));
        let mismatch = |n: &str| {
            Error::new(
                ErrorKind::Validation,
                format!(
                    "an operand in the update expression has an incorrect data type (attribute {n})"
                ),
            )
        };
        for a in actions {
            let n = a.name();
            let old = item.get(n);
            let new = match (a, old) {
                (UpdateAction::Set(_, v), _) => Some(v.normalized()),
                (UpdateAction::Remove(_), _) => None,
                (UpdateAction::Add(_, Value::N(v)), None) => Some(Value::N(v.clone())),
                (UpdateAction::Add(_, Value::N(v)), Some(Value::N(o))) => {
                    let sum = number::add(o, v).ok_or_else(|| mismatch(n))?;
                    let sum = Value::N(sum);
                    sum.check(n).map_err(|e| {
                        Error::new(
                            ErrorKind::Validation,
                            format!("number overflow: the sum cannot be stored: {e}"),
                        )
                    })?;
                    Some(sum)
                }
                (UpdateAction::Add(_, v), None) => Some(v.clone()),
                (UpdateAction::Add(_, v), Some(o)) => {
                    Some(set_union(o, v).ok_or_else(|| mismatch(n))?)
                }
                (UpdateAction::Delete(_, _), None) => None,
                (UpdateAction::Delete(_, v), Some(o)) => {
                    set_minus(o, v).ok_or_else(|| mismatch(n))?
                }
                (UpdateAction::Append(_, v), None) => Some(v.clone()),
                (UpdateAction::Append(_, Value::L(v)), Some(Value::L(o))) => {
                    Some(Value::L(o.iter().chain(v).cloned().collect()))
                }
                (UpdateAction::Append(..), Some(_)) => return Err(mismatch(n)),
            };
            match new {
                Some(v) => {
                    item.insert(n, v.normalized());
                }
                None => {
                    item.remove(n);
                }
            }
        }
        let size = item.size();
        if size > MAX_ITEM_BYTES {
            return Err(Error::new(
                ErrorKind::Validation,
                format!(
                    "item size to update has exceeded the maximum allowed size ({size} > {MAX_ITEM_BYTES} bytes)"
                ),
            ));
        }
        Ok(item)
    }
}

/// `a ∪ b` for two sets of one type.
fn set_union(a: &Value, b: &Value) -> Option<Value> {
    fn union<T: Clone>(a: &[T], b: &[T], same: impl Fn(&T, &T) -> bool) -> Vec<T> {
        let mut out = a.to_vec();
        for x in b {
            if !out.iter().any(|y| same(x, y)) {
                out.push(x.clone());
            }
        }
        out
    }
    Some(match (a, b) {
        (Value::Ss(a), Value::Ss(b)) => Value::Ss(union(a, b, PartialEq::eq)),
        (Value::Bs(a), Value::Bs(b)) => Value::Bs(union(a, b, PartialEq::eq)),
        (Value::Ns(a), Value::Ns(b)) => Value::Ns(union(a, b, |x, y| {
            number::compare(x, y) == Some(Ordering::Equal)
        })),
        _ => return None,
    })
}

/// `a \ b` for two sets of one type; `Some(None)` when nothing is left.
fn set_minus(a: &Value, b: &Value) -> Option<Option<Value>> {
    fn minus<T: Clone>(a: &[T], b: &[T], same: impl Fn(&T, &T) -> bool) -> Vec<T> {
        a.iter()
            .filter(|x| !b.iter().any(|y| same(x, y)))
            .cloned()
            .collect()
    }
    let left = match (a, b) {
        (Value::Ss(a), Value::Ss(b)) => Value::Ss(minus(a, b, PartialEq::eq)),
        (Value::Bs(a), Value::Bs(b)) => Value::Bs(minus(a, b, PartialEq::eq)),
        (Value::Ns(a), Value::Ns(b)) => Value::Ns(minus(a, b, |x, y| {
            number::compare(x, y) == Some(Ordering::Equal)
        })),
        _ => return None,
    };
    let empty = matches!(&left, Value::Ss(s) if s.is_empty())
        || matches!(&left, Value::Ns(s) if s.is_empty())
        || matches!(&left, Value::Bs(s) if s.is_empty());
    Some((!empty).then_some(left))
}

/// A condition on the range key (`Child`) of a query.
///
/// # Examples
///
/// ```
/// use dynatree::storage::RangeCondition;
///
/// assert!(RangeCondition::BeginsWith("2026-".into()).matches("2026-11-21"));
/// assert!(RangeCondition::Between("b".into(), "d".into()).matches("c"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RangeCondition {
    /// `Child = v`
    Eq(String),
    /// `Child < v`
    Lt(String),
    /// `Child <= v`
    Le(String),
    /// `Child > v`
    Gt(String),
    /// `Child >= v`
    Ge(String),
    /// `Child BETWEEN a AND b` (both inclusive)
    Between(String, String),
    /// `begins_with(Child, v)`
    BeginsWith(String),
}

impl RangeCondition {
    /// Whether `range` satisfies the condition, comparing UTF-8 bytes as DynamoDB does.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::RangeCondition;
    ///
    /// let lt = RangeCondition::Lt("b".into());
    /// assert!(lt.matches("a") && lt.matches("") && !lt.matches("b"));
    /// assert!(!RangeCondition::Eq("é".into()).matches("e"));
    /// // UTF-8 bytes, not code points or locale: "Z" (0x5A) sorts before "a" (0x61).
    /// assert!(RangeCondition::Lt("a".into()).matches("Z"));
    /// ```
    pub fn matches(&self, range: &str) -> bool {
        let r = range.as_bytes();
        match self {
            RangeCondition::Eq(v) => r == v.as_bytes(),
            RangeCondition::Lt(v) => r < v.as_bytes(),
            RangeCondition::Le(v) => r <= v.as_bytes(),
            RangeCondition::Gt(v) => r > v.as_bytes(),
            RangeCondition::Ge(v) => r >= v.as_bytes(),
            RangeCondition::Between(a, b) => r >= a.as_bytes() && r <= b.as_bytes(),
            RangeCondition::BeginsWith(v) => r.starts_with(v.as_bytes()),
        }
    }

    /// The values the condition compares with.
    fn values(&self) -> impl Iterator<Item = &str> {
        let (a, b) = match self {
            RangeCondition::Eq(v)
            | RangeCondition::Lt(v)
            | RangeCondition::Le(v)
            | RangeCondition::Gt(v)
            | RangeCondition::Ge(v)
            | RangeCondition::BeginsWith(v) => (v, None),
            RangeCondition::Between(a, b) => (a, Some(b)),
        };
        std::iter::once(a.as_str()).chain(b.map(String::as_str))
    }

    /// Checks the condition as DynamoDB does before it runs a query: every value is a valid
    /// sort key value (1 to [`MAX_RANGE_KEY_BYTES`] bytes; so `begins_with("")` is refused),
    /// and `Between`'s lower bound is not above its upper bound.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::RangeCondition;
    ///
    /// assert!(RangeCondition::Between("a".into(), "b".into()).check().is_ok());
    /// let e = RangeCondition::Between("b".into(), "a".into()).check().unwrap_err();
    /// assert_eq!(e.kind(), dynatree::ErrorKind::InvalidArgument);
    /// assert!(RangeCondition::BeginsWith(String::new()).check().is_err());
    /// ```
    pub fn check(&self) -> Result<()> {
        for v in self.values() {
            if v.is_empty() {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    "a range key condition cannot compare with an empty string",
                ));
            }
            if v.len() > MAX_RANGE_KEY_BYTES {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "a range key condition value is {} bytes, over DynamoDB's {MAX_RANGE_KEY_BYTES}-byte sort key limit",
                        v.len()
                    ),
                ));
            }
        }
        if let RangeCondition::Between(a, b) = self
            && a.as_bytes() > b.as_bytes()
        {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "`between` needs its lower bound at or below its upper bound",
            ));
        }
        Ok(())
    }

    /// Whether DynamoDB takes a start key (`ExclusiveStartKey`) whose range key is `start` for
    /// a query with this condition, read `forward` or backward.
    ///
    /// DynamoDB (as DynamoDB Local 3.3.1 answers) wants the start key inside the condition,
    /// with one twist: the bound the query reads towards is exclusive even when the condition
    /// includes it. Reading forward, `Le("c")` takes start keys below `"c"`, and `Ge("c")`
    /// those from `"c"` on; reading backward it is the other way round. `Eq(v)` takes `v`
    /// and `BeginsWith(p)` any key starting with `p`. A start key at an included far bound
    /// (the last page ended on it) has nothing after it.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::RangeCondition;
    ///
    /// let le = RangeCondition::Le("c".into());
    /// assert!(le.accepts_start("b", true));
    /// assert!(!le.accepts_start("c", true)); // nothing can follow "c" anyway
    /// assert!(le.accepts_start("c", false));
    /// assert!(!RangeCondition::Ge("c".into()).accepts_start("b", true));
    /// ```
    pub fn accepts_start(&self, start: &str, forward: bool) -> bool {
        let s = start.as_bytes();
        match self {
            RangeCondition::Eq(v) => s == v.as_bytes(),
            RangeCondition::BeginsWith(p) => s.starts_with(p.as_bytes()),
            RangeCondition::Gt(v) => s > v.as_bytes(),
            RangeCondition::Lt(v) => s < v.as_bytes(),
            RangeCondition::Ge(v) => {
                if forward {
                    s >= v.as_bytes()
                } else {
                    s > v.as_bytes()
                }
            }
            RangeCondition::Le(v) => {
                if forward {
                    s < v.as_bytes()
                } else {
                    s <= v.as_bytes()
                }
            }
            RangeCondition::Between(a, b) => {
                if forward {
                    s >= a.as_bytes() && s < b.as_bytes()
                } else {
                    s > a.as_bytes() && s <= b.as_bytes()
                }
            }
        }
    }
}

/// One Query: an exact hash key, an optional range condition, order, limit and consistency.
///
/// # Examples
///
/// ```
/// use dynatree::storage::{Query, RangeCondition};
///
/// let q = Query::new("¦Accounts¦")
///     .with_range(RangeCondition::BeginsWith("12".into()))
///     .with_limit(10)
///     .descending();
/// assert_eq!(q.hash, "¦Accounts¦");
/// assert!(!q.forward);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Query {
    /// The hash key to read.
    pub hash: String,
    /// An optional condition on `Child`.
    pub range: Option<RangeCondition>,
    /// Ascending (`true`, the default) or descending order of `Child`.
    pub forward: bool,
    /// The most items one page evaluates (DynamoDB's `Limit`); pages also stop at 1 MB.
    pub limit: Option<u32>,
    /// Strongly consistent (`true`) or eventually consistent read.
    pub consistent: bool,
}

impl Query {
    /// A query of every item under `hash`, ascending, eventually consistent.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Query;
    ///
    /// let q = Query::new("¦Accounts¦");
    /// assert_eq!(q.hash, "¦Accounts¦");
    /// assert!(q.forward && !q.consistent);
    /// assert_eq!((q.range, q.limit), (None, None));
    /// ```
    pub fn new(hash: impl Into<String>) -> Self {
        Self {
            hash: hash.into(),
            range: None,
            forward: true,
            limit: None,
            consistent: false,
        }
    }

    /// Adds a range condition.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::{Query, RangeCondition};
    ///
    /// let q = Query::new("h").with_range(RangeCondition::BeginsWith("12".into()));
    /// assert_eq!(q.range, Some(RangeCondition::BeginsWith("12".into())));
    /// ```
    pub fn with_range(mut self, range: RangeCondition) -> Self {
        self.range = Some(range);
        self
    }

    /// Sets the page limit.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Query;
    ///
    /// let q = Query::new("h").with_limit(10);
    /// assert_eq!(q.limit, Some(10));
    /// assert!(Query::new("h").with_limit(0).check().is_err()); // DynamoDB wants at least 1
    /// ```
    pub fn with_limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Descending order.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Query;
    ///
    /// assert!(Query::new("h").forward);
    /// assert!(!Query::new("h").descending().forward);
    /// ```
    pub fn descending(mut self) -> Self {
        self.forward = false;
        self
    }

    /// Strongly consistent reads.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Query;
    ///
    /// assert!(Query::new("h").consistent(true).consistent);
    /// assert!(!Query::new("h").consistent(false).consistent);
    /// ```
    pub fn consistent(mut self, consistent: bool) -> Self {
        self.consistent = consistent;
        self
    }

    /// Checks the query as DynamoDB does: a non-empty hash key, a valid range condition (see
    /// [`RangeCondition::check`]), a limit of at least 1.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::{Query, RangeCondition};
    ///
    /// assert!(Query::new("h").check().is_ok());
    /// assert!(Query::new("").check().is_err());
    /// assert!(Query::new("h").with_range(RangeCondition::BeginsWith(String::new())).check().is_err());
    /// ```
    pub fn check(&self) -> Result<()> {
        if self.hash.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "the hash key value of a query cannot be empty",
            ));
        }
        if self.limit == Some(0) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "a query limit must be at least 1",
            ));
        }
        self.range.as_ref().map_or(Ok(()), RangeCondition::check)
    }

    /// Whether DynamoDB takes `start` as this query's `ExclusiveStartKey`: its hash key is the
    /// query's, its range key is not empty, and the range condition takes it (see
    /// [`RangeCondition::accepts_start`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::{Key, Query, RangeCondition};
    ///
    /// let q = Query::new("h").with_range(RangeCondition::Ge("b".into()));
    /// assert!(q.accepts_start(&Key::new("h", "c")));
    /// assert!(!q.accepts_start(&Key::new("h", "a")));
    /// assert!(!q.accepts_start(&Key::new("other", "c")));
    /// ```
    pub fn accepts_start(&self, start: &Key) -> bool {
        start.hash == self.hash
            && !start.range.is_empty()
            && self
                .range
                .as_ref()
                .is_none_or(|c| c.accepts_start(&start.range, self.forward))
    }
}

/// One segment of a parallel Scan: segment `index` of `total` (DynamoDB's `Segment` and
/// `TotalSegments`). Items are assigned to segments by their partition key.
///
/// # Examples
///
/// ```
/// use dynatree::storage::ScanSegment;
/// let s = ScanSegment::new(1, 4)?;
/// assert_eq!((s.index(), s.total()), (1, 4));
/// assert!(ScanSegment::new(4, 4).is_err());
/// assert_eq!(ScanSegment::whole().total(), 1);
/// // Every partition key belongs to exactly one segment of a split.
/// let owners = (0..4).filter(|&i| ScanSegment::new(i, 4).unwrap().holds("¦Accounts¦")).count();
/// assert_eq!(owners, 1);
/// # Ok::<(), dynatree::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ScanSegment {
    index: u32,
    total: u32,
}

impl ScanSegment {
    /// DynamoDB's largest `TotalSegments`.
    pub const MAX_TOTAL: u32 = 1_000_000;

    /// Segment `index` of `total`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] unless `1 <= total <= 1,000,000` and `index < total`
    /// (what DynamoDB accepts).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::ScanSegment;
    /// assert!(ScanSegment::new(0, 1).is_ok());
    /// assert!(ScanSegment::new(0, 0).is_err());
    /// ```
    pub fn new(index: u32, total: u32) -> Result<Self> {
        if total == 0 || total > Self::MAX_TOTAL || index >= total {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "scan segment {index} of {total}: the total must be 1 to {} and the segment below it",
                    Self::MAX_TOTAL
                ),
            ));
        }
        Ok(Self { index, total })
    }

    /// The whole table: segment 0 of 1.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(dynatree::storage::ScanSegment::whole().index(), 0);
    /// ```
    pub fn whole() -> Self {
        Self { index: 0, total: 1 }
    }

    /// This segment's number, from 0.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(dynatree::storage::ScanSegment::new(2, 3)?.index(), 2);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn index(&self) -> u32 {
        self.index
    }

    /// How many segments the table is split into.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(dynatree::storage::ScanSegment::new(2, 3)?.total(), 3);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn total(&self) -> u32 {
        self.total
    }

    /// Whether the items of partition key `hash` belong to this segment, for backends that
    /// split a table themselves (a stable FNV-1a hash of the key, modulo `total`; DynamoDB
    /// uses its own assignment).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::ScanSegment;
    /// assert!(ScanSegment::whole().holds("anything"));
    /// ```
    pub fn holds(&self, hash: &str) -> bool {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in hash.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h % u64::from(self.total) == u64::from(self.index)
    }
}

/// One page of a Query or Scan.
///
/// # Examples
///
/// ```
/// # use dynatree::Tree;
/// # use dynatree::storage::{Condition, Key, Query, Storage}; use dynatree_testing::FakeTable;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// # let table = FakeTable::new(); Tree::new(table.clone()).create_table().await?;
/// for r in ["a", "b", "c"] {
///     table.put_item(Key::new("h", r).into_item(), Condition::Always).await?;
/// }
/// let page = table.query_page(&Query::new("h").with_limit(2), None).await?;
/// assert_eq!(page.items.len(), 2);
/// let rest = table.query_page(&Query::new("h"), page.last_key).await?;
/// assert_eq!(rest.items.len(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Page {
    /// The items of this page, in key order.
    pub items: Vec<Item>,
    /// Where the next page starts; `None` on the last page.
    pub last_key: Option<Key>,
}

/// One request of a BatchWriteItem (see [`storage::write_all`](crate::storage::batch::write_all)).
///
/// # Examples
///
/// ```
/// use dynatree::storage::{Key, WriteRequest};
///
/// let put = WriteRequest::Put(Key::new("h", "r").into_item());
/// let delete = WriteRequest::Delete(Key::new("h", "r"));
/// assert_ne!(put, delete);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum WriteRequest {
    /// Put (replace) an item.
    Put(Item),
    /// Delete the item with this key.
    Delete(Key),
}

/// What a BatchGetItem returned: the items found and the keys DynamoDB left unprocessed.
///
/// # Examples
///
/// ```
/// # use dynatree::Tree;
/// # use dynatree::storage::{Key, Storage}; use dynatree_testing::FakeTable;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// # let table = FakeTable::new(); Tree::new(table.clone()).create_table().await?;
/// let out = table.batch_get(vec![Key::new("h", "missing")], true).await?;
/// assert!(out.items.is_empty() && out.unprocessed.is_empty());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchGetOutput {
    /// Items found, in no particular order.
    pub items: Vec<Item>,
    /// Keys to send again.
    pub unprocessed: Vec<Key>,
}

/// One action of a TransactWriteItems.
///
/// # Examples
///
/// ```
/// # use dynatree::Tree;
/// # use dynatree::storage::{Condition, Key, Storage, TransactAction}; use dynatree_testing::FakeTable;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// # let table = FakeTable::new(); Tree::new(table.clone()).create_table().await?;
/// let err = table
///     .transact_write(vec![
///         TransactAction::Put { item: Key::new("a", "1").into_item(), condition: Condition::Always },
///         TransactAction::ConditionCheck { key: Key::new("b", "1"), condition: Condition::Exists },
///     ])
///     .await
///     .unwrap_err();
/// assert_eq!(err.cancellation_reasons()[1].code(), "ConditionalCheckFailed");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum TransactAction {
    /// Put an item if the condition holds.
    Put {
        /// The whole item, key included.
        item: Item,
        /// Evaluated against the current item.
        condition: Condition,
    },
    /// Delete an item if the condition holds.
    Delete {
        /// The item's key.
        key: Key,
        /// Evaluated against the current item.
        condition: Condition,
    },
    /// Only check a condition on an item.
    ConditionCheck {
        /// The item's key.
        key: Key,
        /// Evaluated against the current item.
        condition: Condition,
    },
    /// Update an item partially if the condition holds (creating it if absent), with the
    /// rules of [`Storage::update_item`].
    ///
    /// ```
    /// # use dynatree::{Tree, storage::Value};
    /// # use dynatree::storage::{Condition, Key, Storage, TransactAction, UpdateAction};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let table = FakeTable::new(); Tree::new(table.clone()).create_table().await?;
    /// let key = Key::new("counters", "hits");
    /// table.transact_write(vec![TransactAction::Update {
    ///     key: key.clone(),
    ///     actions: vec![UpdateAction::Add("n".into(), Value::N("1".into()))],
    ///     condition: Condition::Always,
    /// }]).await?;
    /// let item = table.get_item(&key, true).await?.unwrap();
    /// assert_eq!(item.get("n"), Some(&Value::N("1".into())));
    /// # Ok(()) }
    /// ```
    Update {
        /// The item's key.
        key: Key,
        /// What to change.
        actions: Vec<UpdateAction>,
        /// Evaluated against the current item.
        condition: Condition,
    },
}

impl TransactAction {
    /// The key the action targets.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Item;
    /// use dynatree::storage::{Condition, Key, TransactAction};
    ///
    /// let key = Key::new("h", "r");
    /// let delete = TransactAction::Delete { key: key.clone(), condition: Condition::Exists };
    /// assert_eq!(delete.key(), Some(key.clone()));
    /// let put = TransactAction::Put { item: key.clone().into_item(), condition: Condition::Always };
    /// assert_eq!(put.key(), Some(key));
    /// let keyless = TransactAction::Put { item: Item::new(), condition: Condition::Always };
    /// assert_eq!(keyless.key(), None);
    /// ```
    pub fn key(&self) -> Option<Key> {
        match self {
            TransactAction::Put { item, .. } => Key::from_item(item),
            TransactAction::Delete { key, .. }
            | TransactAction::ConditionCheck { key, .. }
            | TransactAction::Update { key, .. } => Some(key.clone()),
        }
    }

    /// The bytes this action adds to a TransactWriteItems request, as DynamoDB counts them
    /// against [`TRANSACT_MAX_BYTES`]: the item of a put (its [`Item::size`]), the key of any
    /// other action, plus the action's expressions as
    /// [`DynamoDbTable`](crate::DynamoDbTable) writes them: the text of its update and
    /// condition expressions and, for each place a placeholder stands in them, the bytes of the
    /// attribute name or the size of the value it stands for. What an action finds stored does
    /// not count.
    ///
    /// A transaction is refused when its actions add up to more than [`TRANSACT_MAX_BYTES`]:
    /// by the tree before sending, by DynamoDB, and by `dynatree_testing::FakeTable`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    /// use dynatree::storage::{Condition, Key, TransactAction};
    ///
    /// let mut item = Key::new("h", "r").into_item();
    /// item.insert("b", Value::S("x".repeat(1000)));
    /// let put = TransactAction::Put { item: item.clone(), condition: Condition::Always };
    /// assert_eq!(put.payload_size(), item.size());
    /// // `attribute_not_exists(#n0)` (25 bytes), where `#n0` stands for `Key` (3 bytes).
    /// let create = TransactAction::Put { item: item.clone(), condition: Condition::NotExists };
    /// assert_eq!(create.payload_size(), item.size() + 25 + 3);
    /// let delete = TransactAction::Delete { key: Key::new("h", "r"), condition: Condition::Always };
    /// let key = "Key".len() + 1 + "Child".len() + 1;
    /// assert_eq!(delete.payload_size(), key);
    /// // A check always has a condition: `(attribute_exists(#n0) OR attribute_not_exists(#n0))`
    /// // (52 bytes), where `#n0` stands for `Key` twice.
    /// let check = TransactAction::ConditionCheck { key: Key::new("h", "r"), condition: Condition::Always };
    /// assert_eq!(check.payload_size(), key + 52 + 2 * 3);
    /// ```
    pub fn payload_size(&self) -> usize {
        expr::payload_size(self)
    }
}

/// DynamoDB's limit on one TransactWriteItems request: 4 MB (4,194,304 bytes) of
/// [`TransactAction::payload_size`] over all its actions; a request at the limit is accepted.
pub const TRANSACT_MAX_BYTES: usize = 4 * 1024 * 1024;

/// A global secondary index: its name and its key attributes (strings), projecting every
/// attribute.
///
/// # Examples
///
/// ```
/// use dynatree::storage::IndexSpec;
///
/// let ix = IndexSpec::new("by_email", "¦ix.by_email.h", None);
/// assert_eq!(ix.name, "by_email");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IndexSpec {
    /// The index name.
    pub name: String,
    /// The index's hash key attribute.
    pub hash_attr: String,
    /// The index's range key attribute, if any.
    pub range_attr: Option<String>,
}

impl IndexSpec {
    /// An index definition.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::IndexSpec;
    ///
    /// let ix = IndexSpec::new("by_created", "¦ix.by_created.h", Some("¦ix.by_created.r".into()));
    /// assert_eq!(ix.hash_attr, "¦ix.by_created.h");
    /// assert_eq!(ix.range_attr.as_deref(), Some("¦ix.by_created.r"));
    /// ```
    pub fn new(
        name: impl Into<String>,
        hash_attr: impl Into<String>,
        range_attr: Option<String>,
    ) -> Self {
        Self {
            name: name.into(),
            hash_attr: hash_attr.into(),
            range_attr,
        }
    }
}

/// The most attribute names one projection can have: DynamoDB caps an expression string at
/// 4 KB, and the names are sent as the placeholders `#p0,#p1,…,#p700` (4,095 bytes). DynamoDB
/// has no other cap on the number of names.
///
/// # Examples
///
/// ```
/// # use dynatree::Tree;
/// # use dynatree::storage::{Key, MAX_PROJECTION_NAMES, Storage};
/// # use dynatree_testing::FakeTable;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// # let table = FakeTable::new(); Tree::new(table.clone()).create_table().await?;
/// let names: Vec<String> = (0..=MAX_PROJECTION_NAMES).map(|i| format!("a{i}")).collect();
/// let key = Key::new("h", "r");
/// assert!(table.get_item_projected(&key, true, &names[..MAX_PROJECTION_NAMES]).await.is_ok());
/// assert!(table.get_item_projected(&key, true, &names).await.is_err());
/// # Ok(()) }
/// ```
pub const MAX_PROJECTION_NAMES: usize = 701;

/// A Query on a global secondary index (always eventually consistent, as DynamoDB requires).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexQuery {
    /// The index.
    pub index: IndexSpec,
    /// The hash key value to read.
    pub hash: String,
    /// An optional condition on the index's range key.
    pub range: Option<RangeCondition>,
    /// Ascending (`true`) or descending order of the index's range key.
    pub forward: bool,
    /// The most items one page evaluates.
    pub limit: Option<u32>,
    /// The top-level attributes to return (a `ProjectionExpression`, see
    /// [`Storage::get_item_projected`]); `None` or an empty list: every attribute. The page's
    /// [`last`](IndexPage::last) key stays complete whatever the projection.
    pub projection: Option<Vec<String>>,
}

impl IndexQuery {
    /// Whether a page's `last` key can start the next page: DynamoDB refuses a start key
    /// outside the range condition, and a page that ended on the condition's far bound has
    /// nothing after it.
    pub(crate) fn accepts_start(&self, last: &Item) -> bool {
        match (&self.range, &self.index.range_attr) {
            (Some(r), Some(a)) => last
                .get_s(a)
                .is_some_and(|v| r.accepts_start(v, self.forward)),
            _ => true,
        }
    }
}

/// One page of an index query; `last` is DynamoDB's `LastEvaluatedKey` (table and index keys).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexPage {
    /// The items of this page.
    pub items: Vec<Item>,
    /// Where the next page starts; `None` on the last page.
    pub last: Option<Item>,
}

/// How a table is billed when dynatree creates it.
///
/// # Examples
///
/// ```
/// use dynatree::{storage::Billing, Tree};
/// use dynatree_testing::FakeTable;
///
/// let tree = Tree::builder(FakeTable::new())
///     .billing(Billing::Provisioned { read: 5, write: 5 })
///     .build()?;
/// # let _ = tree;
/// # Ok::<(), dynatree::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Billing {
    /// On-demand (pay per request); the default.
    #[default]
    OnDemand,
    /// Provisioned read and write capacity units.
    Provisioned {
        /// Read capacity units.
        read: u64,
        /// Write capacity units.
        write: u64,
    },
}

/// A table's status, as DescribeTable reports it.
///
/// # Examples
///
/// ```
/// # use dynatree::Tree;
/// # use dynatree::storage::{Storage, TableStatus}; use dynatree_testing::FakeTable;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let table = FakeTable::new();
/// Tree::new(table.clone()).create_table().await?;
/// assert_eq!(table.describe_table().await?.unwrap().status, TableStatus::Active);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TableStatus {
    /// Being created.
    Creating,
    /// Ready for use.
    Active,
    /// Any other status (updating, deleting, archived, …).
    Other,
}

/// What DescribeTable says about a table: its status, key schema and billing mode.
///
/// # Examples
///
/// ```
/// use dynatree::storage::Billing;
/// use dynatree::storage::{TableDescription, TableStatus};
///
/// let d = TableDescription {
///     status: TableStatus::Active,
///     hash_key: ("Key".into(), "S".into()),
///     range_key: Some(("Child".into(), "S".into())),
///     billing: Billing::OnDemand,
///     indexes: vec![],
/// };
/// assert!(d.has_tree_schema());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDescription {
    /// The table's status.
    pub status: TableStatus,
    /// Hash key attribute name and scalar type (`"S"`, `"N"`, `"B"`).
    pub hash_key: (String, String),
    /// Range key attribute name and type, if the table has one.
    pub range_key: Option<(String, String)>,
    /// How the table is billed.
    pub billing: Billing,
    /// Its global secondary indexes and their status.
    pub indexes: Vec<(String, TableStatus)>,
}

impl TableDescription {
    /// Whether the key schema is the one a tree needs: `Key` (S) hash, `Child` (S) range.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Billing;
    /// use dynatree::storage::{TableDescription, TableStatus};
    ///
    /// let mut d = TableDescription {
    ///     status: TableStatus::Active,
    ///     hash_key: ("Key".into(), "S".into()),
    ///     range_key: Some(("Child".into(), "S".into())),
    ///     billing: Billing::OnDemand,
    ///     indexes: vec![],
    /// };
    /// assert!(d.has_tree_schema());
    /// d.range_key = Some(("Child".into(), "N".into()));
    /// assert!(!d.has_tree_schema());
    /// d.range_key = None;
    /// assert!(!d.has_tree_schema());
    /// ```
    pub fn has_tree_schema(&self) -> bool {
        self.hash_key == (HASH_KEY.to_owned(), "S".to_owned())
            && self.range_key == Some((RANGE_KEY.to_owned(), "S".to_owned()))
    }
}

/// One DynamoDB table with hash key `Key` (S) and range key `Child` (S).
///
/// Implementations give DynamoDB's semantics and limits, and map failures to [`ErrorKind`]s:
/// [`ConditionFailed`](ErrorKind::ConditionFailed),
/// [`TransactionCanceled`](ErrorKind::TransactionCanceled) with reasons,
/// [`Throttled`](ErrorKind::Throttled), [`Validation`](ErrorKind::Validation),
/// [`TableNotFound`](ErrorKind::TableNotFound), [`Backend`](ErrorKind::Backend).
///
/// # Cancel safety
///
/// Dropping a write's future may or may not have applied the write: the request may have been
/// sent and received. Reads are cancel safe.
///
/// # Examples
///
/// A shared reference or an `Arc` of a table is a table too, so several trees can share one:
///
/// ```
/// # use dynatree::Tree; use dynatree_testing::FakeTable;
/// let table = FakeTable::new();
/// let a = Tree::new(table.clone());
/// let b = Tree::builder(table.clone()).reserved('|').build()?;
/// # let _ = (a, b);
/// # Ok::<(), dynatree::Error>(())
/// ```
///
/// A function generic over the backend:
///
/// ```
/// use dynatree::Result;
/// use dynatree::storage::{Key, Storage};
///
/// async fn exists<S: Storage>(table: &S, key: &Key) -> Result<bool> {
///     Ok(table.get_item(key, true).await?.is_some())
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a dynatree storage backend",
    note = "use `dynatree::DynamoDbTable` or `dynatree_testing::FakeTable`"
)]
pub trait Storage: Send + Sync {
    /// Sends one request and returns its answer: the one method a backend, or a layer around
    /// one, implements. Every other method builds a [`Request`] and calls this; do not
    /// override them, since a layer around this table sends it requests through `send`.
    ///
    /// A backend answers each kind of request with its kind of [`Response`] (a wrong kind
    /// is reported to the caller as [`ErrorKind::Backend`]). A simple backend may ignore a
    /// projection (whole items are a superset, metered the same), answer segment 0 of a
    /// parallel Scan with the whole table and the other segments with nothing, and answer a
    /// TransactGetItems with consistent reads one after the other (not a snapshot);
    /// [`DynamoDbTable`](crate::DynamoDbTable) and `dynatree_testing::FakeTable` do each
    /// as DynamoDB does.
    ///
    /// # Cancel safety
    ///
    /// As for the whole trait: a dropped write may or may not have been applied.
    ///
    /// # Examples
    ///
    /// A layer that refuses every write, around any table:
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind, Result};
    /// use dynatree::storage::{Condition, Item, Key, Request, Response, Storage, Value};
    ///
    /// struct ReadOnly<S>(S);
    ///
    /// impl<S: Storage> Storage for ReadOnly<S> {
    ///     async fn send(&self, request: Request) -> Result<Response> {
    ///         if request.writes() {
    ///             return Err(Error::new(ErrorKind::Validation, "read-only table"));
    ///         }
    ///         self.0.send(request).await
    ///     }
    /// }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<()> {
    /// let table = ReadOnly(dynatree_testing::FakeTable::new());
    /// table.create_table(Default::default(), &[]).await?;
    /// let mut item = Item::new();
    /// item.insert("Key", Value::S("a".into()));
    /// item.insert("Child", Value::S("b".into()));
    /// let e = table.put_item(item, Condition::Always).await.unwrap_err();
    /// assert_eq!(e.kind(), ErrorKind::Validation);
    /// assert_eq!(table.get_item(&Key::new("a", "b"), true).await?, None);
    /// # Ok(()) }
    /// ```
    fn send(&self, request: Request) -> impl Future<Output = Result<Response>> + Send;

    /// GetItem.
    fn get_item(
        &self,
        key: &Key,
        consistent: bool,
    ) -> impl Future<Output = Result<Option<Item>>> + Send {
        let request = Request::GetItem {
            key: key.clone(),
            consistent,
            projection: None,
        };
        let op = request.op();
        async move { self.send(request).await?.into_item(op) }
    }

    /// PutItem with a condition ([`ErrorKind::ConditionFailed`] when it does not hold).
    fn put_item(
        &self,
        item: Item,
        condition: Condition,
    ) -> impl Future<Output = Result<()>> + Send {
        let request = Request::PutItem { item, condition };
        let op = request.op();
        async move { self.send(request).await?.into_done(op) }
    }

    /// DeleteItem with a condition ([`ErrorKind::ConditionFailed`] when it does not hold).
    fn delete_item(
        &self,
        key: &Key,
        condition: Condition,
    ) -> impl Future<Output = Result<()>> + Send {
        let request = Request::DeleteItem {
            key: key.clone(),
            condition,
        };
        let op = request.op();
        async move { self.send(request).await?.into_done(op) }
    }

    /// One page of a Query, starting after `start`.
    fn query_page(
        &self,
        query: &Query,
        start: Option<Key>,
    ) -> impl Future<Output = Result<Page>> + Send {
        let request = Request::Query {
            query: query.clone(),
            start,
        };
        let op = request.op();
        async move { self.send(request).await?.into_page(op) }
    }

    /// One page of a Scan of the whole table, starting after `start`.
    fn scan_page(
        &self,
        limit: Option<u32>,
        start: Option<Key>,
    ) -> impl Future<Output = Result<Page>> + Send {
        let request = Request::Scan {
            segment: None,
            limit,
            start,
        };
        let op = request.op();
        async move { self.send(request).await?.into_page(op) }
    }

    /// One page of one segment of a parallel Scan (`Segment`/`TotalSegments`), starting after
    /// `start`: the segments of one `total` together hold every item exactly once.
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree::storage::{ScanSegment, Storage};
    /// # use dynatree_testing::FakeTable;
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// tree.put(["a", "b"], &V { v: 1 }).await?;
    /// let mut rows = 0;
    /// for i in 0..4 {
    ///     let page = table.scan_segment_page(ScanSegment::new(i, 4)?, None, None).await?;
    ///     rows += page.items.len();
    /// }
    /// assert_eq!(rows, 3);
    /// # Ok(()) }
    /// ```
    fn scan_segment_page(
        &self,
        segment: ScanSegment,
        limit: Option<u32>,
        start: Option<Key>,
    ) -> impl Future<Output = Result<Page>> + Send {
        let request = Request::Scan {
            segment: Some(segment),
            limit,
            start,
        };
        let op = request.op();
        async move { self.send(request).await?.into_page(op) }
    }

    /// BatchGetItem of at most 100 keys; returns the items found and unprocessed keys.
    fn batch_get(
        &self,
        keys: Vec<Key>,
        consistent: bool,
    ) -> impl Future<Output = Result<BatchGetOutput>> + Send {
        let request = Request::BatchGet {
            keys,
            consistent,
            projection: None,
        };
        let op = request.op();
        async move { self.send(request).await?.into_batch_get(op) }
    }

    /// TransactGetItems: the items at `keys` (1 to 100, none twice) as one serializable
    /// snapshot, in the order of `keys` (`None` where nothing is). Billed as transactional
    /// reads: 2 read units per 4 KB of each item.
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree::storage::{Key, Storage};
    /// # use dynatree_testing::FakeTable;
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// tree.put(["a"], &V { v: 1 }).await?;
    /// let rows = table
    ///     .transact_get(vec![Key::new("¦", "a"), Key::new("¦", "b")])
    ///     .await?;
    /// assert!(rows[0].is_some() && rows[1].is_none());
    /// # Ok(()) }
    /// ```
    fn transact_get(
        &self,
        keys: Vec<Key>,
    ) -> impl Future<Output = Result<Vec<Option<Item>>>> + Send {
        let request = Request::TransactGet { keys };
        let op = request.op();
        async move { self.send(request).await?.into_items(op) }
    }

    /// GetItem with a `ProjectionExpression`: only the named top-level attributes of the item
    /// that it has (an item that has none of them is an empty [`Item`]; a missing item is
    /// `None`). An empty `projection` means every attribute. Names are sent as placeholders
    /// (`#p0,#p1,…`), never inline, so any name is valid.
    ///
    /// The key attributes (`Key`, `Child`) are not added: like DynamoDB, the result holds them
    /// only if `projection` names them. The read is metered by the size of the whole item, as
    /// DynamoDB does ("projection expression has no effect on provisioned throughput
    /// consumption": capacity is determined by item size, not by the data returned).
    ///
    /// Refused like DynamoDB refuses it ([`ErrorKind::Validation`]): a name given twice ("two
    /// document paths overlap"), an empty name, more names than fit in DynamoDB's 4 KB
    /// expression string (more than [`MAX_PROJECTION_NAMES`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Tree, storage::Value};
    /// # use dynatree::storage::{Condition, Key, Storage};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let table = FakeTable::new(); Tree::new(table.clone()).create_table().await?;
    /// let key = Key::new("h", "r");
    /// let mut item = key.clone().into_item();
    /// item.insert("name", Value::S("Ada".into()));
    /// item.insert("bio", Value::S("x".repeat(10_000)));
    /// table.put_item(item, Condition::Always).await?;
    ///
    /// let got = table.get_item_projected(&key, true, &["name".into()]).await?.unwrap();
    /// assert_eq!(got.names().collect::<Vec<_>>(), ["name"]); // no key attributes
    /// let none = table.get_item_projected(&key, true, &["missing".into()]).await?;
    /// assert!(none.is_some_and(|item| item.is_empty()));
    /// # Ok(()) }
    /// ```
    fn get_item_projected(
        &self,
        key: &Key,
        consistent: bool,
        projection: &[String],
    ) -> impl Future<Output = Result<Option<Item>>> + Send {
        let request = Request::GetItem {
            key: key.clone(),
            consistent,
            projection: Some(projection.to_vec()),
        };
        let op = request.op();
        async move { self.send(request).await?.into_item(op) }
    }

    /// BatchGetItem of at most 100 keys with a `ProjectionExpression` (the same for every key;
    /// see [`get_item_projected`](Storage::get_item_projected) for the names, the metering and
    /// the refusals). An empty `projection` means every attribute.
    ///
    /// Items come back in no particular order: to tell which key an item belongs to, name the
    /// key attributes ([`HASH_KEY`], [`RANGE_KEY`]) in `projection`; they are not added.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Tree, storage::Value};
    /// # use dynatree::storage::{Condition, HASH_KEY, Key, RANGE_KEY, Storage};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let table = FakeTable::new(); Tree::new(table.clone()).create_table().await?;
    /// for r in ["a", "b"] {
    ///     let mut item = Key::new("h", r).into_item();
    ///     item.insert("n", Value::N("1".into()));
    ///     item.insert("other", Value::Bool(true));
    ///     table.put_item(item, Condition::Always).await?;
    /// }
    /// let keys = vec![Key::new("h", "a"), Key::new("h", "b")];
    /// let names = [HASH_KEY.to_owned(), RANGE_KEY.to_owned(), "n".to_owned()];
    /// let out = table.batch_get_projected(keys, true, &names).await?;
    /// assert_eq!(out.items.len(), 2);
    /// for item in &out.items {
    ///     assert!(Key::from_item(item).is_some());
    ///     assert!(item.contains("n") && !item.contains("other"));
    /// }
    /// # Ok(()) }
    /// ```
    fn batch_get_projected(
        &self,
        keys: Vec<Key>,
        consistent: bool,
        projection: &[String],
    ) -> impl Future<Output = Result<BatchGetOutput>> + Send {
        let request = Request::BatchGet {
            keys,
            consistent,
            projection: Some(projection.to_vec()),
        };
        let op = request.op();
        async move { self.send(request).await?.into_batch_get(op) }
    }

    /// BatchWriteItem of at most 25 requests; returns the unprocessed requests.
    fn batch_write(
        &self,
        requests: Vec<WriteRequest>,
    ) -> impl Future<Output = Result<Vec<WriteRequest>>> + Send {
        let request = Request::BatchWrite { requests };
        let op = request.op();
        async move { self.send(request).await?.into_unprocessed(op) }
    }

    /// TransactWriteItems of at most 100 actions, no two on one item, atomically.
    fn transact_write(
        &self,
        actions: Vec<TransactAction>,
    ) -> impl Future<Output = Result<()>> + Send {
        let request = Request::TransactWrite {
            actions,
            token: None,
        };
        let op = request.op();
        async move { self.send(request).await?.into_done(op) }
    }

    /// CreateTable with the tree schema and these global secondary indexes. `Ok(false)` if the
    /// table already exists (the caller then checks its schema with
    /// [`describe_table`](Storage::describe_table)).
    fn create_table(
        &self,
        billing: Billing,
        indexes: &[IndexSpec],
    ) -> impl Future<Output = Result<bool>> + Send {
        let request = Request::CreateTable {
            billing,
            indexes: indexes.to_vec(),
        };
        let op = request.op();
        async move { self.send(request).await?.into_created(op) }
    }

    /// UpdateTable: adds a global secondary index to an existing table.
    fn add_index(
        &self,
        billing: Billing,
        index: &IndexSpec,
    ) -> impl Future<Output = Result<()>> + Send {
        let request = Request::AddIndex {
            billing,
            index: index.clone(),
        };
        let op = request.op();
        async move { self.send(request).await?.into_done(op) }
    }

    /// One page of a Query on a global secondary index, starting after `start`.
    fn query_index_page(
        &self,
        query: &IndexQuery,
        start: Option<Item>,
    ) -> impl Future<Output = Result<IndexPage>> + Send {
        let request = Request::QueryIndex {
            query: query.clone(),
            start,
        };
        let op = request.op();
        async move { self.send(request).await?.into_index_page(op) }
    }

    /// DescribeTable; `None` if the table does not exist.
    fn describe_table(&self) -> impl Future<Output = Result<Option<TableDescription>>> + Send {
        let request = Request::DescribeTable;
        let op = request.op();
        async move { self.send(request).await?.into_table(op) }
    }

    /// UpdateItem with `ReturnValues` `ALL_NEW`: applies `actions` (see [`UpdateAction`]) if
    /// `condition` holds, creating the item if it is absent, and returns the item after the
    /// update.
    ///
    /// Refused like DynamoDB refuses it ([`ErrorKind::Validation`]): an action on a key
    /// attribute, two actions on one attribute, an `ADD` of something else than a number or
    /// set, a `DELETE` of something else than a set, an append of something else than a list,
    /// an action meeting an attribute of another type, an item over 400 KB after the update.
    /// [`ErrorKind::ConditionFailed`] when the condition does not hold. No action at all
    /// (UpdateItem without an update expression) is valid: it creates an absent item with
    /// just its key, as DynamoDB does.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Tree, storage::Value};
    /// # use dynatree::storage::{Comparison, Condition, Key, Storage, UpdateAction};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let table = FakeTable::new(); Tree::new(table.clone()).create_table().await?;
    /// let key = Key::new("h", "r");
    /// let bump = || vec![UpdateAction::Add("version".into(), Value::N("1".into()))];
    /// let item = table.update_item(&key, bump(), Condition::Always).await?;
    /// assert_eq!(item.get("version"), Some(&Value::N("1".into())));
    /// let below_one = Condition::compare("version", Comparison::Lt, Value::N("1".into()));
    /// let e = table.update_item(&key, bump(), below_one).await.unwrap_err();
    /// assert!(e.is_condition_failed());
    /// # Ok(()) }
    /// ```
    fn update_item(
        &self,
        key: &Key,
        actions: Vec<UpdateAction>,
        condition: Condition,
    ) -> impl Future<Output = Result<Item>> + Send {
        let request = Request::UpdateItem {
            key: key.clone(),
            actions,
            condition,
        };
        let op = request.op();
        async move { self.send(request).await?.into_updated(op) }
    }

    /// TransactWriteItems with a `ClientRequestToken` (1 to 36 characters): within 10
    /// minutes, sending the same actions with the same token again succeeds without applying
    /// them a second time (so a transaction whose response was lost can be sent again
    /// safely); the same token with other actions is refused with [`ErrorKind::Validation`]
    /// and service code `IdempotentParameterMismatchException`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Tree, storage::Value};
    /// # use dynatree::storage::{Condition, Key, Storage, TransactAction, UpdateAction};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let table = FakeTable::new(); Tree::new(table.clone()).create_table().await?;
    /// let key = Key::new("h", "r");
    /// let add = || vec![TransactAction::Update {
    ///     key: key.clone(),
    ///     actions: vec![UpdateAction::Add("n".into(), Value::N("1".into()))],
    ///     condition: Condition::Always,
    /// }];
    /// table.transact_write_idempotent(add(), "request-1").await?;
    /// table.transact_write_idempotent(add(), "request-1").await?; // not applied again
    /// let item = table.get_item(&key, true).await?.unwrap();
    /// assert_eq!(item.get("n"), Some(&Value::N("1".into())));
    /// # Ok(()) }
    /// ```
    fn transact_write_idempotent(
        &self,
        actions: Vec<TransactAction>,
        token: &str,
    ) -> impl Future<Output = Result<()>> + Send {
        let request = Request::TransactWrite {
            actions,
            token: Some(token.to_owned()),
        };
        let op = request.op();
        async move { self.send(request).await?.into_done(op) }
    }

    /// UpdateTimeToLive: enables DynamoDB's time to live on `attribute` (items whose
    /// attribute is a number of epoch seconds in the past are deleted in the background, some
    /// time later). Nothing happens if it is already enabled on `attribute`; DynamoDB refuses
    /// another attribute while one is enabled ([`ErrorKind::Validation`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::Storage; use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let table = FakeTable::new(); Tree::new(table.clone()).create_table().await?;
    /// assert_eq!(table.ttl_attribute().await?, None);
    /// table.enable_ttl("expires").await?;
    /// table.enable_ttl("expires").await?;
    /// assert_eq!(table.ttl_attribute().await?.as_deref(), Some("expires"));
    /// assert!(table.enable_ttl("other").await.is_err());
    /// # Ok(()) }
    /// ```
    fn enable_ttl(&self, attribute: &str) -> impl Future<Output = Result<()>> + Send {
        let request = Request::EnableTtl {
            attribute: attribute.to_owned(),
        };
        let op = request.op();
        async move { self.send(request).await?.into_done(op) }
    }

    /// DescribeTimeToLive: the time-to-live attribute if time to live is enabled (or being
    /// enabled), else `None`.
    fn ttl_attribute(&self) -> impl Future<Output = Result<Option<String>>> + Send {
        let request = Request::TtlAttribute;
        let op = request.op();
        async move { self.send(request).await?.into_ttl_attribute(op) }
    }

    /// UpdateTable: enables the table's stream with the view type `NEW_AND_OLD_IMAGES` (what
    /// [`Tree::apply_changes`](crate::Tree::apply_changes) needs). Nothing happens if it is
    /// already enabled with that view type; another view type is refused
    /// ([`ErrorKind::Validation`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::Storage; use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let table = FakeTable::new(); Tree::new(table.clone()).create_table().await?;
    /// table.enable_stream().await?;
    /// table.enable_stream().await?; // already on: nothing to do
    /// # Ok(()) }
    /// ```
    fn enable_stream(&self) -> impl Future<Output = Result<()>> + Send {
        let request = Request::EnableStream;
        let op = request.op();
        async move { self.send(request).await?.into_done(op) }
    }

    /// DescribeStream: the shards of the table's stream, parents before their children.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::NotFound`] when the table's stream is not enabled.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::Storage; use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let table = FakeTable::new(); Tree::new(table.clone()).create_table().await?;
    /// table.enable_stream().await?;
    /// let shards = table.stream_shards().await?;
    /// assert!(shards.iter().any(|s| !s.is_closed()));
    /// # Ok(()) }
    /// ```
    fn stream_shards(&self) -> impl Future<Output = Result<Vec<StreamShard>>> + Send {
        let request = Request::StreamShards;
        let op = request.op();
        async move { self.send(request).await?.into_shards(op) }
    }

    /// GetRecords: at most `limit` records of `shard` from `position`, and where to read on.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::CursorExpired`] when the stream no longer holds `position` (trimmed after
    /// 24 hours, or a continuation too old); [`ErrorKind::NotFound`] for a shard the stream
    /// does not have.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::{Condition, Key, Storage, StreamPosition}; use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let table = FakeTable::new(); Tree::new(table.clone()).create_table().await?;
    /// table.enable_stream().await?;
    /// table.put_item(Key::new("h", "r").into_item(), Condition::Always).await?;
    /// let mut read = 0;
    /// for shard in table.stream_shards().await? {
    ///     let page = table.stream_page(shard.id(), StreamPosition::TrimHorizon, 100).await?;
    ///     read += page.records.len();
    /// }
    /// assert_eq!(read, 1);
    /// # Ok(()) }
    /// ```
    fn stream_page(
        &self,
        shard: &str,
        position: StreamPosition,
        limit: u32,
    ) -> impl Future<Output = Result<StreamPage>> + Send {
        let request = Request::StreamRecords {
            shard: shard.to_owned(),
            position,
            limit,
        };
        let op = request.op();
        async move { self.send(request).await?.into_records(op) }
    }
}

/// Forwards each request to `**self`.
macro_rules! forward_storage {
    ($($target:ty),*) => {$(
        impl<S: Storage + ?Sized> Storage for $target {
            fn send(&self, request: Request) -> impl Future<Output = Result<Response>> + Send {
                (**self).send(request)
            }
        }
    )*};
}

// A shared reference or an `Arc` of a table is a table: several trees (or a tree and your own
// code) can use one backend.
forward_storage!(&S, std::sync::Arc<S>);

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// [`Storage`] with a boxed future, so that it can be a trait object.
trait ErasedStorage: Send + Sync + 'static {
    fn send(&self, request: Request) -> BoxFuture<'_, Response>;
    fn as_any(&self) -> &dyn Any;
}

impl<S: Storage + 'static> ErasedStorage for S {
    fn send(&self, request: Request) -> BoxFuture<'_, Response> {
        Box::pin(Storage::send(self, request))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Any [`Storage`] behind one type: what a [`Tree`](crate::Tree) holds unless you ask for
/// static dispatch. Cloning it is cloning an `Arc`.
///
/// [`downcast_ref`](SharedStorage::downcast_ref) gets the concrete backend back (for example a
/// test's `FakeTable`, to read its metrics).
///
/// # Examples
///
/// ```
/// use dynatree::Tree;
/// use dynatree::storage::SharedStorage;
/// use dynatree_testing::FakeTable;
///
/// let tree = Tree::new(FakeTable::new());
/// let shared: &SharedStorage = tree.storage();
/// assert!(shared.downcast_ref::<FakeTable>().is_some());
/// // Wrapping a `SharedStorage` again does not nest it.
/// let again = SharedStorage::new(shared.clone());
/// assert!(again.downcast_ref::<FakeTable>().is_some());
/// ```
#[derive(Clone)]
pub struct SharedStorage(Arc<dyn ErasedStorage>);

impl SharedStorage {
    /// Erases the type of `storage`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::{SharedStorage, Storage};
    /// use dynatree_testing::FakeTable;
    ///
    /// let shared = SharedStorage::new(FakeTable::new());
    /// assert!(shared.downcast_ref::<FakeTable>().is_some());
    /// fn takes_storage(_: &impl Storage) {}
    /// takes_storage(&shared); // a backend itself
    /// ```
    pub fn new<S: Storage + 'static>(storage: S) -> Self {
        match (&storage as &dyn Any).downcast_ref::<SharedStorage>() {
            Some(shared) => shared.clone(),
            None => Self(Arc::new(storage)),
        }
    }

    /// The backend, if it is an `S`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::SharedStorage;
    /// use dynatree_testing::FakeTable;
    ///
    /// let shared = SharedStorage::new(FakeTable::new());
    /// let fake: &FakeTable = shared.downcast_ref().expect("a FakeTable");
    /// assert!(fake.rows().is_empty());
    /// assert!(shared.downcast_ref::<SharedStorage>().is_none()); // never nested
    /// ```
    pub fn downcast_ref<S: Storage + 'static>(&self) -> Option<&S> {
        self.0.as_any().downcast_ref::<S>()
    }
}

impl fmt::Debug for SharedStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedStorage").finish_non_exhaustive()
    }
}

// Each method forwards to the boxed future of the erased backend; spelled as `async move`
// blocks so that each borrowed argument keeps its own lifetime.
#[allow(clippy::manual_async_fn)]
impl Storage for SharedStorage {
    fn send(&self, request: Request) -> impl Future<Output = Result<Response>> + Send {
        self.0.send(request)
    }
}

/// Turns a missing-key invariant into an error rather than a panic.
#[cfg(feature = "dynamodb")]
pub(crate) fn key_of(item: &Item) -> Result<Key> {
    Key::from_item(item).ok_or_else(|| {
        Error::new(
            ErrorKind::Backend,
            "row without string `Key` and `Child` attributes",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_conditions_compare_bytes() {
        // "Z" < "a" < "¦" in UTF-8 byte order.
        assert!(RangeCondition::Lt("a".into()).matches("Z"));
        assert!(RangeCondition::Gt("a".into()).matches("¦"));
        assert!(RangeCondition::Between("b".into(), "d".into()).matches("c"));
        assert!(RangeCondition::BeginsWith("ab".into()).matches("abc"));
    }

    fn n(v: &str) -> Value {
        Value::N(v.into())
    }

    fn sample() -> Item {
        let mut item = Key::new("h", "r").into_item();
        item.insert("n", n("-2.5"));
        item.insert("s", Value::S("abc".into()));
        item.insert("b", Value::B(vec![0, 255]));
        item.insert("ss", Value::Ss(vec!["a".into()]));
        item.insert("ns", Value::Ns(vec!["10".into()]));
        item.insert("bs", Value::Bs(vec![vec![1]]));
        item.insert("l", Value::L(vec![Value::Null, n("1")]));
        item
    }

    #[test]
    fn comparisons_by_type() {
        use Comparison::*;
        let item = sample();
        let holds = |c: Condition| c.eval(Some(&item));
        assert!(holds(Condition::compare("n", Lt, n("-2.4"))));
        assert!(holds(Condition::compare("n", Le, n("-2.50"))));
        assert!(!holds(Condition::compare("n", Gt, n("-2.5"))));
        assert!(holds(Condition::compare("n", Ge, n("-25e-1"))));
        assert!(holds(Condition::compare("s", Gt, Value::S("abb".into()))));
        assert!(holds(Condition::compare(
            "b",
            Gt,
            Value::B(vec![0, 254, 9])
        )));
        // Mixed types and missing attributes: false, but for `<>`.
        assert!(!holds(Condition::compare("s", Lt, n("1"))));
        assert!(!holds(Condition::compare("x", Ge, n("1"))));
        assert!(holds(Condition::compare("s", Ne, n("1"))));
        assert!(holds(Condition::compare("x", Ne, n("1"))));
        assert!(!holds(Condition::compare("n", Ne, n("-2.50"))));
        assert!(Condition::compare("x", Ne, n("1")).eval(None));
        assert!(!Condition::compare("x", Lt, n("1")).eval(None));
    }

    #[test]
    fn between_begins_with_contains_not() {
        let item = sample();
        let holds = |c: Condition| c.eval(Some(&item));
        assert!(holds(Condition::between("n", n("-3"), n("-2.5"))));
        assert!(!holds(Condition::between("n", n("-2.4"), n("0"))));
        assert!(!holds(Condition::between("s", n("0"), n("1"))));
        assert!(holds(Condition::begins_with("s", Value::S("ab".into()))));
        assert!(holds(Condition::begins_with("b", Value::B(vec![0]))));
        assert!(!holds(Condition::begins_with("b", Value::S("a".into()))));
        assert!(holds(Condition::contains("s", Value::S("bc".into()))));
        assert!(holds(Condition::contains("b", Value::B(vec![255]))));
        assert!(holds(Condition::contains("ss", Value::S("a".into()))));
        assert!(holds(Condition::contains("ns", n("1e1"))));
        assert!(holds(Condition::contains("bs", Value::B(vec![1]))));
        assert!(holds(Condition::contains("l", Value::Null)));
        assert!(holds(Condition::contains("l", n("1.0"))));
        assert!(!holds(Condition::contains("ss", Value::S("b".into()))));
        assert!(!holds(Condition::contains("n", n("2"))));
        assert!(holds(Condition::not(Condition::contains("x", n("1")))));
        assert!(!holds(Condition::not(Condition::Exists)));
    }

    #[test]
    fn checks_operands() {
        use Comparison::*;
        let bad = [
            Condition::between("n", n("2"), n("1")),
            Condition::between("n", n("1"), Value::S("2".into())),
            Condition::between("n", Value::Null, Value::Null),
            Condition::compare("n", Lt, Value::Bool(true)),
            Condition::begins_with("s", n("1")),
            Condition::equals("", n("1")),
            Condition::not(Condition::compare("n", Ge, Value::L(vec![]))),
            Condition::Or(vec![Condition::Always, Condition::equals("n", n("NaN"))]),
        ];
        for c in bad {
            assert_eq!(
                c.check().unwrap_err().kind(),
                ErrorKind::InvalidArgument,
                "{c:?}"
            );
        }
        assert!(
            Condition::compare("n", Ne, Value::L(vec![]))
                .check()
                .is_ok()
        );
        assert!(Condition::contains("l", Value::Null).check().is_ok());
        assert!(
            Condition::contains("l", Value::Ss(vec!["a".into()]))
                .check()
                .is_ok()
        );
    }

    #[test]
    fn updates_apply_dynamodb_rules() {
        let key = Key::new("h", "r");
        let item = sample();
        let apply = |actions: Vec<UpdateAction>| UpdateAction::apply(&key, Some(&item), &actions);
        let new = apply(vec![
            UpdateAction::Add("n".into(), n("2.5")),
            UpdateAction::Add("ss".into(), Value::Ss(vec!["a".into(), "b".into()])),
            UpdateAction::Delete("ns".into(), Value::Ns(vec!["10.0".into()])),
            UpdateAction::Append("l".into(), Value::L(vec![n("2")])),
            UpdateAction::Remove("s".into()),
            UpdateAction::Set("new".into(), n("01.0")),
        ])
        .unwrap();
        assert_eq!(new.get("n"), Some(&n("0")));
        assert_eq!(
            new.get("ss"),
            Some(&Value::Ss(vec!["a".into(), "b".into()]))
        );
        assert!(!new.contains("ns") && !new.contains("s"));
        assert_eq!(
            new.get("l"),
            Some(&Value::L(vec![Value::Null, n("1"), n("2")]))
        );
        assert_eq!(new.get("new"), Some(&n("1")));
        assert_eq!(Key::from_item(&new), Some(key.clone()));
        // Created from nothing.
        let created =
            UpdateAction::apply(&key, None, &[UpdateAction::Add("c".into(), n("5"))]).unwrap();
        assert_eq!(created.len(), 3);
        // Refusals.
        let kind = |actions: Vec<UpdateAction>| apply(actions).unwrap_err().kind();
        assert_eq!(apply(vec![]).unwrap(), item);
        assert_eq!(
            kind(vec![UpdateAction::Remove(HASH_KEY.into())]),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            kind(vec![
                UpdateAction::Remove("a".into()),
                UpdateAction::Set("a".into(), n("1"))
            ]),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            kind(vec![UpdateAction::Add("x".into(), Value::S("1".into()))]),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            kind(vec![UpdateAction::Delete(
                "ss".into(),
                Value::S("a".into())
            )]),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            kind(vec![UpdateAction::Append("x".into(), n("1"))]),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            kind(vec![UpdateAction::Add("s".into(), n("1"))]),
            ErrorKind::Validation
        );
        assert_eq!(
            kind(vec![UpdateAction::Add(
                "ss".into(),
                Value::Ns(vec!["1".into()])
            )]),
            ErrorKind::Validation
        );
        assert_eq!(
            kind(vec![UpdateAction::Delete(
                "n".into(),
                Value::Ns(vec!["1".into()])
            )]),
            ErrorKind::Validation
        );
        assert_eq!(
            kind(vec![UpdateAction::Append("s".into(), Value::L(vec![]))]),
            ErrorKind::Validation
        );
        assert_eq!(
            kind(vec![UpdateAction::Add("n".into(), n("9.9E125"))]),
            ErrorKind::Validation
        );
        assert_eq!(
            kind(vec![UpdateAction::Set(
                "big".into(),
                Value::B(vec![0; MAX_ITEM_BYTES])
            )]),
            ErrorKind::Validation
        );
    }
}
