//! The one error type of dynatree: [`Error`], its [`ErrorKind`] and the [`Result`] alias.

use std::fmt;

/// A `Result` whose error defaults to [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What went wrong, as a stable category.
///
/// New kinds may be added in minor releases, so match with a wildcard arm.
///
/// # Examples
///
/// ```
/// use dynatree::{ErrorKind, Path};
///
/// let err = Path::new(["a¦b"])?.validate('¦').unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::InvalidPath);
/// assert!(err.is_invalid_input());
/// # Ok::<(), dynatree::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A path was empty where one is required, had an empty component, contained the reserved
    /// character, or would produce a key over DynamoDB's byte limits. Nothing was sent.
    InvalidPath,
    /// An attribute name was reserved (`Key`, `Child`, or starting with the reserved character).
    /// Nothing was sent.
    InvalidAttribute,
    /// The reserved character chosen for a tree cannot be used.
    InvalidDelimiter,
    /// An item would exceed DynamoDB's 400 KB item size limit. Nothing was sent.
    ItemTooLarge,
    /// A value DynamoDB cannot store: NaN or infinity, a number beyond 38 significant digits
    /// or outside 1E-130 to 9.99…E+125 in magnitude, an empty set or a set with duplicate
    /// members, a version field that cannot be incremented. Nothing was sent.
    InvalidValue,
    /// A value could not be converted to or from DynamoDB attributes.
    Serialization,
    /// The path holds no object (for operations that need one, such as `read_link`).
    NotFound,
    /// The path holds an object that is not a link.
    NotALink,
    /// Following links went around a cycle or past the hop limit.
    LinkLoop,
    /// A conditional write's condition did not hold.
    ConditionFailed,
    /// `create` found something already at the path.
    AlreadyExists,
    /// The path is inside a subtree that is being moved; write again when the move is done.
    Locked,
    /// The node still has children and the call was not asked to deal with them.
    HasChildren,
    /// A transaction was cancelled; [`Error::cancellation_reasons`] has one entry per action.
    TransactionCanceled,
    /// A concurrent writer kept winning and the operation gave up after its retries.
    Conflict,
    /// This call ran a move, copy or subtree deletion too slowly: its lease ran out and another
    /// call (a [`Tree::resume`](crate::Tree::resume)) took the operation over. This call wrote
    /// nothing more after that; the operation's outcome is the other call's (see
    /// [`Tree::pending`](crate::Tree::pending)).
    TakenOver,
    /// DynamoDB throttled the request (throughput, request limit, or provisioned capacity).
    Throttled,
    /// A batch request still had unprocessed items after every retry;
    /// [`Error::unprocessed_count`] says how many.
    Unprocessed,
    /// DynamoDB rejected the request as invalid (`ValidationException`), or dynatree refused a
    /// query DynamoDB would reject (a range condition on an empty or oversized value, `between`
    /// with its bounds reversed, a start cursor outside the range condition) before sending it.
    Validation,
    /// The table does not exist (or is not active yet).
    TableNotFound,
    /// The table exists with a key schema this tree cannot use.
    TableMismatch,
    /// Any other failure of the storage backend (network, service error, timeout).
    Backend,
}

impl ErrorKind {
    fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidPath => "invalid path",
            ErrorKind::InvalidAttribute => "invalid attribute name",
            ErrorKind::InvalidDelimiter => "invalid reserved character",
            ErrorKind::ItemTooLarge => "item too large",
            ErrorKind::InvalidValue => "invalid attribute value",
            ErrorKind::Serialization => "serialization failed",
            ErrorKind::NotFound => "not found",
            ErrorKind::NotALink => "not a link",
            ErrorKind::LinkLoop => "link loop",
            ErrorKind::ConditionFailed => "condition failed",
            ErrorKind::AlreadyExists => "already exists",
            ErrorKind::Locked => "subtree held by another operation",
            ErrorKind::HasChildren => "node has children",
            ErrorKind::TransactionCanceled => "transaction canceled",
            ErrorKind::Conflict => "conflicting concurrent write",
            ErrorKind::TakenOver => "operation taken over by another call",
            ErrorKind::Throttled => "request throttled",
            ErrorKind::Unprocessed => "batch items left unprocessed",
            ErrorKind::Validation => "request rejected as invalid",
            ErrorKind::TableNotFound => "table not found",
            ErrorKind::TableMismatch => "table key schema mismatch",
            ErrorKind::Backend => "storage backend error",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why one action of a cancelled transaction failed, as DynamoDB reports it.
///
/// # Examples
///
/// ```
/// use dynatree::CancellationReason;
///
/// let r = CancellationReason::new("ConditionalCheckFailed", None);
/// assert!(r.is_condition_failed());
/// assert!(!CancellationReason::none().is_failure());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancellationReason {
    code: String,
    message: Option<String>,
}

impl CancellationReason {
    /// A reason with DynamoDB's code (`"None"`, `"ConditionalCheckFailed"`,
    /// `"TransactionConflict"`, `"ValidationError"`, `"ThrottlingError"`, …).
    pub fn new(code: impl Into<String>, message: Option<String>) -> Self {
        Self {
            code: code.into(),
            message,
        }
    }

    /// The reason of an action that did not fail (code `"None"`).
    pub fn none() -> Self {
        Self::new("None", None)
    }

    /// DynamoDB's code for this action.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// DynamoDB's message, if it sent one.
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// Whether this action's condition failed.
    pub fn is_condition_failed(&self) -> bool {
        self.code == "ConditionalCheckFailed"
    }

    /// Whether this action caused (or shared in) the cancellation.
    pub fn is_failure(&self) -> bool {
        self.code != "None"
    }
}

/// The error of every fallible dynatree operation.
///
/// Opaque: inspect it with [`Error::kind`] and the `is_*` predicates. The underlying SDK or
/// serde error, when there is one, is available through [`std::error::Error::source`]; the
/// `Display` output is a short phrase that does not repeat it.
///
/// # Examples
///
/// ```
/// use dynatree::{Error, ErrorKind};
///
/// let err = Error::new(ErrorKind::NotFound, "no object at /a/b");
/// assert!(err.is_not_found());
/// assert_eq!(err.to_string(), "not found: no object at /a/b");
/// ```
pub struct Error(Box<Inner>);

struct Inner {
    kind: ErrorKind,
    detail: String,
    source: Option<BoxError>,
    reasons: Vec<CancellationReason>,
    unprocessed: usize,
}

impl Error {
    /// An error of `kind` with a short lowercase detail (may be empty).
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Self {
        Self(Box::new(Inner {
            kind,
            detail: detail.into(),
            source: None,
            reasons: Vec::new(),
            unprocessed: 0,
        }))
    }

    /// Attaches the underlying error, reported by `source()`.
    #[must_use]
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.0.source = Some(source.into());
        self
    }

    /// A cancelled-transaction error with one reason per action, in request order.
    pub fn transaction_canceled(reasons: Vec<CancellationReason>) -> Self {
        let failed: Vec<String> = reasons
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_failure())
            .map(|(i, r)| format!("action {i}: {}", r.code()))
            .collect();
        let mut e = Self::new(ErrorKind::TransactionCanceled, failed.join(", "));
        e.0.reasons = reasons;
        e
    }

    /// A batch error: `count` items were still unprocessed after every retry.
    pub fn unprocessed(count: usize, what: &str) -> Self {
        let mut e = Self::new(
            ErrorKind::Unprocessed,
            format!("{count} {what} left unprocessed after every retry"),
        );
        e.0.unprocessed = count;
        e
    }

    /// The category of this error.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// For [`ErrorKind::TransactionCanceled`]: one reason per action, in request order.
    pub fn cancellation_reasons(&self) -> &[CancellationReason] {
        &self.0.reasons
    }

    /// For [`ErrorKind::Unprocessed`]: how many items were not written (or not read).
    pub fn unprocessed_count(&self) -> usize {
        self.0.unprocessed
    }

    /// The input was rejected before anything was sent (path, attribute, value, size,
    /// delimiter).
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self.kind(),
            ErrorKind::InvalidPath
                | ErrorKind::InvalidAttribute
                | ErrorKind::InvalidDelimiter
                | ErrorKind::ItemTooLarge
                | ErrorKind::InvalidValue
        )
    }

    /// [`ErrorKind::InvalidPath`].
    pub fn is_invalid_path(&self) -> bool {
        self.kind() == ErrorKind::InvalidPath
    }

    /// [`ErrorKind::NotFound`].
    pub fn is_not_found(&self) -> bool {
        self.kind() == ErrorKind::NotFound
    }

    /// [`ErrorKind::NotALink`].
    pub fn is_not_a_link(&self) -> bool {
        self.kind() == ErrorKind::NotALink
    }

    /// [`ErrorKind::LinkLoop`].
    pub fn is_link_loop(&self) -> bool {
        self.kind() == ErrorKind::LinkLoop
    }

    /// [`ErrorKind::ConditionFailed`].
    pub fn is_condition_failed(&self) -> bool {
        self.kind() == ErrorKind::ConditionFailed
    }

    /// [`ErrorKind::AlreadyExists`].
    pub fn is_already_exists(&self) -> bool {
        self.kind() == ErrorKind::AlreadyExists
    }

    /// [`ErrorKind::Locked`].
    pub fn is_locked(&self) -> bool {
        self.kind() == ErrorKind::Locked
    }

    /// [`ErrorKind::HasChildren`].
    pub fn is_has_children(&self) -> bool {
        self.kind() == ErrorKind::HasChildren
    }

    /// [`ErrorKind::TransactionCanceled`].
    pub fn is_transaction_canceled(&self) -> bool {
        self.kind() == ErrorKind::TransactionCanceled
    }

    /// [`ErrorKind::Throttled`].
    pub fn is_throttled(&self) -> bool {
        self.kind() == ErrorKind::Throttled
    }

    /// [`ErrorKind::Validation`].
    pub fn is_validation(&self) -> bool {
        self.kind() == ErrorKind::Validation
    }

    /// [`ErrorKind::Serialization`].
    pub fn is_serialization(&self) -> bool {
        self.kind() == ErrorKind::Serialization
    }

    /// Whether retrying the same call later may succeed (throttling, conflicts, unprocessed
    /// batch items, transaction conflicts, transient backend failures).
    pub fn is_retryable(&self) -> bool {
        match self.kind() {
            ErrorKind::Throttled
            | ErrorKind::Conflict
            | ErrorKind::Unprocessed
            | ErrorKind::Backend => true,
            ErrorKind::TransactionCanceled => self
                .0
                .reasons
                .iter()
                .any(|r| matches!(r.code(), "TransactionConflict" | "ThrottlingError")),
            _ => false,
        }
    }

    pub(crate) fn invalid_path(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidPath, detail)
    }

    pub(crate) fn serialization(detail: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::new(ErrorKind::Serialization, detail).with_source(source)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.0.kind)
            .field("detail", &self.0.detail);
        if !self.0.reasons.is_empty() {
            d.field("reasons", &self.0.reasons);
        }
        if let Some(s) = &self.0.source {
            d.field("source", s);
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.detail.is_empty() {
            write!(f, "{}", self.0.kind)
        } else {
            write!(f, "{}: {}", self.0.kind, self.0.detail)
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0.source {
            Some(s) => Some(&**s as &(dyn std::error::Error + 'static)),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_does_not_repeat_source() {
        let src = std::io::Error::other("socket closed");
        let e = Error::new(ErrorKind::Backend, "").with_source(src);
        assert_eq!(e.to_string(), "storage backend error");
        assert_eq!(
            std::error::Error::source(&e).unwrap().to_string(),
            "socket closed"
        );
    }

    #[test]
    fn canceled_lists_failed_actions() {
        let e = Error::transaction_canceled(vec![
            CancellationReason::none(),
            CancellationReason::new("ConditionalCheckFailed", None),
        ]);
        assert_eq!(
            e.to_string(),
            "transaction canceled: action 1: ConditionalCheckFailed"
        );
        assert_eq!(e.cancellation_reasons().len(), 2);
    }

    #[test]
    fn error_is_send_sync_and_small() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<Error>();
        assert_eq!(std::mem::size_of::<Error>(), std::mem::size_of::<usize>());
    }
}
