use dynatree::Hierarchical;

#[derive(Hierarchical)]
#[dynatree(path = "Shapes/{id}")]
enum Shape {
    Circle,
    Square,
}

fn main() {}
