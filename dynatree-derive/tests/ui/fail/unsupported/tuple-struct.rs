use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Ids/{0}")]
struct Id(String);

fn main() {}
