//! `Tree::copy_subtree_with`: what a copy does with the links inside it that point into its
//! source, under each `LinkPolicy`, in a call that runs the copy and in a `resume` that
//! finishes it after its copy phase.

use dynatree::{Path, Tree, ops::LinkPolicy, ops::MoveReport};
use dynatree_testing::{FakeTable, Fault, FaultRule, Op};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct V {
    v: u32,
}

fn p(s: &str) -> Path {
    Path::parse(s).expect("path")
}

/// `/tpl/doc`, `/tpl/latest` (a link to it), `/tpl/far` (a link out of the subtree) and
/// `/ext` (a link into it from outside).
async fn template(table: &FakeTable) -> Tree {
    let tree = Tree::new(table.clone());
    tree.create_table().await.expect("table");
    tree.put(["tpl", "doc"], &V { v: 1 }).await.expect("put");
    tree.put(["other"], &V { v: 2 }).await.expect("put");
    tree.put_link(["tpl", "latest"], ["tpl", "doc"])
        .await
        .expect("link");
    tree.put_link(["tpl", "far"], ["other"])
        .await
        .expect("link");
    tree.put_link(["ext"], ["tpl", "doc"]).await.expect("link");
    tree
}

async fn target(tree: &Tree, path: &str) -> String {
    tree.read_link(p(path)).await.expect("a link").to_string()
}

/// What every policy leaves alone: the source's links, the link from outside, the link out.
async fn untouched(tree: &Tree) {
    assert_eq!(target(tree, "/tpl/latest").await, "/tpl/doc");
    assert_eq!(target(tree, "/ext").await, "/tpl/doc");
    assert_eq!(target(tree, "/p1/far").await, "/other");
}

#[tokio::test]
async fn each_policy() {
    for (policy, copied_to, listed) in [
        (LinkPolicy::Rewrite, "/p1/doc", true),
        (LinkPolicy::Report, "/tpl/doc", true),
        (LinkPolicy::Ignore, "/tpl/doc", false),
    ] {
        let tree = template(&FakeTable::new()).await;
        let report = tree
            .copy_subtree_with(["tpl"], ["p1"], policy)
            .await
            .expect("copy");
        assert_eq!((report.objects, report.nodes), (3, 4), "{policy:?}");
        let expected = if listed {
            vec![(p("/p1/latest"), p("/tpl/doc"))]
        } else {
            Vec::new()
        };
        assert_eq!(report.links, expected, "{policy:?}");
        assert_eq!(target(&tree, "/p1/latest").await, copied_to, "{policy:?}");
        assert_eq!(
            tree.get::<V>(["p1", "latest"]).await.expect("get"),
            Some(V { v: 1 })
        );
        untouched(&tree).await;
    }
}

#[tokio::test]
async fn a_resumed_copy_reports_its_links() {
    for policy in [LinkPolicy::Rewrite, LinkPolicy::Report] {
        let table = FakeTable::new();
        let tree = template(&table).await;
        // The copy fails once it is unlocking (its copy phase done): the next transaction
        // after its first report of the unlock phase. A `resume` finishes it.
        let faults = table.clone();
        let armed = std::sync::atomic::AtomicBool::new(false);
        let failing = tree.on_progress(move |p| {
            if p.phase == "unlock" && !armed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                faults.inject_rule(FaultRule::new(Fault::Fail).operation(Op::TransactWriteItems));
            }
        });
        failing
            .copy_subtree_with(["tpl"], ["p1"], policy)
            .await
            .expect_err("the copy fails in its unlock phase");
        let pending = tree.pending().await.expect("pending");
        assert_eq!(pending.len(), 1, "{pending:?}");
        assert_eq!(pending[0].phase, "unlock");

        let done: Vec<MoveReport> = Tree::new(table.clone()).resume().await.expect("resume");
        assert_eq!(done.len(), 1);
        assert_eq!(
            done[0].links,
            [(p("/p1/latest"), p("/tpl/doc"))],
            "{policy:?}"
        );
        let copied_to = if policy == LinkPolicy::Rewrite {
            "/p1/doc"
        } else {
            "/tpl/doc"
        };
        assert_eq!(target(&tree, "/p1/latest").await, copied_to, "{policy:?}");
        untouched(&tree).await;
    }
}
