//! Attribute keys, compared as in serde_derive.

use std::fmt::{self, Display};

use syn::{Ident, Path};

#[derive(Copy, Clone, Debug)]
pub struct Symbol(&'static str);

pub const DYNATREE: Symbol = Symbol("dynatree");
pub const SERDE: Symbol = Symbol("serde");
pub const PATH: Symbol = Symbol("path");
pub const PARENT: Symbol = Symbol("parent");
pub const RESERVED: Symbol = Symbol("reserved");
pub const CRATE: Symbol = Symbol("crate");
pub const VERSION: Symbol = Symbol("version");
pub const TTL: Symbol = Symbol("ttl");
pub const INDEX: Symbol = Symbol("index");
pub const NAME: Symbol = Symbol("name");
pub const HASH: Symbol = Symbol("hash");
pub const RANGE: Symbol = Symbol("range");
pub const RENAME: Symbol = Symbol("rename");
pub const RENAME_ALL: Symbol = Symbol("rename_all");
pub const SKIP: Symbol = Symbol("skip");
pub const SKIP_SERIALIZING: Symbol = Symbol("skip_serializing");
pub const SKIP_DESERIALIZING: Symbol = Symbol("skip_deserializing");
pub const SKIP_SERIALIZING_IF: Symbol = Symbol("skip_serializing_if");
pub const FLATTEN: Symbol = Symbol("flatten");
pub const TAG: Symbol = Symbol("tag");
pub const CONTENT: Symbol = Symbol("content");
pub const TRANSPARENT: Symbol = Symbol("transparent");
pub const FROM: Symbol = Symbol("from");
pub const TRY_FROM: Symbol = Symbol("try_from");
pub const INTO: Symbol = Symbol("into");

impl PartialEq<Symbol> for Ident {
    fn eq(&self, word: &Symbol) -> bool {
        self == word.0
    }
}

impl PartialEq<Symbol> for &Ident {
    fn eq(&self, word: &Symbol) -> bool {
        *self == word.0
    }
}

impl PartialEq<Symbol> for Path {
    fn eq(&self, word: &Symbol) -> bool {
        self.is_ident(word.0)
    }
}

impl PartialEq<Symbol> for &Path {
    fn eq(&self, word: &Symbol) -> bool {
        self.is_ident(word.0)
    }
}

impl Display for Symbol {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.0)
    }
}
pub const OTHER: Symbol = Symbol("other");
