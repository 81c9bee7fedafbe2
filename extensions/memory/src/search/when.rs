//! Time expressions in a query: the period a question asks about.
//!
//! "What did Melanie paint in July 2023?", "what did I buy last week?": a question about a
//! period wants memories from that period. Episodes carry the time they were said, and people
//! mostly tell what happened during a period or in the days after it, so hybrid search ranks a
//! memory said in the period, or up to [`TOLD_AFTER_DAYS`] after it, higher (`period_weight`).
//!
//! Understood, case-insensitively, against the time the search is made at:
//! - a day: `October 13, 2023`, `13 October 2023`, `1st of May, 2022`, `yesterday`,
//!   `last Friday`, `3 days ago`;
//! - a month: `May 2023`, `in May` (the latest May that has begun), `last month`,
//!   `two months ago`;
//! - a year: `in 2023`, `last year`;
//! - a week: `last week`, `two weeks ago`.
//!
//! The first expression found counts. Month names need a year, a day or a preposition ("in
//! May", "during June") to count: "May I ask…" is not a date.

use std::sync::OnceLock;

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc, Weekday};
use regex::Regex;

/// How long after a period a memory still counts as told about it, in days.
pub(crate) const TOLD_AFTER_DAYS: i64 = 7;

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// A period of time: from `start` up to, not including, `end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Period {
    pub(crate) start: DateTime<Utc>,
    pub(crate) end: DateTime<Utc>,
}

impl Period {
    /// True when a memory said at `time` (seconds) is about this period: said in it, or up to
    /// [`TOLD_AFTER_DAYS`] after it.
    pub(crate) fn covers(&self, time: i64) -> bool {
        let told_until = self.end + Duration::days(TOLD_AFTER_DAYS);
        self.start.timestamp() <= time && time < told_until.timestamp()
    }

    fn days(first: NaiveDate, days: i64) -> Option<Self> {
        let start = Utc.from_utc_datetime(&first.and_hms_opt(0, 0, 0)?);
        Some(Self {
            start,
            end: start + Duration::days(days),
        })
    }

    fn month(year: i32, month: u32) -> Option<Self> {
        let first = NaiveDate::from_ymd_opt(year, month, 1)?;
        let next = if month == 12 {
            NaiveDate::from_ymd_opt(year + 1, 1, 1)?
        } else {
            NaiveDate::from_ymd_opt(year, month + 1, 1)?
        };
        Self::days(first, (next - first).num_days())
    }

    fn year(year: i32) -> Option<Self> {
        let first = NaiveDate::from_ymd_opt(year, 1, 1)?;
        let next = NaiveDate::from_ymd_opt(year + 1, 1, 1)?;
        Self::days(first, (next - first).num_days())
    }
}

/// The expressions, tried in this order.
struct Patterns {
    month_day_year: Regex,
    day_month_year: Regex,
    month_year: Regex,
    in_month: Regex,
    in_year: Regex,
    ago: Regex,
    last: Regex,
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let month = MONTHS.join("|");
        let build = |pattern: String| {
            // The patterns are constants of this file; a test compiles every one of them.
            Regex::new(&format!("(?i){pattern}")).expect("a valid built-in pattern")
        };
        Patterns {
            month_day_year: build(format!(
                r"\b({month})\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b"
            )),
            day_month_year: build(format!(
                r"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({month}),?\s+(\d{{4}})\b"
            )),
            month_year: build(format!(r"\b({month}),?\s+(?:of\s+)?(\d{{4}})\b")),
            in_month: build(format!(
                r"\b(?:in|during|of|since|early|late|mid|mid-)\s+({month})\b"
            )),
            in_year: build(r"\b(?:in|during|of|since)\s+(\d{4})\b".to_owned()),
            ago: build(
                r"\b(\d{1,2}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a couple of|a few)\s+(day|week|month|year)s?\s+ago\b"
                    .to_owned(),
            ),
            last: build(
                r"\b(yesterday|last\s+(?:week|month|year|monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b"
                    .to_owned(),
            ),
        }
    })
}

fn month_number(name: &str) -> Option<u32> {
    let name = name.to_lowercase();
    MONTHS
        .iter()
        .position(|month| *month == name)
        .and_then(|index| u32::try_from(index + 1).ok())
}

fn count(word: &str) -> Option<i64> {
    let word = word.to_lowercase();
    let words = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
        "twelve",
    ];
    match word.as_str() {
        "a" | "an" => Some(1),
        "a couple of" => Some(2),
        "a few" => Some(3),
        _ => words
            .iter()
            .position(|known| *known == word)
            .and_then(|index| i64::try_from(index + 1).ok())
            .or_else(|| word.parse().ok()),
    }
}

/// The calendar month `months` months before the month of `day`.
fn months_before(day: NaiveDate, months: i64) -> Option<Period> {
    let index = i64::from(day.year()) * 12 + i64::from(day.month0()) - months;
    let year = i32::try_from(index.div_euclid(12)).ok()?;
    let month = u32::try_from(index.rem_euclid(12)).ok()? + 1;
    Period::month(year, month)
}

/// The day written as `year`, month name and `day`; `None` when there is no such day.
fn one_day(year: &str, month: &str, day: &str) -> Option<Period> {
    let day = NaiveDate::from_ymd_opt(year.parse().ok()?, month_number(month)?, day.parse().ok()?)?;
    Period::days(day, 1)
}

/// The period `query` asks about, judged at `asked`; `None` when it names none.
pub(crate) fn period_in(query: &str, asked: DateTime<Utc>) -> Option<Period> {
    let patterns = patterns();
    let today = asked.date_naive();
    if let Some(found) = patterns.month_day_year.captures(query) {
        return one_day(&found[3], &found[1], &found[2]);
    }
    if let Some(found) = patterns.day_month_year.captures(query) {
        return one_day(&found[3], &found[2], &found[1]);
    }
    if let Some(found) = patterns.month_year.captures(query) {
        return Period::month(found[2].parse().ok()?, month_number(&found[1])?);
    }
    if let Some(found) = patterns.in_month.captures(query) {
        let month = month_number(&found[1])?;
        let year = if month <= today.month() {
            today.year()
        } else {
            today.year() - 1
        };
        return Period::month(year, month);
    }
    if let Some(found) = patterns.in_year.captures(query) {
        return Period::year(found[1].parse().ok()?);
    }
    if let Some(found) = patterns.ago.captures(query) {
        let amount = count(&found[1])?;
        return match found[2].to_lowercase().as_str() {
            "day" => Period::days(today - Duration::days(amount), 1),
            "week" => Period::days(today - Duration::days(7 * amount + 3), 7),
            "month" => months_before(today, amount),
            _ => Period::year(today.year() - i32::try_from(amount).ok()?),
        };
    }
    if let Some(found) = patterns.last.captures(query) {
        let expression = found[1].to_lowercase();
        let last = expression
            .split_whitespace()
            .last()
            .unwrap_or_default()
            .to_owned();
        return match last.as_str() {
            "yesterday" => Period::days(today - Duration::days(1), 1),
            "week" => {
                let this_monday =
                    today - Duration::days(i64::from(today.weekday().num_days_from_monday()));
                Period::days(this_monday - Duration::days(7), 7)
            }
            "month" => months_before(today, 1),
            "year" => Period::year(today.year() - 1),
            weekday => {
                let wanted: Weekday = weekday.parse().ok()?;
                let back = (7 + i64::from(today.weekday().num_days_from_monday())
                    - i64::from(wanted.num_days_from_monday()))
                    % 7;
                Period::days(today - Duration::days(if back == 0 { 7 } else { back }), 1)
            }
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .map(|time| time.with_timezone(&Utc))
            .expect("a test time")
    }

    fn period(query: &str) -> Option<(String, String)> {
        // Asked on Wednesday 2023-05-31.
        period_in(query, at("2023-05-31T10:00:00Z")).map(|period| {
            (
                period.start.date_naive().to_string(),
                period.end.date_naive().to_string(),
            )
        })
    }

    fn span(start: &str, end: &str) -> Option<(String, String)> {
        Some((start.to_owned(), end.to_owned()))
    }

    #[test]
    fn dates_with_a_year() {
        assert_eq!(
            period("What painting did she show on October 13, 2023?"),
            span("2023-10-13", "2023-10-14")
        );
        assert_eq!(
            period("What did Gina find on 1 February, 2023?"),
            span("2023-02-01", "2023-02-02")
        );
        assert_eq!(
            period("the 2nd of March 2022"),
            span("2022-03-02", "2022-03-03")
        );
        assert_eq!(
            period("Where did Joanna travel to in July 2022?"),
            span("2022-07-01", "2022-08-01")
        );
        assert_eq!(
            period("What happened in the beginning of November 2022?"),
            span("2022-11-01", "2022-12-01")
        );
        assert_eq!(
            period("How many times did she go to the beach in 2023?"),
            span("2023-01-01", "2024-01-01")
        );
    }

    #[test]
    fn months_without_a_year_are_the_latest_begun() {
        assert_eq!(
            period("When did Melanie go camping in May?"),
            span("2023-05-01", "2023-06-01")
        );
        assert_eq!(
            period("What did I do during June?"),
            span("2022-06-01", "2022-07-01")
        );
        assert_eq!(period("May I ask what I ate?"), None);
        assert_eq!(period("I may go to the march"), None);
    }

    #[test]
    fn expressions_relative_to_the_asking_time() {
        assert_eq!(
            period("what did I buy yesterday"),
            span("2023-05-30", "2023-05-31")
        );
        assert_eq!(
            period("Where did I go last week?"),
            span("2023-05-22", "2023-05-29")
        );
        assert_eq!(
            period("my plans last month"),
            span("2023-04-01", "2023-05-01")
        );
        assert_eq!(
            period("books I read last year"),
            span("2022-01-01", "2023-01-01")
        );
        // Wednesday 31 May: last Friday is the 26th, last Wednesday a week before.
        assert_eq!(
            period("the dinner last Friday"),
            span("2023-05-26", "2023-05-27")
        );
        assert_eq!(period("last wednesday"), span("2023-05-24", "2023-05-25"));
        assert_eq!(
            period("what I did 3 days ago"),
            span("2023-05-28", "2023-05-29")
        );
        assert_eq!(
            period("the class two weeks ago"),
            span("2023-05-14", "2023-05-21")
        );
        assert_eq!(
            period("a couple of months ago"),
            span("2023-03-01", "2023-04-01")
        );
        assert_eq!(period("what did I cook"), None);
    }

    #[test]
    fn impossible_dates_are_no_period() {
        assert_eq!(period("on February 30, 2023"), None);
        assert_eq!(period("in 99999"), None);
    }

    #[test]
    fn a_period_covers_the_week_after_it() {
        let day = period_in("on 1 May 2023", at("2023-06-01T00:00:00Z")).expect("a day");
        assert!(day.covers(at("2023-05-01T12:00:00Z").timestamp()));
        assert!(day.covers(at("2023-05-08T23:00:00Z").timestamp()));
        assert!(!day.covers(at("2023-05-09T00:00:00Z").timestamp()));
        assert!(!day.covers(at("2023-04-30T23:59:59Z").timestamp()));
    }
}
