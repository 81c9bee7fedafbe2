//! Cron expressions, and the scheduler host that runs jobs in real or virtual time.

use chrono::{DateTime, Utc};
use croner::parser::{CronParser, Seconds};
use croner::Cron;

/// Why a cron expression was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cron expression `{expression}`: {reason}")]
pub struct CronError {
    /// The expression as given.
    pub expression: String,
    /// What is wrong with it.
    pub reason: String,
}

/// A parsed cron expression, evaluated in UTC.
///
/// Five fields (`min hour dom month dow`, as in the reference design's `0 3 * * *`) or six with
/// seconds first; day-of-month and day-of-week must both match. The one evaluation of due times,
/// for the real-time scheduler and for virtual time alike.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    expression: String,
    six_fields: String,
    cron: Cron,
}

impl CronSchedule {
    /// Parses `expression`.
    ///
    /// # Errors
    /// [`CronError`] naming the expression and the reason.
    pub fn parse(expression: &str) -> Result<Self, CronError> {
        let fields = expression.split_whitespace().count();
        let six_fields = match fields {
            5 => format!("0 {}", expression.trim()),
            6 => expression.trim().to_owned(),
            n => {
                return Err(CronError {
                    expression: expression.to_owned(),
                    reason: format!("expected 5 fields (or 6 with seconds), found {n}"),
                })
            }
        };
        let cron = CronParser::builder()
            .seconds(Seconds::Required)
            .dom_and_dow(true)
            .build()
            .parse(&six_fields)
            .map_err(|err| CronError {
                expression: expression.to_owned(),
                reason: err.to_string(),
            })?;
        Ok(Self {
            expression: expression.to_owned(),
            six_fields,
            cron,
        })
    }

    /// The expression as written in config.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The six-field form (seconds first).
    pub fn six_fields(&self) -> &str {
        &self.six_fields
    }

    /// The first time strictly after `after` at which the job is due.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron.find_next_occurrence(&after, false).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn five_field_daily_job() {
        let schedule = CronSchedule::parse("0 3 * * *").unwrap();
        assert_eq!(schedule.six_fields(), "0 0 3 * * *");
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap();
        let next = schedule.next_after(start).unwrap();
        assert_eq!(next, Utc.with_ymd_and_hms(2026, 1, 2, 3, 0, 0).unwrap());
        let exactly_due = schedule.next_after(next).unwrap();
        assert_eq!(
            exactly_due,
            Utc.with_ymd_and_hms(2026, 1, 3, 3, 0, 0).unwrap()
        );
    }

    #[test]
    fn weekly_on_sunday() {
        let schedule = CronSchedule::parse("0 3 * * 0").unwrap();
        // 2026-01-01 is a Thursday; the next Sunday is the 4th.
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        assert_eq!(
            schedule.next_after(start).unwrap(),
            Utc.with_ymd_and_hms(2026, 1, 4, 3, 0, 0).unwrap()
        );
    }

    #[test]
    fn rejects_bad_expressions() {
        let err = CronSchedule::parse("0 3 * *").unwrap_err();
        assert!(err.to_string().contains("expected 5 fields"), "{err}");
        assert!(CronSchedule::parse("0 25 * * *").is_err());
        assert!(CronSchedule::parse("every day").is_err());
    }
}
