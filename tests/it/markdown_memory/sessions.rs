//! Session buffers are keyed by user, chat and session: users who reuse a session id, or one user
//! in two chats, never share a buffer, a recap or a consolidation; buffers of the first layout
//! (keyed by session alone) are carried over without loss; erasure and forgetting find the new
//! keys. A real kernel, real files, a scripted model.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use mnemo_kernel::host::{Kernel, ScriptedLlm, ScriptedReply};
use mnemo_kernel::{ContextRequest, Event, EventPayload};
use mnemo_markdown_memory::{SessionKey, Workspace};
use serde_json::json;

use super::common::{announce, buffered, start};

/// `user` says `text` in `session` (of `chat`).
async fn say(kernel: &Kernel, user: &str, chat: Option<&str>, session: &str, text: &str) {
    let event = Event::new(
        kernel.context().now(),
        EventPayload::UserMessage { text: text.into() },
    )
    .with_scope(
        Some(session.into()),
        Some(user.into()),
        chat.map(str::to_owned),
    );
    kernel.publish(event).await.unwrap();
    kernel.settle().await;
}

async fn prompt(kernel: &Kernel, user: &str, chat: Option<&str>, session: &str) -> String {
    kernel
        .gather_context(&ContextRequest {
            prompt: "hi".into(),
            user_id: user.into(),
            session_id: session.into(),
            chat_id: chat.map(str::to_owned),
            at: kernel.context().now(),
            history_messages: 0,
            as_of: None,
        })
        .await
        .into_iter()
        .map(|(_, block)| block)
        .collect::<Vec<_>>()
        .join("\n")
}

fn reply(history: &str) -> ScriptedReply {
    ScriptedReply::Text(json!({"history_entry": history, "memory_update": ""}).to_string())
}

/// The messages of the last consolidation request the model received.
fn last_request(llm: &ScriptedLlm) -> String {
    llm.requests().last().unwrap().messages[1].content.clone()
}

#[tokio::test]
async fn users_and_chats_that_reuse_a_session_id_keep_apart() {
    let dir = tempfile::tempdir().unwrap();
    let llm = Arc::new(ScriptedLlm::new());
    let kernel = start(
        "[extensions.markdown_memory]\nper_user = false\nmemory_window = 3\nkeep_messages = 1\n",
        dir.path(),
        llm.clone(),
    )
    .await;
    say(&kernel, "alice", None, "s1", "My bank PIN is 4417").await;
    say(
        &kernel,
        "alice",
        Some("team"),
        "s1",
        "The team offsite is in Porto",
    )
    .await;
    for text in ["I want a road bike", "Steel, please", "With mudguards"] {
        say(&kernel, "bob", None, "s1", text).await;
    }
    let sessions = dir.path().join("markdown/.sessions");
    for (path, lines) in [
        ("alice/_personal/s1.jsonl", 1),
        ("alice/team/s1.jsonl", 1),
        ("bob/_personal/s1.jsonl", 3),
    ] {
        let text = fs::read_to_string(sessions.join(path)).unwrap();
        assert_eq!(buffered(&text).len(), lines, "{path}: {text}");
    }

    // Bob's fourth message passes the window: only his turns go to the model.
    llm.push(reply("[2026-03-02 09:00] Bob chose a steel road bike."));
    say(&kernel, "bob", None, "s1", "Ordering it today").await;
    assert_eq!(llm.requests().len(), 1);
    let request = last_request(&llm);
    assert!(request.contains("user: I want a road bike"), "{request}");
    assert!(
        !request.contains("4417") && !request.contains("Porto"),
        "{request}"
    );
    let bob = prompt(&kernel, "bob", None, "s1").await;
    assert!(bob.contains("user: Ordering it today"), "{bob}");
    assert!(!bob.contains("4417"), "{bob}");
    assert!(!prompt(&kernel, "alice", None, "s1")
        .await
        .contains("Earlier in this session"));

    // Alice's /new in the team chat consolidates that chat's session only.
    llm.push(reply("[2026-03-02 09:00] Offsite in Porto."));
    say(&kernel, "alice", Some("team"), "s1", "/new").await;
    let request = last_request(&llm);
    assert!(
        request.contains("The team offsite is in Porto"),
        "{request}"
    );
    assert!(
        !request.contains("4417") && !request.contains("road bike"),
        "{request}"
    );
    assert!(!sessions.join("alice/team/s1.jsonl").exists());
    assert!(sessions.join("alice/_personal/s1.jsonl").exists());
    assert!(prompt(&kernel, "bob", None, "s1")
        .await
        .contains("Ordering it today"));

    // Forgetting finds the copy in the buffer of the session, chat and user it was said in.
    say(
        &kernel,
        "alice",
        Some("team"),
        "s1",
        "The door code is 1234 for the offsite",
    )
    .await;
    say(
        &kernel,
        "bob",
        Some("team"),
        "s1",
        "The door code is 1234 for the offsite",
    )
    .await;
    announce(
        &kernel,
        "memory.forgotten",
        json!({"content": "The door code is 1234 for the offsite", "user_id": "alice",
               "chat_id": "team", "session_id": "s1"}),
    )
    .await;
    let alice_team = fs::read_to_string(sessions.join("alice/team/s1.jsonl")).unwrap();
    assert!(!alice_team.contains("1234"), "{alice_team}");
    let bob_team = fs::read_to_string(sessions.join("bob/team/s1.jsonl")).unwrap();
    assert!(
        bob_team.contains("1234"),
        "another user's copy is theirs: {bob_team}"
    );

    // Erasing alice removes every buffer of hers, in every chat, and nothing of bob's.
    announce(&kernel, "memory.user_erased", json!({"user_id": "alice"})).await;
    assert!(!sessions.join("alice").exists());
    assert!(sessions.join("bob/_personal/s1.jsonl").exists());
    assert!(sessions.join("bob/team/s1.jsonl").exists());
    kernel.shutdown().await;
}

#[tokio::test]
async fn a_user_workspace_keeps_each_chat_apart_and_erasure_takes_it_all() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = start(
        "[extensions.markdown_memory]\n",
        dir.path(),
        Arc::new(ScriptedLlm::new()),
    )
    .await;
    say(
        &kernel,
        "ana",
        Some("family"),
        "1",
        "The alarm code is 2580",
    )
    .await;
    say(
        &kernel,
        "ana",
        Some("work"),
        "1",
        "The report is due Friday",
    )
    .await;
    let sessions = dir.path().join("markdown/users/ana/.sessions/ana");
    let family = fs::read_to_string(sessions.join("family/1.jsonl")).unwrap();
    let work = fs::read_to_string(sessions.join("work/1.jsonl")).unwrap();
    assert!(
        family.contains("2580") && !family.contains("report"),
        "{family}"
    );
    assert!(work.contains("report") && !work.contains("2580"), "{work}");
    announce(&kernel, "memory.user_erased", json!({"user_id": "ana"})).await;
    assert!(!dir.path().join("markdown/users/ana").exists());
    kernel.shutdown().await;
}

/// A buffer line as the first layout wrote it.
fn line(at: &str, role: &str, text: &str) -> String {
    format!("{}\n", json!({"role": role, "at": at, "text": text}))
}

/// The first layout, as an earlier version left it: `.sessions/{session}.jsonl` keyed by session
/// alone, in a user's workspace and in the shared one.
fn write_first_layout(root: &Path) {
    let ana = root.join("users/ana/.sessions");
    fs::create_dir_all(&ana).unwrap();
    fs::write(
        ana.join("s1.jsonl"),
        line("2026-03-01T10:00:00Z", "user", "I adopted a cat named Miso")
            + &line(
                "2026-03-01T10:00:05Z",
                "assistant",
                "Lovely! How old is Miso?",
            ),
    )
    .unwrap();
    fs::write(
        ana.join("s1.recap.md"),
        "Latest messages:\n[2026-03-01 10:00] user: I adopted a cat named Miso\n",
    )
    .unwrap();
    let shared = root.join(".sessions");
    fs::create_dir_all(&shared).unwrap();
    let long = format!(
        "Notes for the plumber: {}",
        "the valve under the sink leaks; ".repeat(20)
    );
    fs::write(
        shared.join("default.jsonl"),
        line("2026-03-01T08:00:00Z", "user", "My bank PIN is 4417")
            + &line("2026-03-01T08:05:00Z", "user", &long)
            + "{\"role\": \"user\", \"at\": \"cut by a cra",
    )
    .unwrap();
    fs::write(shared.join("default.recap.md"), "Latest messages:\n...\n").unwrap();
}

#[tokio::test]
async fn first_layout_buffers_are_carried_over_without_loss() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("markdown");
    write_first_layout(&root);
    let llm = Arc::new(ScriptedLlm::new());
    let kernel = start("[extensions.markdown_memory]\n", dir.path(), llm.clone()).await;

    // Ana's buffer and recap are hers: they moved into her personal session, and go on there.
    let moved = root.join("users/ana/.sessions/ana/_personal");
    assert!(moved.join("s1.jsonl").exists() && moved.join("s1.recap.md").exists());
    assert!(!root.join("users/ana/.sessions/s1.jsonl").exists());
    let context = prompt(&kernel, "ana", None, "s1").await;
    assert!(
        context.contains("user: I adopted a cat named Miso"),
        "{context}"
    );
    llm.push(reply("[2026-03-02 09:00] Ana adopted Miso."));
    say(&kernel, "ana", None, "s1", "/new").await;
    let request = last_request(&llm);
    assert!(
        request.contains("user: I adopted a cat named Miso"),
        "{request}"
    );
    assert!(
        request.contains("assistant: Lovely! How old is Miso?"),
        "{request}"
    );

    // The shared buffer cannot be given to anyone: it is in the history, whole, and gone.
    assert!(!root.join(".sessions/default.jsonl").exists());
    assert!(!root.join(".sessions/default.recap.md").exists());
    let history = fs::read_to_string(root.join("HISTORY.md")).unwrap();
    assert!(
        history.contains("[carried-over] session default:"),
        "{history}"
    );
    assert!(history.contains("the 2 messages as written"), "{history}");
    assert!(history.contains("user: My bank PIN is 4417"), "{history}");
    let long_flat = format!(
        "Notes for the plumber: {}",
        "the valve under the sink leaks; ".repeat(20)
    );
    assert!(history.contains(long_flat.trim()), "kept whole: {history}");
    assert!(fs::read_to_string(root.join("HISTORY-2026-03.md"))
        .unwrap()
        .contains("My bank PIN is 4417"));
    // The carried-over entry is in no user's prompt.
    assert!(!prompt(&kernel, "bob", None, "default")
        .await
        .contains("4417"));
    kernel.shutdown().await;

    // Opening again carries nothing twice.
    Workspace::open(&root).unwrap();
    let again = fs::read_to_string(root.join("HISTORY.md")).unwrap();
    assert_eq!(again.matches("[carried-over]").count(), 1, "{again}");
}

#[test]
fn processes_opening_at_once_carry_a_buffer_over_once() {
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        write_first_layout(dir.path());
        let openers: Vec<_> = (0..4)
            .map(|_| {
                let root = dir.path().to_path_buf();
                std::thread::spawn(move || Workspace::open(root).map(|_| ()))
            })
            .collect();
        for opener in openers {
            opener.join().unwrap().unwrap();
        }
        let history = fs::read_to_string(dir.path().join("HISTORY.md")).unwrap();
        assert_eq!(
            history.matches("[carried-over]").count(),
            1,
            "round {round}: {history}"
        );
        let workspace = Workspace::open(dir.path()).unwrap().for_user("ana");
        let messages = workspace
            .session_messages(&SessionKey::new(Some("ana"), None, "s1"))
            .unwrap();
        assert_eq!(messages.len(), 2, "round {round}");
    }
}
