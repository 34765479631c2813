//! Runs Amazon's DynamoDB Local in the foreground for trying the `dynatree` command line and the
//! examples against a real DynamoDB API: installs it on first use (like the test suite), starts
//! it on a free loopback port, prints the settings to use, and stops it on Ctrl-C.
//!
//! ```text
//! cargo run -p examples --bin dynamodb-local
//! ```

use dynatree_testing::DynamoDbLocal;

fn main() -> std::process::ExitCode {
    let local = match DynamoDbLocal::start() {
        Ok(local) => local,
        Err(e) => {
            eprintln!("dynamodb-local: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let endpoint = local.endpoint();
    println!("DynamoDB Local is running at {endpoint} (Ctrl-C stops it). In another shell:");
    println!();
    println!("  export AWS_ENDPOINT_URL_DYNAMODB={endpoint} AWS_REGION=us-east-1");
    println!("  export AWS_ENDPOINT_URL_DYNAMODB_STREAMS={endpoint}");
    println!("  export AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local DYNATREE_TABLE=links");
    println!("  dynatree create-table && dynatree ls");
    // The server stops with this process: when it is dropped, or (on Ctrl-C, which ends the
    // process without unwinding) by its watchdog.
    loop {
        std::thread::park();
    }
}
