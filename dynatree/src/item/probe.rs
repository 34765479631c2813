//! The field names of a type, asked of its `Deserialize` without reading anything.

use std::fmt;

use serde::de::{self, DeserializeOwned, Visitor};

/// The serialized names of the fields of `P`, if `P` deserializes as a struct with named
/// fields: asks serde's generated `Deserialize` (which names them to `deserialize_struct`)
/// without reading anything.
pub(crate) fn struct_fields<P: DeserializeOwned>() -> Option<&'static [&'static str]> {
    let mut found = None;
    let _ = P::deserialize(Probe(&mut found));
    found
}

struct Probe<'a>(&'a mut Option<&'static [&'static str]>);

#[derive(Debug)]
struct Probed;

impl fmt::Display for Probed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("probed")
    }
}

impl std::error::Error for Probed {}

impl de::Error for Probed {
    fn custom<M: fmt::Display>(_: M) -> Self {
        Probed
    }
}

impl<'de> de::Deserializer<'de> for Probe<'_> {
    type Error = Probed;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> std::result::Result<V::Value, Probed> {
        Err(Probed)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> std::result::Result<V::Value, Probed> {
        *self.0 = Some(fields);
        Err(Probed)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::struct_fields;
    use std::collections::HashMap;

    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Two {
        a: u8,
        #[serde(rename = "B")]
        b: String,
    }

    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Flat {
        a: u8,
        #[serde(flatten)]
        rest: HashMap<String, u8>,
    }

    #[test]
    fn names_of_struct_fields() {
        assert_eq!(struct_fields::<Two>(), Some(&["a", "B"][..]));
        assert_eq!(struct_fields::<HashMap<String, u8>>(), None);
        assert_eq!(struct_fields::<Flat>(), None);
        assert_eq!(struct_fields::<u8>(), None);
    }
}
