#![doc = include_str!("../README.md")]

mod ast;
mod attr;
mod ctxt;
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
