//! Checks on the source tree that keep docs/ARCHITECTURE.md true.

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn crate_dirs() -> Vec<std::path::PathBuf> {
    let mut dirs = vec![
        root().to_path_buf(),
        root().join("kernel"),
        root().join("host"),
        root().join("server"),
        root().join("devtools"),
        root().join("tests/harness"),
        root().join("tests/pg-fixture"),
    ];
    for group in ["apis", "extensions", "examples"] {
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
        // The `mnemo` package is the binary alone: its main.rs says it.
        let lib = Some(dir.join("src/lib.rs"))
            .filter(|lib| lib.is_file())
            .unwrap_or_else(|| dir.join("src/main.rs"));
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
    let registry = mnemo_host::builtin_extensions();
    for entry in std::fs::read_dir(root().join("extensions")).unwrap() {
        let folder = entry.unwrap().file_name().to_string_lossy().to_string();
        assert!(
            registry.get(&folder).is_some(),
            "extensions/{folder} is not registered under the name `{folder}`"
        );
        assert!(
            mnemo_host::DEFAULT_CONFIG.contains(&format!("[extensions.{folder}]")),
            "config.toml has no [extensions.{folder}] section"
        );
    }
}

/// The `[dependencies]` of a crate's manifest, by package name.
fn dependencies(manifest_dir: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(manifest_dir.join("Cargo.toml")).unwrap();
    let table: toml::Table = toml::from_str(&manifest).unwrap();
    table
        .get("dependencies")
        .and_then(|value| value.as_table())
        .map(|deps| deps.keys().cloned().collect())
        .unwrap_or_default()
}

fn folders(group: &str) -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<_> = std::fs::read_dir(root().join(group))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn extensions_depend_on_apis_not_on_other_extensions() {
    let extensions = folders("extensions");
    assert!(extensions.len() >= 6, "extensions/ lost its crates");
    for dir in extensions {
        for name in dependencies(&dir) {
            if name.starts_with("mnemo") {
                assert!(
                    name == "mnemo-kernel" || name.ends_with("-api"),
                    "{} depends on `{name}`: an extension may depend on the kernel and on API \
                     crates (apis/), never on another extension's implementation",
                    dir.display()
                );
            }
        }
    }
}

#[test]
fn api_crates_depend_only_on_the_kernel() {
    let apis = folders("apis");
    assert!(apis.len() >= 3, "apis/ lost its crates");
    for dir in apis {
        for name in dependencies(&dir) {
            assert!(
                !name.starts_with("mnemo") || name == "mnemo-kernel",
                "{} depends on `{name}`: API crates are traits and data, above the kernel only",
                dir.display()
            );
            assert!(
                !HEAVY.contains(&name.as_str()),
                "{} depends on `{name}`: API crates compile no database or model runtime",
                dir.display()
            );
        }
    }
}

/// Crates that bring a database driver or a model runtime into whatever depends on them.
const HEAVY: [&str; 6] = [
    "candle-core",
    "tokenizers",
    "sqlx",
    "sqlite-vec",
    "libsqlite3-sys",
    "rayon",
];

/// `cargo metadata` of the workspace, for this machine's platform, read once.
fn metadata() -> &'static serde_json::Value {
    static METADATA: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    METADATA.get_or_init(|| {
        // Only this machine's platform: other platforms' crates were never downloaded.
        let rustc = std::process::Command::new("rustc")
            .arg("-vV")
            .output()
            .unwrap();
        let version = String::from_utf8(rustc.stdout).unwrap();
        let host = version
            .lines()
            .find_map(|line| line.strip_prefix("host: "))
            .unwrap()
            .to_owned();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let output = std::process::Command::new(cargo)
            .args(["metadata", "--format-version", "1", "--locked", "--offline"])
            .args(["--filter-platform", &host])
            .current_dir(root())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    })
}

/// The workspace links one integration-test binary, `it` (tests/it/main.rs): every crate's
/// integration tests are a module of it, so that no crate links a test binary of its own.
#[test]
fn the_workspace_links_one_integration_test_binary() {
    let mut binaries = Vec::new();
    for package in metadata()["packages"].as_array().unwrap() {
        if !package["source"].is_null() {
            continue;
        }
        for target in package["targets"].as_array().unwrap() {
            if target["kind"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k == "test")
            {
                binaries.push(format!(
                    "{} {}",
                    package["name"].as_str().unwrap(),
                    target["name"].as_str().unwrap()
                ));
            }
        }
    }
    assert_eq!(binaries, ["mnemo it"]);
}

/// Every package a workspace package compiles as a normal (not dev, not build) dependency,
/// directly or through others, by `cargo metadata`'s resolved graph.
fn compiled_dependencies(package: &str) -> std::collections::BTreeSet<String> {
    let metadata = metadata();
    let names: std::collections::HashMap<&str, &str> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let nodes: std::collections::HashMap<&str, &serde_json::Value> = metadata["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| (node["id"].as_str().unwrap(), node))
        .collect();
    let start = names
        .iter()
        .find(|(_, name)| **name == package)
        .map(|(id, _)| *id)
        .unwrap_or_else(|| panic!("no package {package} in the workspace"));
    let mut seen = std::collections::BTreeSet::new();
    let mut stack = vec![start];
    while let Some(id) = stack.pop() {
        for dep in nodes[id]["deps"].as_array().unwrap() {
            let normal = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|kind| kind["kind"].is_null());
            let dep_id = dep["pkg"].as_str().unwrap();
            if normal && seen.insert(names[dep_id].to_owned()) {
                stack.push(dep_id);
            }
        }
    }
    seen
}

/// The extensions that call memory and the server reach it through `mnemo-memory-api`
/// (`MemoryApi`, `MemoryHost`), so that none of them compiles a database driver or a model.
#[test]
fn memory_callers_compile_no_database_or_model() {
    for package in [
        "mnemo-memory-maintenance",
        "mnemo-memory-reflection",
        "mnemo-server",
    ] {
        let compiled = compiled_dependencies(package);
        assert!(
            compiled.contains("mnemo-memory-api") && !compiled.contains("mnemo-memory"),
            "{package} should reach memory through mnemo-memory-api alone: {compiled:?}"
        );
        for heavy in HEAVY {
            assert!(
                !compiled.contains(heavy),
                "{package} compiles {heavy}; it should see memory only through its API crate"
            );
        }
    }
}

#[test]
fn memory_compiles_no_model_runtime() {
    let compiled = compiled_dependencies("mnemo-memory");
    assert!(compiled.contains("sqlx"), "the graph walk found nothing");
    for heavy in ["candle-core", "tokenizers", "rayon"] {
        assert!(
            !compiled.contains(heavy),
            "mnemo-memory compiles {heavy}; it should reach embeddings through mnemo-embedding-api"
        );
    }
}

#[test]
fn examples_are_not_built_in() {
    let registry = mnemo_host::builtin_extensions();
    let developer = mnemo_devtools::dev_extensions();
    for entry in std::fs::read_dir(root().join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if !path.join("Cargo.toml").is_file() {
            continue;
        }
        let folder = path.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            registry.get(&folder).is_none(),
            "examples/{folder} is registered as a built-in extension"
        );
        assert!(
            !mnemo_host::DEFAULT_CONFIG.contains(&format!("[extensions.{folder}]")),
            "config.toml has a section for the example {folder}, which the binary does not know"
        );
        assert!(
            developer.get(&folder).is_some(),
            "examples/{folder} is not in the registry replay and the tests use"
        );
    }
}

/// The product's code depends on no developer tool: the replay harness and the example
/// extension reach the binary only through `mnemo-devtools`, which `main.rs` dispatches to.
#[test]
fn only_the_devtools_depend_on_the_harness_and_the_examples() {
    for manifest in ["Cargo.toml", "host/Cargo.toml"] {
        let text = std::fs::read_to_string(root().join(manifest)).unwrap();
        let table: toml::Table = toml::from_str(&text).unwrap();
        let deps = table["dependencies"].as_table().unwrap();
        for tool in ["mnemo-replay", "mnemo-example-notes"] {
            assert!(!deps.contains_key(tool), "{manifest} depends on {tool}");
        }
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

/// Storage is a floor below search: no code of the memory store (its tests aside) uses the
/// search layer; the words both read come from the leaf module `text.rs`, which uses nothing of
/// the crate.
#[test]
fn storage_uses_no_search_code() {
    let source = root().join("extensions/memory/src");
    let code_lines = |file: &Path| -> Vec<String> {
        std::fs::read_to_string(file)
            .unwrap()
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .map(str::to_owned)
            .collect()
    };
    let store = rust_files(&source.join("store"));
    assert!(store.len() > 20, "only {} store files found", store.len());
    for file in store {
        // Tests may search what they stored: `tests/` folders, and the shared checks both
        // backends run (`conformance/`, `*_checks.rs`), which compile only under `cfg(test)`.
        let test_only = file
            .components()
            .any(|part| part.as_os_str() == "tests" || part.as_os_str() == "conformance")
            || file
                .file_stem()
                .is_some_and(|stem| stem.to_string_lossy().ends_with("_checks"));
        if test_only {
            continue;
        }
        for line in code_lines(&file) {
            assert!(
                !line.contains("crate::search") && !line.contains("super::search"),
                "{} uses search code: `{}`",
                file.display(),
                line.trim()
            );
        }
    }
    for line in code_lines(&source.join("text.rs")) {
        assert!(
            !line.contains("crate::") && !line.contains("super::"),
            "text.rs must stay a leaf module: `{}`",
            line.trim()
        );
    }
}

/// No source file of any crate (its tests and benches included) grows past a size one can read
/// in a sitting.
#[test]
fn every_source_file_stays_short() {
    let mut files = std::collections::BTreeSet::new();
    for dir in crate_dirs() {
        for part in ["src", "tests", "benches"] {
            if dir.join(part).is_dir() {
                files.extend(rust_files(&dir.join(part)));
            }
        }
    }
    assert!(files.len() > 200, "only {} source files found", files.len());
    for file in files {
        let lines = std::fs::read_to_string(&file).unwrap().lines().count();
        assert!(
            lines <= 650,
            "{} has {lines} lines; split it by concern (at most 650)",
            file.display()
        );
    }
}

#[test]
fn only_memory_compiles_a_database_driver() {
    for dir in crate_dirs() {
        if dir.ends_with("extensions/memory") {
            continue;
        }
        for name in dependencies(&dir) {
            assert!(
                !["sqlx", "sqlite-vec", "libsqlite3-sys"].contains(&name.as_str()),
                "{} depends on `{name}`: only the memory extension touches SQLite",
                dir.display()
            );
        }
    }
}

/// The test files docs/RELIABILITY.md names as the proof of each guarantee exist: a path in
/// backticks with a `tests/` folder in it, from the repository's root or, for `store/…`, from
/// the memory crate's `src/`.
#[test]
fn every_test_path_in_reliability_exists() {
    let text = std::fs::read_to_string(root().join("docs/RELIABILITY.md")).unwrap();
    let (mut named, mut functions) = (0, 0);
    // The source of the last file named, while the names right after it (`file` `test`,
    // `file` `a` and `b`) are its functions.
    let mut source: Option<(String, String)> = None;
    for (index, piece) in text.split('`').enumerate() {
        if index % 2 == 0 {
            // Between two quoted pieces: only a blank, "and" or a comma keeps a list going.
            let joiner = piece.trim().trim_start_matches(',').trim();
            if !(joiner.is_empty() || joiner == "and") {
                source = None;
            }
            continue;
        }
        let is_path = piece.contains('/') && !piece.contains(' ');
        if is_path && (piece.contains("tests/") || piece.ends_with(".rs")) {
            // From the root, or from a crate's `src/` (`store/…`, `service/…`).
            let path = std::iter::once(root().join(piece))
                .chain(
                    crate_dirs()
                        .into_iter()
                        .map(|dir| dir.join("src").join(piece)),
                )
                .find(|path| path.exists());
            let Some(path) = path else {
                panic!("docs/RELIABILITY.md names `{piece}`, which does not exist");
            };
            named += 1;
            source = path
                .is_file()
                .then(|| (piece.to_owned(), std::fs::read_to_string(&path).unwrap()));
        } else if let Some((file, code)) = &source {
            let is_test_name = piece.matches('_').count() >= 2
                && piece
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if is_test_name {
                assert!(
                    code.contains(&format!("fn {piece}("))
                        || code.contains(&format!("fn {piece}<")),
                    "docs/RELIABILITY.md names `{piece}` in `{file}`, which has no such function"
                );
                functions += 1;
            } else {
                source = None;
            }
        }
    }
    assert!(
        named > 20 && functions > 20,
        "only {named} test paths and {functions} tests found in docs/RELIABILITY.md"
    );
}
