//! Pages and cursors: the opaque [`Cursor`] every paginated read hands out, [`TypedPage`],
//! and the range condition a query builder accumulates.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, ErrorKind, Result};
use crate::storage::RangeCondition;

/// Where a query's page stopped, as an opaque string: hand it to a client (for example in an
/// HTTP API's `next` link), take it back, and pass it to the same query's `start_after` to
/// continue after that page.
///
/// A cursor names the query it came from and a position in it. The stream of a query given a
/// cursor it cannot have returned yields [`ErrorKind::InvalidArgument`] and ends, with
/// nothing sent, rather than reading from a wrong place (or reading nothing):
///
/// - a cursor of any other query: another collection (another parent), index, index value,
///   range condition, direction, or for [`Tree::descendants`] another prefix, depth or
///   strategy;
/// - a position the query cannot return: empty, over DynamoDB's key limits (a range key of
///   more than 1,024 bytes), with the reserved character, outside the query's range
///   condition, or for an index query or [`Tree::descendants`] not an object row below the
///   query's prefix (and scope).
///
/// Parsing a string that is not a cursor fails with the same kind. A cursor at the last
/// value of a range condition (a page ended on it) is valid, and nothing follows it: the
/// stream ends without a request. Its contents are not a stable format: store cursors for a
/// session, not forever.
///
/// # Examples
///
/// ```
/// use dynatree::{Cursor, ErrorKind, Hierarchical, Tree};
/// use dynatree_testing::FakeTable;
/// use futures::TryStreamExt;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
/// #[dynatree(path = "Sensors/{sensor}/Readings/{at}")]
/// struct Reading { sensor: String, at: u64 }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let tree = Tree::new(FakeTable::new());
/// tree.create_table().await?;
/// let readings = tree.repo::<Reading>();
/// for at in 1..=5 {
///     readings.put(&Reading { sensor: "s1".into(), at }).await?;
/// }
/// let s1 = ReadingCollection { sensor: "s1".into() };
/// let first = readings.query(&s1).page_size(2).pages().try_next().await?.expect("a page");
/// let text = first.cursor.expect("more follow").to_string(); // send it to the client
///
/// let cursor: Cursor = text.parse()?; // the client sent it back
/// let rest: Vec<Reading> = readings.query(&s1).start_after(cursor.clone()).items().try_collect().await?;
/// assert_eq!(rest.iter().map(|r| r.at).collect::<Vec<_>>(), [3, 4, 5]);
///
/// // On another query, the cursor is refused.
/// let err = readings.query(&s1).descending().start_after(cursor.clone()).items().try_collect::<Vec<_>>().await;
/// assert_eq!(err.unwrap_err().kind(), ErrorKind::InvalidArgument);
/// // So is a cursor of another sensor's readings.
/// let s2 = ReadingCollection { sensor: "s2".into() };
/// let err = readings.query(&s2).start_after(cursor).items().try_collect::<Vec<_>>().await;
/// assert_eq!(err.unwrap_err().kind(), ErrorKind::InvalidArgument);
/// # Ok(()) }
/// ```
///
/// [`Tree::descendants`]: crate::Tree::descendants
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Cursor {
    query: u64,
    parts: Vec<String>,
}

const VERSION: u8 = 1;

impl Cursor {
    pub(crate) fn new(query: u64, parts: Vec<String>) -> Self {
        Self { query, parts }
    }

    /// The position, if this cursor came from the query with fingerprint `query`.
    pub(crate) fn parts_for(&self, query: u64) -> Result<&[String]> {
        if self.query == query {
            Ok(&self.parts)
        } else {
            Err(another_query())
        }
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![VERSION];
        out.extend_from_slice(&self.query.to_be_bytes());
        for p in &self.parts {
            let len = u32::try_from(p.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(p.as_bytes());
        }
        out
    }

    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let (&version, rest) = bytes.split_first()?;
        if version != VERSION || rest.len() < 8 {
            return None;
        }
        let (q, mut rest) = rest.split_at(8);
        let query = u64::from_be_bytes(q.try_into().ok()?);
        let mut parts = Vec::new();
        while !rest.is_empty() {
            if rest.len() < 4 {
                return None;
            }
            let (len, tail) = rest.split_at(4);
            let len = u32::from_be_bytes(len.try_into().ok()?) as usize;
            if tail.len() < len {
                return None;
            }
            let (s, tail) = tail.split_at(len);
            parts.push(String::from_utf8(s.to_vec()).ok()?);
            rest = tail;
        }
        Some(Self { query, parts })
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&base64url_encode(&self.to_bytes()))
    }
}

impl fmt::Debug for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Cursor").field(&self.to_string()).finish()
    }
}

impl FromStr for Cursor {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        base64url_decode(s)
            .and_then(|b| Cursor::from_bytes(&b))
            .ok_or_else(|| Error::new(ErrorKind::InvalidArgument, "not a query cursor"))
    }
}

impl Serialize for Cursor {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Cursor {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// One page of a query: its values and where to continue.
///
/// # Examples
///
/// ```
/// let page = dynatree::TypedPage::<u8> { items: vec![1, 2], cursor: None };
/// assert!(page.cursor.is_none()); // the last page
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct TypedPage<T> {
    /// The values of this page.
    pub items: Vec<T>,
    /// Where to continue (pass it to the same query's `start_after`); `None` after the last
    /// page.
    pub cursor: Option<Cursor>,
}

/// A fingerprint of a query's identity (FNV-1a over its parts): what a cursor is checked
/// against.
pub(crate) fn fingerprint(
    kind: &str,
    parts: &[&str],
    range: Option<&RangeCondition>,
    forward: bool,
) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes.iter().chain(&[0xff]) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(kind.as_bytes());
    for p in parts {
        eat(p.as_bytes());
    }
    eat(format!("{range:?}").as_bytes());
    eat(&[u8::from(forward)]);
    h
}

/// Adds a range condition to a query that takes only one.
pub(crate) fn one_range(
    current: Result<Option<RangeCondition>>,
    range: RangeCondition,
) -> Result<Option<RangeCondition>> {
    match current {
        Ok(None) => Ok(Some(range)),
        Ok(Some(_)) => Err(Error::new(
            ErrorKind::InvalidArgument,
            "a query takes one range condition",
        )),
        Err(e) => Err(e),
    }
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn base64url_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

fn base64url_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.as_bytes().chunks(4) {
        if chunk.len() < 2 {
            return None;
        }
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            let v = ALPHABET.iter().position(|a| a == c)? as u32;
            n |= v << (18 - 6 * i);
        }
        for i in 0..chunk.len() - 1 {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    Some(out)
}

/// A cursor of another query.
pub(crate) fn another_query() -> Error {
    Error::new(
        ErrorKind::InvalidArgument,
        "the cursor belongs to another query",
    )
}

/// A cursor whose position the query cannot have returned.
pub(crate) fn cursor_outside(detail: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidArgument, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_through_strings() {
        for parts in [
            vec![],
            vec!["".to_owned()],
            vec!["a¦b".to_owned(), "x".repeat(70)],
        ] {
            let c = Cursor::new(42, parts);
            let s = c.to_string();
            assert!(s.bytes().all(|b| ALPHABET.contains(&b)), "{s}");
            assert_eq!(s.parse::<Cursor>().unwrap(), c);
        }
        for bad in ["", "a", "!!!!", "AAAA", "AQ"] {
            assert_eq!(
                bad.parse::<Cursor>().unwrap_err().kind(),
                ErrorKind::InvalidArgument,
                "{bad}"
            );
        }
    }

    #[test]
    fn fingerprints_tell_queries_apart() {
        let a = fingerprint("c", &["h"], None, true);
        assert_ne!(a, fingerprint("c", &["h"], None, false));
        assert_ne!(a, fingerprint("c", &["h", ""], None, true));
        assert_ne!(a, fingerprint("i", &["h"], None, true));
        assert_ne!(
            a,
            fingerprint("c", &["h"], Some(&RangeCondition::Ge("1".into())), true)
        );
        assert_eq!(a, fingerprint("c", &["h"], None, true));
    }
}
