use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Points/{x}")]
struct Point {
    x: f64,
    name: String,
}

fn main() {}
