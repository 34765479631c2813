//! On errors: the errors, plus a stub impl so the user sees them and not a cascade of
//! "`Link` does not implement `Hierarchical`" (the thiserror pattern).

use proc_macro2::TokenStream;
use quote::quote;

use crate::ast::Input;
use crate::expand::crate_path;

pub fn expand(input: &Input<'_>, errors: &syn::Error) -> TokenStream {
    let errors = errors.to_compile_error();
    if !input.supported {
        return errors;
    }
    let ident = input.ident;
    let krate = crate_path(input);
    quote! {
        #errors
        const _: () = {
            use #krate as __dynatree;
            #[automatically_derived]
            #[allow(unused_qualifications, clippy::absolute_paths)]
            impl __dynatree::Hierarchical for #ident {
                type Key = ();
                type Collection = ();
                type Last = __dynatree::__private::String;
                const TEMPLATE: &'static __dynatree::__private::str = "";
                const RESERVED: __dynatree::__private::char = '\u{a6}';
                const VERSION_FIELD: __dynatree::__private::Option<&'static __dynatree::__private::str> = __dynatree::__private::None;
                fn key(&self) {
                    ::core::unreachable!()
                }
                fn key_components(_: &()) -> __dynatree::__private::Vec<__dynatree::__private::String> {
                    ::core::unreachable!()
                }
                fn collection_of(_: &()) {
                    ::core::unreachable!()
                }
                fn collection_components(_: &()) -> __dynatree::__private::Vec<__dynatree::__private::String> {
                    ::core::unreachable!()
                }
                fn key_from_components(_: &[__dynatree::__private::String]) -> __dynatree::Result<()> {
                    ::core::unreachable!()
                }
                fn version(&self) -> __dynatree::__private::Option<__dynatree::__private::u64> {
                    ::core::unreachable!()
                }
                fn set_version(&mut self, _: __dynatree::__private::u64) {
                    ::core::unreachable!()
                }
            }
        };
    }
}
