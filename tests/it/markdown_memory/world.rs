//! World topics inside a real kernel (issue #48): `learn_fact` in a user's conversation writes
//! that user's own `users/{user}/world/`, unless the config lets this agent write the shared
//! `world/` (`shared_world_writers`, or one set of files with `per_user = false`); the tool says
//! truthfully which; a user's own topics are scrubbed and erased with the rest of their files.

use std::fs;
use std::sync::Arc;

use mnemo_kernel::host::{Kernel, ScriptedLlm};
use mnemo_kernel::{ToolCaller, ToolScope};
use serde_json::{json, Value};

use super::common::{announce, at, start};

fn scope(user: &str) -> ToolScope {
    ToolScope {
        user_id: user.into(),
        session_id: Some("s1".into()),
        chat_id: None,
        at: at("2026-03-02T09:00:00Z"),
        caller: ToolCaller::Model {
            said: "the shed key hangs behind the kitchen door".into(),
        },
    }
}

async fn learn(kernel: &Kernel, user: &str, topic: &str, content: &str) -> Value {
    kernel
        .call_tool(
            &scope(user),
            "md_learn_fact",
            json!({"topic": topic, "content": content}),
        )
        .await
        .unwrap()
}

async fn recall(kernel: &Kernel, user: &str) -> String {
    let recalled = kernel
        .call_tool(&scope(user), "md_recall", json!({}))
        .await
        .unwrap();
    recalled["content"].as_str().unwrap().to_owned()
}

fn description(kernel: &Kernel, tool: &str) -> String {
    kernel
        .tools()
        .into_iter()
        .find(|spec| spec.name == tool)
        .map(|spec| spec.description)
        .unwrap()
}

#[tokio::test]
async fn a_users_topics_are_theirs_and_go_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = start(
        "[extensions.markdown_memory]\n",
        dir.path(),
        Arc::new(ScriptedLlm::new()),
    )
    .await;
    let learn_fact = description(&kernel, "md_learn_fact");
    assert!(
        learn_fact.contains("only this user's conversations see it"),
        "{learn_fact}"
    );
    assert!(!learn_fact.contains("every user"), "{learn_fact}");
    let recall_text = description(&kernel, "md_recall");
    assert!(
        recall_text.contains("this user's own topics"),
        "{recall_text}"
    );

    let shared = dir.path().join("markdown/world/garden.md");
    fs::write(&shared, "The shed key hangs behind the kitchen door.\n").unwrap();
    let written = learn(
        &kernel,
        "ana",
        "Garden",
        "The shed key hangs behind the kitchen door.\nThe hose is in the shed.",
    )
    .await;
    assert_eq!(
        written,
        json!({"saved": "users/ana/world/garden.md", "topic": "garden", "replaced": false, "shared": false})
    );
    let own = dir.path().join("markdown/users/ana/world/garden.md");
    assert!(fs::read_to_string(&own).unwrap().contains("hose"));
    assert!(recall(&kernel, "ana")
        .await
        .contains("World: garden (users/ana/world/garden.md, this user's own)"));
    assert!(!recall(&kernel, "ben").await.contains("hose"));

    // A forgotten text leaves the user's own topic; the shared file is not theirs to change.
    announce(
        &kernel,
        "memory.forgotten",
        json!({"content": "The shed key hangs behind the kitchen door.", "user_id": "ana"}),
    )
    .await;
    assert_eq!(
        fs::read_to_string(&own).unwrap(),
        "The hose is in the shed.\n"
    );
    assert!(fs::read_to_string(&shared).unwrap().contains("shed key"));

    // Erasing the user takes their topics with the rest of their files.
    announce(&kernel, "memory.user_erased", json!({"user_id": "ana"})).await;
    assert!(!own.exists());
    assert!(!dir.path().join("markdown/users/ana").exists());
    assert!(shared.exists());
    assert!(!recall(&kernel, "ana").await.contains("hose"));
    kernel.shutdown().await;
}

#[tokio::test]
async fn a_listed_agent_or_a_single_user_set_up_writes_the_shared_world() {
    for config in [
        "[extensions.markdown_memory]\nshared_world_writers = [\"curator\", \"assistant\"]\n",
        "[extensions.markdown_memory]\nper_user = false\n",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let kernel = start(config, dir.path(), Arc::new(ScriptedLlm::new())).await;
        let learn_fact = description(&kernel, "md_learn_fact");
        assert!(
            learn_fact.contains("every user and agent sees them"),
            "{config}: {learn_fact}"
        );
        let written = learn(&kernel, "ana", "garden", "The shed key is behind the door.").await;
        assert_eq!(
            written,
            json!({"saved": "world/garden.md", "topic": "garden", "replaced": false, "shared": true}),
            "{config}"
        );
        assert!(dir.path().join("markdown/world/garden.md").is_file());
        assert!(!dir.path().join("markdown/users/ana/world").exists());
        assert!(
            recall(&kernel, "ben").await.contains("shed key"),
            "{config}"
        );
        kernel.shutdown().await;
    }
}

#[tokio::test]
async fn another_agent_in_the_list_does_not_open_the_shared_world() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = start(
        "[extensions.markdown_memory]\nshared_world_writers = [\"curator\"]\n",
        dir.path(),
        Arc::new(ScriptedLlm::new()),
    )
    .await;
    let written = learn(&kernel, "ana", "garden", "The shed key is behind the door.").await;
    assert_eq!(written["saved"], "users/ana/world/garden.md");
    assert!(!dir.path().join("markdown/world/garden.md").exists());
    kernel.shutdown().await;
}
