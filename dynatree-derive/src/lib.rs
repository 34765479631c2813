//! Implementation detail of the `dynatree` crate: the `#[derive(Hierarchical)]` macro.
//!
//! Depend on `dynatree` (feature `derive`, on by default) and use `dynatree::Hierarchical`
//! instead of this crate. Its API is semver-exempt: the generated code uses `dynatree`'s hidden
//! `__private` module, so this crate is pinned to the exact version of `dynatree` that uses it.
//! The derive never panics: every problem is a spanned compile error, all of them reported
//! together.

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
