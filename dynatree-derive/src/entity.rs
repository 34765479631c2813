//! `#[derive(Entity)]`: an enum whose variants each hold one hierarchical type, decoded by the
//! variant whose path template matches an object's path. Parsed and checked here (every
//! problem spanned and collected), expanded into the impl plus compile-time checks that need
//! the variants' templates (constants of other types, so evaluated by rustc, not here).

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, Ident, LitStr, Type};

use crate::attr::{path_string, value_of};
use crate::ctxt::Ctxt;
use crate::symbol::{CRATE, DYNATREE, OTHER};

/// The enum, checked.
struct Input<'a> {
    ident: &'a Ident,
    crate_path: Option<syn::Path>,
    /// The variants holding a hierarchical type, in order.
    variants: Vec<Variant<'a>>,
    /// The `#[dynatree(other)]` variant and its field's type.
    other: Option<Variant<'a>>,
    /// Whether a stub impl may follow errors (an enum without generics).
    supported: bool,
}

struct Variant<'a> {
    ident: &'a Ident,
    ty: &'a Type,
    original: &'a syn::Variant,
}

pub fn derive(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(err) => return err.into_compile_error(),
    };
    let cx = Ctxt::new();
    let parsed = parse(&cx, &input);
    match cx.check() {
        Ok(()) => expand(&parsed),
        Err(errors) => fallback(&parsed, &errors),
    }
}

fn parse<'a>(cx: &Ctxt, input: &'a DeriveInput) -> Input<'a> {
    let crate_path = container_attrs(cx, input);
    let mut out = Input {
        ident: &input.ident,
        crate_path,
        variants: Vec::new(),
        other: None,
        supported: true,
    };
    if !input.generics.params.is_empty() {
        out.supported = false;
        cx.error_spanned_by(
            &input.generics,
            "`#[derive(Entity)]` does not support generic types",
        );
    }
    let data = match &input.data {
        Data::Enum(data) => data,
        Data::Struct(s) => {
            out.supported = false;
            cx.error_spanned_by(
                s.struct_token,
                "`#[derive(Entity)]` is for an enum of hierarchical types\n\nhelp: on a struct, derive `Hierarchical` (every hierarchical type is an `Entity`)",
            );
            return out;
        }
        Data::Union(u) => {
            out.supported = false;
            cx.error_spanned_by(
                u.union_token,
                "`#[derive(Entity)]` is for an enum of hierarchical types",
            );
            return out;
        }
    };
    for v in &data.variants {
        let other = is_other(cx, v);
        let ty = match &v.fields {
            Fields::Unnamed(f) if f.unnamed.len() == 1 => &f.unnamed[0].ty,
            _ => {
                let help = if other {
                    "the `#[dynatree(other)]` variant holds a `dynatree::entity::Unknown`, like `Other(Unknown)`"
                } else {
                    "each variant holds one hierarchical type, like `Link(Link)`"
                };
                cx.error_spanned_by(
                    v,
                    format!(
                        "`{}` must hold exactly one unnamed field\n\nhelp: {help}",
                        v.ident
                    ),
                );
                continue;
            }
        };
        let variant = Variant {
            ident: &v.ident,
            ty,
            original: v,
        };
        if !other {
            out.variants.push(variant);
        } else if out.other.is_some() {
            cx.error_spanned_by(
                v,
                "a second `#[dynatree(other)]` variant\n\nhelp: one variant holds every object whose path matches no other",
            );
        } else {
            out.other = Some(variant);
        }
    }
    let malformed = out.variants.len() + usize::from(out.other.is_some()) < data.variants.len();
    if out.variants.is_empty() && !malformed {
        cx.error_spanned_by(
            &input.ident,
            format!(
                "`{}` has no variant holding a hierarchical type\n\nhelp: add one, like `Link(Link)`",
                input.ident
            ),
        );
    }
    out
}

/// The container's `#[dynatree(crate = "...")]`; anything else is reported.
fn container_attrs(cx: &Ctxt, input: &DeriveInput) -> Option<syn::Path> {
    let mut crate_path: Option<syn::Path> = None;
    for attr in input.attrs.iter().filter(|a| a.path() == DYNATREE) {
        let result = attr.parse_nested_meta(|meta| {
            if meta.path == CRATE {
                let s: LitStr = value_of(&meta, CRATE)?.parse()?;
                if crate_path.is_some() {
                    cx.error_spanned_by(&meta.path, "duplicate dynatree attribute `crate`");
                }
                match s.parse::<syn::Path>() {
                    Ok(p) => crate_path = Some(p),
                    Err(_) => cx.error_spanned_by(&s, format!("`{}` is not a path", s.value())),
                }
                Ok(())
            } else {
                Err(meta.error(format_args!(
                    "unknown dynatree attribute `{}` on an entity enum\n\nhelp: expected `crate`; the path templates are those of the variants' types",
                    path_string(&meta.path)
                )))
            }
        });
        if let Err(e) = result {
            cx.syn_error(e);
        }
    }
    crate_path
}

/// Whether `v` is marked `#[dynatree(other)]`; anything else is reported.
fn is_other(cx: &Ctxt, v: &syn::Variant) -> bool {
    let mut other = false;
    for attr in v.attrs.iter().filter(|a| a.path() == DYNATREE) {
        let result = attr.parse_nested_meta(|meta| {
            if meta.path == OTHER {
                if other {
                    cx.error_spanned_by(&meta.path, "duplicate dynatree attribute `other`");
                }
                other = true;
                Ok(())
            } else {
                Err(meta.error(format_args!(
                    "unknown dynatree variant attribute `{}`\n\nhelp: expected `other`",
                    path_string(&meta.path)
                )))
            }
        });
        if let Err(e) = result {
            cx.syn_error(e);
        }
    }
    other
}

fn crate_path(input: &Input<'_>) -> TokenStream {
    match &input.crate_path {
        Some(p) => quote!(#p),
        None => quote!(::dynatree),
    }
}

fn expand(input: &Input<'_>) -> TokenStream {
    let ident = input.ident;
    let krate = crate_path(input);
    let variant = |ty: &Type| quote_spanned!(ty.span()=> __dynatree::__private::variant::<#ty>());
    let arms = input.variants.iter().map(|v| {
        let (name, of) = (v.ident, variant(v.ty));
        quote! {
            if (#of.matches)(path) {
                return (#of.decode)(object).map(|v| __dynatree::__private::Some(Self::#name(v)));
            }
        }
    });
    let rest = match &input.other {
        Some(v) => {
            let name = v.ident;
            let unknown = quote_spanned! {v.ty.span()=>
                __dynatree::__private::entity_unknown(path, object, <Self as __dynatree::Entity>::RESERVED)
            };
            quote!(__dynatree::__private::Ok(__dynatree::__private::Some(Self::#name(#unknown))))
        }
        None => quote! {
            let _ = object;
            __dynatree::__private::Ok(__dynatree::__private::None)
        },
    };
    let first = &input.variants[0];
    let first_of = variant(first.ty);
    let templates = input.variants.iter().map(|v| {
        let of = variant(v.ty);
        quote!(#of.template)
    });
    let mut checks = Vec::new();
    for v in &input.variants[1..] {
        let msg = format!(
            "`{ident}::{}` was checked against another reserved character than `{ident}::{}`",
            v.ident, first.ident
        );
        let of = variant(v.ty);
        checks.push(quote_spanned! {v.original.span()=>
            const _: () = if !__dynatree::__private::same_reserved(#of.reserved, #first_of.reserved) {
                ::core::panic!(#msg)
            };
        });
    }
    for (i, a) in input.variants.iter().enumerate() {
        for b in &input.variants[i + 1..] {
            let msg = format!(
                "the templates of `{ident}::{}` and `{ident}::{}` can name the same path; each path must name one variant",
                a.ident, b.ident
            );
            let (ta, tb) = (variant(a.ty), variant(b.ty));
            for v in [a, b] {
                checks.push(quote_spanned! {v.original.span()=>
                    const _: () = if __dynatree::__private::templates_overlap(#ta.template, #tb.template) {
                        ::core::panic!(#msg)
                    };
                });
            }
        }
    }
    quote! {
        #[allow(non_upper_case_globals, unused_qualifications, clippy::absolute_paths)]
        const _: () = {
            use #krate as __dynatree;

            #[automatically_derived]
            impl __dynatree::Entity for #ident {
                const TEMPLATES: &'static [&'static __dynatree::__private::str] = &[ #( #templates ),* ];
                const RESERVED: __dynatree::__private::char = #first_of.reserved;

                fn decode(
                    path: &__dynatree::Path,
                    object: __dynatree::storage::Item,
                ) -> __dynatree::Result<__dynatree::__private::Option<Self>> {
                    #( #arms )*
                    #rest
                }
            }

            #( #checks )*
        };
    }
}

/// The errors, plus a stub impl (when the input is an enum) so that they are all the user sees.
fn fallback(input: &Input<'_>, errors: &syn::Error) -> TokenStream {
    let errors = errors.to_compile_error();
    if !input.supported {
        return errors;
    }
    let ident = input.ident;
    let krate = crate_path(input);
    quote! {
        #errors
        #[allow(unused_qualifications, clippy::absolute_paths)]
        const _: () = {
            use #krate as __dynatree;
            #[automatically_derived]
            impl __dynatree::Entity for #ident {
                const TEMPLATES: &'static [&'static __dynatree::__private::str] = &[];
                const RESERVED: __dynatree::__private::char = '\u{a6}';
                fn decode(
                    _: &__dynatree::Path,
                    _: __dynatree::storage::Item,
                ) -> __dynatree::Result<__dynatree::__private::Option<Self>> {
                    ::core::unreachable!()
                }
            }
        };
    }
}
