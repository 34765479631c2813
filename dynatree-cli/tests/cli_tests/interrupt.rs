//! Ctrl-C on the real `dynatree` binary against DynamoDB Local: an import of a large JSONL
//! file interrupted by SIGINT once its first batch is written exits with status 130, names the
//! command that resumes it, and that command, run as printed, finishes the import: the table
//! then holds exactly the file's records.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dynatree_testing::DynamoDbLocal;
use serde_json::Value;

/// Records in the file: many batches of 1,000 (the import's batch), so that an interruption
/// after the first lands in the middle.
const RECORDS: usize = 20_000;

fn dynatree(endpoint: &str, table: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dynatree"));
    crate::common::isolated(&mut c).args(["--endpoint-url", endpoint, "--table", table]);
    c
}

/// Runs a command that must succeed; its stdout.
fn ok(c: &mut Command) -> String {
    let out = c.output().expect("the binary runs");
    assert!(
        out.status.success(),
        "{c:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Export lines as JSON values, sorted by path (an object's attributes compare as maps).
fn records(lines: &str) -> Vec<Value> {
    let mut v: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    v.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    v
}

/// `RECORDS` lines: objects under 20 groups, and a link for every 100th.
fn input() -> String {
    let mut out = String::new();
    for i in 0..RECORDS {
        let g = i % 20;
        if i % 100 == 99 {
            out.push_str(&format!(
                r#"{{"path":"/Latest/l{i:05}","link":"/Users/g{:02}/u{:05}"}}"#,
                (i - 1) % 20,
                i - 1
            ));
        } else {
            out.push_str(&format!(
                r#"{{"path":"/Users/g{g:02}/u{i:05}","item":{{"name":{{"S":"user {i}"}},"n":{{"N":"{i}"}},"ok":{{"BOOL":true}}}}}}"#
            ));
        }
        out.push('\n');
    }
    out
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn ctrl_c_on_import_says_how_to_resume_and_the_resume_finishes_it() {
    let local = DynamoDbLocal::start().unwrap_or_else(|e| panic!("DynamoDB Local: {e}"));
    let endpoint = local.endpoint();
    let table = format!("interrupt-{}", std::process::id());
    ok(dynatree(&endpoint, &table).arg("create-table"));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.jsonl");
    let text = input();
    std::fs::write(&file, &text).unwrap();
    let f = file.to_str().unwrap();
    let checkpoint = format!("{f}.dynatree-import");

    let child = dynatree(&endpoint, &table)
        .args(["import", "--file", f])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let pid = child.id();
    // The first batch is written (the checkpoint is saved after each one): interrupt.
    wait_for("the checkpoint", Duration::from_secs(300), || {
        Path::new(&checkpoint).exists()
    });
    let kill = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success(), "kill -INT {pid}: {kill}");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}; stderr: {stderr}",
        out.status
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "",
        "nothing on stdout"
    );

    eprintln!("(stderr of the interrupted import: {})", stderr.trim_end());
    // One line: how many records are written, and the command that resumes.
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let written: u64 = stderr
        .strip_prefix("dynatree: interrupted: the first ")
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of written records: {stderr}"));
    assert!(
        written >= 1_000 && written < RECORDS as u64 && written.is_multiple_of(1_000),
        "{written} records written: {stderr}"
    );
    let resume = stderr
        .split('`')
        .nth(1)
        .unwrap_or_else(|| panic!("no resume command in `backquotes`: {stderr}"));
    assert_eq!(
        resume,
        format!("dynatree --table {table} --endpoint-url {endpoint} import --file {f} --resume"),
        "{stderr}"
    );
    // The checkpoint holds the same count.
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&checkpoint).unwrap())
        .expect("the checkpoint is JSON");
    assert_eq!(saved["committed"].as_u64(), Some(written), "{saved}");
    // At least what it says is in the table.
    let partial = records(&ok(dynatree(&endpoint, &table).arg("export")));
    assert!(
        partial.len() as u64 >= written,
        "{} records exported, {written} said written",
        partial.len()
    );

    // The printed command, run by a shell as a user would, with `dynatree` on the PATH.
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_dynatree")).parent().unwrap();
    let mut path = std::ffi::OsString::from(bin_dir);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let mut sh = Command::new("sh");
    crate::common::isolated(&mut sh)
        .env("PATH", path)
        .args(["-c", resume]);
    let done = ok(&mut sh);
    let rest = RECORDS as u64 - written;
    assert!(
        done.starts_with(&format!("imported {rest} records ("))
            && done.contains(&format!(", {written} skipped")),
        "{done}"
    );
    assert!(
        !Path::new(&checkpoint).exists(),
        "the checkpoint is removed"
    );

    // The table holds the file's records, exactly.
    let exported = ok(dynatree(&endpoint, &table).arg("export"));
    assert_eq!(exported.lines().count(), RECORDS);
    assert!(
        records(&exported) == records(&text),
        "the export differs from the input"
    );
    ok(dynatree(&endpoint, &table).arg("check"));
}
