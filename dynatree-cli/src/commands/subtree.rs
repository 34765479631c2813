//! `mv` and `cp`: a subtree moved or copied by the library's recorded operation, with a
//! policy for the links into it (`--links`), and their dry run, which makes the real run's
//! checks and lists what it would touch: objects, nodes, and each link it would rewrite or
//! report.

use std::collections::BTreeSet;

use dynatree::ops::{Intent, MoveReport, Operation};
use dynatree::storage::{HASH_KEY, RANGE_KEY};
use dynatree::{ErrorKind, Path, storage::Item};
use futures::{StreamExt, TryStreamExt};
use serde_json::{Value, json};

use super::failure::describe;
use super::paths::{check_object_path, rebase};
use super::read::{has_children, object_kind, plural};
use super::{Ctx, Kind, interruptible, link_target};
use crate::args::Links;
use crate::error::{CliError, CliResult};
use crate::output::Doc;
use crate::progress::Progress;

/// Which of `mv` and `cp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    /// `mv`.
    Move,
    /// `cp`.
    Copy,
}

impl Transfer {
    /// The operation's name (as the library records it), past tense, and progressive.
    fn verb(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Transfer::Move => ("move", "moved", "moving"),
            Transfer::Copy => ("copy", "copied", "copying"),
        }
    }
}

/// A link that a move or copy rewrites or reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkChange {
    /// Where the link is after the command.
    pub path: Path,
    /// Its target before the command.
    pub was: Path,
    /// Its target after the command (`was` unless rewritten).
    pub target: Path,
}

impl LinkChange {
    fn rewritten(&self) -> bool {
        self.target != self.was
    }

    fn record(&self) -> Value {
        let mut r = json!({
            "path": self.path.escaped(),
            "target": self.target.escaped(),
            "rewritten": self.rewritten(),
        });
        if self.rewritten() {
            r["was"] = json!(self.was.escaped());
        }
        r
    }
}

/// What a move or copy touched, or would touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// `mv` or `cp`.
    pub op: Transfer,
    /// The source.
    pub from: Path,
    /// The destination.
    pub to: Path,
    /// `--links`.
    pub links_mode: Links,
    /// The recorded operation's id (a real run).
    pub id: Option<String>,
    /// Objects (links included) written under the destination.
    pub objects: usize,
    /// Nodes (listing entries) written under the destination.
    pub nodes: usize,
    /// The links rewritten or reported.
    pub links: Vec<LinkChange>,
}

impl Outcome {
    /// The output: a record for scripts, lines for people (`dry_run`: "would ...").
    pub fn doc(&self, dry_run: bool) -> Doc {
        let (verb, done, _) = self.op.verb();
        let (from, to) = (self.from.escaped(), self.to.escaped());
        let mut human = format!(
            "{} {} {} ({} {}) from {from} to {to}\n",
            if dry_run {
                format!("would {verb}")
            } else {
                done.to_owned()
            },
            self.objects,
            plural(self.objects, "object", "objects"),
            self.nodes,
            plural(self.nodes, "node", "nodes"),
        );
        for l in &self.links {
            let (path, was, target) = (l.path.escaped(), l.was.escaped(), l.target.escaped());
            let line = match (l.rewritten(), self.links_mode, self.op, dry_run) {
                (true, _, _, false) => format!("rewrote the link {path}: {was} -> {target}"),
                (true, _, _, true) => format!("would rewrite the link {path}: {was} -> {target}"),
                (false, Links::Rewrite, _, _) => format!(
                    "note: the link {path} was not rewritten (it changed meanwhile, or its new target breaks a limit): it points at {target}"
                ),
                (false, _, Transfer::Move, false) => {
                    format!("note: the link {path} still points at {target}")
                }
                (false, _, Transfer::Move, true) => {
                    format!("note: the link {path} would still point at {target}")
                }
                (false, _, Transfer::Copy, false) => {
                    format!("note: the link {path} of the copy points at {target}, in the source")
                }
                (false, _, Transfer::Copy, true) => format!(
                    "note: the link {path} of the copy would point at {target}, in the source"
                ),
            };
            human.push_str(&line);
            human.push('\n');
        }
        let mut record = json!({
            "action": verb,
            "from": from,
            "to": to,
            "objects": self.objects,
            "nodes": self.nodes,
            "link_policy": self.links_mode.as_str(),
            "links": self.links.iter().map(LinkChange::record).collect::<Vec<_>>(),
        });
        if let Some(id) = &self.id {
            record["id"] = json!(id);
        }
        if dry_run {
            record["dry_run"] = json!(true);
        }
        Doc::one(record, human)
    }
}

/// `mv FROM TO [--links POLICY]` and `cp FROM TO [--links POLICY]`.
pub async fn move_or_copy(
    ctx: &Ctx,
    op: Transfer,
    from: &str,
    to: &str,
    links: Links,
    dry_run: bool,
) -> CliResult<Doc> {
    let from = ctx.path(from)?;
    let to = ctx.path(to)?;
    check_paths(op, &from, &to, ctx.global.reserved)?;
    if dry_run {
        return plan(ctx, op, &from, &to, links).await;
    }
    let (verb, _, doing) = op.verb();
    let progress = Progress::spinner(ctx.global.quiet, doing, "");
    let resume = ctx.command_line("resume");
    let (f, t) = (from.escaped(), to.escaped());
    let tree = ctx.tree.on_progress(progress.observer());
    let policy = links.policy();
    let report = interruptible(
        async {
            Ok(match op {
                Transfer::Move => {
                    tree.move_subtree_with(from.clone(), to.clone(), policy)
                        .await?
                }
                Transfer::Copy => {
                    tree.copy_subtree_with(from.clone(), to.clone(), policy)
                        .await?
                }
            })
        },
        || {
            format!(
                "interrupted: the {verb} of {f} to {t} is recorded and may be part-way; run `{resume}` to finish it"
            )
        },
    )
    .await?;
    progress.finish();
    let outcome = Outcome {
        op,
        from: from.clone(),
        to: to.clone(),
        links_mode: links,
        id: Some(report.id.clone()),
        objects: report.objects,
        nodes: report.nodes,
        links: link_changes(ctx, op, &from, &to, links, &report).await?,
    };
    Ok(outcome.doc(false))
}

/// The checks that need no request: the library's words, with paths escaped.
fn check_paths(op: Transfer, from: &Path, to: &Path, reserved: char) -> CliResult<()> {
    check_object_path(from, reserved)?;
    check_object_path(to, reserved)?;
    if to.starts_with(from) || from.starts_with(to) {
        return Err(CliError::msg(format!(
            "invalid path: cannot {} {} to {}: one contains the other",
            op.verb().0,
            from.escaped(),
            to.escaped()
        )));
    }
    Ok(())
}

/// The links of a finished operation: a rewrite by a move is read back (the library leaves a
/// link that changed meanwhile alone); a copy writes its links rewritten or fails.
async fn link_changes(
    ctx: &Ctx,
    op: Transfer,
    from: &Path,
    to: &Path,
    links: Links,
    report: &MoveReport,
) -> CliResult<Vec<LinkChange>> {
    futures::stream::iter(report.links.iter().cloned())
        .map(|(path, was)| async move {
            let target = match (links, op) {
                (Links::Rewrite, Transfer::Copy) => rebase(&was, from, to)?,
                (Links::Rewrite, Transfer::Move) => match ctx.tree.read_link(path.clone()).await {
                    Ok(now) => now,
                    Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotALink) => {
                        was.clone()
                    }
                    Err(e) => return Err(CliError::from(e)),
                },
                _ => was.clone(),
            };
            Ok(LinkChange { path, was, target })
        })
        .buffered(16)
        .try_collect()
        .await
}

/// The dry run of `mv` and `cp`: the checks of the real run (in its order), then what it
/// would touch.
async fn plan(ctx: &Ctx, op: Transfer, from: &Path, to: &Path, links: Links) -> CliResult<Doc> {
    let (verb, _, _) = op.verb();
    let intents = ctx.tree.pending().await?;
    // The same command again resumes the recorded operation.
    if let Some(i) = intents
        .iter()
        .find(|i| i.op == verb && i.from == *from && i.to == *to)
    {
        return Ok(Doc::one(
            json!({
                "action": verb,
                "from": from.escaped(),
                "to": to.escaped(),
                "resume": i.id,
                "phase": i.phase,
                "dry_run": true,
            }),
            format!(
                "would resume {} (operation {}, phase {}), recorded and not finished\n",
                describe(i),
                i.id,
                i.phase
            ),
        ));
    }
    if let Some(p) = held(&intents, from, to) {
        return Err(locked(&p));
    }
    let own = object_kind(ctx, from).await?;
    if own.is_none() && !has_children(ctx, from).await? {
        return Err(CliError::not_found(format!(
            "not found: nothing at {}",
            from.escaped()
        )));
    }
    if object_kind(ctx, to).await?.is_some() || has_children(ctx, to).await? {
        return Err(CliError::msg(format!(
            "already exists: something is already at {}",
            to.escaped()
        )));
    }
    let reserved = ctx.global.reserved;
    let rewrite = links == Links::Rewrite;
    let progress = Progress::spinner(ctx.global.quiet, "reading the source", "objects");
    let mut nodes: BTreeSet<Path> = BTreeSet::from([from.clone()]);
    let mut objects = usize::from(own.is_some());
    let mut changes = Vec::new();
    if own == Some(Kind::Link) && op == Transfer::Copy && links != Links::Ignore {
        let target = ctx.tree.read_link(from.clone()).await?;
        if target.starts_with(from) {
            changes.push(change(from, target, from, to, rewrite)?);
        }
    }
    let mut stream = ctx.tree.descendants(from.clone()).items();
    while let Some(d) = stream.next().await {
        let d = d?;
        progress.inc(1);
        objects += 1;
        // Every node from the source down to the object is written under the destination.
        for depth in from.len() + 1..=d.path.len() {
            nodes.insert(Path::new(d.path.components()[..depth].iter().cloned())?);
        }
        check_object_path(&rebase(&d.path, from, to)?, reserved)?;
        if op == Transfer::Copy
            && links != Links::Ignore
            && let Some(target) = link_target(&d.item, reserved).filter(|t| t.starts_with(from))
        {
            changes.push(change(&d.path, target, from, to, rewrite)?);
        }
    }
    progress.finish();
    if op == Transfer::Move && links != Links::Ignore {
        changes = links_into(ctx, from, to, rewrite).await?;
    }
    for c in changes.iter().filter(|c| c.rewritten()) {
        check_object_path(&c.target, reserved)?;
    }
    changes.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Outcome {
        op,
        from: from.clone(),
        to: to.clone(),
        links_mode: links,
        id: None,
        objects,
        nodes: nodes.len(),
        links: changes,
    }
    .doc(true))
}

/// The link at `link` (under `from` or not) to `target` (under `from`), after the operation.
fn change(
    link: &Path,
    target: Path,
    from: &Path,
    to: &Path,
    rewrite: bool,
) -> CliResult<LinkChange> {
    let path = if link.starts_with(from) {
        rebase(link, from, to)?
    } else {
        link.clone()
    };
    let new = if rewrite {
        rebase(&target, from, to)?
    } else {
        target.clone()
    };
    Ok(LinkChange {
        path,
        was: target,
        target: new,
    })
}

/// Every link of the tree that points at `from` or under it, as a move would leave it (one
/// Scan of the table, as the move makes).
async fn links_into(
    ctx: &Ctx,
    from: &Path,
    to: &Path,
    rewrite: bool,
) -> CliResult<Vec<LinkChange>> {
    let reserved = ctx.global.reserved;
    let progress = Progress::spinner(ctx.global.quiet, "looking for links", "rows");
    let mut out = Vec::new();
    let mut rows = ctx.tree.scan();
    while let Some(row) = rows.next().await {
        let row = row?;
        progress.inc(1);
        if let Some((link, target)) = link_row(&row, reserved)
            && target.starts_with(from)
        {
            out.push(change(&link, target, from, to, rewrite)?);
        }
    }
    progress.finish();
    Ok(out)
}

/// The path and target of a stored link row (the object row, `Child` the reserved character,
/// with the attribute named by it).
fn link_row(row: &Item, reserved: char) -> Option<(Path, Path)> {
    let mut buf = [0u8; 4];
    let sc = reserved.encode_utf8(&mut buf);
    if row.get_s(RANGE_KEY) != Some(sc) {
        return None;
    }
    let target = link_target(row, reserved)?;
    let hash = row.get_s(HASH_KEY)?.strip_prefix(reserved)?;
    let path = Path::new(hash.split(reserved)).ok()?;
    Some((path, target))
}

/// The library's refusal of a write at `p`, held by a recorded operation.
fn locked(p: &Path) -> CliError {
    dynatree::Error::new(
        ErrorKind::Locked,
        format!(
            "{} is inside a subtree that another operation holds (a move, copy or subtree deletion)",
            p.escaped()
        ),
    )
    .into()
}

/// Fails as the library's write at `path` would (a deletion; with `whole`, of the subtree
/// under it) if a recorded operation holds it: for dry runs.
pub async fn check_not_held(ctx: &Ctx, path: &Path, whole: bool) -> CliResult<()> {
    let intents = ctx.tree.pending().await?;
    for i in &intents {
        let subtrees: Vec<&Path> = match i.op {
            Operation::Move | Operation::Copy => vec![&i.from, &i.to],
            // A re-parenting holds its node: writes at it and under it are refused.
            Operation::Delete | Operation::Reparent => vec![&i.from],
            _ => Vec::new(),
        };
        for h in subtrees {
            if path.starts_with(h) {
                return Err(locked(path));
            }
            if whole && h.starts_with(path) {
                return Err(locked(h));
            }
        }
    }
    Ok(())
}

/// A path of the operation that another recorded operation holds: a node of the source
/// inside (or around) a subtree held, or the destination under one.
fn held(intents: &[Intent], from: &Path, to: &Path) -> Option<Path> {
    for i in intents {
        let subtrees: Vec<&Path> = match i.op {
            Operation::Move | Operation::Copy => vec![&i.from, &i.to],
            Operation::Delete => vec![&i.from],
            // Its node only: writers under it are refused.
            Operation::Reparent => {
                if to.starts_with(&i.from) {
                    return Some(to.clone());
                }
                Vec::new()
            }
            _ => Vec::new(),
        };
        for h in subtrees {
            if from.starts_with(h) {
                return Some(from.clone());
            }
            if h.starts_with(from) {
                return Some(h.clone());
            }
            if to.starts_with(h) {
                return Some(to.clone());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Format;

    fn p(s: &str) -> Path {
        Path::parse_escaped(s).unwrap()
    }

    fn outcome(op: Transfer, links_mode: Links, links: Vec<LinkChange>) -> Outcome {
        Outcome {
            op,
            from: p("/a"),
            to: p("/b"),
            links_mode,
            id: Some("op1".into()),
            objects: 2,
            nodes: 3,
            links,
        }
    }

    #[test]
    fn rewritten_links_are_listed() {
        let l = LinkChange {
            path: p("/l"),
            was: p("/a/x"),
            target: p("/b/x"),
        };
        let doc = outcome(Transfer::Move, Links::Rewrite, vec![l]).doc(false);
        assert_eq!(
            doc.render(Format::Table),
            "moved 2 objects (3 nodes) from /a to /b\nrewrote the link /l: /a/x -> /b/x\n"
        );
        let v: Value = serde_json::from_str(&doc.render(Format::Json)).unwrap();
        assert_eq!(v["link_policy"], "rewrite");
        assert_eq!(v["id"], "op1");
        assert_eq!(
            v["links"],
            json!([{"path": "/l", "target": "/b/x", "was": "/a/x", "rewritten": true}])
        );
    }

    #[test]
    fn reported_links_are_listed() {
        let l = LinkChange {
            path: p("/l"),
            was: p("/a/x"),
            target: p("/a/x"),
        };
        let doc = outcome(Transfer::Move, Links::Report, vec![l.clone()]).doc(false);
        assert_eq!(
            doc.render(Format::Table),
            "moved 2 objects (3 nodes) from /a to /b\nnote: the link /l still points at /a/x\n"
        );
        let mut plan = outcome(Transfer::Copy, Links::Report, vec![l]);
        plan.id = None;
        let dry = plan.doc(true);
        assert_eq!(
            dry.render(Format::Table),
            "would copy 2 objects (3 nodes) from /a to /b\nnote: the link /l of the copy would point at /a/x, in the source\n"
        );
        let v: Value = serde_json::from_str(&dry.render(Format::Json)).unwrap();
        assert_eq!(v["dry_run"], true);
        assert_eq!(v["links"][0]["rewritten"], false);
        assert!(v.get("id").is_none());
    }

    #[test]
    fn link_rows() {
        let mut row = Item::new();
        row.insert(HASH_KEY, dynatree::storage::Value::S("¦l¦x%y".into()));
        row.insert(RANGE_KEY, dynatree::storage::Value::S("¦".into()));
        row.insert("¦", dynatree::storage::Value::S("¦a¦b/c".into()));
        assert_eq!(
            link_row(&row, '¦'),
            Some((
                Path::new(["l", "x%y"]).unwrap(),
                Path::new(["a", "b/c"]).unwrap()
            ))
        );
        row.insert(RANGE_KEY, dynatree::storage::Value::S("name".into()));
        assert_eq!(link_row(&row, '¦'), None);
    }

    #[test]
    fn links_moved_with_the_subtree() {
        let c = change(&p("/a/l"), p("/a/x"), &p("/a"), &p("/b"), true).unwrap();
        assert_eq!((c.path, c.was, c.target), (p("/b/l"), p("/a/x"), p("/b/x")));
        let c = change(&p("/l"), p("/a/x"), &p("/a"), &p("/b"), false).unwrap();
        assert_eq!((c.path, c.was, c.target), (p("/l"), p("/a/x"), p("/a/x")));
    }

    #[test]
    fn paths_checked_before_any_request() {
        let e = check_paths(Transfer::Move, &p("/a"), &p("/a/b"), '¦').unwrap_err();
        assert_eq!(
            e.message(),
            "invalid path: cannot move /a to /a/b: one contains the other"
        );
        assert!(check_paths(Transfer::Copy, &Path::root(), &p("/b"), '¦').is_err());
        assert!(check_paths(Transfer::Copy, &p("/a"), &p("/b"), '¦').is_ok());
    }
}
