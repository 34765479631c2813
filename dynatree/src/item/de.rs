//! A serde `Deserializer` over dynatree's [`Value`]s.
//!
//! It reads what `serde_dynamo` writes (externally tagged enums, sets as sequences, numbers
//! parsed into the requested type) and what the Go library writes (`NULL` for an empty string,
//! a nil slice or a nil map), and its errors name the attribute path (`profile.tags[2]`).

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Expected, IntoDeserializer, Unexpected, Visitor,
};
use serde::forward_to_deserialize_any;

use super::{Seg, Value, path_string};
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
    /// The path as the rest of the crate writes it (`profile.tags[2]`).
    fn path(&self) -> String {
        let segs: Vec<Seg<'_>> = (self.path.iter().rev())
            .map(|step| match step {
                Step::Name(n) => Seg::Name(n),
                Step::Index(i) => Seg::Index(*i),
            })
            .collect();
        path_string(&segs)
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

/// Adds `step` to the path of an error from one level down.
fn at<T>(r: DeResult<T>, step: impl FnOnce() -> Step) -> DeResult<T> {
    r.map_err(|mut e| {
        e.path.push(step());
        e
    })
}

/// Deserializes `v` with `seed`, naming `step` in its errors.
fn value_at<'de, S: DeserializeSeed<'de>>(
    seed: S,
    v: &Value,
    step: impl FnOnce() -> Step,
) -> DeResult<S::Value> {
    at(seed.deserialize(ValueDe(v)), step)
}

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

/// The `deserialize_*` methods that parse text into a scalar: each calls the deserializer's
/// own `parse` (which reads the text and words its errors) and hands the result to the visitor.
/// Without a list, the twelve number types.
macro_rules! parsed {
    () => {
        parsed! {
            deserialize_i8 => visit_i8,
            deserialize_i16 => visit_i16,
            deserialize_i32 => visit_i32,
            deserialize_i64 => visit_i64,
            deserialize_i128 => visit_i128,
            deserialize_u8 => visit_u8,
            deserialize_u16 => visit_u16,
            deserialize_u32 => visit_u32,
            deserialize_u64 => visit_u64,
            deserialize_u128 => visit_u128,
            deserialize_f32 => visit_f32,
            deserialize_f64 => visit_f64,
        }
    };
    ($($method:ident => $visit:ident),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
            let x = self.parse(&visitor)?;
            visitor.$visit(x)
        }
    )*};
}

/// `deserialize_newtype_struct`: the newtype reads what its field reads.
macro_rules! newtype_is_transparent {
    () => {
        fn deserialize_newtype_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            visitor: V,
        ) -> DeResult<V::Value> {
            visitor.visit_newtype_struct(self)
        }
    };
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

    newtype_is_transparent!();

    /// A whole value that is an enum: `serde_dynamo` writes a newtype, tuple or struct
    /// variant as an item of one attribute, named by the variant (a unit variant is a string,
    /// not an item, and is refused on write).
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> DeResult<V::Value> {
        let mut attrs = self.0.iter();
        match (attrs.next(), attrs.next()) {
            (Some((name, value)), None) => visitor.visit_enum(EnumDe { name, value }),
            _ => Err(de::Error::invalid_type(Unexpected::Map, &visitor)),
        }
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

/// One value. It never lends borrowed data, so it serves any `'de`.
struct ValueDe<'a>(&'a Value);

impl ValueDe<'_> {
    /// A number, parsed into the type the visitor asks for.
    fn parse<T: FromStr>(&self, exp: &dyn Expected) -> DeResult<T> {
        match self.0 {
            Value::N(n) => n.parse().map_err(|_| {
                de::Error::custom(format_args!("invalid value: number {n}, expected {exp}"))
            }),
            other => Err(invalid_type(other, exp)),
        }
    }
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

    parsed!();

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

    /// `NULL` is empty binary data.
    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        match self.0 {
            Value::B(b) => visitor.visit_bytes(b),
            Value::Null => visitor.visit_bytes(&[]),
            other => Err(invalid_type(other, &visitor)),
        }
    }

    /// `NULL` is `None`.
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

    newtype_is_transparent!();

    /// Lists and the three set types; `NULL` is the Go library's nil slice.
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        match self.0 {
            Value::L(l) => visitor.visit_seq(SeqDe::new(l.iter())),
            Value::Ss(s) => visitor.visit_seq(SeqDe::new(s.iter().cloned().map(Value::S))),
            Value::Ns(s) => visitor.visit_seq(SeqDe::new(s.iter().cloned().map(Value::N))),
            Value::Bs(s) => visitor.visit_seq(SeqDe::new(s.iter().cloned().map(Value::B))),
            Value::Null => visitor.visit_seq(SeqDe::new([].iter())),
            other => Err(invalid_type(other, &visitor)),
        }
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

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        visitor.visit_unit()
    }

    // The types serde lets a value read as another one's.
    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> DeResult<V::Value> {
        self.deserialize_unit(visitor)
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
        at(seed.deserialize(KeyDe(k)).map(Some), || {
            Step::Name(k.clone())
        })
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> DeResult<V::Value> {
        let Some((k, v)) = self.value.take() else {
            return Err(de::Error::custom(
                "a map value was asked for before its key",
            ));
        };
        value_at(seed, v, || Step::Name(k.to_owned()))
    }

    fn size_hint(&self) -> Option<usize> {
        self.iter.as_ref().map(ExactSizeIterator::len)
    }
}

/// The elements of a list (borrowed values) or of a set (its members as values of their scalar
/// type, made one at a time).
struct SeqDe<I>(std::iter::Enumerate<I>);

impl<I: ExactSizeIterator<Item: Borrow<Value>>> SeqDe<I> {
    fn new(values: I) -> Self {
        Self(values.enumerate())
    }
}

impl<'de, I: ExactSizeIterator<Item: Borrow<Value>>> de::SeqAccess<'de> for SeqDe<I> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> DeResult<Option<T::Value>> {
        self.0
            .next()
            .map(|(i, v)| value_at(seed, v.borrow(), || Step::Index(i)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

/// A map key: a string, or an integer, boolean or unit variant written as one.
struct KeyDe<'a>(&'a str);

impl KeyDe<'_> {
    /// The key's text, parsed into the type the visitor asks for.
    fn parse<T: FromStr>(&self, exp: &dyn Expected) -> DeResult<T> {
        (self.0.parse()).map_err(|_| de::Error::invalid_value(Unexpected::Str(self.0), exp))
    }
}

impl<'de> de::Deserializer<'de> for KeyDe<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> DeResult<V::Value> {
        visitor.visit_str(self.0)
    }

    parsed!();
    parsed!(deserialize_bool => visit_bool);
    newtype_is_transparent!();

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
    type Variant = EnumDe<'a>;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> DeResult<(V::Value, Self::Variant)> {
        let name: de::value::StrDeserializer<'_, DeError> = self.name.into_deserializer();
        Ok((seed.deserialize(name)?, self))
    }
}

impl<'de> de::VariantAccess<'de> for EnumDe<'_> {
    type Error = DeError;

    fn unit_variant(self) -> DeResult<()> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> DeResult<T::Value> {
        value_at(seed, self.value, || Step::Name(self.name.to_owned()))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> DeResult<V::Value> {
        let r = de::Deserializer::deserialize_seq(ValueDe(self.value), visitor);
        at(r, || Step::Name(self.name.to_owned()))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> DeResult<V::Value> {
        let r = de::Deserializer::deserialize_map(ValueDe(self.value), visitor);
        at(r, || Step::Name(self.name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use super::Value;
    use crate::item::Item;

    fn n(s: &str) -> Value {
        Value::N(s.to_owned())
    }

    fn read<T: serde::de::DeserializeOwned>(attrs: &[(&str, Value)]) -> crate::Result<T> {
        let item: Item = attrs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        item.to_deserialize()
    }

    /// Bytes read through `deserialize_bytes` (a `Vec<u8>` asks for a sequence).
    #[derive(Debug, PartialEq)]
    struct Bytes(Vec<u8>);

    impl<'de> serde::Deserialize<'de> for Bytes {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl serde::de::Visitor<'_> for V {
                type Value = Bytes;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("bytes")
                }
                fn visit_bytes<E>(self, v: &[u8]) -> Result<Bytes, E> {
                    Ok(Bytes(v.to_vec()))
                }
            }
            d.deserialize_bytes(V)
        }
    }

    fn error<T: serde::de::DeserializeOwned + std::fmt::Debug>(attrs: &[(&str, Value)]) -> String {
        read::<T>(attrs).unwrap_err().to_string()
    }

    #[test]
    fn sets_read_as_sequences_with_indexed_errors() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct T {
            ss: Vec<String>,
            ns: Vec<u8>,
            bs: Vec<Bytes>,
        }
        let t: T = read(&[
            ("ss", Value::Ss(vec!["a".into(), "b".into()])),
            ("ns", Value::Ns(vec!["1".into(), "2".into()])),
            ("bs", Value::Bs(vec![vec![7]])),
        ])
        .unwrap();
        assert_eq!(t.ss, ["a", "b"]);
        assert_eq!(t.ns, [1, 2]);
        assert_eq!(t.bs, [Bytes(vec![7])]);
        assert_eq!(
            error::<T>(&[
                ("ss", Value::Ss(vec![])),
                ("ns", Value::Ns(vec!["1".into(), "300".into()])),
            ]),
            "serialization failed: attribute `ns[1]`: invalid value: number 300, expected u8"
        );
    }

    #[test]
    fn null_reads_as_empty_bytes_map_and_list() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct T {
            b: Bytes,
            m: HashMap<String, u8>,
            l: Vec<String>,
            o: Option<u8>,
            u: (),
        }
        let nulls = [
            ("b", Value::Null),
            ("m", Value::Null),
            ("l", Value::Null),
            ("o", Value::Null),
            ("u", Value::Null),
        ];
        let t: T = read(&nulls).unwrap();
        assert_eq!(
            t,
            T {
                b: Bytes(vec![]),
                m: HashMap::new(),
                l: vec![],
                o: None,
                u: ()
            }
        );
        let mut attrs = nulls.to_vec();
        attrs[0].1 = Value::B(vec![1, 2]);
        attrs[3].1 = n("5");
        let t: T = read(&attrs).unwrap();
        assert_eq!((t.b, t.o), (Bytes(vec![1, 2]), Some(5)));
        attrs[4].1 = Value::Bool(true);
        assert_eq!(
            error::<T>(&attrs),
            "serialization failed: attribute `u`: invalid type: boolean `true`, expected unit"
        );
    }

    #[test]
    fn map_keys_parse_as_numbers_and_booleans() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct T {
            ints: BTreeMap<i32, u8>,
            bools: BTreeMap<bool, u8>,
        }
        let m = |k: &str| Value::M(BTreeMap::from([(k.to_owned(), n("1"))]));
        let t: T = read(&[("ints", m("-3")), ("bools", m("true"))]).unwrap();
        assert_eq!(
            t,
            T {
                ints: BTreeMap::from([(-3, 1)]),
                bools: BTreeMap::from([(true, 1)]),
            }
        );
        assert_eq!(
            error::<T>(&[("ints", m("x")), ("bools", m("true"))]),
            "serialization failed: attribute `ints.x`: invalid value: string \"x\", expected i32"
        );
        assert_eq!(
            error::<T>(&[("ints", m("1")), ("bools", m("yes"))]),
            "serialization failed: attribute `bools.yes`: invalid value: string \"yes\", \
             expected a boolean"
        );
    }

    #[test]
    fn numbers_errors_name_the_attribute() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct T {
            x: f64,
        }
        assert_eq!(
            error::<T>(&[("x", Value::S("1".into()))]),
            "serialization failed: attribute `x`: invalid type: string \"1\", expected f64"
        );
        assert_eq!(
            error::<T>(&[("x", n("1e400x"))]),
            "serialization failed: attribute `x`: invalid value: number 1e400x, expected f64"
        );
        assert_eq!(
            error::<serde_json::Value>(&[("x", n("abc"))]),
            "serialization failed: attribute `x`: invalid number \"abc\""
        );
        let any: serde_json::Value = read(&[
            ("i", n("-1")),
            ("u", n("18446744073709551615")),
            ("f", n("0.5")),
        ])
        .unwrap();
        assert_eq!(any, serde_json::json!({"i": -1, "u": u64::MAX, "f": 0.5}));
    }

    #[test]
    fn whole_values_read_as_enums() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        enum Inner {
            Unit,
            Count(u8),
        }
        #[derive(serde::Deserialize, Debug, PartialEq)]
        enum E {
            Newtype(u8),
            Tuple(u8, String),
            Struct { w: u8 },
            Nested(Inner),
        }
        let s = |v: &str| Value::S(v.to_owned());
        let m = |k: &str, v: Value| Value::M(BTreeMap::from([(k.to_owned(), v)]));
        assert_eq!(read::<E>(&[("Newtype", n("5"))]).unwrap(), E::Newtype(5));
        assert_eq!(
            read::<E>(&[("Tuple", Value::L(vec![n("1"), s("a")]))]).unwrap(),
            E::Tuple(1, "a".into())
        );
        assert_eq!(
            read::<E>(&[("Struct", m("w", n("2")))]).unwrap(),
            E::Struct { w: 2 }
        );
        assert_eq!(
            read::<E>(&[("Nested", m("Count", n("3")))]).unwrap(),
            E::Nested(Inner::Count(3))
        );
        assert_eq!(
            read::<E>(&[("Nested", s("Unit"))]).unwrap(),
            E::Nested(Inner::Unit)
        );
        assert_eq!(
            read::<Option<E>>(&[("Newtype", n("5"))]).unwrap(),
            Some(E::Newtype(5))
        );
        assert_eq!(
            error::<E>(&[("Nested", m("Count", n("300")))]),
            "serialization failed: attribute `Nested.Count`: invalid value: number 300, \
             expected u8"
        );
        assert_eq!(
            error::<E>(&[("Other", n("1"))]),
            "serialization failed: unknown variant `Other`, expected one of `Newtype`, `Tuple`, \
             `Struct`, `Nested`"
        );
        for attrs in [&[][..], &[("Newtype", n("1")), ("Struct", m("w", n("2")))]] {
            assert_eq!(
                error::<E>(attrs),
                "serialization failed: invalid type: map, expected enum E"
            );
        }
    }

    #[test]
    fn enum_errors_name_the_variant() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        enum Shape {
            Circle(u8),
            Pair(u8, u8),
            Rect { w: u8 },
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct T {
            s: Shape,
        }
        let variant = |name: &str, v: Value| Value::M(BTreeMap::from([(name.to_owned(), v)]));
        for (v, path) in [
            (variant("Circle", n("300")), "s.Circle"),
            (
                variant("Pair", Value::L(vec![n("1"), n("300")])),
                "s.Pair[1]",
            ),
            (
                variant(
                    "Rect",
                    Value::M(BTreeMap::from([("w".to_owned(), n("300"))])),
                ),
                "s.Rect.w",
            ),
        ] {
            assert_eq!(
                error::<T>(&[("s", v)]),
                format!(
                    "serialization failed: attribute `{path}`: invalid value: number 300, \
                     expected u8"
                )
            );
        }
    }
}
