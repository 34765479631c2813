use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Sensors/{sensor}/Days/{day}/Readings/{at}/{ok}")]
struct Reading {
    sensor: u32,
    day: i16,
    at: u64,
    ok: bool,
    value: f64,
}

fn main() {}
