use dynatree::{update::Cond, Expiry, Hierarchical, Patch};
use serde::{Deserialize, Serialize};
use std::time::SystemTime;

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Posts/{id}", index(name = "by_author", hash = author))]
#[serde(rename_all = "camelCase")]
pub struct Post {
    id: String,
    author: String,
    view_count: u64,
    tags: Vec<String>,
    note: Option<String>,
    #[serde(skip)]
    cache: u8,
    #[dynatree(ttl)]
    expires_at: Option<SystemTime>,
    #[dynatree(version)]
    version: u64,
}

fn main() {
    let f = Post::FIELDS;
    assert_eq!(f.view_count.name(), "viewCount");
    let c: Cond<Post> = f.author.eq("ann") & !f.tags.contains("x") | f.note.begins_with("n");
    let _ = c;
    let _ = Patch::<Post>::new(&PostKey { id: "p".into() })
        .add(f.view_count, 1)
        .append(f.tags, vec!["a".to_owned()])
        .remove(f.note)
        .set(f.expires_at, None)
        .when(f.version.eq(3u64));
    assert_eq!(<Post as Hierarchical>::TTL_FIELD, Some("expiresAt"));
    assert_eq!(None::<SystemTime>.expires_at(), None);
}
