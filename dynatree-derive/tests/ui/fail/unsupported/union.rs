use dynatree::Hierarchical;

#[derive(Hierarchical)]
#[dynatree(path = "Bits/{id}")]
union Bits {
    a: u32,
    b: f32,
}

fn main() {}
