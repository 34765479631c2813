//! Scoped trees: [`Tree::scope`] gives a tree rooted at a path of another, for multi-tenant
//! applications (one scope per tenant, with the credentials of
//! [`iam::ScopePolicy`](crate::iam::ScopePolicy)).
//!
//! A scoped tree is the same handle as any [`Tree`] (a cheap clone sharing the backend, the
//! settings and the cache of listing rows known to exist) plus its root, an absolute path of
//! the table. Scopes compose: `tree.scope(["a"])?.scope(["b"])?` is `tree.scope(["a", "b"])?`.
//! The rows are the rows of the dynamotree layout at their absolute paths: what a scope writes,
//! the whole tree (and the Go library) reads at `<root>/<path>`, and the other way round.
//!
//! # Paths in, paths out
//!
//! Every path a scoped tree takes is relative to its root, and every path it returns is too:
//! [`read_link`](Tree::read_link) targets, [`ancestors`](Tree::ancestors),
//! [`descendants`](Tree::descendants), [`list`](Tree::list) names, [`MoveReport`] links,
//! [`Intent`] sources and destinations. A [`Path`] has no `..` (a component is any non-empty
//! string without the reserved character, and `".."` is a name like any other), so nothing
//! outside the root can be named. Error messages name absolute paths.
//!
//! # The root
//!
//! The scope's root belongs to the tree above it: its listing row lives in the parent's
//! partition, shared with the root's siblings (other tenants), and
//! [`ScopePolicy`](crate::iam::ScopePolicy) credentials cannot write it (see the
//! [`iam`](crate::iam) module's limits). So a scoped tree never removes, marks or locks that
//! row, and refuses every call that would:
//!
//! - [`get`](Tree::get) and [`read_link`](Tree::read_link) of the root (`Path::root()`) read the
//!   root's own object (for example the tenant's account record at `Accounts/{id}`, one
//!   GetItem in the scope's own partition); the unscoped tree's root has none.
//! - Writing or removing it ([`put`](Tree::put), [`put_link`](Tree::put_link),
//!   [`delete`](Tree::delete), [`delete_node`](Tree::delete_node),
//!   [`delete_subtree`](Tree::delete_subtree)), and moving or copying it or onto it
//!   ([`move_subtree`](Tree::move_subtree), [`copy_subtree`](Tree::copy_subtree)), are refused
//!   with [`ErrorKind::InvalidArgument`] before anything is sent. Do that through the parent
//!   tree (with the wider role).
//! - Removals inside the scope prune empty ancestors only below the root: deleting the last
//!   object of a scope leaves the root's listing row (an empty tenant stays listed), where
//!   the parent tree would prune it. Rows the scope writes keep the tree's invariants as any
//!   write does: a put under a root whose listing row is missing creates it (and any missing
//!   ancestor above), which provisions a tenant when the credentials allow it.
//!
//! # Links
//!
//! Targets given to [`put_link`](Tree::put_link) are relative, so a scope only writes links
//! inside itself. A link written by another tree (the parent, the Go library) may point
//! anywhere: a scoped tree refuses to follow or return a target outside its root, with
//! [`ErrorKind::OutOfScope`] (a [`Party::Data`](crate::error::Party::Data) error: the stored data is
//! not what the scope can use), from [`get`](Tree::get), [`read_link`](Tree::read_link),
//! [`list_items`](Tree::list_items) and [`Repository`](crate::Repository) reads.
//!
//! # Typed repositories and indexes
//!
//! `scope.repo::<T>()` stores `T` at `<root>/<T's path>`: with a scope at `Tenants/t1`, a
//! `Link` of template `Accounts/{account}/Links/{short}` lives at
//! `Tenants/t1/Accounts/a/Links/x`. Secondary-index values written through a scope carry the
//! scope's root in their hash (`SC r0 … SC r(n-1) SC template SC value`, where the whole tree
//! writes `template SC value`), and index queries through the scope ask for that hash: an
//! index query returns the items of its scope only, and finds an item only through the scope
//! it was written through. Index key values with the reserved character are refused, on
//! writes and in queries, with [`ErrorKind::InvalidValue`] (nothing is written): with one, a
//! tenant could write, through its scope, the hash of a scope nested in it (a value
//! `Links/{short} SC v` written through `Tenants/t1` would spell the hash of `v` through
//! `Tenants/t1/Links/{short}`). An index query through a scope also drops any row that is
//! not under the scope's root, so what one tenant stores never decides what another reads.
//! The path index ([`TreeBuilder::path_index`]) keeps absolute paths;
//! [`descendants`](Tree::descendants) asks it with the scope's absolute prefix.
//!
//! # Moves, copies, subtree deletions and intents
//!
//! They work with relative paths. Their intent records stay in the tree's one intents
//! partition (`SC SC intents`, shared by every scope), so [`pending`](Tree::pending) and
//! [`resume`](Tree::resume) through a scope read every record and keep those whose source and
//! destination are inside the scope. [`LinkPolicy::Report`] and [`LinkPolicy::Rewrite`] look
//! for links with a Scan of the table and keep those stored inside the scope (links outside
//! it are neither reported nor rewritten). Writing the intents partition and scanning are
//! outside what [`ScopePolicy`](crate::iam::ScopePolicy) grants: moves need the wider role. An
//! operation a scope started and a whole-tree [`resume`](Tree::resume) finished after a crash
//! prunes as the whole tree does (up to, and possibly including, the scope's root row).
//!
//! # Costs
//!
//! A scope adds no request: the root is prepended to paths in memory. An unscoped tree pays
//! one `Option` check per call.
//!
//! [`ErrorKind::InvalidArgument`]: crate::ErrorKind::InvalidArgument
//! [`ErrorKind::InvalidValue`]: crate::ErrorKind::InvalidValue
//! [`ErrorKind::OutOfScope`]: crate::ErrorKind::OutOfScope
//! [`MoveReport`]: crate::ops::MoveReport
//! [`Intent`]: crate::ops::Intent
//! [`Path`]: crate::Path
//! [`Tree`]: crate::Tree
//! [`TreeBuilder::path_index`]: crate::TreeBuilder::path_index
//! [`LinkPolicy::Report`]: crate::ops::LinkPolicy::Report
//! [`LinkPolicy::Rewrite`]: crate::ops::LinkPolicy::Rewrite
//!
#![doc = include_str!("scope.md")]

use crate::tree::Ctx;

use crate::error::{Error, ErrorKind, Result};
use crate::item::Item;
use crate::layout::HASH_KEY;
use crate::path::{IntoPath, Path};

use super::{Intent, MoveReport, Tree};

impl<S> Tree<S> {
    /// A tree rooted at `path` (relative to this tree's root): every path it takes and returns
    /// is relative to `path`, nothing outside is addressable, links leaving it are refused, and
    /// repositories and index queries through it see only its items. Cheap: no request, one
    /// small allocation. The root's own listing row belongs to the parent tree and is never
    /// removed through the scope; see [the `scope` module](crate::scope) for every rule.
    ///
    /// # Examples
    ///
    /// Two tenants, one repository type, each sees only its own items, by listing and by
    /// index:
    ///
    /// ```
    /// use dynatree::{Hierarchical, Path, Tree};
    /// use dynatree_testing::FakeTable;
    /// use futures::TryStreamExt;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Links/{short}", index(name = "by_target", hash = target))]
    /// struct Link { short: String, target: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::builder(FakeTable::new()).indexes_of::<Link>().build()?;
    /// tree.create_table().await?;
    /// let (acme, globex) = (tree.scope(["Tenants", "acme"])?, tree.scope(["Tenants", "globex"])?);
    /// assert_eq!(acme.scope_root(), Path::new(["Tenants", "acme"])?);
    ///
    /// let same = |short: &str| Link { short: short.into(), target: "https://example.com".into() };
    /// acme.repo::<Link>().put(&same("a")).await?;
    /// globex.repo::<Link>().put(&same("g")).await?;
    ///
    /// // Stored at the absolute path, read back relative.
    /// assert_eq!(tree.get(["Tenants", "acme", "Links", "a"]).await?, Some(same("a")));
    /// let names: Vec<String> = acme.list(["Links"]).try_collect().await?;
    /// assert_eq!(names, ["a"]);
    ///
    /// // The same indexed value in both tenants: each index query sees its own.
    /// let hits: Vec<Link> = globex
    ///     .repo::<Link>()
    ///     .index(Link::index_by_target("https://example.com"))
    ///     .items()
    ///     .try_collect()
    ///     .await?;
    /// assert_eq!(hits, [same("g")]);
    ///
    /// // Scopes compose.
    /// let links = tree.scope(["Tenants"])?.scope(["acme", "Links"])?;
    /// assert_eq!(links.get(["a"]).await?, Some(same("a")));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`] if `path` has an empty component, the reserved character, or
    /// makes keys over DynamoDB's limits (with this tree's root before it).
    pub fn scope(&self, path: impl IntoPath) -> Result<Tree<S>> {
        let root = self.enter(path)?;
        self.cx.inner.layout.check_listing_path(&root)?;
        if root.is_root() {
            return Ok(self.clone());
        }
        let cx = self.cx.scoped(root);
        Ok(Tree { cx, relative: true })
    }

    /// The absolute path of this tree's root: [`Path::root`] for a tree that is not a
    /// [scope](Tree::scope).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Path, Tree};
    /// use dynatree_testing::FakeTable;
    ///
    /// let tree = Tree::new(FakeTable::new());
    /// assert!(tree.scope_root().is_root());
    /// let scope = tree.scope(["a"])?.scope(["b"])?;
    /// assert_eq!(scope.scope_root(), Path::new(["a", "b"])?);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn scope_root(&self) -> Path {
        self.cx.root.as_deref().cloned().unwrap_or_default()
    }

    /// Whether this tree is a [scope](Tree::scope) of another.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree_testing::FakeTable;
    ///
    /// let tree = Tree::new(FakeTable::new());
    /// assert!(!tree.is_scoped());
    /// assert!(tree.scope(["a"])?.is_scoped());
    /// assert!(!tree.scope(dynatree::Path::root())?.is_scoped());
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn is_scoped(&self) -> bool {
        self.cx.root.is_some()
    }

    /// The absolute source and destination of a move or copy, refused on the scope's root.
    pub(crate) fn enter_move(
        &self,
        from: impl IntoPath,
        to: impl IntoPath,
        op: &str,
    ) -> Result<(Path, Path)> {
        let (from, to) = (self.enter(from)?, self.enter(to)?);
        self.cx.refuse_root(&from, op)?;
        self.cx.refuse_root(&to, &format!("{op} onto"))?;
        Ok((from, to))
    }

    /// The absolute path of a path the caller gave (relative to the root of a scope as the
    /// caller sees it; unchanged for a whole tree and for a scope's own operations).
    pub(crate) fn enter(&self, path: impl IntoPath) -> Result<Path> {
        let path = path.into_path()?;
        match (&self.cx.root, self.relative) {
            (Some(root), true) => Ok(join(root, &path)),
            _ => Ok(path),
        }
    }

    /// The path to return to the caller for an absolute path: relative to the root of a scope
    /// as the caller sees it. [`ErrorKind::OutOfScope`] for a path outside the root.
    pub(crate) fn leave(&self, path: Path) -> Result<Path> {
        match &self.cx.root {
            Some(root) if !path.starts_with(root) => Err(out_of_scope(root, &path)),
            Some(root) if self.relative => Ok(strip(root, &path)),
            _ => Ok(path),
        }
    }

    /// The same scope (if any) taking and returning absolute paths: what a scope's public
    /// methods run their operation on, so that the operation's own calls (a re-parenting's
    /// moves, a move's link scan) are not translated twice, and stay confined to the root.
    pub(crate) fn base(&self) -> Tree<S> {
        self.cx.tree()
    }

    /// `report` with its link paths as the caller sees them.
    pub(crate) fn leave_report(&self, mut report: MoveReport) -> Result<MoveReport> {
        if self.relative {
            report.links = report
                .links
                .into_iter()
                .map(|(link, target)| Ok((self.leave(link)?, self.leave(target)?)))
                .collect::<Result<_>>()?;
        }
        Ok(report)
    }

    /// The intents of this scope (source and destination inside it), with their paths as the
    /// caller sees them.
    pub(crate) fn scoped_intents(&self, all: Vec<Intent>) -> Result<Vec<Intent>> {
        all.into_iter()
            .filter(|i| self.cx.in_scope(&i.from) && self.cx.in_scope(&i.to))
            .map(|mut i| {
                i.from = self.leave(i.from)?;
                i.to = self.leave(i.to)?;
                Ok(i)
            })
            .collect()
    }
}

impl<S> Ctx<S> {
    /// How many leading components removals never go above: the root's (0 for a whole tree,
    /// whose root has no listing row). Pruning removes listing rows of paths longer than this.
    pub(crate) fn floor(&self) -> usize {
        self.root.as_deref().map_or(0, Path::len)
    }

    /// Whether the absolute `path` is the scope's root or under it (always, for a whole tree).
    pub(crate) fn in_scope(&self, path: &Path) -> bool {
        self.root
            .as_deref()
            .is_none_or(|root| path.starts_with(root))
    }

    /// Refuses `op` on the scope's root (absolute `path`) with [`ErrorKind::InvalidArgument`]:
    /// its rows belong to the parent tree.
    pub(crate) fn refuse_root(&self, path: &Path, op: &str) -> Result<()> {
        match &self.root {
            Some(root) if **root == *path => Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("cannot {op} the root of the scope {root}: the parent tree owns it"),
            )),
            _ => Ok(()),
        }
    }

    /// The absolute target of the link at `origin` as stored (`stored`), refused with
    /// [`ErrorKind::OutOfScope`] when it leaves the scope.
    pub(crate) fn link_target(&self, origin: &Path, stored: &str) -> Result<Path> {
        let target = self.inner.layout.decode_target(stored)?;
        match &self.root {
            Some(root) if !target.starts_with(root) => Err(Error::new(
                ErrorKind::OutOfScope,
                format!("the link at {origin} points at {target}, outside the scope {root}"),
            )),
            _ => Ok(target),
        }
    }

    /// Whether a raw row belongs to the scope: its `Key` is the root's object key or starts
    /// with the root's listing key (the two patterns of [`crate::iam`]); every row for a whole
    /// tree.
    pub(crate) fn row_in_scope(&self, item: &Item) -> bool {
        let Some(root) = self.root.as_deref() else {
            return true;
        };
        let Some(hash) = item.get_s(HASH_KEY) else {
            return false;
        };
        hash == self.inner.layout.object_hash(root.components())
            || hash.starts_with(&self.inner.layout.listing_hash(root.components()))
    }

    /// The secondary-index hash value of `encoded` for a type of `template`, written and
    /// queried through this tree (a scope's root included).
    pub(crate) fn index_hash(&self, template: &str, encoded: &str) -> String {
        let root = self.root.as_deref().map_or(&[][..], Path::components);
        self.inner.layout.index_hash(root, template, encoded)
    }
}

/// `root` followed by `rel`.
fn join(root: &Path, rel: &Path) -> Path {
    // Components of a `Path` are never empty, so this cannot fail.
    Path::new(root.components().iter().chain(rel.components()).cloned()).unwrap_or_default()
}

/// `path` (under `root`) relative to `root`.
fn strip(root: &Path, path: &Path) -> Path {
    let rest = path.components().get(root.len()..).unwrap_or_default();
    Path::new(rest.iter().cloned()).unwrap_or_default()
}

fn out_of_scope(root: &Path, path: &Path) -> Error {
    Error::new(ErrorKind::OutOfScope, format!("{path} is not under {root}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{DEFAULT_RESERVED, Layout};

    fn p(c: &[&str]) -> Path {
        Path::new(c.iter().copied()).unwrap()
    }

    #[test]
    fn join_and_strip_are_inverse() {
        let root = p(&["Tenants", "t1"]);
        for rel in [p(&[]), p(&["a"]), p(&["a", "b", ".."])] {
            let abs = join(&root, &rel);
            assert!(abs.starts_with(&root));
            assert_eq!(abs.len(), root.len() + rel.len());
            assert_eq!(strip(&root, &abs), rel);
        }
    }

    #[test]
    fn dot_dot_is_a_name_not_a_way_out() {
        // No component can climb: `..` is appended like any name.
        let abs = join(&p(&["a", "b"]), &p(&[".."]));
        assert_eq!(abs, p(&["a", "b", ".."]));
        assert!(abs.starts_with(&p(&["a", "b"])));
    }

    #[test]
    fn out_of_scope_is_the_datas_fault() {
        let e = out_of_scope(&p(&["a"]), &p(&["b"]));
        assert_eq!(e.kind(), ErrorKind::OutOfScope);
        assert_eq!(e.party(), crate::error::Party::Data);
        assert_eq!(e.to_string(), "outside the scope: /b is not under /a");
    }

    #[test]
    fn scoped_index_hashes_never_meet_unscoped_or_other_scopes() {
        let l = Layout::new(DEFAULT_RESERVED).unwrap();
        let t = "Links/{short}";
        let whole = l.index_hash(&[], t, "v");
        assert_eq!(whole, "Links/{short}¦v");
        let a = l.index_hash(p(&["Tenants", "a"]).components(), t, "v");
        assert_eq!(a, "¦Tenants¦a¦Links/{short}¦v");
        // A prefix of a tenant's name is another tenant.
        let ab = l.index_hash(p(&["Tenants", "ab"]).components(), t, "v");
        assert_ne!(a, ab);
        assert!(!ab.starts_with(&a));
        // Scoped hashes start with SC, which no template does.
        assert!(a.starts_with(DEFAULT_RESERVED) && !whole.starts_with(DEFAULT_RESERVED));
        // A value with SC would spell a nested scope's hash: such values are refused.
        let nested = l.index_hash(p(&["Tenants", "a", t]).components(), t, "v");
        assert_eq!(
            l.index_hash(p(&["Tenants", "a"]).components(), t, "Links/{short}¦v"),
            nested
        );
        let e =
            crate::index::refuse_reserved_in_index_value("Links/{short}¦v", DEFAULT_RESERVED, "i")
                .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidValue);
    }
}
