use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Kinds/{r#type}")]
struct Kind {
    r#type: String,
}

fn main() {}
