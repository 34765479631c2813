//! The input, borrowed from `syn::DeriveInput`, with its parsed attributes. No tokens are made
//! here.

use syn::ext::IdentExt;
use syn::{Data, DeriveInput, Fields, Ident, Type};

use crate::attr;
use crate::ctxt::Ctxt;

pub struct Input<'a> {
    pub original: &'a DeriveInput,
    pub ident: &'a Ident,
    pub attrs: attr::Container,
    /// The named fields; empty when the shape is unsupported (already reported).
    pub fields: Vec<Field<'a>>,
    /// Whether the input is a struct with named fields and no generics.
    pub supported: bool,
}

pub struct Field<'a> {
    pub ident: &'a Ident,
    pub ty: &'a Type,
    pub attrs: attr::Field,
}

impl Field<'_> {
    /// Whether `name` (from a template placeholder, so without `r#`) names this field.
    pub fn is_named(&self, name: &str) -> bool {
        self.ident.unraw() == name
    }

    /// The name the field has as a DynamoDB attribute (serde's name).
    pub fn attribute_name(&self, rename_all: Option<&str>) -> String {
        if let Some(r) = &self.attrs.rename {
            return r.value();
        }
        let name = self.ident.to_string();
        let name = name.strip_prefix("r#").unwrap_or(&name).to_owned();
        rename_all
            .and_then(|rule| attr::apply_rename_all(rule, &name))
            .unwrap_or(name)
    }
}

impl<'a> Input<'a> {
    pub fn from_ast(cx: &Ctxt, input: &'a DeriveInput) -> Self {
        let attrs = attr::Container::from_ast(cx, input);
        let mut supported = true;
        let mut fields = Vec::new();
        match &input.data {
            Data::Struct(data) => match &data.fields {
                Fields::Named(named) => {
                    for f in &named.named {
                        fields.push(Field {
                            ident: f.ident.as_ref().expect("named field"),
                            ty: &f.ty,
                            attrs: attr::Field::from_ast(cx, f),
                        });
                    }
                }
                Fields::Unnamed(u) => {
                    supported = false;
                    cx.error_spanned_by(
                        u,
                        "`#[derive(Hierarchical)]` does not support tuple structs: path placeholders name fields\n\nhelp: use a struct with named fields",
                    );
                }
                Fields::Unit => {
                    supported = false;
                    cx.error_spanned_by(
                        &input.ident,
                        "`#[derive(Hierarchical)]` does not support unit structs: path placeholders name fields",
                    );
                }
            },
            Data::Enum(e) => {
                supported = false;
                cx.error_spanned_by(
                    e.enum_token,
                    "`#[derive(Hierarchical)]` does not support enums\n\nhelp: derive it on a struct with named fields; for an enum whose variants each hold a hierarchical type, derive `Entity`; an enum can be a field through `KeySegment`",
                );
            }
            Data::Union(u) => {
                supported = false;
                cx.error_spanned_by(
                    u.union_token,
                    "`#[derive(Hierarchical)]` does not support unions",
                );
            }
        }
        if !input.generics.params.is_empty() {
            supported = false;
            cx.error_spanned_by(
                &input.generics,
                "`#[derive(Hierarchical)]` does not support generic types",
            );
        }
        Input {
            original: input,
            ident: &input.ident,
            attrs,
            fields,
            supported,
        }
    }
}
