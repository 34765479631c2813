#![doc = include_str!("../README.md")]

mod ast;
mod attr;
mod ctxt;
mod entity;
mod expand;
mod fallback;
mod symbol;
mod template;
mod valid;

#[cfg(test)]
mod tests;

use proc_macro::TokenStream;

/// Derives `dynatree::Hierarchical`; documented on its re-export in `dynatree`.
#[proc_macro_derive(Hierarchical, attributes(dynatree))]
pub fn derive_hierarchical(input: TokenStream) -> TokenStream {
    expand::derive(input.into()).into()
}

/// Derives `dynatree::Entity` for an enum of hierarchical types; documented on its re-export
/// in `dynatree`.
#[proc_macro_derive(Entity, attributes(dynatree))]
pub fn derive_entity(input: TokenStream) -> TokenStream {
    entity::derive(input.into()).into()
}
