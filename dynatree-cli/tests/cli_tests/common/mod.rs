//! The harness the command-line tests share: the real `dynatree` binary, isolated from the
//! machine's AWS configuration, against DynamoDB Local (one server for the test binary, started on
//! first use; a server that cannot start fails the tests with its reason), one table per test.

// Each subject uses part of this module.
#![allow(dead_code)]

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use assert_cmd::Command;
use dynatree_testing::DynamoDbLocal;
use serde_json::Value;

static LOCAL: OnceLock<Result<DynamoDbLocal, String>> = OnceLock::new();
static TABLES: AtomicU32 = AtomicU32::new(0);

/// The endpoint of this test binary's DynamoDB Local (shared by every access key).
pub fn endpoint() -> String {
    match LOCAL.get_or_init(|| DynamoDbLocal::start().map_err(|e| e.to_string())) {
        Ok(local) => local.endpoint(),
        Err(e) => panic!("DynamoDB Local could not start: {e}"),
    }
}

/// A table name no other test of this process uses.
pub fn fresh_name() -> String {
    format!(
        "cli-{}-{}",
        std::process::id(),
        TABLES.fetch_add(1, Ordering::Relaxed)
    )
}

/// Clears the environment of `c` but for dummy credentials and region: isolated from the
/// machine's AWS configuration (no config files, no instance metadata).
pub fn isolated(c: &mut std::process::Command) -> &mut std::process::Command {
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("AWS_ACCESS_KEY_ID", "dynatree")
        .env("AWS_SECRET_ACCESS_KEY", "dynatree")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_CONFIG_FILE", "/nonexistent/dynatree-cli-test")
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            "/nonexistent/dynatree-cli-test",
        )
        .env("AWS_EC2_METADATA_DISABLED", "true")
}

/// The binary, [`isolated`].
pub fn dynatree() -> Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_dynatree"));
    isolated(&mut c);
    Command::from_std(c)
}

/// A table of its own, reached through the binary.
#[derive(Debug)]
pub struct Env {
    /// The server's endpoint.
    pub endpoint: String,
    /// The table's name.
    pub table: String,
}

impl Env {
    /// A name for a table, not created.
    pub fn absent() -> Self {
        Self {
            endpoint: endpoint(),
            table: fresh_name(),
        }
    }

    /// A new table, created by `dynatree create-table` (plus `extra` flags).
    pub fn with(extra: &[&str]) -> Self {
        let env = Self::absent();
        let mut args = vec!["create-table"];
        args.extend_from_slice(extra);
        env.run(&args).success();
        env
    }

    /// A new table, created by `dynatree create-table`.
    pub fn new() -> Self {
        Self::with(&[])
    }

    /// The binary, with the endpoint and the table.
    pub fn cmd(&self) -> Command {
        let mut c = dynatree();
        c.env("DYNATREE_TABLE", &self.table)
            .args(["--endpoint-url", &self.endpoint]);
        c
    }

    /// Runs a command.
    pub fn run(&self, args: &[&str]) -> assert_cmd::assert::Assert {
        self.cmd().args(args).assert()
    }

    /// Runs a command that must succeed and returns its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).success().get_output().stdout.clone();
        String::from_utf8(out).expect("utf-8 output")
    }

    /// Runs a command that must fail with `code` and returns its stderr, checked to be one
    /// line in the command line's error form.
    pub fn fails(&self, code: i32, args: &[&str]) -> String {
        one_error_line(self.run(args), code)
    }

    /// Runs a command with `-o json` and parses its document.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend_from_slice(&["-o", "json"]);
        serde_json::from_str(&self.ok(&all)).expect("one JSON document")
    }

    /// Runs a command with `-o jsonl` and parses its lines.
    pub fn jsonl(&self, args: &[&str]) -> Vec<Value> {
        let mut all = args.to_vec();
        all.extend_from_slice(&["-o", "jsonl"]);
        self.ok(&all)
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    /// Every record of the table, as export writes them.
    pub fn export(&self) -> Vec<String> {
        self.ok(&["export"]).lines().map(str::to_owned).collect()
    }
}

/// The stderr of a run that failed with `code`: one line, `dynatree: error: ...`, without the
/// SDK's debug dumps, and nothing on stdout.
pub fn one_error_line(run: assert_cmd::assert::Assert, code: i32) -> String {
    let out = run.code(code).stdout("").get_output().stderr.clone();
    let err = String::from_utf8(out).expect("utf-8 stderr");
    assert!(err.starts_with("dynatree: error: "), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.contains("Error {"), "a debug dump: {err}");
    err
}
