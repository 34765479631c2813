//! DynamoDB expressions as [`DynamoDbTable`](crate::DynamoDbTable) writes them (condition,
//! update, key condition and projection expressions with their `#n`/`:v` placeholders), kept
//! free of the SDK's types so that what a request costs against DynamoDB's limits is known
//! without a backend: [`TransactAction::payload_size`] renders an action exactly as it is sent.

use std::collections::HashMap;

use super::HASH_KEY;
use crate::item::Value;
use crate::storage::{Condition, RangeCondition, TransactAction, UpdateAction};

/// A condition expression with its placeholders.
#[derive(Default)]
pub(crate) struct Expr {
    names: HashMap<String, String>,
    values: HashMap<String, Value>,
}

impl Expr {
    pub(crate) fn name(&mut self, n: &str) -> String {
        if let Some((k, _)) = self.names.iter().find(|(_, v)| *v == n) {
            return k.clone();
        }
        let k = format!("#n{}", self.names.len());
        self.names.insert(k.clone(), n.to_owned());
        k
    }

    pub(crate) fn value(&mut self, v: Value) -> String {
        let k = format!(":v{}", self.values.len());
        self.values.insert(k.clone(), v);
        k
    }

    pub(crate) fn condition(&mut self, c: &Condition) -> Option<String> {
        Some(match c {
            Condition::Always => return None,
            Condition::Exists => format!("attribute_exists({})", self.name(HASH_KEY)),
            Condition::NotExists => format!("attribute_not_exists({})", self.name(HASH_KEY)),
            Condition::AttrExists(n) => format!("attribute_exists({})", self.name(n)),
            Condition::AttrNotExists(n) => format!("attribute_not_exists({})", self.name(n)),
            Condition::Equals(n, v) => {
                let n = self.name(n);
                format!("{n} = {}", self.value(v.clone()))
            }
            Condition::And(cs) => {
                // `Always` parts hold: leave them out (nothing left: always).
                let mut parts: Vec<String> = cs.iter().filter_map(|c| self.condition(c)).collect();
                match parts.len() {
                    0 => return None,
                    // DynamoDB refuses redundant parentheses (`((a OR b))`).
                    1 => parts.remove(0),
                    _ => format!("({})", parts.join(" AND ")),
                }
            }
            Condition::Or(cs) => {
                // An `Always` part makes the whole hold; no part at all never holds.
                let mut parts = Vec::with_capacity(cs.len());
                for c in cs {
                    parts.push(self.condition(c)?);
                }
                match parts.len() {
                    0 => return Some(self.never()),
                    1 => parts.remove(0),
                    _ => format!("({})", parts.join(" OR ")),
                }
            }
            Condition::Not(c) => match self.condition(c) {
                Some(inner) => format!("(NOT {inner})"),
                None => self.never(),
            },
            Condition::Compare(n, op, v) => {
                let n = self.name(n);
                format!("{n} {} {}", op.operator(), self.value(v.clone()))
            }
            Condition::Between(n, lo, hi) => {
                let n = self.name(n);
                let lo = self.value(lo.clone());
                format!("{n} BETWEEN {lo} AND {}", self.value(hi.clone()))
            }
            Condition::BeginsWith(n, v) => {
                let n = self.name(n);
                format!("begins_with({n}, {})", self.value(v.clone()))
            }
            Condition::Contains(n, v) => {
                let n = self.name(n);
                format!("contains({n}, {})", self.value(v.clone()))
            }
        })
    }

    /// A condition that never holds.
    fn never(&mut self) -> String {
        let k = self.name(HASH_KEY);
        format!("(attribute_exists({k}) AND attribute_not_exists({k}))")
    }

    /// The condition of a ConditionCheck, which DynamoDB requires: "exists or not" (always
    /// holds) for [`Condition::Always`].
    pub(crate) fn check_condition(&mut self, c: &Condition) -> String {
        self.condition(c).unwrap_or_else(|| {
            let k = self.name(HASH_KEY);
            format!("(attribute_exists({k}) OR attribute_not_exists({k}))")
        })
    }

    /// An update expression (`None` for no actions): `SET` (appends included), `REMOVE`,
    /// `ADD` and `DELETE` clauses, in that order.
    pub(crate) fn update(&mut self, actions: &[UpdateAction]) -> Option<String> {
        let (mut set, mut remove, mut add, mut delete) = (vec![], vec![], vec![], vec![]);
        for a in actions {
            let n = self.name(a.name());
            match a {
                UpdateAction::Set(_, v) => set.push(format!("{n} = {}", self.value(v.clone()))),
                UpdateAction::Remove(_) => remove.push(n),
                UpdateAction::Add(_, v) => add.push(format!("{n} {}", self.value(v.clone()))),
                UpdateAction::Delete(_, v) => {
                    delete.push(format!("{n} {}", self.value(v.clone())));
                }
                UpdateAction::Append(_, v) => {
                    let empty = self.value(Value::L(Vec::new()));
                    let v = self.value(v.clone());
                    set.push(format!(
                        "{n} = list_append(if_not_exists({n}, {empty}), {v})"
                    ));
                }
            }
        }
        let clauses: Vec<String> = [
            ("SET", set),
            ("REMOVE", remove),
            ("ADD", add),
            ("DELETE", delete),
        ]
        .into_iter()
        .filter(|(_, parts)| !parts.is_empty())
        .map(|(kw, parts)| format!("{kw} {}", parts.join(", ")))
        .collect();
        (!clauses.is_empty()).then(|| clauses.join(" "))
    }

    /// A key condition on the range key attribute `attr`.
    #[cfg_attr(not(feature = "dynamodb"), allow(dead_code))] // only the backend sends these
    pub(crate) fn range(&mut self, attr: &str, range: &RangeCondition) -> String {
        let r = self.name(attr);
        let mut v = |s: &String| self.value(Value::S(s.clone()));
        match range {
            RangeCondition::Eq(x) => format!("{r} = {}", v(x)),
            RangeCondition::Lt(x) => format!("{r} < {}", v(x)),
            RangeCondition::Le(x) => format!("{r} <= {}", v(x)),
            RangeCondition::Gt(x) => format!("{r} > {}", v(x)),
            RangeCondition::Ge(x) => format!("{r} >= {}", v(x)),
            RangeCondition::Between(a, b) => {
                let a = v(a);
                format!("{r} BETWEEN {a} AND {}", v(b))
            }
            RangeCondition::BeginsWith(x) => format!("begins_with({r}, {})", v(x)),
        }
    }

    /// A `ProjectionExpression` of top-level names, one placeholder `#p<i>` per name (a name
    /// given twice gets two, so DynamoDB refuses the overlap as it would inline); `None` for
    /// every attribute.
    #[cfg_attr(not(feature = "dynamodb"), allow(dead_code))] // only the backend sends these
    pub(crate) fn projection(&mut self, names: &[String]) -> Option<String> {
        if names.is_empty() {
            return None;
        }
        let mut out = String::new();
        for (i, n) in names.iter().enumerate() {
            let k = format!("#p{i}");
            if i > 0 {
                out.push(',');
            }
            out.push_str(&k);
            self.names.insert(k, n.clone());
        }
        Some(out)
    }

    #[cfg_attr(not(feature = "dynamodb"), allow(dead_code))] // only the backend sends these
    pub(crate) fn names(&self) -> Option<HashMap<String, String>> {
        (!self.names.is_empty()).then(|| self.names.clone())
    }

    #[cfg_attr(not(feature = "dynamodb"), allow(dead_code))] // only the backend sends these
    pub(crate) fn values(&self) -> Option<&HashMap<String, Value>> {
        (!self.values.is_empty()).then_some(&self.values)
    }

    /// The expressions of one TransactWriteItems action, as sent: its update expression (an
    /// update's), then its condition expression (always one for a ConditionCheck).
    pub(crate) fn transact(action: &TransactAction) -> (Expr, Option<String>, Option<String>) {
        let mut expr = Expr::default();
        let (update, condition) = match action {
            TransactAction::Put { condition, .. } | TransactAction::Delete { condition, .. } => {
                (None, expr.condition(condition))
            }
            TransactAction::ConditionCheck { condition, .. } => {
                (None, Some(expr.check_condition(condition)))
            }
            TransactAction::Update {
                actions, condition, ..
            } => {
                let update = expr.update(actions);
                (update, expr.condition(condition))
            }
        };
        (expr, update, condition)
    }

    /// What DynamoDB counts of the placeholders in `text`: at each place one stands, the bytes
    /// of its attribute name or the size of its value (a name used twice counts twice).
    fn placeholder_bytes(&self, text: &str) -> usize {
        let mut bytes = 0;
        let mut rest = text;
        while let Some(at) = rest.find(['#', ':']) {
            let token_len = rest[at + 1..]
                .find(|c: char| !c.is_ascii_alphanumeric())
                .map_or(rest.len() - at, |end| end + 1);
            let token = &rest[at..at + token_len];
            bytes += self
                .names
                .get(token)
                .map(String::len)
                .or_else(|| self.values.get(token).map(Value::size))
                .unwrap_or(0);
            rest = &rest[at + token_len..];
        }
        bytes
    }
}

/// The bytes one action adds to a TransactWriteItems request's payload, as DynamoDB counts it
/// against the 4 MB limit (see [`TransactAction::payload_size`]).
pub(crate) fn payload_size(action: &TransactAction) -> usize {
    let (expr, update, condition) = Expr::transact(action);
    let body = match action {
        TransactAction::Put { item, .. } => item.size(),
        TransactAction::Delete { key, .. }
        | TransactAction::ConditionCheck { key, .. }
        | TransactAction::Update { key, .. } => key.clone().into_item().size(),
    };
    [update, condition]
        .into_iter()
        .flatten()
        .map(|text| text.len() + expr.placeholder_bytes(&text))
        .sum::<usize>()
        + body
}
