//! `watch`: the changes under a path, printed as they happen, resumable by cursor.

use std::io::Write;
use std::time::Duration;

use dynatree::entity::Unknown;
use dynatree::watch::{Change, Cursor};
use futures::StreamExt;
use serde_json::{Value, json};

use super::{Ctx, interruptible, shell_quote};
use crate::args::Format;
use crate::error::{CliError, CliResult};
use crate::output::Doc;

/// Never stored (its template is no path an application would use): an entity needs one
/// hierarchical variant, and every object is `Object`.
#[derive(dynatree::Hierarchical, serde::Serialize, serde::Deserialize, Debug, Clone)]
#[dynatree(path = "dynatree-cli-watch-matches-nothing/{id}")]
struct Nothing {
    id: String,
}

#[derive(dynatree::Entity, Debug, Clone)]
enum AnyObject {
    Nothing(Nothing),
    #[dynatree(other)]
    Object(Unknown),
}

fn value(v: &AnyObject) -> Value {
    match v {
        AnyObject::Object(u) => u.value::<Value>().unwrap_or(Value::Null),
        AnyObject::Nothing(n) => json!({ "id": n.id }),
    }
}

/// One change as JSON, with the cursor to resume after it.
fn record(change: &Change<AnyObject>, cursor: &Cursor) -> Value {
    let info = change.info();
    let mut v = match change {
        Change::Created {
            path, value: new, ..
        } => {
            json!({ "change": "created", "path": path.escaped(), "value": value(new) })
        }
        Change::Updated { path, old, new, .. } => json!({
            "change": "updated", "path": path.escaped(), "old": value(old), "value": value(new),
        }),
        Change::Deleted { path, old, .. } => {
            json!({ "change": "deleted", "path": path.escaped(), "old": value(old) })
        }
        Change::Moved {
            from, to, value: v, ..
        } => json!({
            "change": "moved", "from": from.escaped(), "path": to.escaped(), "value": value(v),
        }),
        _ => json!({ "change": "unknown", "path": change.path().escaped() }),
    };
    if let Some(map) = v.as_object_mut() {
        map.insert("sequence_number".into(), json!(info.sequence_number));
        if info.propagated {
            map.insert("propagated".into(), json!(true));
        }
        if let Some(tx) = &info.transaction {
            map.insert("transaction".into(), json!(tx));
        }
        map.insert("cursor".into(), json!(cursor.to_string()));
    }
    v
}

/// One change as a line for people.
fn line(change: &Change<AnyObject>) -> String {
    let info = change.info();
    let mut s = match change {
        Change::Created { path, .. } => format!("created  {}", path.escaped()),
        Change::Updated { path, .. } => format!("updated  {}", path.escaped()),
        Change::Deleted { path, .. } => format!("deleted  {}", path.escaped()),
        Change::Moved { from, to, .. } => {
            format!("moved    {} -> {}", from.escaped(), to.escaped())
        }
        _ => format!("changed  {}", change.path().escaped()),
    };
    if info.propagated {
        s.push_str("  (propagated)");
    }
    if let Some(tx) = &info.transaction {
        s.push_str(&format!("  tx={tx}"));
    }
    s.push('\n');
    s
}

/// Prints the changes under `path` from now (or after the cursor `after`), until Ctrl-C or,
/// with `until_idle`, until the stream holds nothing more; the cursor to resume from goes to
/// stderr.
pub async fn watch(
    ctx: &Ctx,
    path: &str,
    after: Option<&str>,
    until_idle: bool,
    idle_ms: u64,
) -> CliResult<Doc> {
    let root = ctx.path(path)?;
    let mut watch = ctx.tree.watch::<AnyObject>(root.clone());
    if let Some(after) = after {
        let cursor: Cursor = after
            .parse()
            .map_err(|_| CliError::msg(format!("--after {after:?} is not a watch cursor")))?;
        watch = watch.start_after(cursor);
    }
    watch = watch.idle(Duration::from_millis(idle_ms.max(1)));
    // The position is taken before anything prints: changes from here on are shown.
    watch.start().await?;
    let format = ctx.global.output;
    let mut collected = Vec::new();
    let mut out = std::io::stdout();
    let mut print = |change: &Change<AnyObject>, cursor: &Cursor| -> CliResult<()> {
        let text = match format {
            Format::Table => line(change),
            Format::Jsonl => format!("{}\n", record(change, cursor)),
            Format::Json => {
                collected.push(record(change, cursor));
                return Ok(());
            }
        };
        match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            other => Ok(other?),
        }
    };
    let table = ctx.table_name.clone();
    let resume = |cursor: &Cursor| {
        format!(
            "resume with: dynatree --table {} watch {} --after {}",
            shell_quote(&table),
            shell_quote(&root.escaped()),
            shell_quote(&cursor.to_string())
        )
    };
    let result = if until_idle {
        loop {
            let Some(change) = watch.next_ready().await? else {
                break Ok(());
            };
            let cursor = watch.cursor().clone();
            print(&change, &cursor)?;
        }
    } else {
        let cursor_now = std::sync::Mutex::new(watch.cursor().clone());
        interruptible(
            async {
                while let Some(change) = watch.next().await {
                    let change = change?;
                    let cursor = watch.cursor().clone();
                    print(&change, &cursor)?;
                    if let Ok(mut c) = cursor_now.lock() {
                        *c = cursor;
                    }
                }
                Ok(())
            },
            || {
                let cursor = cursor_now.lock().map(|c| c.clone()).unwrap_or_default();
                format!("interrupted; {}", resume(&cursor))
            },
        )
        .await
    };
    result?;
    if !ctx.global.quiet {
        eprintln!("{}", resume(watch.cursor()));
    }
    Ok(match format {
        Format::Json => Doc::many(collected, String::new()),
        _ => Doc::empty(),
    })
}
