use dynatree::Entity;

#[derive(Entity)]
enum Nothing {
    #[dynatree(other)]
    Other(dynatree::entity::Unknown),
}

#[derive(Entity)]
enum Empty {}

fn main() {}
