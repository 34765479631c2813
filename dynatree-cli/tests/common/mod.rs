//! The harness of the tests that run the real `dynatree` binary against DynamoDB Local: one
//! server per test binary (started on first use; a server that cannot start fails the tests
//! with its reason), one table per test, created with the command line's own `create-table`.

// Each test binary uses its own part of the harness.
#![allow(dead_code)]

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use assert_cmd::Command;
use dynatree_testing::DynamoDbLocal;
use serde_json::Value;

static LOCAL: OnceLock<Result<DynamoDbLocal, String>> = OnceLock::new();
static TABLES: AtomicU32 = AtomicU32::new(0);

pub fn endpoint() -> String {
    match LOCAL.get_or_init(|| DynamoDbLocal::start().map_err(|e| e.to_string())) {
        Ok(local) => local.endpoint(),
        Err(e) => panic!("DynamoDB Local could not start: {e}"),
    }
}

/// A table of its own, reached through the binary.
#[derive(Debug)]
pub struct Env {
    pub endpoint: String,
    pub table: String,
}

impl Env {
    /// A new table, created by `dynatree create-table` (plus `extra` flags).
    pub fn with(extra: &[&str]) -> Self {
        let env = Self {
            endpoint: endpoint(),
            table: format!(
                "cli-{}-{}",
                std::process::id(),
                TABLES.fetch_add(1, Ordering::Relaxed)
            ),
        };
        let mut args = vec!["create-table"];
        args.extend_from_slice(extra);
        env.run(&args).success();
        env
    }

    pub fn new() -> Self {
        Self::with(&[])
    }

    /// The binary, with the endpoint, the table and dummy credentials, isolated from the
    /// machine's AWS configuration.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_dynatree"));
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
            .env("DYNATREE_TABLE", &self.table)
            .args(["--endpoint-url", &self.endpoint]);
        c
    }

    pub fn run(&self, args: &[&str]) -> assert_cmd::assert::Assert {
        self.cmd().args(args).assert()
    }

    /// Runs a command that must succeed and returns its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).success().get_output().stdout.clone();
        String::from_utf8(out).expect("utf-8 output")
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
