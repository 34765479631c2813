//! dynatree's own attribute values and items, independent of any SDK.
//!
//! The [`Storage`](crate::Storage) trait speaks these types so that backends (the AWS SDK, the
//! in-memory fake) can change without breaking users.

use std::collections::BTreeMap;

use serde::{Serialize, de::DeserializeOwned};

use crate::error::{Error, Result};

/// DynamoDB's item size limit: 400 KB, attribute names included.
pub const MAX_ITEM_BYTES: usize = 400 * 1024;

/// One DynamoDB attribute value.
///
/// # Examples
///
/// ```
/// use dynatree::Value;
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
    pub fn as_s(&self) -> Option<&str> {
        match self {
            Value::S(s) => Some(s),
            _ => None,
        }
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
/// use dynatree::{Item, Value};
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
    pub fn new() -> Self {
        Self::default()
    }

    /// Converts any serializable value that serializes as a map (a struct, a map) to an item.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Serialization`](crate::ErrorKind::Serialization) if the value does not
    /// serialize to a map of DynamoDB attributes.
    pub fn from_serialize<T: Serialize + ?Sized>(value: &T) -> Result<Self> {
        let raw: serde_dynamo::Item = serde_dynamo::to_item(value)
            .map_err(|e| Error::serialization("value is not a map of attributes", e))?;
        let map: std::collections::HashMap<String, serde_dynamo::AttributeValue> = raw.into();
        Ok(Self {
            attrs: map.into_iter().map(|(k, v)| (k, from_dynamo(v))).collect(),
        })
    }

    /// Converts this item into any deserializable type.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Serialization`](crate::ErrorKind::Serialization) if the attributes do not
    /// match `T`.
    pub fn to_deserialize<T: DeserializeOwned>(&self) -> Result<T> {
        let map: std::collections::HashMap<String, serde_dynamo::AttributeValue> = self
            .attrs
            .iter()
            .map(|(k, v)| (k.clone(), to_dynamo(v.clone())))
            .collect();
        serde_dynamo::from_item(serde_dynamo::Item::from(map))
            .map_err(|e| Error::serialization("attributes do not match the target type", e))
    }

    /// The value of one attribute.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.attrs.get(name)
    }

    /// The value of one string attribute.
    pub fn get_s(&self, name: &str) -> Option<&str> {
        self.attrs.get(name).and_then(Value::as_s)
    }

    /// Sets one attribute, returning the previous value.
    pub fn insert(&mut self, name: impl Into<String>, value: Value) -> Option<Value> {
        self.attrs.insert(name.into(), value)
    }

    /// Removes one attribute.
    pub fn remove(&mut self, name: &str) -> Option<Value> {
        self.attrs.remove(name)
    }

    /// Whether the item has an attribute of this name.
    pub fn contains(&self, name: &str) -> bool {
        self.attrs.contains_key(name)
    }

    /// Attributes in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.attrs.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Attribute names in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.attrs.keys().map(String::as_str)
    }

    /// The number of attributes.
    pub fn len(&self) -> usize {
        self.attrs.len()
    }

    /// Whether the item has no attributes.
    pub fn is_empty(&self) -> bool {
        self.attrs.is_empty()
    }

    /// The item's size by DynamoDB's rules: for each attribute, its name's bytes plus its
    /// value's [`size`](Value::size).
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

fn from_dynamo(v: serde_dynamo::AttributeValue) -> Value {
    use serde_dynamo::AttributeValue as A;
    match v {
        A::S(s) => Value::S(s),
        A::N(n) => Value::N(n),
        A::B(b) => Value::B(b),
        A::Bool(b) => Value::Bool(b),
        A::Null(_) => Value::Null,
        A::L(l) => Value::L(l.into_iter().map(from_dynamo).collect()),
        A::M(m) => Value::M(m.into_iter().map(|(k, v)| (k, from_dynamo(v))).collect()),
        A::Ss(s) => Value::Ss(s),
        A::Ns(n) => Value::Ns(n),
        A::Bs(b) => Value::Bs(b),
    }
}

fn to_dynamo(v: Value) -> serde_dynamo::AttributeValue {
    use serde_dynamo::AttributeValue as A;
    match v {
        Value::S(s) => A::S(s),
        Value::N(n) => A::N(n),
        Value::B(b) => A::B(b),
        Value::Bool(b) => A::Bool(b),
        Value::Null => A::Null(true),
        Value::L(l) => A::L(l.into_iter().map(to_dynamo).collect()),
        Value::M(m) => A::M(m.into_iter().map(|(k, v)| (k, to_dynamo(v))).collect()),
        Value::Ss(s) => A::Ss(s),
        Value::Ns(n) => A::Ns(n),
        Value::Bs(b) => A::Bs(b),
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
    fn non_map_is_a_serialization_error() {
        let e = Item::from_serialize(&5u8).unwrap_err();
        assert!(e.is_serialization());
    }
}
