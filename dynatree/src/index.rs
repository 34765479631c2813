//! The secondary-index attributes of a typed value: what a typed write stores, what check
//! expects, and the values an index key may not hold.

use crate::error::{Error, ErrorKind, Result};
use crate::hierarchical::Hierarchical;
use crate::item::{Item, Value};
use crate::path::Path;

/// The secondary-index attributes of `value` (names and values), its index hashes made by
/// `hash_of` from the encoded values.
pub(crate) fn index_attributes<T: Hierarchical>(
    value: &T,
    sc: char,
    hash_of: impl Fn(&str) -> String,
) -> Result<Vec<(String, Value)>> {
    let mut out = Vec::new();
    for key in value.index_keys() {
        let def = T::INDEXES
            .iter()
            .find(|d| d.name() == key.index())
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidAttribute,
                    "index key of an undeclared index",
                )
            })?;
        let spec = def.spec(sc);
        refuse_reserved_in_index_value(key.hash(), sc, def.name())?;
        let hash = hash_of(key.hash());
        check_index_value(&hash, crate::storage::MAX_HASH_KEY_BYTES, def.name())?;
        out.push((spec.hash_attr, Value::S(hash)));
        if let (Some(attr), Some(r)) = (spec.range_attr, key.range()) {
            refuse_reserved_in_index_value(r, sc, def.name())?;
            check_index_value(r, crate::storage::MAX_RANGE_KEY_BYTES, def.name())?;
            out.push((attr, Value::S(r.to_owned())));
        }
    }
    Ok(out)
}

/// The secondary-index attributes a typed write through the scope rooted at `scope` (empty for
/// the whole tree) gives the object row `row` read as a value of `T` (what
/// [`Tree::check`](crate::Tree::check) compares, and repair and imports write): `None` if the
/// row does not read as `T`; an error ([`ErrorKind::InvalidValue`]) if it does but its index
/// key values cannot be stored (the reserved character in them, or over DynamoDB's key limits
/// with the scope's root), as a typed write of it is refused.
pub(crate) fn expected_index_attributes<T: Hierarchical>(
    layout: &crate::layout::Layout,
    scope: &[String],
    row: &Item,
) -> Result<Option<Vec<(String, Value)>>> {
    let sc = layout.reserved();
    let mut user = row.clone();
    crate::layout::strip_bookkeeping(&mut user, sc);
    let Ok(value) = user.to_deserialize::<T>() else {
        return Ok(None);
    };
    index_attributes(&value, sc, |encoded| {
        layout.index_hash(scope, T::TEMPLATE, encoded)
    })
    .map(Some)
}

/// The scope roots (empty: the whole tree) that the index hashes `row` holds for `T`'s indexes
/// name together with `T`'s template: the scopes through which the row was indexed as a `T`.
pub(crate) fn indexed_roots<T: Hierarchical>(
    layout: &crate::layout::Layout,
    row: &Item,
) -> Vec<Path> {
    let sc = layout.reserved();
    let mut out: Vec<Path> = Vec::new();
    for def in T::INDEXES {
        let named = row
            .get_s(&def.spec(sc).hash_attr)
            .and_then(|stored| layout.split_index_hash(stored))
            .filter(|(_, template)| *template == T::TEMPLATE);
        if let Some((root, _)) = named
            && !out.contains(&root)
        {
            out.push(root);
        }
    }
    out
}

/// Refuses an encoded index key value (a hash value as the caller gives it, before the scope
/// and template are put before it, or a range value) that contains the reserved character
/// `sc`, with [`ErrorKind::InvalidValue`]: the stored hash is the scope's root, the template
/// and the value joined by `sc`, so a value with `sc` in it could spell the hash of another
/// scope (a tenant's value read through a scope nested in its own).
pub(crate) fn refuse_reserved_in_index_value(v: &str, sc: char, index: &str) -> Result<()> {
    if v.contains(sc) {
        return Err(Error::new(
            ErrorKind::InvalidValue,
            format!("a key value of index `{index}` contains the reserved character {sc:?}"),
        ));
    }
    Ok(())
}

fn check_index_value(v: &str, max: usize, index: &str) -> Result<()> {
    if v.is_empty() || v.len() > max {
        return Err(Error::new(
            ErrorKind::InvalidValue,
            format!(
                "the key of index `{index}` is {} bytes; DynamoDB takes 1 to {max}",
                v.len()
            ),
        ));
    }
    Ok(())
}
