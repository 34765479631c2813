//! `export` and `import`: JSON Lines of [`dynatree::transfer::Record`]s.
//!
//! An import from a file keeps a checkpoint beside it (`F.dynatree-import`: how many records
//! of the file are written) after each batch; `import --file F --resume` skips them. A
//! finished import removes the checkpoint.

use std::io::Write;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dynatree::transfer::Record;
use futures::{Stream, StreamExt};
use serde_json::json;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};

use super::read::{must_exist, plural};
use super::{Ctx, interruptible, shell_quote};
use crate::args::Format;
use crate::error::{CliError, CliResult};
use crate::output::Doc;
use crate::progress::Progress;

/// How `export` frames its records on stdout: JSON Lines (the format `import` reads), or with
/// `-o json` one JSON array (one record per line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Lines,
    Array,
}

impl Framing {
    /// The text of the `n`th record (from 0), `line` its JSON.
    fn record(self, n: u64, line: &str) -> String {
        match (self, n) {
            (Framing::Lines, _) => format!("{line}\n"),
            (Framing::Array, 0) => format!("[\n{line}"),
            (Framing::Array, _) => format!(",\n{line}"),
        }
    }

    /// What ends the output after `n` records.
    fn end(self, n: u64) -> &'static str {
        match (self, n) {
            (Framing::Lines, _) => "",
            (Framing::Array, 0) => "[]\n",
            (Framing::Array, _) => "\n]\n",
        }
    }
}

/// `export [PATH] [--file F]`: JSONL on stdout (`-o json`: one JSON array), or JSONL into `F`
/// with a summary on stdout.
pub async fn export(
    ctx: &Ctx,
    path: &str,
    file: Option<&FsPath>,
    part: Option<(u32, u32)>,
) -> CliResult<Doc> {
    let root = ctx.path(path)?;
    // Before the file is created: a missing path writes nothing.
    must_exist(ctx, &root).await?;
    let framing = match (file, ctx.global.output) {
        (None, Format::Json) => Framing::Array,
        _ => Framing::Lines,
    };
    let progress = Progress::spinner(ctx.global.quiet, "exporting", "records");
    let mut out: Box<dyn Write + Send> = match file {
        Some(f) => Box::new(std::io::BufWriter::new(std::fs::File::create(f).map_err(
            |e| CliError::msg(format!("cannot create {}: {e}", f.display())),
        )?)),
        None => Box::new(std::io::BufWriter::new(std::io::stdout())),
    };
    let mut records = match part {
        None => ctx.tree.export(root.clone()),
        Some((i, n)) => export_part(ctx, &root, i, n).await?,
    };
    let mut n = 0u64;
    let written = interruptible(
        async {
            while let Some(r) = records.next().await {
                let line = r?.to_json_line();
                match out.write_all(framing.record(n, &line).as_bytes()) {
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe && file.is_none() => {
                        return Ok(n);
                    }
                    other => other?,
                }
                n += 1;
                progress.inc(1);
            }
            match out
                .write_all(framing.end(n).as_bytes())
                .and_then(|()| out.flush())
            {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe && file.is_none() => {}
                other => other?,
            }
            Ok(n)
        },
        || "interrupted: the export is incomplete; run it again".to_owned(),
    )
    .await?;
    progress.finish();
    Ok(match file {
        Some(f) => Doc::one(
            json!({ "action": "export", "path": root.escaped(), "file": f.display().to_string(), "records": written }),
            format!(
                "exported {written} {} under {} to {}\n",
                plural(written as usize, "record", "records"),
                root.escaped(),
                f.display()
            ),
        ),
        None => Doc::empty(),
    })
}

/// The records of part `i` of `n` of the export of `root`: `root`'s own record in part 0, then
/// the whole subtree of each child of `root` that [`dynatree::transfer::part_of`] puts in
/// part `i`, in the
/// children's order.
async fn export_part(
    ctx: &Ctx,
    root: &dynatree::Path,
    i: u32,
    n: u32,
) -> CliResult<futures::stream::BoxStream<'static, dynatree::Result<dynatree::transfer::Record>>> {
    use futures::{StreamExt, TryStreamExt};
    let children: Vec<String> = ctx.tree.list(root.clone()).try_collect().await?;
    let own = if i == 0 {
        // The walk yields the root's own record first, if it has one.
        let first = ctx.tree.export(root.clone()).next().await.transpose()?;
        first.filter(|r| r.path() == root)
    } else {
        None
    };
    let tree = ctx.tree.clone();
    let parent = root.clone();
    let subtrees = futures::stream::iter(
        children
            .into_iter()
            .filter(move |c| dynatree::transfer::part_of(c, n) == i)
            .map(move |c| parent.child(c)),
    )
    .map(move |p| match p {
        Ok(p) => tree.export(p),
        Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
    })
    .flatten();
    Ok(futures::stream::iter(own.map(Ok)).chain(subtrees).boxed())
}

/// Where an import of `file` keeps its checkpoint.
pub fn checkpoint_path(file: &FsPath) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".dynatree-import");
    PathBuf::from(name)
}

/// The checkpoint's count, if there is one.
fn read_checkpoint(path: &FsPath) -> CliResult<Option<u64>> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                CliError::msg(format!("the checkpoint {} is damaged: {e}", path.display()))
            })?;
            v["committed"].as_u64().map(Some).ok_or_else(|| {
                CliError::msg(format!(
                    "the checkpoint {} has no `committed` count",
                    path.display()
                ))
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CliError::msg(format!(
            "cannot read {}: {e}",
            path.display()
        ))),
    }
}

/// The records of a JSONL reader, one per line, numbered by the import from 1.
fn records(
    reader: impl AsyncBufRead + Unpin + Send + 'static,
) -> impl Stream<Item = dynatree::Result<Record>> + Send + 'static {
    futures::stream::unfold(reader.lines(), |mut lines| async move {
        match lines.next_line().await {
            Ok(Some(line)) => Some((Record::from_json_line(&line), lines)),
            Ok(None) => None,
            Err(e) => Some((
                Err(
                    dynatree::Error::new(dynatree::ErrorKind::Serialization, "cannot read input")
                        .with_source(e),
                ),
                lines,
            )),
        }
    })
}

async fn open(file: Option<&FsPath>) -> CliResult<Box<dyn AsyncBufRead + Unpin + Send>> {
    Ok(match file {
        Some(f) => {
            Box::new(BufReader::new(tokio::fs::File::open(f).await.map_err(
                |e| CliError::msg(format!("cannot open {}: {e}", f.display())),
            )?))
        }
        None => Box::new(BufReader::new(tokio::io::stdin())),
    })
}

/// Lines of a file (for the progress bar's total).
async fn count_lines(file: &FsPath) -> CliResult<u64> {
    let mut lines = BufReader::new(tokio::fs::File::open(file).await?).lines();
    let mut n = 0;
    while lines.next_line().await?.is_some() {
        n += 1;
    }
    Ok(n)
}

/// `import [--file F] [--resume] [--create-table] [--dry-run]`.
pub async fn import(
    ctx: &Ctx,
    file: Option<&FsPath>,
    resume: bool,
    create_table: bool,
    dry_run: bool,
) -> CliResult<Doc> {
    // Without `--create-table` the table exists: `Ctx::connect` checked it.
    let create = create_table && ctx.description.is_none();
    if dry_run {
        return dry_import(ctx, file, create).await;
    }
    if create {
        let progress = Progress::spinner(ctx.global.quiet, "creating the table", "");
        super::write::ensure_table(
            ctx,
            dynatree::storage::Billing::OnDemand,
            &super::write::TableWants::default(),
        )
        .await?;
        progress.finish();
    }
    let checkpoint = file.map(checkpoint_path);
    let skip = match (&checkpoint, resume) {
        (Some(c), true) => read_checkpoint(c)?.unwrap_or(0),
        _ => 0,
    };
    let progress = match file {
        Some(f) => Progress::bar(
            ctx.global.quiet,
            count_lines(f).await?,
            skip,
            "importing",
            "records",
        ),
        None => Progress::spinner(ctx.global.quiet, "importing", "records"),
    };
    let committed = Arc::new(AtomicU64::new(skip));
    let seen = Arc::clone(&committed);
    let bar = progress.handle();
    let table = ctx.table_name.clone();
    let saved = checkpoint.clone();
    // Records where a type that fills a secondary index lives are refused, as `put` refuses
    // them (the library names the record).
    let layout = ctx.layout.clone();
    let input = records(open(file).await?).map(move |r| {
        r.and_then(|record| match layout.refuse_indexed(record.path()) {
            Ok(()) => Ok(record),
            Err(why) => Err(dynatree::Error::new(
                dynatree::ErrorKind::InvalidArgument,
                why,
            )),
        })
    });
    let mut op = ctx.tree.import(input).skip(skip).on_progress(move |p| {
        seen.store(p.committed(), Ordering::SeqCst);
        bar.set_position(p.committed());
        if let Some(c) = &saved {
            // Best effort: a checkpoint that could not be saved costs a longer resume.
            // Written aside, then renamed over the old one: a kill in between leaves
            // the previous checkpoint whole.
            let mut aside = c.clone().into_os_string();
            aside.push(".tmp");
            let body = json!({ "committed": p.committed(), "table": table }).to_string();
            if std::fs::write(&aside, body).is_ok() {
                let _ = std::fs::rename(&aside, c);
            }
        }
    });
    op = op.batch(1000);
    let resume_line = match file {
        Some(f) => ctx.command_line(&format!(
            "import --file {} --resume",
            shell_quote(&f.display().to_string())
        )),
        None => String::new(),
    };
    let result = interruptible(async { Ok(op.run().await?) }, || {
        let n = committed.load(Ordering::SeqCst);
        match file {
            Some(_) => format!(
                "interrupted: the first {n} records are written (checkpoint saved); run `{resume_line}` to continue"
            ),
            None => format!(
                "interrupted: the first {n} records are written; import the rest, or run the same import again (it is idempotent)"
            ),
        }
    })
    .await;
    progress.finish();
    let done = match result {
        Ok(done) => done,
        Err(e) if e.code() == crate::error::EXIT_INTERRUPTED => return Err(e),
        Err(e) => {
            let n = committed.load(Ordering::SeqCst);
            let hint = if file.is_some() && n > 0 {
                format!(" (the first {n} records are written; fix the input and add --resume)")
            } else {
                String::new()
            };
            return Err(CliError::msg(format!("{}{hint}", e.message())));
        }
    };
    if let Some(c) = &checkpoint {
        let _ = std::fs::remove_file(c);
    }
    Ok(Doc::one(
        json!({
            "action": "import",
            "records": done.records(),
            "objects": done.objects(),
            "links": done.links(),
            "skipped": done.skipped(),
            "batches": done.batches(),
        }),
        format!("{done}\n"),
    ))
}

/// `import --dry-run`: reads every record and checks it as the import would before writing
/// it (path, attribute names and values, item size); writes nothing. `create`: the table
/// would be created first.
async fn dry_import(ctx: &Ctx, file: Option<&FsPath>, create: bool) -> CliResult<Doc> {
    let progress = Progress::spinner(ctx.global.quiet, "reading", "records");
    let mut stream = Box::pin(records(open(file).await?));
    let (mut objects, mut links, mut line) = (0u64, 0u64, 0u64);
    while let Some(r) = stream.next().await {
        line += 1;
        let r = r.map_err(|e| CliError::from(e).context(format!("record {line}")))?;
        ctx.tree
            .check_record(&r)
            .map_err(CliError::from)
            .and_then(|()| ctx.refuse_indexed(r.path()))
            .map_err(|e| e.context(format!("record {line}")))?;
        match r {
            Record::Link { .. } => links += 1,
            _ => objects += 1,
        }
        progress.inc(1);
    }
    progress.finish();
    let n = objects + links;
    let first = if create {
        format!("would create table {} and ", ctx.table_name)
    } else {
        "would ".to_owned()
    };
    Ok(Doc::one(
        json!({ "action": "import", "dry_run": true, "create_table": create, "records": n, "objects": objects, "links": links }),
        format!(
            "{first}import {n} {} ({objects} {}, {links} {})\n",
            plural(n as usize, "record", "records"),
            plural(objects as usize, "object", "objects"),
            plural(links as usize, "link", "links")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_framing() {
        let frame = |framing: Framing, records: &[&str]| {
            let mut out = String::new();
            for (n, r) in records.iter().enumerate() {
                out.push_str(&framing.record(n as u64, r));
            }
            out + framing.end(records.len() as u64)
        };
        assert_eq!(frame(Framing::Lines, &["1", "2"]), "1\n2\n");
        assert_eq!(frame(Framing::Lines, &[]), "");
        let array = frame(Framing::Array, &[r#"{"a":1}"#, r#"{"b":2}"#]);
        assert_eq!(array, "[\n{\"a\":1},\n{\"b\":2}\n]\n");
        let v: serde_json::Value = serde_json::from_str(&array).unwrap();
        assert_eq!(v, json!([{"a": 1}, {"b": 2}]));
        assert_eq!(frame(Framing::Array, &[]), "[]\n");
    }

    #[test]
    fn checkpoint_beside_the_file() {
        assert_eq!(
            checkpoint_path(FsPath::new("/data/x.jsonl")),
            PathBuf::from("/data/x.jsonl.dynatree-import")
        );
    }

    #[tokio::test]
    async fn records_from_lines() {
        let input: &[u8] =
            b"{\"path\":\"/a\",\"item\":{}}\n{\"path\":\"/l\",\"link\":\"/a\"}\nnope\n";
        let got: Vec<_> = records(input).collect().await;
        assert_eq!(got.len(), 3);
        assert!(matches!(got[0], Ok(Record::Object { .. })));
        assert!(matches!(got[1], Ok(Record::Link { .. })));
        assert!(got[2].is_err());
    }

    #[test]
    fn checkpoints() {
        let dir = tempfile::tempdir().unwrap();
        let c = dir.path().join("c");
        assert_eq!(read_checkpoint(&c).unwrap(), None);
        std::fs::write(&c, r#"{"committed": 2000, "table": "t"}"#).unwrap();
        assert_eq!(read_checkpoint(&c).unwrap(), Some(2000));
        std::fs::write(&c, "garbage").unwrap();
        assert_eq!(read_checkpoint(&c).unwrap_err().code(), 1);
    }
}
