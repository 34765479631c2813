//! [`Cursor`]: a watch's position in the table's stream, as a string to store.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, ErrorKind, Result};
use crate::storage::sequence_after;

/// Where a [`Watch`](super::Watch) is in the table's stream, as a string to store: hand it to
/// [`Watch::start_after`](super::Watch::start_after) to resume right after the last change
/// handed before it was taken.
///
/// A cursor is a position in the table's stream (for each shard, how far it was read, the
/// records past that point already handed, and when the watch started), not in one watch:
/// any watch of the same table can resume from it. It is good while the stream still holds
/// its positions: 24 hours after the changes it names, a resumed watch fails with
/// [`ErrorKind::CursorExpired`] (see [Resynchronising](crate::watch#resynchronising)).
/// Parsing a string that is not a cursor fails with [`ErrorKind::InvalidArgument`].
///
/// # Examples
///
/// ```
/// use dynatree::watch::Cursor;
///
/// let text = "w1;1800000000;shardId-000000=!;shardId-000001=000000000000000000042~000000000000000000044";
/// let cursor: Cursor = text.parse()?;
/// assert_eq!(cursor.to_string(), text);
/// assert!("nonsense".parse::<Cursor>().is_err());
/// # Ok::<(), dynatree::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cursor {
    /// When the watch took its position (seconds since the epoch).
    pub(super) started: u64,
    /// When the cursor was taken (seconds since the epoch; 0: not said).
    pub(super) taken: u64,
    pub(super) marks: BTreeMap<String, Mark>,
    /// Per shard, records after its mark that were handed already (a change held back for
    /// another shard's record kept the mark before it).
    pub(super) skips: BTreeMap<String, Vec<String>>,
}

/// How far one shard was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Mark {
    /// Through the record with this sequence number.
    After(String),
    /// From the watch's start, with no record seen yet.
    Start,
    /// From its oldest record (a shard born after the watch started).
    Fresh,
    /// To its end (closed, or closed before the watch started).
    Done,
}

impl Mark {
    /// Whether the record `seq` is past this mark (not read yet, as far as it says).
    pub(super) fn before(&self, seq: &str) -> bool {
        match self {
            Mark::After(done) => sequence_after(seq, done),
            Mark::Start | Mark::Fresh => true,
            Mark::Done => false,
        }
    }
}

impl Cursor {
    /// Whether the record `seq` of `shard` was handed already, though after the shard's mark.
    pub(super) fn skips(&self, shard: &str, seq: &str) -> bool {
        self.skips
            .get(shard)
            .is_some_and(|s| s.iter().any(|q| q == seq))
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "w1;{}", self.started)?;
        if self.taken != 0 {
            write!(f, "@{}", self.taken)?;
        }
        for (shard, mark) in &self.marks {
            let mark = match mark {
                Mark::After(s) => s.as_str(),
                Mark::Start => "*",
                Mark::Fresh => "+",
                Mark::Done => "!",
            };
            write!(f, ";{shard}={mark}")?;
            for seq in self.skips.get(shard).into_iter().flatten() {
                write!(f, "~{seq}")?;
            }
        }
        Ok(())
    }
}

fn is_sequence(s: &str) -> bool {
    !s.is_empty() && s.len() <= 40 && s.bytes().all(|b| b.is_ascii_digit())
}

impl FromStr for Cursor {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let invalid = || Error::new(ErrorKind::InvalidArgument, "not a watch cursor");
        let mut parts = s.split(';');
        if parts.next() != Some("w1") {
            return Err(invalid());
        }
        let first = parts.next().ok_or_else(invalid)?;
        let (started, taken) = match first.split_once('@') {
            Some((started, taken)) => (started, Some(taken)),
            None => (first, None),
        };
        let started = started.parse().map_err(|_| invalid())?;
        let taken = match taken {
            Some(t) => t.parse().map_err(|_| invalid())?,
            None => 0,
        };
        let mut cursor = Cursor {
            started,
            taken,
            ..Cursor::default()
        };
        for part in parts {
            let (shard, rest) = part.split_once('=').ok_or_else(invalid)?;
            let valid_id = !shard.is_empty()
                && shard.len() <= 65
                && shard
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
            let mut fields = rest.split('~');
            let mark = match fields.next().unwrap_or_default() {
                "*" => Mark::Start,
                "+" => Mark::Fresh,
                "!" => Mark::Done,
                seq if is_sequence(seq) => Mark::After(seq.to_owned()),
                _ => return Err(invalid()),
            };
            let skips: Vec<String> = fields.map(str::to_owned).collect();
            if !valid_id
                || !skips.iter().all(|q| is_sequence(q) && mark.before(q))
                || cursor.marks.insert(shard.to_owned(), mark).is_some()
            {
                return Err(invalid());
            }
            if !skips.is_empty() {
                cursor.skips.insert(shard.to_owned(), skips);
            }
        }
        Ok(cursor)
    }
}

impl Serialize for Cursor {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> std::result::Result<Z::Ok, Z::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Cursor {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_what_they_cannot_be() {
        for text in ["w1;0", "w1;5;a=*;b=+;c=!;d=7~9~12", "w1;5;b=+~3"] {
            assert_eq!(text.parse::<Cursor>().unwrap().to_string(), text);
        }
        for bad in [
            "",
            "w2;1",
            "w1;x",
            "w1;1;a",
            "w1;1;a=",
            "w1;1;a=x",
            "w1;1;a=1;a=2",
            "w1;1;=1",
            "w1;1;a b=1",
            "w1;1;a=5~4",
            "w1;1;a=!~9",
            "w1;1;a=1~x",
        ] {
            assert!(bad.parse::<Cursor>().is_err(), "{bad:?}");
        }
    }
}
