//! The follower example (`search-index`) runs to its end, on the in-memory table and on
//! DynamoDB Local through DynamoDB Streams, with its index matching the table both times. If
//! DynamoDB Local cannot start, the test fails saying what is missing.

use std::process::Command;

fn run(envs: &[(&str, String)]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_search-index"))
        .env_remove("DYNATREE_TABLE")
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "search-index failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn check(stdout: &str) {
    assert!(
        stdout.contains("moved /Accounts/acme/Links/go to /Accounts/globex/Links/go"),
        "{stdout}"
    );
    assert!(
        stdout.contains("search globex 'dynamotree': [\"/Accounts/globex/Links/go\"]"),
        "{stdout}"
    );
    assert!(stdout.contains("the index matches the table"), "{stdout}");
}

#[test]
fn the_follower_example_keeps_its_index_in_sync_on_both_backends() {
    check(&run(&[]));

    let local = match dynatree_testing::DynamoDbLocal::start() {
        Ok(l) => l,
        Err(e) => panic!("DynamoDB Local is required for this test: {e}"),
    };
    let endpoint = local.endpoint();
    let stdout = run(&[
        ("DYNATREE_TABLE", "search".to_owned()),
        ("AWS_ENDPOINT_URL_DYNAMODB", endpoint.clone()),
        ("AWS_ENDPOINT_URL_DYNAMODB_STREAMS", endpoint),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_ACCESS_KEY_ID", "local".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "local".to_owned()),
    ]);
    assert!(stdout.contains("backend: DynamoDB table"), "{stdout}");
    check(&stdout);
}
