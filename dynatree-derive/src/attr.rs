//! `#[dynatree(...)]` (and the `#[serde(...)]` keys we must know about: the names, and those
//! that would break keys), parsed with `parse_nested_meta`; every problem goes to the context,
//! parsing goes on.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::meta::ParseNestedMeta;
use syn::{LitStr, Token};

use crate::ctxt::Ctxt;
use crate::symbol::{
    CONTENT, CRATE, DYNATREE, FLATTEN, FROM, HASH, INDEX, INTO, NAME, PARENT, PATH, RANGE, RENAME,
    RENAME_ALL, RESERVED, SERDE, SKIP, SKIP_DESERIALIZING, SKIP_SERIALIZING, SKIP_SERIALIZING_IF,
    Symbol, TAG, TRANSPARENT, TRY_FROM, TTL, VERSION,
};

/// A value that may be set once; a second setting is reported on its own tokens.
pub struct Attr<'c, T> {
    cx: &'c Ctxt,
    name: Symbol,
    tokens: TokenStream,
    value: Option<T>,
}

impl<'c, T> Attr<'c, T> {
    fn none(cx: &'c Ctxt, name: Symbol) -> Self {
        Attr {
            cx,
            name,
            tokens: TokenStream::new(),
            value: None,
        }
    }

    fn set<A: ToTokens>(&mut self, obj: A, value: T) {
        let tokens = obj.into_token_stream();
        if self.value.is_some() {
            self.cx.error_spanned_by(
                tokens,
                format!("duplicate dynatree attribute `{}`", self.name),
            );
        } else {
            self.tokens = tokens;
            self.value = Some(value);
        }
    }

    fn get(self) -> Option<T> {
        self.value
    }
}

/// The container's attributes.
pub struct Container {
    /// The template and its literal (for spans).
    pub path: Option<LitStr>,
    pub parent: Option<syn::Type>,
    /// The reserved character and its literal.
    pub reserved: Option<(char, LitStr)>,
    pub crate_path: Option<syn::Path>,
    /// serde's `rename_all`, applied to field names.
    pub rename_all: Option<LitStr>,
    /// serde's `tag = "..."` and `content = "..."`: the key and the attribute name it stores.
    pub serde_tags: Vec<(syn::Path, LitStr)>,
    /// serde keys that dynatree refuses on a container (`transparent`, `from`, `try_from`,
    /// `into`), for spans; reported by validation.
    pub serde_refused: Vec<syn::Path>,
    /// A `#[dynatree(...)]` attribute failed to parse (already reported).
    pub malformed: bool,
    /// `index(name = "...", hash = field, range = field)`, in order.
    pub indexes: Vec<Index>,
}

/// One `index(...)` declaration.
pub struct Index {
    /// The `index` keyword, for spans.
    pub keyword: syn::Path,
    pub name: Option<LitStr>,
    pub hash: Option<syn::Ident>,
    pub range: Option<syn::Ident>,
}

fn help_for(key: Symbol) -> &'static str {
    match key.to_string().as_str() {
        "path" => "#[dynatree(path = \"Accounts/{account_id}/Links/{short}\")]",
        "parent" => "#[dynatree(parent = Account)]",
        "reserved" => "#[dynatree(reserved = \"|\")]",
        "crate" => "#[dynatree(crate = \"::dynatree\")]",
        "index" => "#[dynatree(index(name = \"by_email\", hash = email))]",
        _ => "#[dynatree(...)]",
    }
}

/// `key = <value>`, with a help line when the `=` is missing.
pub fn value_of<'a>(
    meta: &'a ParseNestedMeta<'a>,
    key: Symbol,
) -> syn::Result<&'a syn::parse::ParseBuffer<'a>> {
    if !meta.input.peek(Token![=]) {
        return Err(meta.error(format_args!(
            "expected `{key} = ...`\n\nhelp: the correct format looks like `{}`",
            help_for(key)
        )));
    }
    meta.value()
}

pub fn path_string(path: &syn::Path) -> String {
    path.to_token_stream().to_string().replace(' ', "")
}

impl Container {
    pub fn from_ast(cx: &Ctxt, input: &syn::DeriveInput) -> Self {
        let mut path = Attr::none(cx, PATH);
        let mut parent = Attr::none(cx, PARENT);
        let mut reserved = Attr::none(cx, RESERVED);
        let mut crate_path = Attr::none(cx, CRATE);
        let mut rename_all = None;
        let mut serde_tags = Vec::new();
        let mut serde_refused = Vec::new();
        let mut malformed = false;
        let mut indexes = Vec::new();
        for attr in &input.attrs {
            if attr.path() == SERDE {
                read_serde(attr, |meta| {
                    if meta.path == RENAME_ALL {
                        if let Some(lit) = serialized_name(meta)? {
                            rename_all = Some(lit);
                        }
                    } else if (meta.path == TAG || meta.path == CONTENT)
                        && meta.input.peek(Token![=])
                    {
                        let lit: LitStr = meta.value()?.parse()?;
                        serde_tags.push((meta.path.clone(), lit));
                    } else if meta.path == TRANSPARENT
                        || meta.path == FROM
                        || meta.path == TRY_FROM
                        || meta.path == INTO
                    {
                        serde_refused.push(meta.path.clone());
                        return Ok(false);
                    } else {
                        return Ok(false);
                    }
                    Ok(true)
                });
                continue;
            }
            if attr.path() != DYNATREE {
                continue;
            }
            let result = attr.parse_nested_meta(|meta| {
                if meta.path == PATH {
                    let s: LitStr = value_of(&meta, PATH)?.parse()?;
                    path.set(&meta.path, s);
                } else if meta.path == PARENT {
                    let ty: syn::Type = value_of(&meta, PARENT)?.parse()?;
                    parent.set(&meta.path, ty);
                } else if meta.path == RESERVED {
                    let s: LitStr = value_of(&meta, RESERVED)?.parse()?;
                    let v = s.value();
                    let mut chars = v.chars();
                    match (chars.next(), chars.next()) {
                        (Some(c), None) if c == 'K' || c == 'C' => cx.error_spanned_by(
                            &s,
                            format!("the reserved character `{c}` starts the key attribute name `{}`", if c == 'K' { "Key" } else { "Child" }),
                        ),
                        (Some(c), None) if c.is_control() => {
                            cx.error_spanned_by(&s, "the reserved character cannot be a control character");
                        }
                        (Some(c), None) => reserved.set(&meta.path, (c, s)),
                        _ => cx.error_spanned_by(
                            &s,
                            "the reserved character must be exactly one character\n\nhelp: the correct format looks like `#[dynatree(reserved = \"|\")]`",
                        ),
                    }
                } else if meta.path == INDEX {
                    if !meta.input.peek(syn::token::Paren) {
                        return Err(meta.error(format_args!(
                            "expected `index(...)`\n\nhelp: the correct format looks like `{}`",
                            help_for(INDEX)
                        )));
                    }
                    let mut ix = Index {
                        keyword: meta.path.clone(),
                        name: None,
                        hash: None,
                        range: None,
                    };
                    meta.parse_nested_meta(|inner| {
                        if inner.path == NAME {
                            ix.name = Some(value_of(&inner, INDEX)?.parse()?);
                        } else if inner.path == HASH {
                            ix.hash = Some(value_of(&inner, INDEX)?.parse()?);
                        } else if inner.path == RANGE {
                            ix.range = Some(value_of(&inner, INDEX)?.parse()?);
                        } else {
                            return Err(inner.error(format_args!(
                                "unknown key `{}` in `index(...)`\n\nhelp: expected `name`, `hash` or `range`",
                                path_string(&inner.path)
                            )));
                        }
                        Ok(())
                    })?;
                    indexes.push(ix);
                } else if meta.path == CRATE {
                    let s: LitStr = value_of(&meta, CRATE)?.parse()?;
                    match s.parse::<syn::Path>() {
                        Ok(p) => crate_path.set(&meta.path, p),
                        Err(_) => cx.error_spanned_by(&s, format!("`{}` is not a path", s.value())),
                    }
                } else {
                    return Err(meta.error(format_args!(
                        "unknown dynatree container attribute `{}`\n\nhelp: expected one of `path`, `parent`, `reserved`, `crate`, `index`",
                        path_string(&meta.path)
                    )));
                }
                Ok(())
            });
            if let Err(err) = result {
                malformed = true;
                cx.syn_error(err);
            }
        }
        Container {
            path: path.get(),
            parent: parent.get(),
            reserved: reserved.get(),
            crate_path: crate_path.get(),
            rename_all,
            serde_tags,
            serde_refused,
            malformed,
            indexes,
        }
    }
}

/// A field's attributes.
pub struct Field {
    /// The `version` keyword, for spans.
    pub version: Option<syn::Path>,
    /// The `ttl` keyword, for spans.
    pub ttl: Option<syn::Path>,
    /// `from = Type::field`: the keyword (for spans) and the source path.
    pub from: Option<(syn::Path, syn::ExprPath)>,
    /// serde's `rename` (the serialized name).
    pub rename: Option<LitStr>,
    /// serde's `skip`, `skip_serializing`, `skip_deserializing`, `skip_serializing_if` keys, for
    /// spans: refused on key fields and the version field by validation.
    pub serde_skips: Vec<syn::Path>,
    /// serde's `flatten` key, for spans: refused on every field by validation.
    pub serde_flatten: Option<syn::Path>,
}

impl Field {
    pub fn from_ast(cx: &Ctxt, field: &syn::Field) -> Self {
        let mut version = Attr::none(cx, VERSION);
        let mut ttl = Attr::none(cx, TTL);
        let mut from = Attr::none(cx, FROM);
        let mut rename = None;
        let mut serde_skips = Vec::new();
        let mut serde_flatten = None;
        for attr in &field.attrs {
            if attr.path() == SERDE {
                read_serde(attr, |meta| {
                    if meta.path == RENAME {
                        if let Some(lit) = serialized_name(meta)? {
                            rename = Some(lit);
                        }
                        return Ok(true);
                    }
                    if meta.path == SKIP
                        || meta.path == SKIP_SERIALIZING
                        || meta.path == SKIP_DESERIALIZING
                        || meta.path == SKIP_SERIALIZING_IF
                    {
                        serde_skips.push(meta.path.clone());
                    } else if meta.path == FLATTEN {
                        serde_flatten = Some(meta.path.clone());
                    }
                    Ok(false)
                });
                continue;
            }
            if attr.path() != DYNATREE {
                continue;
            }
            let result = attr.parse_nested_meta(|meta| {
                if meta.path == VERSION {
                    version.set(&meta.path, meta.path.clone());
                } else if meta.path == TTL {
                    ttl.set(&meta.path, meta.path.clone());
                } else if meta.path == FROM {
                    let source: syn::ExprPath = meta.value()?.parse()?;
                    from.set(&meta.path, (meta.path.clone(), source));
                } else {
                    return Err(meta.error(format_args!(
                        "unknown dynatree field attribute `{}`\n\nhelp: the field attributes are `#[dynatree(version)]`, `#[dynatree(ttl)]` and `#[dynatree(from = Type::field)]`",
                        path_string(&meta.path)
                    )));
                }
                Ok(())
            });
            if let Err(err) = result {
                cx.syn_error(err);
            }
        }
        Field {
            version: version.get(),
            ttl: ttl.get(),
            from: from.get(),
            rename,
            serde_skips,
            serde_flatten,
        }
    }
}

/// Walks the keys of one `#[serde(...)]` attribute: `read` returns whether it consumed the
/// key's value; if not, the value is skipped. Errors are dropped: serde checks its own
/// attributes.
fn read_serde(
    attr: &syn::Attribute,
    mut read: impl FnMut(&ParseNestedMeta<'_>) -> syn::Result<bool>,
) {
    let _ = attr.parse_nested_meta(|meta| {
        if !read(&meta)? {
            skip(&meta)?;
        }
        Ok(())
    });
}

/// The serialized name of `rename`/`rename_all`: `key = "..."`, or the `serialize` half of
/// `key(serialize = "...", deserialize = "...")`; `None` if only the deserialized one is set.
fn serialized_name(meta: &ParseNestedMeta<'_>) -> syn::Result<Option<LitStr>> {
    if meta.input.peek(Token![=]) {
        return Ok(Some(meta.value()?.parse()?));
    }
    let mut out = None;
    if meta.input.peek(syn::token::Paren) {
        meta.parse_nested_meta(|inner| {
            if inner.path.is_ident("serialize") {
                out = Some(inner.value()?.parse()?);
            } else {
                skip(&inner)?;
            }
            Ok(())
        })?;
    }
    Ok(out)
}

fn skip(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        meta.input.parse::<Token![=]>()?;
        while !meta.input.is_empty() && !meta.input.peek(Token![,]) {
            meta.input.parse::<proc_macro2::TokenTree>()?;
        }
    } else if meta.input.peek(syn::token::Paren) {
        let content;
        syn::parenthesized!(content in meta.input);
        content.parse::<TokenStream>()?;
    }
    Ok(())
}

/// The serialized name of a field under serde's `rename_all`.
pub fn apply_rename_all(rule: &str, field: &str) -> Option<String> {
    let words: Vec<&str> = field.split('_').filter(|w| !w.is_empty()).collect();
    let cap = |w: &str| {
        let mut c = w.chars();
        c.next()
            .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
            .unwrap_or_default()
    };
    Some(match rule {
        "lowercase" => field.to_lowercase(),
        "UPPERCASE" => field.to_uppercase(),
        "snake_case" => field.to_owned(),
        "SCREAMING_SNAKE_CASE" => field.to_uppercase(),
        "kebab-case" => field.replace('_', "-"),
        "SCREAMING-KEBAB-CASE" => field.replace('_', "-").to_uppercase(),
        "PascalCase" => words.iter().map(|w| cap(w)).collect(),
        "camelCase" => {
            let pascal: String = words.iter().map(|w| cap(w)).collect();
            let mut c = pascal.chars();
            c.next()
                .map(|f| f.to_lowercase().collect::<String>() + c.as_str())
                .unwrap_or_default()
        }
        _ => return None,
    })
}
