use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Sku(u32);

impl dynatree::keys::KeySegment for Sku {
    fn encode(&self) -> String {
        format!("SKU{}", dynatree::keys::KeySegment::encode(&self.0))
    }
    fn decode(s: &str) -> dynatree::Result<Self> {
        let digits = s.strip_prefix("SKU").unwrap_or(s);
        Ok(Sku(<u32 as dynatree::keys::KeySegment>::decode(digits)?))
    }
}

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Products/{sku}")]
struct Product {
    sku: Sku,
    name: String,
}

fn main() {}
