//! The pieces of keys: the segments a path template's placeholders hold, and the keys of
//! secondary indexes. The derive implements these for your types; name them when you write
//! a segment type of your own or call an index query with a key built by hand.
//!
//! # Examples
//!
//! ```
//! use dynatree::keys::KeySegment;
//!
//! let account = String::from("acme");
//! assert_eq!(String::decode(&account.encode())?, account);
//! # Ok::<(), dynatree::Error>(())
//! ```

pub use crate::hierarchical::{IndexDef, IndexKey};
pub use crate::segment::{AsKeySegment, KeySegment};
