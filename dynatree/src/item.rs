//! dynatree's own attribute values and items, independent of any SDK.
//!
//! The [`Storage`](crate::storage::Storage) trait speaks these types so that backends (the AWS SDK, the
//! in-memory fake) can change without breaking users.

use std::collections::{BTreeMap, HashSet};

use serde::{Serialize, de::DeserializeOwned};

use crate::error::{Error, ErrorKind, Result};

pub(crate) mod convert;
mod de;
pub(crate) mod json;
mod probe;

pub(crate) use probe::struct_fields;

/// DynamoDB's item size limit: 400 KB, attribute names included.
pub const MAX_ITEM_BYTES: usize = 400 * 1024;

/// DynamoDB's limit on an attribute name (map keys included), in UTF-8 bytes: names must be
/// "less than 64 KB".
pub const MAX_ATTRIBUTE_NAME_BYTES: usize = 65535;

/// DynamoDB's number limits: 38 significant digits, magnitude from 1E-130 to
/// 9.9999999999999999999999999999999999999E+125 (or zero).
const MAX_NUMBER_DIGITS: usize = 38;
const MAX_NUMBER_EXPONENT: i64 = 125;
const MIN_NUMBER_EXPONENT: i64 = -130;

/// One DynamoDB attribute value.
///
/// # Examples
///
/// ```
/// use dynatree::storage::Value;
///
/// let v = Value::S("hello".into());
/// assert_eq!(v.size(), 5);
/// assert_eq!(Value::N("12345".into()).size(), 4); // ceil(5 digits / 2) + 1
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string.
    S(String),
    /// A number, as DynamoDB's decimal string.
    N(String),
    /// Binary data.
    B(Vec<u8>),
    /// A boolean.
    Bool(bool),
    /// The null value.
    Null,
    /// A list.
    L(Vec<Value>),
    /// A map.
    M(BTreeMap<String, Value>),
    /// A string set.
    Ss(Vec<String>),
    /// A number set.
    Ns(Vec<String>),
    /// A binary set.
    Bs(Vec<Vec<u8>>),
}

impl Value {
    /// The value's size by DynamoDB's rules (the attribute name is not included).
    ///
    /// Strings and binaries count their bytes; numbers about one byte per two significant
    /// digits plus one; booleans and null one byte; lists and maps three bytes plus one byte per
    /// element plus the elements (map keys included).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Value;
    ///
    /// assert_eq!(Value::S("héllo".into()).size(), 6); // UTF-8 bytes
    /// assert_eq!(Value::N("-1.5".into()).size(), 3); // 2 digits: 1 + 1, and 1 for the sign
    /// assert_eq!(Value::Bool(true).size(), 1);
    /// assert_eq!(Value::L(vec![Value::S("ab".into())]).size(), 3 + 1 + 2);
    /// ```
    pub fn size(&self) -> usize {
        match self {
            Value::S(s) => s.len(),
            Value::N(n) => number_size(n),
            Value::B(b) => b.len(),
            Value::Bool(_) | Value::Null => 1,
            Value::L(l) => 3 + l.iter().map(|v| 1 + v.size()).sum::<usize>(),
            Value::M(m) => 3 + m.iter().map(|(k, v)| 1 + k.len() + v.size()).sum::<usize>(),
            Value::Ss(s) => s.iter().map(String::len).sum(),
            Value::Ns(s) => s.iter().map(|n| number_size(n)).sum(),
            Value::Bs(s) => s.iter().map(Vec::len).sum(),
        }
    }

    /// The string, if this is a string value.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Value;
    ///
    /// assert_eq!(Value::S("a".into()).as_s(), Some("a"));
    /// assert_eq!(Value::N("1".into()).as_s(), None);
    /// ```
    pub fn as_s(&self) -> Option<&str> {
        match self {
            Value::S(s) => Some(s),
            _ => None,
        }
    }

    /// Checks the value against DynamoDB's rules: numbers (no NaN or infinity, at most 38
    /// significant digits, magnitude from 1E-130 to 9.99…E+125, or zero), sets (not empty, no
    /// duplicates; numbers compared by value), map keys (not empty, at most
    /// [`MAX_ATTRIBUTE_NAME_BYTES`]). `name` is the attribute's name, used in the error.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidValue`] for a number or set DynamoDB refuses,
    /// [`ErrorKind::InvalidAttribute`] for a map key it refuses; the detail names the path
    /// (`profile.scores[2]`).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{ErrorKind, storage::Value};
    ///
    /// assert!(Value::N("1e-130".into()).check("v").is_ok());
    /// let e = Value::N(f64::NAN.to_string()).check("v").unwrap_err();
    /// assert_eq!(e.kind(), ErrorKind::InvalidValue);
    /// let dup = Value::L(vec![Value::Ns(vec!["1".into(), "1.0".into()])]);
    /// assert_eq!(dup.check("v").unwrap_err().to_string(),
    ///     "invalid attribute value: attribute `v[0]`: the set has duplicate members");
    /// ```
    pub fn check(&self, name: &str) -> Result<()> {
        let mut path = vec![Seg::Name(name)];
        check_value(self, &mut path)
    }

    /// The value as DynamoDB stores it: numbers (sets' members too) in canonical decimal form
    /// (`"1.50"` → `"1.5"`, `"1e3"` → `"1000"`, `"-0"` → `"0"`). Numbers that are not valid
    /// DynamoDB numbers are left as they are.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Value;
    ///
    /// assert_eq!(Value::N("001.50".into()).normalized(), Value::N("1.5".into()));
    /// assert_eq!(Value::N("1e3".into()).normalized(), Value::N("1000".into()));
    /// ```
    #[must_use]
    pub fn normalized(&self) -> Value {
        match self {
            Value::N(n) => Value::N(normalize_number(n)),
            Value::Ns(ns) => Value::Ns(ns.iter().map(|n| normalize_number(n)).collect()),
            Value::L(l) => Value::L(l.iter().map(Value::normalized).collect()),
            Value::M(m) => Value::M(m.iter().map(|(k, v)| (k.clone(), v.normalized())).collect()),
            other => other.clone(),
        }
    }

    /// Whether two values are equal as DynamoDB compares them in a condition: numbers by
    /// value, sets regardless of order.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Value;
    ///
    /// assert!(Value::N("1".into()).same_as(&Value::N("1.0".into())));
    /// assert!(Value::Ss(vec!["a".into(), "b".into()]).same_as(&Value::Ss(vec!["b".into(), "a".into()])));
    /// assert!(!Value::S("1".into()).same_as(&Value::N("1".into())));
    /// ```
    pub fn same_as(&self, other: &Value) -> bool {
        fn set<T: Ord + Clone>(v: &[T]) -> Vec<T> {
            let mut v = v.to_vec();
            v.sort();
            v.dedup();
            v
        }
        match (self, other) {
            (Value::N(a), Value::N(b)) => normalize_number(a) == normalize_number(b),
            (Value::Ss(a), Value::Ss(b)) => set(a) == set(b),
            (Value::Bs(a), Value::Bs(b)) => set(a) == set(b),
            (Value::Ns(a), Value::Ns(b)) => {
                let n =
                    |v: &[String]| set(&v.iter().map(|n| normalize_number(n)).collect::<Vec<_>>());
                n(a) == n(b)
            }
            (Value::L(a), Value::L(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same_as(y))
            }
            (Value::M(a), Value::M(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|((ka, va), (kb, vb))| ka == kb && va.same_as(vb))
            }
            (a, b) => a == b,
        }
    }
}

/// One step of an attribute path: a map key or a list index.
#[derive(Debug, Clone, Copy)]
enum Seg<'a> {
    Name(&'a str),
    Index(usize),
}

fn path_string(path: &[Seg<'_>]) -> String {
    let mut s = String::new();
    for (i, seg) in path.iter().enumerate() {
        match seg {
            Seg::Name(n) if i == 0 => s.push_str(n),
            Seg::Name(n) => {
                s.push('.');
                s.push_str(n);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

fn invalid_value(path: &[Seg<'_>], what: &str) -> Error {
    Error::new(
        ErrorKind::InvalidValue,
        format!("attribute `{}`: {what}", path_string(path)),
    )
}

/// Checks an attribute (or map key) name.
fn check_name(name: &str, path: &[Seg<'_>]) -> Result<()> {
    if name.is_empty() {
        let at = if path.is_empty() {
            String::new()
        } else {
            format!(" in `{}`", path_string(path))
        };
        return Err(Error::new(
            ErrorKind::InvalidAttribute,
            format!("attribute names cannot be empty{at}"),
        ));
    }
    if name.len() > MAX_ATTRIBUTE_NAME_BYTES {
        let at = if path.is_empty() {
            String::new()
        } else {
            format!(" in `{}`", path_string(path))
        };
        return Err(Error::new(
            ErrorKind::InvalidAttribute,
            format!(
                "an attribute name{at} is {} bytes, over DynamoDB's {MAX_ATTRIBUTE_NAME_BYTES}-byte limit",
                name.len()
            ),
        ));
    }
    Ok(())
}

fn check_value<'a>(v: &'a Value, path: &mut Vec<Seg<'a>>) -> Result<()> {
    match v {
        Value::N(n) => {
            check_number(n).map_err(|what| invalid_value(path, &what))?;
        }
        Value::Ss(s) => {
            check_set(s.len(), s.iter().collect::<HashSet<_>>().len(), path)?;
        }
        Value::Bs(s) => {
            check_set(s.len(), s.iter().collect::<HashSet<_>>().len(), path)?;
        }
        Value::Ns(s) => {
            let mut seen = HashSet::new();
            for n in s {
                let d = check_number(n).map_err(|what| invalid_value(path, &what))?;
                seen.insert(d.to_string());
            }
            check_set(s.len(), seen.len(), path)?;
        }
        Value::L(l) => {
            for (i, v) in l.iter().enumerate() {
                path.push(Seg::Index(i));
                check_value(v, path)?;
                path.pop();
            }
        }
        Value::M(m) => {
            for (k, v) in m {
                check_name(k, path)?;
                path.push(Seg::Name(k));
                check_value(v, path)?;
                path.pop();
            }
        }
        Value::S(_) | Value::B(_) | Value::Bool(_) | Value::Null => {}
    }
    Ok(())
}

fn check_set(len: usize, distinct: usize, path: &[Seg<'_>]) -> Result<()> {
    if len == 0 {
        return Err(invalid_value(path, "a set cannot be empty"));
    }
    if distinct != len {
        return Err(invalid_value(path, "the set has duplicate members"));
    }
    Ok(())
}

/// A DynamoDB number: sign, significant digits (no leading or trailing zeros; empty for zero)
/// and the decimal exponent of the first significant digit.
struct Decimal {
    negative: bool,
    digits: String,
    exponent: i64,
}

impl Decimal {
    /// Parses DynamoDB's number syntax: an optional sign, digits with an optional decimal point,
    /// an optional exponent (`e`/`E`, optional sign, digits).
    fn parse(s: &str) -> Option<Self> {
        let b = s.as_bytes();
        let mut i = 0;
        let negative = match b.first() {
            Some(b'-') => {
                i = 1;
                true
            }
            Some(b'+') => {
                i = 1;
                false
            }
            _ => false,
        };
        let digits_from = |i: &mut usize| {
            let start = *i;
            while *i < b.len() && b[*i].is_ascii_digit() {
                *i += 1;
            }
            &s[start..*i]
        };
        let int = digits_from(&mut i);
        let mut frac = "";
        if b.get(i) == Some(&b'.') {
            i += 1;
            frac = digits_from(&mut i);
        }
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        let mut exp: i64 = 0;
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            let neg = match b.get(i) {
                Some(b'-') => {
                    i += 1;
                    true
                }
                Some(b'+') => {
                    i += 1;
                    false
                }
                _ => false,
            };
            let e = digits_from(&mut i);
            if e.is_empty() {
                return None;
            }
            let e = e.trim_start_matches('0');
            // Anything this long is out of range whatever the mantissa (zero aside).
            exp = if e.len() > 15 {
                i64::MAX / 4
            } else {
                e.parse().unwrap_or(0)
            };
            if neg {
                exp = -exp;
            }
        }
        if i != b.len() {
            return None;
        }
        let all: String = [int, frac].concat();
        let trimmed = all.trim_start_matches('0');
        if trimmed.is_empty() {
            return Some(Self {
                negative: false,
                digits: String::new(),
                exponent: 0,
            });
        }
        let lead = (all.len() - trimmed.len()) as i64;
        let int_len = int.len() as i64;
        Some(Self {
            negative,
            digits: trimmed.trim_end_matches('0').to_owned(),
            exponent: (int_len - 1 - lead).saturating_add(exp),
        })
    }
}

impl std::fmt::Display for Decimal {
    /// Plain decimal notation, as DynamoDB returns numbers.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.digits.is_empty() {
            return f.write_str("0");
        }
        if self.negative {
            f.write_str("-")?;
        }
        let d = &self.digits;
        if self.exponent >= 0 {
            let int_len = usize::try_from(self.exponent)
                .unwrap_or(usize::MAX)
                .saturating_add(1);
            if d.len() > int_len {
                write!(f, "{}.{}", &d[..int_len], &d[int_len..])
            } else {
                write!(f, "{d}{}", "0".repeat(int_len - d.len()))
            }
        } else {
            let zeros = usize::try_from(-self.exponent - 1).unwrap_or(0);
            write!(f, "0.{}{d}", "0".repeat(zeros))
        }
    }
}

/// Checks one number against DynamoDB's rules; the error says what is wrong.
fn check_number(n: &str) -> std::result::Result<Decimal, String> {
    let d = Decimal::parse(n).ok_or_else(|| format!("{n:?} is not a DynamoDB number"))?;
    if d.digits.len() > MAX_NUMBER_DIGITS {
        return Err(format!(
            "{n} has {} significant digits; DynamoDB keeps at most {MAX_NUMBER_DIGITS}",
            d.digits.len()
        ));
    }
    if !d.digits.is_empty() && d.exponent > MAX_NUMBER_EXPONENT {
        return Err(format!(
            "{n} is too large for DynamoDB (at most 9.9999999999999999999999999999999999999E+125)"
        ));
    }
    if !d.digits.is_empty() && d.exponent < MIN_NUMBER_EXPONENT {
        return Err(format!(
            "{n} is too small for DynamoDB (at least 1E-130 in magnitude, or zero)"
        ));
    }
    Ok(d)
}

/// The canonical form of a valid number; an invalid one unchanged.
fn normalize_number(n: &str) -> String {
    match check_number(n) {
        Ok(d) => d.to_string(),
        Err(_) => n.to_owned(),
    }
}

fn number_size(n: &str) -> usize {
    let negative = n.starts_with('-');
    let mantissa = n.split(['e', 'E']).next().unwrap_or("");
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let significant = digits.trim_start_matches('0').trim_end_matches('0');
    let count = significant.len().max(1);
    count.div_ceil(2) + 1 + usize::from(negative)
}

/// One DynamoDB item: attribute names to values, kept sorted by name.
///
/// # Examples
///
/// ```
/// use dynatree::{storage::Item, storage::Value};
///
/// let mut item = Item::new();
/// item.insert("Key", Value::S("¦a".into()));
/// item.insert("Child", Value::S("¦".into()));
/// assert_eq!(item.get_s("Key"), Some("¦a"));
/// assert_eq!(item.size(), 3 + 3 + 5 + 2);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Item {
    attrs: BTreeMap<String, Value>,
}

impl Item {
    /// An empty item.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Item;
    ///
    /// let item = Item::new();
    /// assert!(item.is_empty());
    /// assert_eq!(item.size(), 0);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Converts any serializable value that serializes as a map (a struct, a map) to an item.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Serialization`](crate::ErrorKind::Serialization) if the value does not
    /// serialize to a map of DynamoDB attributes.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    ///
    /// #[derive(serde::Serialize)]
    /// struct User { name: String, age: u32 }
    ///
    /// let item = Item::from_serialize(&User { name: "ann".into(), age: 41 })?;
    /// assert_eq!(item.get_s("name"), Some("ann"));
    /// assert_eq!(item.get("age"), Some(&Value::N("41".into())));
    /// assert!(Item::from_serialize(&42u8).unwrap_err().is_serialization()); // not a map
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn from_serialize<T: Serialize + ?Sized>(value: &T) -> Result<Self> {
        let raw: serde_dynamo::Item = serde_dynamo::to_item(value).map_err(|e| {
            Error::serialization("value does not serialize as a map of attributes", e)
        })?;
        let map: std::collections::HashMap<String, serde_dynamo::AttributeValue> = raw.into();
        Ok(Self {
            attrs: map
                .into_iter()
                .map(|(k, v)| (k, convert::from_serde_dynamo(v)))
                .collect(),
        })
    }

    /// Converts this item into any deserializable type.
    ///
    /// Reads what `serde_dynamo` writes, and tables written by the Go library: `NULL` (which
    /// aws-sdk-go stores for an empty string, a nil slice or a nil map) reads as `""` into a
    /// string, as an empty sequence or map, and as `None` into an `Option`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Serialization`](crate::ErrorKind::Serialization) if the attributes do not
    /// match `T`; the detail names the attribute's path.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    /// use std::collections::BTreeMap;
    ///
    /// #[derive(serde::Deserialize, Debug, PartialEq)]
    /// struct Profile { name: String, nick: Option<String> }
    /// #[derive(serde::Deserialize, Debug, PartialEq)]
    /// struct User { profile: Profile }
    ///
    /// // As the Go library writes an empty name: NULL.
    /// let mut item = Item::new();
    /// item.insert("profile", Value::M(BTreeMap::from([
    ///     ("name".to_owned(), Value::Null),
    ///     ("nick".to_owned(), Value::Null),
    /// ])));
    /// let user: User = item.to_deserialize()?;
    /// assert_eq!(user.profile, Profile { name: String::new(), nick: None });
    ///
    /// item.insert("profile", Value::M(BTreeMap::from([("name".to_owned(), Value::N("7".into()))])));
    /// let err = item.to_deserialize::<User>().unwrap_err();
    /// assert!(err.to_string().contains("attribute `profile.name`: invalid type"), "{err}");
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn to_deserialize<T: DeserializeOwned>(&self) -> Result<T> {
        de::from_attrs(&self.attrs)
    }

    /// Checks every attribute against DynamoDB's rules: names not empty and at most
    /// [`MAX_ATTRIBUTE_NAME_BYTES`], values as [`Value::check`].
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidAttribute`] for a name, [`ErrorKind::InvalidValue`] for a value.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{ErrorKind, storage::Item, storage::Value};
    ///
    /// let mut item = Item::new();
    /// item.insert("tags", Value::Ss(vec!["a".into(), "a".into()]));
    /// assert_eq!(item.check().unwrap_err().kind(), ErrorKind::InvalidValue);
    /// ```
    pub fn check(&self) -> Result<()> {
        for (name, v) in &self.attrs {
            check_name(name, &[])?;
            v.check(name)?;
        }
        Ok(())
    }

    /// The item as DynamoDB stores it (see [`Value::normalized`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    ///
    /// let mut item = Item::new();
    /// item.insert("price", Value::N("01.50".into()));
    /// item.insert("name", Value::S("01.50".into()));
    /// let stored = item.normalized();
    /// assert_eq!(stored.get("price"), Some(&Value::N("1.5".into())));
    /// assert_eq!(stored.get_s("name"), Some("01.50")); // strings are untouched
    /// ```
    #[must_use]
    pub fn normalized(&self) -> Item {
        Self {
            attrs: self
                .attrs
                .iter()
                .map(|(k, v)| (k.clone(), v.normalized()))
                .collect(),
        }
    }

    /// The value of one attribute.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    ///
    /// let mut item = Item::new();
    /// item.insert("n", Value::N("3".into()));
    /// assert_eq!(item.get("n"), Some(&Value::N("3".into())));
    /// assert_eq!(item.get("missing"), None);
    /// ```
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.attrs.get(name)
    }

    /// The value of one string attribute.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    ///
    /// let mut item = Item::new();
    /// item.insert("name", Value::S("ann".into()));
    /// item.insert("n", Value::N("3".into()));
    /// assert_eq!(item.get_s("name"), Some("ann"));
    /// assert_eq!(item.get_s("n"), None); // not a string
    /// ```
    pub fn get_s(&self, name: &str) -> Option<&str> {
        self.attrs.get(name).and_then(Value::as_s)
    }

    /// Sets one attribute, returning the previous value.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    ///
    /// let mut item = Item::new();
    /// assert_eq!(item.insert("a", Value::Bool(true)), None);
    /// assert_eq!(item.insert("a", Value::Null), Some(Value::Bool(true)));
    /// assert_eq!(item.get("a"), Some(&Value::Null));
    /// ```
    pub fn insert(&mut self, name: impl Into<String>, value: Value) -> Option<Value> {
        self.attrs.insert(name.into(), value)
    }

    /// Removes one attribute.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    ///
    /// let mut item = Item::new();
    /// item.insert("a", Value::Bool(true));
    /// assert_eq!(item.remove("a"), Some(Value::Bool(true)));
    /// assert_eq!(item.remove("a"), None);
    /// assert!(item.is_empty());
    /// ```
    pub fn remove(&mut self, name: &str) -> Option<Value> {
        self.attrs.remove(name)
    }

    /// Whether the item has an attribute of this name.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    ///
    /// let mut item = Item::new();
    /// item.insert("a", Value::Null);
    /// assert!(item.contains("a"));
    /// assert!(!item.contains("b"));
    /// ```
    pub fn contains(&self, name: &str) -> bool {
        self.attrs.contains_key(name)
    }

    /// Attributes in name order.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    ///
    /// let mut item = Item::new();
    /// item.insert("b", Value::Bool(false));
    /// item.insert("a", Value::Null);
    /// let attrs: Vec<(&str, &Value)> = item.iter().collect();
    /// assert_eq!(attrs, [("a", &Value::Null), ("b", &Value::Bool(false))]);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.attrs.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Attribute names in order.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    ///
    /// let mut item = Item::new();
    /// item.insert("b", Value::Null);
    /// item.insert("a", Value::Null);
    /// assert_eq!(item.names().collect::<Vec<_>>(), ["a", "b"]);
    /// ```
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.attrs.keys().map(String::as_str)
    }

    /// The number of attributes.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    ///
    /// let mut item = Item::new();
    /// item.insert("a", Value::Null);
    /// item.insert("a", Value::Bool(true));
    /// assert_eq!(item.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.attrs.len()
    }

    /// Whether the item has no attributes.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::Value};
    ///
    /// let mut item = Item::new();
    /// assert!(item.is_empty());
    /// item.insert("a", Value::Null);
    /// assert!(!item.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.attrs.is_empty()
    }

    /// The item's size by DynamoDB's rules: for each attribute, its name's bytes plus its
    /// value's [`size`](Value::size).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{storage::Item, storage::MAX_ITEM_BYTES, storage::Value};
    ///
    /// let mut item = Item::new();
    /// item.insert("name", Value::S("ann".into()));
    /// item.insert("ok", Value::Bool(true));
    /// assert_eq!(item.size(), (4 + 3) + (2 + 1));
    /// assert!(item.size() <= MAX_ITEM_BYTES);
    /// ```
    pub fn size(&self) -> usize {
        self.attrs.iter().map(|(k, v)| k.len() + v.size()).sum()
    }
}

impl FromIterator<(String, Value)> for Item {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        Self {
            attrs: iter.into_iter().collect(),
        }
    }
}

impl IntoIterator for Item {
    type Item = (String, Value);
    type IntoIter = std::collections::btree_map::IntoIter<String, Value>;
    fn into_iter(self) -> Self::IntoIter {
        self.attrs.into_iter()
    }
}

impl Value {
    /// Converts any serializable value to the attribute value an item stores for it (as a
    /// field of a struct stored with [`Item::from_serialize`]).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Serialization`](crate::ErrorKind::Serialization) if the value has no
    /// DynamoDB representation.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Value;
    ///
    /// assert_eq!(Value::from_serialize(&7u32)?, Value::N("7".into()));
    /// assert_eq!(Value::from_serialize("hi")?, Value::S("hi".into()));
    /// assert_eq!(Value::from_serialize(&None::<u8>)?, Value::Null);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn from_serialize<T: Serialize + ?Sized>(value: &T) -> Result<Value> {
        let raw: serde_dynamo::AttributeValue = serde_dynamo::to_attribute_value(value)
            .map_err(|e| Error::serialization("value has no DynamoDB representation", e))?;
        Ok(convert::from_serde_dynamo(raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_sizes_follow_dynamodb() {
        assert_eq!(number_size("0"), 2);
        assert_eq!(number_size("1"), 2);
        assert_eq!(number_size("12"), 2);
        assert_eq!(number_size("123"), 3);
        assert_eq!(number_size("1000"), 2);
        assert_eq!(number_size("-12.5"), 4);
    }

    #[test]
    fn serde_round_trip() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct T {
            a: String,
            b: u32,
            c: Vec<bool>,
        }
        let t = T {
            a: "x".into(),
            b: 7,
            c: vec![true],
        };
        let item = Item::from_serialize(&t).unwrap();
        assert_eq!(item.get("b"), Some(&Value::N("7".into())));
        assert_eq!(item.to_deserialize::<T>().unwrap(), t);
    }

    #[test]
    fn numbers_follow_dynamodb() {
        for ok in [
            "0",
            "-0",
            "0e500",
            "+1",
            "1.",
            ".5",
            "1e5",
            "1E+5",
            "00012",
            "1e-130",
            "-1e-130",
            "9.9999999999999999999999999999999999999E+125",
            "12345678901234567890123456789012345678",
            "1234567890123456789012345678901234567800000",
            "1.0000000000000000000000000000000000000000",
        ] {
            assert!(check_number(ok).is_ok(), "{ok}");
        }
        for bad in [
            "NaN",
            "inf",
            "Infinity",
            "-Infinity",
            "",
            " 1",
            "abc",
            "--1",
            "1e",
            "0x10",
            "1_0",
            "1e-131",
            "1E+126",
            "123456789012345678901234567890123456789",
            "0.123456789012345678901234567890123456789",
            "1e99999999999999999999",
        ] {
            assert!(check_number(bad).is_err(), "{bad}");
        }
        assert!(check_number(&f64::MAX.to_string()).is_err());
        assert!(check_number(&1e-200f64.to_string()).is_err());
        for (n, canonical) in [
            ("1.0000", "1"),
            ("0.0", "0"),
            ("-0", "0"),
            ("+1", "1"),
            (".5", "0.5"),
            ("1e5", "100000"),
            ("00012", "12"),
            ("-12.50", "-12.5"),
            ("1.5e-3", "0.0015"),
            ("123.456e1", "1234.56"),
        ] {
            assert_eq!(normalize_number(n), canonical, "{n}");
        }
    }

    #[test]
    fn check_names_paths() {
        let mut item = Item::new();
        item.insert(
            "a",
            Value::M(BTreeMap::from([(
                "b".to_owned(),
                Value::L(vec![Value::Null, Value::N("NaN".into())]),
            )])),
        );
        let e = item.check().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidValue);
        assert!(e.to_string().contains("attribute `a.b[1]`"), "{e}");
        let mut item = Item::new();
        item.insert(
            "m",
            Value::M(BTreeMap::from([(String::new(), Value::Null)])),
        );
        assert_eq!(
            item.check().unwrap_err().kind(),
            ErrorKind::InvalidAttribute
        );
        let mut item = Item::new();
        item.insert("a".repeat(MAX_ATTRIBUTE_NAME_BYTES + 1), Value::Null);
        assert_eq!(
            item.check().unwrap_err().kind(),
            ErrorKind::InvalidAttribute
        );
        let mut item = Item::new();
        item.insert("a".repeat(MAX_ATTRIBUTE_NAME_BYTES), Value::Null);
        assert!(item.check().is_ok());
        for empty in [Value::Ss(vec![]), Value::Ns(vec![]), Value::Bs(vec![])] {
            assert_eq!(
                empty.check("s").unwrap_err().kind(),
                ErrorKind::InvalidValue
            );
        }
        assert!(Value::Bs(vec![vec![1], vec![1]]).check("s").is_err());
        assert!(Value::Ss(vec![String::new()]).check("s").is_ok());
    }

    #[test]
    fn null_reads_as_empty_string_and_none() {
        #[derive(serde::Deserialize, PartialEq, Debug)]
        struct T {
            a: String,
            b: Option<String>,
            c: Vec<u32>,
            #[serde(default)]
            d: u8,
        }
        let mut item = Item::new();
        item.insert("a", Value::Null);
        item.insert("b", Value::Null);
        item.insert("c", Value::Null);
        let t: T = item.to_deserialize().unwrap();
        assert_eq!(
            t,
            T {
                a: String::new(),
                b: None,
                c: vec![],
                d: 0
            }
        );
        item.insert("d", Value::Null);
        let e = item.to_deserialize::<T>().unwrap_err();
        assert!(
            e.to_string()
                .starts_with("serialization failed: attribute `d`: invalid type: null"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_nested_paths() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Inner {
            n: u8,
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct T {
            list: Vec<Inner>,
        }
        let mut item = Item::new();
        item.insert(
            "list",
            Value::L(vec![
                Value::M(BTreeMap::from([("n".to_owned(), Value::N("1".into()))])),
                Value::M(BTreeMap::from([("n".to_owned(), Value::N("300".into()))])),
            ]),
        );
        let e = item.to_deserialize::<T>().unwrap_err();
        assert!(e.to_string().contains("attribute `list[1].n`"), "{e}");
        item.insert("list", Value::L(vec![Value::M(BTreeMap::new())]));
        let e = item.to_deserialize::<T>().unwrap_err();
        assert!(
            e.to_string()
                .contains("attribute `list[0]`: missing field `n`"),
            "{e}"
        );
    }

    #[test]
    fn reads_what_serde_dynamo_writes() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug, Clone)]
        enum Shape {
            Dot,
            Circle(f64),
            Rect { w: u32, h: u32 },
            Pair(i8, i8),
        }
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug, Clone)]
        struct Wrap(u64);
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug, Clone)]
        struct T {
            shapes: Vec<Shape>,
            map: std::collections::HashMap<u32, String>,
            tuple: (bool, char, i64),
            wrap: Wrap,
            unit: (),
            opt: Option<Box<T>>,
            bytes: Vec<u8>,
            f: f32,
        }
        let t = T {
            shapes: vec![
                Shape::Dot,
                Shape::Circle(1.5),
                Shape::Rect { w: 2, h: 3 },
                Shape::Pair(-1, 1),
            ],
            map: [(7, "seven".to_owned())].into(),
            tuple: (true, 'x', -5),
            wrap: Wrap(u64::MAX),
            unit: (),
            opt: None,
            bytes: vec![0, 255],
            f: 0.25,
        };
        let nested = T {
            opt: Some(Box::new(t.clone())),
            ..t.clone()
        };
        let item = Item::from_serialize(&nested).unwrap();
        assert_eq!(item.to_deserialize::<T>().unwrap(), nested);
        let json: serde_json::Value = item.to_deserialize().unwrap();
        assert_eq!(json["wrap"], serde_json::json!(u64::MAX));
    }

    #[test]
    fn non_map_is_a_serialization_error() {
        let e = Item::from_serialize(&5u8).unwrap_err();
        assert!(e.is_serialization());
    }
}
