//! Interleaving scenarios of the inline propagation of denormalized fields (issue 9, first
//! step): two renames of one source racing each other and the creation of a target below it,
//! with one fault per schedule. After every schedule: the invariants of the tree (checked by
//! the simulator), and every copy equal to its source's final value.
//!
//! Budget: `DYNATREE_SIM_SCHEDULES` schedules per scenario (default 600 here).

use dynatree::{Hierarchical, Patch, Tree};
use dynatree_testing::FakeTable;
use dynatree_testing::sim::{End, Sim, SimFault, Stored};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "F/{forum}")]
struct Forum {
    forum: String,
    name: String,
}

#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "F/{forum}/T/{thread}")]
struct Thread {
    forum: String,
    thread: String,
    #[dynatree(from = Forum::name)]
    forum_name: Option<String>,
}

fn forum(name: &str) -> Forum {
    Forum {
        forum: "f".into(),
        name: name.into(),
    }
}

fn thread(id: &str) -> Thread {
    Thread {
        forum: "f".into(),
        thread: id.into(),
        forum_name: None,
    }
}

fn tree(storage: dynatree_testing::sim::SimStorage<FakeTable>) -> Tree {
    Tree::builder(storage)
        .denormalized::<Thread>()
        .build()
        .expect("tree")
}

fn text(end: &End<'_>, path: [&str; 2], attr: &str) -> Option<String> {
    text4(end, &path, attr)
}

fn text4(end: &End<'_>, path: &[&str], attr: &str) -> Option<String> {
    match end.model.get(path.to_vec())? {
        Stored::Object(item) => item.get_s(attr).map(str::to_owned),
        Stored::Link(_) => None,
    }
}

/// Every thread's copy equals the forum's final name.
fn copies_follow(end: &End<'_>) -> Result<(), String> {
    let name = text(end, ["F", "f"], "name");
    for t in ["a", "b"] {
        let path = ["F", "f", "T", t];
        if end.model.get(path.to_vec()).is_none() {
            continue;
        }
        let copy = text4(end, &path, "forum_name");
        if copy != name {
            return Err(format!(
                "thread {t} copies {copy:?}, the forum is named {name:?}"
            ));
        }
    }
    Ok(())
}

/// Two renames of the forum (a put and a patch) race each other and the creation of a thread:
/// whatever the order and the faults, every thread ends with the forum's final name (versions
/// follow the commit order of the source's writes; a late copy never wins).
#[test]
fn two_renames_vs_a_new_thread() {
    Sim::new(
        "rename f (put) vs rename f (patch) vs put thread b",
        FakeTable::new,
    )
    .tree(tree)
    .schedules(600)
    .faults(1, SimFault::all())
    .setup(|t| async move {
        t.repo::<Forum>().put(&forum("A")).await?;
        t.repo::<Thread>().put(&thread("a")).await
    })
    .op("rename B", |t| async move {
        t.repo::<Forum>().put(&forum("B")).await
    })
    .op("rename C", |t| async move {
        t.repo::<Forum>()
            .patch(Patch::new(&forum("").key()).set(Forum::FIELDS.name, "C"))
            .await
    })
    .op("put thread b", |t| async move {
        t.repo::<Thread>().put(&thread("b")).await
    })
    .check(|end| {
        // An operation that failed may have left its source written without its copies:
        // the guarantee is for acknowledged operations (a retry completes the others).
        if (0..3).all(|i| end.ok(i)) {
            copies_follow(end)?;
        }
        Ok(())
    })
    .allow_wait(true)
    .run();
}
