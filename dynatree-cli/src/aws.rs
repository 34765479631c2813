//! Reaching AWS: the `--endpoint-url` check, the named profile, the region and the
//! credentials, all settled before the first request, so that each setup failure is one line
//! that says what to do.
//!
//! `--profile NAME` wins over credentials in the environment (the AWS CLI's rule): the
//! profile's own credentials provider is used, not the standard chain, whose first source is
//! the environment. Its region is used too, unless `--region` is given.

use std::borrow::Cow;
use std::path::PathBuf;

use aws_config::profile::ProfileFileCredentialsProvider;
use aws_config::provider_config::ProviderConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::provider::error::CredentialsError;
use aws_sdk_dynamodb::config::ProvideCredentials;
use aws_types::os_shim_internal::{Env, Fs};

use crate::args::Global;
use crate::error::{CliError, CliResult, one_line};

/// Loads the AWS configuration for the global flags and resolves the credentials once, so
/// that a missing or unusable setting fails here, not at the first request.
///
/// # Errors
///
/// Exit status 1, one line each: an `--endpoint-url` that is not a URL, an unknown profile
/// (naming the files searched), no region, no credentials (naming the sources tried and what
/// to set), credentials that cannot be loaded.
pub async fn load(global: &Global) -> CliResult<SdkConfig> {
    if let Some(url) = &global.endpoint_url {
        check_endpoint(url)?;
    }
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    let mut region = global.region.clone().map(Region::new);
    if let Some(name) = &global.profile {
        let profile_region = profile_region(name).await?;
        region = region.or(profile_region.map(Region::new));
        let provider = ProfileFileCredentialsProvider::builder()
            .profile_name(name)
            .configure(&ProviderConfig::default().with_region(region.clone()))
            .build();
        loader = loader.profile_name(name).credentials_provider(provider);
    }
    if let Some(region) = region {
        loader = loader.region(region);
    }
    if let Some(url) = &global.endpoint_url {
        loader = loader.endpoint_url(url);
    }
    let config = loader.load().await;
    if config.region().is_none() {
        return Err(CliError::msg(match &global.profile {
            Some(name) => format!(
                "no region: pass --region, set AWS_REGION, or set `region` in profile {name}"
            ),
            None => "no region: pass --region or set AWS_REGION".to_owned(),
        }));
    }
    let Some(provider) = config.credentials_provider() else {
        return Err(no_credentials());
    };
    match provider.provide_credentials().await {
        Ok(_) => Ok(config),
        Err(why @ CredentialsError::CredentialsNotLoaded(_)) => Err(match &global.profile {
            Some(name) => {
                let (config_file, credentials_file) = profile_files();
                let detail = std::error::Error::source(&why)
                    .map(|s| format!(" ({})", one_line(s)))
                    .unwrap_or_default();
                CliError::msg(format!(
                    "no credentials in profile {name}{detail}: give it aws_access_key_id and aws_secret_access_key, a role or SSO settings, in {} or {}",
                    config_file.display(),
                    credentials_file.display()
                ))
            }
            None => match std::env::var("AWS_PROFILE") {
                // The standard chain's profile, named by the environment: say if it is unknown.
                Ok(name) if !name.is_empty() => match profile_region(&name).await {
                    Err(e) => e.context("AWS_PROFILE"),
                    Ok(_) => no_credentials(),
                },
                _ => no_credentials(),
            },
        }),
        Err(e) => Err(CliError::msg(format!(
            "cannot load credentials{}: {}",
            global
                .profile
                .as_ref()
                .map(|p| format!(" of profile {p}"))
                .unwrap_or_default(),
            one_line(&e)
        ))),
    }
}

/// "No credentials": the sources the standard chain tried, and what to set.
fn no_credentials() -> CliError {
    let (config_file, credentials_file) = profile_files();
    CliError::msg(format!(
        "no credentials: none in the environment, in {} or {}, from web identity, ECS or EC2 instance metadata: set AWS_PROFILE, pass --profile, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
        config_file.display(),
        credentials_file.display()
    ))
}

/// The region of profile `name`, which must exist in the shared config or credentials file.
async fn profile_region(name: &str) -> CliResult<Option<String>> {
    let (config_file, credentials_file) = profile_files();
    let files = || {
        format!(
            "{} or {}",
            config_file.display(),
            credentials_file.display()
        )
    };
    let set = aws_config::profile::load(
        &Fs::real(),
        &Env::real(),
        // The default files: AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE, or ~/.aws.
        &Default::default(),
        Some(Cow::Owned(name.to_owned())),
    )
    .await
    .map_err(|e| {
        CliError::msg(format!(
            "profile {name}: cannot read {}: {}",
            files(),
            one_line(&e)
        ))
    })?;
    let Some(profile) = set.get_profile(name) else {
        return Err(CliError::msg(format!(
            "unknown profile {name}: it is in neither {} (set AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE to read other files)",
            files().replacen(" or ", " nor ", 1)
        )));
    };
    Ok(profile.get("region").map(str::to_owned))
}

/// The shared config and credentials files, as the SDK finds them: `AWS_CONFIG_FILE` and
/// `AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/config` and `~/.aws/credentials`.
pub fn profile_files() -> (PathBuf, PathBuf) {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let file = |var: &str, default: &str| match std::env::var(var) {
        Ok(p) if !p.is_empty() => match (p.strip_prefix("~/"), &home) {
            (Some(rest), Some(h)) => h.join(rest),
            _ => PathBuf::from(p),
        },
        _ => match &home {
            Some(h) => h.join(".aws").join(default),
            None => PathBuf::from("~/.aws").join(default),
        },
    };
    (
        file("AWS_CONFIG_FILE", "config"),
        file("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
    )
}

/// Checks `--endpoint-url` before any request: `http://` or `https://`, a host, an optional
/// port from 1 to 65535, and only characters a URL can hold.
///
/// # Errors
///
/// Exit status 1, naming the URL and what is wrong with it.
pub fn check_endpoint(url: &str) -> CliResult<()> {
    let bad = |why: String| {
        CliError::msg(format!(
            "--endpoint-url {url:?} is not a URL: {why} (for DynamoDB Local: http://localhost:8000)"
        ))
    };
    let lower = url.to_ascii_lowercase();
    let scheme_len = if lower.starts_with("https://") {
        8
    } else if lower.starts_with("http://") {
        7
    } else {
        return Err(bad("it must start with http:// or https://".to_owned()));
    };
    if let Some(c) = url
        .chars()
        .find(|c| !c.is_ascii_graphic() || "\"<>\\^`{|}".contains(*c))
    {
        return Err(bad(format!("{c:?} cannot appear in a URL")));
    }
    let authority = url[scheme_len..]
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default();
    if authority.contains('@') {
        return Err(bad(
            "user names and passwords do not belong in it".to_owned()
        ));
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        // An IPv6 address: [::1]:8000
        match rest.split_once(']') {
            Some((host, after)) => (host, after.strip_prefix(':')),
            None => return Err(bad("an IPv6 address needs its closing `]`".to_owned())),
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(bad("no host".to_owned()));
    }
    if let Some(port) = port
        && !port.parse::<u16>().is_ok_and(|p| p > 0)
    {
        return Err(bad(format!(
            "the port {port:?} is not a number from 1 to 65535"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        for good in [
            "http://localhost:8000",
            "https://dynamodb.eu-west-1.amazonaws.com",
            "http://127.0.0.1:8000/",
            "HTTP://[::1]:8000",
        ] {
            assert!(check_endpoint(good).is_ok(), "{good}");
        }
        for (bad, why) in [
            ("ht tp://x", "must start with http"),
            ("localhost:8000", "must start with http"),
            ("http://local host:8000", "' ' cannot appear"),
            ("http://:8000", "no host"),
            ("http://localhost:80000", "not a number from 1 to 65535"),
            ("http://localhost:", "not a number"),
            ("http://[::1:8000", "closing"),
            ("http://u:p@localhost", "passwords"),
        ] {
            let e = check_endpoint(bad).unwrap_err();
            assert!(
                e.message()
                    .starts_with(&format!("--endpoint-url {bad:?} is not a URL")),
                "{e}"
            );
            assert!(e.message().contains(why), "{bad}: {e}");
        }
    }
}
