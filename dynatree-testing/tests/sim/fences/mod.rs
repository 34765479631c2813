//! Fenced puts (`TreeBuilder::fenced_puts`; the argument is the section "Fenced puts" of
//! `dynatree/src/tree/write.md`).

mod new_names;
mod protocols;
