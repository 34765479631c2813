//! The commands: connecting to the table ([`Ctx`]), dispatch ([`run`]), and helpers the
//! commands share (paths, kinds of entries, Ctrl-C).

mod check;
mod read;
mod transfer;
mod write;

use std::future::Future;

use dynatree::storage::{Storage, TableDescription};
use dynatree::{DynamoDbTable, Item, Path, Tree, TreeBuilder};

use crate::args::{Cli, Command, Global};
use crate::error::{CliError, CliResult};
use crate::output::Doc;

/// What a command needs of its table before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableNeed {
    /// An existing table with a tree's key schema (every command but the two below).
    Existing,
    /// The command creates the table when it is absent (`create-table`, `import
    /// --create-table`); a table that exists must still have a tree's key schema.
    MayCreate,
}

/// What every command works with: the flags, the table and the tree over it.
#[derive(Debug)]
pub struct Ctx {
    /// The global flags.
    pub global: Global,
    /// The table's name.
    pub table_name: String,
    /// The region requests go to.
    pub region: String,
    /// The backend (for what the tree does not expose: the stream).
    pub table: DynamoDbTable,
    /// The tree over `table`.
    pub tree: Tree,
    /// What DescribeTable said when the command started; `None` when the table does not exist
    /// (only for a command that creates it, see [`TableNeed::MayCreate`]).
    pub description: Option<TableDescription>,
}

impl Ctx {
    /// Loads the AWS configuration ([`crate::aws::load`]: endpoint, profile, region and
    /// credentials checked), builds the table and the tree, and describes the table: a table
    /// that is missing (unless `need` allows it) or whose key schema is not a tree's is refused
    /// before any other request.
    ///
    /// # Errors
    ///
    /// Exit status 1, one line: the setup errors of [`crate::aws::load`], a missing table
    /// (naming where it was looked for, and the commands that create it), a table of another
    /// key schema, DescribeTable's failure.
    pub async fn connect(global: Global, table_name: String, need: TableNeed) -> CliResult<Self> {
        let config = crate::aws::load(&global).await?;
        let region = config.region().map(ToString::to_string).unwrap_or_default();
        let client = aws_sdk_dynamodb::Client::new(&config);
        let table = DynamoDbTable::new(client, table_name.clone());
        let tree = builder(&global, table.clone()).build()?;
        let description = table
            .describe_table()
            .await
            .map_err(|e| CliError::from(e).on_table(&table_name))?;
        let ctx = Self {
            global,
            table_name,
            region,
            table,
            tree,
            description,
        };
        match (&ctx.description, need) {
            (None, TableNeed::Existing) => Err(ctx.no_table()),
            (Some(d), _) if !d.has_tree_schema() => Err(ctx.not_a_tree(d)),
            _ => Ok(ctx),
        }
    }

    /// "Table not found", with where it was looked for and the commands that create it.
    fn no_table(&self) -> CliError {
        let endpoint = self
            .global
            .endpoint_url
            .as_deref()
            .map(|u| format!(", endpoint {u}"))
            .unwrap_or_default();
        CliError::msg(format!(
            "table {} not found (region {}{endpoint}): create it with `{}`, or import into a new table with `{}`",
            self.table_name,
            self.region,
            self.command_line("create-table"),
            self.command_line("import --create-table --file F")
        ))
    }

    /// "Not a tree's table", with the key schema found and the one needed.
    fn not_a_tree(&self, d: &TableDescription) -> CliError {
        let key = |(name, ty): &(String, String)| format!("`{name}` ({ty})");
        let found = match &d.range_key {
            Some(r) => format!("hash {} and range {}", key(&d.hash_key), key(r)),
            None => format!("hash {} and no range key", key(&d.hash_key)),
        };
        CliError::msg(format!(
            "table {} is not a dynatree table: its key is {found}, a tree's is hash `{}` (S) and range `{}` (S); nothing was read or written",
            self.table_name,
            dynatree::storage::HASH_KEY,
            dynatree::storage::RANGE_KEY
        ))
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
    let need = match cli.command {
        Command::CreateTable { .. }
        | Command::Import {
            create_table: true, ..
        } => TableNeed::MayCreate,
        _ => TableNeed::Existing,
    };
    let ctx = Ctx::connect(cli.global, table_name, need).await?;
    let doc = dispatch(&ctx, cli.command)
        .await
        .map_err(|e| e.on_table(&ctx.table_name))?;
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
        Command::Mv { from, to, dry } => {
            write::move_or_copy(ctx, write::Transfer::Move, &from, &to, dry.dry_run).await
        }
        Command::Cp { from, to, dry } => {
            write::move_or_copy(ctx, write::Transfer::Copy, &from, &to, dry.dry_run).await
        }
        Command::Ln {
            target,
            path,
            force,
            dry,
        } => write::ln(ctx, &target, &path, force, dry.dry_run).await,
        Command::CreateTable {
            ttl,
            stream,
            indexes,
            billing,
            read_capacity,
            write_capacity,
            dry,
        } => {
            let billing = billing.map(|b| match b {
                crate::args::BillingMode::OnDemand => dynatree::Billing::OnDemand,
                crate::args::BillingMode::Provisioned => dynatree::Billing::Provisioned {
                    read: read_capacity,
                    write: write_capacity,
                },
            });
            write::create_table(ctx, billing, ttl, stream, &indexes, dry.dry_run).await
        }
        Command::Pending => write::pending(ctx).await,
        Command::Resume { dry } => write::resume(ctx, dry.dry_run).await,
        Command::Check { scan } => check::check(ctx, scan).await,
        Command::Repair { scan, dry } => check::repair(ctx, scan, dry.dry_run).await,
        Command::Export { path, file } => transfer::export(ctx, &path, file.as_deref()).await,
        Command::Import {
            file,
            resume,
            create_table,
            dry,
        } => transfer::import(ctx, file.as_deref(), resume, create_table, dry.dry_run).await,
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
