use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Sessions/{id}")]
struct Session {
    id: String,
    #[dynatree(ttl)]
    until: String,
}

fn main() {}
