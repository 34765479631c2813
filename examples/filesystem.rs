//! A file system per account: folders and files whose path components are ULIDs, so a rename
//! changes one attribute and rewrites nothing; file contents live elsewhere (a URL attribute),
//! so a move never copies them. `ls`, create, rename, edit, delete and move files; move and
//! delete folders as resumable background work with progress; an optional depth limit.
//!
//! In-memory by default; `DYNATREE_TABLE=<name>` runs it on DynamoDB (see `links.rs`).

use dynatree::{DynamoDbTable, Path, Tree};
use dynatree_testing::FakeTable;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use ulid::Ulid;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Node {
    name: String,
    kind: Kind,
    /// Where a file's bytes live (an object store); folders have none.
    url: Option<String>,
    size: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
enum Kind {
    Folder,
    File,
}

/// One account's file system.
struct Fs {
    tree: Tree,
    account: String,
    max_depth: usize,
}

impl Fs {
    fn root(&self) -> Path {
        Path::new(["fs", self.account.as_str()]).expect("valid")
    }

    async fn create(
        &self,
        parent: &Path,
        name: &str,
        kind: Kind,
        url: Option<&str>,
        size: u64,
    ) -> Result<Path, Box<dyn std::error::Error>> {
        if parent.len() + 1 - self.root().len() > self.max_depth {
            return Err(format!(
                "{name:?}: deeper than the limit of {} levels",
                self.max_depth
            )
            .into());
        }
        let path = parent.child(Ulid::new().to_string())?;
        let node = Node {
            name: name.into(),
            kind,
            url: url.map(str::to_owned),
            size,
        };
        self.tree.put(&path, &node).await?;
        Ok(path)
    }

    /// `ls`: one Query plus one BatchGetItem per page, sorted by name for display.
    async fn ls(&self, folder: &Path) -> Result<Vec<(Path, Node)>, Box<dyn std::error::Error>> {
        let entries: Vec<dynatree::Entry<Node>> =
            self.tree.list_items(folder).try_collect().await?;
        let mut out: Vec<(Path, Node)> = entries
            .into_iter()
            .filter_map(|e| Some((folder.child(e.name).ok()?, e.value?)))
            .collect();
        out.sort_by(|a, b| {
            (a.1.kind == Kind::File, &a.1.name).cmp(&(b.1.kind == Kind::File, &b.1.name))
        });
        Ok(out)
    }

    async fn rename(&self, path: &Path, name: &str) -> Result<(), Box<dyn std::error::Error>> {
        let mut node: Node = self.tree.get(path).await?.ok_or("no such file")?;
        node.name = name.into();
        self.tree.put(path, &node).await?; // one attribute; the path (a ULID) stays
        Ok(())
    }

    async fn print(&self, folder: &Path, indent: usize) -> Result<(), Box<dyn std::error::Error>> {
        for (path, node) in self.ls(folder).await? {
            match node.kind {
                Kind::Folder => {
                    println!("{:indent$}{}/", "", node.name);
                    Box::pin(self.print(&path, indent + 2)).await?;
                }
                Kind::File => println!(
                    "{:indent$}{} ({} bytes, {})",
                    "",
                    node.name,
                    node.size,
                    node.url.unwrap_or_default()
                ),
            }
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    match std::env::var("DYNATREE_TABLE") {
        Ok(table) if !table.is_empty() => {
            let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
            let client = aws_sdk_dynamodb::Client::new(&config);
            println!("# backend: DynamoDB table {table:?}");
            run(Tree::new(DynamoDbTable::new(client, table))).await
        }
        _ => {
            println!("# backend: in-memory FakeTable (set DYNATREE_TABLE to use DynamoDB)");
            run(Tree::new(FakeTable::new())).await
        }
    }
}

async fn run(tree: Tree) -> Result<(), Box<dyn std::error::Error>> {
    tree.create_table().await?;
    let fs = Fs {
        tree,
        account: format!("acct-{}", Ulid::new()),
        max_depth: 3,
    };
    let root = fs.root();
    let docs = fs.create(&root, "Documents", Kind::Folder, None, 0).await?;
    let photos = fs.create(&root, "Photos", Kind::Folder, None, 0).await?;
    let trips = fs.create(&photos, "Trips", Kind::Folder, None, 0).await?;
    let cv = fs
        .create(&docs, "cv.pdf", Kind::File, Some("s3://blobs/1"), 48_213)
        .await?;
    fs.create(&docs, "notes.txt", Kind::File, Some("s3://blobs/2"), 912)
        .await?;
    for i in 0..3 {
        fs.create(
            &trips,
            &format!("alps-{i}.jpg"),
            Kind::File,
            Some(&format!("s3://blobs/p{i}")),
            2_000_000 + i,
        )
        .await?;
    }
    println!("created 2 folders, a sub-folder and 5 files; the tree:");
    fs.print(&root, 2).await?;

    fs.rename(&cv, "resume.pdf").await?;
    println!(
        "\nrename cv.pdf -> resume.pdf: one put of one object, its path {} unchanged",
        cv.name().unwrap_or_default()
    );

    let mut edited: Node = fs.tree.get(&cv).await?.ok_or("missing")?;
    edited.url = Some("s3://blobs/1-v2".into());
    edited.size = 50_004;
    fs.tree.put(&cv, &edited).await?;
    println!("edit resume.pdf: new blob URL, new size");

    let moved_file = docs.child(cv.name().unwrap_or_default())?;
    fs.tree
        .move_subtree(&cv, &photos.child(cv.name().unwrap_or_default())?)
        .await?;
    println!("move resume.pdf into Photos (and back)");
    fs.tree
        .move_subtree(&photos.child(cv.name().unwrap_or_default())?, &moved_file)
        .await?;

    // Move a folder in the background, watching its intent record for progress.
    let dest = docs.child(trips.name().unwrap_or_default())?;
    let task = {
        let tree = fs.tree.clone();
        let (from, to) = (trips.clone(), dest.clone());
        tokio::spawn(async move { tree.move_subtree(&from, &to).await })
    };
    println!("moving Photos/Trips into Documents in the background:");
    loop {
        let pending = fs.tree.pending().await?;
        match pending.first() {
            Some(i) => println!("  intent {}: phase {}", i.id, i.phase),
            None => break,
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        if task.is_finished() {
            break;
        }
    }
    let report = task.await??;
    println!(
        "  done: {} nodes, {} files and folders moved, nothing left pending",
        report.nodes, report.objects
    );

    match fs.create(&dest, "deeper", Kind::Folder, None, 0).await {
        Ok(p) => {
            let too_deep = fs.create(&p, "too deep", Kind::Folder, None, 0).await;
            println!(
                "depth limit {}: {}",
                fs.max_depth,
                too_deep
                    .err()
                    .map_or("not enforced?!".into(), |e| e.to_string())
            );
        }
        Err(e) => println!("depth limit: {e}"),
    }

    let deleted = fs.tree.delete_subtree(&photos).await?;
    println!("delete folder Photos: {deleted} objects");
    fs.tree
        .delete(&docs.child(cv.name().unwrap_or_default())?)
        .await?;
    println!("delete file resume.pdf");
    println!("\nthe tree now:");
    fs.print(&root, 2).await?;
    Ok(())
}
