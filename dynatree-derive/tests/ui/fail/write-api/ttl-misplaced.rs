use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Sessions/{id}")]
struct InPath {
    #[dynatree(ttl)]
    id: u64,
}

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Sessions/{id}")]
struct Twice {
    id: String,
    #[dynatree(ttl)]
    a: u64,
    #[dynatree(ttl)]
    b: u64,
}

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Sessions/{id}")]
struct AlsoVersion {
    id: String,
    #[dynatree(version, ttl)]
    v: u64,
}

fn main() {}
