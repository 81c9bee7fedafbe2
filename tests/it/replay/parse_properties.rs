//! Property tests of the replay parser: any text is read without a panic, every malformed line
//! is reported with its own number, and well-formed conversation lines come back unchanged.

use chrono::{TimeZone, Utc};
use mnemo_replay::{parse_scenario, Step};
use proptest::prelude::*;
use serde_json::json;

/// Lines that look like scenario lines more often than random text would.
fn scenario_text() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        any::<String>(),
        prop::sample::select(vec![
            "{\"type\": \"user_message\"}",
            "{\"type\": \"advance\", \"by\": \"1d\"}",
            "{\"type\": \"advance\", \"by\": \"99999999999999999d\"}",
            "{\"type\": \"config\", \"set\": 7}",
            "{\"type\": \"run_job\"}",
            "{\"type\": \"expect\", \"search\": {}}",
            "# a comment",
            "[[[[[[[[",
            "{\"type\": \"user_message\", \"at\": \"2026-13-45T99:00:00Z\"}",
        ])
        .prop_map(str::to_owned),
    ];
    prop::collection::vec(line, 0..12).prop_map(|lines| lines.join("\n"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_text_is_parsed_or_refused_line_by_line(text in scenario_text()) {
        let lines = text.lines().count();
        match parse_scenario(&text, "fuzz.jsonl") {
            Ok(scenario) => prop_assert!(scenario.steps.len() <= lines),
            Err(errors) => {
                prop_assert!(!errors.is_empty());
                for error in errors {
                    prop_assert!(error.line >= 1 && error.line <= lines, "{error:?}");
                    prop_assert_eq!(error.file.as_str(), "fuzz.jsonl");
                    prop_assert!(!error.message.is_empty());
                }
            }
        }
    }

    #[test]
    fn conversation_lines_come_back_unchanged(
        turns in prop::collection::vec(("[a-z0-9]{1,12}", any::<String>(), any::<bool>(), 0_i64..1_000_000), 1..10)
    ) {
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let text = turns
            .iter()
            .map(|(user, said, by_user, seconds)| {
                json!({
                    "type": if *by_user { "user_message" } else { "agent_response" },
                    "at": (start + chrono::Duration::seconds(*seconds)).to_rfc3339(),
                    "session_id": "s1",
                    "user_id": user,
                    "text": said,
                })
                .to_string()
            })
            .collect::<Vec<_>>()
            .join("\n");
        let texts_without_nul = turns.iter().all(|(_, said, _, _)| !said.contains('\0'));
        match parse_scenario(&text, "turns.jsonl") {
            Ok(scenario) => {
                prop_assert!(texts_without_nul);
                prop_assert_eq!(scenario.steps.len(), turns.len());
                for ((line, step), (user, said, _, _)) in scenario.steps.iter().zip(&turns) {
                    let Step::Event(event) = step else {
                        return Err(TestCaseError::fail(format!("line {line} is not an event")));
                    };
                    prop_assert_eq!(&event.user_id, user);
                    prop_assert_eq!(&event.text, said);
                }
            }
            // A NUL character in a text is refused, by line.
            Err(errors) => {
                prop_assert!(!texts_without_nul, "{errors:?}");
                prop_assert!(errors.iter().all(|error| error.message.contains("NUL")), "{errors:?}");
            }
        }
    }
}
