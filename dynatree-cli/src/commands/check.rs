//! `check` and `repair`: the library's integrity checker ([`dynatree::check`]).

use std::path::{Path, PathBuf};

use dynatree::check::Check;
use dynatree::check::{CheckPart, Phase, Report};
use dynatree::storage::SharedStorage;
use serde_json::{Value, json};

use super::read::plural;
use super::{Ctx, interruptible, shell_quote};
use crate::args::{ScanOpts, SplitOpts};
use crate::error::{CliError, CliResult};
use crate::output::Doc;
use crate::progress::Progress;

/// Shows the checker's progress: a spinner of rows while scanning (with segments and read
/// units), a bar with ETA while confirming or repairing (their totals are known).
fn show(progress: &indicatif::ProgressBar, p: &dynatree::check::Progress) {
    let (phase, unit) = match p.phase {
        Phase::Scan => ("scanning", "rows"),
        Phase::Confirm => ("confirming", "suspects"),
        Phase::Repair => ("repairing", "violations"),
        _ => ("working", ""),
    };
    match p.total {
        Some(total) => {
            if progress.length() != Some(total) {
                progress.set_length(total);
                progress.set_style(crate::progress::bar_style());
                progress.set_prefix(unit);
                progress.reset_elapsed();
            }
            progress.set_message(phase.to_owned());
        }
        None => progress.set_message(format!(
            "{phase} (segments {}/{}, {:.1} read units)",
            p.segments_done, p.segments, p.read_units
        )),
    }
    progress.set_position(p.done);
}

/// A check with the Scan's options, and the progress display it reports to.
fn scan_check(ctx: &Ctx, scan: ScanOpts) -> (Progress, Check<SharedStorage>) {
    let progress = Progress::spinner(ctx.global.quiet, "scanning", "rows");
    let bar = progress.handle();
    let mut check = ctx
        .tree
        .check()
        .segments(scan.segments)
        .on_progress(move |p| show(&bar, p));
    if let Some(r) = scan.read_units_per_second {
        check = check.read_units_per_second(r);
    }
    (progress, check)
}

/// Runs the check with the options and a progress display.
async fn run_check(ctx: &Ctx, scan: ScanOpts) -> CliResult<Report> {
    let (progress, check) = scan_check(ctx, scan);
    let report = interruptible(async { Ok(check.run().await?) }, || {
        "interrupted: the check only reads, nothing is left to resume".to_owned()
    })
    .await?;
    progress.finish();
    Ok(report)
}

fn violations(report: &Report) -> Vec<Value> {
    report
        .violations()
        .iter()
        .map(|v| serde_json::to_value(v).unwrap_or_else(|_| json!(v.to_string())))
        .collect()
}

/// The output of a check.
pub fn report_doc(report: &Report) -> Doc {
    let document = serde_json::to_value(report).unwrap_or_else(|_| json!(report.to_string()));
    Doc::report(document, violations(report), format!("{report}\n"))
}

/// `check`: prints the report; exit status 1 if it found violations. With `--part`,
/// `--resume` or `--save`: scans a part and saves it; with `--merge`: the report of saved
/// parts.
pub async fn check(ctx: &Ctx, scan: ScanOpts, split: SplitOpts) -> CliResult<Doc> {
    let report = if !split.merge.is_empty() {
        let depth = split.bucket_depth.unwrap_or(1);
        merge_parts(ctx, &split.merge, split.bucket.map(|(i, n)| (i, n, depth))).await?
    } else if split.part.is_some() || split.resume.is_some() || split.save.is_some() {
        return run_part(ctx, scan, split).await;
    } else if split.time_limit.is_some() {
        return Err(CliError::msg(
            "--time-limit stops a part of a check: give --save FILE (and --part A..B) or --resume FILE",
        ));
    } else {
        run_check(ctx, scan).await?
    };
    if report.is_healthy() {
        return Ok(report_doc(&report));
    }
    report_doc(&report).print(ctx.global.output)?;
    let n = report.violations().len();
    let repairable = report
        .violations()
        .iter()
        .filter(|v| v.class().repairable())
        .count();
    let what = plural(n, "violation", "violations");
    let repair = if split.merge.is_empty() {
        ctx.command_line("repair")
    } else {
        let files: Vec<String> = split
            .merge
            .iter()
            .map(|f| shell_quote(&f.display().to_string()))
            .collect();
        let part = match (split.bucket, split.bucket_depth) {
            (Some((i, n)), Some(k)) => format!(" --part {i}/{n} --bucket-depth {k}"),
            (Some((i, n)), None) => format!(" --part {i}/{n}"),
            _ => String::new(),
        };
        ctx.command_line(&format!("repair --merge {}{part}", files.join(" ")))
    };
    Err(CliError::msg(if repairable == 0 {
        format!(
            "{n} {what} found, none that a program can decide: dangling links, link cycles and foreign rows are yours to fix"
        )
    } else {
        format!("{n} {what} found; `{repair}` fixes {repairable} of them")
    }))
}

/// Reads the check parts saved in `files`.
fn load_part(f: &Path) -> CliResult<CheckPart> {
    let body = std::fs::read(f)
        .map_err(|e| CliError::msg(format!("check part {}: cannot read it: {e}", f.display())))?;
    serde_json::from_slice(&body).map_err(|e| {
        CliError::msg(format!(
            "check part {}: not a part saved by `check --save`: {e}",
            f.display()
        ))
    })
}

/// The report of the check whose parts were saved in `files` (only `bucket`'s violations,
/// with one). The files are read one at a time as the merge takes them, so a merger holds
/// one part and what it keeps of the others.
async fn merge_parts(
    ctx: &Ctx,
    files: &[PathBuf],
    bucket: Option<(u32, u32, u32)>,
) -> CliResult<Report> {
    let failed: std::sync::Mutex<Option<CliError>> = std::sync::Mutex::new(None);
    let parts = files.iter().map_while(|f| match load_part(f) {
        Ok(part) => Some(part),
        Err(e) => {
            if let Ok(mut slot) = failed.lock() {
                *slot = Some(e);
            }
            None
        }
    });
    let progress = Progress::spinner(ctx.global.quiet, "confirming", "suspects");
    let bar = progress.handle();
    let mut check = ctx.tree.check().on_progress(move |p| show(&bar, p));
    if let Some((i, n, depth)) = bucket {
        check = check.bucket(i, n).bucket_depth(depth as usize);
    }
    let merge = check.merge(parts);
    let report = interruptible(async { Ok(merge.await?) }, || {
        "interrupted: the merge only reads, nothing is left to resume".to_owned()
    })
    .await;
    // A file that could not be read stops the merge: that is the error to report.
    if let Some(e) = failed.lock().ok().and_then(|mut slot| slot.take()) {
        return Err(e);
    }
    let report = report?;
    progress.finish();
    Ok(report)
}

/// Writes `part` to `file`: aside, then renamed over it, so that a kill in between leaves
/// the part saved before.
fn save_part(file: &Path, part: &CheckPart) -> CliResult<()> {
    let body = serde_json::to_vec(part)
        .map_err(|e| CliError::msg(format!("check part: cannot encode it: {e}")))?;
    let mut aside = file.as_os_str().to_owned();
    aside.push(".saving");
    let aside = PathBuf::from(aside);
    std::fs::write(&aside, body)
        .and_then(|()| std::fs::rename(&aside, file))
        .map_err(|e| {
            CliError::msg(format!(
                "check part {}: cannot save it: {e}",
                file.display()
            ))
        })
}

/// `check --part A..B --save FILE`, `check --resume FILE`: scans a part of the table (or goes
/// on with one) and saves what it found.
async fn run_part(ctx: &Ctx, scan: ScanOpts, split: SplitOpts) -> CliResult<Doc> {
    let Some(file) = split.save.clone().or_else(|| split.resume.clone()) else {
        return Err(CliError::msg(
            "a part of a check is saved: give --save FILE",
        ));
    };
    let (progress, mut check) = scan_check(ctx, scan);
    if let Some(range) = split.part.clone() {
        check = check.part(range);
    }
    if let Some(resume) = &split.resume {
        let part = load_part(resume)?;
        check = check.resume(part);
    }
    if let Some(secs) = split.time_limit {
        check = check.time_limit(std::time::Duration::from_secs(secs));
    }
    let part = interruptible(async { Ok(check.run_part().await?) }, || {
        "interrupted: this run of the part is not saved (a part saved before is kept); run it again"
            .to_owned()
    })
    .await?;
    progress.finish();
    save_part(&file, &part)?;
    let range = part.segments();
    let quoted = shell_quote(&file.display().to_string());
    let next = if part.is_complete() {
        format!(
            "complete; once every part is saved: `{}`",
            ctx.command_line(&format!("check --merge {quoted} ..."))
        )
    } else {
        format!(
            "unfinished; go on with `{}`",
            ctx.command_line(&format!("check --resume {quoted}"))
        )
    };
    Ok(Doc::one(
        json!({
            "segments": [range.start, range.end],
            "total_segments": part.total_segments(),
            "complete": part.is_complete(),
            "rows": part.rows(),
            "read_units": part.read_units(),
            "pages": part.pages(),
            "saved": file.display().to_string(),
        }),
        format!(
            "segments {}..{} of {}: {} rows in {} pages, {} read units, saved to {}: {next}\n",
            range.start,
            range.end,
            part.total_segments(),
            part.rows(),
            part.pages(),
            part.read_units(),
            file.display()
        ),
    ))
}

/// `repair`: a check, then the repair of what it found (`--dry-run`: what would be fixed);
/// exit status 1 if violations are (or, in a dry run, would be) left for a human.
pub async fn repair(
    ctx: &Ctx,
    scan: ScanOpts,
    merge: &[PathBuf],
    part: Option<(u32, u32)>,
    bucket_depth: Option<u32>,
    dry_run: bool,
) -> CliResult<Doc> {
    let (report, part) = if merge.is_empty() {
        (run_check(ctx, scan).await?, part)
    } else {
        // A worker's share of the repair merges only its share of the facts: the report is
        // the share, repaired whole.
        let bucket = part.map(|(i, n)| (i, n, bucket_depth.unwrap_or(1)));
        (merge_parts(ctx, merge, bucket).await?, None)
    };
    // Stale entries of the link index are no violation, but the repair deletes them.
    if report.is_healthy() && report.stale_entries() == 0 {
        return Ok(Doc::report(
            json!({ "check": serde_json::to_value(&report).unwrap_or(Value::Null), "fixed": [], "left": [], "swept": 0, "dry_run": dry_run }),
            Vec::new(),
            format!("{report}\nnothing to repair\n"),
        ));
    }
    let progress = Progress::spinner(ctx.global.quiet, "repairing", "violations");
    let again = ctx.command_line("repair");
    let repaired = interruptible(run_repair(ctx, &report, part, dry_run, &progress), || {
        format!(
            "interrupted: the repair stopped part-way (each fix is a guarded write, nothing is half-done but recorded operations, which repair finishes); run `{again}` to continue"
        )
    })
    .await?;
    progress.finish();
    let doc = repaired_doc(&report, &repaired);
    let left = repaired.left().len();
    if left == 0 {
        return Ok(doc);
    }
    // A dry run exits as the repair would.
    doc.print(ctx.global.output)?;
    let what = plural(left, "violation", "violations");
    let verb = if dry_run { "would be left" } else { "left" };
    Err(CliError::msg(format!(
        "{left} {what} {verb} for a human decision"
    )))
}

/// The output of a repair: the check's report and what was fixed and left.
fn repaired_doc(report: &Report, repaired: &dynatree::check::Repaired) -> Doc {
    let mut document = serde_json::to_value(repaired).unwrap_or(Value::Null);
    document["check"] = serde_json::to_value(report).unwrap_or(Value::Null);
    let verb = if repaired.is_dry_run() {
        "would-fix"
    } else {
        "fixed"
    };
    let mut lines: Vec<Value> = repaired
        .fixed()
        .iter()
        .map(|v| {
            let mut r = serde_json::to_value(v).unwrap_or(Value::Null);
            r["outcome"] = json!(verb);
            r
        })
        .collect();
    lines.extend(repaired.left().iter().map(|(v, why)| {
        let mut r = serde_json::to_value(v).unwrap_or(Value::Null);
        r["outcome"] = json!("left");
        r["why"] = json!(why);
        r
    }));
    Doc::report(document, lines, format!("{repaired}\n"))
}

/// The library's repair of `report`, reporting progress on `progress`.
async fn run_repair(
    ctx: &Ctx,
    report: &Report,
    part: Option<(u32, u32)>,
    dry_run: bool,
    progress: &Progress,
) -> CliResult<dynatree::check::Repaired> {
    let bar = progress.handle();
    let mut repair = ctx
        .tree
        .repair(report)
        .dry_run(dry_run)
        .on_progress(move |p| show(&bar, p));
    if let Some((i, n)) = part {
        repair = repair.part(i, n);
    }
    Ok(repair.run().await?)
}
