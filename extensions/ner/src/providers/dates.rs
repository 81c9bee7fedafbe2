//! Absolute dates in the forms people write in chat: ISO (`2026-03-01`), numeric (`03/04/2026`,
//! `3.4.2026`, `2026/03/04`) and written (`March 3rd`, `3 March 2026`, `3rd of March`,
//! `March 2026`). Relative dates (`next Tuesday`, `tomorrow`) are left out: without the time the
//! text was written they name no day, and a memory store would link unrelated days together.

use std::sync::LazyLock;

use chrono::NaiveDate;
use regex::{Captures, Regex};

use mnemo_ner_api::{EntityType, ExtractedEntity};

use super::{has_char_after, has_char_before, REGEX_PROVIDER};

/// A date found in a text: byte span, canonical form and confidence.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FoundDate {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) canonical: String,
    pub(crate) confidence: f32,
}

const MONTHS: &str = concat!(
    "January|February|March|April|May|June|July|August|September|October|November|December|",
    "january|february|april|june|july|august|september|october|november|december|",
    "Sept|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Oct|Nov|Dec",
);

static ISO: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(\d{4})-(\d{2})-(\d{2})").expect("literal regex"));
static NUMERIC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(\d{1,2})([/.])(\d{1,2})[/.](\d{4})|(\d{4})/(\d{1,2})/(\d{1,2})")
        .expect("literal regex")
});
static MONTH_DAY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"\b({MONTHS})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}})\b)?"
    ))
    .expect("literal regex")
});
static DAY_MONTH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"\b(\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+({MONTHS})\b\.?(?:,?\s+(\d{{4}})\b)?"
    ))
    .expect("literal regex")
});
static MONTH_YEAR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"\b({MONTHS})\.?\s+(\d{{4}})\b")).expect("literal regex")
});

fn month_number(name: &str) -> Option<u32> {
    let lower = name.to_ascii_lowercase();
    let prefix = lower.get(..3)?;
    let number = match prefix {
        "jan" => 1,
        "feb" => 2,
        "mar" => 3,
        "apr" => 4,
        "may" => 5,
        "jun" => 6,
        "jul" => 7,
        "aug" => 8,
        "sep" => 9,
        "oct" => 10,
        "nov" => 11,
        "dec" => 12,
        _ => return None,
    };
    Some(number)
}

fn number(captures: &Captures<'_>, group: usize) -> Option<u32> {
    captures.get(group)?.as_str().parse().ok()
}

fn iso(year: i32, month: u32, day: u32) -> Option<String> {
    NaiveDate::from_ymd_opt(year, month, day).map(|date| date.format("%Y-%m-%d").to_string())
}

/// Whether `day` exists in `month` of some year (29 February counts).
fn day_exists(month: u32, day: u32) -> bool {
    NaiveDate::from_ymd_opt(2000, month, day).is_some()
}

/// Every absolute date in `text`, possibly overlapping (the merge keeps the best).
pub(crate) fn find_dates(text: &str) -> Vec<FoundDate> {
    let mut found = Vec::new();
    for captures in ISO.captures_iter(text) {
        let Some(whole) = captures.get(0) else {
            continue;
        };
        // Not inside a longer number or path; a `T` may follow (2026-03-01T10:00).
        if has_char_before(text, whole.start(), |c| {
            c.is_alphanumeric() || "-/.".contains(c)
        }) || has_char_after(text, whole.end(), |c| {
            c.is_alphanumeric() && c != 'T' || "-/".contains(c)
        }) {
            continue;
        }
        let (Some(year), Some(month), Some(day)) = (
            number(&captures, 1),
            number(&captures, 2),
            number(&captures, 3),
        ) else {
            continue;
        };
        let Ok(year) = i32::try_from(year) else {
            continue;
        };
        if let Some(canonical) = iso(year, month, day) {
            found.push(FoundDate {
                start: whole.start(),
                end: whole.end(),
                canonical,
                confidence: 0.95,
            });
        }
    }
    for captures in NUMERIC.captures_iter(text) {
        let Some(whole) = captures.get(0) else {
            continue;
        };
        if has_char_before(text, whole.start(), |c| {
            c.is_alphanumeric() || "/.-".contains(c)
        }) || has_char_after(text, whole.end(), |c| {
            c.is_alphanumeric() || "/-".contains(c)
        }) || text[whole.end()..]
            .strip_prefix('.')
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        {
            continue;
        }
        let surface = whole.as_str();
        let canonical = if let Some(year) = number(&captures, 5) {
            // 2026/03/04: year first is always year/month/day.
            let (Some(month), Some(day)) = (number(&captures, 6), number(&captures, 7)) else {
                continue;
            };
            let Some(canonical) = i32::try_from(year)
                .ok()
                .and_then(|year| iso(year, month, day))
            else {
                continue;
            };
            canonical
        } else {
            let (Some(first), Some(second), Some(year)) = (
                number(&captures, 1),
                number(&captures, 3),
                number(&captures, 4),
            ) else {
                continue;
            };
            let Ok(year) = i32::try_from(year) else {
                continue;
            };
            let day_first = captures.get(2).is_some_and(|sep| sep.as_str() == ".");
            let as_day_month = iso(year, second, first);
            let as_month_day = iso(year, first, second);
            let reading = if day_first {
                as_day_month.clone()
            } else {
                match (&as_day_month, &as_month_day) {
                    (Some(a), Some(b)) if a == b => Some(a.clone()),
                    // Both readings valid and different (03/04/2026): keep what was written.
                    (Some(_), Some(_)) => Some(surface.to_owned()),
                    (Some(a), None) => Some(a.clone()),
                    (None, Some(b)) => Some(b.clone()),
                    (None, None) => None,
                }
            };
            let Some(canonical) = reading else { continue };
            canonical
        };
        found.push(FoundDate {
            start: whole.start(),
            end: whole.end(),
            canonical,
            confidence: 0.85,
        });
    }
    for captures in MONTH_DAY.captures_iter(text) {
        let Some(whole) = captures.get(0) else {
            continue;
        };
        let (Some(month), Some(day)) = (
            captures.get(1).and_then(|m| month_number(m.as_str())),
            number(&captures, 2),
        ) else {
            continue;
        };
        push_written(
            &mut found,
            text,
            whole.range(),
            month,
            day,
            number(&captures, 3),
        );
    }
    for captures in DAY_MONTH.captures_iter(text) {
        let Some(whole) = captures.get(0) else {
            continue;
        };
        let (Some(day), Some(month)) = (
            number(&captures, 1),
            captures.get(2).and_then(|m| month_number(m.as_str())),
        ) else {
            continue;
        };
        // A trailing full stop belongs to the sentence unless it ends an abbreviation.
        let mut range = whole.range();
        if captures.get(3).is_none() && text[range.clone()].ends_with('.') {
            range.end -= 1;
        }
        push_written(&mut found, text, range, month, day, number(&captures, 3));
    }
    for captures in MONTH_YEAR.captures_iter(text) {
        let Some(whole) = captures.get(0) else {
            continue;
        };
        if captures
            .get(1)
            .and_then(|m| month_number(m.as_str()))
            .is_none()
        {
            continue;
        }
        found.push(FoundDate {
            start: whole.start(),
            end: whole.end(),
            canonical: whole.as_str().to_owned(),
            confidence: 0.8,
        });
    }
    found
}

fn push_written(
    found: &mut Vec<FoundDate>,
    text: &str,
    range: std::ops::Range<usize>,
    month: u32,
    day: u32,
    year: Option<u32>,
) {
    if has_char_after(text, range.end, |c| c == '/' || c == '-') {
        return;
    }
    let surface = &text[range.clone()];
    let (canonical, confidence) = match year {
        Some(year) => {
            let Some(canonical) = i32::try_from(year)
                .ok()
                .and_then(|year| iso(year, month, day))
            else {
                return;
            };
            (canonical, 0.92)
        }
        None if day_exists(month, day) => (surface.to_owned(), 0.88),
        None => return,
    };
    found.push(FoundDate {
        start: range.start,
        end: range.end,
        canonical,
        confidence,
    });
}

/// The canonical form of a date written as `surface` alone, when `surface` is one date.
pub(crate) fn canonical_date(surface: &str) -> Option<String> {
    let trimmed = surface.trim();
    find_dates(trimmed)
        .into_iter()
        .find(|date| date.start == 0 && date.end == trimmed.len())
        .map(|date| date.canonical)
}

/// Dates as entities of the regex provider.
pub(crate) fn date_entities(text: &str) -> Vec<ExtractedEntity> {
    find_dates(text)
        .into_iter()
        .map(|date| ExtractedEntity {
            surface: text[date.start..date.end].to_owned(),
            canonical: date.canonical,
            entity_type: EntityType::Date,
            start: date.start,
            end: date.end,
            confidence: date.confidence,
            relation: None,
            provider: REGEX_PROVIDER.to_owned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dates(text: &str) -> Vec<(String, String)> {
        let mut found: Vec<_> = crate::merge::merge(date_entities(text))
            .into_iter()
            .map(|date| (date.surface, date.canonical))
            .collect();
        found.sort();
        found
    }

    fn one(surface: &str, canonical: &str) -> Vec<(String, String)> {
        vec![(surface.to_owned(), canonical.to_owned())]
    }

    #[test]
    fn iso_dates_are_checked_and_canonical() {
        assert_eq!(
            dates("moved to 2026-03-14."),
            one("2026-03-14", "2026-03-14")
        );
        assert_eq!(
            dates("at 2026-03-01T10:00Z"),
            one("2026-03-01", "2026-03-01")
        );
        assert!(dates("2026-02-30 is no day").is_empty());
        assert!(dates("build 12026-03-01 and 2026-03-011").is_empty());
    }

    #[test]
    fn numeric_dates_keep_ambiguous_readings_as_written() {
        assert_eq!(dates("due 03/04/2026"), one("03/04/2026", "03/04/2026"));
        assert_eq!(dates("due 25/03/2026"), one("25/03/2026", "2026-03-25"));
        assert_eq!(dates("due 03/25/2026"), one("03/25/2026", "2026-03-25"));
        assert_eq!(dates("due 03/03/2026"), one("03/03/2026", "2026-03-03"));
        assert_eq!(dates("due 3.4.2026"), one("3.4.2026", "2026-04-03"));
        assert_eq!(dates("due 2026/04/03"), one("2026/04/03", "2026-04-03"));
        assert!(dates("ratio 13/13/2026 and 1.2.3.2026").is_empty());
    }

    #[test]
    fn written_dates() {
        assert_eq!(dates("on March 3rd at 10"), one("March 3rd", "March 3rd"));
        assert_eq!(
            dates("Our anniversary is 14 February 2019."),
            one("14 February 2019", "2019-02-14")
        );
        assert_eq!(
            dates("on March 3, 2026 we"),
            one("March 3, 2026", "2026-03-03")
        );
        assert_eq!(
            dates("the 3rd of March is fine"),
            one("3rd of March", "3rd of March")
        );
        assert_eq!(dates("from 12 May."), one("12 May", "12 May"));
        assert_eq!(dates("Sept. 9"), one("Sept. 9", "Sept. 9"));
        assert_eq!(dates("in March 2026"), one("March 2026", "March 2026"));
        assert_eq!(dates("on june 3"), one("june 3", "june 3"));
    }

    #[test]
    fn no_dates_in_lookalikes() {
        assert!(dates("you may 3D print it").is_empty());
        assert!(dates("March 32 and 31 June").is_empty());
        assert!(dates("in May we go, next Tuesday, tomorrow").is_empty());
        assert!(dates("I walked 5 miles").is_empty());
        assert!(dates("we march 3 times").is_empty());
    }

    #[test]
    fn canonical_of_a_whole_surface() {
        assert_eq!(
            canonical_date("3 March 2026").as_deref(),
            Some("2026-03-03")
        );
        assert_eq!(canonical_date("March 3").as_deref(), Some("March 3"));
        assert_eq!(canonical_date("March 3 and 4"), None);
    }
}
