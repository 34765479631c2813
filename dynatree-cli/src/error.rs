//! The command line's failures and their exit statuses.

use std::fmt;

/// Exit status of a failure other than the ones below.
pub const EXIT_FAILURE: u8 = 1;
/// Exit status when the path a command needs is missing.
pub const EXIT_NOT_FOUND: u8 = 3;
/// Exit status after Ctrl-C (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: u8 = 130;

/// A failure of a command: one line for stderr and the exit status.
///
/// # Examples
///
/// ```ignore
/// let e = CliError::not_found("nothing at /a");
/// assert_eq!(e.code(), 3);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    code: u8,
    message: String,
    /// The DynamoDB operation that failed, when the message names one (`"PutItem failed"`),
    /// so that [`CliError::on_table`] can say which table it was sent to.
    operation: Option<String>,
    /// The library's kind, for a failure that came from it.
    kind: Option<dynatree::ErrorKind>,
}

/// The command line's result type.
pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    /// A failure with exit status 1.
    pub fn msg(message: impl Into<String>) -> Self {
        Self {
            code: EXIT_FAILURE,
            message: message.into(),
            operation: None,
            kind: None,
        }
    }

    /// A missing path (exit status 3).
    pub fn not_found(message: impl Into<String>) -> Self {
        Self {
            code: EXIT_NOT_FOUND,
            message: message.into(),
            operation: None,
            kind: None,
        }
    }

    /// Ctrl-C (exit status 130); `message` says what is left and how to resume.
    pub fn interrupted(message: impl Into<String>) -> Self {
        Self {
            code: EXIT_INTERRUPTED,
            message: message.into(),
            operation: None,
            kind: None,
        }
    }

    /// The exit status.
    pub fn code(&self) -> u8 {
        self.code
    }

    /// The line printed on stderr (after `dynatree: error: `, or `dynatree: ` when
    /// interrupted).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The library's kind of the failure, if it came from the library.
    pub fn kind(&self) -> Option<dynatree::ErrorKind> {
        self.kind
    }

    /// The same failure with its message rewritten by `f`.
    pub fn map_message(mut self, f: impl FnOnce(&str) -> String) -> Self {
        self.message = f(&self.message);
        self
    }

    /// Prefixes the message with what was being done (`"reading /a: ..."`).
    pub fn context(mut self, what: impl fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }

    /// Names the table a failed request was sent to: `PutItem failed: ...` becomes
    /// `PutItem on table T failed: ...`. Other failures are kept as they are.
    pub fn on_table(mut self, table: &str) -> Self {
        if let Some(op) = self.operation.take() {
            self.message = self.message.replacen(
                &format!("{op} failed:"),
                &format!("{op} on table {table} failed:"),
                1,
            );
        }
        self
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

impl From<dynatree::Error> for CliError {
    fn from(e: dynatree::Error) -> Self {
        let message = describe(&e);
        let mut out = if e.is_not_found() {
            Self::not_found(message)
        } else {
            Self::msg(message)
        };
        out.operation = e.operation().map(str::to_owned);
        out.kind = Some(e.kind());
        out
    }
}

/// A dynatree error on one line. A request that failed reads `PutItem failed: <the service's
/// error code>: <its message> (request id R)`, after what the library was doing when it wraps
/// it (`already exists: /a: PutItem failed: ...`); the SDK's own error (a debug dump) is left
/// out. Other errors list their sources, as [`one_line`].
pub fn describe(e: &dynatree::Error) -> String {
    if e.operation().is_none() && e.service_code().is_none() {
        return one_line(e);
    }
    // Down the chain of dynatree errors to the one the backend call returned.
    let mut outer: Vec<String> = Vec::new();
    let mut call = e;
    while let Some(inner) =
        std::error::Error::source(call).and_then(|s| s.downcast_ref::<dynatree::Error>())
    {
        outer.push(call.to_string());
        call = inner;
    }
    let what = match call.operation() {
        Some(op) => format!("{op} failed"),
        None => call.to_string(),
    };
    let why = match call.service_code() {
        Some(code) => {
            let mut why = code.to_owned();
            if let Some(m) = call.service_message().filter(|m| !m.is_empty()) {
                why.push_str(": ");
                why.push_str(m);
            }
            if let Some(id) = call.request_id() {
                why.push_str(&format!(" (request id {id})"));
            }
            why
        }
        // No answer from the service (connection, timeout): the SDK's error says why.
        None => one_line(call),
    };
    outer.push(format!("{what}: {why}"));
    outer.join(": ").replace('\n', " ")
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        Self::msg(e.to_string())
    }
}

impl From<serde_json::Error> for CliError {
    fn from(e: serde_json::Error) -> Self {
        Self::msg(format!("invalid JSON: {e}"))
    }
}

/// An error and its sources on one line, each source once (`a: b: c`).
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use dynatree::{Error, ErrorKind};

    #[test]
    fn statuses() {
        let e: CliError = Error::new(ErrorKind::NotFound, "nothing at /a").into();
        assert_eq!(e.code(), EXIT_NOT_FOUND);
        assert_eq!(e.message(), "not found: nothing at /a");
        let e: CliError = Error::new(ErrorKind::InvalidPath, "empty component").into();
        assert_eq!(e.code(), EXIT_FAILURE);
        assert_eq!(CliError::interrupted("x").code(), 130);
    }

    #[test]
    fn sources_on_one_line() {
        let e = Error::new(ErrorKind::Backend, "request failed")
            .with_source(std::io::Error::other("connection\nrefused"));
        assert_eq!(
            CliError::from(e).message(),
            "storage backend error: request failed: connection refused"
        );
        let e = CliError::msg("boom").context("reading /a");
        assert_eq!(e.to_string(), "reading /a: boom");
    }

    #[test]
    fn service_errors_on_one_line() {
        let refused = || {
            Error::new(
                ErrorKind::Validation,
                "One or more parameter values were invalid",
            )
            .with_operation("PutItem")
            .with_service_code("ValidationException")
            .with_service_message("One or more parameter values were invalid")
            .with_request_id("R1")
            .with_source(std::io::Error::other(
                "Error { code: \"ValidationException\", ... }",
            ))
        };
        let cli = CliError::from(refused()).on_table("T");
        assert_eq!(
            cli.message(),
            "PutItem on table T failed: ValidationException: One or more parameter values were invalid (request id R1)"
        );
        assert_eq!(cli.code(), EXIT_FAILURE);
        // Wrapped by the library: what it was doing comes first.
        let wrapped = Error::new(ErrorKind::Conflict, "/a").with_source(refused());
        assert_eq!(
            CliError::from(wrapped).message(),
            "conflicting concurrent write: /a: PutItem failed: ValidationException: One or more parameter values were invalid (request id R1)"
        );
        // No answer: the transport's reason.
        let e = Error::new(ErrorKind::Backend, "")
            .with_operation("Query")
            .with_source(std::io::Error::other("connection refused"));
        assert_eq!(
            CliError::from(e).on_table("T").message(),
            "Query on table T failed: storage backend error: connection refused"
        );
    }
}
