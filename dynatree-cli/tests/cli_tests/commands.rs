//! The real `dynatree` binary against DynamoDB Local, by subject: what `mv` and `cp` do about
//! links (`--links`) and what their dry runs say; a write refused by a subtree that a
//! recorded operation holds; the read commands on missing paths; `export -o json`; how paths
//! are written and printed; the units of `check`'s JSON.

use std::time::Duration;

use crate::common::Env;
use predicates::prelude::*;
use serde_json::{Value, json};

/// A document without the fields that only one of a dry run and a real run has.
fn comparable(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("dry_run");
        o.remove("id");
    }
    v
}

/// The stderr of a command that fails with `code`.
fn failure(t: &Env, args: &[&str], code: i32) -> String {
    let out = t
        .run(args)
        .code(code)
        .stdout("")
        .get_output()
        .stderr
        .clone();
    String::from_utf8(out).expect("utf-8 stderr")
}

fn readlink(t: &Env, path: &str) -> String {
    t.ok(&["readlink", path]).trim_end().to_owned()
}

/// `mv /src /dst` with `--links`, where `/src/latest` links inside the subtree and
/// `/ext/doc` points into it from outside (`/ext/other` points elsewhere).
#[test]
fn mv_rewrites_reports_or_ignores_the_links_into_the_subtree() {
    let rewritten = json!([
        {"path": "/dst/latest", "target": "/dst/doc", "was": "/src/doc", "rewritten": true},
        {"path": "/ext/doc", "target": "/dst/doc", "was": "/src/doc", "rewritten": true},
    ]);
    let reported = json!([
        {"path": "/dst/latest", "target": "/src/doc", "rewritten": false},
        {"path": "/ext/doc", "target": "/src/doc", "rewritten": false},
    ]);
    let cases: [(&[&str], &str, &Value); 4] = [
        (&[], "rewrite", &rewritten), // the default
        (&["--links", "rewrite"], "rewrite", &rewritten),
        (&["--links", "report"], "report", &reported),
        (&["--links", "ignore"], "ignore", &json!([])),
    ];
    for (flags, policy, links) in cases {
        let t = Env::new();
        t.run(&["put", "/src/doc", r#"{"v": 1}"#]).success();
        t.run(&["ln", "/src/doc", "/src/latest"]).success();
        t.run(&["ln", "/src/doc", "/ext/doc"]).success();
        t.run(&["put", "/other", r#"{"v": 2}"#]).success();
        t.run(&["ln", "/other", "/ext/other"]).success();
        let before = t.export();

        let mut args = vec!["mv", "/src", "/dst"];
        args.extend_from_slice(flags);
        let mut dry_args = args.clone();
        dry_args.push("--dry-run");
        let dry = t.json(&dry_args);
        assert_eq!(dry["dry_run"], true, "{dry}");
        assert_eq!(
            (dry["objects"].as_u64(), dry["nodes"].as_u64()),
            (Some(2), Some(3)),
            "{dry}"
        );
        assert_eq!(dry["link_policy"], policy, "{dry}");
        assert_eq!(&dry["links"], links, "{policy}: {dry}");
        assert_eq!(t.export(), before, "{policy}: the dry run wrote");

        let done = t.json(&args);
        assert!(done["id"].is_string(), "{done}");
        assert_eq!(
            comparable(done),
            comparable(dry),
            "{policy}: the dry run said otherwise"
        );

        assert_eq!(t.json(&["get", "/dst/doc"]), json!({"v": 1}));
        assert_eq!(readlink(&t, "/ext/other"), "/other", "{policy}");
        if policy == "rewrite" {
            assert_eq!(readlink(&t, "/dst/latest"), "/dst/doc");
            assert_eq!(readlink(&t, "/ext/doc"), "/dst/doc");
            assert_eq!(t.json(&["get", "/ext/doc"]), json!({"v": 1}));
            t.run(&["check"]).success();
        } else {
            // Left pointing at the old place: dangling.
            assert_eq!(readlink(&t, "/dst/latest"), "/src/doc", "{policy}");
            assert_eq!(readlink(&t, "/ext/doc"), "/src/doc", "{policy}");
            t.run(&["get", "/ext/doc"]).code(3);
            t.run(&["check"]).code(1);
        }
    }

    // What people read.
    let t = Env::new();
    t.run(&["put", "/src/doc", r#"{"v": 1}"#]).success();
    t.run(&["ln", "/src/doc", "/ext/doc"]).success();
    assert_eq!(
        t.ok(&["mv", "/src", "/dst", "--dry-run"]),
        "would move 1 object (2 nodes) from /src to /dst\nwould rewrite the link /ext/doc: /src/doc -> /dst/doc\n"
    );
    assert_eq!(
        t.ok(&["mv", "/src", "/dst", "--links", "report"]),
        "moved 1 object (2 nodes) from /src to /dst\nnote: the link /ext/doc still points at /src/doc\n"
    );
    t.run(&["mv", "/src", "/dst", "--links", "sometimes"])
        .code(2);
}

/// `cp /tpl /p1` with `--links`, where `/tpl/latest` links inside the subtree and `/ext/tpl`
/// points into it from outside.
#[test]
fn cp_rewrites_reports_or_ignores_the_links_inside_the_copy() {
    let cases: [(&[&str], &str, Value, &str); 4] = [
        (
            &[],
            "rewrite",
            json!([{"path": "/p1/latest", "target": "/p1/doc", "was": "/tpl/doc", "rewritten": true}]),
            "/p1/doc",
        ),
        (
            &["--links", "rewrite"],
            "rewrite",
            json!([{"path": "/p1/latest", "target": "/p1/doc", "was": "/tpl/doc", "rewritten": true}]),
            "/p1/doc",
        ),
        (
            &["--links", "report"],
            "report",
            json!([{"path": "/p1/latest", "target": "/tpl/doc", "rewritten": false}]),
            "/tpl/doc",
        ),
        (&["--links", "ignore"], "ignore", json!([]), "/tpl/doc"),
    ];
    for (flags, policy, links, copied_target) in cases {
        let t = Env::new();
        t.run(&["put", "/tpl/doc", r#"{"v": 1}"#]).success();
        t.run(&["ln", "/tpl/doc", "/tpl/latest"]).success();
        t.run(&["ln", "/tpl/doc", "/ext/tpl"]).success();
        let before = t.export();

        let mut args = vec!["cp", "/tpl", "/p1"];
        args.extend_from_slice(flags);
        let mut dry_args = args.clone();
        dry_args.push("--dry-run");
        let dry = t.json(&dry_args);
        assert_eq!(
            (dry["objects"].as_u64(), dry["nodes"].as_u64()),
            (Some(2), Some(3)),
            "{dry}"
        );
        assert_eq!(dry["link_policy"], policy, "{dry}");
        assert_eq!(dry["links"], links, "{policy}: {dry}");
        assert_eq!(t.export(), before, "{policy}: the dry run wrote");

        let done = t.json(&args);
        assert_eq!(
            comparable(done),
            comparable(dry),
            "{policy}: the dry run said otherwise"
        );

        assert_eq!(readlink(&t, "/p1/latest"), copied_target, "{policy}");
        // The source and the links into it stay as they were.
        assert_eq!(readlink(&t, "/tpl/latest"), "/tpl/doc", "{policy}");
        assert_eq!(readlink(&t, "/ext/tpl"), "/tpl/doc", "{policy}");
        assert_eq!(t.json(&["get", "/p1/latest"]), json!({"v": 1}));
        t.run(&["check"]).success();
    }
}

/// Leaves a move of `from` to `to` recorded and part-way, its source held, as a process
/// stopped by Ctrl-C in its lock phase does (the library's own move, dropped after its
/// first lock; a lease of 2 s, so that `resume` soon takes it over). Returns its id.
fn leave_a_held_move(t: &Env, from: &[&str], to: &[&str]) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = dynatree_testing::client_for(&t.endpoint);
        let tree = dynatree::Tree::builder(dynatree::DynamoDbTable::new(client, t.table.clone()))
            .removal_lease(Duration::from_secs(2))
            .build()
            .unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let tx = std::sync::Mutex::new(Some(tx));
        let observed = tree.on_progress(move |p| {
            if p.phase == "lock"
                && let Some(tx) = tx.lock().unwrap().take()
            {
                let _ = tx.send(());
            }
        });
        tokio::select! {
            biased;
            _ = rx => {}
            r = observed.move_subtree(from, to) => panic!("the move ended before it was stopped: {r:?}"),
        }
        let pending = tree.pending().await.unwrap();
        assert_eq!(pending.len(), 1, "{pending:?}");
        pending[0].id.clone()
    })
}

#[test]
fn a_write_into_a_held_subtree_names_the_operation_and_how_to_resume_it() {
    let t = Env::new();
    // A component with a `/`: every path of the messages is escaped.
    t.run(&["put", "/org/r%2Fd/x", r#"{"v": 1}"#]).success();
    t.run(&["put", "/org/r%2Fd/y", r#"{"v": 2}"#]).success();
    let id = leave_a_held_move(&t, &["org", "r/d"], &["org", "lab"]);
    let resume = format!(
        "dynatree --table {} --endpoint-url {} resume",
        t.table, t.endpoint
    );

    let err = failure(&t, &["put", "/org/r%2Fd/new", "{}"], 1);
    assert!(
        err.starts_with("dynatree: error: subtree held by another operation: "),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "it is the move of /org/r%2Fd to /org/lab (operation {id}, phase lock)"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("run `{resume}` to finish it")),
        "{err}"
    );
    assert!(!err.contains("/org/r/d"), "a path printed unescaped: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    t.run(&["get", "/org/r%2Fd/new"]).code(3);

    // A dry run meets the hold as the real run would.
    let err = failure(&t, &["mv", "/org/r%2Fd/x", "/x", "--dry-run"], 1);
    assert!(err.contains("/org/r%2Fd/x is inside a subtree"), "{err}");
    assert!(err.contains(&format!("operation {id}")), "{err}");
    for args in [
        &["rm", "/org/r%2Fd/x", "--dry-run"][..],
        &["rm", "-r", "/org", "--dry-run"],
    ] {
        let err = failure(&t, args, 1);
        assert!(err.contains(&format!("operation {id}")), "{args:?}: {err}");
    }
    // The same move again would resume it.
    let again = t.ok(&["mv", "/org/r%2Fd", "/org/lab", "--dry-run"]);
    assert!(
        again.starts_with(&format!(
            "would resume the move of /org/r%2Fd to /org/lab (operation {id}, phase lock)"
        )),
        "{again}"
    );

    // The command it names finishes the move (once the stopped owner's lease ran out).
    assert!(t.ok(&["resume"]).starts_with("finished 1 operation"));
    assert_eq!(t.json(&["get", "/org/lab/y"]), json!({"v": 2}));
    t.run(&["put", "/org/lab/new", "{}"]).success();
    t.run(&["check"]).success();
}

#[test]
fn read_commands_agree_on_missing_paths() {
    let t = Env::new();
    t.run(&["put", "/a/b", r#"{"v": 1}"#]).success();
    for args in [
        &["get", "/nothing"][..],
        &["tree", "/nothing"],
        &["ls", "/nothing"],
        &["du", "/nothing"],
        &["find", "/nothing"],
        &["export", "/nothing"],
        &["du", "/a/b/c"],
    ] {
        let err = failure(&t, args, 3);
        assert!(
            err.starts_with("dynatree: error: not found: nothing at /"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(
        failure(&t, &["find", "/nothing"], 3),
        "dynatree: error: not found: nothing at /nothing\n"
    );
    // An export of nothing creates no file.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.jsonl");
    failure(
        &t,
        &["export", "/nothing", "--file", file.to_str().unwrap()],
        3,
    );
    assert!(!file.exists());
    // What is there: an object counts itself, the root always exists.
    let du = t.json(&["du", "/a/b"]);
    assert_eq!(
        (du["objects"].as_u64(), du["links"].as_u64()),
        (Some(1), Some(0)),
        "{du}"
    );
    assert_eq!(t.ok(&["find", "/a/b"]), "");
    assert_eq!(Env::new().json(&["du"])["objects"], 0);
}

#[test]
fn export_as_json_is_one_document() {
    let t = Env::new();
    t.run(&["put", "/a", r#"{"v": 1}"#]).success();
    t.run(&["ln", "/a", "/l"]).success();
    t.run(&["put", "/b/c", r#"{"s": "x"}"#]).success();
    let lines: Vec<Value> = t
        .export()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(t.json(&["export"]), Value::Array(lines.clone()));
    let c = lines.iter().find(|r| r["path"] == "/b/c").unwrap();
    assert_eq!(t.json(&["export", "/b"]), json!([c]));
    assert_eq!(Env::new().ok(&["export", "-o", "json"]), "[]\n");
    // JSON Lines stay what `-o jsonl` and a file hold; `-o json` is then the summary's format.
    assert_eq!(t.jsonl(&["export"]), lines);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tree.jsonl");
    let summary = t.json(&["export", "--file", file.to_str().unwrap()]);
    assert_eq!(summary["records"], 3, "{summary}");
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 3);
}

#[test]
fn paths_are_absolute_a_trailing_slash_allowed() {
    let t = Env::new();
    t.run(&["put", "/a/b/", r#"{"v": 1}"#]).success();
    assert_eq!(t.json(&["get", "/a/b"]), json!({"v": 1}));
    assert_eq!(t.json(&["get", "/a/b/"]), json!({"v": 1}));
    assert_eq!(t.ok(&["ls", "/a/"]), "b\n");
    let before = t.export();
    for (args, text) in [
        (&["get", "a/b"][..], "a/b"),
        (&["put", "a/c", "{}"], "a/c"),
        (&["ln", "/a/b", "l"], "l"),
        (&["mv", "/a", "b", "--dry-run"], "b"),
        (&["rm", "-r", "a"], "a"),
    ] {
        assert_eq!(
            failure(&t, args, 1),
            format!("dynatree: error: path \"{text}\": paths start with /: /{text}\n"),
            "{args:?}"
        );
    }
    assert_eq!(t.export(), before, "a refused path wrote");
    // Still refused: an empty component.
    t.run(&["get", "/a//"]).code(1);
}

#[test]
fn messages_print_paths_escaped() {
    let t = Env::new();
    t.run(&["put", "/p%2Fq/r", "{}"]).success();
    t.run(&["put", "/t%25", "{}"]).success();
    // The library's words, with the paths the command was given escaped.
    assert_eq!(
        failure(&t, &["mv", "/x%2Fy", "/z"], 3),
        "dynatree: error: not found: nothing at /x%2Fy\n"
    );
    assert_eq!(
        failure(&t, &["cp", "/p%2Fq", "/t%25"], 1),
        "dynatree: error: already exists: something is already at /t%25\n"
    );
    assert_eq!(
        failure(&t, &["cp", "/p%2Fq", "/p%2Fq/r/s"], 1),
        "dynatree: error: invalid path: cannot copy /p%2Fq to /p%2Fq/r/s: one contains the other\n"
    );
    t.run(&["rm", "/p%2Fq"])
        .code(1)
        .stderr(predicate::str::contains("/p%2Fq has children"));
}

#[test]
fn check_names_the_unit_of_its_elapsed_time() {
    let t = Env::new();
    t.run(&["put", "/a", "{}"]).success();
    let report = t.json(&["check"]);
    assert!(report["elapsed_ms"].is_u64(), "{report}");
    assert!(report.get("elapsed").is_none(), "{report}");
    let repaired = t.json(&["repair"]);
    assert!(repaired["check"]["elapsed_ms"].is_u64(), "{repaired}");
}
