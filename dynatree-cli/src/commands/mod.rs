//! The commands: connecting to the table ([`Ctx`]), dispatch ([`run`]), and helpers the
//! commands share (paths, kinds of entries, Ctrl-C).

mod check;
mod failure;
mod paths;
mod read;
mod subtree;
mod transfer;
mod watch;
mod write;

use std::future::Future;

use dynatree::storage::{Storage, TableDescription, TableSettings};
use dynatree::{DynamoDbTable, Path, RetryPolicy, Tree, TreeBuilder, storage::Item};

use crate::args::{Cli, Command, Global};
use crate::error::{CliError, CliResult};
use crate::output::Doc;

/// What a command needs of its table before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableNeed {
    /// An existing table with a tree's key schema (every command but the two below).
    Existing,
    /// `import --create-table`: the table is created when it is absent; one that exists must
    /// still have a tree's key schema.
    CreatedIfAbsent,
    /// `create-table`: creates the table, or adds what an existing one lacks (such as the path
    /// index of `--path-index`).
    Creates,
}

/// How every write to the table must look, learned from the table (its description and
/// settings row) and the flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableLayout {
    /// The depth of the path index writes keep: the one the table's settings record, else
    /// `--path-index`'s.
    pub path_index: Option<usize>,
    /// The depth of the link index the table's settings record: every link written keeps its
    /// entry.
    pub link_index: Option<usize>,
    /// The sharded directories the table's settings record (template, shards): the tree's
    /// keys follow them.
    pub sharded: Vec<(String, u32)>,
    /// The path templates of the types that fill the table's secondary indexes, with the
    /// index: objects at such paths get index values only from a typed write.
    pub index_templates: Vec<(String, String)>,
    /// Why nothing may be written (nor checked) with these flags, if so.
    pub unwritable: Option<String>,
}

impl TableLayout {
    /// Why an object or link at `path` is refused: a type that fills a secondary index of the
    /// table lives there (its template matches the end of the path, as under a scope), and the
    /// command line cannot compute a type's index values from raw JSON.
    ///
    /// # Errors
    ///
    /// The reason, naming the index and the template.
    pub fn refuse_indexed(&self, path: &Path) -> Result<(), String> {
        match self
            .index_templates
            .iter()
            .find(|(_, t)| template_matches(t, path))
        {
            Some((index, template)) => Err(format!(
                "{} matches the template {template} of the secondary index {index}, whose values the command line cannot compute from JSON: write it through your application",
                path.escaped()
            )),
            None => Ok(()),
        }
    }

    /// Learns the layout of table `table` from what DescribeTable said (`None`: absent), its
    /// settings row and the flags, for a command that needs `need`.
    ///
    /// # Errors
    ///
    /// Exit status 1 when `--path-index` disagrees with the table: another depth than the
    /// settings record, or a path index the table does not have (but for `create-table`, which
    /// adds it).
    pub fn learn(
        global: &Global,
        table: &str,
        description: Option<&TableDescription>,
        settings: Option<&TableSettings>,
        need: TableNeed,
    ) -> CliResult<Self> {
        let flag = global.path_index;
        let Some(d) = description else {
            return Ok(Self {
                path_index: flag,
                ..Self::default()
            });
        };
        let has_index = d
            .indexes
            .iter()
            .any(|(n, _)| n == dynatree::storage::PATH_INDEX);
        let recorded = settings.and_then(|s| s.path_index);
        let creates = need == TableNeed::Creates;
        let create = |depth: usize| {
            format!(
                "dynatree --table {} --path-index {depth} create-table",
                shell_quote(table)
            )
        };
        let mut layout = Self {
            link_index: settings.and_then(|s| s.link_index),
            sharded: settings
                .map(|s| s.sharded.iter().map(|(t, n)| (t.clone(), *n)).collect())
                .unwrap_or_default(),
            index_templates: settings
                .map(|s| {
                    s.indexes
                        .iter()
                        .flat_map(|ix| ix.templates.iter().map(|t| (ix.name.clone(), t.clone())))
                        .collect()
                })
                .unwrap_or_default(),
            ..Self::default()
        };
        match (flag, recorded) {
            (Some(f), Some(r)) if f != r => {
                return Err(CliError::msg(format!(
                    "--path-index {f} disagrees with table {table}: its path index has depth {r}; drop --path-index (the depth comes from the table) or pass --path-index {r}"
                )));
            }
            (_, Some(r)) if !has_index && !creates => {
                return Err(CliError::msg(format!(
                    "table {table} records a path index of depth {r} but has no index {}: add it with `{}`",
                    dynatree::storage::PATH_INDEX,
                    create(r)
                )));
            }
            (_, Some(r)) => layout.path_index = Some(r),
            (Some(f), None) if !has_index && !creates => {
                return Err(CliError::msg(format!(
                    "--path-index {f}: table {table} has no path index; add one with `{}`, or drop --path-index",
                    create(f)
                )));
            }
            (Some(f), None) => layout.path_index = Some(f),
            (None, None) if has_index => {
                layout.unwritable = Some(format!(
                    "table {table} has the path index {} but no record of its depth (created by another program or an older dynatree): pass --path-index DEPTH, the depth it was created with, so that writes keep the index",
                    dynatree::storage::PATH_INDEX
                ));
            }
            (None, None) => {}
        }
        Ok(layout)
    }
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
    /// The tree over `table`, with the table's layout.
    pub tree: Tree,
    /// What DescribeTable said when the command started; `None` when the table does not exist
    /// (only for a command that creates it, see [`TableNeed`]).
    pub description: Option<TableDescription>,
    /// How writes must look, from the table and the flags.
    pub layout: TableLayout,
}

impl Ctx {
    /// Loads the AWS configuration ([`crate::aws::load`]: endpoint, profile, region and
    /// credentials checked), describes the table and reads its settings row, and builds the
    /// tree with the table's layout ([`TableLayout::learn`]). A table that is missing (unless
    /// `need` allows it) or whose key schema is not a tree's is refused before any other
    /// request. The tree does not check the table again (these are its checks).
    ///
    /// # Errors
    ///
    /// Exit status 1, one line: the setup errors of [`crate::aws::load`], a missing table
    /// (naming where it was looked for, and the commands that create it), a table of another
    /// key schema, a `--path-index` the table disagrees with, the failure of DescribeTable or
    /// of the settings read.
    pub async fn connect(global: Global, table_name: String, need: TableNeed) -> CliResult<Self> {
        let config = crate::aws::load(&global).await?;
        let region = config.region().map(ToString::to_string).unwrap_or_default();
        let client = aws_sdk_dynamodb::Client::new(&config);
        let table =
            DynamoDbTable::new(client, table_name.clone()).with_streams(streams_client(&config));
        let on_table = |e: dynatree::Error| CliError::from(e).on_table(&table_name);
        // The command line's own reads go through the retry a tree's reads do (a throttled or
        // transiently failed DescribeTable is resent).
        let description = RetryPolicy::default()
            .retry_read(|| table.describe_table())
            .await
            .map_err(on_table)?;
        let mut ctx = Self {
            tree: builder(
                &global,
                table.clone(),
                &TableLayout {
                    path_index: global.path_index,
                    ..TableLayout::default()
                },
            )
            .build()?,
            global,
            table_name: table_name.clone(),
            region,
            table,
            description,
            layout: TableLayout::default(),
        };
        let settings = match &ctx.description {
            None if need == TableNeed::Existing => return Err(ctx.no_table()),
            Some(d) if !d.has_tree_schema() => return Err(ctx.not_a_tree(d)),
            // The settings row: the indexes' and the link index's (a table without any has
            // none).
            Some(_) => RetryPolicy::default()
                .retry_read(|| TableSettings::read(&ctx.table, ctx.global.reserved))
                .await
                .map_err(on_table)?,
            _ => None,
        };
        ctx.layout = TableLayout::learn(
            &ctx.global,
            &ctx.table_name,
            ctx.description.as_ref(),
            settings.as_ref(),
            need,
        )?;
        ctx.tree = builder(&ctx.global, ctx.table.clone(), &ctx.layout).build()?;
        Ok(ctx)
    }

    /// Refuses a command that writes (or checks) when the layout leaves the path index's depth
    /// unknown.
    ///
    /// # Errors
    ///
    /// Exit status 1, saying to pass `--path-index`.
    pub fn writable(&self) -> CliResult<()> {
        match &self.layout.unwritable {
            Some(why) => Err(CliError::msg(why.clone())),
            None => Ok(()),
        }
    }

    /// Refuses an object or link at `path` when a type that fills a secondary index of the
    /// table lives there (its template matches the end of the path, as under a scope): the
    /// command line cannot compute a type's index values from raw JSON.
    ///
    /// # Errors
    ///
    /// Exit status 1, naming the index and the template.
    pub fn refuse_indexed(&self, path: &Path) -> CliResult<()> {
        self.layout.refuse_indexed(path).map_err(CliError::msg)
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
            (g.reserved != dynatree::storage::DEFAULT_RESERVED).then_some(reserved.as_str()),
        );
        let depth = self.layout.path_index.map(|d| d.to_string());
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

/// The DynamoDB Streams client of `config`. A DynamoDB endpoint set for DynamoDB alone
/// (`AWS_ENDPOINT_URL_DYNAMODB`, DynamoDB Local) serves its stream too, unless
/// `AWS_ENDPOINT_URL_DYNAMODB_STREAMS` says otherwise.
fn streams_client(config: &aws_types::SdkConfig) -> aws_sdk_dynamodbstreams::Client {
    let mut builder = aws_sdk_dynamodbstreams::config::Builder::from(config);
    let own = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if config.endpoint_url().is_none()
        && own("AWS_ENDPOINT_URL_DYNAMODB_STREAMS").is_none()
        && let Some(url) = own("AWS_ENDPOINT_URL_DYNAMODB")
    {
        builder = builder.endpoint_url(url);
    }
    aws_sdk_dynamodbstreams::Client::from_conf(builder.build())
}

/// The tree's builder: the reserved character of the flags, the path index of `path_index`;
/// no check of the table before the first request ([`Ctx::connect`] made it).
fn builder(
    global: &Global,
    table: DynamoDbTable,
    layout: &TableLayout,
) -> TreeBuilder<DynamoDbTable> {
    let mut b = Tree::builder(table)
        .reserved(global.reserved)
        .verify_table(false);
    if let Some(depth) = layout.path_index {
        b = b.path_index(depth);
    }
    if let Some(depth) = layout.link_index {
        b = b.link_index(depth);
    }
    for (template, shards) in &layout.sharded {
        b = b.sharded(template, *shards);
    }
    b
}

/// Whether `template` (`Users/{id}`: literals and `{placeholders}`) matches the last
/// components of `path`: where a typed write of its type stores an object, at the root or
/// under a scope.
pub fn template_matches(template: &str, path: &Path) -> bool {
    let parts: Vec<&str> = template.split('/').collect();
    let Some(start) = path.len().checked_sub(parts.len()) else {
        return false;
    };
    parts
        .iter()
        .zip(&path.components()[start..])
        .all(|(t, c)| (t.starts_with('{') && t.ends_with('}')) || t == c)
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
    let need = match cli.command {
        Command::CreateTable { .. } => TableNeed::Creates,
        Command::Import {
            create_table: true, ..
        } => TableNeed::CreatedIfAbsent,
        _ => TableNeed::Existing,
    };
    let paths = failure::paths_of(&cli.command, cli.global.reserved);
    let ctx = Ctx::connect(cli.global, table_name, need).await?;
    let writes = !matches!(
        cli.command,
        Command::Ls { .. }
            | Command::Tree { .. }
            | Command::Get { .. }
            | Command::Readlink { .. }
            | Command::Find { .. }
            | Command::Du { .. }
            | Command::Pending
            | Command::Export { .. }
            | Command::Watch { .. }
    );
    if writes {
        // Writing commands, and `check` (it would not see the index's gaps).
        ctx.writable()?;
    }
    let doc = match dispatch(&ctx, cli.command).await {
        Ok(doc) => doc,
        Err(e) => {
            return Err(failure::explain(&ctx, &paths, e)
                .await
                .on_table(&ctx.table_name));
        }
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
            link_index,
            sharded,
            billing,
            read_capacity,
            write_capacity,
            dry,
        } => {
            let billing = billing.map(|b| match b {
                crate::args::BillingMode::OnDemand => dynatree::storage::Billing::OnDemand,
                crate::args::BillingMode::Provisioned => dynatree::storage::Billing::Provisioned {
                    read: read_capacity,
                    write: write_capacity,
                },
            });
            let wants = write::TableWants {
                ttl,
                stream,
                indexes: &indexes,
                link_index: link_index.map(std::num::NonZeroUsize::get),
                sharded: &sharded,
            };
            write::create_table(ctx, billing, &wants, dry.dry_run).await
        }
        Command::Pending => write::pending(ctx).await,
        Command::Resume { dry } => write::resume(ctx, dry.dry_run).await,
        Command::Check { scan, split } => check::check(ctx, scan, split).await,
        Command::Repair {
            scan,
            merge,
            part,
            bucket_depth,
            dry,
        } => check::repair(ctx, scan, &merge, part, bucket_depth, dry.dry_run).await,
        Command::Export { path, file, part } => {
            transfer::export(ctx, &path, file.as_deref(), part).await
        }
        Command::Watch {
            path,
            after,
            until_idle,
            idle_ms,
        } => watch::watch(ctx, &path, after.as_deref(), until_idle, idle_ms).await,
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
    use dynatree::storage::Value;

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

    fn global(args: &[&str]) -> Global {
        use clap::Parser;
        let all = ["dynatree"].iter().chain(args).chain(&["ls"]);
        crate::args::Cli::try_parse_from(all).unwrap().global
    }

    fn described(path_index: bool) -> TableDescription {
        TableDescription {
            status: dynatree::storage::TableStatus::Active,
            hash_key: ("Key".into(), "S".into()),
            range_key: Some(("Child".into(), "S".into())),
            billing: dynatree::storage::Billing::OnDemand,
            indexes: if path_index {
                vec![(
                    dynatree::storage::PATH_INDEX.to_owned(),
                    dynatree::storage::TableStatus::Active,
                )]
            } else {
                vec![]
            },
        }
    }

    #[test]
    fn sharded_directories_are_learned_from_the_settings() {
        let mut recorded = TableSettings::new('¦');
        recorded.sharded.insert("Accounts/*/Links".to_owned(), 4);
        let l = TableLayout::learn(
            &global(&[]),
            "T",
            Some(&described(false)),
            Some(&recorded),
            TableNeed::Existing,
        )
        .unwrap();
        assert_eq!(l.sharded, [("Accounts/*/Links".to_owned(), 4)]);
        let none = TableLayout::learn(
            &global(&[]),
            "T",
            Some(&described(false)),
            Some(&TableSettings::new('¦')),
            TableNeed::Existing,
        )
        .unwrap();
        assert!(none.sharded.is_empty());
    }

    #[test]
    fn layouts_learned_from_the_table() {
        let mut recorded = TableSettings::new('¦');
        recorded.path_index = Some(2);
        recorded.indexes.push(dynatree::storage::IndexSettings::new(
            "by_email",
            false,
            ["Users/{id}"],
        ));
        let learn = |flags: &[&str], d: Option<&TableDescription>, s, need| {
            TableLayout::learn(&global(flags), "T", d, s, need)
        };
        let indexed = described(true);
        let plain = described(false);
        use TableNeed::{Creates, Existing};
        // The depth comes from the settings; a flag may repeat it, not contradict it.
        let l = learn(&[], Some(&indexed), Some(&recorded), Existing).unwrap();
        assert_eq!(l.path_index, Some(2));
        assert_eq!(
            l.index_templates,
            [("by_email".to_owned(), "Users/{id}".to_owned())]
        );
        assert_eq!(l.unwritable, None);
        let same = learn(
            &["--path-index", "2"],
            Some(&indexed),
            Some(&recorded),
            Existing,
        );
        assert_eq!(same.unwrap().path_index, Some(2));
        let e = learn(
            &["--path-index", "3"],
            Some(&indexed),
            Some(&recorded),
            Existing,
        )
        .unwrap_err();
        assert!(
            e.message()
                .starts_with("--path-index 3 disagrees with table T: its path index has depth 2"),
            "{e}"
        );
        // The index without a record of its depth: the flag says it, else no writes.
        let l = learn(&[], Some(&indexed), None, Existing).unwrap();
        assert_eq!(l.path_index, None);
        assert!(l.unwritable.unwrap().contains("pass --path-index"));
        let l = learn(&["--path-index", "1"], Some(&indexed), None, Existing).unwrap();
        assert_eq!((l.path_index, l.unwritable), (Some(1), None));
        // A flag for a table without the index: only create-table adds it.
        let e = learn(&["--path-index", "1"], Some(&plain), None, Existing).unwrap_err();
        assert!(e.message().contains("has no path index"), "{e}");
        let l = learn(&["--path-index", "1"], Some(&plain), None, Creates).unwrap();
        assert_eq!(l.path_index, Some(1));
        // A table to be created: the flags.
        let l = learn(&["--path-index", "4"], None, None, Creates).unwrap();
        assert_eq!(l.path_index, Some(4));
        assert_eq!(
            learn(&[], Some(&plain), None, Existing).unwrap(),
            TableLayout::default()
        );
    }

    #[test]
    fn templates_match_the_end_of_a_path() {
        let p = |s: &str| parse_path(s, '¦').unwrap();
        assert!(template_matches("Users/{id}", &p("/Users/1")));
        assert!(template_matches("Users/{id}", &p("/Tenants/t1/Users/1")));
        assert!(!template_matches("Users/{id}", &p("/Users/1/x")));
        assert!(!template_matches("Users/{id}", &p("/Groups/1")));
        assert!(!template_matches("Users/{id}/Posts/{p}", &p("/Posts/1")));
        let mut layout = TableLayout::default();
        layout
            .index_templates
            .push(("by_email".into(), "Users/{id}".into()));
        let why = layout.refuse_indexed(&p("/Users/1")).unwrap_err();
        assert!(
            why.contains("by_email") && why.contains("Users/{id}"),
            "{why}"
        );
        assert!(layout.refuse_indexed(&p("/Users")).is_ok());
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
