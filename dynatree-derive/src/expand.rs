//! Code generation: reads the validated plan, returns tokens.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;

use crate::ast::Input;
use crate::ctxt::Ctxt;
use crate::fallback;
use crate::template::Component;
use crate::valid::{self, Plan};

/// The entry point: parse, validate, expand (or report every error and emit a stub impl).
pub fn derive(input: TokenStream) -> TokenStream {
    let input: syn::DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(err) => return err.into_compile_error(),
    };
    let cx = Ctxt::new();
    let ast = Input::from_ast(&cx, &input);
    let plan = valid::check(&cx, &ast);
    match (cx.check(), plan) {
        (Ok(()), Some(plan)) => expand(&ast, &plan),
        (Err(errors), _) => fallback::expand(&ast, &errors),
        (Ok(()), None) => fallback::expand(
            &ast,
            &syn::Error::new_spanned(ast.ident, "invalid `#[derive(Hierarchical)]` input"),
        ),
    }
}

pub fn crate_path(input: &Input<'_>) -> TokenStream {
    match &input.attrs.crate_path {
        Some(p) => quote!(#p),
        None => quote!(::dynatree),
    }
}

pub fn key_idents(input: &Input<'_>) -> (syn::Ident, syn::Ident) {
    let ident = input.ident;
    (
        format_ident!("{}Key", ident, span = ident.span()),
        format_ident!("{}Collection", ident, span = ident.span()),
    )
}

fn expand(input: &Input<'_>, plan: &Plan<'_>) -> TokenStream {
    let ident = input.ident;
    let vis = &input.original.vis;
    let krate = crate_path(input);
    let (key_ident, coll_ident) = key_idents(input);
    let template = plan.template;
    let reserved = plan.reserved;
    let n = plan.components.len();

    let key_names: Vec<&syn::Ident> = plan.placeholders.iter().map(|f| f.ident).collect();
    let key_types: Vec<&syn::Type> = plan.placeholders.iter().map(|f| f.ty).collect();
    let coll_names = &key_names[..key_names.len() - 1];
    let coll_types = &key_types[..key_types.len() - 1];
    let last_ty = key_types[key_types.len() - 1];

    // The field of a placeholder (validated to exist): its ident, raw if the field's is, and
    // its type.
    let field_of = |name: &str| {
        plan.placeholders
            .iter()
            .find(|p| p.is_named(name))
            .map(|p| (p.ident, p.ty))
    };
    let component_exprs = |source: &TokenStream, upto: usize| -> Vec<TokenStream> {
        plan.components[..upto]
            .iter()
            .map(|c| match c {
                Component::Literal(s) => quote!(__dynatree::__private::literal(#s)),
                Component::Placeholder(name) => match field_of(name) {
                    Some((f, ty)) => quote_spanned!(ty.span()=> (__dynatree::__private::seg::<#ty>().encode)(&#source.#f)),
                    None => quote!(::core::compile_error!("unresolved placeholder")),
                },
            })
            .collect()
    };
    let key_components = component_exprs(&quote!(__key), n);
    let coll_components = component_exprs(&quote!(__collection), n - 1);

    let mut literal_checks = Vec::new();
    let mut decoders = Vec::new();
    for (i, c) in plan.components.iter().enumerate() {
        match c {
            Component::Literal(s) => literal_checks.push(quote! {
                __dynatree::__private::expect_literal(&__components[#i], #s, #template)?;
            }),
            Component::Placeholder(name) => {
                let Some((f, ty)) = field_of(name) else {
                    continue;
                };
                let decode =
                    quote_spanned!(ty.span()=> (__dynatree::__private::seg::<#ty>().decode));
                decoders.push(quote! {
                    #f: #decode(&__components[#i])?
                });
            }
        }
    }

    let (version_field, version_get, version_set) = match &plan.version {
        Some((field, name)) => {
            let f = field.ident;
            (
                quote!(__dynatree::__private::Some(#name)),
                quote!(__dynatree::__private::Some(self.#f)),
                quote!(self.#f = __version;),
            )
        }
        None => (
            quote!(__dynatree::__private::None),
            quote!(__dynatree::__private::None),
            quote!(let _ = __version;),
        ),
    };

    let ttl_items = plan.ttl.as_ref().map(|(field, name)| {
        let f = field.ident;
        let ty = field.ty;
        let get = quote_spanned!(ty.span()=> __dynatree::__private::expiry::<#ty>(&self.#f));
        quote! {
            const TTL_FIELD: __dynatree::__private::Option<&'static __dynatree::__private::str> =
                __dynatree::__private::Some(#name);

            fn expires_at(&self) -> __dynatree::__private::Option<__dynatree::__private::u64> {
                #get
            }
        }
    });

    let fields_items = fields_items(input, plan, &krate, vis);

    let denorm_defs = plan.denormalized.iter().map(|d| {
        let attr = &d.attr;
        let ty = d.field.ty;
        let src = &d.source_type;
        let f = &d.source_field;
        // `Option<..>` (by its last path segment): holds `None` for a missing source, also when
        // the source field is an `Option` itself (a chain of optional copies).
        let nullable = matches!(ty, syn::Type::Path(p)
            if p.qself.is_none() && p.path.segments.last().is_some_and(|s| s.ident == "Option"));
        quote_spanned! {d.source_path.span()=>
            __dynatree::__private::denormalized::<#src, _, _, #ty>(#attr, <#src>::FIELDS.#f, #nullable)
        }
    });
    let denorm_items = (!plan.denormalized.is_empty()).then(|| {
        quote! {
            const DENORMALIZED: &'static [__dynatree::denorm::Denormalized] = &[ #( #denorm_defs ),* ];
        }
    });
    let denorm_checks = plan.denormalized.iter().map(|d| {
        let src = &d.source_type;
        quote_spanned! {d.source_path.span()=>
            #[allow(unused_qualifications, clippy::absolute_paths)]
            const _: () = ::core::assert!(
                __dynatree::__private::template_strictly_extends(
                    <#ident as __dynatree::Hierarchical>::TEMPLATE,
                    <#src as __dynatree::Hierarchical>::TEMPLATE,
                ),
                "the source of `#[dynatree(from = ...)]` must be an ancestor: the path template must extend the source type's",
            );
        }
    });

    let parent_check = input.attrs.parent.as_ref().map(|parent| {
        quote_spanned! {parent.span()=>
            #[allow(unused_qualifications, clippy::absolute_paths)]
            const _: () = ::core::assert!(
                __dynatree::__private::template_extends(
                    <#ident as __dynatree::Hierarchical>::TEMPLATE,
                    <#parent as __dynatree::Hierarchical>::TEMPLATE,
                ),
                "the path template does not extend the path template of its `parent`",
            );
        }
    });

    let key_std_impls = std_impls(&key_ident, &key_names, &key_types);
    let coll_std_impls = std_impls(&coll_ident, coll_names, coll_types);
    let key_display = display_impl(ident, &key_ident, &quote!(key_components));
    let coll_display = display_impl(ident, &coll_ident, &quote!(collection_components));

    // The names the fields are stored under in the item, so a key serializes like the item.
    let rename_all = input.attrs.rename_all.as_ref().map(syn::LitStr::value);
    let key_serde_names: Vec<String> = plan
        .placeholders
        .iter()
        .map(|f| f.attribute_name(rename_all.as_deref()))
        .collect();
    let coll_serde_names = &key_serde_names[..key_serde_names.len() - 1];

    let index_defs = plan.indexes.iter().map(|ix| {
        let name = &ix.name;
        let has_range = ix.range.is_some();
        quote!(__dynatree::keys::IndexDef::new(#name, #has_range))
    });
    let index_keys = plan.indexes.iter().map(|ix| {
        let name = &ix.name;
        let (hf, hty) = (ix.hash.ident, ix.hash.ty);
        let hash = quote_spanned!(hty.span()=> (__dynatree::__private::seg::<#hty>().encode)(&self.#hf));
        let range = match ix.range {
            Some(r) => {
                let (rf, rty) = (r.ident, r.ty);
                let e = quote_spanned!(rty.span()=> (__dynatree::__private::seg::<#rty>().encode)(&self.#rf));
                quote!(__dynatree::__private::Some(#e))
            }
            None => quote!(__dynatree::__private::None),
        };
        quote!(__dynatree::keys::IndexKey::new(#name, #hash, #range))
    });
    let index_fns = plan.indexes.iter().map(|ix| {
        let name = &ix.name;
        let fn_name = format_ident!("index_{}", name.replace(['-', '.'], "_"));
        let (hf, hty) = (ix.hash.ident, ix.hash.ty);
        let hf_name = hf.unraw();
        let doc = format!(
            "Looks up `{ident}` values by `{hf_name}` in the secondary index `{name}`: pass to \
             [`Repository::index`]({}::Repository::index).",
            "dynatree"
        );
        let doc_borrowed = "\n\nTakes the field's type or a borrowed form of it (`&str` for a \
             `String`): any [`AsKeySegment`](dynatree::keys::AsKeySegment) of it.";
        quote! {
            #[doc = #doc]
            #[doc = #doc_borrowed]
            #[must_use]
            #vis fn #fn_name(
                #hf: &(impl ?::core::marker::Sized + __dynatree::__private::AsKeySegment<#hty>),
            ) -> __dynatree::keys::IndexKey {
                __dynatree::keys::IndexKey::new(
                    #name,
                    __dynatree::__private::AsKeySegment::<#hty>::encode_segment(#hf),
                    __dynatree::__private::None,
                )
            }
        }
    });
    let has_indexes = !plan.indexes.is_empty();
    let index_items = has_indexes.then(|| {
        quote! {
            const INDEXES: &'static [__dynatree::keys::IndexDef] = &[ #( #index_defs ),* ];

            fn index_keys(&self) -> __dynatree::__private::Vec<__dynatree::keys::IndexKey> {
                ::std::vec![ #( #index_keys ),* ]
            }
        }
    });
    let index_impl = has_indexes.then(|| {
        quote! {
            #[automatically_derived]
            #[allow(unused_qualifications, clippy::absolute_paths)]
            impl #ident {
                #( #index_fns )*
            }
        }
    });

    let key_doc = format!(
        "The key of [`{ident}`]: the fields of its path template `{}`.",
        template.value()
    );
    let coll_doc = format!(
        "The collection [`{ident}`] values live in: the placeholders of `{}` but the last.",
        template.value()
    );
    // What both structs implement (`#[doc]` lines join with a newline, so this is a paragraph).
    let traits_doc = "\nDisplays as its path, as `path()?.to_string()` prints it \
        (`/Accounts/a1`); never fails: where `path()` is an error (an encoded component is \
        empty), the empty component shows as nothing between two slashes. Serializes as a \
        struct of its fields, under the names the item stores them under, when every field \
        type implements serde's traits. `Debug`, `Clone`, `PartialEq`, `Eq`, `Hash`; \
        `PartialOrd` and `Ord` when every field is `Ord`, comparing fields in template order, \
        which is the order of the paths.";
    let key_doc = format!("{key_doc}\n{traits_doc}");
    let coll_doc = format!("{coll_doc}\n{traits_doc}");

    let key_struct = struct_def(
        &krate,
        vis,
        &key_ident,
        &key_doc,
        &key_names,
        &key_types,
        &key_serde_names,
    );
    let coll_struct = struct_def(
        &krate,
        vis,
        &coll_ident,
        &coll_doc,
        coll_names,
        coll_types,
        coll_serde_names,
    );

    quote! {
        #key_struct

        #coll_struct

        #fields_items

        const _: () = {
            use #krate as __dynatree;

            #parent_check
            #( #denorm_checks )*

            #[automatically_derived]
            #[allow(unused_qualifications, clippy::absolute_paths)]
            impl __dynatree::Hierarchical for #ident {
                type Key = #key_ident;
                type Collection = #coll_ident;
                type Last = #last_ty;

                const TEMPLATE: &'static __dynatree::__private::str = #template;
                const RESERVED: __dynatree::__private::char = #reserved;
                const VERSION_FIELD: __dynatree::__private::Option<&'static __dynatree::__private::str> = #version_field;

                fn key(&self) -> #key_ident {
                    #key_ident {
                        #( #key_names: __dynatree::__private::Clone::clone(&self.#key_names), )*
                    }
                }

                fn key_components(__key: &#key_ident) -> __dynatree::__private::Vec<__dynatree::__private::String> {
                    ::std::vec![ #( #key_components ),* ]
                }

                fn collection_of(__key: &#key_ident) -> #coll_ident {
                    #coll_ident {
                        #( #coll_names: __dynatree::__private::Clone::clone(&__key.#coll_names), )*
                    }
                }

                fn collection_components(__collection: &#coll_ident) -> __dynatree::__private::Vec<__dynatree::__private::String> {
                    ::std::vec![ #( #coll_components ),* ]
                }

                fn key_from_components(
                    __components: &[__dynatree::__private::String],
                ) -> __dynatree::Result<#key_ident> {
                    __dynatree::__private::expect_len(__components, #n, #template)?;
                    #( #literal_checks )*
                    __dynatree::__private::Ok(#key_ident { #( #decoders, )* })
                }

                fn version(&self) -> __dynatree::__private::Option<__dynatree::__private::u64> {
                    #version_get
                }

                fn set_version(&mut self, __version: __dynatree::__private::u64) {
                    #version_set
                }

                #index_items

                #ttl_items

                #denorm_items
            }

            #index_impl

            #key_std_impls
            #coll_std_impls
            #key_display
            #coll_display

            #[automatically_derived]
            #[allow(unused_qualifications, clippy::absolute_paths)]
            impl #key_ident {
                /// The path of this key.
                ///
                /// # Errors
                ///
                /// If an encoded component is empty.
                #vis fn path(&self) -> __dynatree::Result<__dynatree::Path> {
                    <#ident as __dynatree::Hierarchical>::key_path(self)
                }

                /// The collection this key belongs to.
                #vis fn collection(&self) -> #coll_ident {
                    <#ident as __dynatree::Hierarchical>::collection_of(self)
                }
            }

            #[automatically_derived]
            #[allow(unused_qualifications, clippy::absolute_paths)]
            impl #coll_ident {
                /// The path of this collection (the prefix its values are listed under).
                ///
                /// # Errors
                ///
                /// If an encoded component is empty.
                #vis fn path(&self) -> __dynatree::Result<__dynatree::Path> {
                    <#ident as __dynatree::Hierarchical>::collection_path(self)
                }
            }
        };
    }
}

/// `Eq`, `Hash`, `PartialOrd` and `Ord` for a key struct (`Debug`, `Clone`, `PartialEq` are
/// derived): `Hash` goes through the `KeySegment`-bounded `seg` table, so a field of the wrong
/// type reports only that. The order compares the fields in template order, so it is the order of
/// the paths (segments encode in their own order); it exists when every field is `Ord`, the
/// bounds made conditional with `for<'__dt>` as in [`struct_def`].
fn std_impls(ident: &syn::Ident, names: &[&syn::Ident], types: &[&syn::Type]) -> TokenStream {
    let hashes: Vec<TokenStream> = types
        .iter()
        .map(|ty| quote_spanned!(ty.span()=> (__dynatree::__private::seg::<#ty>().hash)))
        .collect();
    let ord_types = unique_types(types);
    quote! {
        #[automatically_derived]
        impl ::core::cmp::PartialOrd for #ident
        where
            #( for<'__dt> #ord_types: ::core::cmp::Ord, )*
        {
            fn partial_cmp(
                &self,
                __other: &Self,
            ) -> ::core::option::Option<::core::cmp::Ordering> {
                ::core::option::Option::Some(::core::cmp::Ord::cmp(self, __other))
            }
        }
        #[automatically_derived]
        impl ::core::cmp::Ord for #ident
        where
            #( for<'__dt> #ord_types: ::core::cmp::Ord, )*
        {
            fn cmp(&self, __other: &Self) -> ::core::cmp::Ordering {
                let _ = &__other;
                #(
                    match ::core::cmp::Ord::cmp(&self.#names, &__other.#names) {
                        ::core::cmp::Ordering::Equal => {}
                        __ordering => return __ordering,
                    }
                )*
                ::core::cmp::Ordering::Equal
            }
        }
        #[automatically_derived]
        impl ::core::cmp::Eq for #ident {}
        #[automatically_derived]
        impl ::core::hash::Hash for #ident {
            fn hash<__H: ::core::hash::Hasher>(&self, __state: &mut __H) {
                let _ = &__state;
                #( #hashes(&self.#names, __state); )*
            }
        }
    }
}

/// A key or collection struct: the fields of `names`, `pub`, with `Debug`, `Clone`,
/// `PartialEq` and serde's traits derived. serde is reached through `__private` (no `serde`
/// dependency needed by the user), the fields are renamed to the names the item stores them
/// under, and the serde bounds are the fields' own, made conditional with `for<'__dt>` (a bound
/// that names no generic parameter is otherwise checked, and refused, where the impl is
/// written): a field type without serde support leaves the struct without it instead of
/// failing the derive.
fn struct_def(
    krate: &TokenStream,
    vis: &syn::Visibility,
    ident: &syn::Ident,
    doc: &str,
    names: &[&syn::Ident],
    types: &[&syn::Type],
    serde_names: &[String],
) -> TokenStream {
    let serde_path = format!("{krate}::__private::serde");
    let bound = |tr: &str| {
        unique_types(types)
            .iter()
            .map(|ty| format!("for<'__dt> {}: {serde_path}::{tr}", quote!(#ty)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let ser_bound = bound("Serialize");
    let de_bound = bound("Deserialize<'de>");
    quote! {
        #[doc = #doc]
        #[derive(
            ::core::fmt::Debug,
            ::core::clone::Clone,
            ::core::cmp::PartialEq,
            #krate::__private::serde::Serialize,
            #krate::__private::serde::Deserialize,
        )]
        #[serde(crate = #serde_path, bound(serialize = #ser_bound, deserialize = #de_bound))]
        #vis struct #ident {
            #( #[allow(missing_docs)] #[serde(rename = #serde_names)] pub #names: #types, )*
        }
    }
}

/// Each type once (by its tokens), so a bound is not repeated in a where clause.
fn unique_types<'a>(types: &[&'a syn::Type]) -> Vec<&'a syn::Type> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for ty in types {
        let key = quote!(#ty).to_string();
        if !seen.contains(&key) {
            seen.push(key);
            out.push(*ty);
        }
    }
    out
}

/// `Display` (the path, through `components`, a `Hierarchical` function) for a key struct.
fn display_impl(item: &syn::Ident, ident: &syn::Ident, components: &TokenStream) -> TokenStream {
    quote! {
        #[automatically_derived]
        #[allow(unused_qualifications, clippy::absolute_paths)]
        impl ::core::fmt::Display for #ident {
            fn fmt(&self, __f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                __dynatree::__private::fmt_components(
                    &<#item as __dynatree::Hierarchical>::#components(self),
                    __f,
                )
            }
        }
    }
}

/// The field handles: a struct `<Type>Fields` with one `Field` per stored field, and the
/// constant `<Type>::FIELDS`. Key fields, index fields, the version field and denormalized
/// copies are `ReadOnly`.
fn fields_items(
    input: &Input<'_>,
    plan: &Plan<'_>,
    krate: &TokenStream,
    vis: &syn::Visibility,
) -> TokenStream {
    let ident = input.ident;
    let fields_ident = format_ident!("{}Fields", ident, span = ident.span());
    let rename_all = input.attrs.rename_all.as_ref().map(syn::LitStr::value);
    let read_only = |f: &crate::ast::Field<'_>| {
        plan.placeholders.iter().any(|p| p.ident == f.ident)
            || plan
                .indexes
                .iter()
                .any(|ix| ix.hash.ident == f.ident || ix.range.is_some_and(|r| r.ident == f.ident))
            || plan
                .version
                .as_ref()
                .is_some_and(|(v, _)| v.ident == f.ident)
    };
    // A copy (`#[dynatree(from = ...)]`) follows its source: only dynatree writes it.
    let copy =
        |f: &crate::ast::Field<'_>| plan.denormalized.iter().any(|d| d.field.ident == f.ident);
    let stored = input.fields.iter().filter(|f| {
        !f.attrs
            .serde_skips
            .iter()
            .any(|p| p.is_ident("skip") || p.is_ident("skip_serializing"))
    });
    let mut names = Vec::new();
    let mut types = Vec::new();
    let mut inits = Vec::new();
    let mut docs = Vec::new();
    for f in stored {
        let name = f.ident;
        let ty = f.ty;
        let attr = f.attribute_name(rename_all.as_deref());
        let (field_ty, doc) = if copy(f) {
            (
                quote!(#krate::update::Field<#ident, #ty, #krate::update::ReadOnly>),
                format!(
                    "`{}` (stored as `{attr}`): conditions only (a denormalized copy, written by dynatree).",
                    name.unraw()
                ),
            )
        } else if read_only(f) {
            (
                quote!(#krate::update::Field<#ident, #ty, #krate::update::ReadOnly>),
                format!(
                    "`{}` (stored as `{attr}`): conditions only (a key, index or version field).",
                    name.unraw()
                ),
            )
        } else {
            (
                quote!(#krate::update::Field<#ident, #ty>),
                format!("`{}` (stored as `{attr}`).", name.unraw()),
            )
        };
        names.push(name);
        types.push(field_ty);
        inits.push(quote!(#krate::update::Field::new(#attr)));
        docs.push(doc);
    }
    let struct_doc = format!(
        "Handles on the stored fields of [`{ident}`], for typed conditions and partial updates: \
         [`{ident}::FIELDS`]."
    );
    let const_doc = format!(
        "Handles on the stored fields of `{ident}`, for typed conditions \
         ([`Cond`]({krate}::update::Cond)) and partial updates ([`Patch`]({krate}::Patch)).",
        krate = "dynatree"
    );
    quote! {
        #[doc = #struct_doc]
        #[derive(::core::clone::Clone, ::core::marker::Copy, ::core::fmt::Debug)]
        #[allow(private_interfaces)]
        #vis struct #fields_ident {
            #( #[doc = #docs] pub #names: #types, )*
        }

        #[automatically_derived]
        #[allow(unused_qualifications, clippy::absolute_paths)]
        impl #ident {
            #[doc = #const_doc]
            #vis const FIELDS: #fields_ident = #fields_ident { #( #names: #inits, )* };
        }
    }
}
