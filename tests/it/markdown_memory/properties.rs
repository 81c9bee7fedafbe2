//! Property tests of the two parsers that read untrusted text: the consolidation reply reader
//! (tolerant of what a model writes) and the path sanitiser (names given by the model).

use std::path::{Component, Path};

use mnemo_markdown_memory::{
    check_agent_id, parse_reply, sanitize_topic, Workspace, MAX_NAME_CHARS,
};
use proptest::prelude::*;
use serde_json::json;

/// Prose without braces, quotes or backticks.
fn prose() -> impl Strategy<Value = String> {
    any::<String>().prop_map(|text| {
        text.chars()
            .filter(|c| !matches!(c, '{' | '}' | '[' | ']' | '"' | '`'))
            .collect()
    })
}

/// Names as a model might give them: any characters, path syntax over-represented.
fn name() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        any::<char>().prop_map(String::from),
        prop::sample::select(vec![
            "/", "\\", "..", ".", "~", "\0", ":", "C:", "//", " ", "-", "_", "a", "Z", "ü", "%2e",
        ])
        .prop_map(str::to_owned),
    ];
    prop::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
}

/// What every accepted name must be: one plain path component that stays where it is put.
fn assert_single_component(name: &str) -> Result<(), TestCaseError> {
    prop_assert!(!name.is_empty());
    prop_assert!(name.chars().count() <= MAX_NAME_CHARS, "{name:?}");
    prop_assert!(!name.starts_with('.'), "{name:?}");
    prop_assert!(!name.contains(['/', '\\', '\0', ':']), "{name:?}");
    let components: Vec<Component<'_>> = Path::new(name).components().collect();
    prop_assert!(
        matches!(components.as_slice(), [Component::Normal(_)]),
        "{name:?}: {components:?}"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_reply_is_read_without_a_panic(text in any::<String>()) {
        let _ = parse_reply(&text);
    }

    #[test]
    fn both_fields_come_back_bare_fenced_or_inside_prose(
        history in any::<String>(),
        memory in any::<String>(),
        before in prose(),
        after in prose(),
    ) {
        let reply = json!({"history_entry": history, "memory_update": memory}).to_string();
        for text in [
            reply.clone(),
            format!("```json\n{reply}\n```"),
            format!("{before}\n{reply}\n{after}"),
        ] {
            let (read, _) = parse_reply(&text).ok_or_else(|| TestCaseError::fail(format!("nothing read from {text:?}")))?;
            prop_assert_eq!(read.history_entry.as_deref(), Some(history.as_str()));
            prop_assert_eq!(read.memory_update.as_deref(), Some(memory.as_str()));
        }
    }

    #[test]
    fn a_sanitised_topic_is_one_plain_file_name_inside_world(raw in name()) {
        if let Ok(topic) = sanitize_topic(&raw) {
            assert_single_component(&topic)?;
            prop_assert_eq!(sanitize_topic(&topic).ok(), Some(topic.clone()), "stable");
        }
    }

    #[test]
    fn an_accepted_agent_id_is_one_plain_directory_name(raw in name()) {
        if let Ok(id) = check_agent_id(&raw) {
            assert_single_component(&id)?;
            prop_assert_eq!(id, raw);
        }
    }
}

/// Writing a world file under any name either is refused or lands directly in `world/`.
#[test]
fn world_files_never_leave_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::open(dir.path().join("ws")).unwrap();
    let world = dir.path().join("ws").join("world").canonicalize().unwrap();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(200));
    runner
        .run(&name(), |raw| {
            if let Ok(written) = workspace.write_world(&raw, "note") {
                let path = dir
                    .path()
                    .join("ws")
                    .join(&written.path)
                    .canonicalize()
                    .unwrap();
                prop_assert_eq!(path.parent(), Some(world.as_path()), "{:?}", raw);
            }
            Ok(())
        })
        .unwrap();
    // Nothing was written beside the workspace.
    let outside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(outside, vec![std::ffi::OsString::from("ws")]);
}
