//! `mnemo eval` on a tiny conversation in the LoCoMo format (written for this test): every mode
//! is scored, questions without evidence are skipped and counted, and the scores are right for
//! questions whose answers are unambiguous.

use std::process::Command;

#[test]
fn eval_scores_every_mode_and_skips_questions_without_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[extensions.embedding]\n[extensions.ner]\n[extensions.memory]\n",
    )
    .unwrap();
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
    let output = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["eval", "--k", "1,5", "--json", "--data"])
        .arg(&data)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("not JSON ({error}): {stderr}"));
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
