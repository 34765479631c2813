//! [`Hierarchical`]: a type stored at a path built from its own fields.

use std::fmt::Debug;

use serde::{Serialize, de::DeserializeOwned};

use crate::error::{Error, ErrorKind, Result};
use crate::path::Path;

/// A type stored in a tree at a path built from a template and its own fields.
///
/// Implement it with `#[derive(Hierarchical)]` and `#[dynatree(path = "…")]`; a hand-written
/// impl is possible and shown below. The derive also generates the key structs
/// (`LinkKey`, `LinkCollection`) and checks the template at compile time.
///
/// Every field is stored in the object row (key fields too, so a row read directly is
/// self-describing); the path is built from the placeholder fields, and
/// [`key_from_components`](Hierarchical::key_from_components) recovers them from a path.
///
/// # Examples
///
/// With the derive:
///
/// ```
/// use dynatree::Hierarchical;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
/// #[dynatree(path = "Accounts/{id}")]
/// struct Account {
///     id: String,
///     name: String,
/// }
///
/// let key = AccountKey { id: "123".into() };
/// assert_eq!(key.path()?, dynatree::Path::new(["Accounts", "123"])?);
/// assert_eq!(Account::TEMPLATE, "Accounts/{id}");
/// # Ok::<(), dynatree::Error>(())
/// ```
///
/// The equivalent hand-written impl:
///
/// ```
/// use dynatree::{Hierarchical, keys::KeySegment, Result};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct Account { id: String, name: String }
///
/// #[derive(Debug, Clone, PartialEq, Eq, Hash)]
/// struct AccountKey { id: String }
/// #[derive(Debug, Clone, PartialEq, Eq, Hash)]
/// struct AccountCollection {}
///
/// impl Hierarchical for Account {
///     type Key = AccountKey;
///     type Collection = AccountCollection;
///     type Last = String;
///     const TEMPLATE: &'static str = "Accounts/{id}";
///     const RESERVED: char = '¦';
///     const VERSION_FIELD: Option<&'static str> = None;
///
///     fn key(&self) -> AccountKey { AccountKey { id: self.id.clone() } }
///     fn key_components(key: &AccountKey) -> Vec<String> {
///         vec!["Accounts".to_owned(), key.id.encode()]
///     }
///     fn collection_of(_: &AccountKey) -> AccountCollection { AccountCollection {} }
///     fn collection_components(_: &AccountCollection) -> Vec<String> {
///         vec!["Accounts".to_owned()]
///     }
///     fn key_from_components(c: &[String]) -> Result<AccountKey> {
///         dynatree::__private::expect_len(c, 2, Self::TEMPLATE)?;
///         dynatree::__private::expect_literal(&c[0], "Accounts", Self::TEMPLATE)?;
///         Ok(AccountKey { id: String::decode(&c[1])? })
///     }
///     fn version(&self) -> Option<u64> { None }
///     fn set_version(&mut self, _: u64) {}
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not stored in a tree",
    note = "consider adding `#[derive(dynatree::Hierarchical)]` and `#[dynatree(path = \"…\")]`"
)]
pub trait Hierarchical: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The typed key: every placeholder field.
    type Key: Debug + Clone + Send + Sync;
    /// The typed key of the collection this type lives in: every placeholder but the last.
    type Collection: Debug + Clone + Send + Sync;
    /// The type of the last placeholder: what typed queries compare (a
    /// [`KeySegment`](crate::keys::KeySegment)).
    type Last;

    /// The path template as written, e.g. `"Accounts/{account_id}/Links/{short}"`.
    const TEMPLATE: &'static str;
    /// The reserved character the template was checked against; a tree using another one
    /// refuses this type.
    const RESERVED: char;
    /// The attribute name of the `#[dynatree(version)]` field, if there is one.
    const VERSION_FIELD: Option<&'static str>;
    /// The secondary indexes declared with `#[dynatree(index(...))]`.
    const INDEXES: &'static [IndexDef] = &[];

    /// The attribute name of the `#[dynatree(ttl)]` field, if there is one.
    const TTL_FIELD: Option<&'static str> = None;
    /// The fields declared with `#[dynatree(from = Type::field)]`: copies of ancestors' fields
    /// (see [`Denormalized`](crate::denorm::Denormalized)).
    const DENORMALIZED: &'static [crate::denorm::Denormalized] = &[];

    /// When this value expires (seconds since the Unix epoch), from its `#[dynatree(ttl)]`
    /// field; `None`: never. See [`Expiry`](crate::Expiry).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Hierarchical;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize)]
    /// #[dynatree(path = "Sessions/{id}")]
    /// struct Session { id: String, #[dynatree(ttl)] expires: u64 }
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize)]
    /// #[dynatree(path = "Accounts/{id}")]
    /// struct Account { id: String }
    ///
    /// let s = Session { id: "s1".into(), expires: 1_700_000_000 };
    /// assert_eq!(s.expires_at(), Some(1_700_000_000));
    /// assert_eq!(Account { id: "a1".into() }.expires_at(), None); // no ttl field: never
    /// ```
    fn expires_at(&self) -> Option<u64> {
        None
    }

    /// This value's keys in each of [`INDEXES`](Hierarchical::INDEXES) (encoded).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Hierarchical;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize)]
    /// #[dynatree(path = "Accounts/{id}", index(name = "by_email", hash = email))]
    /// struct Account { id: String, email: String }
    ///
    /// let a = Account { id: "a1".into(), email: "ann@example.com".into() };
    /// let keys = a.index_keys();
    /// assert_eq!(keys.len(), 1);
    /// assert_eq!(keys[0].index(), "by_email");
    /// assert!(keys[0].hash().contains("ann@example.com"));
    /// assert_eq!(keys[0].range(), None);
    /// ```
    fn index_keys(&self) -> Vec<IndexKey> {
        Vec::new()
    }

    /// This value's key.
    fn key(&self) -> Self::Key;

    /// The path components of a key (literals and encoded placeholders).
    fn key_components(key: &Self::Key) -> Vec<String>;

    /// The collection a key belongs to.
    fn collection_of(key: &Self::Key) -> Self::Collection;

    /// The path components of a collection.
    fn collection_components(collection: &Self::Collection) -> Vec<String>;

    /// Recovers a key from path components.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`] if the components do not match the template.
    fn key_from_components(components: &[String]) -> Result<Self::Key>;

    /// The value of the version field, if there is one.
    fn version(&self) -> Option<u64>;

    /// Sets the version field (no-op without one).
    fn set_version(&mut self, version: u64);

    /// The path of a key.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`] if an encoded component is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Hierarchical;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize)]
    /// #[dynatree(path = "Accounts/{account_id}/Links/{short}")]
    /// struct Link { account_id: String, short: String }
    ///
    /// let key = LinkKey { account_id: "a1".into(), short: "xyz".into() };
    /// assert_eq!(Link::key_path(&key)?.to_string(), "/Accounts/a1/Links/xyz");
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    fn key_path(key: &Self::Key) -> Result<Path> {
        Path::new(Self::key_components(key))
    }

    /// The path of a collection.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`] if an encoded component is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Hierarchical;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize)]
    /// #[dynatree(path = "Accounts/{account_id}/Links/{short}")]
    /// struct Link { account_id: String, short: String }
    ///
    /// let key = LinkKey { account_id: "a1".into(), short: "xyz".into() };
    /// let links = Link::collection_of(&key);
    /// assert_eq!(Link::collection_path(&links)?.to_string(), "/Accounts/a1/Links");
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    fn collection_path(collection: &Self::Collection) -> Result<Path> {
        Path::new(Self::collection_components(collection))
    }

    /// Recovers a key from a path.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`] if the path does not match the template.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Hierarchical;
    /// use serde::{Deserialize, Serialize};
    ///
    /// use dynatree::Path;
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize)]
    /// #[dynatree(path = "Accounts/{account_id}/Links/{short}")]
    /// struct Link { account_id: String, short: String }
    ///
    /// let key = Link::key_from_path(&Path::parse("/Accounts/a1/Links/xyz")?)?;
    /// assert_eq!(key, LinkKey { account_id: "a1".into(), short: "xyz".into() });
    /// assert!(Link::key_from_path(&Path::parse("/Users/a1/Links/xyz")?).unwrap_err().is_invalid_path());
    /// assert!(Link::key_from_path(&Path::parse("/Accounts/a1")?).is_err());
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    fn key_from_path(path: &Path) -> Result<Self::Key> {
        Self::key_from_components(path.components())
    }
}

/// A secondary index of a [`Hierarchical`] type: a global secondary index of the table whose
/// key attributes are dynatree bookkeeping (`SC ix.<name>.h`, `SC ix.<name>.r`), so several types
/// can share one index name without mixing (each type's hash values carry its template).
///
/// # Examples
///
/// ```
/// use dynatree::keys::IndexDef;
/// const BY_EMAIL: IndexDef = IndexDef::new("by_email", false);
/// assert_eq!(BY_EMAIL.name(), "by_email");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IndexDef {
    name: &'static str,
    has_range: bool,
}

impl IndexDef {
    /// An index named `name`, with or without a range key.
    pub const fn new(name: &'static str, has_range: bool) -> Self {
        Self { name, has_range }
    }

    /// The index name.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::keys::IndexDef;
    ///
    /// assert_eq!(IndexDef::new("by_email", false).name(), "by_email");
    /// ```
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether the index has a range key.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::keys::IndexDef;
    ///
    /// assert!(IndexDef::new("by_created", true).has_range());
    /// assert!(!IndexDef::new("by_email", false).has_range());
    /// ```
    pub fn has_range(&self) -> bool {
        self.has_range
    }

    /// The table's index definition for a tree with reserved character `sc`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::keys::IndexDef;
    ///
    /// let spec = IndexDef::new("by_created", true).spec('¦');
    /// assert_eq!(spec.name, "by_created");
    /// assert_eq!(spec.hash_attr, "¦ix.by_created.h");
    /// assert_eq!(spec.range_attr.as_deref(), Some("¦ix.by_created.r"));
    /// assert_eq!(IndexDef::new("by_email", false).spec('|').range_attr, None);
    /// ```
    pub fn spec(&self, sc: char) -> crate::storage::IndexSpec {
        let (hash, range) = crate::layout::index_attrs(sc, self.name, self.has_range);
        crate::storage::IndexSpec::new(self.name, hash, range)
    }
}

/// One value's key in one index (encoded values), or what an index query looks up.
///
/// # Examples
///
/// ```
/// use dynatree::keys::IndexKey;
/// let k = IndexKey::new("by_email", "alice@example.com".into(), None);
/// assert_eq!(k.hash(), "alice@example.com");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IndexKey {
    index: &'static str,
    hash: String,
    range: Option<String>,
}

impl IndexKey {
    /// A key in index `index`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::keys::IndexKey;
    ///
    /// let k = IndexKey::new("by_created", "a1".into(), Some("2024-05-01".into()));
    /// assert_eq!((k.index(), k.hash(), k.range()), ("by_created", "a1", Some("2024-05-01")));
    /// ```
    pub fn new(index: &'static str, hash: String, range: Option<String>) -> Self {
        Self { index, hash, range }
    }

    /// The index name.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::keys::IndexKey;
    ///
    /// assert_eq!(IndexKey::new("by_email", "a@b".into(), None).index(), "by_email");
    /// ```
    pub fn index(&self) -> &'static str {
        self.index
    }

    /// The encoded hash value.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::keys::IndexKey;
    ///
    /// assert_eq!(IndexKey::new("by_email", "a@b".into(), None).hash(), "a@b");
    /// ```
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The encoded range value, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::keys::IndexKey;
    ///
    /// assert_eq!(IndexKey::new("by_email", "a@b".into(), None).range(), None);
    /// let k = IndexKey::new("by_created", "a1".into(), Some("2024".into()));
    /// assert_eq!(k.range(), Some("2024"));
    /// ```
    pub fn range(&self) -> Option<&str> {
        self.range.as_deref()
    }
}

/// Helpers for generated code (re-exported from `__private`).
pub(crate) mod support {
    use super::{Error, ErrorKind, Result};

    /// Fails unless `components` has `n` entries.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`].
    ///
    /// # Examples
    ///
    /// ```
    /// let c = vec!["Accounts".to_owned(), "a1".to_owned()];
    /// assert!(dynatree::__private::expect_len(&c, 2, "Accounts/{id}").is_ok());
    /// let err = dynatree::__private::expect_len(&c[..1], 2, "Accounts/{id}").unwrap_err();
    /// assert!(err.is_invalid_path());
    /// ```
    pub fn expect_len(components: &[String], n: usize, template: &str) -> Result<()> {
        if components.len() == n {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::InvalidPath,
                format!(
                    "a path of {} components does not match the template {template:?}",
                    components.len()
                ),
            ))
        }
    }

    /// Fails unless `component` is the literal `expected`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::__private::expect_literal;
    ///
    /// assert!(expect_literal("Accounts", "Accounts", "Accounts/{id}").is_ok());
    /// assert!(expect_literal("Users", "Accounts", "Accounts/{id}").unwrap_err().is_invalid_path());
    /// ```
    pub fn expect_literal(component: &str, expected: &str, template: &str) -> Result<()> {
        if component == expected {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::InvalidPath,
                format!(
                    "component {component:?} should be {expected:?} in the template {template:?}"
                ),
            ))
        }
    }

    /// Writes path components as [`Path`](crate::Path)'s `Display` does (`/a/b`, `/` for none),
    /// but never fails: an empty component, which `Path::new` refuses, shows as nothing
    /// between two slashes. The generated key structs' `Display` uses it.
    ///
    /// # Errors
    ///
    /// Only the formatter's.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::fmt;
    ///
    /// struct Shown(Vec<String>);
    /// impl fmt::Display for Shown {
    ///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    ///         dynatree::__private::fmt_components(&self.0, f)
    ///     }
    /// }
    /// assert_eq!(Shown(vec!["a".into(), String::new(), "b".into()]).to_string(), "/a//b");
    /// assert_eq!(Shown(vec![]).to_string(), "/");
    /// ```
    pub fn fmt_components(
        components: &[String],
        f: &mut std::fmt::Formatter<'_>,
    ) -> std::fmt::Result {
        if components.is_empty() {
            return f.write_str("/");
        }
        for c in components {
            f.write_str("/")?;
            f.write_str(c)?;
        }
        Ok(())
    }

    /// Whether `child`'s template starts with every component of `parent`'s, placeholders
    /// matching placeholders (names may differ). Usable in constants.
    pub const fn template_extends(child: &str, parent: &str) -> bool {
        let (c, p) = (child.as_bytes(), parent.as_bytes());
        let (mut i, mut j) = (0, 0);
        loop {
            // At the start of a component in both.
            if j == p.len() {
                return i == c.len() || c[i] == b'/';
            }
            if i == c.len() {
                return false;
            }
            let c_ph = c[i] == b'{';
            let p_ph = p[j] == b'{';
            if c_ph != p_ph {
                return false;
            }
            // Skip to the end of both components, comparing literals byte by byte.
            if c_ph {
                while i < c.len() && c[i] != b'/' {
                    i += 1;
                }
                while j < p.len() && p[j] != b'/' {
                    j += 1;
                }
            } else {
                while i < c.len() && j < p.len() && c[i] != b'/' && p[j] != b'/' {
                    if c[i] != p[j] {
                        return false;
                    }
                    i += 1;
                    j += 1;
                }
                let c_end = i == c.len() || c[i] == b'/';
                let p_end = j == p.len() || p[j] == b'/';
                if !(c_end && p_end) {
                    return false;
                }
            }
            if j < p.len() {
                j += 1; // the '/'
                if i == c.len() {
                    return false;
                }
                i += 1;
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::template_extends;

        #[test]
        fn extends() {
            assert!(template_extends("Accounts/{a}/Links/{s}", "Accounts/{id}"));
            assert!(template_extends("Accounts/{id}", "Accounts/{id}"));
            assert!(!template_extends("Accounts/{a}", "Accounts/{a}/Links/{s}"));
            assert!(!template_extends("Account/{a}/Links/{s}", "Accounts/{id}"));
            assert!(!template_extends("Accounts/x/Links/{s}", "Accounts/{id}"));
            assert!(!template_extends("AccountsX/{a}", "Accounts"));
            assert!(template_extends("Accounts/{a}", "Accounts"));
        }
    }
}
