//! [`KeySegment`]: typed path components whose encoding sorts like the type.

use crate::error::{Error, ErrorKind, Result};

/// A type that can be one component of a path, with an encoding whose UTF-8 byte order (the
/// order DynamoDB sorts `Child` by) equals the type's own order.
///
/// Key segments are `Clone + Debug + Eq + Hash`, so the generated key structs are too.
///
/// Implemented for `String`, every integer type (fixed width, zero-padded; signed types are
/// offset so that negatives sort first), `bool`, and with features `ulid::Ulid`, `uuid::Uuid`
/// and `time::{Date, OffsetDateTime}`. Implement it for your own types (an id newtype, an enum
/// of kinds) to use them in `#[derive(Hierarchical)]` path templates.
///
/// # Examples
///
/// ```
/// use dynatree::keys::KeySegment;
///
/// assert_eq!(42u32.encode(), "0000000042");
/// assert!((-5i32).encode() < 3i32.encode());
/// assert_eq!(i32::decode(&(-5i32).encode())?, -5);
///
/// #[derive(Debug, Clone, PartialEq, Eq, Hash)]
/// struct Sku(u32);
/// impl KeySegment for Sku {
///     fn encode(&self) -> String { format!("SKU{}", self.0.encode()) }
///     fn decode(s: &str) -> dynatree::Result<Self> {
///         let digits = s.strip_prefix("SKU").ok_or_else(|| dynatree::Error::new(
///             dynatree::ErrorKind::InvalidPath, "not a SKU"))?;
///         Ok(Sku(u32::decode(digits)?))
///     }
/// }
/// assert_eq!(Sku::decode(&Sku(7).encode())?, Sku(7));
/// # Ok::<(), dynatree::Error>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a path component or index key",
    label = "this field is used in a key (a path placeholder or an index)",
    note = "key fields need `dynatree::keys::KeySegment`: String, integers, bool, Ulid, Uuid, time types, or your own impl"
)]
pub trait KeySegment: Clone + std::fmt::Debug + Eq + std::hash::Hash + Sized {
    /// The component string. It must not be empty; the tree checks it for the reserved
    /// character and DynamoDB's byte limits on every call.
    fn encode(&self) -> String;

    /// Parses a component produced by [`encode`](KeySegment::encode).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`] if `s` is not an encoding of `Self`.
    fn decode(s: &str) -> Result<Self>;
}

/// A value that encodes as the key segment `T`: `T` itself, or a borrowed form of it (`str`,
/// `Box<str>`, `Cow<str>` and `Arc<str>` for `String`).
///
/// Generated index constructors take `&impl AsKeySegment<T>` for an index field of type `T`,
/// so `Account::index_by_email("alice@example.com")` and `Account::index_by_email(&email)`
/// (a `&String`) both work, as does `&42` for a `u64` field. Every [`KeySegment`] gets the
/// impl for itself. For your own segment type, add impls for its borrowed forms; the encoding
/// must equal `T`'s for the value the borrowed form stands for.
///
/// The argument's type must be known: `&"a".into()` is ambiguous (a `String` or a `str`?).
///
/// # Examples
///
/// ```
/// use dynatree::{keys::AsKeySegment, keys::KeySegment};
///
/// fn encoded(v: &(impl AsKeySegment<String> + ?Sized)) -> String {
///     v.encode_segment()
/// }
/// assert_eq!(encoded("alice@example.com"), "alice@example.com");
/// assert_eq!(encoded(&String::from("bob")), "bob");
/// assert_eq!(AsKeySegment::<u32>::encode_segment(&42u32), 42u32.encode());
///
/// // A borrowed form of your own segment type.
/// #[derive(Debug, Clone, PartialEq, Eq, Hash)]
/// struct UserId(String);
/// impl KeySegment for UserId {
///     fn encode(&self) -> String { self.0.clone() }
///     fn decode(s: &str) -> dynatree::Result<Self> { Ok(UserId(s.to_owned())) }
/// }
/// impl AsKeySegment<UserId> for str {
///     fn encode_segment(&self) -> String { self.to_owned() }
/// }
/// fn user(v: &(impl AsKeySegment<UserId> + ?Sized)) -> String {
///     v.encode_segment()
/// }
/// assert_eq!(user("u1"), user(&UserId("u1".into())));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `{T}` key segment or a borrowed form of one",
    label = "expected `&{T}` or a borrowed form of it",
    note = "index constructors take a reference to the field's type, or to a borrowed form (`&str` for `String`)"
)]
pub trait AsKeySegment<T: ?Sized> {
    /// The encoding of the `T` this value stands for: `T::encode` of it.
    fn encode_segment(&self) -> String;
}

impl<T: KeySegment> AsKeySegment<T> for T {
    fn encode_segment(&self) -> String {
        self.encode()
    }
}

impl AsKeySegment<String> for str {
    fn encode_segment(&self) -> String {
        self.to_owned()
    }
}

impl AsKeySegment<String> for Box<str> {
    fn encode_segment(&self) -> String {
        (**self).to_owned()
    }
}

impl AsKeySegment<String> for std::borrow::Cow<'_, str> {
    fn encode_segment(&self) -> String {
        (**self).to_owned()
    }
}

impl AsKeySegment<String> for std::sync::Arc<str> {
    fn encode_segment(&self) -> String {
        (**self).to_owned()
    }
}

fn bad(s: &str, ty: &str) -> Error {
    Error::new(
        ErrorKind::InvalidPath,
        format!("path component {s:?} is not a {ty} key segment"),
    )
}

impl KeySegment for String {
    fn encode(&self) -> String {
        self.clone()
    }

    fn decode(s: &str) -> Result<Self> {
        Ok(s.to_owned())
    }
}

macro_rules! unsigned {
    ($($t:ty => $width:expr),*) => {$(
        impl KeySegment for $t {
            fn encode(&self) -> String {
                format!("{:0width$}", self, width = $width)
            }

            fn decode(s: &str) -> Result<Self> {
                if s.len() != $width || !s.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad(s, stringify!($t)));
                }
                s.parse().map_err(|_| bad(s, stringify!($t)))
            }
        }
    )*};
}

unsigned!(u8 => 3, u16 => 5, u32 => 10, u64 => 20, u128 => 39);

macro_rules! signed {
    ($($t:ty => $u:ty),*) => {$(
        impl KeySegment for $t {
            fn encode(&self) -> String {
                // Flip the sign bit: i::MIN -> 0, -1 -> 2^(n-1) - 1, 0 -> 2^(n-1).
                #[allow(clippy::cast_sign_loss)]
                let offset = (*self as $u) ^ (1 << (<$u>::BITS - 1));
                offset.encode()
            }

            fn decode(s: &str) -> Result<Self> {
                let offset = <$u>::decode(s).map_err(|_| bad(s, stringify!($t)))?;
                #[allow(clippy::cast_possible_wrap)]
                Ok((offset ^ (1 << (<$u>::BITS - 1))) as $t)
            }
        }
    )*};
}

signed!(i8 => u8, i16 => u16, i32 => u32, i64 => u64, i128 => u128);

impl KeySegment for usize {
    fn encode(&self) -> String {
        (*self as u64).encode()
    }

    fn decode(s: &str) -> Result<Self> {
        usize::try_from(u64::decode(s)?).map_err(|_| bad(s, "usize"))
    }
}

impl KeySegment for isize {
    fn encode(&self) -> String {
        (*self as i64).encode()
    }

    fn decode(s: &str) -> Result<Self> {
        isize::try_from(i64::decode(s)?).map_err(|_| bad(s, "isize"))
    }
}

impl KeySegment for bool {
    /// `"false"` < `"true"`, as `false < true`.
    fn encode(&self) -> String {
        if *self { "true" } else { "false" }.to_owned()
    }

    fn decode(s: &str) -> Result<Self> {
        match s {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(bad(s, "bool")),
        }
    }
}

#[cfg(feature = "ulid")]
#[cfg_attr(docsrs, doc(cfg(feature = "ulid")))]
impl KeySegment for ulid::Ulid {
    /// The canonical 26-character Crockford base32 form, which sorts by time.
    fn encode(&self) -> String {
        self.to_string()
    }

    fn decode(s: &str) -> Result<Self> {
        ulid::Ulid::from_string(s).map_err(|_| bad(s, "Ulid"))
    }
}

#[cfg(feature = "uuid")]
#[cfg_attr(docsrs, doc(cfg(feature = "uuid")))]
impl KeySegment for uuid::Uuid {
    /// Lowercase hyphenated hex, which sorts like the bytes.
    fn encode(&self) -> String {
        self.hyphenated().to_string()
    }

    fn decode(s: &str) -> Result<Self> {
        // Only the exact form `encode` writes, so one value has one path.
        let u = uuid::Uuid::parse_str(s).map_err(|_| bad(s, "Uuid"))?;
        if u.hyphenated().to_string() != s {
            return Err(bad(s, "Uuid"));
        }
        Ok(u)
    }
}

#[cfg(feature = "time")]
#[cfg_attr(docsrs, doc(cfg(feature = "time")))]
mod time_segments {
    use super::{KeySegment, Result, bad};

    impl KeySegment for time::Date {
        /// `YYYY-MM-DD` (years 0000 to 9999).
        fn encode(&self) -> String {
            format!(
                "{:04}-{:02}-{:02}",
                self.year(),
                u8::from(self.month()),
                self.day()
            )
        }

        fn decode(s: &str) -> Result<Self> {
            let fmt = time::macros::format_description!("[year]-[month]-[day]");
            time::Date::parse(s, &fmt).map_err(|_| bad(s, "Date"))
        }
    }

    impl KeySegment for time::OffsetDateTime {
        /// UTC, `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ` with all nine fraction digits, so the text sorts
        /// like the instant (years 0000 to 9999). Decoding gives the instant in UTC.
        fn encode(&self) -> String {
            let t = self.to_offset(time::UtcOffset::UTC);
            format!(
                "{}T{:02}:{:02}:{:02}.{:09}Z",
                t.date().encode(),
                t.hour(),
                t.minute(),
                t.second(),
                t.nanosecond()
            )
        }

        fn decode(s: &str) -> Result<Self> {
            let fmt = time::macros::format_description!(
                "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:9]Z"
            );
            time::PrimitiveDateTime::parse(s, &fmt)
                .map(time::PrimitiveDateTime::assume_utc)
                .map_err(|_| bad(s, "OffsetDateTime"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip_and_order<T: KeySegment + Ord + Copy + std::fmt::Debug>(values: &[T]) {
        for &a in values {
            assert_eq!(T::decode(&a.encode()).unwrap(), a);
            for &b in values {
                assert_eq!(
                    a.cmp(&b),
                    a.encode().as_bytes().cmp(b.encode().as_bytes()),
                    "{a:?} vs {b:?}"
                );
            }
        }
    }

    #[test]
    fn integers_sort_like_numbers() {
        round_trip_and_order(&[i32::MIN, -1000, -1, 0, 1, 9, 10, 1000, i32::MAX]);
        round_trip_and_order(&[i64::MIN, -1, 0, i64::MAX]);
        round_trip_and_order(&[0u64, 1, 10, u64::MAX]);
        round_trip_and_order(&[i8::MIN, -1, 0, i8::MAX]);
        round_trip_and_order(&[0u128, u128::MAX]);
        round_trip_and_order(&[false, true]);
    }

    #[test]
    fn borrowed_forms_encode_like_the_segment() {
        fn enc<T>(v: &(impl AsKeySegment<T> + ?Sized)) -> String {
            v.encode_segment()
        }
        let s = String::from("alice@example.com");
        assert_eq!(enc::<String>(s.as_str()), s.encode());
        assert_eq!(enc::<String>(&s), s.encode());
        assert_eq!(enc::<String>(&Box::<str>::from("x")), "x");
        assert_eq!(enc::<String>(&std::borrow::Cow::Borrowed("x")), "x");
        assert_eq!(enc::<String>(&std::sync::Arc::<str>::from("x")), "x");
        assert_eq!(enc::<u64>(&7), 7u64.encode());
        assert_eq!(enc::<i32>(&-7), (-7i32).encode());
    }

    #[test]
    fn malformed_segments_are_errors() {
        assert!(u32::decode("42").is_err());
        assert!(u32::decode("00000000x2").is_err());
        assert!(bool::decode("yes").is_err());
        assert!(u8::decode("999").is_err());
    }
}
