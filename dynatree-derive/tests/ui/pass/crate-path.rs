use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

mod reexport {
    pub use dynatree as inner;
}

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}", crate = "reexport::inner")]
struct Account {
    id: String,
    name: String,
}

fn main() {}
