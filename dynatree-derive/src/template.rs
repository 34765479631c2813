//! Path templates: literal components and `{field}` placeholders separated by `/`.

/// One component of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Component {
    Literal(String),
    Placeholder(String),
}

/// Splits a template, reporting every malformed component (as messages with help lines).
pub fn parse(template: &str) -> Result<Vec<Component>, Vec<String>> {
    const HELP: &str = "help: a path template looks like `#[dynatree(path = \"Accounts/{account_id}/Links/{short}\")]`";
    if template.is_empty() {
        return Err(vec![format!("the path template is empty\n\n{HELP}")]);
    }
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (i, part) in template.split('/').enumerate() {
        if part.is_empty() {
            errors.push(format!(
                "component {i} of the path template is empty (a leading, trailing or doubled `/`)\n\n{HELP}"
            ));
            continue;
        }
        let opens = part.matches('{').count();
        let closes = part.matches('}').count();
        if opens == 0 && closes == 0 {
            out.push(Component::Literal(part.to_owned()));
            continue;
        }
        let inner = part
            .strip_prefix('{')
            .and_then(|p| p.strip_suffix('}'))
            .filter(|p| !p.contains(['{', '}']));
        match inner {
            Some(name) if is_ident(name) => out.push(Component::Placeholder(name.to_owned())),
            Some(name) if name.strip_prefix("r#").is_some_and(is_ident) => errors.push(format!(
                "`{{{name}}}` is not a placeholder: a placeholder names a raw identifier field without `r#`\n\nhelp: for the field `{name}`, write `{{{}}}`",
                &name[2..]
            )),
            Some(name) => errors.push(format!(
                "`{{{name}}}` is not a placeholder: it must name a field, like `{{account_id}}`\n\n{HELP}"
            )),
            None => errors.push(format!(
                "unbalanced or misplaced braces in path template component `{part}`: a placeholder is a whole component, `{{field}}`\n\n{HELP}"
            )),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_components() {
        assert_eq!(
            parse("Accounts/{id}/Links").unwrap(),
            [
                Component::Literal("Accounts".into()),
                Component::Placeholder("id".into()),
                Component::Literal("Links".into())
            ]
        );
    }

    #[test]
    fn reports_every_problem() {
        assert_eq!(parse("a//{b").unwrap_err().len(), 2);
        assert!(parse("").is_err());
        assert!(parse("/a").is_err());
        assert!(parse("a/{b}c").is_err());
        assert!(parse("a/{1x}").is_err());
        assert!(parse("a/{r#type}").unwrap_err()[0].contains("`{type}`"));
        assert_eq!(
            parse("a/{type}").unwrap(),
            [
                Component::Literal("a".into()),
                Component::Placeholder("type".into())
            ]
        );
    }
}
