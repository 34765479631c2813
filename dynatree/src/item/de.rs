//! A serde `Deserializer` over dynatree's [`Value`]s.
//!
//! It reads what `serde_dynamo` writes (externally tagged enums, sets as sequences, numbers
//! parsed into the requested type) and what the Go library writes (`NULL` for an empty string,
//! a nil slice or a nil map), and its errors name the attribute path (`profile.tags[2]`).

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Expected, IntoDeserializer, Unexpected, Visitor,
};
use serde::forward_to_deserialize_any;

use super::Value;
use crate::error::{Error, ErrorKind, Result};

/// A deserialization error with the path where it happened, innermost step first.
#[derive(Debug)]
pub(super) struct DeError {
    msg: String,
    path: Vec<Step>,
}

#[derive(Debug)]
enum Step {
    Name(String),
    Index(usize),
}

impl DeError {
    fn at(mut self, step: Step) -> Self {
        self.path.push(step);
        self
    }

    fn path(&self) -> String {
        let mut s = String::new();
        for (i, step) in self.path.iter().rev().enumerate() {
            match step {
                Step::Name(n) if i == 0 => s.push_str(n),
                Step::Name(n) => {
                    s.push('.');
                    s.push_str(n);
                }
                Step::Index(i) => s.push_str(&format!("[{i}]")),
            }
        }
        s
    }
}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self {
            msg: msg.to_string(),
            path: Vec::new(),
        }
    }
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for DeError {}

type DeResult<T> = std::result::Result<T, DeError>;

/// Deserializes a `T` from an item's attributes.
pub(super) fn from_attrs<T: DeserializeOwned>(attrs: &BTreeMap<String, Value>) -> Result<T> {
    T::deserialize(ItemDe(attrs)).map_err(|e| {
        // The path is only known here, so the detail carries serde's message with it; the
        // source is serde's error alone.
        let detail = if e.path.is_empty() {
            e.msg.clone()
        } else {
            format!("attribute `{}`: {}", e.path(), e.msg)
        };
        Error::new(ErrorKind::Serialization, detail).with_source(e)
    })
}

fn unexpected(v: &Value) -> Unexpected<'_> {
    match v {
        Value::S(s) => Unexpected::Str(s),
        Value::N(_) => Unexpected::Other("number"),
        Value::B(b) => Unexpected::Bytes(b),
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Null => Unexpected::Other("null"),
        Value::L(_) | Value::Ss(_) | Value::Ns(_) | Value::Bs(_) => Unexpected::Seq,
        Value::M(_) => Unexpected::Map,
    }
}

fn invalid_type(v: &Value, exp: &dyn Expected) -> DeError {
    de::Error::invalid_type(unexpected(v), exp)
}

/// The whole item: a map.
struct ItemDe<'a>(&'a BTreeMap<String, Value>);

impl<'de> de::Deserializer<'de> for ItemDe<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        visitor.visit_map(MapDe::new(self.0))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> DeResult<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

/// One value. It never lends borrowed data, so it serves any `'de`.
struct ValueDe<'a>(&'a Value);

macro_rules! number {
    ($($method:ident $ty:ty => $visit:ident),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
            match self.0 {
                Value::N(n) => match n.parse::<$ty>() {
                    Ok(x) => visitor.$visit(x),
                    Err(_) => Err(de::Error::custom(format_args!(
                        "invalid value: number {n}, expected {}",
                        &visitor as &dyn Expected
                    ))),
                },
                other => Err(invalid_type(other, &visitor)),
            }
        }
    )*};
}

impl<'de> de::Deserializer<'de> for ValueDe<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        match self.0 {
            Value::S(s) => visitor.visit_str(s),
            Value::N(n) => {
                if let Ok(i) = n.parse::<i64>() {
                    visitor.visit_i64(i)
                } else if let Ok(u) = n.parse::<u64>() {
                    visitor.visit_u64(u)
                } else if let Ok(f) = n.parse::<f64>() {
                    visitor.visit_f64(f)
                } else {
                    Err(de::Error::custom(format_args!("invalid number {n:?}")))
                }
            }
            Value::B(b) => visitor.visit_bytes(b),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Null => visitor.visit_unit(),
            Value::M(m) => visitor.visit_map(MapDe::new(m)),
            Value::L(_) | Value::Ss(_) | Value::Ns(_) | Value::Bs(_) => {
                self.deserialize_seq(visitor)
            }
        }
    }

    number! {
        deserialize_i8 i8 => visit_i8,
        deserialize_i16 i16 => visit_i16,
        deserialize_i32 i32 => visit_i32,
        deserialize_i64 i64 => visit_i64,
        deserialize_i128 i128 => visit_i128,
        deserialize_u8 u8 => visit_u8,
        deserialize_u16 u16 => visit_u16,
        deserialize_u32 u32 => visit_u32,
        deserialize_u64 u64 => visit_u64,
        deserialize_u128 u128 => visit_u128,
        deserialize_f32 f32 => visit_f32,
        deserialize_f64 f64 => visit_f64,
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        match self.0 {
            Value::Bool(b) => visitor.visit_bool(*b),
            other => Err(invalid_type(other, &visitor)),
        }
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        match self.0 {
            Value::S(s) if s.chars().count() == 1 => visitor.visit_str(s),
            other => Err(invalid_type(other, &visitor)),
        }
    }

    /// `NULL` is the Go library's empty string.
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        match self.0 {
            Value::S(s) => visitor.visit_str(s),
            Value::Null => visitor.visit_str(""),
            other => Err(invalid_type(other, &visitor)),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        match self.0 {
            Value::B(b) => visitor.visit_bytes(b),
            Value::Null => visitor.visit_bytes(&[]),
            other => Err(invalid_type(other, &visitor)),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            other => Err(invalid_type(other, &visitor)),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> DeResult<V::Value> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> DeResult<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    /// Lists and the three set types; `NULL` is the Go library's nil slice.
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        match self.0 {
            Value::L(l) => visitor.visit_seq(SeqDe::new(l.iter())),
            Value::Ss(s) => visitor.visit_seq(OwnedSeqDe::new(s.iter().cloned().map(Value::S))),
            Value::Ns(s) => visitor.visit_seq(OwnedSeqDe::new(s.iter().cloned().map(Value::N))),
            Value::Bs(s) => visitor.visit_seq(OwnedSeqDe::new(s.iter().cloned().map(Value::B))),
            Value::Null => visitor.visit_seq(SeqDe::new([].iter())),
            other => Err(invalid_type(other, &visitor)),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> DeResult<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> DeResult<V::Value> {
        self.deserialize_seq(visitor)
    }

    /// `NULL` is the Go library's nil map.
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        match self.0 {
            Value::M(m) => visitor.visit_map(MapDe::new(m)),
            Value::Null => visitor.visit_map(MapDe::empty()),
            other => Err(invalid_type(other, &visitor)),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> DeResult<V::Value> {
        match self.0 {
            Value::M(m) => visitor.visit_map(MapDe::new(m)),
            Value::L(l) => visitor.visit_seq(SeqDe::new(l.iter())),
            other => Err(invalid_type(other, &visitor)),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> DeResult<V::Value> {
        match self.0 {
            Value::S(s) => visitor.visit_enum(s.as_str().into_deserializer()),
            Value::M(m) if m.len() == 1 => {
                let Some((name, value)) = m.iter().next() else {
                    return Err(invalid_type(self.0, &visitor));
                };
                visitor.visit_enum(EnumDe { name, value })
            }
            other => Err(invalid_type(other, &visitor)),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        visitor.visit_unit()
    }
}

struct MapDe<'a> {
    iter: Option<std::collections::btree_map::Iter<'a, String, Value>>,
    value: Option<(&'a str, &'a Value)>,
}

impl<'a> MapDe<'a> {
    fn new(m: &'a BTreeMap<String, Value>) -> Self {
        Self {
            iter: Some(m.iter()),
            value: None,
        }
    }

    fn empty() -> Self {
        Self {
            iter: None,
            value: None,
        }
    }
}

impl<'de> de::MapAccess<'de> for MapDe<'_> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> DeResult<Option<K::Value>> {
        let Some((k, v)) = self.iter.as_mut().and_then(Iterator::next) else {
            return Ok(None);
        };
        self.value = Some((k, v));
        seed.deserialize(KeyDe(k))
            .map(Some)
            .map_err(|e| e.at(Step::Name(k.clone())))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> DeResult<V::Value> {
        let Some((k, v)) = self.value.take() else {
            return Err(de::Error::custom(
                "a map value was asked for before its key",
            ));
        };
        seed.deserialize(ValueDe(v))
            .map_err(|e| e.at(Step::Name(k.to_owned())))
    }

    fn size_hint(&self) -> Option<usize> {
        self.iter.as_ref().map(ExactSizeIterator::len)
    }
}

struct SeqDe<'a> {
    iter: std::iter::Enumerate<std::slice::Iter<'a, Value>>,
}

impl<'a> SeqDe<'a> {
    fn new(iter: std::slice::Iter<'a, Value>) -> Self {
        Self {
            iter: iter.enumerate(),
        }
    }
}

impl<'de> de::SeqAccess<'de> for SeqDe<'_> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> DeResult<Option<T::Value>> {
        match self.iter.next() {
            Some((i, v)) => seed
                .deserialize(ValueDe(v))
                .map(Some)
                .map_err(|e| e.at(Step::Index(i))),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

/// The members of a set, as values of their scalar type.
struct OwnedSeqDe {
    iter: std::iter::Enumerate<std::vec::IntoIter<Value>>,
}

impl OwnedSeqDe {
    fn new(values: impl Iterator<Item = Value>) -> Self {
        Self {
            iter: values.collect::<Vec<_>>().into_iter().enumerate(),
        }
    }
}

impl<'de> de::SeqAccess<'de> for OwnedSeqDe {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> DeResult<Option<T::Value>> {
        match self.iter.next() {
            Some((i, v)) => seed
                .deserialize(ValueDe(&v))
                .map(Some)
                .map_err(|e| e.at(Step::Index(i))),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

/// A map key: a string, or an integer or unit variant written as one.
struct KeyDe<'a>(&'a str);

macro_rules! key_number {
    ($($method:ident $ty:ty => $visit:ident),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
            match self.0.parse::<$ty>() {
                Ok(x) => visitor.$visit(x),
                Err(_) => Err(de::Error::invalid_value(Unexpected::Str(self.0), &visitor)),
            }
        }
    )*};
}

impl<'de> de::Deserializer<'de> for KeyDe<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        visitor.visit_str(self.0)
    }

    key_number! {
        deserialize_i8 i8 => visit_i8,
        deserialize_i16 i16 => visit_i16,
        deserialize_i32 i32 => visit_i32,
        deserialize_i64 i64 => visit_i64,
        deserialize_i128 i128 => visit_i128,
        deserialize_u8 u8 => visit_u8,
        deserialize_u16 u16 => visit_u16,
        deserialize_u32 u32 => visit_u32,
        deserialize_u64 u64 => visit_u64,
        deserialize_u128 u128 => visit_u128,
        deserialize_f32 f32 => visit_f32,
        deserialize_f64 f64 => visit_f64,
        deserialize_bool bool => visit_bool,
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> DeResult<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> DeResult<V::Value> {
        visitor.visit_enum(self.0.into_deserializer())
    }

    forward_to_deserialize_any! {
        char str string bytes byte_buf option unit unit_struct seq tuple tuple_struct map
        struct identifier ignored_any
    }
}

/// An externally tagged enum variant: `{ "Variant": value }`.
struct EnumDe<'a> {
    name: &'a str,
    value: &'a Value,
}

impl<'de, 'a> de::EnumAccess<'de> for EnumDe<'a> {
    type Error = DeError;
    type Variant = VariantDe<'a>;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> DeResult<(V::Value, Self::Variant)> {
        let name: de::value::StrDeserializer<'_, DeError> = self.name.into_deserializer();
        let v = seed.deserialize(name)?;
        Ok((
            v,
            VariantDe {
                name: self.name,
                value: self.value,
            },
        ))
    }
}

struct VariantDe<'a> {
    name: &'a str,
    value: &'a Value,
}

impl<'de> de::VariantAccess<'de> for VariantDe<'_> {
    type Error = DeError;

    fn unit_variant(self) -> DeResult<()> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> DeResult<T::Value> {
        seed.deserialize(ValueDe(self.value))
            .map_err(|e| e.at(Step::Name(self.name.to_owned())))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> DeResult<V::Value> {
        de::Deserializer::deserialize_seq(ValueDe(self.value), visitor)
            .map_err(|e| e.at(Step::Name(self.name.to_owned())))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> DeResult<V::Value> {
        de::Deserializer::deserialize_map(ValueDe(self.value), visitor)
            .map_err(|e| e.at(Step::Name(self.name.to_owned())))
    }
}
