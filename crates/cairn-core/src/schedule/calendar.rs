//! Calendar arithmetic and bitset search over a cron's fields: matching days of a
//! month, the next matching date, the next matching second of a day.
//!
//! Dates are proleptic Gregorian; days are counted from 1970-01-01 so that a
//! local wall-clock time is just `days * 86400 + second_of_day` ("local seconds").

use super::cron::{Cron, MAX_YEAR, MIN_YEAR};

/// Latest year the evaluator looks at; beyond it nothing fires.
pub(crate) const LAST_YEAR: i64 = 9999;

/// Bits 0, 7, 14, 21, 28, 35: one weekday per week, shifted to its first day.
const WEEKLY: u64 = 1 | 1 << 7 | 1 << 14 | 1 << 21 | 1 << 28 | 1 << 35;

/// Days since 1970-01-01 of a civil date (month 1-12, day 1-31).
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date `(year, month, day)` of a count of days since 1970-01-01.
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Day of the week of a count of days since 1970-01-01, Sunday = 0.
pub(crate) fn weekday(days: i64) -> u32 {
    // 1970-01-01 was a Thursday.
    (days + 4).rem_euclid(7) as u32
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// Number of days in a month.
pub(crate) fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn next_bit(mask: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let rest = mask & (u64::MAX << from);
    (rest != 0).then(|| rest.trailing_zeros())
}

impl Cron {
    fn year_ok(&self, y: i64) -> bool {
        match &self.years {
            None => true,
            Some(set) => {
                if y < i64::from(MIN_YEAR) || y > i64::from(MAX_YEAR) {
                    return false;
                }
                let i = (y - i64::from(MIN_YEAR)) as usize;
                set[i / 64] & (1 << (i % 64)) != 0
            }
        }
    }

    /// The first year `>= y` allowed by the year field, if any.
    fn next_year(&self, y: i64) -> Option<i64> {
        if self.years.is_none() {
            return Some(y);
        }
        (y.max(i64::from(MIN_YEAR))..=i64::from(MAX_YEAR)).find(|&y| self.year_ok(y))
    }

    /// Days (bits 1-31) of month `m` of year `y` that satisfy both day fields
    /// under Debian's AND/OR rule. Month and year are not checked here.
    pub(crate) fn day_mask(&self, y: i64, m: u32) -> u32 {
        let n = days_in_month(y, m);
        let valid = ((1u64 << (n + 1)) - 2) as u32;
        let first = weekday(days_from_civil(y, m, 1));
        let weekday_of = |d: u32| (first + d - 1) % 7;
        let mut dom = self.dom & valid;
        if self.dom_last {
            dom |= 1 << n;
        }
        if self.dom_last_weekday {
            let last = match weekday_of(n) {
                6 => n - 1,
                0 => n - 2,
                _ => n,
            };
            dom |= 1 << last;
        }
        let mut nearest = self.dom_nearest & valid;
        while nearest != 0 {
            let d = nearest.trailing_zeros();
            nearest &= nearest - 1;
            // The nearest weekday never leaves the month (Quartz semantics).
            let day = match weekday_of(d) {
                6 if d > 1 => d - 1,
                6 => d + 2,
                0 if d < n => d + 1,
                0 => d - 2,
                _ => d,
            };
            dom |= 1 << day;
        }
        let plain_all = self.dow == 0x7f;
        let dow = if plain_all && self.dow_last == 0 && self.dow_nth == [0; 7] {
            valid
        } else {
            let mut mask = 0u64;
            for k in 0..7u32 {
                let d0 = 1 + (k + 7 - first) % 7;
                if self.dow & (1 << k) != 0 {
                    mask |= WEEKLY << d0;
                }
                let nth = self.dow_nth[k as usize];
                if nth != 0 {
                    for i in 1..=5u32 {
                        if nth & (1 << i) != 0 {
                            mask |= 1 << (d0 + 7 * (i - 1));
                        }
                    }
                }
                if self.dow_last & (1 << k) != 0 {
                    mask |= 1 << (d0 + 7 * ((n - d0) / 7));
                }
            }
            (mask as u32) & valid
        };
        if self.dom_star || self.dow_star {
            dom & dow
        } else {
            dom | dow
        }
    }

    /// Whether the date's year, month and day fields match.
    pub(crate) fn date_matches(&self, y: i64, m: u32, d: u32) -> bool {
        self.year_ok(y) && self.months & (1 << m) != 0 && self.day_mask(y, m) & (1 << d) != 0
    }

    /// The first matching date on or after `(y, m, d)`, looking at most `months` months ahead.
    pub(crate) fn first_date(
        &self,
        mut y: i64,
        mut m: u32,
        mut d: u32,
        months: u32,
    ) -> Option<(i64, u32, u32)> {
        for _ in 0..months {
            if y > LAST_YEAR {
                return None;
            }
            if !self.year_ok(y) {
                y = self.next_year(y + 1)?;
                m = 1;
                d = 1;
                continue;
            }
            if self.months & (1 << m) != 0 {
                let mask = self.day_mask(y, m) & !((1u32 << d) - 1);
                if mask != 0 {
                    return Some((y, m, mask.trailing_zeros()));
                }
            }
            m += 1;
            d = 1;
            if m > 12 {
                m = 1;
                y += 1;
            }
        }
        None
    }

    /// The first matching second of the day in `lo..hi` (seconds since local midnight).
    pub(crate) fn next_tod(&self, lo: u32, hi: u32) -> Option<u32> {
        if lo >= hi {
            return None;
        }
        let (mut h, mut mi, mut s) = (lo / 3600, lo / 60 % 60, lo % 60);
        loop {
            let hh = next_bit(u64::from(self.hours), h)?;
            if hh != h {
                (h, mi, s) = (hh, 0, 0);
            }
            match next_bit(self.minutes, mi) {
                None => {
                    (h, mi, s) = (h + 1, 0, 0);
                    continue;
                }
                Some(mm) if mm != mi => (mi, s) = (mm, 0),
                Some(_) => {}
            }
            match next_bit(self.seconds, s) {
                None => {
                    (mi, s) = (mi + 1, 0);
                    if mi == 60 {
                        (h, mi) = (h + 1, 0);
                    }
                }
                Some(ss) => {
                    let t = h * 3600 + mi * 60 + ss;
                    return (t < hi).then_some(t);
                }
            }
        }
    }

    /// Whether a local wall-clock date-time matches every field. (A fire time's
    /// local time always matches, except a fixed time moved to the end of a DST gap.)
    pub fn matches(&self, local: chrono::NaiveDateTime) -> bool {
        self.matches_local_seconds(local.and_utc().timestamp())
    }

    /// Whether a local wall-clock time (local seconds) matches every field.
    fn matches_local_seconds(&self, local: i64) -> bool {
        let days = local.div_euclid(86_400);
        let tod = local.rem_euclid(86_400) as u32;
        let (y, m, d) = civil_from_days(days);
        self.date_matches(y, m, d) && self.next_tod(tod, tod + 1).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, NaiveDate};

    #[test]
    fn civil_round_trips_against_chrono() {
        for days in (-800_000..3_000_000).step_by(997) {
            let (y, m, d) = civil_from_days(days);
            let date = NaiveDate::from_ymd_opt(y as i32, m, d).unwrap();
            let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
            assert_eq!((date - epoch).num_days(), days);
            assert_eq!(days_from_civil(y, m, d), days);
            assert_eq!(weekday(days), date.weekday().num_days_from_sunday());
        }
    }

    fn days(expr: &str, y: i64, m: u32) -> Vec<u32> {
        let mask = Cron::parse(expr).unwrap().day_mask(y, m);
        (1..=31).filter(|d| mask & (1 << d) != 0).collect()
    }

    #[test]
    fn day_fields_follow_debian() {
        // March 2026 starts on a Sunday.
        assert_eq!(days("0 0 * * 1", 2026, 3), vec![2, 9, 16, 23, 30]);
        assert_eq!(days("0 0 1 * 1", 2026, 3), vec![1, 2, 9, 16, 23, 30], "OR");
        assert_eq!(
            days("0 0 */10 * 1", 2026, 3),
            Vec::<u32>::new(),
            "AND: 1,11,21,31 are not Mondays"
        );
        assert_eq!(
            days("0 0 1,15 * */7", 2026, 3),
            vec![1, 15],
            "AND with Sunday"
        );
        assert_eq!(days("0 0 L * *", 2026, 2), vec![28]);
        assert_eq!(days("0 0 L * *", 2028, 2), vec![29]);
        assert_eq!(
            days("0 0 LW * *", 2026, 5),
            vec![29],
            "May 31 2026 is a Sunday"
        );
        assert_eq!(
            days("0 0 1W * *", 2026, 8),
            vec![3],
            "Aug 1 2026 is a Saturday"
        );
        assert_eq!(
            days("0 0 31W * *", 2026, 5),
            vec![29],
            "May 31 is a Sunday; stay in May"
        );
        assert_eq!(days("0 0 15W * *", 2026, 3), vec![16], "Mar 15 is a Sunday");
        assert_eq!(days("0 0 * * 5L", 2026, 3), vec![27]);
        assert_eq!(days("0 0 * * 1#2", 2026, 3), vec![9]);
        assert_eq!(days("0 0 * * 0#5", 2026, 3), vec![29]);
        assert_eq!(days("0 0 * * 1#5", 2026, 3), vec![30]);
        assert_eq!(days("0 0 * * 2#5", 2026, 3), vec![31]);
        assert_eq!(days("0 0 * * 3#5", 2026, 3), Vec::<u32>::new());
        assert_eq!(days("0 0 * * 7#1", 2026, 3), vec![1]);
    }

    #[test]
    fn next_tod_walks_fields_with_carries() {
        let c = Cron::parse("10,50 */20 9-10 * * *").unwrap();
        assert_eq!(c.next_tod(0, 86_400), Some(9 * 3600 + 10));
        assert_eq!(c.next_tod(9 * 3600 + 11, 86_400), Some(9 * 3600 + 50));
        assert_eq!(
            c.next_tod(9 * 3600 + 51, 86_400),
            Some(9 * 3600 + 20 * 60 + 10)
        );
        assert_eq!(
            c.next_tod(9 * 3600 + 40 * 60 + 51, 86_400),
            Some(10 * 3600 + 10)
        );
        assert_eq!(c.next_tod(10 * 3600 + 40 * 60 + 51, 86_400), None);
        assert_eq!(
            c.next_tod(0, 9 * 3600 + 10),
            None,
            "upper bound is exclusive"
        );
    }

    #[test]
    fn first_date_respects_years_and_horizon() {
        let c = Cron::parse("0 0 0 29 2 * 2030-2039").unwrap();
        assert_eq!(c.first_date(2026, 1, 1, 1000), Some((2032, 2, 29)));
        assert_eq!(c.first_date(2037, 1, 1, 1000), None);
        let c = Cron::parse("0 0 * 2 5#5").unwrap();
        assert_eq!(c.first_date(2026, 1, 1, 1000), Some((2036, 2, 29)));
    }
}
