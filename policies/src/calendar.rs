//! UTC calendar dates from day counts and back (Howard Hinnant's
//! algorithms for the proleptic Gregorian calendar): budgets' periods, the
//! reports' days, AWS's signing dates and STS's expirations.

/// Year, month and day of a day count since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let day = doy - (153 * mp + 2) / 5 + 1;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Days since 1970-01-01 of a calendar date.
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days since the epoch, and months since year 0, of a UTC timestamp in
/// milliseconds: the periods daily and monthly budgets count in.
pub fn periods(now_ms: i64) -> (i64, i64) {
    let day = now_ms.div_euclid(86_400_000);
    let (year, month, _) = civil_from_days(day);
    (day, year * 12 + month - 1)
}

/// The first millisecond of the UTC day and month of a timestamp in
/// milliseconds.
pub fn period_starts(now_ms: i64) -> (i64, i64) {
    let day = now_ms.div_euclid(86_400_000);
    let (_, month, _) = civil_from_days(day);
    let mut first = day;
    while civil_from_days(first - 1).1 == month {
        first -= 1;
    }
    (day * 86_400_000, first * 86_400_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_and_dates_agree_both_ways() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        for days in [-800_000, -1, 0, 59, 60, 11_016, 20_000, 36_524, 2_000_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn a_timestamps_day_and_month_start() {
        // 2026-11-29T23:00:00Z
        let ms = 1_795_993_200_000;
        let (day_start, month_start) = period_starts(ms);
        assert_eq!(day_start, 1_795_910_400_000); // 2026-11-29T00:00Z
        assert_eq!(month_start, 1_793_491_200_000); // 2026-11-01T00:00Z
        assert_eq!(periods(ms), (ms.div_euclid(86_400_000), 2026 * 12 + 10));
    }
}
