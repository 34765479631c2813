//! Items and values in DynamoDB's JSON form (`{"S": "..."}`, `{"N": "1"}`, ...): what export
//! records and saved check parts hold.

use std::collections::BTreeMap;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use crate::item::{Item, Value};

/// An item in DynamoDB's JSON form.
pub(crate) struct ItemJson<'a>(pub(crate) &'a Item);

impl Serialize for ItemJson<'_> {
    fn serialize<Se: Serializer>(&self, s: Se) -> std::result::Result<Se::Ok, Se::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (name, v) in self.0.iter() {
            m.serialize_entry(name, &ValueJson(v))?;
        }
        m.end()
    }
}

/// A value in DynamoDB's JSON form: `{"<type>": <content>}`.
struct ValueJson<'a>(&'a Value);

impl Serialize for ValueJson<'_> {
    fn serialize<Se: Serializer>(&self, s: Se) -> std::result::Result<Se::Ok, Se::Error> {
        struct List<'a>(&'a [Value]);
        impl Serialize for List<'_> {
            fn serialize<Se: Serializer>(&self, s: Se) -> std::result::Result<Se::Ok, Se::Error> {
                let mut l = s.serialize_seq(Some(self.0.len()))?;
                for v in self.0 {
                    l.serialize_element(&ValueJson(v))?;
                }
                l.end()
            }
        }
        struct Map<'a>(&'a BTreeMap<String, Value>);
        impl Serialize for Map<'_> {
            fn serialize<Se: Serializer>(&self, s: Se) -> std::result::Result<Se::Ok, Se::Error> {
                let mut m = s.serialize_map(Some(self.0.len()))?;
                for (k, v) in self.0 {
                    m.serialize_entry(k, &ValueJson(v))?;
                }
                m.end()
            }
        }
        let mut m = s.serialize_map(Some(1))?;
        match self.0 {
            Value::S(v) => m.serialize_entry("S", v)?,
            Value::N(v) => m.serialize_entry("N", v)?,
            Value::B(v) => m.serialize_entry("B", &base64_encode(v))?,
            Value::Bool(v) => m.serialize_entry("BOOL", v)?,
            Value::Null => m.serialize_entry("NULL", &true)?,
            Value::L(v) => m.serialize_entry("L", &List(v))?,
            Value::M(v) => m.serialize_entry("M", &Map(v))?,
            Value::Ss(v) => m.serialize_entry("SS", v)?,
            Value::Ns(v) => m.serialize_entry("NS", v)?,
            Value::Bs(v) => {
                let encoded: Vec<String> = v.iter().map(|b| base64_encode(b)).collect();
                m.serialize_entry("BS", &encoded)?;
            }
        }
        m.end()
    }
}

/// A value from DynamoDB's JSON form.
pub(crate) fn value_from_json(v: &serde_json::Value) -> std::result::Result<Value, String> {
    use serde_json::Value as J;
    let J::Object(m) = v else {
        return Err("expected a map from a type (`S`, `N`, ...) to a value".into());
    };
    let mut entries = m.iter();
    let (Some((ty, content)), None) = (entries.next(), entries.next()) else {
        return Err("expected a map with exactly one type (`S`, `N`, ...)".into());
    };
    let string = |c: &J| match c {
        J::String(s) => Ok(s.clone()),
        _ => Err(format!("`{ty}` takes a string")),
    };
    let strings = |c: &J| match c {
        J::Array(a) => a
            .iter()
            .map(string)
            .collect::<std::result::Result<Vec<_>, _>>(),
        _ => Err(format!("`{ty}` takes a list of strings")),
    };
    let binary = |s: String| base64_decode(&s).ok_or_else(|| format!("`{ty}`: not base64"));
    Ok(match ty.as_str() {
        "S" => Value::S(string(content)?),
        "N" => Value::N(string(content)?),
        "B" => Value::B(binary(string(content)?)?),
        "BOOL" => match content {
            J::Bool(b) => Value::Bool(*b),
            _ => return Err("`BOOL` takes true or false".into()),
        },
        "NULL" => match content {
            J::Bool(true) => Value::Null,
            _ => return Err("`NULL` takes true".into()),
        },
        "L" => match content {
            J::Array(a) => Value::L(
                a.iter()
                    .enumerate()
                    .map(|(i, v)| value_from_json(v).map_err(|e| format!("[{i}]: {e}")))
                    .collect::<std::result::Result<_, _>>()?,
            ),
            _ => return Err("`L` takes a list".into()),
        },
        "M" => match content {
            J::Object(m) => Value::M(
                m.iter()
                    .map(|(k, v)| {
                        value_from_json(v)
                            .map(|v| (k.clone(), v))
                            .map_err(|e| format!(".{k}: {e}"))
                    })
                    .collect::<std::result::Result<_, _>>()?,
            ),
            _ => return Err("`M` takes a map".into()),
        },
        "SS" => Value::Ss(strings(content)?),
        "NS" => Value::Ns(strings(content)?),
        "BS" => Value::Bs(
            strings(content)?
                .into_iter()
                .map(binary)
                .collect::<std::result::Result<_, _>>()?,
        ),
        other => return Err(format!("unknown type `{other}`")),
    })
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64, padded (RFC 4648 §4), as DynamoDB's JSON writes binaries.
fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(BASE64[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The bytes of standard padded base64; `None` if `s` is not that (wrong length, a character
/// outside the alphabet, misplaced padding, non-zero bits after the last byte).
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.as_bytes();
    if !s.len().is_multiple_of(4) {
        return None;
    }
    let value = |c: u8| BASE64.iter().position(|&a| a == c).map(|v| v as u32);
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let quads = s.len() / 4;
    for (q, quad) in s.chunks(4).enumerate() {
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && q + 1 != quads) {
            return None;
        }
        let mut n = 0u32;
        for &c in &quad[..4 - pad] {
            n = (n << 6) | value(c)?;
        }
        n <<= 6 * pad;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        let keep = 3 - pad;
        // Bits beyond the last byte must be zero, so that every string has one meaning.
        if bytes[keep..].iter().any(|&b| b != 0) {
            return None;
        }
        out.extend_from_slice(&bytes[..keep]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_and_is_strict() {
        for bytes in [
            &b""[..],
            b"f",
            b"fo",
            b"foo",
            b"foob",
            b"fooba",
            b"foobar",
            &[0, 255, 128, 7],
        ] {
            let s = base64_encode(bytes);
            assert_eq!(base64_decode(&s).as_deref(), Some(bytes), "{s}");
        }
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        for bad in ["Zm8", "Zm9=Zm8=", "Z===", "Zm9!", "Zm9=", "Zh=="] {
            assert_eq!(base64_decode(bad), None, "{bad}");
        }
    }
}
