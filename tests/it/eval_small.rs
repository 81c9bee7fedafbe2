//! `mnemo eval` on a tiny conversation in the LoCoMo format (written for this test): every mode
//! is scored, questions without evidence are skipped and counted, and the scores are right for
//! questions whose answers are unambiguous.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

/// `mnemo eval --k 1,5 --json --data` with `args` on a data directory in `dir`, with the
/// embedding model, NER and memory on: its report.
fn eval(dir: &Path, args: &[&OsStr]) -> serde_json::Value {
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        "[extensions.embedding]\n[extensions.ner]\n[extensions.memory]\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(["eval", "--k", "1,5", "--json", "--data"])
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("not JSON ({error}): {stderr}"))
}

#[test]
fn eval_scores_every_mode_and_skips_questions_without_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let turns_one = serde_json::json!([
        {"turn_id": "D1:1", "speaker": "Mira", "text": "I adopted a greyhound called Pepper last weekend."},
        {"turn_id": "D1:2", "speaker": "Joel", "text": "Lovely! I am still fixing the roof of my cabin."},
        {"turn_id": "D1:3", "speaker": "Mira", "text": "My sister Ilse starts her violin exams in June."}
    ]);
    let turns_two = serde_json::json!([
        {"turn_id": "D2:1", "speaker": "Joel", "text": "The cabin roof is finally done, no more leaks."},
        {"turn_id": "D2:2", "speaker": "Mira", "text": "Pepper loves running on the beach at dawn."},
        {"turn_id": "D2:3", "speaker": "Joel", "text": "I booked a ferry to the islands for August."}
    ]);
    let case = serde_json::json!({
        "id": "test:tiny",
        "sessions": [
            {"session_id": "session_1", "date_iso": "2025-03-01T10:00", "turns": turns_one},
            {"session_id": "session_2", "date_iso": "2025-03-08T10:00", "turns": turns_two}
        ],
        "questions": [
            {"qid": "q1", "question": "What is the name of Mira's greyhound?", "category": "single-hop",
             "evidence_turn_ids": ["D1:1"]},
            {"qid": "q2", "question": "When are Ilse's violin exams?", "category": "temporal",
             "evidence_turn_ids": ["D1:3"]},
            {"qid": "q3", "question": "What did Joel repair on his cabin?", "category": "multi-hop",
             "evidence_turn_ids": ["D1:2", "D2:1"]},
            {"qid": "q4", "question": "Which colour is the ferry?", "category": "open-domain",
             "evidence_turn_ids": []}
        ]
    });
    let data = dir.path().join("tiny.jsonl");
    std::fs::write(&data, format!("{case}\n")).unwrap();
    let report = eval(dir.path(), &[data.as_os_str()]);
    assert_eq!(report["questions"], 3, "{report}");
    assert_eq!(report["skipped_without_evidence"], 1, "{report}");
    for mode in ["fts", "vector", "entity", "hybrid"] {
        let scores = &report["modes"][mode];
        for key in ["recall@1", "recall@5", "hit@5", "mrr"] {
            assert!(scores[key].is_f64(), "{mode} has no {key}: {report}");
        }
    }
    // Six turns, five answers per question: each question's evidence is within the top 5 by
    // words and by fusion.
    for mode in ["fts", "hybrid"] {
        assert_eq!(report["modes"][mode]["recall@5"], 1.0, "{mode}: {report}");
    }
    // "greyhound", "violin", "cabin": the single-word questions put their turn first.
    assert!(
        report["modes"]["fts"]["mrr"].as_f64().unwrap() > 0.9,
        "{report}"
    );
}

/// A LongMemEval-shaped case (`role` user or assistant): the assistant's turns are stored as the
/// agent's replies, so only the user's own turns get sentence keys and enter the sentence-key
/// list of a question in the first person, while every turn stays searchable.
#[test]
fn eval_stores_assistant_turns_as_the_agents_replies() {
    let dir = tempfile::tempdir().unwrap();
    let turns = serde_json::json!([
        {"turn_id": "s1:0", "speaker": "user", "role": "user",
         "text": "I need a packing list for a trip. By the way, my bike got a flat tyre last Sunday."},
        {"turn_id": "s1:1", "speaker": "assistant", "role": "assistant",
         "text": "Sorry about your bike's flat tyre. Here is a packing list for your trip."},
        {"turn_id": "s1:2", "speaker": "user", "role": "user",
         "text": "Thanks, that list looks complete. I will pack tonight."}
    ]);
    let case = serde_json::json!({
        "id": "longmemeval_s:tiny",
        "source": "longmemeval_s",
        "sessions": [{"session_id": "s1", "date_iso": "2025-03-01T10:00", "turns": turns}],
        "questions": [
            {"qid": "q1", "question": "What happened to my bike last Sunday?",
             "category": "single-session-user", "evidence_session_ids": ["s1"],
             "evidence_turn_ids": ["s1:0"], "question_date_iso": "2025-03-02T10:00"}
        ]
    });
    let data = dir.path().join("tiny.jsonl");
    std::fs::write(&data, format!("{case}\n")).unwrap();
    let dump = dir.path().join("dump.jsonl");
    eval(
        dir.path(),
        &[data.as_os_str(), "--dump".as_ref(), dump.as_os_str()],
    );
    let dumped = std::fs::read_to_string(&dump).unwrap();
    let row: serde_json::Value = serde_json::from_str(dumped.trim()).unwrap();
    let ids = |list: &serde_json::Value| -> Vec<String> {
        list.as_array()
            .into_iter()
            .flatten()
            .filter_map(|hit| hit[0].as_str().map(str::to_owned))
            .collect()
    };
    let sentences = ids(&row["lists"]["sentence"]);
    assert!(sentences.contains(&"s1:0".to_owned()), "{row}");
    assert!(
        !sentences.contains(&"s1:1".to_owned()),
        "the assistant's reply has no sentence keys: {row}"
    );
    assert!(
        ids(&row["lists"]["vector"]).contains(&"s1:1".to_owned()),
        "the assistant's reply is stored and searchable: {row}"
    );
}

/// `--shared-store`: every case again in one store, each as its own user, beside a distractor
/// file's users; each user's questions find what they found in a store of their own.
#[test]
fn eval_scores_cases_in_one_shared_store_as_in_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let case = |id: &str, pet: &str, sister: &str| {
        let turns = serde_json::json!([
            {"turn_id": "D1:1", "speaker": "Mira", "text": format!("I adopted a greyhound called {pet} last weekend.")},
            {"turn_id": "D1:2", "speaker": "Joel", "text": "Lovely! I am still fixing the roof of my cabin."},
            {"turn_id": "D1:3", "speaker": "Mira", "text": format!("My sister {sister} starts her violin exams in June.")},
            {"turn_id": "D1:4", "speaker": "Joel", "text": "The greyhound races at the track were loud, the cabin was quiet."}
        ]);
        serde_json::json!({
            "id": id,
            "sessions": [{"session_id": "session_1", "date_iso": "2025-03-01T10:00", "turns": turns}],
            "questions": [
                {"qid": "q1", "question": "What is the name of Mira's greyhound?", "category": "single-hop",
                 "evidence_turn_ids": ["D1:1"]},
                {"qid": "q2", "question": "Who has violin exams?", "category": "single-hop",
                 "evidence_turn_ids": ["D1:3"]},
                {"qid": "q3", "question": "What did Joel fix on his cabin?", "category": "single-hop",
                 "evidence_turn_ids": ["D1:2"]}
            ]
        })
    };
    let data = dir.path().join("cases.jsonl");
    std::fs::write(
        &data,
        format!(
            "{}\n{}\n",
            case("test:a", "Pepper", "Ilse"),
            case("test:b", "Biscuit", "Nora")
        ),
    )
    .unwrap();
    // A distractor says the same words more often than any case does.
    let distractors = dir.path().join("distractors.jsonl");
    std::fs::write(
        &distractors,
        format!("{}\n", case("test:c", "Greyhound", "Cabin")),
    )
    .unwrap();
    let report = eval(
        dir.path(),
        &[
            data.as_os_str(),
            "--shared-store".as_ref(),
            "--distractors".as_ref(),
            distractors.as_os_str(),
        ],
    );
    let shared = &report["shared_store"];
    assert_eq!(report["cases"], 2, "{report}");
    assert_eq!(shared["cases"], 2, "{report}");
    assert_eq!(shared["distractor_users"], 1, "{report}");
    assert_eq!(shared["questions"], 6, "{report}");
    // Each user's ranking is the same whatever else the store holds.
    assert_eq!(shared["modes"], report["modes"], "{report}");
    assert!(
        report["modes"]["hybrid"]["mrr"].as_f64().unwrap() > 0.5,
        "{report}"
    );
}
