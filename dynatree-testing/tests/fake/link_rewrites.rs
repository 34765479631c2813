//! A move with `LinkPolicy::Rewrite` over links it cannot rewrite: it ends (`Ok`, nothing left
//! recorded) and leaves them as they were, rather than failing every `resume` after it.

use std::time::Duration;

use dynatree::ops::LinkPolicy;
use dynatree::storage::{Condition, DEFAULT_RESERVED, Key, Storage};
use dynatree::{RetryPolicy, Tree};
use dynatree_testing::FakeTable;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct V {
    v: u32,
}

/// The listing row of a link into the source was lost (a state `Tree::check` reports and
/// `repair` restores): no round can check the link, so the rounds run out; a last look finds
/// no link the move could rewrite, and the move ends. Before, it failed with `Unfinished`,
/// and so did every `resume` after it: the move stayed recorded for good.
#[tokio::test]
async fn a_rewrite_move_over_a_link_without_its_listing_row_ends_and_leaves_the_link() {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .retry_policy(RetryPolicy::new(3, Duration::ZERO, Duration::ZERO))
        .build()
        .expect("tree");
    tree.create_table().await.expect("table");
    tree.put(["s", "1"], &V { v: 1 }).await.expect("put");
    tree.put_link(["x", "l"], ["s", "1"]).await.expect("link");
    // The listing row of x/l: in x's directory partition, named l.
    let r = DEFAULT_RESERVED;
    let key = Key::new(format!("{r}x{r}"), "l");
    assert!(table.get_item(&key, true).await.expect("get").is_some());
    table
        .delete_item(&key, Condition::Always)
        .await
        .expect("delete");

    let report = tree
        .move_subtree_with(["s"], ["d"], LinkPolicy::Rewrite)
        .await
        .expect("the move ends");
    assert_eq!(report.objects, 1);
    assert!(tree.pending().await.expect("pending").is_empty());
    assert_eq!(tree.get(["d", "1"]).await.expect("get"), Some(V { v: 1 }));
    assert!(tree.resume().await.expect("resume").is_empty());
    // The link is left as it was (no listing row to check it against).
    assert!(table.get_item(&key, true).await.expect("get").is_none());
}
