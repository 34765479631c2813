//! The writing commands: `put`, `rm`, `ln`, `create-table`, and the recorded
//! operations (`pending`, `resume`). Each takes `--dry-run`, which reads what it needs and
//! says what it would write.

use std::io::Read;

use dynatree::storage::{Storage, TableDescription};
use dynatree::transfer::Record;
use dynatree::{Path, storage::Billing};
use futures::StreamExt;
use serde_json::{Value, json};

use super::read::{has_children, object_kind, plural};
use super::{Ctx, interruptible};
use crate::error::{CliError, CliResult};
use crate::output::{Align, Doc, Table};
use crate::progress::Progress;

/// A dry run's result: the record says `"dry_run": true`, the text starts with "would".
fn would(mut record: Value, human: String) -> Doc {
    record["dry_run"] = json!(true);
    Doc::one(record, human + "\n")
}

/// Reads the object of `put`: the argument, or stdin when absent or `-`.
fn read_object(json_arg: Option<String>) -> CliResult<serde_json::Map<String, Value>> {
    let text = match json_arg {
        Some(t) if t != "-" => t,
        _ => {
            let mut t = String::new();
            std::io::stdin()
                .read_to_string(&mut t)
                .map_err(|e| CliError::msg(format!("reading stdin: {e}")))?;
            t
        }
    };
    parse_object(&text)
}

/// Parses the JSON of `put`, which must be an object.
pub fn parse_object(text: &str) -> CliResult<serde_json::Map<String, Value>> {
    match serde_json::from_str::<Value>(text)? {
        Value::Object(m) => Ok(m),
        other => Err(CliError::msg(format!(
            "invalid JSON: an object (`{{...}}`) is needed, not {}",
            match other {
                Value::Array(_) => "an array",
                Value::String(_) => "a string",
                Value::Number(_) => "a number",
                Value::Bool(_) => "a boolean",
                _ => "null",
            }
        ))),
    }
}

/// `put PATH [JSON]`.
pub async fn put(ctx: &Ctx, path: &str, json_arg: Option<String>, dry_run: bool) -> CliResult<Doc> {
    let path = ctx.path(path)?;
    ctx.refuse_indexed(&path)?;
    let object = read_object(json_arg)?;
    let record = json!({ "action": "put", "path": path.escaped() });
    if dry_run {
        // Everything but the write: the path, the attribute names and values and the size of
        // the row as it would be written, all checked client-side as the real put checks them.
        let item = dynatree::storage::Item::from_serialize(&object)?;
        ctx.tree.check_record(&Record::Object {
            path: path.clone(),
            item,
            expires: None,
        })?;
        return Ok(would(
            record,
            format!(
                "would put {} ({} {})",
                path.escaped(),
                object.len(),
                plural(object.len(), "attribute", "attributes")
            ),
        ));
    }
    ctx.tree.put(path, &object).await?;
    Ok(Doc::one(record, ""))
}

/// `ln [-f] TARGET PATH`: refuses a PATH that holds an object or a link unless `force`.
///
/// The check is a read before the write (the library has no create-only link): something
/// another writer stores at PATH between the two is replaced, as `--help` says.
pub async fn ln(ctx: &Ctx, target: &str, path: &str, force: bool, dry_run: bool) -> CliResult<Doc> {
    let target = ctx.path(target)?;
    let path = ctx.path(path)?;
    ctx.refuse_indexed(&path)?;
    ctx.tree.check_record(&Record::Link {
        path: path.clone(),
        target: target.clone(),
    })?;
    let replaced = object_kind(ctx, &path).await?;
    if let Some(kind) = replaced
        && !force
    {
        return Err(CliError::msg(format!(
            "already exists: {} ({}); use -f to replace it",
            path.escaped(),
            match kind {
                super::Kind::Link => "a link",
                _ => "an object",
            }
        )));
    }
    let mut record =
        json!({ "action": "link", "path": path.escaped(), "target": target.escaped() });
    if let Some(kind) = replaced {
        record["replaced"] = json!(kind.as_str());
    }
    if dry_run {
        return Ok(would(
            record,
            format!("would link {} -> {}", path.escaped(), target.escaped()),
        ));
    }
    ctx.tree.put_link(path, target).await?;
    Ok(Doc::one(record, ""))
}

/// Counts the objects and links at and below `path` (for dry runs), with a spinner.
async fn count_subtree(ctx: &Ctx, path: &Path, own: bool) -> CliResult<u64> {
    let progress = Progress::spinner(ctx.global.quiet, "counting", "objects");
    let mut n = u64::from(own);
    let mut stream = ctx.tree.descendants(path.clone()).items();
    while let Some(d) = stream.next().await {
        d?;
        n += 1;
        progress.inc(1);
    }
    Ok(n)
}

fn nothing_at(path: &Path) -> CliError {
    CliError::not_found(format!("not found: nothing at {}", path.escaped()))
}

/// `rm [-r] PATH`.
pub async fn rm(ctx: &Ctx, path: &str, recursive: bool, dry_run: bool) -> CliResult<Doc> {
    let path = ctx.path(path)?;
    if path.is_root() {
        return Err(CliError::msg("invalid path: the root cannot be removed"));
    }
    let kind = object_kind(ctx, &path).await?;
    if !recursive {
        let Some(kind) = kind else {
            return Err(if has_children(ctx, &path).await? {
                CliError::msg(format!(
                    "{} has children and no object: use `rm -r` to delete the subtree",
                    path.escaped()
                ))
            } else {
                nothing_at(&path)
            });
        };
        let record = json!({ "action": "delete", "path": path.escaped(), "objects": 1 });
        if dry_run {
            super::subtree::check_not_held(ctx, &path, false).await?;
            return Ok(would(
                record,
                format!("would delete {} ({})", path.escaped(), kind.as_str()),
            ));
        }
        ctx.tree.delete(path).await?;
        return Ok(Doc::one(record, ""));
    }
    if kind.is_none() && !has_children(ctx, &path).await? {
        return Err(nothing_at(&path));
    }
    if dry_run {
        super::subtree::check_not_held(ctx, &path, true).await?;
        let n = count_subtree(ctx, &path, kind.is_some()).await?;
        return Ok(would(
            json!({ "action": "delete", "path": path.escaped(), "objects": n }),
            format!(
                "would delete {n} {} at and under {}",
                plural(n as usize, "object", "objects"),
                path.escaped()
            ),
        ));
    }
    let progress = Progress::spinner(ctx.global.quiet, "deleting", "");
    let resume = ctx.command_line("resume");
    let shown = path.escaped();
    let tree = ctx.tree.on_progress(progress.observer());
    let n = interruptible(
        async { Ok(tree.delete_subtree(path.clone()).await?) },
        || {
            format!(
                "interrupted: the deletion of {shown} is recorded and may be part-way; run `{resume}` to finish it"
            )
        },
    )
    .await?;
    progress.finish();
    Ok(Doc::one(
        json!({ "action": "delete", "path": path.escaped(), "objects": n }),
        format!(
            "deleted {n} {} at and under {}\n",
            plural(n, "object", "objects"),
            path.escaped()
        ),
    ))
}

/// How a billing mode reads in output: `on-demand`, `provisioned 5/5`.
fn billing_text(billing: Billing) -> String {
    match billing {
        Billing::Provisioned { read, write } => format!("provisioned {read}/{write}"),
        _ => "on-demand".to_owned(),
    }
}

/// `create-table`: creates the table, or, when it exists (with a tree's key schema, checked
/// on connecting), says so and adds what it lacks.
pub async fn create_table(
    ctx: &Ctx,
    billing: Option<Billing>,
    wants: &TableWants<'_>,
    dry_run: bool,
) -> CliResult<Doc> {
    let TableWants {
        ttl,
        stream,
        indexes,
        link_index,
        sharded,
    } = *wants;
    if let Some(existing) = &ctx.description {
        return update_table(ctx, existing, billing, wants, dry_run).await;
    }
    // What the real run's tree would refuse, a dry run refuses too (nothing is sent).
    sharded_layout(ctx, sharded)?;
    let billing = billing.unwrap_or(Billing::OnDemand);
    let mut features = vec![billing_text(billing)];
    if let Some(d) = ctx.layout.path_index {
        features.push(format!("path index of depth {d}"));
    }
    if let Some(d) = link_index {
        features.push(format!("link index of depth {d}"));
    }
    for (t, n) in sharded {
        features.push(format!("sharded directory {t} in {n} shards"));
    }
    if ttl {
        features.push("time to live".to_owned());
    }
    if stream {
        features.push("stream".to_owned());
    }
    for (name, range) in indexes {
        features.push(format!(
            "index {name}{}",
            if *range { " with a range key" } else { "" }
        ));
    }
    let record = json!({
        "action": "create-table",
        "table": ctx.table_name,
        "created": true,
        "billing": features[0],
        "path_index": ctx.layout.path_index,
        "link_index": link_index,
        "sharded": sharded.iter().map(|(t, n)| json!({ "template": t, "shards": n })).collect::<Vec<_>>(),
        "ttl": ttl,
        "stream": stream,
        "indexes": indexes.iter().map(|(n, r)| json!({ "name": n, "range": r })).collect::<Vec<_>>(),
    });
    let what = format!("table {} ({})", ctx.table_name, features.join(", "));
    if dry_run {
        return Ok(would(record, format!("would create {what}")));
    }
    let progress = Progress::spinner(ctx.global.quiet, "creating the table", "");
    ensure_table(ctx, billing, wants).await?;
    progress.finish();
    Ok(Doc::one(record, format!("created {what}\n")))
}

/// What `create-table` is asked to create or turn on, besides the billing mode and the path
/// index.
#[derive(Debug, Clone, Copy, Default)]
pub struct TableWants<'a> {
    /// `--ttl`.
    pub ttl: bool,
    /// `--stream`.
    pub stream: bool,
    /// `--index`: (name, has a range key).
    pub indexes: &'a [(String, bool)],
    /// `--link-index DEPTH`.
    pub link_index: Option<usize>,
    /// `--sharded TEMPLATE=N`: (template, shards).
    pub sharded: &'a [(String, u32)],
}

/// A sharded directory's template as the table's settings record it: `*` for each `{field}`.
fn recorded_template(t: &str) -> String {
    t.trim_matches('/')
        .split('/')
        .map(|c| {
            if c.len() > 2 && c.starts_with('{') && c.ends_with('}') {
                "*"
            } else {
                c
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The table's layout with the sharded directories `wanted` added to those it records,
/// checked as the tree will check them (templates, counts, overlaps) without sending anything.
fn sharded_layout(ctx: &Ctx, wanted: &[(String, u32)]) -> CliResult<super::TableLayout> {
    let mut layout = ctx.layout.clone();
    for (t, n) in wanted {
        let w = (recorded_template(t), *n);
        if !layout.sharded.contains(&w) {
            layout.sharded.push(w);
        }
    }
    super::builder(&ctx.global, ctx.table.clone(), &layout).build()?;
    Ok(layout)
}

/// The library's `create_table` with the command's options: creates the table, or adds the
/// indexes an existing one lacks; turns on time to live and the stream when asked; records the
/// link index.
pub async fn ensure_table(ctx: &Ctx, billing: Billing, wants: &TableWants<'_>) -> CliResult<()> {
    let TableWants {
        ttl,
        stream,
        indexes,
        link_index,
        sharded,
    } = *wants;
    let layout = super::TableLayout {
        link_index: link_index.or(ctx.layout.link_index),
        ..sharded_layout(ctx, sharded)?
    };
    let mut builder = super::builder(&ctx.global, ctx.table.clone(), &layout)
        .billing(billing)
        .time_to_live(ttl);
    for (name, range) in indexes {
        // Names live as long as the program (the library takes them as `&'static str`,
        // as the derive writes them).
        let name: &'static str = Box::leak(name.clone().into_boxed_str());
        builder = builder.index(dynatree::keys::IndexDef::new(name, *range));
    }
    let tree = builder.build()?;
    tree.create_table().await?;
    if stream {
        ctx.table.enable_stream().await?;
    }
    Ok(())
}

/// `create-table` on a table that exists: refuses another billing mode (create-table does not
/// change it), adds the indexes it lacks, turns on time to live and the stream when asked,
/// and says which of these it did.
async fn update_table(
    ctx: &Ctx,
    existing: &TableDescription,
    billing: Option<Billing>,
    wants: &TableWants<'_>,
    dry_run: bool,
) -> CliResult<Doc> {
    let TableWants {
        ttl,
        stream,
        indexes,
        link_index,
        sharded,
    } = *wants;
    let have = billing_text(existing.billing);
    if let Some(want) = billing
        && want != existing.billing
    {
        let how = match want {
            Billing::Provisioned { read, write } => format!(
                "--billing-mode PROVISIONED --provisioned-throughput ReadCapacityUnits={read},WriteCapacityUnits={write}"
            ),
            _ => "--billing-mode PAY_PER_REQUEST".to_owned(),
        };
        return Err(CliError::msg(format!(
            "table {} exists already with {have} billing, not {}: create-table does not change billing; change it with `aws dynamodb update-table --table-name {} {how}`",
            ctx.table_name,
            billing_text(want),
            super::shell_quote(&ctx.table_name),
        )));
    }
    let mut wanted: Vec<String> = indexes.iter().map(|(n, _)| n.clone()).collect();
    if ctx.layout.path_index.is_some() {
        wanted.push(dynatree::storage::PATH_INDEX.to_owned());
    }
    let added: Vec<String> = wanted
        .into_iter()
        .filter(|w| !existing.indexes.iter().any(|(n, _)| n == w))
        .collect();
    let mut changes: Vec<String> = added.iter().map(|n| format!("index {n}")).collect();
    if let Some(d) = link_index {
        let recorded = dynatree::storage::TableSettings::read(&ctx.table, ctx.global.reserved)
            .await?
            .and_then(|s| s.link_index);
        match recorded {
            Some(r) if r != d => {
                return Err(CliError::msg(format!(
                    "--link-index {d}: table {} keeps a link index of depth {r}; its depth cannot change",
                    ctx.table_name
                )));
            }
            Some(_) => {}
            None => changes.push(format!(
                "link index of depth {d} (links written before have no entries: run `check`, then `repair`)"
            )),
        }
    }
    for (t, n) in sharded {
        let normal = recorded_template(t);
        match ctx.layout.sharded.iter().find(|(r, _)| *r == normal) {
            Some((_, r)) if r != n => {
                return Err(CliError::msg(format!(
                    "--sharded {t}={n}: table {} shards {normal} {r} ways; the count cannot change",
                    ctx.table_name
                )));
            }
            Some(_) => {}
            None => changes.push(format!(
                "sharded directory {t} in {n} shards (children listed before are outside their shards: run `check`, then `repair`)"
            )),
        }
    }
    // What the real run's tree would refuse, a dry run refuses too (nothing is sent).
    sharded_layout(ctx, sharded)?;
    if ttl {
        changes.push("time to live".to_owned());
    }
    if stream {
        changes.push("stream".to_owned());
    }
    let mut record = json!({
        "action": "create-table",
        "table": ctx.table_name,
        "created": false,
        "billing": have,
        "added_indexes": added,
        "link_index": link_index,
        "sharded": sharded.iter().map(|(t, n)| json!({ "template": t, "shards": n })).collect::<Vec<_>>(),
        "ttl": ttl,
        "stream": stream,
    });
    let exists = format!("table {} exists already ({have})", ctx.table_name);
    if changes.is_empty() {
        if dry_run {
            record["dry_run"] = json!(true);
        }
        return Ok(Doc::one(record, format!("{exists}; nothing to change\n")));
    }
    let what = changes.join(", ");
    if dry_run {
        return Ok(would(
            record,
            format!("{exists}; would add or turn on: {what}"),
        ));
    }
    let progress = Progress::spinner(ctx.global.quiet, "updating the table", "");
    ensure_table(ctx, existing.billing, wants).await?;
    progress.finish();
    Ok(Doc::one(
        record,
        format!("{exists}; added or turned on: {what}\n"),
    ))
}

fn intent_records(intents: &[dynatree::ops::Intent]) -> (Vec<Value>, String) {
    let mut t = Table::new(&[
        ("ID", Align::Left),
        ("OP", Align::Left),
        ("PHASE", Align::Left),
        ("FROM", Align::Left),
        ("TO", Align::Left),
    ]);
    let records = intents
        .iter()
        .map(|i| {
            t.row([
                i.id.clone(),
                i.op.to_string(),
                i.phase.to_string(),
                i.from.escaped(),
                i.to.escaped(),
            ]);
            json!({
                "id": i.id,
                "op": i.op,
                "phase": i.phase,
                "from": i.from.escaped(),
                "to": i.to.escaped(),
            })
        })
        .collect();
    (records, t.render())
}

/// `pending`.
pub async fn pending(ctx: &Ctx) -> CliResult<Doc> {
    let intents = ctx.tree.pending().await?;
    let (records, human) = intent_records(&intents);
    Ok(Doc::many(records, human))
}

/// `resume`.
pub async fn resume(ctx: &Ctx, dry_run: bool) -> CliResult<Doc> {
    let intents = ctx.tree.pending().await?;
    if dry_run {
        let (records, table) = intent_records(&intents);
        let n = intents.len();
        let human = format!(
            "would resume {n} {}\n{table}",
            plural(n, "operation", "operations")
        );
        return Ok(Doc::many(
            records
                .into_iter()
                .map(|mut r| {
                    r["dry_run"] = json!(true);
                    r
                })
                .collect(),
            human,
        ));
    }
    let progress = Progress::spinner(ctx.global.quiet, "resuming", "");
    let again = ctx.command_line("resume");
    let tree = ctx.tree.on_progress(progress.observer());
    let reports = interruptible(async { Ok(tree.resume().await?) }, || {
        format!("interrupted: operations may be left part-way; run `{again}` to finish them")
    })
    .await?;
    progress.finish();
    let mut human = format!(
        "finished {} {}\n",
        reports.len(),
        plural(reports.len(), "operation", "operations")
    );
    let records = reports
        .iter()
        .map(|r| {
            human.push_str(&format!(
                "{}: {} {}, {} {}\n",
                r.id,
                r.objects,
                plural(r.objects, "object", "objects"),
                r.nodes,
                plural(r.nodes, "node", "nodes")
            ));
            json!({ "id": r.id, "objects": r.objects, "nodes": r.nodes })
        })
        .collect();
    Ok(Doc::many(records, human))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Format;

    #[test]
    fn put_needs_an_object() {
        assert_eq!(parse_object(r#"{"a": 1}"#).unwrap().len(), 1);
        let e = parse_object("[1]").unwrap_err();
        assert_eq!(e.code(), 1);
        assert!(e.message().contains("not an array"), "{e}");
        assert!(
            parse_object("{")
                .unwrap_err()
                .message()
                .starts_with("invalid JSON")
        );
    }

    #[test]
    fn dry_runs_are_marked() {
        let doc = would(json!({"action": "put"}), "would put /a".into());
        assert_eq!(doc.records()[0]["dry_run"], true);
        assert_eq!(doc.render(Format::Table), "would put /a\n");
    }
}
