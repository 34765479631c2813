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
pub const INDEX: Symbol = Symbol("index");
pub const NAME: Symbol = Symbol("name");
pub const HASH: Symbol = Symbol("hash");
pub const RANGE: Symbol = Symbol("range");
pub const RENAME: Symbol = Symbol("rename");
pub const RENAME_ALL: Symbol = Symbol("rename_all");

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
