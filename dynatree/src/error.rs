//! The one error type of dynatree: [`Error`], its [`ErrorKind`] and the [`Result`] alias.

use std::fmt;

/// A `Result` whose error defaults to [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Who was wrong when an operation failed, the party at fault: the caller, the data, or the
/// service ([`ErrorKind::party`], [`Error::party`]).
///
/// The three parties are the ones a caller reacts to differently: fix the call, look at the
/// data (or tell your own caller about it), or wait and retry / alert an operator. In an HTTP
/// service they map to a 4xx for a bad request, a 404/409/412 for the data, and a 5xx (503 for
/// throttling) for the service.
///
/// Every kind has exactly one party, so the enum is exhaustive and a `match` on it needs no
/// wildcard arm. (Not named `Fault`: `dynatree_testing::Fault` is the fault a test injects.)
///
/// # Examples
///
/// ```
/// use dynatree::{Error, ErrorKind, error::Party};
///
/// fn status(err: &Error) -> u16 {
///     match err.party() {
///         Party::Caller => 400,
///         Party::Data if err.is_not_found() => 404,
///         Party::Data => 409,
///         Party::Service if err.is_throttled() => 503,
///         Party::Service => 500,
///     }
/// }
///
/// assert_eq!(status(&Error::new(ErrorKind::InvalidPath, "")), 400);
/// assert_eq!(status(&Error::new(ErrorKind::NotFound, "")), 404);
/// assert_eq!(status(&Error::new(ErrorKind::ConditionFailed, "")), 409);
/// assert_eq!(status(&Error::new(ErrorKind::Throttled, "")), 503);
/// assert_eq!(ErrorKind::Validation.party(), Party::Service);
/// assert_eq!(Party::Data.to_string(), "data");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Party {
    /// The caller's mistake: a bad argument or a misuse, refused by dynatree before anything
    /// was sent. The same call will fail again; fix the call.
    Caller,
    /// The state of the data: what the call expected of the table's items did not hold (nothing
    /// at the path, a failed condition, something already there, a concurrent writer, a
    /// stored item that does not fit the type). A later call may succeed once the data changed.
    Data,
    /// The service or its setup: DynamoDB throttled or refused the request, the table is
    /// missing or unusable, or the backend failed (network, timeout, internal error).
    Service,
}

impl Party {
    fn as_str(self) -> &'static str {
        match self {
            Party::Caller => "caller",
            Party::Data => "data",
            Party::Service => "service",
        }
    }
}

impl fmt::Display for Party {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What went wrong, as a stable category.
///
/// New kinds may be added in minor releases, so match with a wildcard arm, or match on the
/// kind's [`party`](ErrorKind::party), which is total. Each variant says its party.
///
/// # Examples
///
/// ```
/// use dynatree::{ErrorKind, error::Party, Path};
///
/// let err = Path::new(["a¦b"])?.validate('¦').unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::InvalidPath);
/// assert_eq!(err.kind().party(), Party::Caller);
/// assert!(err.is_invalid_input());
/// # Ok::<(), dynatree::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Caller: a path was empty where one is required, had an empty component, contained the
    /// reserved character, or would produce a key over DynamoDB's byte limits. Nothing was
    /// sent.
    InvalidPath,
    /// Caller: an attribute name was reserved (`Key`, `Child`, or starting with the reserved
    /// character). Nothing was sent.
    InvalidAttribute,
    /// Caller: the reserved character chosen for a tree cannot be used.
    InvalidReserved,
    /// Caller: an item would exceed DynamoDB's 400 KB item size limit. Nothing was sent.
    ItemTooLarge,
    /// Caller: a value DynamoDB cannot store: NaN or infinity, a number beyond 38 significant
    /// digits or outside 1E-130 to 9.99…E+125 in magnitude, an empty set or a set with
    /// duplicate members, a version field that cannot be incremented, a secondary-index key
    /// that is empty or over DynamoDB's key limits, an index key value with the reserved
    /// character (written, or asked for by an index query), NaN or infinity in a typed
    /// condition. Nothing was sent. Also an addition ([`Patch::add`](crate::Patch::add)) that
    /// would take a number outside its field's type: refused by the service through the
    /// patch's condition, so nothing was written.
    InvalidValue,
    /// Caller: dynatree refused an argument or a use before sending anything, because it is
    /// wrong whatever the data: a query DynamoDB would reject (a range condition on an empty or
    /// oversized value, `between` with its bounds reversed, two range conditions), a cursor
    /// the query cannot have returned (another query's, or a position that is empty, over
    /// DynamoDB's key limits or outside the query's range condition or prefix), an index the
    /// type does not declare, a strategy the tree was not built for, a patch of a denormalized
    /// copy (only dynatree writes copies).
    InvalidArgument,
    /// Data: a value could not be converted to or from DynamoDB attributes: usually a stored
    /// item that does not fit the type it is read as (a value of a type that does not
    /// serialize as a map of attributes, a bug in the caller's type, is reported the same way).
    Serialization,
    /// Data: the path holds no object (for operations that need one, such as `read_link`).
    NotFound,
    /// Data: the path holds an object that is not a link.
    NotALink,
    /// Data: following links went around a cycle or past the hop limit.
    LinkLoop,
    /// Data: a [scoped tree](crate::Tree::scope) met a stored link whose target is outside its
    /// root (written by the parent tree or another program); it is not followed.
    OutOfScope,
    /// Data: a conditional write's condition did not hold.
    ConditionFailed,
    /// Data: `create` found something already at the path.
    AlreadyExists,
    /// Data: the path is inside a subtree that is being moved; write again when the move is
    /// done.
    Locked,
    /// Data: the node still has children and the call was not asked to deal with them.
    HasChildren,
    /// Data (usually): a transaction was cancelled; [`Error::cancellation_reasons`] has one
    /// entry per action. [`Error::party`] is [`Party::Service`] when DynamoDB cancelled it for
    /// throttling or validation rather than for a condition or a conflict.
    TransactionCanceled,
    /// Data: a concurrent writer kept winning and the operation gave up after its retries.
    Conflict,
    /// Data: this call ran a move, copy or subtree deletion too slowly: its lease ran out and
    /// another call (a [`Tree::resume`](crate::Tree::resume)) took the operation over. This call
    /// wrote nothing more after that; the operation's outcome is the other call's (see
    /// [`Tree::pending`](crate::Tree::pending)).
    TakenOver,
    /// Data: the operation did its work but other operations kept it from finishing a last
    /// step within the tree's [`RetryPolicy`](crate::RetryPolicy) (a move with
    /// [`LinkPolicy::Rewrite`](crate::ops::LinkPolicy::Rewrite) whose links into its source
    /// kept being carried away by other moves). It stays recorded:
    /// [`Tree::resume`](crate::Tree::resume), or the same call again, finishes it.
    Unfinished,
    /// Data: the table's stream no longer holds the position a read asked for: a watch's
    /// cursor (or a shard in it) older than the stream's 24-hour retention, or a shard
    /// iterator past its fifteen minutes. See [`watch`](crate::watch) for how to
    /// resynchronise.
    CursorExpired,
    /// Service: DynamoDB throttled the request for throughput (`ThrottlingException`,
    /// `ProvisionedThroughputExceededException`, the account's `RequestLimitExceeded`), every
    /// try that the tree's [`RetryPolicy`](crate::RetryPolicy) allowed.
    Throttled,
    /// Service: a control-plane limit of DynamoDB (`LimitExceededException`): too many table or
    /// index operations at once (one index is built at a time per table), or an account quota.
    LimitExceeded,
    /// Service: a batch request still had unprocessed items after every retry;
    /// [`Error::unprocessed_count`] says how many.
    Unprocessed,
    /// Service: DynamoDB (or a backend that checks as it does) rejected the request as
    /// invalid (`ValidationException`, `ItemCollectionSizeLimitExceededException`); the detail
    /// is DynamoDB's message. What dynatree refuses before sending is
    /// [`InvalidArgument`](ErrorKind::InvalidArgument) or another caller kind.
    Validation,
    /// Service: the table does not exist (or is not active yet).
    TableNotFound,
    /// Service: the table exists with a key schema this tree cannot use.
    TableMismatch,
    /// Service: any other failure of the storage backend (network, timeout, access denied,
    /// internal error of the service).
    Backend,
}

impl ErrorKind {
    fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidPath => "invalid path",
            ErrorKind::InvalidAttribute => "invalid attribute name",
            ErrorKind::InvalidReserved => "invalid reserved character",
            ErrorKind::ItemTooLarge => "item too large",
            ErrorKind::InvalidValue => "invalid attribute value",
            ErrorKind::InvalidArgument => "invalid argument",
            ErrorKind::Serialization => "serialization failed",
            ErrorKind::NotFound => "not found",
            ErrorKind::NotALink => "not a link",
            ErrorKind::LinkLoop => "link loop",
            ErrorKind::OutOfScope => "outside the scope",
            ErrorKind::CursorExpired => "stream position expired",
            ErrorKind::ConditionFailed => "condition failed",
            ErrorKind::AlreadyExists => "already exists",
            ErrorKind::Locked => "subtree held by another operation",
            ErrorKind::HasChildren => "node has children",
            ErrorKind::TransactionCanceled => "transaction canceled",
            ErrorKind::Conflict => "conflicting concurrent write",
            ErrorKind::TakenOver => "operation taken over by another call",
            ErrorKind::Unfinished => "operation recorded but not finished",
            ErrorKind::Throttled => "request throttled",
            ErrorKind::LimitExceeded => "service limit exceeded",
            ErrorKind::Unprocessed => "batch items left unprocessed",
            ErrorKind::Validation => "request rejected as invalid",
            ErrorKind::TableNotFound => "table not found",
            ErrorKind::TableMismatch => "table key schema mismatch",
            ErrorKind::Backend => "storage backend error",
        }
    }

    /// Who was wrong: the caller, the data, or the service (see [`Party`]).
    ///
    /// For [`TransactionCanceled`](ErrorKind::TransactionCanceled) this is the usual answer,
    /// [`Party::Data`]; [`Error::party`] looks at the cancellation reasons.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{ErrorKind, error::Party};
    ///
    /// assert_eq!(ErrorKind::InvalidArgument.party(), Party::Caller);
    /// assert_eq!(ErrorKind::AlreadyExists.party(), Party::Data);
    /// assert_eq!(ErrorKind::Validation.party(), Party::Service);
    /// assert_eq!(ErrorKind::Throttled.party(), Party::Service);
    /// ```
    pub fn party(self) -> Party {
        match self {
            ErrorKind::InvalidPath
            | ErrorKind::InvalidAttribute
            | ErrorKind::InvalidReserved
            | ErrorKind::ItemTooLarge
            | ErrorKind::InvalidValue
            | ErrorKind::InvalidArgument => Party::Caller,
            ErrorKind::Serialization
            | ErrorKind::NotFound
            | ErrorKind::NotALink
            | ErrorKind::LinkLoop
            | ErrorKind::OutOfScope
            | ErrorKind::ConditionFailed
            | ErrorKind::AlreadyExists
            | ErrorKind::Locked
            | ErrorKind::HasChildren
            | ErrorKind::TransactionCanceled
            | ErrorKind::Conflict
            | ErrorKind::TakenOver
            | ErrorKind::Unfinished
            | ErrorKind::CursorExpired => Party::Data,
            ErrorKind::Throttled
            | ErrorKind::LimitExceeded
            | ErrorKind::Unprocessed
            | ErrorKind::Validation
            | ErrorKind::TableNotFound
            | ErrorKind::TableMismatch
            | ErrorKind::Backend => Party::Service,
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
/// use dynatree::error::CancellationReason;
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
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::error::CancellationReason;
    ///
    /// let r = CancellationReason::new("TransactionConflict", Some("conflict on /a".into()));
    /// assert_eq!(r.code(), "TransactionConflict");
    /// assert!(r.is_failure() && !r.is_condition_failed());
    /// ```
    pub fn new(code: impl Into<String>, message: Option<String>) -> Self {
        Self {
            code: code.into(),
            message,
        }
    }

    /// The reason of an action that did not fail (code `"None"`).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::error::CancellationReason;
    ///
    /// let ok = CancellationReason::none();
    /// assert_eq!(ok.code(), "None");
    /// assert!(!ok.is_failure());
    /// ```
    pub fn none() -> Self {
        Self::new("None", None)
    }

    /// DynamoDB's code for this action.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::error::CancellationReason;
    ///
    /// assert_eq!(CancellationReason::new("ThrottlingError", None).code(), "ThrottlingError");
    /// ```
    pub fn code(&self) -> &str {
        &self.code
    }

    /// DynamoDB's message, if it sent one.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::error::CancellationReason;
    ///
    /// let r = CancellationReason::new("ValidationError", Some("item too large".into()));
    /// assert_eq!(r.message(), Some("item too large"));
    /// assert_eq!(CancellationReason::none().message(), None);
    /// ```
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// Whether this action's condition failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::error::CancellationReason;
    ///
    /// assert!(CancellationReason::new("ConditionalCheckFailed", None).is_condition_failed());
    /// assert!(!CancellationReason::new("TransactionConflict", None).is_condition_failed());
    /// ```
    pub fn is_condition_failed(&self) -> bool {
        self.code == "ConditionalCheckFailed"
    }

    /// Whether this action caused (or shared in) the cancellation.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::error::CancellationReason;
    ///
    /// assert!(CancellationReason::new("TransactionConflict", None).is_failure());
    /// assert!(!CancellationReason::none().is_failure());
    /// ```
    pub fn is_failure(&self) -> bool {
        self.code != "None"
    }
}

/// The error of every fallible dynatree operation.
///
/// Opaque: inspect it with [`Error::kind`], [`Error::party`] and the `is_*` predicates. When
/// the service answered, its error code and request id are [`Error::service_code`] and
/// [`Error::request_id`] (quote the request id to AWS Support). The underlying SDK or serde
/// error, when there is one, is available through [`std::error::Error::source`]; the `Display`
/// output is a short lowercase phrase that does not repeat it.
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
    service_code: Option<String>,
    request_id: Option<String>,
    service_message: Option<String>,
    operation: Option<String>,
    transient: bool,
}

impl Error {
    /// An error of `kind` with a short lowercase detail (may be empty).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// let err = Error::new(ErrorKind::HasChildren, "/a has children");
    /// assert_eq!(err.kind(), ErrorKind::HasChildren);
    /// assert_eq!(err.to_string(), "node has children: /a has children");
    /// assert_eq!(Error::new(ErrorKind::NotFound, "").to_string(), "not found");
    /// ```
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Self {
        Self(Box::new(Inner {
            kind,
            detail: detail.into(),
            source: None,
            reasons: Vec::new(),
            unprocessed: 0,
            service_code: None,
            request_id: None,
            service_message: None,
            operation: None,
            transient: false,
        }))
    }

    /// Attaches the underlying error, reported by `source()`.
    ///
    /// When the source is itself a dynatree [`Error`], its [`service_code`](Error::service_code),
    /// [`request_id`](Error::request_id), [`service_message`](Error::service_message) and
    /// [`operation`](Error::operation) carry over (unless this error has its own), so wrapping
    /// an error never loses what the service said.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// let sent = Error::new(ErrorKind::ConditionFailed, "")
    ///     .with_service_code("ConditionalCheckFailedException")
    ///     .with_request_id("R1");
    /// let wrapped = Error::new(ErrorKind::AlreadyExists, "/a").with_source(sent);
    /// assert_eq!(wrapped.service_code(), Some("ConditionalCheckFailedException"));
    /// assert_eq!(wrapped.request_id(), Some("R1"));
    /// assert!(std::error::Error::source(&wrapped).is_some());
    /// ```
    #[must_use]
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        let source = source.into();
        if let Some(inner) = source.downcast_ref::<Error>() {
            if self.0.service_code.is_none() {
                self.0.service_code.clone_from(&inner.0.service_code);
            }
            if self.0.request_id.is_none() {
                self.0.request_id.clone_from(&inner.0.request_id);
            }
            if self.0.service_message.is_none() {
                self.0.service_message.clone_from(&inner.0.service_message);
            }
            if self.0.operation.is_none() {
                self.0.operation.clone_from(&inner.0.operation);
            }
            self.0.transient |= inner.0.transient;
        }
        self.0.source = Some(source);
        self
    }

    /// Records the service's error code (for backends: DynamoDB's exception name, such as
    /// `"ConditionalCheckFailedException"`), reported by [`Error::service_code`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// let e = Error::new(ErrorKind::Throttled, "").with_service_code("ThrottlingException");
    /// assert_eq!(e.service_code(), Some("ThrottlingException"));
    /// assert_eq!(e.to_string(), "request throttled"); // Display does not repeat it
    /// ```
    #[must_use]
    pub fn with_service_code(mut self, code: impl Into<String>) -> Self {
        self.0.service_code = Some(code.into());
        self
    }

    /// Records the id the service gave the failed request (DynamoDB's `x-amzn-RequestId`),
    /// reported by [`Error::request_id`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// let e = Error::new(ErrorKind::Backend, "").with_request_id("4KBNVRGD25RG1KEO9UT4V3FQDJ");
    /// assert!(e.request_id().is_some_and(|id| id.starts_with("4KBN")));
    /// ```
    #[must_use]
    pub fn with_request_id(mut self, id: impl Into<String>) -> Self {
        self.0.request_id = Some(id.into());
        self
    }

    /// Records the message the service sent with its error, reported by
    /// [`Error::service_message`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// let e = Error::new(ErrorKind::Backend, "").with_service_message("Requested resource not found");
    /// assert_eq!(e.service_message(), Some("Requested resource not found"));
    /// assert_eq!(e.to_string(), "storage backend error"); // Display does not repeat it
    /// ```
    #[must_use]
    pub fn with_service_message(mut self, message: impl Into<String>) -> Self {
        self.0.service_message = Some(message.into());
        self
    }

    /// Records the name of the request that failed (for backends: DynamoDB's operation, such
    /// as `"PutItem"`), reported by [`Error::operation`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// let e = Error::new(ErrorKind::Throttled, "").with_operation("Query");
    /// assert_eq!(e.operation(), Some("Query"));
    /// ```
    #[must_use]
    pub fn with_operation(mut self, operation: impl Into<String>) -> Self {
        self.0.operation = Some(operation.into());
        self
    }

    /// Marks the error as a transient failure of the service or of the way to it (an HTTP 5xx
    /// answer such as DynamoDB's `InternalServerError`, a timeout, a dropped connection),
    /// reported by [`Error::is_transient`]. For backends and their tests.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// let e = Error::new(ErrorKind::Backend, "").with_transient();
    /// assert!(e.is_transient());
    /// assert!(!Error::new(ErrorKind::Backend, "").is_transient());
    /// ```
    #[must_use]
    pub fn with_transient(mut self) -> Self {
        self.0.transient = true;
        self
    }

    /// A cancelled-transaction error with one reason per action, in request order.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{error::CancellationReason, Error};
    ///
    /// let err = Error::transaction_canceled(vec![
    ///     CancellationReason::none(),
    ///     CancellationReason::new("ConditionalCheckFailed", None),
    /// ]);
    /// assert!(err.is_transaction_canceled());
    /// assert_eq!(err.to_string(), "transaction canceled: action 1: ConditionalCheckFailed");
    /// assert_eq!(err.service_code(), Some("TransactionCanceledException"));
    /// ```
    pub fn transaction_canceled(reasons: Vec<CancellationReason>) -> Self {
        let failed: Vec<String> = reasons
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_failure())
            .map(|(i, r)| format!("action {i}: {}", r.code()))
            .collect();
        let mut e = Self::new(ErrorKind::TransactionCanceled, failed.join(", "))
            .with_service_code("TransactionCanceledException");
        e.0.reasons = reasons;
        e
    }

    /// A batch error: `count` items were still unprocessed after every retry.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// let err = Error::unprocessed(3, "writes");
    /// assert_eq!(err.kind(), ErrorKind::Unprocessed);
    /// assert_eq!(err.unprocessed_count(), 3);
    /// assert_eq!(err.to_string(), "batch items left unprocessed: 3 writes left unprocessed after every retry");
    /// ```
    pub fn unprocessed(count: usize, what: &str) -> Self {
        let mut e = Self::new(
            ErrorKind::Unprocessed,
            format!("{count} {what} left unprocessed after every retry"),
        );
        e.0.unprocessed = count;
        e
    }

    /// The category of this error.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// assert_eq!(Error::new(ErrorKind::Locked, "").kind(), ErrorKind::Locked);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// Who was wrong: the caller, the data, or the service (see [`Party`]).
    ///
    /// The kind's [`party`](ErrorKind::party), except for a cancelled transaction: it is the
    /// data's fault when every failed action failed for a condition or a concurrent
    /// transaction (`ConditionalCheckFailed`, `TransactionConflict`), and the service's when
    /// DynamoDB cancelled an action for another reason (`ThrottlingError`,
    /// `ValidationError`, `ProvisionedThroughputExceeded`, …).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{error::CancellationReason, Error, ErrorKind, error::Party};
    ///
    /// assert_eq!(Error::new(ErrorKind::InvalidArgument, "").party(), Party::Caller);
    /// let lost = Error::transaction_canceled(vec![
    ///     CancellationReason::none(),
    ///     CancellationReason::new("ConditionalCheckFailed", None),
    /// ]);
    /// assert_eq!(lost.party(), Party::Data);
    /// let throttled = Error::transaction_canceled(vec![CancellationReason::new("ThrottlingError", None)]);
    /// assert_eq!(throttled.party(), Party::Service);
    /// ```
    pub fn party(&self) -> Party {
        match self.kind() {
            ErrorKind::TransactionCanceled
                if self.0.reasons.iter().any(|r| {
                    r.is_failure()
                        && !matches!(r.code(), "ConditionalCheckFailed" | "TransactionConflict")
                }) =>
            {
                Party::Service
            }
            kind => kind.party(),
        }
    }

    /// The service's error code, when the service answered with an error: DynamoDB's exception
    /// name without its namespace (`"ConditionalCheckFailedException"`,
    /// `"ProvisionedThroughputExceededException"`, `"ValidationException"`, …). `None` for
    /// errors dynatree raised itself before sending and for failures with no answer (network,
    /// timeout).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// assert_eq!(Error::new(ErrorKind::InvalidPath, "").service_code(), None);
    /// let e = Error::new(ErrorKind::Validation, "").with_service_code("ValidationException");
    /// assert_eq!(e.service_code(), Some("ValidationException"));
    /// ```
    pub fn service_code(&self) -> Option<&str> {
        self.0.service_code.as_deref()
    }

    /// The id the service gave the failed request (DynamoDB's `x-amzn-RequestId` header),
    /// when there was an answer. Quote it to AWS Support.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// assert_eq!(Error::new(ErrorKind::NotFound, "").request_id(), None);
    /// let e = Error::new(ErrorKind::Backend, "").with_request_id("R2");
    /// assert_eq!(e.request_id(), Some("R2"));
    /// ```
    pub fn request_id(&self) -> Option<&str> {
        self.0.request_id.as_deref()
    }

    /// The message the service sent with its error (DynamoDB's `message`), when it answered
    /// with one: what it refused and why, in its words.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// assert_eq!(Error::new(ErrorKind::InvalidPath, "").service_message(), None);
    /// let e = Error::new(ErrorKind::Validation, "").with_service_message("Invalid table name");
    /// assert_eq!(e.service_message(), Some("Invalid table name"));
    /// ```
    pub fn service_message(&self) -> Option<&str> {
        self.0.service_message.as_deref()
    }

    /// The request that failed, for errors of a backend call (DynamoDB's operation name:
    /// `"GetItem"`, `"PutItem"`, `"TransactWriteItems"`, `"DescribeTable"`, …), also when the
    /// service did not answer. `None` for errors dynatree raised itself.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// assert_eq!(Error::new(ErrorKind::NotFound, "").operation(), None);
    /// let e = Error::new(ErrorKind::Backend, "").with_operation("PutItem");
    /// assert_eq!(e.operation(), Some("PutItem"));
    /// ```
    pub fn operation(&self) -> Option<&str> {
        self.0.operation.as_deref()
    }

    /// For [`ErrorKind::TransactionCanceled`]: one reason per action, in request order.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{error::CancellationReason, Error, ErrorKind};
    ///
    /// let err = Error::transaction_canceled(vec![
    ///     CancellationReason::none(),
    ///     CancellationReason::new("ConditionalCheckFailed", None),
    /// ]);
    /// let failed: Vec<usize> = err
    ///     .cancellation_reasons()
    ///     .iter()
    ///     .enumerate()
    ///     .filter(|(_, r)| r.is_failure())
    ///     .map(|(i, _)| i)
    ///     .collect();
    /// assert_eq!(failed, [1]);
    /// assert!(Error::new(ErrorKind::NotFound, "").cancellation_reasons().is_empty());
    /// ```
    pub fn cancellation_reasons(&self) -> &[CancellationReason] {
        &self.0.reasons
    }

    /// For [`ErrorKind::Unprocessed`]: how many items were not written (or not read).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// assert_eq!(Error::unprocessed(2, "reads").unprocessed_count(), 2);
    /// assert_eq!(Error::new(ErrorKind::Backend, "").unprocessed_count(), 0);
    /// ```
    pub fn unprocessed_count(&self) -> usize {
        self.0.unprocessed
    }

    /// The input was rejected before anything was sent (path, attribute, value, size,
    /// reserved character, argument): the same as `self.party() == Party::Caller`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// assert!(Error::new(ErrorKind::InvalidArgument, "").is_invalid_input());
    /// assert!(!Error::new(ErrorKind::Validation, "").is_invalid_input());
    /// ```
    pub fn is_invalid_input(&self) -> bool {
        self.party() == Party::Caller
    }

    /// [`ErrorKind::InvalidArgument`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// assert!(Error::new(ErrorKind::InvalidArgument, "a query takes one range condition").is_invalid_argument());
    /// ```
    pub fn is_invalid_argument(&self) -> bool {
        self.kind() == ErrorKind::InvalidArgument
    }

    /// [`ErrorKind::InvalidPath`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Path;
    ///
    /// let err = Path::new(["a", ""]).unwrap_err();
    /// assert!(err.is_invalid_path());
    /// ```
    pub fn is_invalid_path(&self) -> bool {
        self.kind() == ErrorKind::InvalidPath
    }

    /// [`ErrorKind::NotFound`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// assert!(Error::new(ErrorKind::NotFound, "no object at /a").is_not_found());
    /// assert!(!Error::new(ErrorKind::NotALink, "").is_not_found());
    /// ```
    pub fn is_not_found(&self) -> bool {
        self.kind() == ErrorKind::NotFound
    }

    /// [`ErrorKind::NotALink`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// assert!(Error::new(ErrorKind::NotALink, "/a").is_not_a_link());
    /// assert!(!Error::new(ErrorKind::NotFound, "").is_not_a_link());
    /// ```
    pub fn is_not_a_link(&self) -> bool {
        self.kind() == ErrorKind::NotALink
    }

    /// [`ErrorKind::LinkLoop`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// assert!(Error::new(ErrorKind::LinkLoop, "/a -> /b -> /a").is_link_loop());
    /// assert!(!Error::new(ErrorKind::NotALink, "").is_link_loop());
    /// ```
    pub fn is_link_loop(&self) -> bool {
        self.kind() == ErrorKind::LinkLoop
    }

    /// [`ErrorKind::OutOfScope`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// let err = Error::new(ErrorKind::OutOfScope, "/Other");
    /// assert!(err.is_out_of_scope());
    /// assert_eq!(err.to_string(), "outside the scope: /Other");
    /// ```
    pub fn is_out_of_scope(&self) -> bool {
        self.kind() == ErrorKind::OutOfScope
    }

    /// [`ErrorKind::ConditionFailed`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// assert!(Error::new(ErrorKind::ConditionFailed, "").is_condition_failed());
    /// assert!(!Error::new(ErrorKind::AlreadyExists, "").is_condition_failed());
    /// ```
    pub fn is_condition_failed(&self) -> bool {
        self.kind() == ErrorKind::ConditionFailed
    }

    /// [`ErrorKind::AlreadyExists`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// assert!(Error::new(ErrorKind::AlreadyExists, "/a").is_already_exists());
    /// assert!(!Error::new(ErrorKind::ConditionFailed, "").is_already_exists());
    /// ```
    pub fn is_already_exists(&self) -> bool {
        self.kind() == ErrorKind::AlreadyExists
    }

    /// [`ErrorKind::Locked`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// let err = Error::new(ErrorKind::Locked, "/a");
    /// assert!(err.is_locked());
    /// assert!(!err.is_retryable()); // write again once the move is done
    /// ```
    pub fn is_locked(&self) -> bool {
        self.kind() == ErrorKind::Locked
    }

    /// [`ErrorKind::HasChildren`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// assert!(Error::new(ErrorKind::HasChildren, "/a").is_has_children());
    /// assert!(!Error::new(ErrorKind::NotFound, "").is_has_children());
    /// ```
    pub fn is_has_children(&self) -> bool {
        self.kind() == ErrorKind::HasChildren
    }

    /// [`ErrorKind::TransactionCanceled`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{error::CancellationReason, Error};
    ///
    /// let err = Error::transaction_canceled(vec![CancellationReason::new("TransactionConflict", None)]);
    /// assert!(err.is_transaction_canceled());
    /// assert!(!err.is_condition_failed());
    /// ```
    pub fn is_transaction_canceled(&self) -> bool {
        self.kind() == ErrorKind::TransactionCanceled
    }

    /// [`ErrorKind::Throttled`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// let err = Error::new(ErrorKind::Throttled, "").with_service_code("ThrottlingException");
    /// assert!(err.is_throttled() && err.is_retryable());
    /// ```
    pub fn is_throttled(&self) -> bool {
        self.kind() == ErrorKind::Throttled
    }

    /// [`ErrorKind::Validation`]: DynamoDB refused the request as invalid.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// let err = Error::new(ErrorKind::Validation, "").with_service_code("ValidationException");
    /// assert!(err.is_validation());
    /// assert!(!err.is_invalid_input()); // DynamoDB refused it, not dynatree
    /// ```
    pub fn is_validation(&self) -> bool {
        self.kind() == ErrorKind::Validation
    }

    /// [`ErrorKind::Serialization`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// let err = Error::new(ErrorKind::Serialization, "missing field `name`");
    /// assert!(err.is_serialization());
    /// assert!(!err.is_retryable());
    /// ```
    pub fn is_serialization(&self) -> bool {
        self.kind() == ErrorKind::Serialization
    }

    /// Whether the service, or the way to it, failed for reasons of its own: an HTTP 5xx
    /// answer (DynamoDB's `InternalServerError`, `ServiceUnavailable`), a timeout, a dropped
    /// connection. Always of kind [`ErrorKind::Backend`].
    ///
    /// A read that fails so is resent within the tree's [`RetryPolicy`](crate::RetryPolicy)
    /// (see [`RetryPolicy::retry_read`](crate::RetryPolicy::retry_read)). A write is not: it
    /// may or may not have been applied, so the error reaches the caller, whose next call
    /// finds out which.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    ///
    /// let e = Error::new(ErrorKind::Backend, "").with_service_code("InternalServerError").with_transient();
    /// assert!(e.is_transient() && e.is_retryable());
    /// // Access denied is a backend error too, but not a transient one.
    /// assert!(!Error::new(ErrorKind::Backend, "").with_service_code("AccessDeniedException").is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        self.0.transient && self.0.kind == ErrorKind::Backend
    }

    /// Whether retrying the same call later may succeed (throttling, service limits,
    /// conflicts, unprocessed batch items, transaction conflicts, transient backend failures,
    /// an operation left recorded unfinished).
    ///
    /// These were already retried within the tree's [`RetryPolicy`](crate::RetryPolicy)
    /// where dynatree retries them at all: retry the call later, not in a tight loop.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{error::CancellationReason, Error, ErrorKind};
    ///
    /// assert!(Error::new(ErrorKind::Throttled, "").is_retryable());
    /// assert!(Error::new(ErrorKind::Unfinished, "").is_retryable());
    /// assert!(!Error::new(ErrorKind::ConditionFailed, "").is_retryable());
    /// let conflict = Error::transaction_canceled(vec![CancellationReason::new("TransactionConflict", None)]);
    /// assert!(conflict.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        match self.kind() {
            ErrorKind::Throttled
            | ErrorKind::LimitExceeded
            | ErrorKind::Conflict
            | ErrorKind::Unprocessed
            | ErrorKind::Unfinished
            | ErrorKind::Backend => true,
            ErrorKind::TransactionCanceled => self
                .0
                .reasons
                .iter()
                .any(|r| matches!(r.code(), "TransactionConflict" | "ThrottlingError")),
            _ => false,
        }
    }

    /// Whether the service refused the request for capacity: [`ErrorKind::Throttled`], or a
    /// transaction canceled for it (reason `ThrottlingError` or
    /// `ProvisionedThroughputExceeded`, as DynamoDB reports a throttled TransactWriteItems).
    pub(crate) fn is_throttling(&self) -> bool {
        match self.kind() {
            ErrorKind::Throttled => true,
            ErrorKind::TransactionCanceled => self.0.reasons.iter().any(|r| {
                matches!(
                    r.code(),
                    "ThrottlingError" | "ProvisionedThroughputExceeded"
                )
            }),
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
        if let Some(code) = &self.0.service_code {
            d.field("service_code", code);
        }
        if let Some(id) = &self.0.request_id {
            d.field("request_id", id);
        }
        if let Some(m) = &self.0.service_message {
            d.field("service_message", m);
        }
        if let Some(op) = &self.0.operation {
            d.field("operation", op);
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
    fn every_kind_has_one_party() {
        use ErrorKind::*;
        let caller = [
            InvalidPath,
            InvalidAttribute,
            InvalidReserved,
            ItemTooLarge,
            InvalidValue,
            InvalidArgument,
        ];
        let data = [
            Serialization,
            NotFound,
            NotALink,
            LinkLoop,
            OutOfScope,
            ConditionFailed,
            AlreadyExists,
            Locked,
            HasChildren,
            TransactionCanceled,
            Conflict,
            TakenOver,
            Unfinished,
        ];
        let service = [
            Throttled,
            LimitExceeded,
            Unprocessed,
            Validation,
            TableNotFound,
            TableMismatch,
            Backend,
        ];
        for k in caller {
            assert_eq!(k.party(), Party::Caller, "{k:?}");
            assert!(Error::new(k, "").is_invalid_input(), "{k:?}");
        }
        for k in data {
            assert_eq!(k.party(), Party::Data, "{k:?}");
        }
        for k in service {
            assert_eq!(k.party(), Party::Service, "{k:?}");
        }
        // Display: a short lowercase phrase, no trailing period.
        for k in caller.into_iter().chain(data).chain(service) {
            let s = k.to_string();
            assert!(
                !s.is_empty() && s == s.to_lowercase() && !s.ends_with('.'),
                "{s}"
            );
        }
    }

    #[test]
    fn canceled_transaction_party_follows_reasons() {
        let conflict = Error::transaction_canceled(vec![
            CancellationReason::new("TransactionConflict", None),
            CancellationReason::none(),
        ]);
        assert_eq!(conflict.party(), Party::Data);
        let invalid = Error::transaction_canceled(vec![
            CancellationReason::new("ConditionalCheckFailed", None),
            CancellationReason::new("ValidationError", None),
        ]);
        assert_eq!(invalid.party(), Party::Service);
        assert_eq!(invalid.service_code(), Some("TransactionCanceledException"));
    }

    #[test]
    fn service_metadata_survives_wrapping() {
        let sent = Error::new(ErrorKind::ConditionFailed, "")
            .with_service_code("ConditionalCheckFailedException")
            .with_request_id("R1");
        let once = Error::new(ErrorKind::AlreadyExists, "/a").with_source(sent);
        let twice = Error::new(ErrorKind::Conflict, "").with_source(once);
        assert_eq!(
            twice.service_code(),
            Some("ConditionalCheckFailedException")
        );
        assert_eq!(twice.request_id(), Some("R1"));
        assert_eq!(twice.to_string(), "conflicting concurrent write");
        // An error's own metadata wins over its source's.
        let own = Error::new(ErrorKind::Backend, "")
            .with_request_id("R2")
            .with_source(twice);
        assert_eq!(own.request_id(), Some("R2"));
        assert_eq!(own.service_code(), Some("ConditionalCheckFailedException"));
        // A source that is not a dynatree error carries nothing over.
        let io = Error::new(ErrorKind::Backend, "").with_source(std::io::Error::other("x"));
        assert_eq!(io.service_code(), None);
    }

    #[test]
    fn error_is_send_sync_and_small() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<Error>();
        assert_eq!(std::mem::size_of::<Error>(), std::mem::size_of::<usize>());
    }
}
