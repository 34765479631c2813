//! `check` and `repair`: the library's integrity checker ([`dynatree::check`]).

use dynatree::check::{Phase, Report};
use serde_json::{Value, json};

use super::read::plural;
use super::{Ctx, interruptible};
use crate::args::ScanOpts;
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

/// Runs the check with the options and a progress display.
async fn run_check(ctx: &Ctx, scan: ScanOpts) -> CliResult<Report> {
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

/// `check`: prints the report; exit status 1 if it found violations.
pub async fn check(ctx: &Ctx, scan: ScanOpts) -> CliResult<Doc> {
    let report = run_check(ctx, scan).await?;
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
    Err(CliError::msg(if repairable == 0 {
        format!(
            "{n} {what} found, none that a program can decide: dangling links, link cycles and foreign rows are yours to fix"
        )
    } else {
        format!(
            "{n} {what} found; `{}` fixes {repairable} of them",
            ctx.command_line("repair")
        )
    }))
}

/// `repair`: a check, then the repair of what it found (`--dry-run`: what would be fixed);
/// exit status 1 if violations are (or, in a dry run, would be) left for a human.
pub async fn repair(ctx: &Ctx, scan: ScanOpts, dry_run: bool) -> CliResult<Doc> {
    let report = run_check(ctx, scan).await?;
    if report.is_healthy() {
        return Ok(Doc::report(
            json!({ "check": serde_json::to_value(&report).unwrap_or(Value::Null), "fixed": [], "left": [], "dry_run": dry_run }),
            Vec::new(),
            format!("{report}\nnothing to repair\n"),
        ));
    }
    let progress = Progress::spinner(ctx.global.quiet, "repairing", "violations");
    let again = ctx.command_line("repair");
    let repaired = interruptible(run_repair(ctx, &report, dry_run, &progress), || {
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
    dry_run: bool,
    progress: &Progress,
) -> CliResult<dynatree::check::Repaired> {
    let bar = progress.handle();
    Ok(ctx
        .tree
        .repair(report)
        .dry_run(dry_run)
        .on_progress(move |p| show(&bar, p))
        .run()
        .await?)
}
