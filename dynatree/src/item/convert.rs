//! Every conversion between [`Value`] and another crate's attribute value, in one place:
//! serde_dynamo's (what `Item::from_serialize` goes through, and what Lambda's stream events
//! carry), aws-sdk-dynamodb's (the [`DynamoDbTable`](crate::DynamoDbTable) backend) and
//! aws-sdk-dynamodbstreams' (the polling stream consumer).

use super::Value;

/// A value as serde_dynamo represents it.
pub(crate) fn from_serde_dynamo(v: serde_dynamo::AttributeValue) -> Value {
    use serde_dynamo::AttributeValue as A;
    match v {
        A::S(s) => Value::S(s),
        A::N(n) => Value::N(n),
        A::B(b) => Value::B(b),
        A::Bool(b) => Value::Bool(b),
        A::Null(_) => Value::Null,
        A::L(l) => Value::L(l.into_iter().map(from_serde_dynamo).collect()),
        A::M(m) => Value::M(
            m.into_iter()
                .map(|(k, v)| (k, from_serde_dynamo(v)))
                .collect(),
        ),
        A::Ss(s) => Value::Ss(s),
        A::Ns(n) => Value::Ns(n),
        A::Bs(b) => Value::Bs(b),
    }
}

/// The aws-sdk-dynamodb attribute value of `v`.
#[cfg(feature = "dynamodb")]
pub(crate) fn to_sdk(v: Value) -> aws_sdk_dynamodb::types::AttributeValue {
    use aws_sdk_dynamodb::primitives::Blob;
    use aws_sdk_dynamodb::types::AttributeValue as A;
    match v {
        Value::S(s) => A::S(s),
        Value::N(n) => A::N(n),
        Value::B(b) => A::B(Blob::new(b)),
        Value::Bool(b) => A::Bool(b),
        Value::Null => A::Null(true),
        Value::L(l) => A::L(l.into_iter().map(to_sdk).collect()),
        Value::M(m) => A::M(m.into_iter().map(|(k, v)| (k, to_sdk(v))).collect()),
        Value::Ss(s) => A::Ss(s),
        Value::Ns(n) => A::Ns(n),
        Value::Bs(b) => A::Bs(b.into_iter().map(Blob::new).collect()),
    }
}

/// `fn $name(AttributeValue) -> Result<Value>` for an SDK's `AttributeValue` (aws-sdk-dynamodb's
/// and aws-sdk-dynamodbstreams' have the same shape and are two types); `$from` names the
/// service in the error for a value type unknown to this crate.
#[cfg(any(feature = "dynamodb", feature = "streams"))]
macro_rules! value_from_sdk {
    ($name:ident, $av:ty, $from:literal) => {
        pub(crate) fn $name(v: $av) -> $crate::Result<$crate::item::Value> {
            use $crate::item::Value;
            type A = $av;
            Ok(match v {
                A::S(s) => Value::S(s),
                A::N(n) => Value::N(n),
                A::B(b) => Value::B(b.into_inner()),
                A::Bool(b) => Value::Bool(b),
                A::Null(_) => Value::Null,
                A::L(l) => Value::L(l.into_iter().map($name).collect::<$crate::Result<_>>()?),
                A::M(m) => Value::M(
                    m.into_iter()
                        .map(|(k, v)| Ok((k, $name(v)?)))
                        .collect::<$crate::Result<_>>()?,
                ),
                A::Ss(s) => Value::Ss(s),
                A::Ns(n) => Value::Ns(n),
                A::Bs(b) => Value::Bs(b.into_iter().map(|b| b.into_inner()).collect()),
                _ => {
                    return Err($crate::Error::new(
                        $crate::ErrorKind::Serialization,
                        concat!("unknown attribute value type from ", $from),
                    ));
                }
            })
        }
    };
}

#[cfg(feature = "dynamodb")]
value_from_sdk!(
    from_sdk,
    aws_sdk_dynamodb::types::AttributeValue,
    "DynamoDB"
);

#[cfg(feature = "streams")]
value_from_sdk!(
    from_streams,
    aws_sdk_dynamodbstreams::types::AttributeValue,
    "DynamoDB Streams"
);
