//! [`Path`]: a sequence of non-empty UTF-8 components naming a node of a tree.

use std::fmt;

use crate::error::{Error, Result};

/// A path in a tree: zero or more non-empty components.
///
/// The empty path is the root; it can be listed but holds no object. A `Path` never has an
/// empty component. Whether a component contains a tree's reserved character, and whether the
/// keys it produces fit DynamoDB's limits, depends on the tree, so every tree call checks that
/// again (see [`Path::validate`]).
///
/// # Examples
///
/// ```
/// use dynatree::Path;
///
/// let p = Path::new(["Accounts", "123456"])?;
/// assert_eq!(p.len(), 2);
/// assert_eq!(p.to_string(), "/Accounts/123456");
/// assert_eq!(p.parent(), Some(Path::new(["Accounts"])?));
/// assert!(Path::new(["a", ""]).unwrap_err().is_invalid_path());
/// # Ok::<(), dynatree::Error>(())
/// ```
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Path {
    components: Vec<String>,
}

impl Path {
    /// A path from its components.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`](crate::ErrorKind::InvalidPath) if a component is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Path;
    ///
    /// let p = Path::new(["Accounts", "123456"])?;
    /// assert_eq!(p.to_string(), "/Accounts/123456");
    /// assert_eq!(Path::new(Vec::<String>::new())?, Path::root());
    /// assert!(Path::new(["a", ""]).unwrap_err().is_invalid_path());
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn new<I, C>(components: I) -> Result<Self>
    where
        I: IntoIterator<Item = C>,
        C: Into<String>,
    {
        let components: Vec<String> = components.into_iter().map(Into::into).collect();
        if let Some(i) = components.iter().position(String::is_empty) {
            return Err(Error::invalid_path(format!("component {i} is empty")));
        }
        Ok(Self { components })
    }

    /// The root: the empty path.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Path;
    ///
    /// let root = Path::root();
    /// assert!(root.is_root());
    /// assert_eq!(root.to_string(), "/");
    /// assert_eq!(root.parent(), None);
    /// ```
    pub fn root() -> Self {
        Self::default()
    }

    /// Splits `s` on `/` (a leading `/` is optional). Convenient when no component contains `/`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`](crate::ErrorKind::InvalidPath) on an empty component
    /// (`"a//b"`, a trailing `/`).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Path;
    /// assert_eq!(Path::parse("/a/b")?, Path::new(["a", "b"])?);
    /// assert_eq!(Path::parse("")?, Path::root());
    /// assert!(Path::parse("a//b").is_err());
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.strip_prefix('/').unwrap_or(s);
        if s.is_empty() {
            return Ok(Self::root());
        }
        Self::new(s.split('/'))
    }

    /// The components.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Path;
    ///
    /// let p = Path::parse("/Accounts/123456")?;
    /// assert_eq!(p.components(), ["Accounts", "123456"]);
    /// assert!(Path::root().components().is_empty());
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn components(&self) -> &[String] {
        &self.components
    }

    /// The number of components.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Path;
    ///
    /// assert_eq!(Path::parse("/a/b/c")?.len(), 3);
    /// assert_eq!(Path::root().len(), 0);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.components.len()
    }

    /// Whether the path has no components (it is the root); the same as [`Path::is_root`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Path;
    ///
    /// assert!(Path::root().is_empty());
    /// assert!(!Path::parse("/a")?.is_empty());
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.components.is_empty()
    }

    /// Whether this is the root.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Path;
    ///
    /// assert!(Path::parse("/")?.is_root());
    /// assert!(!Path::parse("/a")?.is_root());
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn is_root(&self) -> bool {
        self.components.is_empty()
    }

    /// The last component, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Path;
    ///
    /// assert_eq!(Path::parse("/Accounts/123456")?.name(), Some("123456"));
    /// assert_eq!(Path::root().name(), None);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn name(&self) -> Option<&str> {
        self.components.last().map(String::as_str)
    }

    /// The path without its last component; `None` for the root.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Path;
    ///
    /// let p = Path::parse("/a/b")?;
    /// assert_eq!(p.parent(), Some(Path::parse("/a")?));
    /// assert_eq!(Path::parse("/a")?.parent(), Some(Path::root()));
    /// assert_eq!(Path::root().parent(), None);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn parent(&self) -> Option<Path> {
        let (_, rest) = self.components.split_last()?;
        Some(Self {
            components: rest.to_vec(),
        })
    }

    /// The first `n` components.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Path;
    ///
    /// let p = Path::parse("/a/b/c")?;
    /// assert_eq!(p.prefix(2), Path::parse("/a/b")?);
    /// assert_eq!(p.prefix(0), Path::root());
    /// assert_eq!(p.prefix(10), p); // at most every component
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn prefix(&self, n: usize) -> Path {
        Self {
            components: self.components[..n.min(self.len())].to_vec(),
        }
    }

    /// This path with one more component.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`](crate::ErrorKind::InvalidPath) if `name` is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Path;
    ///
    /// let accounts = Path::parse("/Accounts")?;
    /// assert_eq!(accounts.child("123456")?.to_string(), "/Accounts/123456");
    /// assert!(accounts.child("").unwrap_err().is_invalid_path());
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn child(&self, name: impl Into<String>) -> Result<Path> {
        let name = name.into();
        if name.is_empty() {
            return Err(Error::invalid_path(format!(
                "component {} is empty",
                self.len()
            )));
        }
        let mut components = self.components.clone();
        components.push(name);
        Ok(Self { components })
    }

    /// Whether `self` starts with every component of `other`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Path;
    ///
    /// let p = Path::parse("/a/b/c")?;
    /// assert!(p.starts_with(&Path::parse("/a/b")?));
    /// assert!(p.starts_with(&Path::root()));
    /// assert!(!p.starts_with(&Path::parse("/a/bc")?)); // whole components, not a string prefix
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn starts_with(&self, other: &Path) -> bool {
        self.components.starts_with(&other.components)
    }

    /// Checks the components against a tree's reserved character.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`](crate::ErrorKind::InvalidPath) naming the first component
    /// that contains `reserved`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Path;
    ///
    /// assert!(Path::parse("/a/b")?.validate('¦').is_ok());
    /// let err = Path::parse("/a/b¦c")?.validate('¦').unwrap_err();
    /// assert!(err.is_invalid_path());
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn validate(&self, reserved: char) -> Result<()> {
        for (i, c) in self.components.iter().enumerate() {
            if c.contains(reserved) {
                return Err(Error::invalid_path(format!(
                    "component {i} contains the reserved character {reserved:?}"
                )));
            }
        }
        Ok(())
    }

    /// Parses the escaped text form written by [`Path::escaped`]: components separated by `/`
    /// (a leading `/` is optional, `/` alone is the root), where `%2F` stands for a `/` inside
    /// a component and `%25` for a `%`. Any other `%` sequence is refused, so every string has
    /// at most one meaning. The form the `dynatree` command line and JSONL exports use.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`](crate::ErrorKind::InvalidPath) on an empty component or a
    /// `%` not followed by `2F`/`2f` or `25`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Path;
    /// let p = Path::parse_escaped("/Files/a%2Fb/100%25")?;
    /// assert_eq!(p.components(), ["Files", "a/b", "100%"]);
    /// assert_eq!(p.escaped(), "/Files/a%2Fb/100%25");
    /// assert_eq!(Path::parse_escaped("/")?, Path::root());
    /// assert!(Path::parse_escaped("/a%20b").is_err());
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn parse_escaped(s: &str) -> Result<Self> {
        let s = s.strip_prefix('/').unwrap_or(s);
        if s.is_empty() {
            return Ok(Self::root());
        }
        let mut components = Vec::new();
        for raw in s.split('/') {
            let mut out = String::with_capacity(raw.len());
            let mut rest = raw;
            while let Some(at) = rest.find('%') {
                out.push_str(&rest[..at]);
                let code = rest.get(at + 1..at + 3);
                match code {
                    Some("2F" | "2f") => out.push('/'),
                    Some("25") => out.push('%'),
                    _ => {
                        return Err(Error::invalid_path(format!(
                            "{raw:?}: `%` must be followed by 2F (a `/`) or 25 (a `%`)"
                        )));
                    }
                }
                rest = &rest[at + 3..];
            }
            out.push_str(rest);
            components.push(out);
        }
        Self::new(components)
    }

    /// The escaped text form: `/` between components, `/` alone for the root, and inside a
    /// component `%` written `%25` and `/` written `%2F`. [`Path::parse_escaped`] reads it
    /// back; for paths without `/` or `%` in a component it is the same as `to_string()`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Path;
    /// let p = Path::new(["a/b", "c"])?;
    /// assert_eq!(p.escaped(), "/a%2Fb/c");
    /// assert_eq!(Path::parse_escaped(&p.escaped())?, p);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn escaped(&self) -> String {
        if self.components.is_empty() {
            return "/".to_owned();
        }
        let mut s = String::new();
        for c in &self.components {
            s.push('/');
            for ch in c.chars() {
                match ch {
                    '%' => s.push_str("%25"),
                    '/' => s.push_str("%2F"),
                    _ => s.push(ch),
                }
            }
        }
        s
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.components.is_empty() {
            return f.write_str("/");
        }
        for c in &self.components {
            write!(f, "/{c}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.components).finish()
    }
}

/// Anything a tree call accepts as a path: a [`Path`], or components as an array, slice or
/// vector of strings. Conversion checks for empty components.
///
/// # Examples
///
/// ```
/// use dynatree::{IntoPath, Path};
///
/// assert_eq!(["a", "b"].into_path()?, Path::new(["a", "b"])?);
/// assert!(vec![String::new()].into_path().is_err());
/// # Ok::<(), dynatree::Error>(())
/// ```
pub trait IntoPath {
    /// The path, or an [`ErrorKind::InvalidPath`](crate::ErrorKind::InvalidPath) error.
    ///
    /// # Errors
    ///
    /// If a component is empty.
    fn into_path(self) -> Result<Path>;
}

impl IntoPath for Path {
    fn into_path(self) -> Result<Path> {
        Ok(self)
    }
}

impl IntoPath for &Path {
    fn into_path(self) -> Result<Path> {
        Ok(self.clone())
    }
}

impl<S: AsRef<str>, const N: usize> IntoPath for [S; N] {
    fn into_path(self) -> Result<Path> {
        Path::new(self.iter().map(|s| s.as_ref().to_owned()))
    }
}

impl<S: AsRef<str>, const N: usize> IntoPath for &[S; N] {
    fn into_path(self) -> Result<Path> {
        Path::new(self.iter().map(|s| s.as_ref().to_owned()))
    }
}

impl<S: AsRef<str>> IntoPath for &[S] {
    fn into_path(self) -> Result<Path> {
        Path::new(self.iter().map(|s| s.as_ref().to_owned()))
    }
}

impl<S: AsRef<str>> IntoPath for Vec<S> {
    fn into_path(self) -> Result<Path> {
        Path::new(self.iter().map(|s| s.as_ref().to_owned()))
    }
}

impl<S: AsRef<str>> IntoPath for &Vec<S> {
    fn into_path(self) -> Result<Path> {
        Path::new(self.iter().map(|s| s.as_ref().to_owned()))
    }
}

/// Which of `parts` parts (from 0) a child named `name` belongs to when work is split across
/// workers by name (a split export of the command line, `check::Repair::part`): FNV-1a of the
/// name's UTF-8 bytes, modulo `parts`. Stable across machines and versions, so workers agree
/// without talking; `parts` of 0 is taken as 1.
///
/// # Examples
///
/// ```
/// use dynatree::transfer::part_of;
///
/// assert_eq!(part_of("Accounts", 1), 0);
/// assert!(part_of("Accounts", 4) < 4);
/// assert_eq!(part_of("Accounts", 4), part_of("Accounts", 4));
/// ```
pub fn part_of(name: &str, parts: u32) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % u64::from(parts.max(1))) as u32
}
