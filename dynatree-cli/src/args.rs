//! The command line's grammar (clap derive): global flags and one variant per command.

use clap::{Args, Parser, Subcommand, ValueEnum};

/// What `--help` prints after the commands: the exit statuses scripts can rely on.
pub const AFTER_HELP: &str = "\
Paths are written /Accounts/123456/Links/xyzpdq (`/` alone is the root; a trailing `/` is
allowed); inside a component, %2F stands for a `/` and %25 for a `%`.

Exit status:
  0    success
  1    any failure (bad path, service error, a check that found violations, ...)
  2    usage error (unknown flag, missing argument)
  3    not found (a missing path: get, readlink, ls, tree, du, find, export, rm, mv, cp)
  130  interrupted (Ctrl-C); the message says how to resume";

/// `dynatree`: browse and maintain a dynatree table in DynamoDB.
#[derive(Debug, Parser)]
#[command(
    name = "dynatree",
    version,
    about = "Browse, edit, check and repair dynatree tables in DynamoDB",
    after_help = AFTER_HELP
)]
pub struct Cli {
    /// Flags every command takes.
    #[command(flatten)]
    pub global: Global,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command takes (connection, layout, output).
#[derive(Debug, Clone, Args)]
pub struct Global {
    /// The DynamoDB table holding the tree.
    #[arg(long, env = "DYNATREE_TABLE", global = true)]
    pub table: Option<String>,
    /// Send requests to this endpoint (DynamoDB Local: http://localhost:8000).
    #[arg(long, value_name = "URL", global = true)]
    pub endpoint_url: Option<String>,
    /// The AWS region (default: from the standard AWS configuration).
    #[arg(long, global = true)]
    pub region: Option<String>,
    /// The AWS profile of the shared configuration files.
    #[arg(long, global = true)]
    pub profile: Option<String>,
    /// The tree's reserved character (the Go library's default too).
    #[arg(long, default_value_t = dynatree::storage::DEFAULT_RESERVED, global = true)]
    pub reserved: char,
    /// The depth of the tree's path index, for `create-table` (which creates the index and
    /// records its depth in the table) and for tables that do not record it (then writes and
    /// checks need it). Other commands take the depth from the table; a different one is an
    /// error.
    #[arg(long, value_name = "DEPTH", env = "DYNATREE_PATH_INDEX", global = true)]
    pub path_index: Option<usize>,
    /// Output format: human tables, one JSON document, or one JSON value per line.
    #[arg(short, long, value_enum, default_value_t = Format::Table, global = true)]
    pub output: Format,
    /// No progress bar and no summary lines on stderr.
    #[arg(short, long, global = true)]
    pub quiet: bool,
}

/// The output formats of `-o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns for people.
    Table,
    /// One JSON document.
    Json,
    /// One JSON value per line.
    Jsonl,
}

/// `--dry-run`, taken by every command that writes.
#[derive(Debug, Clone, Copy, Args)]
pub struct DryRun {
    /// Print what would be done, write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// What `mv` and `cp` do about links into the subtree (`--links`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Links {
    /// Point them at the new place.
    Rewrite,
    /// Leave them, and list them.
    Report,
    /// Leave them.
    Ignore,
}

impl Links {
    /// The library's policy.
    pub fn policy(self) -> dynatree::ops::LinkPolicy {
        match self {
            Links::Rewrite => dynatree::ops::LinkPolicy::Rewrite,
            Links::Report => dynatree::ops::LinkPolicy::Report,
            Links::Ignore => dynatree::ops::LinkPolicy::Ignore,
        }
    }

    /// Its name on the command line and in output.
    pub fn as_str(self) -> &'static str {
        match self {
            Links::Rewrite => "rewrite",
            Links::Report => "report",
            Links::Ignore => "ignore",
        }
    }
}

/// The kinds `find --type` selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FindType {
    /// Objects (not links).
    #[value(name = "o")]
    Object,
    /// Links.
    #[value(name = "l")]
    Link,
}

/// Billing modes of `create-table`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BillingMode {
    /// Pay per request.
    OnDemand,
    /// Provisioned read and write capacity (`--read-capacity`, `--write-capacity`).
    Provisioned,
}

/// Options of `check` and `repair`'s scan.
#[derive(Debug, Clone, Copy, Args)]
pub struct ScanOpts {
    /// Parallel Scan segments.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub segments: u32,
    /// A budget of read capacity units per second (default: as fast as the table allows).
    #[arg(long, value_name = "R")]
    pub read_units_per_second: Option<f64>,
}

/// Options of a check split across workers (`check --part`, `--resume`, `--merge`).
#[derive(Debug, Clone, Args)]
pub struct SplitOpts {
    /// Scan only the segments `A..B` (of `--segments`) and save what they hold to `--save`,
    /// for a later `--merge`.
    #[arg(long, value_name = "A..B", value_parser = parse_range, requires = "save",
          conflicts_with_all = ["resume", "merge"])]
    pub part: Option<std::ops::Range<u32>>,
    /// Go on with the unfinished part saved in this file (saved back to it, or to `--save`).
    #[arg(long, value_name = "FILE", conflicts_with = "merge")]
    pub resume: Option<std::path::PathBuf>,
    /// Where a part is saved.
    #[arg(long, value_name = "FILE", conflicts_with = "merge")]
    pub save: Option<std::path::PathBuf>,
    /// Stop scanning after this many seconds and save the part unfinished (resume it later).
    #[arg(long, value_name = "SECONDS", conflicts_with = "merge")]
    pub time_limit: Option<u64>,
    /// Report on the check whose parts were saved in these files (every segment in one part).
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub merge: Vec<std::path::PathBuf>,
    /// With `--merge`: judge only bucket I of N (from 0), the paths under the top-level names
    /// in that part (as `repair --part` and `export --part` split them), keeping only their
    /// facts in memory, so that N workers share a merge too large for one. Each violation is
    /// in exactly one bucket; `repair --merge FILE... --part I/N` repairs the same bucket.
    #[arg(long, value_name = "I/N", value_parser = parse_share, requires = "merge")]
    pub bucket: Option<(u32, u32)>,
    /// With `--bucket`: the buckets split the paths by their first K components (default 1,
    /// the top-level name); a table under a few top-level names (`/Accounts/ID/...`) splits
    /// evenly with 2.
    #[arg(long, value_name = "K", requires = "bucket",
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub bucket_depth: Option<u32>,
}

/// `I/N`: part I (from 0) of N.
fn parse_share(s: &str) -> Result<(u32, u32), String> {
    let (i, n) = s
        .split_once('/')
        .ok_or_else(|| format!("`{s}` is not a part `I/N` (say `0/4`)"))?;
    let num = |x: &str| {
        x.trim()
            .parse::<u32>()
            .map_err(|_| format!("`{x}` in `{s}` is not a number"))
    };
    let (i, n) = (num(i)?, num(n)?);
    if n == 0 || i >= n {
        return Err(format!("part `{s}`: I must be below N, from 0"));
    }
    Ok((i, n))
}

/// `A..B`: a range of Scan segments.
fn parse_range(s: &str) -> Result<std::ops::Range<u32>, String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("`{s}` is not a range of segments `A..B` (say `0..8`)"))?;
    let n = |x: &str| {
        x.trim()
            .parse::<u32>()
            .map_err(|_| format!("`{x}` in `{s}` is not a segment number"))
    };
    let (a, b) = (n(a)?, n(b)?);
    if a >= b {
        return Err(format!("segments `{s}`: the range is empty"));
    }
    Ok(a..b)
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the children of a path (one level).
    Ls {
        /// The directory (default: the root).
        #[arg(default_value = "/")]
        path: String,
        /// Long listing: kind (object, link, dir) and object size in bytes.
        #[arg(short = 'l')]
        long: bool,
    },
    /// Show the subtree under a path, recursively.
    Tree {
        /// Where to start (default: the root).
        #[arg(default_value = "/")]
        path: String,
        /// Levels to descend (1: the children only).
        #[arg(long, short = 'L', value_name = "N")]
        depth: Option<usize>,
    },
    /// Print the object at a path as JSON (links followed).
    Get {
        /// The object's path.
        path: String,
        /// For a link, print the link itself instead of its target's object.
        #[arg(long)]
        no_follow: bool,
    },
    /// Store a JSON object at a path (from the argument, or stdin).
    Put {
        /// The object's path.
        path: String,
        /// The object as JSON; read from stdin when absent or `-`.
        json: Option<String>,
        #[command(flatten)]
        dry: DryRun,
    },
    /// Delete the object at a path (`-r`: and everything under it).
    Rm {
        /// The path to delete.
        path: String,
        /// Delete the whole subtree.
        #[arg(short, long)]
        recursive: bool,
        #[command(flatten)]
        dry: DryRun,
    },
    /// Move a subtree.
    Mv {
        /// The source.
        from: String,
        /// The destination (must not exist).
        to: String,
        /// What to do about the links that point into the subtree, from anywhere in the tree
        /// (the subtree's own links included). `rewrite` (the default) points them at the new
        /// place: a link is a reference, and one left behind dangles (`check` reports it);
        /// finding them costs one Scan of the table, as for `report`, plus one write per link.
        /// `report` leaves them pointing at the old place and lists them; `ignore` skips the
        /// Scan and leaves them.
        #[arg(long, value_enum, value_name = "POLICY", default_value_t = Links::Rewrite)]
        links: Links,
        #[command(flatten)]
        dry: DryRun,
    },
    /// Copy a subtree.
    Cp {
        /// The source.
        from: String,
        /// The destination (must not exist).
        to: String,
        /// What to do about the subtree's own links that point into it. `rewrite` (the
        /// default) points their copies at the same place in the copy, so that the copy is
        /// self-contained like the source (no extra request: each link is written once,
        /// rewritten). `report` copies them as they are (pointing into the source) and lists
        /// them; `ignore` copies them as they are. Links from outside keep pointing at the
        /// source, which stays.
        #[arg(long, value_enum, value_name = "POLICY", default_value_t = Links::Rewrite)]
        links: Links,
        #[command(flatten)]
        dry: DryRun,
    },
    /// Create a link at PATH pointing at TARGET.
    ///
    /// An object or link already at PATH is refused unless `-f` is given. The check is a read
    /// before the write: something stored at PATH by another writer between the two is
    /// replaced.
    Ln {
        /// What the link points at (need not exist).
        target: String,
        /// Where the link is stored.
        path: String,
        /// Replace an object or link already at PATH.
        #[arg(short, long)]
        force: bool,
        #[command(flatten)]
        dry: DryRun,
    },
    /// Print the target of a link.
    Readlink {
        /// The link's path.
        path: String,
    },
    /// Find the objects and links under a path whose name matches.
    Find {
        /// Where to search (default: the root).
        #[arg(default_value = "/")]
        path: String,
        /// A glob the last component must match (`*`, `?`, `[a-z]`).
        #[arg(long, value_name = "GLOB")]
        name: Option<glob::Pattern>,
        /// Only objects (`o`) or only links (`l`).
        #[arg(long = "type", value_enum)]
        kind: Option<FindType>,
        /// Levels to descend (1: the children only).
        #[arg(long, value_name = "N")]
        maxdepth: Option<usize>,
    },
    /// Count the objects and bytes under a path (its own object included).
    Du {
        /// The subtree (default: the whole tree).
        #[arg(default_value = "/")]
        path: String,
    },
    /// Create the table (and wait until it is active).
    ///
    /// With `--path-index DEPTH`, also the path index for descendant queries. On a table that
    /// exists already, adds the indexes it lacks and turns on `--ttl` and `--stream`; a
    /// `--billing` other than the table's is refused (change it with `aws dynamodb
    /// update-table`).
    CreateTable {
        /// Enable DynamoDB's time to live on the expiry attribute.
        #[arg(long)]
        ttl: bool,
        /// Enable the table's stream (new and old images).
        #[arg(long)]
        stream: bool,
        /// A secondary index of your types (`#[dynatree(index(name = ...))]`): `NAME` for a
        /// hash key only, `NAME:range` with a range key. Repeatable.
        #[arg(long = "index", value_name = "NAME[:range]", value_parser = parse_index)]
        indexes: Vec<(String, bool)>,
        /// Keep a link index of this depth (recorded in the table's settings; every dynatree
        /// process on the table then writes it): moves that report or rewrite links find them
        /// with one Query instead of a Scan. On a table with links already, run `check`, then
        /// `repair`, to index them.
        #[arg(long, value_name = "DEPTH")]
        link_index: Option<std::num::NonZeroUsize>,
        /// Spread the listing rows of the children of every directory matching TEMPLATE
        /// (`Accounts/{id}/Links`: names and `{field}`s) over N partitions (recorded in the
        /// table's settings; every dynatree process on the table then lists and writes them
        /// so). The Go library does not list such children. Repeatable.
        #[arg(long = "sharded", value_name = "TEMPLATE=N", value_parser = parse_sharded)]
        sharded: Vec<(String, u32)>,
        /// Billing mode (default: on-demand; an existing table's must match).
        #[arg(long, value_enum)]
        billing: Option<BillingMode>,
        /// Read capacity units (provisioned billing).
        #[arg(long, default_value_t = 5, requires = "billing")]
        read_capacity: u64,
        /// Write capacity units (provisioned billing).
        #[arg(long, default_value_t = 5, requires = "billing")]
        write_capacity: u64,
        #[command(flatten)]
        dry: DryRun,
    },
    /// List the recorded operations (moves, copies, deletions) not finished yet.
    Pending,
    /// Finish every recorded operation left unfinished (after a crash or Ctrl-C).
    Resume {
        #[command(flatten)]
        dry: DryRun,
    },
    /// Scan the whole table and report every integrity violation (exit 1 if any).
    ///
    /// Split across workers: each runs `check --segments N --part A..B --save FILE` (with
    /// `--time-limit`, an unfinished part goes on with `check --resume FILE`), then one runs
    /// `check --merge FILE...` for the report.
    Check {
        #[command(flatten)]
        scan: ScanOpts,
        #[command(flatten)]
        split: SplitOpts,
    },
    /// Check the table, then fix what can be fixed safely (`--merge FILE...`: the check is
    /// that of the parts saved by `check --part`).
    Repair {
        #[command(flatten)]
        scan: ScanOpts,
        /// Repair what the merged check parts found, instead of checking again.
        #[arg(long, value_name = "FILE", num_args = 1..)]
        merge: Vec<std::path::PathBuf>,
        /// Repair only part I of N (from 0) of the violations, so that N workers share them:
        /// those under the top-level names in that part (as `export --part` splits them), and
        /// in part 0 those without a path.
        #[arg(long, value_name = "I/N", value_parser = parse_share)]
        part: Option<(u32, u32)>,
        /// With `--merge` and `--part`: the parts split the paths by their first K components,
        /// as `check --merge ... --bucket I/N --bucket-depth K` does.
        #[arg(long, value_name = "K", requires_all = ["merge", "part"],
              value_parser = clap::value_parser!(u32).range(1..=64))]
        bucket_depth: Option<u32>,
        #[command(flatten)]
        dry: DryRun,
    },
    /// Write the objects and links under a path as JSONL (with `-o json` and no `--file`, as
    /// one JSON array).
    Export {
        /// The subtree (default: the whole tree).
        #[arg(default_value = "/")]
        path: String,
        /// Write to this file instead of stdout.
        #[arg(long, short = 'f', value_name = "F")]
        file: Option<std::path::PathBuf>,
        /// Only part I of N (from 0): the subtrees of the path's children whose names fall in
        /// that part (a stable hash of the name), and the path's own record in part 0. The N
        /// parts hold every record once; import them in any order.
        #[arg(long, value_name = "I/N", value_parser = parse_share)]
        part: Option<(u32, u32)>,
    },
    /// Print the changes of the objects under a path as they happen, from the table's stream
    /// (`create-table --stream`): created, updated, deleted, moved. With `-o jsonl`, one JSON
    /// value per change, each with the cursor to resume after it (`--after`). Runs until
    /// Ctrl-C (or `--until-idle`), then prints the cursor to resume from on stderr.
    Watch {
        /// The subtree (default: the whole tree).
        #[arg(default_value = "/")]
        path: String,
        /// Resume right after this cursor (printed by an earlier `watch`) instead of starting
        /// now.
        #[arg(long, value_name = "CURSOR")]
        after: Option<String>,
        /// Stop once every change the stream holds now was printed.
        #[arg(long)]
        until_idle: bool,
        /// How long to wait between reads of the stream when nothing is new, in milliseconds.
        #[arg(long, value_name = "MS", default_value_t = 500)]
        idle_ms: u64,
    },
    /// Read JSONL written by `export` back into the table.
    Import {
        /// Read from this file instead of stdin.
        #[arg(long, short = 'f', value_name = "F")]
        file: Option<std::path::PathBuf>,
        /// Continue an interrupted import of the same file.
        #[arg(long, requires = "file")]
        resume: bool,
        /// Create the table first if it does not exist (on-demand, with the global
        /// `--path-index`), as `create-table` does; an existing table must be a tree's.
        #[arg(long)]
        create_table: bool,
        #[command(flatten)]
        dry: DryRun,
    },
}

/// `NAME` or `NAME:range` of `create-table --index`.
fn parse_sharded(s: &str) -> Result<(String, u32), String> {
    match s.rsplit_once('=') {
        Some((template, n)) if !template.is_empty() => n
            .parse()
            .map(|n| (template.to_owned(), n))
            .map_err(|_| format!("`{s}`: expected TEMPLATE=N, N a number of shards")),
        _ => Err(format!("`{s}`: expected TEMPLATE=N")),
    }
}

fn parse_index(s: &str) -> Result<(String, bool), String> {
    match s.split_once(':') {
        None if !s.is_empty() => Ok((s.to_owned(), false)),
        Some((name, "range")) if !name.is_empty() => Ok((name.to_owned(), true)),
        _ => Err(format!("`{s}`: expected NAME or NAME:range")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("dynatree").chain(args.iter().copied()))
    }

    #[test]
    fn the_grammar_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_go_anywhere() {
        let cli = parse(&["ls", "-l", "/a", "--table", "t", "-o", "jsonl", "-q"]).unwrap();
        assert_eq!(cli.global.table.as_deref(), Some("t"));
        assert_eq!(cli.global.output, Format::Jsonl);
        assert!(cli.global.quiet);
        assert_eq!(cli.global.reserved, '¦');
        match cli.command {
            Command::Ls { path, long } => {
                assert_eq!(path, "/a");
                assert!(long);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults() {
        let cli = parse(&["--reserved", "|", "tree"]).unwrap();
        assert_eq!(cli.global.reserved, '|');
        assert_eq!(cli.global.output, Format::Table);
        match cli.command {
            Command::Tree { path, depth } => {
                assert_eq!(path, "/");
                assert_eq!(depth, None);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn find_and_scan_options() {
        let cli = parse(&[
            "find",
            "/a",
            "--name",
            "x*",
            "--type",
            "l",
            "--maxdepth",
            "2",
        ])
        .unwrap();
        match cli.command {
            Command::Find {
                path,
                name,
                kind,
                maxdepth,
            } => {
                assert_eq!(path, "/a");
                assert_eq!(name.map(|p| p.to_string()).as_deref(), Some("x*"));
                assert_eq!(kind, Some(FindType::Link));
                assert_eq!(maxdepth, Some(2));
            }
            other => panic!("{other:?}"),
        }
        let cli = parse(&[
            "repair",
            "--segments",
            "8",
            "--read-units-per-second",
            "50",
            "--dry-run",
        ])
        .unwrap();
        match cli.command {
            Command::Repair { scan, dry, .. } => {
                assert_eq!(scan.segments, 8);
                assert_eq!(scan.read_units_per_second, Some(50.0));
                assert!(dry.dry_run);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn usage_errors() {
        use clap::error::ErrorKind;
        assert_eq!(
            parse(&["get"]).unwrap_err().kind(),
            ErrorKind::MissingRequiredArgument
        );
        assert_eq!(
            parse(&["frobnicate"]).unwrap_err().kind(),
            ErrorKind::InvalidSubcommand
        );
        assert_eq!(
            parse(&["ls", "-o", "xml"]).unwrap_err().kind(),
            ErrorKind::InvalidValue
        );
        assert_eq!(
            parse(&["check", "--segments", "0"]).unwrap_err().kind(),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            parse(&["find", "--name", "[a"]).unwrap_err().kind(),
            ErrorKind::ValueValidation
        );
        // `--resume` needs the file it resumes.
        assert_eq!(
            parse(&["import", "--resume"]).unwrap_err().kind(),
            ErrorKind::MissingRequiredArgument
        );
        // Only writing commands take `--dry-run`.
        assert_eq!(
            parse(&["get", "/a", "--dry-run"]).unwrap_err().kind(),
            ErrorKind::UnknownArgument
        );
    }

    #[test]
    fn every_writing_command_takes_dry_run() {
        for args in [
            &["put", "/a", "{}", "--dry-run"][..],
            &["rm", "-r", "/a", "--dry-run"],
            &["mv", "/a", "/b", "--dry-run"],
            &["cp", "/a", "/b", "--dry-run"],
            &["ln", "/a", "/b", "--dry-run"],
            &["create-table", "--dry-run"],
            &["resume", "--dry-run"],
            &["repair", "--dry-run"],
            &["import", "--dry-run"],
            &["import", "--create-table", "--dry-run"],
            &["ln", "-f", "/a", "/b", "--dry-run"],
        ] {
            assert!(parse(args).is_ok(), "{args:?}");
        }
    }

    #[test]
    fn help_documents_exit_statuses() {
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("Exit status"));
        assert!(help.contains("3    not found"));
    }

    #[test]
    fn index_options_parse() {
        assert_eq!(
            super::parse_index("by_email"),
            Ok(("by_email".to_owned(), false))
        );
        assert_eq!(
            super::parse_index("by_created:range"),
            Ok(("by_created".to_owned(), true))
        );
        assert!(super::parse_index("x:hash").is_err());
        assert!(super::parse_index(":range").is_err());
        assert!(super::parse_index("").is_err());
    }
}
