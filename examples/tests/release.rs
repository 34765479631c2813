//! What the published packages ship and what their READMEs promise, checked against the
//! workspace: the license files, the registry metadata, the install instructions and the
//! dependency graph they describe.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The crates that are published, in the order they are published (`RELEASING.md`).
const PUBLISHED: [&str; 4] = [
    "dynatree-derive",
    "dynatree",
    "dynatree-testing",
    "dynatree-cli",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_owned()
}

fn read(path: impl AsRef<Path>) -> String {
    let path = root().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn cargo(args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(args)
        .current_dir(root())
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn every_published_package_carries_both_license_texts() {
    for file in ["LICENSE-MIT", "LICENSE-APACHE"] {
        let text = read(file);
        assert!(
            text.contains("The dynatree authors"),
            "{file} names the copyright holder"
        );
        for krate in PUBLISHED {
            assert_eq!(
                read(format!("{krate}/{file}")),
                text,
                "{krate}/{file} is a copy of the root's"
            );
        }
    }
}

#[test]
fn every_published_package_has_the_registry_metadata() {
    let meta: serde_json::Value =
        serde_json::from_str(&cargo(&["metadata", "--no-deps", "--format-version", "1"]))
            .expect("cargo metadata prints JSON");
    let packages = meta["packages"].as_array().expect("packages");
    for krate in PUBLISHED {
        let p = packages
            .iter()
            .find(|p| p["name"] == krate)
            .unwrap_or_else(|| panic!("{krate} is a workspace member"));
        for field in [
            "description",
            "license",
            "repository",
            "documentation",
            "readme",
        ] {
            assert!(p[field].is_string(), "{krate} has no `{field}`");
        }
        assert_eq!(p["license"], "MIT OR Apache-2.0");
        assert_eq!(p["repository"], "https://github.com/dynatree/dynatree");
        let keywords = p["keywords"].as_array().expect("keywords");
        assert!(
            (1..=5).contains(&keywords.len()),
            "{krate}: 1 to 5 keywords"
        );
        assert!(
            !p["categories"].as_array().expect("categories").is_empty(),
            "{krate} has categories"
        );
        assert!(p["publish"].is_null(), "{krate} is publishable");
        // The README is a file of the package, not a link out of it.
        let readme = root().join(krate).join("README.md");
        assert!(
            !readme.symlink_metadata().expect("a README").is_symlink(),
            "{krate}/README.md is a file"
        );
    }
    let examples = packages
        .iter()
        .find(|p| p["name"] == "examples")
        .expect("examples");
    assert_eq!(
        examples["publish"],
        serde_json::json!([]),
        "examples is never published"
    );
}

/// The first ```toml block after `## Install`.
fn install_block(readme: &str) -> String {
    let install = readme
        .split("## Install\n")
        .nth(1)
        .expect("an Install section");
    let block = install.split("```toml\n").nth(1).expect("a toml block");
    block.split("```").next().expect("closed").to_owned()
}

#[test]
fn the_repository_readme_and_the_front_page_give_one_install_block() {
    let front = install_block(&read("dynatree/README.md"));
    assert_eq!(install_block(&read("README.md")), front);
    // What works before the first release, and one HTTP stack for the SDK.
    assert!(front.contains(r#"dynatree = { git = "https://github.com/dynatree/dynatree" }"#));
    assert!(
        front.contains(r#"dynatree-testing = { git = "https://github.com/dynatree/dynatree" }"#)
    );
    assert!(front.contains(
        r#"aws-sdk-dynamodb = { version = "1", default-features = false, features = ["rt-tokio", "default-https-client"] }"#
    ));
}

#[test]
fn no_readme_tells_to_install_what_is_not_published() {
    for readme in [
        "README.md",
        "dynatree/README.md",
        "dynatree-testing/README.md",
        "dynatree-cli/README.md",
    ] {
        let text = read(readme);
        for line in text.lines() {
            let line = line.trim();
            assert!(
                !(line.starts_with("cargo install")
                    && !line.contains("--path")
                    && !line.contains("--git")),
                "{readme}: `{line}` needs the crate on the registry"
            );
        }
        assert!(
            !text.contains("load_from_env"),
            "{readme}: `aws_config::load_from_env` is deprecated"
        );
    }
}

/// Every link label the front page defines for docs.rs is defined again, first, in `lib.rs`
/// so that rustdoc links it to the local item.
#[test]
fn the_front_page_links_resolve_locally_in_rustdoc() {
    let readme = read("dynatree/README.md");
    let lib = read("dynatree/src/lib.rs");
    let labels: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with('[') && l.contains("]: https://docs.rs/"))
        .map(|l| &l[..l.find("]: ").expect("a definition") + 1])
        .collect();
    assert!(!labels.is_empty());
    for label in labels {
        assert!(
            lib.contains(&format!("doc = \"{label}: ")),
            "lib.rs does not define {label} for rustdoc"
        );
    }
}

/// The workspace builds one HTTP stack: the AWS SDK crates are used without their default
/// features, which would add the legacy hyper 0.14 and rustls 0.21.
#[test]
fn one_hyper_major_in_the_dependency_graph() {
    let tree = cargo(&[
        "tree",
        "--workspace",
        "--offline",
        "-e",
        "normal,build",
        "--prefix",
        "none",
        "--format",
        "{p}",
    ]);
    let mut hypers: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.strip_prefix("hyper v"))
        .map(|v| v.split([' ', '.']).next().expect("a major"))
        .collect();
    hypers.sort_unstable();
    hypers.dedup();
    assert_eq!(hypers, ["1"], "hyper majors in the graph");
}
