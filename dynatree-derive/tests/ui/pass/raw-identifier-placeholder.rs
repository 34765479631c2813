use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(
    path = "Kinds/{type}/Items/{ref}",
    index(name = "by_match", hash = r#match, range = r#type)
)]
struct Item {
    r#type: String,
    r#ref: u32,
    r#match: String,
}

fn main() {
    let key = ItemKey {
        r#type: "book".into(),
        r#ref: 7,
    };
    assert_eq!(
        key.path().unwrap().to_string(),
        "/Kinds/book/Items/0000000007"
    );
    assert_eq!(
        key.collection().path().unwrap().to_string(),
        "/Kinds/book/Items"
    );
    let item = Item {
        r#type: "book".into(),
        r#ref: 7,
        r#match: "m".into(),
    };
    assert_eq!(item.key(), key);
    assert_eq!(Item::key_from_path(&key.path().unwrap()).unwrap(), key);
    let _ = Item::index_by_match(&"m".to_owned());
}
