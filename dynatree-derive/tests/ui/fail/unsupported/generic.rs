use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Boxes/{id}")]
struct Boxed<T> {
    id: String,
    value: T,
}

fn main() {}
