//! A reader that looks at two paths in turn while an operation moves an object from one to
//! the other, and the check that it never found the object at neither: shared by the history
//! scenarios of moves, re-parenting and link rewrites.

use std::fmt::Debug;

use dynatree::{Path, Result, Tree};
use dynatree_testing::sim::End;
use futures::future::LocalBoxFuture;
use serde::de::DeserializeOwned;

/// What the reader saw: the two reads of each round.
pub type Seen<T> = Vec<(Option<T>, Option<T>)>;

/// An operation that reads `first`, then `second`, three times, and returns the pairs it saw.
pub fn reader<T: DeserializeOwned + Debug + 'static>(
    first: Path,
    second: Path,
) -> impl Fn(Tree) -> LocalBoxFuture<'static, Result<Seen<T>>> {
    move |tree| {
        let (first, second) = (first.clone(), second.clone());
        Box::pin(async move {
            let mut seen = Vec::new();
            for _ in 0..3 {
                let a = tree.get::<T>(first.clone()).await?;
                let b = tree.get::<T>(second.clone()).await?;
                seen.push((a, b));
            }
            Ok(seen)
        })
    }
}

/// A check that the reader, operation `op`, never read nothing at both paths.
pub fn never_at_neither(
    op: usize,
    what: &'static str,
) -> impl Fn(&End<'_>) -> std::result::Result<(), String> {
    move |end| match &end.outcomes[op] {
        dynatree_testing::sim::OpOutcome::Ok(seen) if seen.contains("(None, None)") => {
            Err(format!("{what} was missing from both places: {seen}"))
        }
        _ => Ok(()),
    }
}
