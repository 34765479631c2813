//! The commands: connecting to the table ([`Ctx`]), dispatch ([`run`]), and helpers the
//! commands share (paths, kinds of entries, Ctrl-C).

mod check;
mod failure;
mod paths;
mod read;
mod subtree;
mod transfer;
mod write;

use std::future::Future;

use aws_config::BehaviorVersion;
use aws_config::Region;
use dynatree::{DynamoDbTable, Item, Path, Tree, TreeBuilder};

use crate::args::{Cli, Command, Global};
use crate::error::{CliError, CliResult};
use crate::output::Doc;

/// What every command works with: the flags, the table and the tree over it.
#[derive(Debug)]
pub struct Ctx {
    /// The global flags.
    pub global: Global,
    /// The table's name.
    pub table_name: String,
    /// The backend (for what the tree does not expose: the stream).
    pub table: DynamoDbTable,
    /// The tree over `table`.
    pub tree: Tree,
}

impl Ctx {
    /// Loads the AWS configuration (the standard chain, then `--region`, `--profile`,
    /// `--endpoint-url`) and builds the table and the tree.
    pub async fn connect(global: Global, table_name: String) -> CliResult<Self> {
        let mut loader = aws_config::defaults(BehaviorVersion::latest());
        if let Some(profile) = &global.profile {
            loader = loader.profile_name(profile);
        }
        if let Some(region) = &global.region {
            loader = loader.region(Region::new(region.clone()));
        }
        if let Some(url) = &global.endpoint_url {
            loader = loader.endpoint_url(url);
        }
        let config = loader.load().await;
        let client = aws_sdk_dynamodb::Client::new(&config);
        let table = DynamoDbTable::new(client, table_name.clone());
        let tree = builder(&global, table.clone()).build()?;
        Ok(Self {
            global,
            table_name,
            table,
            tree,
        })
    }

    /// The command line that reaches the same table, followed by `rest` (for "run this to
    /// resume" messages): `dynatree --table T [--endpoint-url U] ... resume`.
    pub fn command_line(&self, rest: &str) -> String {
        let g = &self.global;
        let mut parts = vec!["dynatree".to_owned()];
        let mut flag = |name: &str, value: Option<&str>| {
            if let Some(v) = value {
                parts.push(format!("--{name}"));
                parts.push(shell_quote(v));
            }
        };
        flag("table", Some(&self.table_name));
        flag("endpoint-url", g.endpoint_url.as_deref());
        flag("region", g.region.as_deref());
        flag("profile", g.profile.as_deref());
        let reserved = g.reserved.to_string();
        flag(
            "reserved",
            (g.reserved != dynatree::DEFAULT_RESERVED).then_some(reserved.as_str()),
        );
        let depth = g.path_index.map(|d| d.to_string());
        flag("path-index", depth.as_deref());
        parts.push(rest.to_owned());
        parts.join(" ")
    }

    /// Reads a path given on the command line (escaped form, checked against the reserved
    /// character).
    pub fn path(&self, text: &str) -> CliResult<Path> {
        parse_path(text, self.global.reserved)
    }
}

/// The tree's builder from the global flags.
fn builder(global: &Global, table: DynamoDbTable) -> TreeBuilder<DynamoDbTable> {
    let mut b = Tree::builder(table).reserved(global.reserved);
    if let Some(depth) = global.path_index {
        b = b.path_index(depth);
    }
    b
}

/// Parses a command-line path: the escaped form (`/a/b%2Fc`), valid for `reserved`.
///
/// # Errors
///
/// Exit status 1 with the library's message on an empty component, a bad `%` escape or the
/// reserved character.
pub fn parse_path(text: &str, reserved: char) -> CliResult<Path> {
    let text = paths::absolute(text)?;
    let path = Path::parse_escaped(text)
        .and_then(|p| p.validate(reserved).map(|()| p))
        .map_err(|e| CliError::from(e).context(format!("path {text:?}")))?;
    Ok(path)
}

/// Quotes `s` for a POSIX shell when it needs it.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// What is at a path of a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An object (not a link).
    Object,
    /// A link.
    Link,
    /// Only children, no object.
    Dir,
}

impl Kind {
    /// Its name in output.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Object => "object",
            Kind::Link => "link",
            Kind::Dir => "dir",
        }
    }

    /// The kind of a stored object row: a link has the attribute named by the reserved
    /// character.
    pub fn of_row(item: &Item, reserved: char) -> Kind {
        let mut buf = [0u8; 4];
        if item.get_s(reserved.encode_utf8(&mut buf)).is_some() {
            Kind::Link
        } else {
            Kind::Object
        }
    }
}

/// The target of a link row, in escaped form (`None` if it is not a link or does not parse).
pub fn link_target(item: &Item, reserved: char) -> Option<Path> {
    let mut buf = [0u8; 4];
    let raw = item.get_s(reserved.encode_utf8(&mut buf))?;
    let parts: Vec<&str> = raw.split(reserved).skip(1).collect();
    Path::new(parts).ok()
}

/// Runs `op`, or stops at Ctrl-C with exit status 130 and the message `interrupted()` builds
/// (what state is left, and the command that resumes).
pub async fn interruptible<T>(
    op: impl Future<Output = CliResult<T>>,
    interrupted: impl FnOnce() -> String,
) -> CliResult<T> {
    tokio::select! {
        result = op => result,
        _ = tokio::signal::ctrl_c() => Err(CliError::interrupted(interrupted())),
    }
}

/// Runs the command line.
///
/// # Errors
///
/// The command's failure, with its exit status.
pub async fn run(cli: Cli, table_name: String) -> CliResult<()> {
    let format = cli.global.output;
    let paths = failure::paths_of(&cli.command, cli.global.reserved);
    let ctx = Ctx::connect(cli.global, table_name).await?;
    let doc = match dispatch(&ctx, cli.command).await {
        Ok(doc) => doc,
        Err(e) => return Err(failure::explain(&ctx, &paths, e).await),
    };
    doc.print(format)?;
    Ok(())
}

async fn dispatch(ctx: &Ctx, command: Command) -> CliResult<Doc> {
    match command {
        Command::Ls { path, long } => read::ls(ctx, &path, long).await,
        Command::Tree { path, depth } => read::tree(ctx, &path, depth).await,
        Command::Get { path, no_follow } => read::get(ctx, &path, no_follow).await,
        Command::Readlink { path } => read::readlink(ctx, &path).await,
        Command::Find {
            path,
            name,
            kind,
            maxdepth,
        } => read::find(ctx, &path, name.as_ref(), kind, maxdepth).await,
        Command::Du { path } => read::du(ctx, &path).await,
        Command::Put { path, json, dry } => write::put(ctx, &path, json, dry.dry_run).await,
        Command::Rm {
            path,
            recursive,
            dry,
        } => write::rm(ctx, &path, recursive, dry.dry_run).await,
        Command::Mv {
            from,
            to,
            links,
            dry,
        } => {
            subtree::move_or_copy(ctx, subtree::Transfer::Move, &from, &to, links, dry.dry_run)
                .await
        }
        Command::Cp {
            from,
            to,
            links,
            dry,
        } => {
            subtree::move_or_copy(ctx, subtree::Transfer::Copy, &from, &to, links, dry.dry_run)
                .await
        }
        Command::Ln { target, path, dry } => write::ln(ctx, &target, &path, dry.dry_run).await,
        Command::CreateTable {
            ttl,
            stream,
            indexes,
            billing,
            read_capacity,
            write_capacity,
            dry,
        } => {
            let billing = match billing {
                crate::args::BillingMode::OnDemand => dynatree::Billing::OnDemand,
                crate::args::BillingMode::Provisioned => dynatree::Billing::Provisioned {
                    read: read_capacity,
                    write: write_capacity,
                },
            };
            write::create_table(ctx, billing, ttl, stream, &indexes, dry.dry_run).await
        }
        Command::Pending => write::pending(ctx).await,
        Command::Resume { dry } => write::resume(ctx, dry.dry_run).await,
        Command::Check { scan } => check::check(ctx, scan).await,
        Command::Repair { scan, dry } => check::repair(ctx, scan, dry.dry_run).await,
        Command::Export { path, file } => transfer::export(ctx, &path, file.as_deref()).await,
        Command::Import { file, resume, dry } => {
            transfer::import(ctx, file.as_deref(), resume, dry.dry_run).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dynatree::Value;

    #[test]
    fn paths_from_the_command_line() {
        assert_eq!(parse_path("/", '¦').unwrap(), Path::root());
        let p = parse_path("/Files/a%2Fb", '¦').unwrap();
        assert_eq!(p.components(), ["Files", "a/b"]);
        let e = parse_path("/a//b", '¦').unwrap_err();
        assert_eq!(e.code(), 1);
        assert!(
            e.message().starts_with("path \"/a//b\": invalid path"),
            "{e}"
        );
        assert_eq!(parse_path("/a¦b", '¦').unwrap_err().code(), 1);
        assert!(parse_path("/a¦b", '|').is_ok());
        assert_eq!(parse_path("/a%20b", '¦').unwrap_err().code(), 1);
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("my-table_1"), "my-table_1");
        assert_eq!(
            shell_quote("http://127.0.0.1:8000"),
            "http://127.0.0.1:8000"
        );
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("¦"), "'¦'");
    }

    #[test]
    fn kinds_of_rows() {
        let mut item = Item::new();
        item.insert("v", Value::N("1".into()));
        assert_eq!(Kind::of_row(&item, '¦'), Kind::Object);
        assert_eq!(link_target(&item, '¦'), None);
        item.insert("¦", Value::S("¦a¦b c".into()));
        assert_eq!(Kind::of_row(&item, '¦'), Kind::Link);
        assert_eq!(
            link_target(&item, '¦').unwrap(),
            Path::new(["a", "b c"]).unwrap()
        );
        assert_eq!(Kind::Dir.as_str(), "dir");
    }
}
