//! Cross-field rules, as `check_*` functions over the parsed input, like serde_derive's
//! `check.rs`. The result is a plan that expansion only reads.

use quote::ToTokens;
use syn::ext::IdentExt;
use syn::{LitStr, Type};

use crate::ast::{Field, Input};
use crate::ctxt::Ctxt;
use crate::template::{self, Component};

const MAX_HASH_KEY_BYTES: usize = 2048;
const MAX_RANGE_KEY_BYTES: usize = 1024;
const DEFAULT_RESERVED: char = '¦';

/// What expansion needs, once every rule held.
pub struct Plan<'a> {
    pub template: &'a LitStr,
    pub components: Vec<Component>,
    /// The fields of the placeholders, in template order.
    pub placeholders: Vec<&'a Field<'a>>,
    pub reserved: char,
    pub version: Option<(&'a Field<'a>, String)>,
    /// The `#[dynatree(ttl)]` field and its attribute name.
    pub ttl: Option<(&'a Field<'a>, String)>,
    /// The `#[dynatree(from = Type::field)]` fields.
    pub denormalized: Vec<PlannedDenorm<'a>>,
    pub indexes: Vec<PlannedIndex<'a>>,
}

/// A validated denormalized field: the target field, its attribute name, the source type and
/// the source field.
pub struct PlannedDenorm<'a> {
    pub field: &'a Field<'a>,
    pub attr: String,
    /// The whole source path, for spans.
    pub source_path: &'a syn::ExprPath,
    pub source_type: syn::Path,
    pub source_field: syn::Ident,
}

/// A validated index: its name and fields.
pub struct PlannedIndex<'a> {
    pub name: String,
    pub hash: &'a Field<'a>,
    pub range: Option<&'a Field<'a>>,
}

pub fn check<'a>(cx: &Ctxt, input: &'a Input<'a>) -> Option<Plan<'a>> {
    if !input.supported {
        return None;
    }
    let reserved = input
        .attrs
        .reserved
        .as_ref()
        .map_or(DEFAULT_RESERVED, |(c, _)| *c);
    check_field_names(cx, input, reserved);
    check_serde(cx, input, reserved);
    let version = check_version(cx, input);
    let ttl = check_ttl(cx, input, version.as_ref());
    let Some(lit) = &input.attrs.path else {
        if input.attrs.malformed {
            // The attribute that should have held the path was reported already.
            return None;
        }
        cx.error_spanned_by(
            input.ident,
            "missing path template\n\nhelp: add `#[dynatree(path = \"Accounts/{account_id}/Links/{short}\")]`",
        );
        return None;
    };
    let components = match template::parse(&lit.value()) {
        Ok(c) => c,
        Err(errors) => {
            for e in errors {
                cx.error_spanned_by(lit, e);
            }
            return None;
        }
    };
    check_literals(cx, lit, &components, reserved);
    let indexes = check_indexes(cx, input);
    check_serde_key_fields(cx, input, &components, &indexes, version.as_ref());
    let placeholders = check_placeholders(cx, input, lit, &components)?;
    if let Some((field, _)) = &version
        && placeholders.iter().any(|p| p.ident == field.ident)
    {
        cx.error_spanned_by(
            field.attrs.version.as_ref(),
            "the version field cannot be part of the path: it changes on every update",
        );
    }
    if let Some((field, _)) = &ttl
        && placeholders.iter().any(|p| p.ident == field.ident)
    {
        cx.error_spanned_by(
            field.attrs.ttl.as_ref(),
            "the `#[dynatree(ttl)]` field cannot be part of the path: a path does not expire",
        );
    }
    let denormalized = check_denorm(
        cx,
        input,
        &placeholders,
        version.as_ref(),
        ttl.as_ref(),
        &indexes,
    );
    Some(Plan {
        template: lit,
        components,
        placeholders,
        reserved,
        version,
        ttl,
        denormalized,
        indexes,
    })
}

/// Index names follow DynamoDB's rules and are unique; `hash` (required) and `range` name
/// fields.
fn check_indexes<'a>(cx: &Ctxt, input: &'a Input<'a>) -> Vec<PlannedIndex<'a>> {
    let mut out: Vec<PlannedIndex<'a>> = Vec::new();
    for ix in &input.attrs.indexes {
        let Some(name_lit) = &ix.name else {
            cx.error_spanned_by(&ix.keyword, "`index(...)` needs `name = \"...\"`\n\nhelp: the correct format looks like `#[dynatree(index(name = \"by_email\", hash = email))]`");
            continue;
        };
        let name = name_lit.value();
        let valid = (3..=255).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid {
            cx.error_spanned_by(
                name_lit,
                "an index name is 3 to 255 characters of `a-z`, `A-Z`, `0-9`, `_`, `-`, `.`",
            );
            continue;
        }
        if out.iter().any(|o| o.name == name) {
            cx.error_spanned_by(name_lit, format!("index `{name}` is declared twice"));
            continue;
        }
        let field = |ident: &syn::Ident| {
            let f = input
                .fields
                .iter()
                .find(|f| f.is_named(&ident.unraw().to_string()));
            if f.is_none() {
                cx.error_spanned_by(
                    ident,
                    format!("`{ident}` is not a field of `{}`", input.ident),
                );
            }
            f
        };
        let Some(hash_ident) = &ix.hash else {
            cx.error_spanned_by(name_lit, "`index(...)` needs `hash = field`");
            continue;
        };
        let hash = field(hash_ident);
        // `None`: no range; `Some(None)`: a range naming no field (reported).
        let range = ix.range.as_ref().map(field);
        match (hash, range) {
            (Some(hash), None) => out.push(PlannedIndex {
                name,
                hash,
                range: None,
            }),
            (Some(hash), Some(Some(range))) => out.push(PlannedIndex {
                name,
                hash,
                range: Some(range),
            }),
            _ => {}
        }
    }
    out
}

/// No literal contains the reserved character or is over a key limit; the literal parts alone
/// fit a partition key.
fn check_literals(cx: &Ctxt, lit: &LitStr, components: &[Component], reserved: char) {
    let mut min_key_bytes = 0;
    for c in components {
        min_key_bytes += reserved.len_utf8();
        match c {
            Component::Literal(s) => {
                min_key_bytes += s.len();
                if s.contains(reserved) {
                    cx.error_spanned_by(
                        lit,
                        format!(
                            "path template component `{s}` contains the reserved character `{reserved}`"
                        ),
                    );
                }
                if s.len() > MAX_RANGE_KEY_BYTES {
                    cx.error_spanned_by(
                        lit,
                        format!(
                            "path template component of {} bytes is over DynamoDB's {MAX_RANGE_KEY_BYTES}-byte sort key limit",
                            s.len()
                        ),
                    );
                }
            }
            Component::Placeholder(_) => min_key_bytes += 1,
        }
    }
    if min_key_bytes > MAX_HASH_KEY_BYTES {
        cx.error_spanned_by(
            lit,
            format!(
                "the literal parts of this path template already make a {min_key_bytes}-byte key, over DynamoDB's {MAX_HASH_KEY_BYTES}-byte partition key limit"
            ),
        );
    }
}

/// Every placeholder names one field, once; the last component is a placeholder.
fn check_placeholders<'a>(
    cx: &Ctxt,
    input: &'a Input<'a>,
    lit: &LitStr,
    components: &[Component],
) -> Option<Vec<&'a Field<'a>>> {
    let mut out = Vec::new();
    let mut ok = true;
    let mut seen: Vec<&str> = Vec::new();
    for c in components {
        let Component::Placeholder(name) = c else {
            continue;
        };
        if seen.contains(&name.as_str()) {
            cx.error_spanned_by(
                lit,
                format!("placeholder `{{{name}}}` appears more than once in the path template"),
            );
            ok = false;
            continue;
        }
        seen.push(name);
        match input.fields.iter().find(|f| f.is_named(name)) {
            Some(f) => out.push(f),
            None => {
                cx.error_spanned_by(
                    lit,
                    format!(
                        "placeholder `{{{name}}}` names no field of `{}`",
                        input.ident
                    ),
                );
                ok = false;
            }
        }
    }
    if !matches!(components.last(), Some(Component::Placeholder(_))) {
        cx.error_spanned_by(
            lit,
            "the last component of a path template must be a `{field}` placeholder: it names each value of the collection\n\nhelp: for a single value, use a placeholder with a fixed value, like `Settings/{name}`",
        );
        ok = false;
    }
    ok.then_some(out)
}

/// No stored attribute name collides with the key attributes or the reserved character.
fn check_field_names(cx: &Ctxt, input: &Input<'_>, reserved: char) {
    let rename_all = input.attrs.rename_all.as_ref().map(LitStr::value);
    if let (Some(rule), Some(lit)) = (&rename_all, &input.attrs.rename_all)
        && crate::attr::apply_rename_all(rule, "a_b").is_none()
    {
        cx.error_spanned_by(lit, format!("unknown serde `rename_all` rule `{rule}`"));
    }
    for f in &input.fields {
        let name = f.attribute_name(rename_all.as_deref());
        let span_obj: &dyn quote::ToTokens = match &f.attrs.rename {
            Some(lit) => lit,
            None => f.ident,
        };
        if name == "Key" || name == "Child" {
            cx.error_spanned_by(
                span_obj,
                format!("a field stored as `{name}` would overwrite the table's key attribute of that name\n\nhelp: rename it, e.g. `#[serde(rename = \"{}_\")]`", name.to_lowercase()),
            );
        } else if name.starts_with(reserved) {
            cx.error_spanned_by(
                span_obj,
                format!("a field stored as `{name}` starts with the reserved character `{reserved}`, which only dynatree's bookkeeping may use"),
            );
        }
    }
}

/// The serde attributes that would break keys or hide stored attribute names: `flatten` on any
/// field; `transparent`, `from`, `try_from`, `into` on the container; a `tag` or `content` name
/// that is a key attribute or starts with the reserved character.
fn check_serde(cx: &Ctxt, input: &Input<'_>, reserved: char) {
    for key in &input.attrs.serde_refused {
        let name = key.to_token_stream().to_string();
        let (why, help) = match name.as_str() {
            "transparent" => (
                "the value would be stored as its only field, not as a map of attributes that holds its key fields",
                "remove `#[serde(transparent)]`",
            ),
            "into" => (
                "the value would be stored as another type, whose attributes need not hold this type's key fields and version",
                "remove `#[serde(into = \"...\")]` and convert the value before writing it",
            ),
            _ => (
                "a value read back would be built by a conversion from another type, which need not keep the key fields and version it was stored with",
                "remove it and convert the value after reading it",
            ),
        };
        let msg = format!(
            "`{name}` is not supported by `#[derive(Hierarchical)]`: {why}\n\nhelp: {help}"
        );
        cx.error_spanned_by(key, msg);
    }
    for (key, lit) in &input.attrs.serde_tags {
        let key = key.to_token_stream().to_string();
        let name = lit.value();
        if name == "Key" || name == "Child" {
            cx.error_spanned_by(
                lit,
                format!("serde's `{key} = \"{name}\"` would store an attribute `{name}`, overwriting the table's key attribute of that name\n\nhelp: choose another name, e.g. `#[serde({key} = \"type\")]`"),
            );
        } else if name.starts_with(reserved) {
            cx.error_spanned_by(
                lit,
                format!("serde's `{key} = \"{name}\"` would store an attribute `{name}`, which starts with the reserved character `{reserved}` that only dynatree's bookkeeping may use"),
            );
        }
    }
    for f in &input.fields {
        if let Some(key) = &f.attrs.serde_flatten {
            cx.error_spanned_by(
                key,
                format!("`flatten` is not supported by `#[derive(Hierarchical)]`: the fields of `{}` would become stored attributes that cannot be checked against the table's key attributes `Key` and `Child`\n\nhelp: declare those fields in this struct, or remove `flatten` to store the value as one nested attribute", f.ident.unraw()),
            );
        }
    }
}

/// No serde `skip*` key on a key field (a placeholder, an index's hash or range) or the version
/// field: each is stored with the value and must come back from it.
fn check_serde_key_fields(
    cx: &Ctxt,
    input: &Input<'_>,
    components: &[Component],
    indexes: &[PlannedIndex<'_>],
    version: Option<&(&Field<'_>, String)>,
) {
    for f in &input.fields {
        if f.attrs.serde_skips.is_empty() {
            continue;
        }
        let is_placeholder = components
            .iter()
            .any(|c| matches!(c, Component::Placeholder(name) if f.is_named(name)));
        let role = if is_placeholder {
            "a placeholder of the path template".to_owned()
        } else if let Some(ix) = indexes.iter().find(|ix| std::ptr::eq(ix.hash, f)) {
            format!("the hash key of index `{}`", ix.name)
        } else if let Some(ix) = indexes
            .iter()
            .find(|ix| ix.range.is_some_and(|r| std::ptr::eq(r, f)))
        {
            format!("the range key of index `{}`", ix.name)
        } else if version.is_some_and(|(v, _)| std::ptr::eq(*v, f)) {
            "the `#[dynatree(version)]` field".to_owned()
        } else {
            continue;
        };
        let field = f.ident.unraw();
        for path in &f.attrs.serde_skips {
            let key = path.to_token_stream().to_string();
            cx.error_spanned_by(
                path,
                format!("`{key}` cannot be used on `{field}`, {role}: a value read from the table would lose the `{field}` it was stored with\n\nhelp: remove `{key}`; dynatree stores key fields (path placeholders, index keys) and the version field with the value and reads them back from it"),
            );
        }
    }
}

/// `#[dynatree(from = Type::field)]`: a path of a type and one of its fields, on a field that is
/// not a key, index, version or ttl field and is stored (no serde `skip*`). That the source is
/// an ancestor, that its field exists and that the types fit are checked by the generated code,
/// spanned on the path.
fn check_denorm<'a>(
    cx: &Ctxt,
    input: &'a Input<'a>,
    placeholders: &[&'a Field<'a>],
    version: Option<&(&'a Field<'a>, String)>,
    ttl: Option<&(&'a Field<'a>, String)>,
    indexes: &[PlannedIndex<'a>],
) -> Vec<PlannedDenorm<'a>> {
    let rename_all = input.attrs.rename_all.as_ref().map(LitStr::value);
    let mut out = Vec::new();
    for f in &input.fields {
        let Some((keyword, source)) = &f.attrs.from else {
            continue;
        };
        let role = if placeholders.iter().any(|p| std::ptr::eq(*p, f)) {
            Some("a placeholder of the path template")
        } else if indexes
            .iter()
            .any(|ix| std::ptr::eq(ix.hash, f) || ix.range.is_some_and(|r| std::ptr::eq(r, f)))
        {
            Some("a key of a secondary index")
        } else if version.is_some_and(|(v, _)| std::ptr::eq(*v, f)) {
            Some("the `#[dynatree(version)]` field")
        } else if ttl.is_some_and(|(t, _)| std::ptr::eq(*t, f)) {
            Some("the `#[dynatree(ttl)]` field")
        } else {
            None
        };
        if let Some(role) = role {
            cx.error_spanned_by(
                keyword,
                format!(
                    "`{}` is {role}: it cannot be a copy of another type's field",
                    f.ident.unraw()
                ),
            );
            continue;
        }
        if let Some(skip) = f.attrs.serde_skips.first() {
            cx.error_spanned_by(
                skip,
                "a `#[dynatree(from = ...)]` field is stored and read back: it cannot be skipped by serde",
            );
            continue;
        }
        let segments = &source.path.segments;
        if source.qself.is_some() || segments.len() < 2 {
            cx.error_spanned_by(
                source,
                "expected the source type and its field, e.g. `#[dynatree(from = Forum::name)]`",
            );
            continue;
        }
        let mut source_type = source.path.clone();
        let all: Vec<syn::PathSegment> = source_type.segments.iter().cloned().collect();
        let (last, init) = all.split_last().expect("two segments");
        source_type.segments = init.iter().cloned().collect();
        let last = last.clone();
        if !last.arguments.is_none() {
            cx.error_spanned_by(&last, "expected a field name after the source type");
            continue;
        }
        if source_type.is_ident(input.ident) || source_type.is_ident("Self") {
            cx.error_spanned_by(
                source,
                "a field cannot copy a field of its own type: the source must be an ancestor",
            );
            continue;
        }
        out.push(PlannedDenorm {
            field: f,
            attr: f.attribute_name(rename_all.as_deref()),
            source_path: source,
            source_type,
            source_field: last.ident,
        });
    }
    out
}

/// At most one `#[dynatree(ttl)]` field, not the version field, not skipped by serde (its type
/// is checked by the generated code, spanned on it).
fn check_ttl<'a>(
    cx: &Ctxt,
    input: &'a Input<'a>,
    version: Option<&(&'a Field<'a>, String)>,
) -> Option<(&'a Field<'a>, String)> {
    let rename_all = input.attrs.rename_all.as_ref().map(LitStr::value);
    let mut found: Option<(&Field<'_>, String)> = None;
    for f in &input.fields {
        let Some(kw) = &f.attrs.ttl else {
            continue;
        };
        if found.is_some() {
            cx.error_spanned_by(kw, "only one field can be the `#[dynatree(ttl)]` field");
            continue;
        }
        if version.is_some_and(|(v, _)| std::ptr::eq(*v, f)) {
            cx.error_spanned_by(
                kw,
                "the `#[dynatree(version)]` field cannot also be the `#[dynatree(ttl)]` field",
            );
            continue;
        }
        found = Some((f, f.attribute_name(rename_all.as_deref())));
    }
    found
}

/// At most one `#[dynatree(version)]` field, of type `u64`.
fn check_version<'a>(cx: &Ctxt, input: &'a Input<'a>) -> Option<(&'a Field<'a>, String)> {
    let rename_all = input.attrs.rename_all.as_ref().map(LitStr::value);
    let mut found: Option<(&Field<'_>, String)> = None;
    for f in &input.fields {
        let Some(kw) = &f.attrs.version else {
            continue;
        };
        if found.is_some() {
            cx.error_spanned_by(kw, "only one field can be the `#[dynatree(version)]` field");
            continue;
        }
        if !is_u64(f.ty) {
            cx.error_spanned_by(f.ty, "the `#[dynatree(version)]` field must be a `u64`");
            continue;
        }
        found = Some((f, f.attribute_name(rename_all.as_deref())));
    }
    found
}

fn is_u64(ty: &Type) -> bool {
    match ty {
        Type::Path(p) => p.qself.is_none() && p.path.is_ident("u64"),
        _ => false,
    }
}
