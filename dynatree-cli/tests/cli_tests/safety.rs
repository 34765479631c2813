//! Safety and setup, on the real `dynatree` binary against DynamoDB Local: the account and
//! table a command acts on, setup errors that say what to do, tables dynatree did not create,
//! links that would replace something, dry runs that refuse what the real run refuses, the
//! service's errors on one line, and `create-table` on a table that exists.

use crate::common::{Env, dynatree, one_error_line};
use dynatree_testing::DynamoDbLocal;
use serde_json::json;

/// A current-thread runtime for the SDK calls a test makes itself.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Every row of `table`, as DynamoDB holds them (dynatree's or not).
fn row_count(endpoint: &str, table: &str) -> usize {
    let client = dynatree_testing::client_for(endpoint);
    let out = runtime()
        .block_on(client.scan().table_name(table).send())
        .expect("a scan");
    out.items().len()
}

#[test]
fn profile_wins_over_environment_credentials() {
    // One database per access key and region: each key is an account of its own.
    let local = DynamoDbLocal::start_per_key()
        .unwrap_or_else(|e| panic!("DynamoDB Local could not start: {e}"));
    let endpoint = local.endpoint();
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("credentials");
    std::fs::write(
        &credentials,
        "[prod]\naws_access_key_id = prodkey\naws_secret_access_key = prodsecret\n",
    )
    .unwrap();
    let config = dir.path().join("config");
    std::fs::write(
        &config,
        "[profile prod]\nregion = eu-west-1\n\n[profile nokeys]\nregion = eu-west-1\n",
    )
    .unwrap();
    // The binary with `key` and `region` in the environment, and the files above.
    let with_env = |key: &str, region: &str| {
        let mut c = dynatree();
        c.env("AWS_ACCESS_KEY_ID", key)
            .env("AWS_SECRET_ACCESS_KEY", "secret")
            .env("AWS_REGION", region)
            .env("AWS_CONFIG_FILE", &config)
            .env("AWS_SHARED_CREDENTIALS_FILE", &credentials)
            .args(["--endpoint-url", &endpoint, "--table", "tree"]);
        c
    };
    let ok = |mut c: assert_cmd::Command, args: &[&str]| {
        let out = c.args(args).assert().success().get_output().stdout.clone();
        String::from_utf8(out).unwrap()
    };
    // A table of the same name in two accounts: prod's (the profile's keys and region), and
    // dev's (the keys and region in the environment).
    let prod = || with_env("prodkey", "eu-west-1");
    let dev = || with_env("devkey", "us-east-1");
    ok(prod(), &["create-table"]);
    ok(prod(), &["put", "/prod/a", "{}"]);
    ok(prod(), &["put", "/prod/b", "{}"]);
    ok(dev(), &["create-table"]);
    ok(dev(), &["put", "/dev/a", "{}"]);

    // dev's credentials exported, `--profile prod`: prod's table, in the profile's region.
    assert_eq!(ok(dev(), &["--profile", "prod", "ls"]), "prod\n");
    // A destructive command acts on prod's table, not on the environment's account.
    ok(dev(), &["--profile", "prod", "rm", "-r", "-q", "/prod/b"]);
    assert_eq!(ok(prod(), &["ls", "/prod"]), "a\n");
    assert_eq!(ok(dev(), &["ls"]), "dev\n");
    // `--region` wins over the profile's region: prod's keys in us-east-1 have no table.
    let err = one_error_line(
        dev()
            .args(["--profile", "prod", "--region", "us-east-1", "ls"])
            .assert(),
        1,
    );
    assert!(
        err.contains("table tree not found (region us-east-1"),
        "{err}"
    );

    // An unknown profile is an error naming the files looked in, even with credentials in
    // the environment; nothing is done with those.
    let err = one_error_line(
        dev()
            .args(["--profile", "staging", "rm", "-r", "/dev"])
            .assert(),
        1,
    );
    assert!(err.contains("unknown profile staging"), "{err}");
    assert!(err.contains(&config.display().to_string()), "{err}");
    assert!(err.contains(&credentials.display().to_string()), "{err}");
    assert_eq!(ok(dev(), &["ls"]), "dev\n");
    // A profile without credentials: said so, not replaced by the environment's.
    let err = one_error_line(dev().args(["--profile", "nokeys", "ls"]).assert(), 1);
    assert!(err.contains("no credentials in profile nokeys"), "{err}");
    assert!(err.contains(&credentials.display().to_string()), "{err}");
}

#[test]
fn setup_errors_say_what_to_do() {
    let t = Env::new();
    t.run(&["put", "/a", "{}"]).success();
    // No credentials anywhere: the sources tried, and what to set.
    let err = one_error_line(
        t.cmd()
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .arg("ls")
            .assert(),
        1,
    );
    assert!(
        err.starts_with("dynatree: error: no credentials: "),
        "{err}"
    );
    for what in [
        "environment",
        "/nonexistent/dynatree-cli-test",
        "instance metadata",
        "AWS_PROFILE",
        "--profile",
        "AWS_ACCESS_KEY_ID",
    ] {
        assert!(err.contains(what), "{what}: {err}");
    }
    // A profile named by AWS_PROFILE that does not exist.
    let err = one_error_line(
        t.cmd()
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env("AWS_PROFILE", "ghost")
            .arg("ls")
            .assert(),
        1,
    );
    assert!(
        err.starts_with("dynatree: error: AWS_PROFILE: unknown profile ghost: "),
        "{err}"
    );
    // No region.
    let err = one_error_line(t.cmd().env_remove("AWS_REGION").arg("ls").assert(), 1);
    assert_eq!(
        err,
        "dynatree: error: no region: pass --region or set AWS_REGION\n"
    );
    // An endpoint that is not a URL, named.
    for bad in ["http://local host:8000", "localhost:8000", "http://:8000"] {
        let err = one_error_line(
            dynatree()
                .args(["--table", &t.table, "--endpoint-url", bad, "ls"])
                .assert(),
            1,
        );
        assert!(
            err.starts_with(&format!(
                "dynatree: error: --endpoint-url {bad:?} is not a URL: "
            )),
            "{err}"
        );
    }
    // A table that does not exist: named, with where it was looked for and how to create it;
    // a write does not create it.
    let missing = Env::absent();
    for args in [&["ls"][..], &["put", "/a", "{}"], &["check"]] {
        let err = missing.fails(1, args);
        assert!(
            err.starts_with(&format!(
                "dynatree: error: table {} not found (region us-east-1, endpoint {}): ",
                missing.table, missing.endpoint
            )),
            "{err}"
        );
        assert!(err.contains("create-table`"), "{err}");
        assert!(err.contains("import --create-table"), "{err}");
    }
    missing.fails(1, &["ls"]);
}

#[test]
fn import_creates_the_table_when_asked() {
    let source = Env::new();
    source.run(&["put", "/a/b", r#"{"v": 1}"#]).success();
    source.run(&["ln", "/a/b", "/l"]).success();
    let lines = source.export();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tree.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let f = file.to_str().unwrap();

    let target = Env::absent();
    let err = target.fails(1, &["import", "--file", f]);
    assert!(err.contains("not found"), "{err}");
    assert_eq!(
        target.ok(&["import", "--create-table", "--file", f, "--dry-run"]),
        format!(
            "would create table {} and import 2 records (1 object, 1 link)\n",
            target.table
        )
    );
    target.fails(1, &["ls"]); // the dry run created nothing
    let done = target.json(&["import", "--create-table", "--file", f]);
    assert_eq!(done["records"], 2);
    assert_eq!(target.export(), lines);
    // Into the table that exists now: the same import again.
    target
        .run(&["import", "--create-table", "--file", f])
        .success();
    assert_eq!(target.export(), lines);
    target.run(&["check"]).success();
}

#[test]
fn tables_of_another_key_schema_are_refused() {
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    };
    let endpoint = crate::common::endpoint();
    let client = dynatree_testing::client_for(&endpoint);
    let rt = runtime();
    let key = |name: &str, kind: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .unwrap()
    };
    let attr = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .unwrap()
    };
    // A hash key `Key` and no range key: puts would succeed and lose objects.
    let hash_only = crate::common::fresh_name();
    // Another application's table.
    let other = crate::common::fresh_name();
    rt.block_on(async {
        client
            .create_table()
            .table_name(&hash_only)
            .key_schema(key("Key", KeyType::Hash))
            .attribute_definitions(attr("Key"))
            .billing_mode(BillingMode::PayPerRequest)
            .send()
            .await
            .unwrap();
        client
            .create_table()
            .table_name(&other)
            .key_schema(key("pk", KeyType::Hash))
            .key_schema(key("sk", KeyType::Range))
            .attribute_definitions(attr("pk"))
            .attribute_definitions(attr("sk"))
            .billing_mode(BillingMode::PayPerRequest)
            .send()
            .await
            .unwrap();
    });
    for (table, found) in [
        (&hash_only, "hash `Key` (S) and no range key"),
        (&other, "hash `pk` (S) and range `sk` (S)"),
    ] {
        let t = Env {
            endpoint: endpoint.clone(),
            table: table.clone(),
        };
        for args in [
            &["ls"][..],
            &["check"],
            &["export"],
            &["put", "/a", "{}"],
            &["ln", "/a", "/b"],
            &["put", "/a", "{}", "--dry-run"],
            &["create-table"],
            &[
                "import",
                "--create-table",
                "--file",
                "/nonexistent/records.jsonl",
            ],
        ] {
            let err = t.fails(1, args);
            assert_eq!(
                err,
                format!(
                    "dynatree: error: table {table} is not a dynatree table: its key is {found}, a tree's is hash `Key` (S) and range `Child` (S); nothing was read or written\n"
                ),
                "{args:?}"
            );
        }
        assert_eq!(row_count(&endpoint, table), 0, "{table}");
    }
}

#[test]
fn ln_refuses_to_replace_without_force() {
    let t = Env::new();
    t.run(&["put", "/a", r#"{"v": 1}"#]).success();
    t.run(&["put", "/b", r#"{"v": 2}"#]).success();
    t.run(&["ln", "/a", "/l"]).success();
    let before = t.export();

    // Over an object, over a link, for real or as a dry run: refused, nothing written.
    for dry in [false, true] {
        let extra: &[&str] = if dry { &["--dry-run"] } else { &[] };
        let err = t.fails(1, &[&["ln", "/b", "/a"], extra].concat());
        assert_eq!(
            err,
            "dynatree: error: already exists: /a (an object); use -f to replace it\n"
        );
        let err = t.fails(1, &[&["ln", "/b", "/l"], extra].concat());
        assert_eq!(
            err,
            "dynatree: error: already exists: /l (a link); use -f to replace it\n"
        );
    }
    assert_eq!(t.export(), before);

    // With -f: replaced, and the output says what was replaced.
    let doc = t.json(&["ln", "-f", "/b", "/l"]);
    assert_eq!(doc["replaced"], "link");
    assert_eq!(t.ok(&["readlink", "/l"]), "/b\n");
    t.run(&["ln", "--force", "/b", "/a"]).success();
    assert_eq!(t.json(&["get", "--no-follow", "/a"]), json!({"link": "/b"}));
    // Children without an object at the path are not in the way (a link and children coexist).
    t.run(&["put", "/d/x", "{}"]).success();
    t.run(&["ln", "/b", "/d"]).success();
    assert_eq!(t.ok(&["ls", "/d"]), "x\n");
    assert!(t.ok(&["ln", "--help"]).contains("replaced"));
}

#[test]
fn dry_runs_refuse_what_the_real_run_refuses() {
    let t = Env::new();
    t.run(&["put", "/a/b", "{}"]).success();
    let before = t.export();
    let long = "x".repeat(1100);
    let long_path = format!("/{long}");
    let big = format!(r#"{{"k": "{}"}}"#, "x".repeat(410_000));
    let cases: Vec<(Vec<&str>, Option<&str>, i32, &str)> = vec![
        // Over DynamoDB's 400 KB item limit, as the row would be written.
        (vec!["put", "/big"], Some(&big), 1, "item too large"),
        // Attribute names dynatree keeps for itself.
        (
            vec!["put", "/k", r#"{"Key": 1}"#],
            None,
            1,
            "invalid attribute name",
        ),
        (
            vec!["put", "/k", r#"{"¦x": 1}"#],
            None,
            1,
            "invalid attribute name",
        ),
        // A component over DynamoDB's range key limit.
        (vec!["put", &long_path, "{}"], None, 1, "bytes"),
        (vec!["ln", &long_path, "/l"], None, 1, "bytes"),
        (vec!["ln", "/a/b", &long_path], None, 1, "bytes"),
        // The reserved character in a path.
        (vec!["put", "/a¦b", "{}"], None, 1, "reserved"),
        // What rm refuses.
        (vec!["rm", "/nothing"], None, 3, "not found"),
        (vec!["rm", "/a"], None, 1, "rm -r"),
        (vec!["rm", "-r", "/nothing"], None, 3, "not found"),
    ];
    for (args, stdin, code, why) in cases {
        let run = |dry: bool| {
            let mut c = t.cmd();
            c.args(&args);
            if dry {
                c.arg("--dry-run");
            }
            if let Some(input) = stdin {
                c.write_stdin(input);
            }
            one_error_line(c.assert(), code)
        };
        let (real, dry) = (run(false), run(true));
        assert!(real.contains(why), "{args:?}: {real}");
        assert_eq!(dry, real, "{args:?}");
    }
    assert_eq!(t.export(), before);
}

#[test]
fn service_errors_print_on_one_line() {
    // A table name DynamoDB refuses: the request, the table, the service's code and message,
    // and the request id.
    let err = one_error_line(
        dynatree()
            .args([
                "--endpoint-url",
                &crate::common::endpoint(),
                "--table",
                "ab",
                "ls",
            ])
            .assert(),
        1,
    );
    assert!(
        err.starts_with(
            "dynatree: error: DescribeTable on table ab failed: ValidationException: Invalid table/index name."
        ),
        "{err}"
    );
    assert!(
        err.trim_end().ends_with(')') && err.contains(" (request id "),
        "{err}"
    );
    // Capacity DynamoDB refuses.
    let t = Env::absent();
    let err = t.fails(
        1,
        &[
            "create-table",
            "--billing",
            "provisioned",
            "--read-capacity",
            "0",
        ],
    );
    assert!(
        err.starts_with(&format!(
            "dynatree: error: CreateTable on table {} failed: ValidationException: ",
            t.table
        )),
        "{err}"
    );
    assert!(err.contains(" (request id "), "{err}");
}

#[test]
fn create_table_on_an_existing_table_says_so() {
    let t = Env::new();
    t.run(&["put", "/a", "{}"]).success();
    assert_eq!(
        t.ok(&["create-table"]),
        format!(
            "table {} exists already (on-demand); nothing to change\n",
            t.table
        )
    );
    assert_eq!(t.json(&["create-table"])["created"], false);

    // Another billing mode is refused with the command that changes it; nothing changes.
    for dry in [false, true] {
        let mut args = vec!["create-table", "--billing", "provisioned"];
        if dry {
            args.push("--dry-run");
        }
        let err = t.fails(1, &args);
        assert!(
            err.contains("exists already with on-demand billing, not provisioned 5/5"),
            "{err}"
        );
        assert!(
            err.contains(&format!(
                "`aws dynamodb update-table --table-name {} --billing-mode PROVISIONED",
                t.table
            )),
            "{err}"
        );
    }
    let client = dynatree_testing::client_for(&t.endpoint);
    let describe = || {
        runtime()
            .block_on(client.describe_table().table_name(&t.table).send())
            .unwrap()
            .table
            .unwrap()
    };
    let billing = describe()
        .billing_mode_summary()
        .and_then(|b| b.billing_mode().cloned());
    assert_eq!(
        billing,
        Some(aws_sdk_dynamodb::types::BillingMode::PayPerRequest)
    );

    // What it lacks is added, and said; the objects stay.
    assert_eq!(
        t.ok(&["--path-index", "1", "create-table", "--dry-run"]),
        format!(
            "table {} exists already (on-demand); would add or turn on: index dynatree_paths\n",
            t.table
        )
    );
    assert!(describe().global_secondary_indexes().is_empty());
    assert_eq!(
        t.ok(&["--path-index", "1", "create-table"]),
        format!(
            "table {} exists already (on-demand); added or turned on: index dynatree_paths\n",
            t.table
        )
    );
    assert_eq!(describe().global_secondary_indexes().len(), 1);
    assert_eq!(t.ok(&["ls"]), "a\n");

    // A provisioned table: the same capacity is nothing to change, another is refused.
    let p = Env::with(&["--billing", "provisioned", "--read-capacity", "3"]);
    assert!(
        p.ok(&[
            "create-table",
            "--billing",
            "provisioned",
            "--read-capacity",
            "3"
        ])
        .ends_with("exists already (provisioned 3/5); nothing to change\n")
    );
    let err = p.fails(1, &["create-table", "--billing", "on-demand"]);
    assert!(err.contains("--billing-mode PAY_PER_REQUEST`"), "{err}");
    // Without --billing, the table's billing is kept.
    p.run(&["create-table"]).success();
}

/// An application's type that fills the secondary index `by_email`.
#[derive(Debug, dynatree::Hierarchical, serde::Serialize, serde::Deserialize)]
#[dynatree(path = "Users/{id}", index(name = "by_email", hash = email))]
struct User {
    id: String,
    email: String,
}

#[test]
fn indexes_are_learned_from_the_table() {
    // The path index: its depth comes from the table, without the flag.
    let t = Env::with(&["--path-index", "1"]);
    t.run(&["put", "/a/b", r#"{"v": 1}"#]).success();
    t.run(&["ln", "/a/b", "/l"]).success();
    t.cmd()
        .arg("import")
        .write_stdin("{\"path\":\"/a/c\",\"item\":{}}\n")
        .assert()
        .success();
    // Every row has its index values: the check finds no gap, with or without the flag.
    t.run(&["check"]).success();
    t.run(&["--path-index", "1", "check"]).success();
    // A flag that disagrees names both depths; nothing is written.
    let before = t.export();
    let err = t.fails(1, &["--path-index", "2", "put", "/x", "{}"]);
    assert_eq!(
        err,
        format!(
            "dynatree: error: --path-index 2 disagrees with table {}: its path index has depth 1; drop --path-index (the depth comes from the table) or pass --path-index 1\n",
            t.table
        )
    );
    assert_eq!(t.export(), before);

    // A table with the path index but no record of its depth (as another program or an older
    // dynatree leaves it): reads work, writes and checks need the flag.
    let client = dynatree_testing::client_for(&t.endpoint);
    let key = dynatree::storage::TableSettings::key('¦');
    runtime()
        .block_on(
            client
                .delete_item()
                .table_name(&t.table)
                .key("Key", aws_sdk_dynamodb::types::AttributeValue::S(key.hash))
                .key(
                    "Child",
                    aws_sdk_dynamodb::types::AttributeValue::S(key.range),
                )
                .send(),
        )
        .unwrap();
    assert_eq!(t.ok(&["ls", "/a"]), "b\nc\n");
    for args in [
        &["put", "/x", "{}"][..],
        &["put", "/x", "{}", "--dry-run"],
        &["rm", "/a/b"],
        &["check"],
    ] {
        let err = t.fails(1, args);
        assert!(
            err.contains("has the path index dynatree_paths but no record of its depth")
                && err.contains("pass --path-index DEPTH"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(t.export(), before);
    t.run(&["--path-index", "1", "put", "/x", "{}"]).success();
    t.run(&["--path-index", "1", "check"]).success();

    // A secondary index an application's type fills: the command line cannot compute its
    // values from JSON, so it refuses objects and links where that type lives.
    let app = Env::absent();
    let client = dynatree_testing::client_for(&app.endpoint);
    runtime().block_on(async {
        let tree = dynatree::Tree::builder(dynatree::DynamoDbTable::new(client, &app.table))
            .indexes_of::<User>()
            .build()
            .unwrap();
        tree.create_table().await.unwrap();
        tree.repo::<User>()
            .put(&User {
                id: "1".into(),
                email: "ann@example.com".into(),
            })
            .await
            .unwrap();
    });
    let before = app.export();
    let record = "{\"path\":\"/Users/3\",\"item\":{\"email\":{\"S\":\"c@example.com\"}}}\n";
    for (args, stdin) in [
        (
            &["put", "/Users/2", r#"{"email": "b@example.com"}"#][..],
            None,
        ),
        (&["put", "/Users/2", "{}", "--dry-run"], None),
        (&["put", "/Tenants/t1/Users/2", "{}"], None),
        (&["ln", "/Users/1", "/Users/2"], None),
        (&["import"], Some(record)),
        (&["import", "--dry-run"], Some(record)),
    ] {
        let mut c = app.cmd();
        c.args(args);
        if let Some(input) = stdin {
            c.write_stdin(input);
        }
        let err = one_error_line(c.assert(), 1);
        assert!(
            err.contains("matches the template Users/{id} of the secondary index by_email")
                && err.contains("write it through your application"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(app.export(), before);
    // Elsewhere in the same table, the command line writes.
    app.run(&["put", "/Users/1/Notes/n1", "{}"]).success();
    app.run(&["ln", "/Users/1", "/Latest"]).success();
}

#[test]
fn a_link_index_is_recorded_by_create_table_and_kept_by_every_command() {
    let t = Env::with(&["--link-index", "1"]);
    t.run(&["put", "/a/b", r#"{"v": 1}"#]).success();
    t.run(&["ln", "/a/b", "/l"]).success();
    // The link has its entry (the check finds no link without one), and a move finds the
    // link through it and rewrites it.
    t.run(&["check"]).success();
    t.run(&["mv", "/a", "/z"]).success();
    assert_eq!(t.ok(&["readlink", "/l"]), "/z/b\n");
    // Asking again for the same depth changes nothing; another depth is refused.
    assert!(
        t.ok(&["create-table", "--link-index", "1"])
            .ends_with("nothing to change\n")
    );
    let err = t.fails(1, &["create-table", "--link-index", "2"]);
    assert!(err.contains("keeps a link index of depth 1"), "{err}");
    // A deleted link leaves its entry stale: check counts it (no violation), a dry run of the
    // repair deletes nothing, the repair deletes it.
    t.run(&["rm", "/l"]).success();
    let said = t.ok(&["check"]);
    assert!(
        said.contains("healthy (1 stale link index entries"),
        "{said}"
    );
    let said = t.ok(&["repair", "--dry-run"]);
    assert!(
        said.contains("1 stale link index entries would be deleted"),
        "{said}"
    );
    assert!(t.ok(&["check"]).contains("1 stale link index entries"));
    let said = t.ok(&["repair"]);
    assert!(
        said.contains("1 stale link index entries deleted"),
        "{said}"
    );
    let said = t.ok(&["check"]);
    assert!(!said.contains("stale"), "{said}");

    // Added to a table with a link already: check reports the link without its entry, a dry
    // run writes nothing, and repair indexes it.
    let u = Env::new();
    u.run(&["put", "/a/b", r#"{"v": 1}"#]).success();
    u.run(&["ln", "/a/b", "/l"]).success();
    let said = u.ok(&["create-table", "--link-index", "1", "--dry-run"]);
    assert!(
        said.contains("would add or turn on: link index of depth 1"),
        "{said}"
    );
    u.run(&["check"]).success();
    u.run(&["create-table", "--link-index", "1"]).success();
    let out = u.run(&["check"]).code(1);
    let report = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        report.contains("missing-index /l: a link without its entry in the link index"),
        "{report}"
    );
    u.run(&["repair"]).success();
    u.run(&["check"]).success();
}

#[test]
fn sharded_directories_are_recorded_by_create_table_and_kept_by_every_command() {
    let t = Env::new();
    // A template or count the tree refuses is refused by the dry run too, before anything.
    for bad in [
        "Accounts//Links=4",
        "Accounts/{id}/Links=1",
        "Accounts/{id/Links=4",
    ] {
        let err = t.fails(1, &["create-table", "--sharded", bad, "--dry-run"]);
        assert!(err.contains("sharded directory"), "{bad}: {err}");
    }
    let said = t.ok(&[
        "create-table",
        "--sharded",
        "Accounts/{id}/Links=4",
        "--dry-run",
    ]);
    assert!(
        said.contains("would add or turn on: sharded directory Accounts/{id}/Links in 4 shards"),
        "{said}"
    );
    t.run(&["create-table", "--sharded", "Accounts/{id}/Links=4"])
        .success();
    for name in ["d", "b", "a", "c"] {
        t.run(&["put", &format!("/Accounts/1/Links/{name}"), r#"{"v": 1}"#])
            .success();
    }
    // Every command's tree follows the table's settings: the children are listed from their
    // shards, in order, and the table checks healthy.
    assert_eq!(t.ok(&["ls", "/Accounts/1/Links"]), "a\nb\nc\nd\n");
    t.run(&["check"]).success();
    t.run(&["mv", "/Accounts/1/Links", "/Accounts/2/Links"])
        .success();
    assert_eq!(t.ok(&["ls", "/Accounts/2/Links"]), "a\nb\nc\nd\n");
    t.run(&["check"]).success();
    // The same sharding again changes nothing; another count is refused.
    assert!(
        t.ok(&["create-table", "--sharded", "Accounts/*/Links=4"])
            .ends_with("nothing to change\n")
    );
    let err = t.fails(1, &["create-table", "--sharded", "Accounts/{id}/Links=8"]);
    assert!(err.contains("the count cannot change"), "{err}");
}
