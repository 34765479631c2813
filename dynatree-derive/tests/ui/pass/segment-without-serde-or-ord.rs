// A key segment with neither serde's traits nor `Ord` (the item serializes it `with` a module):
// the derive still succeeds; the key struct just has no `Serialize`, `Deserialize` or `Ord`.
use std::collections::HashSet;

use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Code(u32);

impl dynatree::keys::KeySegment for Code {
    fn encode(&self) -> String {
        dynatree::keys::KeySegment::encode(&self.0)
    }
    fn decode(s: &str) -> dynatree::Result<Self> {
        Ok(Code(<u32 as dynatree::keys::KeySegment>::decode(s)?))
    }
}

mod code_serde {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(c: &super::Code, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(c.0)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<super::Code, D::Error> {
        u32::deserialize(d).map(super::Code)
    }
}

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Codes/{code}", index(name = "by_code", hash = code))]
struct Entry {
    #[serde(with = "code_serde")]
    code: Code,
    name: String,
}

fn main() {
    let key = EntryKey { code: Code(1) };
    assert_eq!(key.to_string(), "/Codes/0000000001");
    assert_eq!(Entry::index_by_code(&Code(1)).hash(), "0000000001");
    let set = HashSet::from([key.clone()]);
    assert!(set.contains(&key));
}
