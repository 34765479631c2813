//! Whole workflows of the real `dynatree` binary against DynamoDB Local: put, get, ls, tree and
//! links; exit statuses; dry runs; rm, mv, cp, find and du; create-table, check and repair;
//! export and import; tables with secondary indexes.

use crate::common::Env;
use predicates::prelude::*;
use serde_json::{Value, json};

#[test]
fn put_get_ls_tree_and_links() {
    let t = Env::new();
    t.run(&["put", "/Accounts/123456", r#"{"name": "Ann", "n": 1}"#])
        .success()
        .stdout("");
    // From stdin, with a `/` inside a component.
    t.cmd()
        .args(["put", "/Accounts/123456/Links/a%2Fb"])
        .write_stdin(r#"{"target": "http://example.com/"}"#)
        .assert()
        .success();
    t.run(&["put", "/Accounts/9", "-"]).failure(); // empty stdin is not JSON
    t.run(&["ln", "/Accounts/123456", "/ByName/ann"]).success();

    assert_eq!(
        t.json(&["get", "/Accounts/123456"]),
        json!({"name": "Ann", "n": 1})
    );
    assert_eq!(
        t.json(&["get", "/Accounts/123456/Links/a%2Fb"]),
        json!({"target": "http://example.com/"})
    );
    // Links are followed, unless told not to.
    assert_eq!(
        t.json(&["get", "/ByName/ann"]),
        json!({"name": "Ann", "n": 1})
    );
    assert_eq!(
        t.json(&["get", "--no-follow", "/ByName/ann"]),
        json!({"link": "/Accounts/123456"})
    );
    assert_eq!(t.ok(&["readlink", "/ByName/ann"]), "/Accounts/123456\n");
    assert_eq!(
        t.json(&["readlink", "/ByName/ann"]),
        json!({"path": "/ByName/ann", "target": "/Accounts/123456"})
    );
    // The human form of get is JSON too.
    let human: Value = serde_json::from_str(&t.ok(&["get", "/Accounts/123456"])).unwrap();
    assert_eq!(human["name"], "Ann");

    assert_eq!(t.ok(&["ls"]), "Accounts\nByName\n");
    assert_eq!(t.ok(&["ls", "/Accounts/123456/Links"]), "a%2Fb\n");
    let long = t.ok(&["ls", "-l", "/Accounts"]);
    let lines: Vec<&str> = long.lines().collect();
    assert!(lines[0].starts_with("KIND"), "{long}");
    assert!(lines[1].starts_with("object"), "{long}");
    assert!(lines[1].ends_with("123456"), "{long}");
    let long = t.ok(&["ls", "-l", "/ByName"]);
    assert!(
        long.contains("link") && long.contains("ann -> /Accounts/123456"),
        "{long}"
    );
    let entries = t.jsonl(&["ls", "-l", "/Accounts/123456"]);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["kind"], "dir");
    assert_eq!(entries[0]["path"], "/Accounts/123456/Links");
    let entries = t.json(&["ls", "/Accounts"]);
    assert_eq!(entries[0]["kind"], "object");
    assert!(entries[0]["size"].as_u64().unwrap() > 0);

    let drawing = t.ok(&["tree"]);
    let expected = concat!(
        "/\n",
        "├── Accounts\n",
        "│   └── 123456\n",
        "│       └── Links\n",
        "│           └── a%2Fb\n",
        "└── ByName\n",
        "    └── ann -> /Accounts/123456\n",
        "\n",
        "3 directories, 2 objects, 1 link\n",
    );
    assert_eq!(drawing, expected);
    let shallow = t.jsonl(&["tree", "/Accounts", "--depth", "1"]);
    assert_eq!(shallow.len(), 1);
    assert_eq!(shallow[0]["path"], "/Accounts/123456");
    assert_eq!(shallow[0]["depth"], 1);
    let all = t.json(&["tree"]);
    assert_eq!(all.as_array().unwrap().len(), 6);
}

#[test]
fn exit_statuses() {
    let t = Env::new();
    t.run(&["put", "/a/b", "{}"]).success();
    let not_found = [
        &["get", "/nothing"][..],
        &["get", "--no-follow", "/nothing"],
        &["readlink", "/nothing"],
        &["rm", "/nothing"],
        &["rm", "-r", "/nothing"],
        &["ls", "/nothing"],
        &["tree", "/nothing"],
    ];
    for args in not_found {
        t.run(args)
            .code(3)
            .stdout("")
            .stderr(predicate::str::starts_with("dynatree: error: not found"));
    }
    // A bad path is a failure (1), with one line on stderr.
    for args in [
        &["get", "/a//b"][..],
        &["get", "/a%zz"],
        &["put", "/a¦b", "{}"],
        &["ls", "/x%"],
    ] {
        let out = t.run(args).code(1).get_output().stderr.clone();
        let err = String::from_utf8(out).unwrap();
        assert!(err.starts_with("dynatree: error: path"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // Other failures.
    t.run(&["readlink", "/a/b"])
        .code(1)
        .stderr(predicate::str::contains("not a link"));
    t.run(&["put", "/x", "[1, 2]"])
        .code(1)
        .stderr(predicate::str::contains("an object"));
    t.run(&["rm", "/a"])
        .code(1)
        .stderr(predicate::str::contains("rm -r"));
    t.run(&["mv", "/a", "/a/b/c"]).code(1);
    // Usage errors (clap's 2).
    t.run(&["get"]).code(2);
    t.run(&["ls", "--frobnicate"]).code(2);
    t.run(&["ls", "-o", "xml"]).code(2);
    t.run(&["get", "/a", "--dry-run"]).code(2);
    t.cmd()
        .env_remove("DYNATREE_TABLE")
        .args(["ls"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--table"));
    // A table that does not exist.
    t.cmd()
        .args(["--table", "no-such-table-here", "ls"])
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with("dynatree: error:"));
    // Help documents the statuses.
    t.run(&["--help"])
        .success()
        .stdout(predicate::str::contains("3    not found"));
}

#[test]
fn dry_runs_write_nothing() {
    let t = Env::new();
    t.run(&["put", "/a/b", r#"{"v": 1}"#]).success();
    t.run(&["put", "/a/c", r#"{"v": 2}"#]).success();
    let before = t.export();

    t.run(&["put", "/x", r#"{"v": 3}"#, "--dry-run"])
        .success()
        .stdout(predicate::str::starts_with("would put /x"));
    t.run(&["ln", "/a/b", "/l", "--dry-run"]).success();
    t.run(&["rm", "/a/b", "--dry-run"])
        .success()
        .stdout("would delete /a/b (object)\n");
    let doc = t.json(&["rm", "-r", "/a", "--dry-run"]);
    assert_eq!(doc["objects"], 2);
    assert_eq!(doc["dry_run"], true);
    let doc = t.json(&["mv", "/a", "/m", "--dry-run"]);
    assert_eq!(doc["objects"], 2);
    t.run(&["cp", "/a", "/c", "--dry-run"])
        .success()
        .stdout("would copy 2 objects (3 nodes) from /a to /c\n");
    t.run(&["mv", "/nothing", "/m", "--dry-run"]).code(3);
    t.run(&["resume", "--dry-run"]).success();
    t.run(&["repair", "--dry-run"]).success();
    t.cmd()
        .args(["import", "--dry-run"])
        .write_stdin("{\"path\":\"/i\",\"item\":{}}\n{\"path\":\"/j\",\"link\":\"/i\"}\n")
        .assert()
        .success()
        .stdout("would import 2 records (1 object, 1 link)\n");
    t.run(&[
        "--table",
        &crate::common::fresh_name(),
        "create-table",
        "--dry-run",
        "--ttl",
    ])
    .success()
    .stdout(predicate::str::starts_with("would create table"));

    assert_eq!(t.export(), before);
    t.run(&["get", "/x"]).code(3);
}

#[test]
fn rm_mv_cp_find_du() {
    let t = Env::new();
    for (p, v) in [
        ("/org/eng/db", 1),
        ("/org/eng/db/alice", 2),
        ("/org/eng/web/bob", 3),
        ("/org/hr/carol", 4),
    ] {
        t.run(&["put", p, &format!(r#"{{"v": {v}}}"#)]).success();
    }
    t.run(&["ln", "/org/eng/db/alice", "/people/alice"])
        .success();

    // find: name globs, types, depth.
    assert_eq!(
        t.ok(&["find", "/org", "--name", "[ab]*"]),
        "/org/eng/db/alice\n/org/eng/web/bob\n"
    );
    let links = t.jsonl(&["find", "--type", "l"]);
    assert_eq!(links.len(), 1);
    assert_eq!(links[0]["path"], "/people/alice");
    assert_eq!(links[0]["target"], "/org/eng/db/alice");
    assert_eq!(t.jsonl(&["find", "--type", "o"]).len(), 4);
    assert_eq!(t.ok(&["find", "/org", "--maxdepth", "1"]), "");
    assert_eq!(
        t.ok(&["find", "/org", "--maxdepth", "2"]),
        "/org/eng/db\n/org/hr/carol\n"
    );

    // du
    let du = t.json(&["du", "/org"]);
    assert_eq!(
        (du["objects"].as_u64(), du["links"].as_u64()),
        (Some(4), Some(0))
    );
    assert!(du["bytes"].as_u64().unwrap() > 0);
    let all = t.json(&["du"]);
    assert_eq!(
        (all["objects"].as_u64(), all["links"].as_u64()),
        (Some(4), Some(1))
    );
    assert!(t.ok(&["du", "/org"]).starts_with("4 objects, 0 links, "));

    // mv reports the link that pointed into the moved subtree.
    let moved = t.json(&["mv", "/org/eng", "/org/tech"]);
    assert_eq!(moved["objects"], 3);
    assert_eq!(moved["links"][0]["path"], "/people/alice");
    assert_eq!(t.json(&["get", "/org/tech/db/alice"]), json!({"v": 2}));
    t.run(&["get", "/org/eng/db"]).code(3);
    let out = t.ok(&["mv", "/org/tech/web", "/web"]);
    assert!(out.starts_with("moved 1 object ("), "{out}");
    assert!(out.ends_with(" from /org/tech/web to /web\n"), "{out}");

    // cp keeps the source.
    let copied = t.json(&["cp", "/org/hr", "/backup/hr"]);
    assert_eq!(copied["objects"], 1);
    assert_eq!(t.json(&["get", "/org/hr/carol"]), json!({"v": 4}));
    assert_eq!(t.json(&["get", "/backup/hr/carol"]), json!({"v": 4}));
    t.run(&["cp", "/org/hr", "/backup/hr"]).code(1); // exists

    // rm of one object, and of a subtree.
    t.run(&["rm", "/web/bob"]).success().stdout("");
    t.run(&["get", "/web/bob"]).code(3);
    assert_eq!(
        t.ok(&["rm", "-r", "/org"]),
        "deleted 3 objects at and under /org\n"
    );
    assert_eq!(t.ok(&["ls"]), "backup\npeople\n");
    assert!(t.jsonl(&["pending"]).is_empty());
    assert_eq!(t.ok(&["resume"]), "finished 0 operations\n");
}

#[test]
fn create_table_options_check_and_repair() {
    let t = Env::with(&["--path-index", "1", "--ttl", "--stream"]);
    // Creating it again is a no-op.
    t.run(&["create-table", "--path-index", "1"]).success();
    t.run(&["--path-index", "1", "put", "/a/b/c", r#"{"v": 1}"#])
        .success();
    t.run(&["--path-index", "1", "put", "/a/d", r#"{"v": 2}"#])
        .success();
    // With the index, descendants come from one Query.
    let found = t.jsonl(&["--path-index", "1", "find", "/a"]);
    assert_eq!(found.len(), 2);

    let report = t.json(&["--path-index", "1", "check", "--segments", "2"]);
    assert_eq!(report["violations"], json!([]), "{report}");
    assert!(report["rows"].as_u64().unwrap() >= 6, "{report}");
    let human = t.ok(&[
        "--path-index",
        "1",
        "check",
        "--read-units-per-second",
        "1000",
    ]);
    assert!(human.trim_end().ends_with("healthy"), "{human}");
    let repaired = t.ok(&["--path-index", "1", "repair"]);
    assert!(repaired.ends_with("nothing to repair\n"), "{repaired}");

    // An object written without the index attributes (by a program that keeps no path index
    // and skips the table check): repairable.
    let client = dynatree_testing::client_for(&t.endpoint);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let careless = dynatree::Tree::builder(dynatree::DynamoDbTable::new(client, &t.table))
                .verify_table(false)
                .build()
                .unwrap();
            careless.put(["a", "e"], &json!({"v": 3})).await.unwrap();
        });
    let out = t
        .run(&["--path-index", "1", "check", "-o", "jsonl"])
        .code(1)
        .stderr(predicate::str::contains("1 violation found"))
        .get_output()
        .stdout
        .clone();
    let line: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(line["class"], "missing-index");
    assert_eq!(line["path"], "/a/e");
    let dry = t.json(&["--path-index", "1", "repair", "--dry-run"]);
    assert_eq!(dry["fixed"].as_array().map(Vec::len), Some(1), "{dry}");
    assert_eq!(dry["dry_run"], true, "{dry}");
    t.run(&["--path-index", "1", "check"]).code(1); // the dry run wrote nothing
    let fixed = t.jsonl(&["--path-index", "1", "repair"]);
    assert_eq!(fixed.len(), 1);
    assert_eq!(fixed[0]["outcome"], "fixed");
    t.run(&["--path-index", "1", "check"]).success();

    // A dangling link is a violation a human has to decide on.
    t.run(&["--path-index", "1", "ln", "/nowhere", "/dangling"])
        .success();
    // The dry run exits as the repair would.
    let out = t
        .run(&["--path-index", "1", "repair", "--dry-run", "-o", "json"])
        .code(1)
        .stderr(predicate::str::contains(
            "1 violation would be left for a human decision",
        ))
        .get_output()
        .stdout
        .clone();
    let dry: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(dry["left"].as_array().map(Vec::len), Some(1), "{dry}");
    let out = t
        .run(&["--path-index", "1", "repair"])
        .code(1)
        .stderr(predicate::str::contains(
            "1 violation left for a human decision",
        ))
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("left dangling-link /dangling"), "{text}");
}

#[test]
fn export_import_round_trip_and_resume() {
    let source = Env::new();
    source
        .run(&[
            "put",
            "/Files/a%2Fb/100%25",
            r#"{"size": 1.5, "tags": ["x"]}"#,
        ])
        .success();
    source
        .run(&["put", "/Files/c", r#"{"ok": true}"#])
        .success();
    source.run(&["ln", "/Files/c", "/Latest"]).success();
    let lines = source.export();
    assert_eq!(lines.len(), 3);
    assert!(
        lines[0].starts_with(r#"{"path":"/Files/a%2Fb/100%25","item":"#),
        "{lines:?}"
    );
    assert!(lines.contains(&r#"{"path":"/Latest","link":"/Files/c"}"#.to_owned()));
    assert_eq!(source.ok(&["export", "/Latest"]).lines().count(), 1);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tree.jsonl");
    let f = file.to_str().unwrap();
    let summary = source.json(&["export", "--file", f]);
    assert_eq!(summary["records"], 3);

    // Into a new table, twice (idempotent).
    let copy = Env::new();
    let done = copy.json(&["import", "--file", f]);
    assert_eq!(
        (done["objects"].as_u64(), done["links"].as_u64()),
        (Some(2), Some(1))
    );
    copy.run(&["import", "--file", f]).success();
    assert_eq!(copy.export(), lines);
    assert_eq!(copy.json(&["get", "/Latest"]), json!({"ok": true}));

    // From stdin.
    let third = Env::new();
    third
        .cmd()
        .args(["import"])
        .write_stdin(lines.join("\n") + "\n")
        .assert()
        .success()
        .stdout(predicate::str::starts_with(
            "imported 3 records (2 objects, 1 link)",
        ));

    // An interrupted import left a checkpoint: --resume skips what it says is written.
    let fourth = Env::new();
    std::fs::write(
        format!("{f}.dynatree-import"),
        r#"{"committed": 2, "table": "x"}"#,
    )
    .unwrap();
    let resumed = fourth.json(&["import", "--file", f, "--resume"]);
    assert_eq!(resumed["skipped"], 2);
    assert_eq!(resumed["records"], 1);
    assert!(!std::path::Path::new(&format!("{f}.dynatree-import")).exists());

    // A bad record names its line.
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"path\":\"/ok\",\"item\":{}}\nnot json\n").unwrap();
    fourth
        .run(&["import", "--file", bad.to_str().unwrap()])
        .code(1)
        .stderr(predicate::str::contains("record 2"));
}

#[test]
fn create_table_with_secondary_indexes() {
    let t = Env::with(&["--index", "by_email", "--index", "by_created:range"]);
    let client = dynatree_testing::client_for(&t.endpoint);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let table = rt
        .block_on(client.describe_table().table_name(&t.table).send())
        .unwrap()
        .table
        .unwrap();
    let mut indexes: Vec<(String, usize)> = table
        .global_secondary_indexes()
        .iter()
        .map(|g| {
            (
                g.index_name().unwrap_or_default().to_owned(),
                g.key_schema().len(),
            )
        })
        .collect();
    indexes.sort();
    assert_eq!(
        indexes,
        [("by_created".to_owned(), 2), ("by_email".to_owned(), 1)]
    );
    // A malformed option is a usage error.
    t.run(&["create-table", "--index", "x:hash"]).code(2);
}

/// Imports `n` numbered objects `/<prefix><i % dirs>/n<i>` through a JSONL file in `dir`.
fn import_numbered(t: &Env, dir: &std::path::Path, prefix: &str, n: usize, dirs: usize) {
    let records: String = (0..n)
        .map(|i| {
            format!(
                "{{\"path\":\"/{prefix}{}/n{i}\",\"item\":{{\"v\":{{\"N\":\"{i}\"}}}}}}\n",
                i % dirs
            )
        })
        .collect();
    let input = dir.join("in.jsonl");
    std::fs::write(&input, records).unwrap();
    t.run(&["import", "--file", input.to_str().unwrap()])
        .success();
}

/// Starts the binary on `t`'s table with `args`, as a worker process of its own.
fn spawn(t: &Env, args: &[&str]) -> std::process::Child {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_dynatree"));
    crate::common::isolated(&mut c)
        .env("DYNATREE_TABLE", &t.table)
        .args(["--endpoint-url", &t.endpoint])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a worker that must succeed; its stdout.
fn succeeds(worker: std::process::Child) -> Vec<u8> {
    let out = worker.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A check split across processes: three workers scan their segments at once and save their
/// parts, one part stopped by its time limit goes on with `--resume`, and the merge reports
/// what one check does; `repair --merge` fixes from the parts.
#[test]
fn check_split_across_processes() {
    let t = Env::new();
    let dir = tempfile::tempdir().unwrap();
    import_numbered(&t, dir.path(), "d", 40, 5);
    // A dangling link (left for a human) and an object whose listing row is gone (repaired).
    t.run(&["ln", "/nowhere", "/dangling"]).success();
    let client = dynatree_testing::client_for(&t.endpoint);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            client
                .delete_item()
                .table_name(&t.table)
                .key(
                    "Key",
                    aws_sdk_dynamodb::types::AttributeValue::S("¦d1¦".into()),
                )
                .key(
                    "Child",
                    aws_sdk_dynamodb::types::AttributeValue::S("n1".into()),
                )
                .send()
                .await
                .unwrap();
        });
    let whole = t
        .cmd()
        .args(["check", "--segments", "6", "-o", "json"])
        .assert()
        .code(1);
    let whole: Value = serde_json::from_slice(&whole.get_output().stdout).unwrap();
    assert_eq!(
        whole["violations"].as_array().map(Vec::len),
        Some(2),
        "{whole}"
    );

    // Three workers at once, each its own process.
    let file = |n: &str| dir.path().join(n).to_str().unwrap().to_owned();
    let workers: Vec<_> = [("0..2", "p0"), ("2..4", "p1"), ("4..6", "p2")]
        .into_iter()
        .map(|(range, name)| {
            let save = file(name);
            let args = ["-o", "json", "check", "--segments", "6", "--part", range];
            spawn(&t, &[&args[..], &["--save", &save]].concat())
        })
        .collect();
    let mut rows = 0;
    for w in workers {
        let stdout = succeeds(w);
        let summary: Value = serde_json::from_slice(&stdout).unwrap();
        assert_eq!(summary["complete"], true, "{summary}");
        rows += summary["rows"].as_u64().unwrap();
    }
    assert_eq!(rows, whole["rows"].as_u64().unwrap());
    let merge = |files: &[&str]| {
        let mut args = vec!["check", "-o", "json", "--merge"];
        args.extend_from_slice(files);
        let out = t.cmd().args(&args).assert().code(1);
        let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        (
            serde_json::from_slice::<Value>(&out.get_output().stdout).unwrap(),
            err,
        )
    };
    let (p0, p1, p2) = (file("p0"), file("p1"), file("p2"));
    let (merged, err) = merge(&[&p0, &p1, &p2]);
    assert_eq!(merged["violations"], whole["violations"], "{merged}");
    assert_eq!(merged["rows"], whole["rows"]);
    assert_eq!(merged["read_units"], whole["read_units"]);
    assert!(err.contains("repair --merge"), "{err}");

    // The merge split into buckets, three processes at once: between them, the whole
    // check's violations, each in one bucket, and a bucket's repair command names it.
    for (n, depth) in [(3, "1"), (2, "2")] {
        let mergers: Vec<_> = (0..n)
            .map(|i| {
                let bucket = format!("{i}/{n}");
                let args = ["-o", "json", "check", "--merge", &p0, &p1, &p2];
                let bucket = ["--bucket", &bucket, "--bucket-depth", depth];
                spawn(&t, &[&args[..], &bucket[..]].concat())
            })
            .collect();
        let mut union: Vec<Value> = Vec::new();
        for (i, m) in mergers.into_iter().enumerate() {
            let out = m.wait_with_output().unwrap();
            let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
            let found = doc["violations"].as_array().cloned().unwrap_or_default();
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            match out.status.code() {
                Some(0) => assert!(found.is_empty(), "{doc}"),
                Some(1) => assert!(
                    err.contains(&format!("--part {i}/{n} --bucket-depth {depth}"))
                        || err.contains("none that a program can decide"),
                    "{err}"
                ),
                other => panic!("bucket {i}: exit {other:?}: {err}"),
            }
            assert_eq!(doc["rows"], whole["rows"]);
            union.extend(found);
        }
        let key = |v: &Value| v.to_string();
        union.sort_by_key(key);
        let mut all = whole["violations"].as_array().cloned().unwrap();
        all.sort_by_key(key);
        assert_eq!(union, all, "{n} buckets of depth {depth}");
    }
    t.run(&["check", "--bucket", "0/3"]).code(2); // --merge is required
    t.run(&["check", "--merge", &p0, "--bucket", "3/3"]).code(2);
    t.run(&["check", "--merge", &p0, "--bucket-depth", "2"])
        .code(2); // --bucket is required
    t.run(&[
        "check",
        "--merge",
        &p0,
        "--bucket",
        "0/2",
        "--bucket-depth",
        "0",
    ])
    .code(2);

    // A part that stops at once, saved unfinished, goes on with --resume.
    let r = file("r");
    let stopped = t.json(&[
        "check",
        "--segments",
        "6",
        "--part",
        "0..2",
        "--save",
        &r,
        "--time-limit",
        "0",
    ]);
    assert_eq!(
        (stopped["complete"].clone(), stopped["rows"].clone()),
        (json!(false), json!(0))
    );
    let human = t.ok(&["check", "--resume", &r]);
    assert!(
        human.contains("complete;") && human.contains("check --merge"),
        "{human}"
    );
    let (again, _) = merge(&[&r, &p1, &p2]);
    assert_eq!(again["violations"], whole["violations"]);

    // Parts that are not one check: refused, saying which segments.
    let err = t.fails(1, &["check", "--merge", &p0, &p2]);
    assert!(
        err.contains("no check part scanned segments 2..4 of 6"),
        "{err}"
    );
    let err = t.fails(1, &["check", "--merge", &p0, &p0, &p1, &p2]);
    assert!(err.contains("overlap"), "{err}");
    let junk = file("junk");
    std::fs::write(&junk, "{}").unwrap();
    let err = t.fails(1, &["check", "--merge", &junk]);
    assert!(err.contains("not a part saved by `check --save`"), "{err}");
    let err = t.fails(1, &["check", "--time-limit", "5"]);
    assert!(err.contains("--save FILE"), "{err}");
    t.run(&["check", "--part", "0..2"]).code(2); // --save is required
    t.run(&["check", "--part", "2..2", "--save", &junk]).code(2); // empty range

    // The same share, by the first 2 components, in dry runs: each violation in one worker.
    let (mut fixed, mut left) = (0, 0);
    for part in ["0/2", "1/2"] {
        let args = ["repair", "-o", "json", "--dry-run", "--part", part];
        let merge = ["--bucket-depth", "2", "--merge", &p0, &p1, &p2];
        let out = t.cmd().args(args).args(merge).output().unwrap();
        assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        fixed += doc["fixed"].as_array().map_or(0, Vec::len);
        left += doc["left"].as_array().map_or(0, Vec::len);
    }
    assert_eq!((fixed, left), (1, 1));
    t.run(&["repair", "--part", "0/2", "--bucket-depth", "2"])
        .code(2); // --merge is required

    // The repair from the parts, shared by two workers: the object relinked, the dangling
    // link left, each by exactly one of them.
    let (mut fixed, mut left) = (0, 0);
    for part in ["0/2", "1/2"] {
        let out = t
            .cmd()
            .args([
                "repair", "-o", "json", "--part", part, "--merge", &p0, &p1, &p2,
            ])
            .output()
            .unwrap();
        assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        fixed += doc["fixed"].as_array().map_or(0, Vec::len);
        left += doc["left"].as_array().map_or(0, Vec::len);
    }
    assert_eq!((fixed, left), (1, 1));
    assert_eq!(
        t.ok(&["ls", "/d1"]).lines().filter(|l| *l == "n1").count(),
        1
    );
    t.run(&["repair", "--part", "2/2"]).code(2);
}

/// An export split into parts by processes at once: every record in exactly one part, and the
/// parts imported in any order give the same tree.
#[test]
fn export_split_across_processes() {
    let t = Env::new();
    let dir = tempfile::tempdir().unwrap();
    import_numbered(&t, dir.path(), "t", 30, 7);
    t.run(&["put", "/t0", r#"{"top": true}"#]).success();
    t.run(&["ln", "/t1/n1", "/t0/latest"]).success();
    let mut whole = t.export();
    whole.sort();
    assert_eq!(whole.len(), 32);

    let file = |n: u32| dir.path().join(format!("p{n}.jsonl"));
    let workers: Vec<_> = (0..3)
        .map(|i| {
            let (part, out) = (format!("{i}/3"), file(i));
            spawn(
                &t,
                &["export", "--part", &part, "--file", out.to_str().unwrap()],
            )
        })
        .collect();
    for w in workers {
        succeeds(w);
    }
    let mut parts: Vec<String> = Vec::new();
    for i in 0..3 {
        let body = std::fs::read_to_string(file(i)).unwrap();
        assert!(!body.is_empty(), "part {i} is empty");
        parts.extend(body.lines().map(str::to_owned));
    }
    parts.sort();
    assert_eq!(parts, whole, "every record in exactly one part");

    // Imported in reverse order into a new table: the same export.
    let copy = Env::new();
    for i in (0..3).rev() {
        copy.run(&["import", "--file", file(i).to_str().unwrap()])
            .success();
    }
    let mut copied = copy.export();
    copied.sort();
    assert_eq!(copied, whole);
    copy.run(&["check"]).success();

    // A subtree's parts: its own record in part 0.
    let sub: Vec<String> = (0..2)
        .flat_map(|i| {
            t.ok(&["export", "/t0", "--part", &format!("{i}/2")])
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        t.ok(&["export", "/t0", "--part", "0/2"])
            .starts_with(r#"{"path":"/t0","#)
    );
    assert_eq!(
        sub.len(),
        t.export()
            .iter()
            .filter(|l| l.starts_with(r#"{"path":"/t0"#))
            .count()
    );
    t.run(&["export", "--part", "3/3"]).code(2);
    t.run(&["export", "--part", "1"]).code(2);
}

#[test]
fn watch_prints_changes_and_resumes_from_a_cursor() {
    let t = Env::with(&["--stream"]);
    // From now: nothing yet; the cursor to resume from is on stderr.
    let first = t
        .run(&["watch", "/Accounts", "--until-idle", "-o", "jsonl"])
        .success();
    let out = first.get_output();
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8(out.stderr.clone()).unwrap();
    let cursor = stderr
        .split("--after ")
        .nth(1)
        .expect("a cursor to resume from")
        .trim()
        .trim_matches('\'')
        .to_owned();

    t.run(&["put", "/Accounts/a", r#"{"n": 1}"#]).success();
    t.run(&["put", "/Accounts/a", r#"{"n": 2}"#]).success();
    t.run(&["put", "/Other/x", r#"{"n": 3}"#]).success(); // not under the path
    t.run(&["mv", "/Accounts/a", "/Accounts/b"]).success();

    let lines = t.jsonl(&["watch", "/Accounts", "--after", &cursor, "--until-idle"]);
    let what: Vec<(String, String)> = lines
        .iter()
        .map(|l| {
            (
                l["change"].as_str().unwrap().to_owned(),
                l["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        what,
        [
            ("created".to_owned(), "/Accounts/a".to_owned()),
            ("updated".to_owned(), "/Accounts/a".to_owned()),
            ("moved".to_owned(), "/Accounts/b".to_owned()),
        ]
    );
    assert_eq!(lines[1]["old"], json!({"n": 1}));
    assert_eq!(lines[1]["value"], json!({"n": 2}));
    assert_eq!(lines[2]["from"], "/Accounts/a");

    // Each line's cursor resumes right after it.
    let after_first = lines[0]["cursor"].as_str().unwrap();
    let rest = t.jsonl(&["watch", "/Accounts", "--after", after_first, "--until-idle"]);
    assert_eq!(rest.len(), 2);
    assert_eq!(rest[0]["change"], "updated");

    // The human form: one line per change.
    let human = t.ok(&["watch", "/Accounts", "--after", &cursor, "--until-idle"]);
    assert_eq!(
        human,
        "created  /Accounts/a\nupdated  /Accounts/a\nmoved    /Accounts/a -> /Accounts/b\n"
    );
    // A cursor that is not one is refused.
    t.fails(
        1,
        &["watch", "/Accounts", "--after", "nonsense", "--until-idle"],
    );
}
