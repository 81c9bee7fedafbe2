//! Checks on the source tree that keep docs/ARCHITECTURE.md true.

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn crate_dirs() -> Vec<std::path::PathBuf> {
    let mut dirs = vec![
        root().to_path_buf(),
        root().join("kernel"),
        root().join("tests/harness"),
    ];
    for group in ["extensions", "examples"] {
        for entry in std::fs::read_dir(root().join(group)).unwrap() {
            let path = entry.unwrap().path();
            if path.join("Cargo.toml").is_file() {
                dirs.push(path);
            }
        }
    }
    dirs
}

#[test]
fn every_crate_says_what_it_is_for() {
    for dir in crate_dirs() {
        let lib = dir.join("src/lib.rs");
        let text = std::fs::read_to_string(&lib).unwrap();
        assert!(
            text.starts_with("//! "),
            "{} must start with a //! paragraph saying what the crate is for",
            lib.display()
        );
    }
}

#[test]
fn the_kernel_depends_on_no_extension() {
    let manifest = std::fs::read_to_string(root().join("kernel/Cargo.toml")).unwrap();
    let table: toml::Table = toml::from_str(&manifest).unwrap();
    for section in ["dependencies", "dev-dependencies"] {
        if let Some(deps) = table.get(section).and_then(|value| value.as_table()) {
            for name in deps.keys() {
                assert!(!name.starts_with("mnemo"), "kernel depends on {name}");
            }
        }
    }
}

#[test]
fn extension_folders_match_their_names() {
    let registry = mnemo::builtin_extensions();
    for entry in std::fs::read_dir(root().join("extensions")).unwrap() {
        let folder = entry.unwrap().file_name().to_string_lossy().to_string();
        assert!(
            registry.get(&folder).is_some(),
            "extensions/{folder} is not registered under the name `{folder}`"
        );
        assert!(
            mnemo::DEFAULT_CONFIG.contains(&format!("[extensions.{folder}]")),
            "config.toml has no [extensions.{folder}] section"
        );
    }
}

/// The `.rs` files under `dir`, at any depth.
fn rust_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
    files
}

/// Only the memory extension's `store/` holds SQL; search policy and the service reach storage
/// through its traits, which another backend can implement.
#[test]
fn only_the_memory_store_holds_sql() {
    let source = root().join("extensions/memory/src");
    let store = source.join("store");
    for file in rust_files(&source) {
        if file.starts_with(&store) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for marker in [
            "sqlx::query",
            "QueryBuilder",
            "SELECT ",
            "INSERT ",
            "UPDATE ",
            "DELETE FROM",
            "CREATE ",
            "PRAGMA",
        ] {
            assert!(
                !text.contains(marker),
                "{} holds SQL (`{marker}`); SQL belongs in extensions/memory/src/store/",
                file.display()
            );
        }
    }
}

/// No source file of the memory extension grows past a size one can read in a sitting.
#[test]
fn memory_source_files_stay_short() {
    for file in rust_files(&root().join("extensions/memory/src")) {
        let lines = std::fs::read_to_string(&file).unwrap().lines().count();
        assert!(
            lines <= 650,
            "{} has {lines} lines; split it by concern (at most 650)",
            file.display()
        );
    }
}
