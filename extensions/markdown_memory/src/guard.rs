//! What a consolidation may do to `MEMORY.md` (issue #23): the model returns the whole new file,
//! and a model's rewrite must not silently delete content.
//!
//! - **Refused**: an update that keeps under half of the content words of the current file
//!   (under a quarter when the file is over `max_memory_size` and the model was asked to
//!   compress it) is not written; the caller keeps the old file and records the update in the
//!   history instead.
//! - **Lines written by hand are kept**: the workspace keeps a record of the lines the last
//!   consolidation wrote (`MEMORY.history/model-lines.md`). Every other line of the current file
//!   (a line the user added or edited, or any line when there is no record yet) is the user's: if
//!   the update no longer holds it, it is put back, at the end of its `#` section when the update
//!   still has that heading, else with its heading at the end of the file.
//! - **A compression may drop lines**: when the file is over `max_memory_size` and the model was
//!   asked to compress it, nothing is put back (else the file could never shrink); the lines the
//!   compression dropped, hand-written or not, are listed in a `[memory-compressed]` history
//!   entry, and the file as it was is kept in `MEMORY.history/` as before every rewrite.
//!
//! A line counts as still held when the update has the same line (list marker, case and spacing
//! aside), or a line with all its content words (the model reworded or reformatted it). Blank
//! lines, headings and lines without content words are structure, not content.

use std::collections::HashSet;

use crate::bm25::tokenize;
use crate::session::one_line;

/// Longest refused update quoted in the history, in characters.
const REFUSED_CHARS: usize = 4_000;

/// Content words of `text`, as the history search sees them.
fn words(text: &str) -> HashSet<String> {
    tokenize(text).into_iter().collect()
}

/// A line as compared: trimmed, without a list marker, spacing collapsed, lower case.
pub(crate) fn line_key(line: &str) -> String {
    let line = line.trim();
    let item = ["- ", "* ", "+ "]
        .iter()
        .find_map(|marker| line.strip_prefix(marker))
        .unwrap_or(line);
    item.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The heading level of a markdown heading line (`## Health` is 2), `None` for other lines.
fn heading_level(line: &str) -> Option<usize> {
    let line = line.trim_start();
    let level = line.chars().take_while(|&c| c == '#').count();
    let rest = &line[level..];
    ((1..=6).contains(&level) && (rest.is_empty() || rest.starts_with(' '))).then_some(level)
}

/// Why `update` may not replace `memory`, if it drops too much of it.
pub(crate) fn refusal(memory: &str, update: &str, compressing: bool) -> Option<String> {
    let old = words(memory);
    if old.is_empty() {
        return None;
    }
    let new = words(update);
    let kept = old.intersection(&new).count();
    let (share, divisor) = if compressing {
        ("a quarter", 4)
    } else {
        ("half", 2)
    };
    (kept * divisor < old.len()).then(|| {
        format!(
            "the model's memory_update keeps {kept} of the {} content words of MEMORY.md, under \
             {share}",
            old.len()
        )
    })
}

/// The history entry recording a refused update: why, and the update as the model wrote it.
pub(crate) fn refused_note(session_id: &str, reason: &str, update: &str) -> String {
    let update = update.trim();
    let shown: String = update.chars().take(REFUSED_CHARS).collect();
    let cut = if shown.len() < update.len() {
        format!(" (its first {REFUSED_CHARS} characters)")
    } else {
        String::new()
    };
    format!(
        "[memory-refused] session {}: {reason}, so MEMORY.md was left as it was; the refused \
         update as written{cut}:\n{shown}\n",
        one_line(session_id, 80)
    )
}

/// What [`merge`] made of an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Merged {
    /// The text to write: the update with the dropped hand-written lines put back.
    pub(crate) text: String,
    /// The hand-written lines put back, as they were (none in a compression).
    pub(crate) restored: Vec<String>,
    /// In a compression, the content lines of the old file the update no longer holds, as they
    /// were, each once; empty otherwise.
    pub(crate) dropped: Vec<String>,
    /// The new record of the lines the model wrote: the lines of `text` that are neither
    /// hand-written lines nor lines holding one.
    pub(crate) model_lines: String,
}

/// A line of content: not blank, not a heading, with at least one content word.
fn is_content(line: &str) -> bool {
    heading_level(line).is_none() && !words(line).is_empty()
}

/// Whether some line of `lines` holds `line`: the same line, or one with all its content words.
fn held_by(line: &str, lines: &[&str]) -> bool {
    let key = line_key(line);
    let needed = words(line);
    lines.iter().any(|candidate| {
        line_key(candidate) == key || (!needed.is_empty() && needed.is_subset(&words(candidate)))
    })
}

/// The update with every hand-written line of `memory` it dropped put back, unless it is a
/// `compression` (then the update stands and [`Merged::dropped`] lists what went). `model_lines`
/// is the record of the lines the last consolidation wrote, `None` when there is none (then
/// every line of `memory` is taken as written by hand).
pub(crate) fn merge(
    memory: &str,
    update: &str,
    model_lines: Option<&str>,
    compression: bool,
) -> Merged {
    let record: HashSet<String> = model_lines
        .unwrap_or_default()
        .lines()
        .map(line_key)
        .filter(|key| !key.is_empty())
        .collect();
    // The hand-written lines of the old file, each with the heading of its section.
    let mut heading: Option<&str> = None;
    let mut hand: Vec<(Option<&str>, &str)> = Vec::new();
    for line in memory.lines() {
        if heading_level(line).is_some() {
            heading = Some(line);
        } else if is_content(line) && !record.contains(&line_key(line)) {
            hand.push((heading, line));
        }
    }
    let update_lines: Vec<&str> = update.trim_end().lines().collect();
    let mut lines: Vec<String> = update_lines.iter().map(|line| (*line).to_owned()).collect();
    let mut restored = Vec::new();
    let mut restored_keys = HashSet::new();
    let mut dropped = Vec::new();
    if compression {
        let mut dropped_keys = HashSet::new();
        dropped = memory
            .lines()
            .filter(|line| is_content(line) && !held_by(line, &update_lines))
            .filter(|line| dropped_keys.insert(line_key(line)))
            .map(str::to_owned)
            .collect();
    }
    // Dropped lines grouped by their old heading, in the order they came; a line the file held
    // several times comes back once (merging duplicates is the model's to do).
    let mut groups: Vec<(Option<&str>, Vec<&str>)> = Vec::new();
    for &(heading, line) in hand.iter().filter(|_| !compression) {
        if held_by(line, &update_lines) || !restored_keys.insert(line_key(line)) {
            continue;
        }
        restored.push(line.to_owned());
        match groups.iter_mut().find(|(h, _)| *h == heading) {
            Some((_, group)) => group.push(line),
            None => groups.push((heading, vec![line])),
        }
    }
    for (heading, group) in groups {
        let group = group.into_iter().map(str::to_owned);
        let section = heading.and_then(|heading| {
            let key = line_key(heading);
            let at = lines
                .iter()
                .position(|line| heading_level(line).is_some() && line_key(line) == key)?;
            Some((at, heading_level(heading).unwrap_or(1)))
        });
        match section {
            Some((at, level)) => {
                let mut end = lines[at + 1..]
                    .iter()
                    .position(|line| heading_level(line).is_some_and(|other| other <= level))
                    .map_or(lines.len(), |offset| at + 1 + offset);
                while end > at + 1 && lines[end - 1].trim().is_empty() {
                    end -= 1;
                }
                lines.splice(end..end, group);
            }
            None => {
                if lines.last().is_some_and(|line| !line.trim().is_empty()) {
                    lines.push(String::new());
                }
                if let Some(heading) = heading {
                    lines.push(heading.to_owned());
                }
                lines.extend(group);
            }
        }
    }
    let mut text = lines.join("\n");
    text.push('\n');
    let hand_lines: Vec<&str> = hand.iter().map(|(_, line)| *line).collect();
    let mut model_lines = String::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let protects_hand_line = hand_lines.iter().any(|hand| held_by(hand, &[line]));
        if !protects_hand_line {
            model_lines.push_str(line);
            model_lines.push('\n');
        }
    }
    Merged {
        text,
        restored,
        dropped,
        model_lines,
    }
}

/// The history entry listing what a compression of `MEMORY.md` dropped.
pub(crate) fn compressed_note(session_id: &str, budget: usize, dropped: &[String]) -> String {
    let mut note = format!(
        "[memory-compressed] session {}: MEMORY.md was over its {budget}-byte budget, and the \
         model's compression dropped these lines (the file as it was is in MEMORY.history/):\n",
        one_line(session_id, 80)
    );
    for line in dropped {
        note.push_str(line.trim());
        note.push('\n');
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALLERGY: &str = "- Allergic to peanuts (severe; carries an EpiPen)";

    #[test]
    fn keys_ignore_markers_case_and_spacing() {
        assert_eq!(line_key("  - Likes   Tea "), "likes tea");
        assert_eq!(line_key("* likes tea"), line_key("likes tea"));
        assert_eq!(heading_level("## Health"), Some(2));
        assert_eq!(heading_level("#hashtag"), None);
        assert_eq!(heading_level("- # not"), None);
    }

    #[test]
    fn an_update_keeping_under_half_the_words_is_refused() {
        let memory =
            "# Memory\n- The user is vegetarian.\n- Sister: Ana.\n- Trip to Lisbon in May.";
        assert_eq!(refusal(memory, &memory.replace("May", "June"), false), None);
        let why = refusal(memory, "# Memory\n- Likes trams.", false).unwrap();
        assert!(why.contains("keeps 1 of the 8 content words"), "{why}");
        assert_eq!(refusal("", "anything", false), None);
        // Asked to compress, a quarter is enough.
        let half_gone = "# Memory\n- The user is vegetarian.";
        assert!(refusal(memory, half_gone, false).is_some());
        assert_eq!(refusal(memory, half_gone, true), None);
    }

    #[test]
    fn a_hand_written_line_the_model_dropped_is_put_back_in_its_section() {
        let record = "# Memory\n- The user is vegetarian.\n- Trip to Lisbon in May.\n## Health\n";
        let memory = format!(
            "# Memory\n- The user is vegetarian.\n- Trip to Lisbon in May.\n\n## Health\n{ALLERGY}\n\n## Work\n- Nurse.\n"
        );
        let update = "# Memory\n- The user is vegetarian.\n- Trip to Lisbon in June.\n\n## Health\n- Runs on Sundays.\n\n## Work\n- Night shifts.\n";
        let merged = merge(&memory, update, Some(record), false);
        assert_eq!(
            merged.restored,
            vec![ALLERGY.to_owned(), "- Nurse.".to_owned()]
        );
        assert_eq!(
            merged.text,
            format!("# Memory\n- The user is vegetarian.\n- Trip to Lisbon in June.\n\n## Health\n- Runs on Sundays.\n{ALLERGY}\n\n## Work\n- Night shifts.\n- Nurse.\n")
        );
        // The model's own old line ("May") was its to drop; the record now lists its new lines
        // and not the user's.
        assert!(merged.model_lines.contains("Trip to Lisbon in June"));
        assert!(!merged.model_lines.contains("Allergic"));
        assert!(!merged.model_lines.contains("Nurse"));
    }

    #[test]
    fn a_line_written_twice_comes_back_once() {
        let memory = format!("# Memory\n{}", "- an old fact\n".repeat(3));
        let merged = merge(&memory, "# Memory\n- A cat named Miso.", None, false);
        assert_eq!(merged.restored, vec!["- an old fact".to_owned()]);
        assert_eq!(
            merged.text,
            "# Memory\n- A cat named Miso.\n- an old fact\n"
        );
    }

    #[test]
    fn a_dropped_section_comes_back_with_its_heading() {
        let memory = format!("# Memory\n- Likes tea.\n\n## Health\n{ALLERGY}\n");
        let merged = merge(
            &memory,
            "# Memory\n- Likes tea.",
            Some("# Memory\n- Likes tea.\n"),
            false,
        );
        assert_eq!(
            merged.text,
            format!("# Memory\n- Likes tea.\n\n## Health\n{ALLERGY}\n")
        );
    }

    #[test]
    fn a_compression_drops_hand_written_lines_and_lists_what_went() {
        let record = "# Memory\n- Likes tea.\n- Trip to Lisbon in May.\n";
        let memory = format!(
            "# Memory\n- Likes tea.\n- Trip to Lisbon in May.\n- Likes tea.\n\n## Health\n{ALLERGY}\n- Sprained an ankle in 2019.\n"
        );
        let update = format!("# Memory\n- Likes tea; trip to Lisbon in May.\n{ALLERGY}\n");
        let merged = merge(&memory, &update, Some(record), true);
        assert_eq!(merged.text, update, "nothing is put back in a compression");
        assert!(merged.restored.is_empty());
        // Reworded lines are held (all their words remain); the old ankle line is not.
        assert_eq!(
            merged.dropped,
            vec!["- Sprained an ankle in 2019.".to_owned()]
        );
        let note = compressed_note("s9", 256, &merged.dropped);
        assert!(
            note.starts_with(
                "[memory-compressed] session s9: MEMORY.md was over its 256-byte budget"
            ),
            "{note}"
        );
        assert!(note.ends_with("- Sprained an ankle in 2019.\n"), "{note}");
        // The same update outside a compression gets the hand-written line back.
        let kept = merge(&memory, &update, Some(record), false);
        assert_eq!(
            kept.restored,
            vec!["- Sprained an ankle in 2019.".to_owned()]
        );
        assert!(kept.dropped.is_empty());
    }

    #[test]
    fn a_reworded_hand_line_is_held_and_stays_the_users() {
        let memory = format!("{ALLERGY}\n- Likes tea.\n");
        let update = "## Health\n* allergic to PEANUTS, severe: carries an EpiPen\n- Likes tea.\n";
        let merged = merge(&memory, update, Some("- Likes tea.\n"), false);
        assert!(merged.restored.is_empty());
        assert_eq!(merged.text, update);
        assert_eq!(merged.model_lines, "## Health\n- Likes tea.\n");
        // Next time, dropping the reworded line still brings it back.
        let again = merge(
            &merged.text,
            "- Likes tea.\n",
            Some(&merged.model_lines),
            false,
        );
        assert_eq!(
            again.restored,
            vec!["* allergic to PEANUTS, severe: carries an EpiPen".to_owned()]
        );
    }

    #[test]
    fn without_a_record_every_line_is_kept() {
        let merged = merge(
            "- Likes tea.\n- Trip in May.\n",
            "- Trip in June.\n",
            None,
            false,
        );
        assert_eq!(
            merged.text,
            "- Trip in June.\n\n- Likes tea.\n- Trip in May.\n"
        );
        assert_eq!(merged.model_lines, "- Trip in June.\n");
    }

    #[test]
    fn the_refused_note_keeps_the_update() {
        let note = refused_note("s1", "why", "# Memory\n- Likes trams.");
        assert!(note.starts_with("[memory-refused] session s1: why, so MEMORY.md was left"));
        assert!(note.ends_with(":\n# Memory\n- Likes trams.\n"));
        let long = refused_note("s1", "why", &"x".repeat(REFUSED_CHARS + 10));
        assert!(long.contains("(its first 4000 characters)"));
    }
}
