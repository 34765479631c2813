//! IAM policies that confine a tenant's credentials to one subtree ("scope") of a tree table.
//!
//! [`ScopePolicy`] builds an identity-based policy document (JSON, `Version` `2012-10-17`) for
//! DynamoDB's fine-grained access control: item-level actions on the table are allowed only
//! when every partition key the request touches (the condition key `dynamodb:LeadingKeys`)
//! belongs to a row under the scope.
//!
//! # Which keys the rows under a scope have
//!
//! With reserved character SC (default `¦`) and a scope `[s0, …, s(n-1)]`, every row of the
//! subtree has a `Key` (the hash key) of one of two shapes:
//!
//! | rows | `Key` |
//! |---|---|
//! | the scope's own object or link row | `SC s0 … SC s(n-1)`, exactly |
//! | the listing rows of the scope's children, and every row deeper | `SC s0 … SC s(n-1) SC` followed by anything |
//!
//! so the policy allows exactly these two `StringLike` patterns: `SC s0 … SC s(n-1)` and
//! `SC s0 … SC s(n-1) SC*`. The trailing SC is what keeps `Accounts/123` out of
//! `Accounts/1234`: `¦Accounts¦1234` is neither `¦Accounts¦123` nor starts with
//! `¦Accounts¦123¦`, and no path component can contain SC. IAM's wildcards `*` and `?` (and
//! `$`) in components or in the reserved character are written as the policy variables
//! `${*}`, `${?}`, `${$}`, which IAM reads as the literal character.
//!
//! # The document
//!
//! - An `Allow` of item actions on the table (`GetItem`, `BatchGetItem`, `Query`, and unless
//!   [`read_only`](ScopePolicy::read_only) `PutItem`, `UpdateItem`, `DeleteItem`,
//!   `BatchWriteItem`, `ConditionCheckItem`) under two conditions: `ForAllValues:StringLike`
//!   on `dynamodb:LeadingKeys` (every key of a batch must match) and the guard
//!   `"Null": {"dynamodb:LeadingKeys": "false"}`. `ForAllValues` is also true when the request
//!   has no leading keys at all; the guard makes such a request fall outside the statement.
//!   `TransactWriteItems` and `TransactGetItems` have no IAM action of their own: each of
//!   their items is authorized as the matching item action (`ConditionCheck` as
//!   `ConditionCheckItem`), so transactions are confined the same way.
//! - A `Deny` of `Scan` on the table and its indexes (a Scan has no leading key and reads every
//!   tenant), and a `Deny` of `Query` on every index (`table/NAME/index/*`), see below.
//!
//! # Limits: what the policy cannot do
//!
//! - **The scope's own listing row is outside it.** The row that names the scope under its
//!   parent (`Key = SC s0 … SC s(n-2) SC`, `Child = s(n-1)`) lives in the parent's partition,
//!   shared with every sibling tenant, and IAM cannot confine a request by sort key. So a scoped
//!   tenant can neither create nor remove its own root: provisioning a tenant (the first put
//!   that creates its root's listing row), deleting, moving or renaming it needs a wider role.
//!   dynatree's writes also read or check the listing rows above a path: creating a new direct
//!   child of the scope checks the scope's listing row (`ConditionCheck`), and after a failed
//!   check the ancestors' listing rows are read back (`BatchGetItem`). With
//!   [`ancestor_checks`](ScopePolicy::ancestor_checks) the policy allows `GetItem`,
//!   `BatchGetItem` and (unless read-only) `ConditionCheckItem`, never `Query` or a write, on
//!   exactly the partitions that list the scope's ancestors (`SC`, `SC s0 SC`, …). The price:
//!   a tenant can then test whether a sibling of its scope (another tenant's id) exists, one
//!   guessed name per request, and see removal marks and locks on those rows; it still cannot
//!   list them, read their objects or change anything there. Writes there are never allowed:
//!   pruning the scope's own listing row after the last row under the scope is removed (what
//!   `delete` does in an unscoped tree) is denied, so a tree used with these credentials must
//!   leave the scope's root to the wider role. A [scoped tree](crate::Tree::scope) does: it
//!   never removes, marks or locks its root's listing row, prunes only below it, and refuses
//!   to write, delete or move its root (see [`crate::scope`]). Use `tree.scope(path)` with
//!   the same `path` as the policy's scope.
//! - **Operations that record intents** (moves, copies, re-parenting, subtree deletions)
//!   write to the shared partition `SC SC intents`; they need a wider role, through a scope
//!   too (a scope keeps the shared partition and filters it by path, see [`crate::scope`]).
//!   So does looking for links into a moved subtree ([`LinkPolicy`](crate::ops::LinkPolicy)
//!   `Report` and `Rewrite`), which scans the table.
//! - **Index queries are denied.** A secondary index's hash value is the type's template and
//!   the indexed value (not a path), so its partitions mix tenants; the path index's hash is a
//!   path's first components (as many as the index's depth), shared with other tenants when
//!   the scope is at least that deep; and this module does not rely on how IAM applies
//!   `LeadingKeys` to a query on an index. Descendants by the path index and
//!   `Repository::index` need a wider role (or a service that runs them for the tenant); the
//!   listing walk works under the policy. (Through a [scope](crate::scope), index values
//!   carry the scope's root in their hash, so a service running index queries for a tenant
//!   with the wider role still gets that tenant's items only.)
//! - **Table administration** (`CreateTable`, `UpdateTable`, TTL, backups, streams) is not
//!   granted: run `create_table` with another role. `DescribeTable` on the table and a
//!   `GetItem` of the table's settings row (partition `SC SC settings`) are: a tree checks the
//!   table with them once, before its first request ([`Tree::verify`](crate::Tree::verify));
//!   they show the table's schema, indexes and size, not another tenant's items.
//! - **Other policies still apply.** IAM allows a request that any policy of the principal
//!   allows (and none denies): attach this document to a role that has no other DynamoDB
//!   permission on the table. The `Deny` statements are the only ones that restrict what other
//!   policies grant.
//! - **Attributes are not confined.** Within its scope a tenant reads and writes whole rows,
//!   bookkeeping attributes included: it can corrupt its own subtree (for example by erasing a
//!   lock), never another tenant's.
//!
//! Check a document with the IAM policy simulator, or against a test role, before relying on it.
//!
//! # Examples
//!
//! ```
//! use dynatree::iam::ScopePolicy;
//!
//! let policy = ScopePolicy::new(
//!     "arn:aws:dynamodb:eu-west-1:123456789012:table/trees",
//!     ["Accounts", "123"],
//! )?
//! .build()?;
//! let allow = &policy["Statement"][0];
//! assert_eq!(allow["Effect"], "Allow");
//! assert_eq!(
//!     allow["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"],
//!     serde_json::json!(["¦Accounts¦123", "¦Accounts¦123¦*"])
//! );
//! assert_eq!(allow["Condition"]["Null"]["dynamodb:LeadingKeys"], "false");
//! # Ok::<(), dynatree::Error>(())
//! ```

use serde_json::{Value as Json, json};

use crate::error::{Error, ErrorKind, Result};
use crate::layout::{DEFAULT_RESERVED, Layout};
use crate::path::{IntoPath, Path};

/// The condition key naming the partition keys a request touches.
const LEADING_KEYS: &str = "dynamodb:LeadingKeys";

/// Actions that only read.
const READ_ACTIONS: [&str; 3] = [
    "dynamodb:BatchGetItem",
    "dynamodb:GetItem",
    "dynamodb:Query",
];

/// Actions that write (and the condition check of transactional writes).
const WRITE_ACTIONS: [&str; 5] = [
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:DeleteItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
];

/// Builds the IAM policy document that confines credentials to a scope of a tree table.
///
/// See the [module documentation](self) for the document and its limits.
///
/// # Examples
///
/// ```
/// use dynatree::iam::ScopePolicy;
///
/// let policy = ScopePolicy::new(
///     "arn:aws:dynamodb:us-east-1:123456789012:table/trees",
///     ["Accounts", "123"],
/// )?
/// .read_only()
/// .build()?;
/// let actions = &policy["Statement"][0]["Action"];
/// assert!(actions.as_array().unwrap().iter().all(|a| a != "dynamodb:PutItem"));
/// # Ok::<(), dynatree::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ScopePolicy {
    table_arn: String,
    scope: Path,
    reserved: char,
    read_only: bool,
    ancestor_checks: bool,
    sharded: Vec<(String, u32)>,
}

impl ScopePolicy {
    /// A read-write policy for the subtree at `scope` of the table `table_arn`
    /// (`arn:PARTITION:dynamodb:REGION:ACCOUNT:table/NAME`), with the default reserved
    /// character.
    ///
    /// # Errors
    ///
    /// - [`ErrorKind::InvalidArgument`] if the table ARN is not
    ///   `arn:PARTITION:dynamodb:REGION:ACCOUNT:table/NAME` (no wildcards, no index).
    /// - [`ErrorKind::InvalidPath`] if the scope is the root (a policy for the whole table is
    ///   not a scope) or has an empty component.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::iam::ScopePolicy;
    ///
    /// let policy = ScopePolicy::new("arn:aws:dynamodb:eu-west-1:123456789012:table/trees", ["a"])?
    ///     .build()?;
    /// assert_eq!(policy["Version"], "2012-10-17");
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn new(table_arn: impl Into<String>, scope: impl IntoPath) -> Result<Self> {
        let table_arn = table_arn.into();
        check_table_arn(&table_arn)?;
        let scope = scope.into_path()?;
        if scope.is_root() {
            return Err(Error::invalid_path(
                "a scope policy needs a non-empty scope path",
            ));
        }
        Ok(Self {
            table_arn,
            scope,
            reserved: DEFAULT_RESERVED,
            read_only: false,
            ancestor_checks: false,
            sharded: Vec::new(),
        })
    }

    /// The reserved character of the tree (as given to `TreeBuilder::reserved`).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::iam::ScopePolicy;
    ///
    /// let keys = ScopePolicy::new("arn:aws:dynamodb:eu-west-1:123456789012:table/trees", ["a"])?
    ///     .reserved('|')
    ///     .leading_keys()?;
    /// assert_eq!(keys, ["|a", "|a|*"]);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    #[must_use]
    pub fn reserved(mut self, reserved: char) -> Self {
        self.reserved = reserved;
        self
    }

    /// Allows only reads: `GetItem`, `BatchGetItem` and `Query`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::iam::ScopePolicy;
    ///
    /// let policy = ScopePolicy::new("arn:aws:dynamodb:eu-west-1:123456789012:table/trees", ["a"])?
    ///     .read_only()
    ///     .build()?;
    /// assert_eq!(
    ///     policy["Statement"][0]["Action"],
    ///     serde_json::json!(["dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:Query"])
    /// );
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    #[must_use]
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// Also allows `GetItem`, `BatchGetItem` and (unless read-only) `ConditionCheckItem` on the
    /// partitions that list the scope's ancestors, which dynatree's writes check and read back
    /// (see the [module documentation](self#limits-what-the-policy-cannot-do) for what this
    /// reveals).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::iam::ScopePolicy;
    ///
    /// let policy = ScopePolicy::new(
    ///     "arn:aws:dynamodb:eu-west-1:123456789012:table/trees",
    ///     ["Accounts", "123"],
    /// )?
    /// .ancestor_checks()
    /// .build()?;
    /// let checks = &policy["Statement"][1];
    /// assert_eq!(
    ///     checks["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"],
    ///     serde_json::json!(["¦Accounts¦123", "¦Accounts¦123¦*", "¦", "¦Accounts¦"])
    /// );
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    #[must_use]
    pub fn ancestor_checks(mut self) -> Self {
        self.ancestor_checks = true;
        self
    }

    /// A [sharded directory](crate::TreeBuilder::sharded) of the tree, as given to its builder:
    /// the scope's ancestors listed in such a directory are listed in one of its shards, which
    /// [`ancestor_checks`](Self::ancestor_checks) must name (the scope's own keys are
    /// unchanged: its shards start with its listing key).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::iam::ScopePolicy;
    ///
    /// let policy = ScopePolicy::new(
    ///     "arn:aws:dynamodb:eu-west-1:123456789012:table/trees",
    ///     ["Accounts", "123"],
    /// )?
    /// .sharded("Accounts", 4)
    /// .ancestor_checks()
    /// .build()?;
    /// let keys = &policy["Statement"][1]["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"];
    /// // "123" is listed in shard 3 of the 4 of `Accounts`.
    /// assert_eq!(keys[3], "¦Accounts¦¦s3");
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    #[must_use]
    pub fn sharded(mut self, template: &str, shards: u32) -> Self {
        self.sharded.push((template.to_owned(), shards));
        self
    }

    /// The `StringLike` patterns of the partition keys under the scope: the scope's object key
    /// exactly, and its children's listing key followed by anything.
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::iam::ScopePolicy;
    ///
    /// let arn = "arn:aws:dynamodb:eu-west-1:123456789012:table/trees";
    /// let keys = ScopePolicy::new(arn, ["Accounts", "123"])?.leading_keys()?;
    /// assert_eq!(keys, ["¦Accounts¦123", "¦Accounts¦123¦*"]);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn leading_keys(&self) -> Result<Vec<String>> {
        let (layout, scope) = self.checked_scope()?;
        Ok(scope_patterns(&layout, scope))
    }

    /// The policy document.
    ///
    /// # Errors
    ///
    /// - [`ErrorKind::InvalidPath`] if a component of the scope contains the reserved
    ///   character, or the scope's keys exceed DynamoDB's limits.
    /// - [`ErrorKind::InvalidReserved`] if the reserved character cannot be used by a tree.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{ErrorKind, iam::ScopePolicy};
    ///
    /// let arn = "arn:aws:dynamodb:eu-west-1:123456789012:table/trees";
    /// let e = ScopePolicy::new(arn, ["a¦b"])?.build().unwrap_err();
    /// assert_eq!(e.kind(), ErrorKind::InvalidPath);
    /// let e = ScopePolicy::new("arn:aws:s3:::bucket", ["a"]).unwrap_err();
    /// assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn build(&self) -> Result<Json> {
        let (layout, scope) = self.checked_scope()?;
        let table = self.table_arn.as_str();
        let indexes = format!("{table}/index/*");
        let scope_keys = scope_patterns(&layout, scope);

        let mut actions: Vec<&str> = READ_ACTIONS.to_vec();
        if !self.read_only {
            actions.extend(WRITE_ACTIONS);
        }
        actions.sort_unstable();
        let mut statements = vec![allow("DynatreeScope", &actions, table, &scope_keys)];
        if self.ancestor_checks {
            // Scope keys too: one BatchGetItem may read the scope's rows and its ancestors'
            // together, and `ForAllValues` wants every key matched by one statement.
            let mut keys = scope_keys.clone();
            keys.extend(
                (1..=scope.len()).map(|i| escape(&layout.listing_key(&scope.prefix(i)).hash)),
            );
            let mut actions = vec!["dynamodb:BatchGetItem", "dynamodb:GetItem"];
            if !self.read_only {
                actions.push("dynamodb:ConditionCheckItem");
            }
            actions.sort_unstable();
            statements.push(allow("DynatreeScopeAncestors", &actions, table, &keys));
        }
        // What a tree reads once before its first request (`Tree::verify`): the table's key
        // schema and indexes, and its settings row.
        statements.push(json!({
            "Sid": "DynatreeTableCheck",
            "Effect": "Allow",
            "Action": ["dynamodb:DescribeTable"],
            "Resource": [table],
        }));
        statements.push(allow(
            "DynatreeSettings",
            &["dynamodb:GetItem"],
            table,
            &[escape(
                &crate::storage::TableSettings::key(layout.reserved()).hash,
            )],
        ));
        statements.push(json!({
            "Sid": "DynatreeNoScan",
            "Effect": "Deny",
            "Action": ["dynamodb:Scan"],
            "Resource": [table, indexes],
        }));
        statements.push(json!({
            "Sid": "DynatreeNoIndexQueries",
            "Effect": "Deny",
            "Action": ["dynamodb:Query"],
            "Resource": [indexes],
        }));
        Ok(json!({
            "Version": "2012-10-17",
            "Statement": statements,
        }))
    }

    fn checked_scope(&self) -> Result<(Layout, &Path)> {
        let layout = Layout::new(self.reserved)?;
        if !self.sharded.is_empty() {
            let dirs = self
                .sharded
                .iter()
                .map(|(t, n)| crate::layout::ShardedDir::new(t, *n, self.reserved))
                .collect::<Result<Vec<_>>>()?;
            layout.set_sharded(crate::layout::checked_sharded(dirs)?);
        }
        layout.check_object_path(&self.scope)?;
        layout.check_listing_path(&self.scope)?;
        Ok((layout, &self.scope))
    }
}

/// One `Allow` statement of item actions on the table, confined to `keys`.
fn allow(sid: &str, actions: &[&str], table: &str, keys: &[String]) -> Json {
    json!({
        "Sid": sid,
        "Effect": "Allow",
        "Action": actions,
        "Resource": [table],
        "Condition": {
            "ForAllValues:StringLike": { LEADING_KEYS: keys },
            "Null": { LEADING_KEYS: "false" },
        },
    })
}

/// The scope's object key exactly, and every key that starts with its listing key.
fn scope_patterns(layout: &Layout, scope: &Path) -> Vec<String> {
    vec![
        escape(&layout.object_hash(scope.components())),
        format!("{}*", escape(&layout.listing_hash(scope.components()))),
    ]
}

/// Writes IAM's special characters as the policy variables that stand for them literally.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '*' => out.push_str("${*}"),
            '?' => out.push_str("${?}"),
            '$' => out.push_str("${$}"),
            c => out.push(c),
        }
    }
    out
}

/// Accepts `arn:PARTITION:dynamodb:REGION:ACCOUNT:table/NAME` only.
fn check_table_arn(arn: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("table arn {arn:?} {why}; expected arn:aws:dynamodb:REGION:ACCOUNT:table/NAME"),
        ))
    };
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let [prefix, partition, service, region, account, resource] = parts[..] else {
        return bad("has too few fields");
    };
    if prefix != "arn" {
        return bad("does not start with `arn:`");
    }
    let lower = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    if !lower(partition) || !partition.starts_with("aws") {
        return bad("has no aws partition");
    }
    if service != "dynamodb" {
        return bad("is not a dynamodb arn");
    }
    if !lower(region) {
        return bad("has no region");
    }
    if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
        return bad("has no 12-digit account id");
    }
    let Some(name) = resource.strip_prefix("table/") else {
        return bad("does not name a table");
    };
    // DynamoDB table names: 3 to 255 of `a-z A-Z 0-9 _ - .`; this also refuses `/index/…`,
    // wildcards and anything after the name.
    let name_ok = (3..=255).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if !name_ok {
        return bad("has no valid table name (3 to 255 of a-z, A-Z, 0-9, `_`, `-`, `.`)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARN: &str = "arn:aws:dynamodb:eu-west-1:123456789012:table/trees";

    /// IAM's `StringLike`: `*` any run, `?` one character, `${*}` `${?}` `${$}` literal.
    fn string_like(pattern: &str, value: &str) -> bool {
        #[derive(Clone, Copy, PartialEq)]
        enum Tok {
            Lit(char),
            Any,
            One,
        }
        let mut toks = Vec::new();
        let mut rest = pattern;
        while let Some(c) = rest.chars().next() {
            if let Some(r) = ["${*}", "${?}", "${$}"]
                .iter()
                .find_map(|v| rest.strip_prefix(v).map(|r| (v.as_bytes()[2] as char, r)))
            {
                toks.push(Tok::Lit(r.0));
                rest = r.1;
                continue;
            }
            toks.push(match c {
                '*' => Tok::Any,
                '?' => Tok::One,
                c => Tok::Lit(c),
            });
            rest = &rest[c.len_utf8()..];
        }
        fn go(t: &[Tok], v: &[char]) -> bool {
            match t.split_first() {
                None => v.is_empty(),
                Some((Tok::Any, r)) => (0..=v.len()).any(|i| go(r, &v[i..])),
                Some((Tok::One, r)) => !v.is_empty() && go(r, &v[1..]),
                Some((Tok::Lit(c), r)) => v.first() == Some(c) && go(r, &v[1..]),
            }
        }
        go(&toks, &value.chars().collect::<Vec<_>>())
    }

    /// A small evaluator of the documents this module writes: is `action` on `resource` with
    /// these leading keys (`None`: the request has none) allowed? Explicit deny wins.
    fn allowed(policy: &Json, action: &str, resource: &str, keys: Option<&[&str]>) -> bool {
        let mut allow = false;
        for st in policy["Statement"].as_array().unwrap() {
            let acts = st["Action"].as_array().unwrap();
            let res = st["Resource"].as_array().unwrap();
            if !acts.iter().any(|a| a == action)
                || !res
                    .iter()
                    .any(|r| string_like(r.as_str().unwrap(), resource))
            {
                continue;
            }
            let cond_ok = match st.get("Condition") {
                None => true,
                Some(c) => {
                    let null_ok = keys.is_some() == (c["Null"][LEADING_KEYS] == "false");
                    let pats = c["ForAllValues:StringLike"][LEADING_KEYS]
                        .as_array()
                        .unwrap();
                    let all = keys
                        .unwrap_or(&[])
                        .iter()
                        .all(|k| pats.iter().any(|p| string_like(p.as_str().unwrap(), k)));
                    null_ok && all
                }
            };
            if cond_ok {
                match st["Effect"].as_str().unwrap() {
                    "Deny" => return false,
                    "Allow" => allow = true,
                    e => panic!("effect {e}"),
                }
            }
        }
        allow
    }

    /// Checks a document against the grammar of IAM identity-based policies, as far as this
    /// module uses it.
    fn assert_grammar(policy: &Json) {
        let top = policy.as_object().unwrap();
        assert_eq!(
            top.keys().map(String::as_str).collect::<Vec<_>>().len(),
            2,
            "only Version and Statement: {policy}"
        );
        assert_eq!(policy["Version"], "2012-10-17");
        let statements = policy["Statement"].as_array().unwrap();
        assert!(!statements.is_empty());
        let mut sids = std::collections::BTreeSet::new();
        for st in statements {
            let st = st.as_object().unwrap();
            for k in st.keys() {
                assert!(
                    ["Sid", "Effect", "Action", "Resource", "Condition"].contains(&k.as_str()),
                    "element {k}"
                );
            }
            let sid = st["Sid"].as_str().unwrap();
            assert!(sid.bytes().all(|b| b.is_ascii_alphanumeric()), "sid {sid}");
            assert!(sids.insert(sid.to_owned()), "duplicate sid {sid}");
            let effect = st["Effect"].as_str().unwrap();
            assert!(effect == "Allow" || effect == "Deny");
            let actions = st["Action"].as_array().unwrap();
            assert!(!actions.is_empty());
            for a in actions {
                let a = a.as_str().unwrap();
                let name = a.strip_prefix("dynamodb:").expect("dynamodb action");
                assert!(name.bytes().all(|b| b.is_ascii_alphabetic()), "action {a}");
                if effect == "Allow" {
                    assert!(
                        READ_ACTIONS.contains(&a)
                            || WRITE_ACTIONS.contains(&a)
                            || a == "dynamodb:DescribeTable",
                        "allowed action {a} is not an item action"
                    );
                    assert_ne!(a, "dynamodb:Scan");
                }
            }
            for r in st["Resource"].as_array().unwrap() {
                let r = r.as_str().unwrap();
                let table = r.strip_suffix("/index/*").unwrap_or(r);
                check_table_arn(table).unwrap();
                if effect == "Allow" {
                    assert_eq!(r, table, "allow statements never name an index");
                }
            }
            if let Some(c) = st.get("Condition") {
                let c = c.as_object().unwrap();
                assert_eq!(
                    c.keys().map(String::as_str).collect::<Vec<_>>(),
                    ["ForAllValues:StringLike", "Null"]
                );
                let like = c["ForAllValues:StringLike"].as_object().unwrap();
                assert_eq!(like.keys().collect::<Vec<_>>(), [LEADING_KEYS]);
                assert!(
                    like[LEADING_KEYS]
                        .as_array()
                        .unwrap()
                        .iter()
                        .all(Json::is_string)
                );
                assert_eq!(c["Null"], json!({ LEADING_KEYS: "false" }));
            } else {
                // Every Allow of item actions is confined; DescribeTable has no items.
                assert!(
                    effect == "Deny" || *actions == [json!("dynamodb:DescribeTable")],
                    "every Allow of item actions is confined"
                );
            }
        }
    }

    fn keys_of(path: &[&str]) -> (String, String) {
        let layout = Layout::new(DEFAULT_RESERVED).unwrap();
        let p: Vec<String> = path.iter().map(|s| (*s).to_owned()).collect();
        (layout.object_hash(&p), layout.listing_hash(&p))
    }

    #[test]
    fn read_write_snapshot() {
        let policy = ScopePolicy::new(ARN, ["Accounts", "123"])
            .unwrap()
            .build()
            .unwrap();
        assert_grammar(&policy);
        assert_eq!(
            policy,
            json!({
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Sid": "DynatreeScope",
                        "Effect": "Allow",
                        "Action": [
                            "dynamodb:BatchGetItem",
                            "dynamodb:BatchWriteItem",
                            "dynamodb:ConditionCheckItem",
                            "dynamodb:DeleteItem",
                            "dynamodb:GetItem",
                            "dynamodb:PutItem",
                            "dynamodb:Query",
                            "dynamodb:UpdateItem"
                        ],
                        "Resource": ["arn:aws:dynamodb:eu-west-1:123456789012:table/trees"],
                        "Condition": {
                            "ForAllValues:StringLike": {
                                "dynamodb:LeadingKeys": ["¦Accounts¦123", "¦Accounts¦123¦*"]
                            },
                            "Null": { "dynamodb:LeadingKeys": "false" }
                        }
                    },
                    {
                        "Sid": "DynatreeTableCheck",
                        "Effect": "Allow",
                        "Action": ["dynamodb:DescribeTable"],
                        "Resource": ["arn:aws:dynamodb:eu-west-1:123456789012:table/trees"]
                    },
                    {
                        "Sid": "DynatreeSettings",
                        "Effect": "Allow",
                        "Action": ["dynamodb:GetItem"],
                        "Resource": ["arn:aws:dynamodb:eu-west-1:123456789012:table/trees"],
                        "Condition": {
                            "ForAllValues:StringLike": {
                                "dynamodb:LeadingKeys": ["¦¦settings"]
                            },
                            "Null": { "dynamodb:LeadingKeys": "false" }
                        }
                    },
                    {
                        "Sid": "DynatreeNoScan",
                        "Effect": "Deny",
                        "Action": ["dynamodb:Scan"],
                        "Resource": [
                            "arn:aws:dynamodb:eu-west-1:123456789012:table/trees",
                            "arn:aws:dynamodb:eu-west-1:123456789012:table/trees/index/*"
                        ]
                    },
                    {
                        "Sid": "DynatreeNoIndexQueries",
                        "Effect": "Deny",
                        "Action": ["dynamodb:Query"],
                        "Resource": ["arn:aws:dynamodb:eu-west-1:123456789012:table/trees/index/*"]
                    }
                ]
            })
        );
    }

    #[test]
    fn read_only_with_ancestors_snapshot() {
        let policy = ScopePolicy::new(ARN, ["Accounts", "123", "Links"])
            .unwrap()
            .read_only()
            .ancestor_checks()
            .reserved('|')
            .build()
            .unwrap();
        assert_grammar(&policy);
        let st = policy["Statement"].as_array().unwrap();
        assert_eq!(st.len(), 6);
        assert_eq!(
            st[0]["Action"],
            json!([
                "dynamodb:BatchGetItem",
                "dynamodb:GetItem",
                "dynamodb:Query"
            ])
        );
        assert_eq!(
            st[0]["Condition"]["ForAllValues:StringLike"][LEADING_KEYS],
            json!(["|Accounts|123|Links", "|Accounts|123|Links|*"])
        );
        assert_eq!(
            st[1],
            json!({
                "Sid": "DynatreeScopeAncestors",
                "Effect": "Allow",
                "Action": ["dynamodb:BatchGetItem", "dynamodb:GetItem"],
                "Resource": [ARN],
                "Condition": {
                    "ForAllValues:StringLike": {
                        "dynamodb:LeadingKeys": [
                            "|Accounts|123|Links",
                            "|Accounts|123|Links|*",
                            "|",
                            "|Accounts|",
                            "|Accounts|123|"
                        ]
                    },
                    "Null": { "dynamodb:LeadingKeys": "false" }
                }
            })
        );
    }

    #[test]
    fn patterns_are_the_keys_layout_writes() {
        let (object, listing) = keys_of(&["Accounts", "123"]);
        let keys = ScopePolicy::new(ARN, ["Accounts", "123"])
            .unwrap()
            .leading_keys()
            .unwrap();
        assert_eq!(keys, [object, format!("{listing}*")]);
    }

    #[test]
    fn a_tenant_cannot_reach_a_tenant_whose_id_it_prefixes() {
        let policy = ScopePolicy::new(ARN, ["Accounts", "123"])
            .unwrap()
            .build()
            .unwrap();
        let can = |action: &str, path: &[&str]| {
            let (object, listing) = keys_of(path);
            (
                allowed(&policy, action, ARN, Some(&[object.as_str()])),
                allowed(&policy, action, ARN, Some(&[listing.as_str()])),
            )
        };
        // Inside: the scope's object row, its children's listing, everything deeper.
        assert_eq!(can("dynamodb:GetItem", &["Accounts", "123"]), (true, true));
        assert_eq!(
            can("dynamodb:PutItem", &["Accounts", "123", "x"]),
            (true, true)
        );
        assert_eq!(
            can("dynamodb:Query", &["Accounts", "123", "a", "b", "c"]),
            (true, true)
        );
        // Prefix ambiguity: `123` is a prefix of `1234` and `123x`; neither is reachable.
        for other in ["1234", "123x", "12", "123 "] {
            assert_eq!(
                can("dynamodb:GetItem", &["Accounts", other]),
                (false, false),
                "{other}"
            );
            assert_eq!(
                can("dynamodb:PutItem", &["Accounts", other, "x"]),
                (false, false)
            );
        }
        // Above the scope: the parent's listing (the scope's own listing row), the root.
        assert_eq!(can("dynamodb:Query", &["Accounts"]), (false, false));
        assert!(!allowed(&policy, "dynamodb:Query", ARN, Some(&["¦"])));
        assert!(!allowed(
            &policy,
            "dynamodb:PutItem",
            ARN,
            Some(&["¦¦intents"])
        ));
        // Batches: every key must be inside.
        let (inside, _) = keys_of(&["Accounts", "123", "a"]);
        let (outside, _) = keys_of(&["Accounts", "1234", "a"]);
        assert!(allowed(
            &policy,
            "dynamodb:BatchGetItem",
            ARN,
            Some(&[&inside, &inside])
        ));
        assert!(!allowed(
            &policy,
            "dynamodb:BatchWriteItem",
            ARN,
            Some(&[&inside, &outside])
        ));
    }

    #[test]
    fn scans_and_index_queries_are_denied() {
        let policy = ScopePolicy::new(ARN, ["Accounts", "123"])
            .unwrap()
            .build()
            .unwrap();
        let index = format!("{ARN}/index/dynatree_paths");
        // The Null guard: a request without leading keys is outside the Allow.
        assert!(!allowed(&policy, "dynamodb:Scan", ARN, None));
        assert!(!allowed(&policy, "dynamodb:GetItem", ARN, None));
        // Explicit denies, whatever the keys.
        assert!(!allowed(
            &policy,
            "dynamodb:Scan",
            &index,
            Some(&["¦Accounts¦123¦"])
        ));
        assert!(!allowed(
            &policy,
            "dynamodb:Query",
            &index,
            Some(&["¦Accounts¦123¦"])
        ));
        // The table check of a tree's first request, nothing else of the control plane.
        assert!(allowed(&policy, "dynamodb:DescribeTable", ARN, None));
        assert!(!allowed(&policy, "dynamodb:UpdateTable", ARN, None));
        assert!(!allowed(&policy, "dynamodb:DeleteTable", ARN, None));
        assert!(allowed(
            &policy,
            "dynamodb:GetItem",
            ARN,
            Some(&["¦¦settings"])
        ));
        assert!(!allowed(
            &policy,
            "dynamodb:PutItem",
            ARN,
            Some(&["¦¦settings"])
        ));
    }

    #[test]
    fn ancestor_checks_reach_listing_partitions_only() {
        let policy = ScopePolicy::new(ARN, ["Accounts", "123"])
            .unwrap()
            .ancestor_checks()
            .build()
            .unwrap();
        assert_grammar(&policy);
        let (_, accounts) = keys_of(&["Accounts"]);
        let (sibling, sibling_children) = keys_of(&["Accounts", "124"]);
        let (inside, _) = keys_of(&["Accounts", "123", "x"]);
        for read in [
            "dynamodb:GetItem",
            "dynamodb:BatchGetItem",
            "dynamodb:ConditionCheckItem",
        ] {
            assert!(allowed(&policy, read, ARN, Some(&[&accounts])), "{read}");
            assert!(allowed(&policy, read, ARN, Some(&["¦"])), "{read}");
            assert!(!allowed(&policy, read, ARN, Some(&[&sibling])), "{read}");
            assert!(
                !allowed(&policy, read, ARN, Some(&[&sibling_children])),
                "{read}"
            );
        }
        // One BatchGetItem of the ancestors' listing rows and a row inside.
        assert!(allowed(
            &policy,
            "dynamodb:BatchGetItem",
            ARN,
            Some(&["¦", &accounts, &inside])
        ));
        for write in [
            "dynamodb:PutItem",
            "dynamodb:DeleteItem",
            "dynamodb:UpdateItem",
            "dynamodb:Query",
        ] {
            assert!(!allowed(&policy, write, ARN, Some(&[&accounts])), "{write}");
        }
    }

    #[test]
    fn iam_wildcards_in_paths_are_literal() {
        let keys = ScopePolicy::new(ARN, ["a*", "b?", "$c"])
            .unwrap()
            .leading_keys()
            .unwrap();
        assert_eq!(keys, ["¦a${*}¦b${?}¦${$}c", "¦a${*}¦b${?}¦${$}c¦*"]);
        let policy = ScopePolicy::new(ARN, ["a*"]).unwrap().build().unwrap();
        assert!(allowed(&policy, "dynamodb:GetItem", ARN, Some(&["¦a*"])));
        assert!(!allowed(&policy, "dynamodb:GetItem", ARN, Some(&["¦ab"])));
        assert!(!allowed(&policy, "dynamodb:GetItem", ARN, Some(&["¦ab¦x"])));
        let policy = ScopePolicy::new(ARN, ["a"])
            .unwrap()
            .reserved('*')
            .build()
            .unwrap();
        assert!(allowed(&policy, "dynamodb:GetItem", ARN, Some(&["*a*x"])));
        assert!(!allowed(&policy, "dynamodb:GetItem", ARN, Some(&["*ab"])));
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        let kind = |p: Result<ScopePolicy>| p.and_then(|p| p.build()).unwrap_err().kind();
        assert_eq!(
            kind(ScopePolicy::new(ARN, Path::root())),
            ErrorKind::InvalidPath
        );
        assert_eq!(
            kind(ScopePolicy::new(ARN, ["a", ""])),
            ErrorKind::InvalidPath
        );
        assert_eq!(kind(ScopePolicy::new(ARN, ["a¦b"])), ErrorKind::InvalidPath);
        assert_eq!(
            kind(ScopePolicy::new(ARN, ["a|b"]).map(|p| p.reserved('|'))),
            ErrorKind::InvalidPath
        );
        assert_eq!(
            kind(ScopePolicy::new(ARN, [&*"x".repeat(1025)])),
            ErrorKind::InvalidPath
        );
        assert_eq!(
            kind(ScopePolicy::new(ARN, ["a"]).map(|p| p.reserved('K'))),
            ErrorKind::InvalidReserved
        );
        for arn in [
            "",
            "arn:aws:dynamodb:eu-west-1:123456789012",
            "arn:aws:s3:::bucket",
            "arn:aws:dynamodb:eu-west-1:123456789012:table/*",
            "arn:aws:dynamodb:eu-west-1:123456789012:table/trees/index/*",
            "arn:aws:dynamodb:eu-west-1:123456789012:table/trees/stream/x",
            "arn:aws:dynamodb:*:123456789012:table/trees",
            "arn:aws:dynamodb:eu-west-1:12345:table/trees",
            "arn:aws:dynamodb:eu-west-1:123456789012:table/ab",
            "arn:aws:dynamodb:eu-west-1:123456789012:index/trees",
            "ARN:aws:dynamodb:eu-west-1:123456789012:table/trees",
            "arn:gcp:dynamodb:eu-west-1:123456789012:table/trees",
        ] {
            assert_eq!(
                kind(ScopePolicy::new(arn, ["a"])),
                ErrorKind::InvalidArgument,
                "{arn}"
            );
        }
        for arn in [
            ARN,
            "arn:aws-cn:dynamodb:cn-north-1:123456789012:table/My_Table.v-2",
            "arn:aws-us-gov:dynamodb:us-gov-west-1:123456789012:table/abc",
        ] {
            assert_grammar(&ScopePolicy::new(arn, ["a"]).unwrap().build().unwrap());
        }
    }
}
