//! Durations as an `advance` step's `by` writes them: `10d`, `3h`, `90m`, `45s`, `2w`, `1d12h`.

use chrono::Duration;

/// Longest `advance` step accepted: a hundred years, far beyond any scenario, and far from the
/// end of the clock's range.
const MAX_DURATION_DAYS: i64 = 36_500;

fn max_duration() -> Duration {
    Duration::days(MAX_DURATION_DAYS)
}

/// Parses a duration such as `10d`, `3h`, `90m`, `45s`, `2w` or `1d12h`, up to
/// [`MAX_DURATION_DAYS`].
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let mut total = Duration::zero();
    let mut digits = String::new();
    let mut saw_unit = false;
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let amount: i64 = digits
            .parse()
            .map_err(|_| format!("`{text}`: expected a number before `{c}`"))?;
        digits.clear();
        let unit = match c {
            'w' => Duration::try_weeks(amount),
            'd' => Duration::try_days(amount),
            'h' => Duration::try_hours(amount),
            'm' => Duration::try_minutes(amount),
            's' => Duration::try_seconds(amount),
            other => {
                return Err(format!(
                    "`{text}`: unknown unit `{other}`; use w, d, h, m or s"
                ))
            }
        };
        total = unit
            .and_then(|unit| total.checked_add(&unit))
            .filter(|total| *total <= max_duration())
            .ok_or_else(|| format!("`{text}`: longer than {} days", MAX_DURATION_DAYS))?;
        saw_unit = true;
    }
    if !digits.is_empty() || !saw_unit {
        return Err(format!(
            "`{text}`: expected amounts with units, such as 10d or 1d12h"
        ));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10d").unwrap(), Duration::days(10));
        assert_eq!(
            parse_duration("1d12h").unwrap(),
            Duration::days(1) + Duration::hours(12)
        );
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("d").is_err());
        assert!(parse_duration("3y").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("99999999999999999d")
            .unwrap_err()
            .contains("longer than"));
        assert!(parse_duration("36501d").is_err());
    }
}
