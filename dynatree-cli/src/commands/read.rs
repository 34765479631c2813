//! The reading commands: `ls`, `tree`, `get`, `readlink`, `find`, `du`.

use std::collections::HashMap;

use dynatree::storage::Storage;
use dynatree::{ErrorKind, Path};
use futures::{StreamExt, TryStreamExt};
use serde_json::{Value, json};

use super::{Ctx, Kind, link_target};
use crate::args::FindType;
use crate::error::{CliError, CliResult};
use crate::output::{Align, Doc, Table, human_bytes};
use crate::progress::Progress;

/// One child of a listing, with what is stored there.
#[derive(Debug, Clone, PartialEq)]
pub struct Child {
    /// Its name (last component, unescaped).
    pub name: String,
    /// Its full path.
    pub path: Path,
    /// Object, link, or only children.
    pub kind: Kind,
    /// The stored row's size in bytes (objects and links).
    pub size: Option<usize>,
    /// A link's target.
    pub target: Option<Path>,
}

impl Child {
    /// The JSON record of `ls` and `tree`.
    fn record(&self) -> Value {
        let mut r = json!({
            "name": self.name,
            "path": self.path.escaped(),
            "kind": self.kind.as_str(),
        });
        if let Some(size) = self.size {
            r["size"] = json!(size);
        }
        if let Some(t) = &self.target {
            r["target"] = json!(t.escaped());
        }
        r
    }

    /// Its name as printed: escaped (`a%2Fb`), with ` -> target` for a link when `arrows`.
    fn label(&self, arrows: bool) -> String {
        let name = escaped_name(&self.name);
        match (&self.target, arrows) {
            (Some(t), true) => format!("{name} -> {}", t.escaped()),
            _ => name,
        }
    }
}

/// A component in the escaped form (`a/b` is `a%2Fb`).
pub fn escaped_name(name: &str) -> String {
    name.replace('%', "%25").replace('/', "%2F")
}

/// What is stored at `path` itself: an object, a link, or nothing (`None`).
pub async fn object_kind(ctx: &Ctx, path: &Path) -> CliResult<Option<Kind>> {
    if path.is_root() {
        return Ok(None);
    }
    match ctx.tree.read_link(path.clone()).await {
        Ok(_) => Ok(Some(Kind::Link)),
        Err(e) if e.kind() == ErrorKind::NotALink => Ok(Some(Kind::Object)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Whether anything is at `path`: an object, a link, or children (the root always is).
pub async fn exists(ctx: &Ctx, path: &Path) -> CliResult<bool> {
    Ok(
        path.is_root()
            || object_kind(ctx, path).await?.is_some()
            || has_children(ctx, path).await?,
    )
}

/// Fails with exit status 3 unless something is at `path`.
pub async fn must_exist(ctx: &Ctx, path: &Path) -> CliResult<()> {
    if exists(ctx, path).await? {
        Ok(())
    } else {
        Err(nothing_at(path))
    }
}

/// The stored row of the object or link at `path` itself (bookkeeping included), if any.
async fn own_row(ctx: &Ctx, path: &Path) -> CliResult<Option<dynatree::storage::Item>> {
    if object_kind(ctx, path).await?.is_none() {
        return Ok(None);
    }
    let reserved = ctx.global.reserved;
    let hash: String = path
        .components()
        .iter()
        .flat_map(|c| std::iter::once(reserved.to_string()).chain(std::iter::once(c.clone())))
        .collect();
    let key = dynatree::storage::Key::new(hash, reserved.to_string());
    Ok(dynatree::RetryPolicy::default()
        .retry_read(|| ctx.table.get_item(&key, false))
        .await?)
}

/// Whether `path` has at least one child.
pub async fn has_children(ctx: &Ctx, path: &Path) -> CliResult<bool> {
    Ok(ctx.tree.list(path.clone()).try_next().await?.is_some())
}

/// The children of `dir` with their kinds: one listing, plus (when there are children) the
/// objects among them (a Query and BatchGetItem per 100 names).
pub async fn children(ctx: &Ctx, dir: &Path) -> CliResult<Vec<Child>> {
    let names: Vec<String> = ctx.tree.list(dir.clone()).try_collect().await?;
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let reserved = ctx.global.reserved;
    let objects: HashMap<String, dynatree::storage::Item> = ctx
        .tree
        .descendants(dir.clone())
        .max_depth(1)
        .items()
        .map_ok(|d| (d.path.name().unwrap_or_default().to_owned(), d.item))
        .try_collect()
        .await?;
    names
        .into_iter()
        .map(|name| {
            let path = dir.child(name.clone())?;
            let child = match objects.get(&name) {
                Some(item) => Child {
                    kind: Kind::of_row(item, reserved),
                    size: Some(item.size()),
                    target: link_target(item, reserved),
                    name,
                    path,
                },
                None => Child {
                    name,
                    path,
                    kind: Kind::Dir,
                    size: None,
                    target: None,
                },
            };
            Ok(child)
        })
        .collect()
}

fn nothing_at(path: &Path) -> CliError {
    CliError::not_found(format!("not found: nothing at {}", path.escaped()))
}

/// `ls [-l] PATH`.
pub async fn ls(ctx: &Ctx, path: &str, long: bool) -> CliResult<Doc> {
    let dir = ctx.path(path)?;
    let children = children(ctx, &dir).await?;
    if children.is_empty() && object_kind(ctx, &dir).await?.is_none() && !dir.is_root() {
        return Err(nothing_at(&dir));
    }
    let records = children.iter().map(Child::record).collect();
    let human = if long {
        let mut t = Table::new(&[
            ("KIND", Align::Left),
            ("SIZE", Align::Right),
            ("NAME", Align::Left),
        ]);
        for c in &children {
            let size = c.size.map(|s| s.to_string()).unwrap_or_default();
            t.row([c.kind.as_str().to_owned(), size, c.label(true)]);
        }
        t.render()
    } else {
        children
            .iter()
            .map(|c| c.label(false) + "\n")
            .collect::<String>()
    };
    Ok(Doc::many(records, human))
}

/// One line of `tree`'s drawing.
#[derive(Debug)]
struct Pending {
    child: Child,
    depth: usize,
    prefix: String,
    last: bool,
}

/// `tree PATH [--depth N]`: depth first, children in byte order, drawn like unix `tree`.
pub async fn tree(ctx: &Ctx, path: &str, depth: Option<usize>) -> CliResult<Doc> {
    let root = ctx.path(path)?;
    let progress = Progress::spinner(ctx.global.quiet, "walking", "nodes");
    let mut records = Vec::new();
    let mut human = format!("{}\n", root.escaped());
    let (mut objects, mut links, mut dirs) = (0usize, 0usize, 0usize);
    let mut stack = Vec::new();
    let descend = |d: usize| depth.is_none_or(|max| d < max);
    if descend(0) {
        let first = children(ctx, &root).await?;
        if first.is_empty() && !root.is_root() && object_kind(ctx, &root).await?.is_none() {
            return Err(nothing_at(&root));
        }
        push_children(&mut stack, first, 1, "");
    }
    while let Some(Pending {
        child,
        depth: d,
        prefix,
        last,
    }) = stack.pop()
    {
        progress.inc(1);
        human.push_str(&format!(
            "{prefix}{}{}\n",
            if last { "└── " } else { "├── " },
            child.label(true)
        ));
        match child.kind {
            Kind::Object => objects += 1,
            Kind::Link => links += 1,
            Kind::Dir => dirs += 1,
        }
        let mut record = child.record();
        record["depth"] = json!(d);
        records.push(record);
        if descend(d) {
            let below = children(ctx, &child.path).await?;
            let prefix = format!("{prefix}{}", if last { "    " } else { "│   " });
            push_children(&mut stack, below, d + 1, &prefix);
        }
    }
    progress.finish();
    human.push_str(&format!(
        "\n{dirs} {}, {objects} {}, {links} {}\n",
        plural(dirs, "directory", "directories"),
        plural(objects, "object", "objects"),
        plural(links, "link", "links"),
    ));
    Ok(Doc::many(records, human))
}

fn push_children(stack: &mut Vec<Pending>, children: Vec<Child>, depth: usize, prefix: &str) {
    let n = children.len();
    for (i, child) in children.into_iter().enumerate().rev() {
        stack.push(Pending {
            child,
            depth,
            prefix: prefix.to_owned(),
            last: i + 1 == n,
        });
    }
}

/// `one` or `many` after a count.
pub fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

/// `get PATH [--no-follow]`.
pub async fn get(ctx: &Ctx, path: &str, no_follow: bool) -> CliResult<Doc> {
    let path = ctx.path(path)?;
    if no_follow {
        match ctx.tree.read_link(path.clone()).await {
            Ok(target) => {
                let v = json!({ "link": target.escaped() });
                let human = pretty(&v);
                return Ok(Doc::one(v, human));
            }
            Err(e) if e.kind() == ErrorKind::NotALink => {}
            Err(e) if e.kind() == ErrorKind::NotFound => return Err(nothing_at(&path)),
            Err(e) => return Err(e.into()),
        }
    }
    match ctx.tree.get::<Value>(path.clone()).await? {
        Some(v) => {
            let human = pretty(&v);
            Ok(Doc::one(v, human))
        }
        None => Err(nothing_at(&path)),
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// `readlink PATH`.
pub async fn readlink(ctx: &Ctx, path: &str) -> CliResult<Doc> {
    let path = ctx.path(path)?;
    let target = ctx.tree.read_link(path.clone()).await.map_err(|e| {
        if e.kind() == ErrorKind::NotFound {
            nothing_at(&path)
        } else {
            e.into()
        }
    })?;
    Ok(Doc::one(
        json!({ "path": path.escaped(), "target": target.escaped() }),
        target.escaped(),
    ))
}

/// `find PATH [--name GLOB] [--type o|l] [--maxdepth N]`: the descendants (objects and
/// links) whose last component matches.
pub async fn find(
    ctx: &Ctx,
    path: &str,
    name: Option<&glob::Pattern>,
    kind: Option<FindType>,
    maxdepth: Option<usize>,
) -> CliResult<Doc> {
    let root = ctx.path(path)?;
    must_exist(ctx, &root).await?;
    let reserved = ctx.global.reserved;
    let progress = Progress::spinner(ctx.global.quiet, "searching", "objects");
    let mut query = ctx.tree.descendants(root);
    if let Some(m) = maxdepth {
        query = query.max_depth(m);
    }
    let mut stream = query.items();
    let mut records = Vec::new();
    let mut human = String::new();
    while let Some(d) = stream.next().await {
        let d = d?;
        progress.inc(1);
        let k = Kind::of_row(&d.item, reserved);
        let wanted = match kind {
            None => true,
            Some(FindType::Object) => k == Kind::Object,
            Some(FindType::Link) => k == Kind::Link,
        };
        let matches = name.is_none_or(|p| d.path.name().is_some_and(|n| p.matches(n)));
        if !(wanted && matches) {
            continue;
        }
        human.push_str(&d.path.escaped());
        human.push('\n');
        let mut r = json!({
            "path": d.path.escaped(),
            "kind": k.as_str(),
            "size": d.item.size(),
        });
        if let Some(t) = link_target(&d.item, reserved) {
            r["target"] = json!(t.escaped());
        }
        records.push(r);
    }
    progress.finish();
    Ok(Doc::many(records, human))
}

/// Totals of `du`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Objects (not links).
    pub objects: u64,
    /// Links.
    pub links: u64,
    /// Bytes of their rows.
    pub bytes: u64,
}

/// `du PATH`: the objects and links at and below `PATH` and the bytes of their rows.
pub async fn du(ctx: &Ctx, path: &str) -> CliResult<Doc> {
    let root = ctx.path(path)?;
    must_exist(ctx, &root).await?;
    let reserved = ctx.global.reserved;
    let progress = Progress::spinner(ctx.global.quiet, "counting", "objects");
    let mut usage = Usage::default();
    let own = own_row(ctx, &root).await?;
    for item in own.iter() {
        match Kind::of_row(item, reserved) {
            Kind::Link => usage.links += 1,
            _ => usage.objects += 1,
        }
        usage.bytes += item.size() as u64;
    }
    let mut stream = ctx.tree.descendants(root.clone()).items();
    while let Some(d) = stream.next().await {
        let d = d?;
        progress.inc(1);
        match Kind::of_row(&d.item, reserved) {
            Kind::Link => usage.links += 1,
            _ => usage.objects += 1,
        }
        usage.bytes += d.item.size() as u64;
    }
    progress.finish();
    Ok(du_doc(&root, usage))
}

/// The output of `du`.
pub fn du_doc(root: &Path, u: Usage) -> Doc {
    let human = format!(
        "{} {}, {} {}, {} ({} bytes) under {}\n",
        u.objects,
        plural(u.objects as usize, "object", "objects"),
        u.links,
        plural(u.links as usize, "link", "links"),
        human_bytes(u.bytes),
        u.bytes,
        root.escaped()
    );
    Doc::one(
        json!({
            "path": root.escaped(),
            "objects": u.objects,
            "links": u.links,
            "bytes": u.bytes,
        }),
        human,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Format;

    #[test]
    fn names_are_escaped() {
        assert_eq!(escaped_name("a/b%c"), "a%2Fb%25c");
        let c = Child {
            name: "x/y".into(),
            path: Path::new(["d", "x/y"]).unwrap(),
            kind: Kind::Link,
            size: Some(20),
            target: Some(Path::new(["t"]).unwrap()),
        };
        assert_eq!(c.label(true), "x%2Fy -> /t");
        assert_eq!(c.label(false), "x%2Fy");
        assert_eq!(
            c.record(),
            json!({"name": "x/y", "path": "/d/x%2Fy", "kind": "link", "size": 20, "target": "/t"})
        );
    }

    #[test]
    fn du_output() {
        let doc = du_doc(
            &Path::new(["a"]).unwrap(),
            Usage {
                objects: 2,
                links: 1,
                bytes: 2048,
            },
        );
        assert_eq!(
            doc.render(Format::Table),
            "2 objects, 1 link, 2.0 KiB (2048 bytes) under /a\n"
        );
        let line: Value = serde_json::from_str(&doc.render(Format::Jsonl)).unwrap();
        assert_eq!(
            line,
            json!({"path": "/a", "objects": 2, "links": 1, "bytes": 2048})
        );
    }

    #[test]
    fn tree_drawing() {
        let mut stack = Vec::new();
        let mk = |n: &str| Child {
            name: n.into(),
            path: Path::new([n]).unwrap(),
            kind: Kind::Dir,
            size: None,
            target: None,
        };
        push_children(&mut stack, vec![mk("a"), mk("b")], 1, "│   ");
        let first = stack.pop().unwrap();
        assert_eq!((first.child.name.as_str(), first.last), ("a", false));
        assert_eq!(first.prefix, "│   ");
        assert!(stack.pop().unwrap().last);
    }
}
